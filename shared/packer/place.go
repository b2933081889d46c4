package packer

import (
	"cmp"
	"math"
	"slices"

	"github.com/joiner-autoscaler/joiner/shared/facts"
)

// tryPlace places p on one rung of the ladder: on room that exists or is already
// planned (fit), else on a planned node made larger (grow) or a new node (open),
// whichever costs less. With rec set it records why every pool turned p down.
//
// The first pod of a group bound to itself by hostname pod affinity (replicas
// that must share one node) is seated where the whole group fits: the others
// can only follow it there, so a node with room for one would strand them,
// where kube-scheduler, spreading the first onto the emptiest node, seats them
// all. When no node holds the group, the first is placed on its own.
func (s *solver) tryPlace(p *podInfo, a attempt, rec *rejections) bool {
	if total, ok := s.groupDemand(p, &a); ok {
		real := p.req
		p.req, p.realReq = total, &real
		placed := s.tryPlaceOne(p, a, nil)
		p.req, p.realReq = real, nil
		if placed {
			return true
		}
	}
	return s.tryPlaceOne(p, a, rec)
}

// groupDemand returns what the pending members of p's self-affinity group
// (hostname pod affinity that binds p, matches p itself and has no target
// placed yet) request together, p included; false when p leads no such group
// of two or more.
func (s *solver) groupDemand(p *podInfo, a *attempt) (vec, bool) {
	for _, t := range p.own {
		g := t.g
		if g.kind != kindAffinity || g.lv.kind != levelHost || !a.binds(t) || !t.selfHits || g.total > 0 {
			continue
		}
		var total vec
		n := 0
		for _, q := range s.groupMembers(g) {
			if q.placedOn == nil && q.err == "" {
				total = total.add(q.req)
				n++
			}
		}
		return total, n > 1
	}
	return vec{}, false
}

// groupMembers lists (cached) the pending pods that own g as a required term
// and match its selector themselves.
func (s *solver) groupMembers(g *topoGroup) []*podInfo {
	if ms, ok := s.members[g]; ok {
		return ms
	}
	var ms []*podInfo
	for _, q := range s.pods {
		for _, t := range q.own {
			if t.g == g && !t.soft && t.selfHits {
				ms = append(ms, q)
				break
			}
		}
	}
	if s.members == nil {
		s.members = map[*topoGroup][]*podInfo{}
	}
	s.members[g] = ms
	return ms
}

func (s *solver) tryPlaceOne(p *podInfo, a attempt, rec *rejections) bool {
	cls := s.podClass(p, a)
	// Spread domains and counts follow the pod's required node affinity only
	// (under nodeAffinityPolicy Honor, the default), never its preferences.
	a.hard = s.spreadClass(p)
	zok := s.zoneMask(p, &a, rec)
	zoneBound := s.levelBound(p, &a, s.topo.zone)
	if len(p.levels) > 0 {
		a.masks = s.labelMasks(p, &a, rec)
	}

	// Hostname affinity to pods already placed: only their nodes qualify (a new
	// node never does; bestNew below records that for each pool).
	if nodes := s.affinityNodes(p, &a); nodes != nil {
		if s.placeAmong(p, cls, &a, nodes, zok, zoneBound) {
			return true
		}
		if rec != nil {
			s.bestNew(p, cls, &a, zok, rec)
		}
		return false
	}

	// 1. Room on a node that exists or is already planned, at no extra cost.
	if best := s.bestFit(p, cls, &a, zok, zoneBound); best != nil {
		s.assign(p, best, best.minIdx, cls, &a)
		return true
	}

	// 2. Grow a planned node, or 3. open a new one: whichever costs less. The
	// new node's price is known first, so growths dearer than it are not
	// searched for.
	pool, z, idx, newCost := s.bestNew(p, cls, &a, zok, rec)
	limit := math.Inf(1)
	if pool != nil {
		limit = newCost*(1+growTolerance) + priceEpsilon
	}
	growNode, growIdx, growCost := s.bestGrowth(p, cls, &a, zok, limit)
	switch {
	case growNode != nil && (pool == nil || growCost <= limit):
		s.assign(p, growNode, growIdx, cls, &a)
	case pool != nil:
		idx = s.openIdx(pool, z, idx, cls, p, &a)
		n := s.open(pool, z, idx, cls)
		s.assign(p, n, idx, cls, &a)
	default:
		return false
	}
	return true
}

// affinityNodes returns the nodes holding the targets of a hostname pod-affinity
// term that binds p and already has a target placed; nil when there is none.
func (s *solver) affinityNodes(p *podInfo, a *attempt) []*node {
	for _, t := range p.own {
		if t.g.kind == kindAffinity && t.g.lv.kind == levelHost && a.binds(t) && t.g.total > 0 {
			return t.g.nodes
		}
	}
	return nil
}

// inZones reports whether a node lies where p's zone-level topology admits it.
func inZones(n *node, zok uint64, zoneBound bool) bool {
	if n.z < 0 {
		return !zoneBound
	}
	return zok&(1<<uint(n.z)) != 0
}

// placeAmong places p on the best of the given nodes (fit first, then growth).
func (s *solver) placeAmong(p *podInfo, cls *podClass, a *attempt, nodes []*node, zok uint64, zoneBound bool) bool {
	var best *node
	var bestIdx int
	bestCost := math.Inf(1)
	for _, n := range nodes {
		if n.tree == nil || !inZones(n, zok, zoneBound) || !s.nodeAccepts(n, p, a) {
			continue
		}
		if p.req.fits(n.slack()) && s.currentCompatible(n, cls) && s.labelsOK(n, n.minIdx, cls, a) && s.keepsMinValues(n, p, cls) {
			if bestCost > 0 || slackLess(n.ref, best.ref) {
				best, bestIdx, bestCost = n, n.minIdx, 0
			}
			continue
		}
		if n.existing {
			continue
		}
		if i := s.growIdx(n, p, cls, a, math.Inf(1)); i >= 0 {
			c := n.pool.cands[n.z][i].price - n.pool.cands[n.z][n.minIdx].price
			if c < bestCost {
				best, bestIdx, bestCost = n, i, c
			}
		}
	}
	if best == nil {
		return false
	}
	s.assign(p, best, bestIdx, cls, a)
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

// bestFit returns the node with the least free memory that takes p as it is,
// looking first at a window of each slack index and then, for existing and
// in-flight nodes only, past it: the index is ordered by free memory, so
// CPU-bound pods can fill more nodes than the window holds while their memory
// stays free, and a pod that gave up on them would buy capacity that is already
// paid for (a burst of 5,000 small pods over 64 full nodes and 80 empty ones
// did). Only pods the window failed pay for the second look, and only on the
// trees the window did not walk to their end.
func (s *solver) bestFit(p *podInfo, cls *podClass, a *attempt, zok uint64, zoneBound bool) *node {
	var best *node
	var cut [][2]int // existing-node trees the window stopped short in
	budget := fitWindow
	for _, key := range s.treeKeys {
		if !s.treeAdmits(key, cls, zok, zoneBound) {
			continue
		}
		n, done := s.walkFit(s.trees[key], p, cls, a, &budget)
		if n != nil && (best == nil || slackLess(n.ref, best.ref)) {
			best = n
		}
		if !done && key[0] < 0 {
			cut = append(cut, key)
		}
	}
	if best != nil {
		return best
	}
	for _, key := range cut {
		unlimited := math.MaxInt
		if n, _ := s.walkFit(s.trees[key], p, cls, a, &unlimited); n != nil && (best == nil || slackLess(n.ref, best.ref)) {
			best = n
		}
	}
	return best
}

// treeAdmits reports whether the nodes of a slack index (existing nodes when
// key[0] is -1, else a pool's planned nodes; key[1] the zone, -1 unknown) may
// take a pod of cls at all.
func (s *solver) treeAdmits(key [2]int, cls *podClass, zok uint64, zoneBound bool) bool {
	if z := key[1]; z < 0 && zoneBound || z >= 0 && zok&(1<<uint(z)) == 0 {
		return false
	}
	return key[0] < 0 || cls.perPool[key[0]].ok
}

// walkFit returns the node with the least free memory that takes p, looking at
// no more nodes than the shared budget allows; done reports that it looked at
// every node with enough free memory and CPU that could beat the one found.
// Only the bands with p's CPU free are walked: those above p's own band first
// (every node there has the CPU, so the first past p's memory usually takes
// it), then p's band, whose nodes may not; a band's walk stops at a node with
// more free memory than the best found.
func (s *solver) walkFit(x *slackIndex, p *podInfo, cls *podClass, a *attempt, budget *int) (found *node, done bool) {
	if *budget < fitWindow/4 {
		*budget = fitWindow / 4 // every tree gets a look
	}
	done = true
	own := band(p.req[dimCPU])
	walk := func(b int) {
		if b >= len(x.bands) || x.bands[b] == nil {
			return
		}
		floor := fitWindow / 16 // every band gets a look
		x.bands[b].AscendGreaterOrEqual(slackRef{mem: p.req[dimMemory], cpu: math.MinInt64}, func(r slackRef) bool {
			if found != nil && slackLess(found.ref, r) {
				return false // nothing further along beats found
			}
			*budget--
			floor--
			n := r.n
			if p.req.fits(n.slack()) && s.currentCompatible(n, cls) && s.nodeAccepts(n, p, a) && s.labelsOK(n, n.minIdx, cls, a) && s.keepsMinValues(n, p, cls) {
				found = n
				return false
			}
			if *budget > 0 || floor > 0 {
				return true
			}
			done = false
			return false
		})
	}
	for b := own + 1; b < len(x.bands); b++ {
		walk(b)
	}
	walk(own)
	return found, done
}

// bestGrowth finds the planned node that takes p for the smallest price
// increase, among increases of at most limit. It looks, in each pool and zone,
// at the growWindow nodes with the most free memory and, in each CPU band, at
// the nodes next to p's memory: the one with a little less memory free than p
// needs, and in the bands short of p's CPU the one with just enough memory
// (in the other bands that node was bestFit's first look). Those grow by the
// least; the nodes with the most free memory are the same few for every pod,
// and at scale they had all grown dear.
func (s *solver) bestGrowth(p *podInfo, cls *podClass, a *attempt, zok uint64, limit float64) (*node, int, float64) {
	var best *node
	bestIdx, bestCost := -1, math.Inf(1)
	try := func(r slackRef) {
		n := r.n
		if s.nodeAccepts(n, p, a) {
			if i := s.growIdx(n, p, cls, a, math.Min(limit, bestCost)); i >= 0 {
				c := n.pool.cands[n.z][i].price - n.pool.cands[n.z][n.minIdx].price
				if c < bestCost || (c == bestCost && best != nil && n.id < best.id) {
					best, bestIdx, bestCost = n, i, c
				}
			}
		}
	}
	pivot := slackRef{mem: p.req[dimMemory], cpu: math.MinInt64}
	for _, key := range s.treeKeys {
		x := s.trees[key]
		if key[0] < 0 || !cls.perPool[key[0]].ok || zok&(1<<uint(key[1])) == 0 {
			continue
		}
		x.top(growWindow, try)
		own := band(p.req[dimCPU])
		for b, t := range x.bands {
			if t == nil {
				continue
			}
			if b < own {
				t.AscendGreaterOrEqual(pivot, func(r slackRef) bool { try(r); return false })
			}
			t.DescendLessOrEqual(pivot, func(r slackRef) bool { try(r); return false })
		}
	}
	return best, bestIdx, bestCost
}

// growIdx is the cheapest candidate at or after the node's current one that is
// compatible with everything on it and p, holds them all, lies where p's
// topology admits it, and stays within the pool's limits; -1 when there is
// none that adds at most maxCost to the node's price (candidates are ordered by
// price, so the scan stops there).
func (s *solver) growIdx(n *node, p *podInfo, cls *podClass, a *attempt, maxCost float64) int {
	cp := cls.perPool[n.pool.idx]
	if !cp.ok || !extraAgrees(n.extra, cp.extra) {
		return -1
	}
	need := n.used.add(p.req)
	if !need.fits(n.pool.maxAvail[n.z]) {
		return -1
	}
	cs := n.pool.cands[n.z]
	// Under a binding limit most growths fail it: a candidate holds need only
	// with at least that much capacity (allocatable never exceeds capacity),
	// so when need is beyond the current capacity plus what the limit leaves,
	// no candidate passes and the scan below is skipped.
	pool := n.pool
	for d := range need {
		if pool.limited[d] && need[d] > cs[n.minIdx].cap[d]+pool.limit[d]-pool.used[d]-pool.reserved[d] {
			return -1
		}
	}
	bits := cp.bits[n.z]
	base := cs[n.minIdx].price
	ok := func(i int) bool {
		return bitSet(n.compat, i) && bitSet(bits, i) && need.fits(cs[i].avail) && (len(a.masks) == 0 || s.labelsOK(n, i, cls, a)) &&
			(len(p.ports) == 0 || !portsClash(p.ports, cs[i].dsPorts)) && s.minValuesWith(n.pool, n.z, i, n, p, cls, need) &&
			s.limitOK(n.pool, cs[i].cap.sub(cs[n.minIdx].cap), false)
	}
	// Under a limit, only candidates whose capacity in its first limited
	// dimension lies between what need takes and what the limit leaves can
	// pass; when they are fewer than the scan below would visit, look at just
	// those (the cheapest that passes is the one with the lowest index).
	if lo, hi, ids := s.capWindow(pool, n.z, need, cs[n.minIdx].cap); ids != nil && hi-lo < len(cs)-n.minIdx {
		best := -1
		for _, id := range ids[lo:hi] {
			i := int(id)
			if i >= n.minIdx && (best < 0 || i < best) && cs[i].price-base <= maxCost && ok(i) {
				best = i
			}
		}
		return best
	}
	for i := n.minIdx; i < len(cs); i++ {
		if cs[i].price-base > maxCost {
			break
		}
		if ok(i) {
			return i
		}
	}
	return -1
}

// capWindow returns the candidates of pool in zone z (indexes into byCap[z],
// lo to hi) whose capacity in the pool's first limited dimension d lies
// between need[d] (allocatable never exceeds capacity) and what the limit
// leaves beyond base; ids nil when the pool limits nothing.
func (s *solver) capWindow(pool *poolInfo, z int, need, base vec) (lo, hi int, ids []int32) {
	d := -1
	for i, l := range pool.limited {
		if l {
			d = i
			break
		}
	}
	if d < 0 {
		return 0, 0, nil
	}
	if pool.byCap == nil {
		pool.byCap = make([][]int32, len(pool.cands))
	}
	if pool.byCap[z] == nil {
		cs := pool.cands[z]
		type capIdx struct {
			c int64
			i int32
		}
		keys := make([]capIdx, len(cs))
		for i := range cs {
			keys[i] = capIdx{cs[i].cap[d], int32(i)}
		}
		slices.SortFunc(keys, func(a, b capIdx) int {
			if c := cmp.Compare(a.c, b.c); c != 0 {
				return c
			}
			return cmp.Compare(a.i, b.i)
		})
		ids := make([]int32, len(cs))
		for k := range keys {
			ids[k] = keys[k].i
		}
		pool.byCap[z] = ids
	}
	ids = pool.byCap[z]
	cs := pool.cands[z]
	top := base[d] + pool.limit[d] - pool.used[d] - pool.reserved[d]
	lo, _ = slices.BinarySearchFunc(ids, need[d], func(id int32, v int64) int { return cmp.Compare(cs[id].cap[d], v) })
	hi, _ = slices.BinarySearchFunc(ids, top+1, func(id int32, v int64) int { return cmp.Compare(cs[id].cap[d], v) })
	return lo, max(lo, hi), ids
}

// assign puts p on n, moving a planned node to candidate idx.
func (s *solver) assign(p *podInfo, n *node, idx int, cls *podClass, a *attempt) {
	if n.tree != nil {
		n.tree.remove(n.ref)
	}
	if p.realReq != nil {
		// The node was chosen for p's whole group (see tryPlace): p takes its own share.
		p.req, p.realReq = *p.realReq, nil
	}
	if !n.existing {
		cs := n.pool.cands[n.z]
		if idx != n.minIdx {
			n.pool.used = n.pool.used.add(cs[idx].cap.sub(cs[n.minIdx].cap))
			s.noteUsed(n.pool)
		}
		n.minIdx = idx
		n.narrow(cls)
		for _, lv := range p.levels {
			s.pin(lv, n, a.mask(lv))
		}
	}
	n.used = n.used.add(p.req)
	n.pods = append(n.pods, p)
	p.placedOn, p.cls = n, cls
	s.reservePorts(n, p.ports...)
	if len(p.ports) > 0 && !n.existing {
		n.narrowPorts(p.ports)
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
		n.tree.insert(n.ref)
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

// keepsMinValues reports whether p joining planned node n leaves it enough
// options for its pool's minValues.
func (s *solver) keepsMinValues(n *node, p *podInfo, cls *podClass) bool {
	if n.existing || len(n.pool.minValues) == 0 {
		return true
	}
	return s.minValuesWith(n.pool, n.z, n.minIdx, n, p, cls, n.used.add(p.req))
}

// narrowPorts keeps a planned node off the types where a DaemonSet binding one
// of ports would land.
func (n *node) narrowPorts(ports []facts.HostPort) {
	for i, c := range n.pool.cands[n.z] {
		if portsClash(ports, c.dsPorts) {
			n.compat[i/64] &^= 1 << uint(i%64)
		}
	}
}

// nodeAccepts checks host ports and hostname-level topology for p on n.
func (s *solver) nodeAccepts(n *node, p *podInfo, a *attempt) bool {
	for _, pk := range p.ports {
		if n.ports[pk] {
			return false
		}
	}
	if len(p.ports) > 0 && !n.existing && portsClash(p.ports, n.pool.cands[n.z][n.minIdx].dsPorts) {
		return false
	}
	return s.domainOK(p, a, s.topo.host, n.id)
}

// canLaunch reports whether some pool could still launch a node that counts as
// a spread domain for a pod of class cls: one its node affinity selects (honorA)
// and whose taints it tolerates (honorT).
func (s *solver) canLaunch(cls *podClass, honorA, honorT bool) bool {
	for _, pool := range s.pools {
		if pool.unusable != "" || pool.exhausted || pool.maxNodes >= 0 && pool.nodes >= pool.maxNodes ||
			honorT && !tolerated(cls.tolerations, pool.taints, false) {
			continue
		}
		cp := cls.perPool[pool.idx]
		limited := pool.hasLimits()
		for z, cs := range pool.cands {
			if len(cs) == 0 || honorA && !cp.labelAny[z] {
				continue
			}
			if !limited {
				return true
			}
			// Under limits, a node the class may use must still fit them.
			for i := range cs {
				if (!honorA || bitSet(cp.bits[z], i)) && s.limitOK(pool, cs[i].cap, true) {
					return true
				}
			}
		}
	}
	return false
}

// noteUsed marks pool exhausted once its limits or node count admit no new
// node of any candidate (its usage only grows while pods are placed).
func (s *solver) noteUsed(pool *poolInfo) {
	if pool.exhausted || pool.unusable != "" || pool.maxNodes < 0 && !pool.hasLimits() {
		return
	}
	if pool.maxNodes < 0 || pool.nodes < pool.maxNodes {
		for _, cs := range pool.cands {
			for i := range cs {
				if s.limitOK(pool, cs[i].cap, true) {
					return
				}
			}
		}
	}
	pool.exhausted = true
	s.exhaustGen++
}
