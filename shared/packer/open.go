package packer

import (
	"cmp"
	"math"
	"slices"
)

// openSpan bounds how much dearer than the cheapest type holding its first pod a
// new node may open (the rest is left to downsize).
const openSpan = 64.0

// openIdx chooses the type a new node opens on: of the candidates that hold p, the
// one whose price buys the most of what the pending pods need (cpu, memory, pods
// and accelerators in the proportions they request them), starting from the
// cheapest. Opening on the cheapest type that holds p alone left nodes sized for
// their first pod, which later pods could not fill; downsize shrinks every node to
// the cheapest type that holds what it finally got.
func (s *solver) openIdx(pool *poolInfo, z, cheapest int, cls *podClass, p *podInfo, a *attempt) int {
	if p.tier < 2 {
		// A pod bound by hostname-level topology keeps its node to a few like it:
		// room opened beside it mostly stays empty.
		return cheapest
	}
	cs := pool.cands[z]
	if cs[cheapest].resv != nil {
		return cheapest // a reservation's type is its own; nothing buys more per dollar
	}
	ext := extMask(p)
	bound := s.pricePerUnit(&cs[cheapest], ext) * (1 - 1e-6)
	for _, v := range s.byValue(pool, z, cls.perPool[pool.idx].bits[z], ext) {
		if v.ppu >= bound {
			break // the rest buy no more per dollar than the cheapest
		}
		i, c := int(v.i), &cs[v.i]
		if i <= cheapest || c.resv != nil || c.price > openSpan*cs[cheapest].price || !p.req.fits(c.avail) ||
			!s.limitOK(pool, c.cap, true) || !s.roomy(pool, c.cap) || len(a.masks) > 0 && !s.candOK(pool, z, i, cls, a) ||
			len(p.ports) > 0 && portsClash(p.ports, c.dsPorts) || !s.minValuesWith(pool, z, i, nil, p, cls, p.req) {
			continue
		}
		return i
	}
	return cheapest
}

// valued is a candidate index with its pricePerUnit.
type valued struct {
	i   int32
	ppu float64
}

type valueKey struct {
	pool, z int
	bits    *uint64
	ext     uint8
}

// byValue lists the candidates of a pool and zone that a class allows, best
// pricePerUnit first (cheaper first among equals). The order depends only on the
// class's bits and which extended resources the pod requests, so it is computed
// once per solve for each: opening nodes used to rescan up to every candidate.
func (s *solver) byValue(pool *poolInfo, z int, bits []uint64, ext uint8) []valued {
	k := valueKey{pool.idx, z, &bits[0], ext}
	if v, ok := s.valueOrder[k]; ok {
		return v
	}
	cs := pool.cands[z]
	var out []valued
	for i := range cs {
		if bitSet(bits, i) {
			if u := s.pricePerUnit(&cs[i], ext); !math.IsInf(u, 1) {
				out = append(out, valued{int32(i), u})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b valued) int { return cmp.Compare(a.ppu, b.ppu) })
	if s.valueOrder == nil {
		s.valueOrder = map[valueKey][]valued{}
	}
	s.valueOrder[k] = out
	return out
}

// extMask has bit d-dimPods-1 set for each extended resource d that p requests.
func extMask(p *podInfo) uint8 {
	var m uint8
	for d := dimPods + 1; d < maxDims; d++ {
		if p.req[d] > 0 {
			m |= 1 << uint(d-dimPods-1)
		}
	}
	return m
}

// pricePerUnit is a candidate's price over how many "units" of the pending demand
// it holds, a unit being the demand vector scaled to one pod. Extended resources
// count only when ext (see extMask) says the pod requests them.
func (s *solver) pricePerUnit(c *cand, ext uint8) float64 {
	units := math.Inf(1)
	for d := range s.demand {
		if s.demand[d] <= 0 || (d > dimPods && ext&(1<<uint(d-dimPods-1)) == 0) {
			continue
		}
		units = math.Min(units, float64(c.avail[d])/s.demand[d])
	}
	if units <= 0 || math.IsInf(units, 1) {
		return math.Inf(1)
	}
	return c.price / units
}

// downsize moves every planned node to the cheapest candidate that is compatible
// with all its pods and holds them.
func (s *solver) downsize() {
	for _, n := range s.nodes {
		if n.existing || len(n.pods) == 0 {
			continue
		}
		cs := n.pool.cands[n.z]
		for i := 0; i < n.minIdx; i++ {
			// A cheaper candidate may be a larger type (spot against on-demand):
			// the pool's limits still have the last word.
			if bitSet(n.compat, i) && n.used.fits(cs[i].avail) && cs[i].price < cs[n.minIdx].price &&
				s.limitOK(n.pool, cs[i].cap.sub(cs[n.minIdx].cap), false) && s.minValuesOK(n.pool, n.z, i, n.compat, nil, n.used) {
				n.pool.used = n.pool.used.add(cs[i].cap.sub(cs[n.minIdx].cap))
				n.minIdx = i
				break
			}
		}
	}
}

// roomy reports whether a limited pool keeps ample room (four times this
// capacity in every limited resource) after opening a node of capacity c: room
// opened ahead of need would otherwise spend budget other pods may need.
func (s *solver) roomy(p *poolInfo, c vec) bool {
	for i := range c {
		if p.limited[i] && p.used[i]+5*c[i] > p.limit[i] {
			return false
		}
	}
	return true
}

// bestNew picks the pool (highest weight first), zone and cheapest candidate for
// a new node holding p, returning its price. With rec set it also records, for
// every pool, how far its best option got before it was turned down.
func (s *solver) bestNew(p *podInfo, cls *podClass, a *attempt, zok uint64, rec *rejections) (*poolInfo, int, int, float64) {
	if b := s.domainBlock(p, a, s.topo.host, -1); !b.ok() {
		if rec == nil {
			return nil, 0, 0, 0
		}
		zok = 0 // hostname-level topology rules out a fresh node in every zone
		rec.host = b
	}
	rec.start(len(s.pools))
	for _, pool := range s.pools {
		cp := cls.perPool[pool.idx]
		if !cp.ok {
			rec.reject(pool.idx, stageClass)
			continue
		}
		rec.reject(pool.idx, stageRoom)
		bestZ, bestIdx, bestPrice := -1, -1, math.Inf(1)
		for z := range s.zones {
			inZone := zok&(1<<uint(z)) != 0
			if !cp.any[z] || rec == nil && (!inZone || !p.req.fits(pool.maxAvail[z])) {
				continue
			}
			cs := pool.cands[z]
			// Under a limit, an attempt that records nothing looks only at the
			// candidates whose capacity the limit still allows (see capWindow).
			if lo, hi, ids := s.capWindow(pool, z, p.req, vec{}); rec == nil && ids != nil && hi-lo < len(cs) {
				first := -1
				for _, id := range ids[lo:hi] {
					i := int(id)
					if (first < 0 || i < first) && bitSet(cp.bits[z], i) && p.req.fits(cs[i].avail) && slotFree(&cs[i]) && s.limitOK(pool, cs[i].cap, true) &&
						s.minValuesWith(pool, z, i, nil, p, cls, p.req) &&
						(len(a.masks) == 0 || s.candOK(pool, z, i, cls, a)) && (len(p.ports) == 0 || !portsClash(p.ports, cs[i].dsPorts)) {
						first = i
					}
				}
				if first >= 0 && (cs[first].price < bestPrice || (cs[first].price == bestPrice && s.zoneNew[z] < s.zoneNew[bestZ])) {
					bestZ, bestIdx, bestPrice = z, first, cs[first].price
				}
				continue
			}
			var i int
			if rec != nil && s.recMemo != nil && len(a.masks) == 0 && len(p.ports) == 0 && len(pool.minValues) == 0 {
				i = s.walkMemo(pool, z, p, cls, a, inZone, rec)
			} else {
				i = s.walkZone(pool, z, p, cls, a, inZone, rec)
			}
			if i >= 0 && (cs[i].price < bestPrice || (cs[i].price == bestPrice && s.zoneNew[z] < s.zoneNew[bestZ])) {
				bestZ, bestIdx, bestPrice = z, i, cs[i].price
			}
		}
		if bestZ >= 0 {
			return pool, bestZ, bestIdx, bestPrice
		}
	}
	return nil, 0, 0, 0
}

// walkZone walks pool's candidates in zone z cheapest first, recording in rec
// how far each got, and returns the first that takes p (-1 for none).
func (s *solver) walkZone(pool *poolInfo, z int, p *podInfo, cls *podClass, a *attempt, inZone bool, rec *rejections) int {
	cp := cls.perPool[pool.idx]
	cs := pool.cands[z]
	for i := range cs {
		if !bitSet(cp.bits[z], i) {
			continue
		}
		if !p.req.fits(cs[i].avail) {
			rec.tooSmall(pool.idx, cs[i].avail)
			continue
		}
		if !slotFree(&cs[i]) {
			rec.reject(pool.idx, stageReservations)
			rec.fullReservation(pool.idx, &cs[i])
			continue
		}
		if !s.limitOK(pool, cs[i].cap, true) {
			rec.reject(pool.idx, stageLimits)
			continue
		}
		if !s.minValuesWith(pool, z, i, nil, p, cls, p.req) {
			rec.reject(pool.idx, stageMinValues)
			continue
		}
		if !inZone {
			rec.reject(pool.idx, stageTopology)
			rec.zoneOut(pool.idx, z)
			return -1 // walked only to record
		}
		if len(a.masks) > 0 {
			if b := s.candBlock(pool, z, i, cls, a); !b.ok() {
				rec.reject(pool.idx, stageTopology)
				rec.blocked(pool.idx, b)
				continue
			}
		}
		if len(p.ports) > 0 && portsClash(p.ports, cs[i].dsPorts) {
			// A DaemonSet on the type binds one of the pod's host ports.
			rec.reject(pool.idx, stageTopology)
			rec.blocked(pool.idx, block{kind: blockPorts})
			continue
		}
		return i
	}
	return -1
}

// recKey is what a recording walk of a zone depends on for a pod without
// label masks or host ports in a pool without minValues.
type recKey struct {
	pool, z int
	cls     *podClass
	req     vec
	inZone  bool
}

// walkMemo is walkZone for the recording round (see Solve), whose state does
// not change: a walk's record is kept per recKey and merged into rec again
// for the next pod of the same shape. Under a binding limit every candidate is
// walked for every pod left pending; most are of a few shapes.
func (s *solver) walkMemo(pool *poolInfo, z int, p *podInfo, cls *podClass, a *attempt, inZone bool, rec *rejections) int {
	k := recKey{pool.idx, z, cls, p.req, inZone}
	got, ok := s.recMemo[k]
	if !ok {
		scratch := &rejections{zones: rec.zones, host: rec.host}
		scratch.start(len(s.pools))
		if i := s.walkZone(pool, z, p, cls, a, inZone, scratch); i >= 0 {
			rec.add(pool.idx, scratch.pools[pool.idx])
			return i // it takes p: not the recording round's case, not kept
		}
		got = scratch.pools[pool.idx]
		// What turned p away is p's own topology, not the key's: every pod
		// of the shape notes its own below.
		got.why = block{}
		s.recMemo[k] = got
	}
	rec.add(pool.idx, got)
	if got.stage == stageTopology {
		rec.zoneOut(pool.idx, z) // the only topology a walk of this shape meets
	}
	return -1
}

func (s *solver) limitOK(p *poolInfo, delta vec, newNode bool) bool {
	if newNode && p.maxNodes >= 0 && p.nodes+1 > p.maxNodes {
		return false
	}
	for i := range delta {
		if p.limited[i] && p.used[i]+p.reserved[i]+delta[i] > p.limit[i] {
			return false
		}
	}
	return true
}

// hasLimits reports whether the pool limits a resource (the node count aside).
func (p *poolInfo) hasLimits() bool {
	for _, l := range p.limited {
		if l {
			return true
		}
	}
	return false
}

// open creates a planned node of pool in zone z on candidate idx.
func (s *solver) open(pool *poolInfo, z, idx int, cls *podClass) *node {
	n := s.newNodeBase("")
	n.pool, n.z, n.minIdx = pool, z, idx
	n.compat = allCompat(len(cls.perPool[pool.idx].bits[z]))
	if r := pool.cands[z][idx].resv; r != nil {
		r.left--
	}
	n.pinOffering()
	pool.used = pool.used.add(pool.cands[z][idx].cap)
	pool.nodes++
	s.noteUsed(pool)
	s.zoneNew[z]++
	s.index(n, [2]int{pool.idx, z})
	return n
}
