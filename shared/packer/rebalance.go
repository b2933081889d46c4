package packer

import (
	"math"
	"sort"
)

// Rebalancing. Best-fit by free memory fills planned nodes one pod at a time, so
// nodes of one pool and zone end up full in different dimensions: some hold the
// CPU-heavy pods and run out of CPU with memory to spare, others the reverse
// (the preferences benchmark had nodes at 100% CPU / 88% memory next to 30% CPU /
// 100% memory). No pod fits in either's leftover room, so neither can shrink. The
// pass below swaps pods between such nodes — a CPU-heavy pod from a CPU-bound
// node for a memory-heavy one from a memory-bound node, or moves one pod alone —
// whenever that lowers the summed cost of the room the nodes need; downsize then
// shrinks the nodes that gave up room.
//
// Only pods whose placement nothing else depends on at node level move: no host
// ports and no topology but zone-level (spread, affinity or anti-affinity, owned
// or matched, hard or soft), and none a hard spread constraint counts only on some
// nodes. They move within their pool and zone, so every zone-level count stays as
// it was, and only onto a node whose current type their class (with the
// preference it was placed under) accepts.

const (
	// rebalanceTopK is how many of each node's most lopsided pods a swap considers.
	rebalanceTopK = 6
	// rebalanceTolerance is the CPU-minus-memory load difference below which a node
	// counts as balanced.
	rebalanceTolerance = 0.02
)

// rebalance runs the pass over every pool and zone with two or more planned nodes.
func (s *solver) rebalance() {
	groups := map[[2]int][]*node{}
	var keys [][2]int
	for _, n := range s.nodes {
		// A pool with minValues needs its nodes' options to span enough values; a
		// pod moving in can narrow them, so its nodes keep what they were given.
		if n.existing || len(n.pods) == 0 || len(n.pool.minVals) > 0 || n.inReservation() {
			continue
		}
		k := [2]int{n.pool.idx, n.z}
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], n)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		if ns := groups[k]; len(ns) > 1 {
			s.rebalanceGroup(ns)
		}
	}
}

// movable reports whether p may change nodes within its pool and zone.
func movable(p *podInfo) bool {
	if len(p.ports) > 0 {
		return false
	}
	for _, t := range p.own {
		if t.g.lv.kind != levelZone {
			return false
		}
	}
	for _, g := range p.matched {
		// An owner whose node selection or taints exclude some nodes counts the
		// pod on one node of a zone and not on another.
		if g.lv.kind != levelZone || g.kind == kindSpread && g.filteredOwners {
			return false
		}
	}
	return true
}

// load is the share of n's current type its pods need in their tightest
// dimension, times its price: what the node would cost shrunk to fit them, were
// types available in every size.
func load(n *node, used vec) float64 {
	c := &n.pool.cands[n.z][n.minIdx]
	f := 0.0
	for d := range used {
		if used[d] == 0 {
			continue
		}
		if c.avail[d] <= 0 {
			return math.Inf(1)
		}
		f = math.Max(f, float64(used[d])/float64(c.avail[d]))
	}
	return f * c.price
}

// tilt is n's CPU load minus its memory load: positive when CPU-bound.
func tilt(n *node) float64 {
	a := n.pool.cands[n.z][n.minIdx].avail
	if a[dimCPU] <= 0 || a[dimMemory] <= 0 {
		return 0
	}
	return float64(n.used[dimCPU])/float64(a[dimCPU]) - float64(n.used[dimMemory])/float64(a[dimMemory])
}

func (s *solver) rebalanceGroup(ns []*node) {
	var cpuBound, memBound []*node
	movables := 0
	for _, n := range ns {
		m := 0
		for _, p := range n.pods {
			if movable(p) {
				m++
			}
		}
		if m == 0 {
			continue
		}
		movables += m
		switch t := tilt(n); {
		case t > rebalanceTolerance:
			cpuBound = append(cpuBound, n)
		case t < -rebalanceTolerance:
			memBound = append(memBound, n)
		}
	}
	if len(cpuBound) == 0 || len(memBound) == 0 {
		return
	}
	sort.SliceStable(cpuBound, func(i, j int) bool { return tilt(cpuBound[i]) > tilt(cpuBound[j]) })
	sort.SliceStable(memBound, func(i, j int) bool { return tilt(memBound[i]) < tilt(memBound[j]) })
	touched := map[*node]bool{}
	// Every step lowers the group's cost; the budget only bounds the work.
	budget := 2*movables + 16
	for i, j := 0, 0; i < len(cpuBound) && j < len(memBound) && budget > 0; {
		a, b := cpuBound[i], memBound[j]
		for budget > 0 && s.swapOnce(a, b) {
			budget--
			touched[a], touched[b] = true, true
		}
		switch {
		case tilt(a) <= rebalanceTolerance:
			i++
		default:
			// a is still CPU-bound and b has nothing more to trade with it.
			j++
		}
	}
	// Only now is it known which nodes ended empty (a node emptied by one move may
	// take a pod back in the next): those leave their pool's count.
	for _, n := range ns {
		switch {
		case !touched[n]:
		case len(n.pods) == 0:
			n.pool.used = n.pool.used.sub(n.pool.cands[n.z][n.minIdx].cap)
			n.pool.nodes--
			s.zoneNew[n.z]--
		default:
			s.refreshCompat(n)
		}
	}
}

// lopsided returns up to rebalanceTopK movable pods of n, the most CPU-heavy first
// (cpuHeavy) or the most memory-heavy first, relative to n's current type.
func lopsided(n *node, cpuHeavy bool) []*podInfo {
	a := n.pool.cands[n.z][n.minIdx].avail
	score := func(p *podInfo) float64 {
		v := float64(p.req[dimCPU])/float64(a[dimCPU]) - float64(p.req[dimMemory])/float64(a[dimMemory])
		if !cpuHeavy {
			v = -v
		}
		return v
	}
	top := make([]*podInfo, 0, rebalanceTopK)
	scores := make([]float64, 0, rebalanceTopK)
	for _, p := range n.pods {
		if !movable(p) {
			continue
		}
		sc := score(p)
		if len(top) == rebalanceTopK && sc <= scores[len(scores)-1] {
			continue
		}
		i := sort.Search(len(scores), func(i int) bool { return scores[i] < sc })
		if len(top) < rebalanceTopK {
			top, scores = append(top, nil), append(scores, 0)
		}
		copy(top[i+1:], top[i:])
		copy(scores[i+1:], scores[i:])
		top[i], scores[i] = p, sc
	}
	return top
}

// swapOnce makes the best cost-lowering exchange between CPU-bound a and
// memory-bound b (a pod each way, or one pod alone), reporting whether it made one.
func (s *solver) swapOnce(a, b *node) bool {
	ps := append(lopsided(a, true), nil)
	qs := append(lopsided(b, false), nil)
	capA, capB := a.pool.cands[a.z][a.minIdx].avail, b.pool.cands[b.z][b.minIdx].avail
	before := load(a, a.used) + load(b, b.used)
	best, bestP, bestQ := -1e-9*before, (*podInfo)(nil), (*podInfo)(nil)
	for _, p := range ps {
		if p != nil && !s.currentCompatible(b, p.cls) {
			continue
		}
		for _, q := range qs {
			if p == nil && q == nil {
				continue
			}
			if q != nil && !s.currentCompatible(a, q.cls) {
				continue
			}
			ua, ub := a.used, b.used
			if p != nil {
				ua, ub = ua.sub(p.req), ub.add(p.req)
			}
			if q != nil {
				ua, ub = ua.add(q.req), ub.sub(q.req)
			}
			if !ua.fits(capA) || !ub.fits(capB) {
				continue
			}
			if d := load(a, ua) + load(b, ub) - before; d < best {
				best, bestP, bestQ = d, p, q
			}
		}
	}
	if bestP == nil && bestQ == nil {
		return false
	}
	if bestP != nil {
		s.move(bestP, a, b)
	}
	if bestQ != nil {
		s.move(bestQ, b, a)
	}
	return true
}

// move shifts p from one planned node to another of the same pool and zone. The
// slack index is not updated: placement is over when the pass runs.
func (s *solver) move(p *podInfo, from, to *node) {
	for i, q := range from.pods {
		if q == p {
			from.pods = append(from.pods[:i], from.pods[i+1:]...)
			break
		}
	}
	from.used = from.used.sub(p.req)
	to.used = to.used.add(p.req)
	to.pods = append(to.pods, p)
	// The destination takes p's constraints at once, so the next pod offered to
	// it is checked against them; the source's, which can only loosen, are
	// recomputed after the pass.
	to.narrow(p.cls)
	p.placedOn = to
	for _, g := range p.matched {
		if g.lv.kind == levelHost {
			continue
		}
		from.gc[g.slot]--
		if to.gc == nil {
			to.gc = make([]int32, s.topo.nodeSlots)
		}
		to.gc[g.slot]++
	}
}

// refreshCompat recomputes a planned node's compatible candidates and extra
// labels from the pods it now holds and its pinned label domains.
func (s *solver) refreshCompat(n *node) {
	for i := range n.compat {
		n.compat[i] = math.MaxUint64
	}
	n.extra = nil
	for _, p := range n.pods {
		n.narrow(p.cls)
		if len(p.ports) > 0 {
			n.narrowPorts(p.ports)
		}
	}
	for _, lv := range s.topo.labels {
		s.applyPin(lv, n)
	}
	n.pinOffering()
}
