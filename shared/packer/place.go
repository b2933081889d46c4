package packer

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/google/btree"
)

// attempt is one level of relaxation. pref is the preferred node-affinity term
// honoured as required (-1: none); soft makes ScheduleAnyway spread, preferred pod
// (anti-)affinity and PreferNoSchedule taints bind; foreign makes the spread
// constraints other pods own bind this pod too where they would be judged (which
// keeps the final state within maxSkew for pods that do not carry the constraint).
type attempt struct {
	pref      int
	soft      bool
	foreign   bool
	canLaunch bool // set by tryPlace
}

func (s *solver) place(p *podInfo) bool {
	foreignMatters := false
	for _, g := range p.matched {
		if g.kind == kindSpread && g.hardOwned && !p.ownsHard(g) {
			foreignMatters = true
			break
		}
	}
	var attempts []attempt
	for i := range p.prefTerms {
		attempts = append(attempts, attempt{pref: i, soft: true, foreign: foreignMatters})
	}
	if p.prefs || s.preferNoSchedule {
		attempts = append(attempts, attempt{pref: -1, soft: true, foreign: foreignMatters})
	}
	attempts = append(attempts, attempt{pref: -1, foreign: foreignMatters})
	if foreignMatters {
		attempts = append(attempts, attempt{pref: -1})
	}
	for _, a := range attempts {
		if s.tryPlace(p, a) {
			return true
		}
	}
	return false
}

// podClass returns (caching on the pod) the class for an attempt.
func (s *solver) podClass(p *podInfo, a attempt) *podClass {
	k := classSlot{pref: a.pref, strict: a.soft}
	for _, c := range p.classes {
		if c.slot == k {
			return c.cls
		}
	}
	var term *corev1.NodeSelectorTerm
	if a.pref >= 0 {
		term = &p.prefTerms[a.pref]
	}
	c := s.classFor(p.pod, term, a.soft)
	p.classes = append(p.classes, slotClass{k, c})
	return c
}

type classSlot struct {
	pref   int
	strict bool
}

type slotClass struct {
	slot classSlot
	cls  *podClass
}

func (p *podInfo) ownsHard(g *topoGroup) bool {
	for _, t := range p.own {
		if t.g == g && !t.soft {
			return true
		}
	}
	return false
}

func (s *solver) tryPlace(p *podInfo, a attempt) bool {
	cls := s.podClass(p, a)
	hard := s.podClass(p, attempt{pref: -1})
	zok := s.zoneMask(p, cls, hard, a)
	zoneBound := s.zoneBound(p, a)
	// A node the pools could still launch is an empty hostname domain: then the
	// smallest count any hostname spread compares against is zero.
	a.canLaunch = s.canLaunch(hard)

	// Hostname affinity to pods already placed: only their nodes qualify.
	for _, t := range p.own {
		if t.g.kind == kindAffinity && t.g.hostname && (!t.soft || a.soft) && t.g.total > 0 {
			return s.placeAmong(p, cls, a, t.g.nodes, zok, zoneBound)
		}
	}

	// 1. Room on a node that exists or is already planned, at no extra cost.
	var best *node
	budget := fitWindow
	for _, key := range s.treeKeys {
		t := s.trees[key]
		z := key[1]
		if z < 0 && zoneBound {
			continue
		}
		if z >= 0 && zok&(1<<uint(z)) == 0 {
			continue
		}
		if key[0] >= 0 && !cls.perPool[key[0]].ok {
			continue
		}
		if n := s.walkFit(t, p, cls, a, &budget); n != nil && (best == nil || slackLess(n.ref, best.ref)) {
			best = n
		}
	}
	if best == nil {
		best = s.fitExisting(p, cls, a, zok, zoneBound)
	}
	if best != nil {
		s.assign(p, best, best.minIdx, cls)
		return true
	}

	// 2. Grow a planned node, or 3. open a new one: whichever costs less.
	growNode, growIdx, growCost := s.bestGrowth(p, cls, a, zok)
	pool, z, idx, newCost := s.bestNew(p, cls, a, zok)
	switch {
	case growNode != nil && (pool == nil || growCost <= newCost*(1+growTolerance)+priceEpsilon):
		s.assign(p, growNode, growIdx, cls)
	case pool != nil:
		n := s.open(pool, z, idx, cls)
		s.assign(p, n, idx, cls)
	default:
		return false
	}
	return true
}

// placeAmong places p on the best of the given nodes (fit first, then growth).
func (s *solver) placeAmong(p *podInfo, cls *podClass, a attempt, nodes []*node, zok uint64, zoneBound bool) bool {
	var best *node
	var bestIdx int
	bestCost := math.Inf(1)
	for _, n := range nodes {
		if n.tree == nil || (n.z < 0 && zoneBound) || (n.z >= 0 && zok&(1<<uint(n.z)) == 0) {
			continue
		}
		if !s.nodeAccepts(n, p, cls, a) {
			continue
		}
		if p.req.fits(n.slack()) && s.currentCompatible(n, cls) {
			if bestCost > 0 || slackLess(n.ref, best.ref) {
				best, bestIdx, bestCost = n, n.minIdx, 0
			}
			continue
		}
		if n.existing {
			continue
		}
		if i := s.growIdx(n, p, cls); i >= 0 {
			c := n.pool.cands[n.z][i].price - n.pool.cands[n.z][n.minIdx].price
			if c < bestCost {
				best, bestIdx, bestCost = n, i, c
			}
		}
	}
	if best == nil {
		return false
	}
	s.assign(p, best, bestIdx, cls)
	return true
}

// currentCompatible reports whether the node's current instance type suits the class.
func (s *solver) currentCompatible(n *node, cls *podClass) bool {
	if n.existing {
		return s.existingCompatible(n, cls)
	}
	cp := cls.perPool[n.pool.idx]
	return cp.ok && bitSet(cp.bits[n.z], n.minIdx) && extraAgrees(n.extra, cp.extra)
}

func extraAgrees(a, b map[string]string) bool {
	for k, v := range b {
		if w, ok := a[k]; ok && w != v {
			return false
		}
	}
	return true
}

// existingCompatible matches a class against an existing node, cached per node.
func (s *solver) existingCompatible(n *node, cls *podClass) bool {
	for len(n.classCache) <= cls.id {
		n.classCache = append(n.classCache, 0)
	}
	if c := n.classCache[cls.id]; c != 0 {
		return c > 0
	}
	ok := tolerated(cls.tolerations, n.taints, cls.strict)
	if ok && !cls.generic {
		s.probe.Labels = n.labels
		m, err := cls.aff.Match(s.probe)
		ok = err == nil && m
	}
	if ok {
		n.classCache[cls.id] = 1
	} else {
		n.classCache[cls.id] = -1
	}
	return ok
}

// fitExisting looks at every existing and in-flight node for room, past the window:
// the index is ordered by free memory, so CPU-bound pods can fill more nodes than
// the window holds while their memory stays free, and a pod that gave up on them
// would buy capacity that is already paid for (a burst of 5,000 small pods over
// 64 full nodes and 80 empty ones did). Only pods the window failed pay for it.
func (s *solver) fitExisting(p *podInfo, cls *podClass, a attempt, zok uint64, zoneBound bool) *node {
	var best *node
	for _, key := range s.treeKeys {
		z := key[1]
		if key[0] >= 0 || (z < 0 && zoneBound) || (z >= 0 && zok&(1<<uint(z)) == 0) {
			continue
		}
		unlimited := math.MaxInt
		if n := s.walkFit(s.trees[key], p, cls, a, &unlimited); n != nil && (best == nil || slackLess(n.ref, best.ref)) {
			best = n
		}
	}
	return best
}

// walkFit returns the node with the least free memory that takes p, looking at
// no more nodes than the shared budget allows.
func (s *solver) walkFit(t *btree.BTreeG[slackRef], p *podInfo, cls *podClass, a attempt, budget *int) *node {
	var found *node
	if *budget < fitWindow/4 {
		*budget = fitWindow / 4 // every tree gets a look
	}
	t.AscendGreaterOrEqual(slackRef{mem: p.req[dimMemory], cpu: math.MinInt64}, func(r slackRef) bool {
		*budget--
		n := r.n
		if p.req.fits(n.slack()) && s.currentCompatible(n, cls) && s.nodeAccepts(n, p, cls, a) {
			found = n
			return false
		}
		return *budget > 0
	})
	return found
}

// bestGrowth finds the planned node that takes p for the smallest price increase.
func (s *solver) bestGrowth(p *podInfo, cls *podClass, a attempt, zok uint64) (*node, int, float64) {
	var best *node
	bestIdx, bestCost := -1, math.Inf(1)
	for _, key := range s.treeKeys {
		t := s.trees[key]
		if key[0] < 0 || !cls.perPool[key[0]].ok || zok&(1<<uint(key[1])) == 0 {
			continue
		}
		seen := 0
		t.Descend(func(r slackRef) bool {
			seen++
			n := r.n
			if s.nodeAccepts(n, p, cls, a) {
				if i := s.growIdx(n, p, cls); i >= 0 {
					c := n.pool.cands[n.z][i].price - n.pool.cands[n.z][n.minIdx].price
					if c < bestCost || (c == bestCost && best != nil && n.id < best.id) {
						best, bestIdx, bestCost = n, i, c
					}
				}
			}
			return seen < growWindow
		})
	}
	return best, bestIdx, bestCost
}

// growIdx is the cheapest candidate at or after the node's current one that is
// compatible with everything on it and p, holds them all, and stays within the
// pool's limits; -1 when there is none.
func (s *solver) growIdx(n *node, p *podInfo, cls *podClass) int {
	cp := cls.perPool[n.pool.idx]
	if !cp.ok || !extraAgrees(n.extra, cp.extra) {
		return -1
	}
	need := n.used.add(p.req)
	if !need.fits(n.pool.maxAvail[n.z]) {
		return -1
	}
	cs := n.pool.cands[n.z]
	bits := cp.bits[n.z]
	for i := n.minIdx; i < len(cs); i++ {
		if !bitSet(n.compat, i) || !bitSet(bits, i) || !need.fits(cs[i].avail) {
			continue
		}
		if s.limitOK(n.pool, cs[i].cap.sub(cs[n.minIdx].cap), false) {
			return i
		}
	}
	return -1
}

func (s *solver) limitOK(p *poolInfo, delta vec, newNode bool) bool {
	if newNode && p.maxNodes >= 0 && p.nodes+1 > p.maxNodes {
		return false
	}
	for i := range delta {
		if p.limited[i] && p.used[i]+delta[i] > p.limit[i] {
			return false
		}
	}
	return true
}

// bestNew picks the pool (highest weight first), zone and cheapest candidate for
// a new node holding p.
func (s *solver) bestNew(p *podInfo, cls *podClass, a attempt, zok uint64) (*poolInfo, int, int, float64) {
	if !s.freshAccepts(p, a) {
		return nil, 0, 0, 0
	}
	for _, pool := range s.pools {
		cp := cls.perPool[pool.idx]
		if !cp.ok {
			continue
		}
		bestZ, bestIdx, bestPrice := -1, -1, math.Inf(1)
		for z := range s.zones {
			if zok&(1<<uint(z)) == 0 || !cp.any[z] || !p.req.fits(pool.maxAvail[z]) {
				continue
			}
			cs := pool.cands[z]
			for i := range cs {
				if !bitSet(cp.bits[z], i) || !p.req.fits(cs[i].avail) || !s.limitOK(pool, cs[i].cap, true) {
					continue
				}
				if cs[i].price < bestPrice || (cs[i].price == bestPrice && s.zoneNew[z] < s.zoneNew[bestZ]) {
					bestZ, bestIdx, bestPrice = z, i, cs[i].price
				}
				break
			}
		}
		if bestZ >= 0 {
			return pool, bestZ, s.openIdx(pool, bestZ, bestIdx, cp.bits[bestZ], p), bestPrice
		}
	}
	return nil, 0, 0, 0
}

// open creates a planned node of pool in zone z on candidate idx.
func (s *solver) open(pool *poolInfo, z, idx int, cls *podClass) *node {
	n := s.newNodeBase("")
	n.pool, n.z, n.minIdx = pool, z, idx
	n.compat = make([]uint64, len(cls.perPool[pool.idx].bits[z]))
	for i := range n.compat {
		n.compat[i] = math.MaxUint64
	}
	pool.used = pool.used.add(pool.cands[z][idx].cap)
	pool.nodes++
	s.zoneNew[z]++
	s.index(n, [2]int{pool.idx, z})
	return n
}

// assign puts p on n, moving a planned node to candidate idx.
func (s *solver) assign(p *podInfo, n *node, idx int, cls *podClass) {
	if n.tree != nil {
		n.tree.Delete(n.ref)
	}
	if !n.existing {
		cs := n.pool.cands[n.z]
		n.pool.used = n.pool.used.add(cs[idx].cap.sub(cs[n.minIdx].cap))
		n.minIdx = idx
		n.narrow(cls)
	}
	n.used = n.used.add(p.req)
	n.pods = append(n.pods, p)
	p.placedOn, p.cls = n, cls
	for _, pk := range p.ports {
		if n.ports == nil {
			n.ports = map[portKey]bool{}
		}
		n.ports[pk] = true
	}
	s.count(n, p.matched)
	for _, t := range p.own {
		if (t.g.kind == kindAntiAffinity || t.g.kind == kindSpread) && !t.soft {
			s.own(n, t.g)
		}
	}
	if n.tree != nil {
		sl := n.slack()
		n.ref = slackRef{mem: sl[dimMemory], cpu: sl[dimCPU], id: n.id, n: n}
		n.tree.ReplaceOrInsert(n.ref)
	}
}

// narrow restricts a planned node's candidates and labels to what a pod of cls
// placed on it needs.
func (n *node) narrow(cls *podClass) {
	cp := cls.perPool[n.pool.idx]
	for i := range n.compat {
		n.compat[i] &= cp.bits[n.z][i]
	}
	for k, v := range cp.extra {
		if n.extra == nil {
			n.extra = map[string]string{}
		}
		n.extra[k] = v
	}
}

// nodeAccepts checks host ports and hostname-level topology for p on n.
func (s *solver) nodeAccepts(n *node, p *podInfo, cls *podClass, a attempt) bool {
	for _, pk := range p.ports {
		if n.ports[pk] {
			return false
		}
	}
	return s.hostOK(p, a, n.hc, n.ho)
}

// freshAccepts checks hostname-level topology for p on a node with no pods.
func (s *solver) freshAccepts(p *podInfo, a attempt) bool {
	return s.hostOK(p, a, nil, nil)
}

func (s *solver) hostOK(p *podInfo, a attempt, hc, ho []int32) bool {
	get := func(c []int32, i int) int32 {
		if c == nil {
			return 0
		}
		return c[i]
	}
	for _, t := range p.own {
		g := t.g
		if !g.hostname || (t.soft && !a.soft) {
			continue
		}
		c := get(hc, g.slot)
		switch g.kind {
		case kindSpread:
			if c+self(t.selfHits)-s.minHost(g, a) > g.maxSkew {
				return false
			}
		case kindAffinity:
			if c == 0 && !(g.total == 0 && t.selfHits) {
				return false
			}
		case kindAntiAffinity:
			if c > 0 {
				return false
			}
		}
	}
	for _, g := range p.matched {
		if !g.hostname {
			continue
		}
		if g.kind == kindAntiAffinity && get(ho, g.ownerSlot) > 0 {
			return false
		}
		// A pod that only matches another pod's spread selector may not push a node
		// that hosts such an owner past the skew; elsewhere it is free, because
		// Kubernetes checks the skew only where an owner lands.
		if a.foreign && g.kind == kindSpread && g.hardOwned && !p.ownsHard(g) && get(ho, g.ownerSlot) > 0 {
			if get(hc, g.slot)+1-s.minHost(g, a) > g.maxSkew {
				return false
			}
		}
	}
	return true
}

func minOver(counts []int32, mask uint64) int32 {
	min := int32(-1)
	for z, c := range counts {
		if mask&(1<<uint(z)) != 0 && (min < 0 || c < min) {
			min = c
		}
	}
	if min < 0 {
		return 0
	}
	return min
}

func self(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// zoneBound reports whether p has zone-level constraints, which nodes without a
// known zone cannot be checked against.
func (s *solver) zoneBound(p *podInfo, a attempt) bool {
	for _, t := range p.own {
		if !t.g.hostname && (!t.soft || a.soft) {
			return true
		}
	}
	for _, g := range p.matched {
		if !g.hostname && (g.kind == kindAntiAffinity || (a.foreign && g.kind == kindSpread && g.hardOwned)) {
			return true
		}
	}
	return false
}

// zoneMask returns the zones whose zone-level topology admits p. Spread domains
// and counts follow the pod's required node affinity only (Kubernetes' default
// nodeAffinityPolicy Honor), never its preferences.
func (s *solver) zoneMask(p *podInfo, cls, hard *podClass, a attempt) uint64 {
	domains := hard.domainMask | s.existingZoneMask
	var mask uint64
	for z := range s.zones {
		if s.zoneOK(p, a, z, domains, hard) {
			mask |= 1 << uint(z)
		}
	}
	return mask
}

func (s *solver) minHost(g *topoGroup, a attempt) int32 {
	if a.canLaunch {
		return 0
	}
	return g.minHost()
}

// canLaunch reports whether some pool could still launch a node for the class.
func (s *solver) canLaunch(cls *podClass) bool {
	for _, pool := range s.pools {
		if cls.perPool[pool.idx].ok && (pool.maxNodes < 0 || pool.nodes < pool.maxNodes) {
			return true
		}
	}
	return false
}

// zoneCounts returns a zone group's matching pods per zone, counting only nodes the
// class's node affinity selects (all nodes for a pod without one).
func (s *solver) zoneCounts(g *topoGroup, hard *podClass) []int32 {
	if hard.generic {
		return g.zoneCounts
	}
	counts := make([]int32, len(s.zones))
	for _, n := range s.nodes {
		if n.z < 0 || n.zc == nil || n.zc[g.zslot] == 0 || !s.eligible(n, hard) {
			continue
		}
		counts[n.z] += n.zc[g.zslot]
	}
	return counts
}

// eligible reports whether a node's labels satisfy the class's required node
// affinity (taints aside).
func (s *solver) eligible(n *node, cls *podClass) bool {
	if cls.generic {
		return true
	}
	l := n.labels
	if !n.existing {
		l = n.pool.cands[n.z][n.minIdx].fullLabels()
		if len(n.extra) > 0 {
			return s.matchLabels(cls, l, n.extra)
		}
	}
	return s.matchLabels(cls, l, nil)
}

func (s *solver) existingZones() uint64 {
	var m uint64
	for _, n := range s.nodes {
		if n.existing && n.z >= 0 {
			m |= 1 << uint(n.z)
		}
	}
	return m
}

func (s *solver) zoneOK(p *podInfo, a attempt, z int, domains uint64, hard *podClass) bool {
	for _, t := range p.own {
		g := t.g
		if g.hostname || (t.soft && !a.soft) {
			continue
		}
		c := g.zoneCounts[z]
		switch g.kind {
		case kindSpread:
			if domains&(1<<uint(z)) == 0 {
				return false
			}
			counts := s.zoneCounts(g, hard)
			if counts[z]+self(t.selfHits)-minOver(counts, domains) > g.maxSkew {
				return false
			}
		case kindAffinity:
			if c == 0 && !(g.total == 0 && t.selfHits) {
				return false
			}
		case kindAntiAffinity:
			if c > 0 {
				return false
			}
		}
	}
	for _, g := range p.matched {
		if g.hostname {
			continue
		}
		if g.kind == kindAntiAffinity && g.zoneOwners[z] > 0 {
			return false
		}
		if a.foreign && g.kind == kindSpread && g.hardOwned && !p.ownsHard(g) && g.zoneOwners[z] > 0 {
			if g.zoneCounts[z]+1-g.minZone(domains) > g.maxSkew {
				return false
			}
		}
	}
	return true
}

// openSpan bounds how much dearer than the cheapest type holding its first pod a
// new node may open (the rest is left to downsize).
const openSpan = 64.0

// openIdx chooses the type a new node opens on: of the candidates that hold p, the
// one whose price buys the most of what the pending pods need (cpu, memory, pods
// and accelerators in the proportions they request them), starting from the
// cheapest. Opening on the cheapest type that holds p alone left nodes sized for
// their first pod, which later pods could not fill; downsize shrinks every node to
// the cheapest type that holds what it finally got.
func (s *solver) openIdx(pool *poolInfo, z, cheapest int, bits []uint64, p *podInfo) int {
	if p.tier < 2 {
		// A pod bound by hostname-level topology keeps its node to a few like it:
		// room opened beside it mostly stays empty.
		return cheapest
	}
	cs := pool.cands[z]
	ext := extMask(p)
	bound := s.pricePerUnit(&cs[cheapest], ext) * (1 - 1e-6)
	for _, v := range s.byValue(pool, z, bits, ext) {
		if v.ppu >= bound {
			break // the rest buy no more per dollar than the cheapest
		}
		i, c := int(v.i), &cs[v.i]
		if i <= cheapest || c.price > openSpan*cs[cheapest].price || !p.req.fits(c.avail) ||
			!s.limitOK(pool, c.cap, true) || !s.roomy(pool, c.cap) {
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
				s.limitOK(n.pool, cs[i].cap.sub(cs[n.minIdx].cap), false) {
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
