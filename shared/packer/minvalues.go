package packer

import (
	"fmt"
	"strings"
)

// minValues, as Karpenter's Strict policy (its default) has it: the instance-type
// options of every NodeClaim of a pool, as launched (the cheapest MaxOptions of
// them that hold its pods, within the pool's limits), span at least minValues
// distinct values of the requirement's key. A pod joins a node, or opens one, only
// where that still holds; a pod no node of the pool can hold that way is not
// placed in it, and unschedulable when no other place takes it.
//
// Under limits, a node of such a pool lists as options only the types no larger
// than its own in the limited resources: a fallback then cannot break the limits,
// and what placement checked is what the node gets (the reservations other
// limited pools make at the end could otherwise cut options below minValues
// after pods were placed relying on them).
//
// Joiner launches each node in one zone with one capacity type, so minValues on
// topology.kubernetes.io/zone, karpenter.sh/capacity-type or
// topology.kubernetes.io/region cannot be met by any node: those are not enforced
// (a deliberate difference; joiner validate and --explain say so).

// minValuesReq is a pool's minValues requirement on a key its types decide.
type minValuesReq struct {
	key  string
	min  int
	vals [][]int32 // per zone, per candidate: the value's index, -1 when absent
	n    int       // distinct values
}

// buildMinValues prepares the pool's enforced minValues requirements.
func (s *solver) buildMinValues(p *poolInfo) {
	for _, r := range p.minVals {
		if offeringKey(r.Key) || r.MinValues == nil {
			continue
		}
		m := &minValuesReq{key: r.Key, min: *r.MinValues, vals: make([][]int32, len(p.cands))}
		index := map[string]int32{}
		for z, cs := range p.cands {
			m.vals[z] = make([]int32, len(cs))
			for i := range cs {
				m.vals[z][i] = -1
				if v, ok := s.candValue(r.Key, p, z, &cs[i]); ok {
					if _, seen := index[v]; !seen {
						index[v] = int32(len(index))
					}
					m.vals[z][i] = index[v]
				}
			}
		}
		m.n = len(index)
		p.minValues = append(p.minValues, m)
	}
}

// minValuesOK reports whether a node of pool in zone z on candidate from, whose
// pods need need and whose types are limited to compat (nil: any) and bits,
// would keep enough options: the cheapest MaxOptions candidates at or after from
// with its capacity type that hold need and stay within the pool's limits.
func (s *solver) minValuesOK(pool *poolInfo, z, from int, compat, bits []uint64, need vec) bool {
	if len(pool.minValues) == 0 {
		return true
	}
	_, ok := s.minValuesSpan(pool, z, from, compat, bits, need)
	return ok
}

// minValuesWith is minValuesOK for p joining node n (nil: a new node of pool in
// zone z) on candidate from: the types p's class allows, narrowed as its
// arrival would narrow them (label levels pinned to candidate from's values,
// types where a DaemonSet binds p's host ports left out).
func (s *solver) minValuesWith(pool *poolInfo, z, from int, n *node, p *podInfo, cls *podClass, need vec) bool {
	if len(pool.minValues) == 0 {
		return true
	}
	bits := cls.perPool[pool.idx].bits[z]
	mask := append(s.maskBuf[:0], bits...)
	if n != nil {
		for i := range mask {
			mask[i] &= n.compat[i]
		}
	}
	cs := pool.cands[z]
	for _, lv := range p.levels {
		if n != nil && n.ldom[lv.idx] != domUnpinned {
			continue // already narrowed
		}
		vs := lv.cand[pool.idx][z]
		if vs[from] < 0 && len(lv.chosen[pool.idx]) > 0 {
			continue // a chosen label narrows no types
		}
		for i, v := range vs {
			if v != vs[from] {
				mask[i/64] &^= 1 << uint(i%64)
			}
		}
	}
	if len(p.ports) > 0 {
		for i := range cs {
			if portsClash(p.ports, cs[i].dsPorts) {
				mask[i/64] &^= 1 << uint(i%64)
			}
		}
	}
	s.maskBuf = mask
	_, ok := s.minValuesSpan(pool, z, from, mask, nil, need)
	return ok
}

// minValuesSpan counts, per requirement, the distinct values those options span,
// and reports whether every requirement is met.
func (s *solver) minValuesSpan(pool *poolInfo, z, from int, compat, bits []uint64, need vec) ([]int, bool) {
	cs := pool.cands[z]
	ct := cs[from].ct
	counts := make([]int, len(pool.minValues))
	seen := make([]bitset, len(pool.minValues))
	for r, m := range pool.minValues {
		seen[r] = newBitset(m.n)
	}
	met := func() bool {
		for r, m := range pool.minValues {
			if counts[r] < m.min {
				return false
			}
		}
		return true
	}
	kept := 0
	for i := from; i < len(cs) && kept < s.opts.MaxOptions; i++ {
		if cs[i].ct != ct || cs[i].resv != cs[from].resv || compat != nil && !bitSet(compat, i) || bits != nil && !bitSet(bits, i) || !need.fits(cs[i].avail) ||
			!pool.noLarger(&cs[i], &cs[from]) {
			continue
		}
		kept++
		for r, m := range pool.minValues {
			if v := m.vals[z][i]; v >= 0 && !seen[r].has(int(v)) {
				seen[r].set(int(v))
				counts[r]++
			}
		}
		if met() {
			return counts, true
		}
	}
	return counts, met()
}

// minValuesNote says which minValues the options of a node miss.
func (s *solver) minValuesNote(pool *poolInfo, counts []int) string {
	var notes []string
	for r, m := range pool.minValues {
		if counts[r] < m.min {
			notes = append(notes, fmt.Sprintf("minValues %d for %s not met: the types that hold its pods span %d", m.min, m.key, counts[r]))
		}
	}
	return strings.Join(notes, "; ")
}

// minValuesIgnored lists the pool's minValues requirements Joiner does not
// enforce (see above), for --explain.
func (p *poolInfo) minValuesIgnored() string {
	var keys []string
	for _, r := range p.minVals {
		if offeringKey(r.Key) {
			keys = append(keys, r.Key)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	return "; minValues on " + strings.Join(keys, ", ") + " not enforced: Joiner launches each node in one zone with one capacity type"
}

// minValuesText states the pool's enforced minValues.
func (p *poolInfo) minValuesText() string {
	var parts []string
	for _, m := range p.minValues {
		parts = append(parts, fmt.Sprintf("%d distinct %s values among its options (minValues)", m.min, m.key))
	}
	return strings.Join(parts, " and ")
}

// noLarger reports whether candidate c is no larger than ref in every resource
// the pool limits.
func (p *poolInfo) noLarger(c, ref *cand) bool {
	for d, l := range p.limited {
		if l && c.cap[d] > ref.cap[d] {
			return false
		}
	}
	return true
}
