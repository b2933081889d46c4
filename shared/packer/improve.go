package packer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The improvement phase. The first fill places pods one at a time, hardest first,
// opening each node on the type that buys most of the *average* pending pod: on a
// mix of CPU-bound and memory-bound Deployments that is an m-ish type for
// everything, half of whose memory (or CPU) stays idle. Rebalancing swaps single
// pods and cannot change that. This phase takes the planned nodes whose pods may
// move (see movable) and packs those pods again from scratch, two ways: greedily,
// a node at a time (each new node goes on the type whose price buys the most of
// the pods it will hold, each pod valued at the price of its dominant resource,
// what it would cost on the type that holds it most cheaply per unit, and is
// filled with the pods that use its room best), and by column generation over a
// linear program (colgen.go), which sees combinations the greedy cannot. The
// cheaper packing replaces the old one only when it costs less, so the phase
// never makes a plan dearer; it replaces nodes by cheaper types, merges nodes,
// and moves pods between nodes and zones, all in one step.
//
// Scope keeps every constraint the first fill honoured:
//   - pods with zone-level topology (spread, affinity) stay in their zone, with
//     their pool: zone counts do not change, and nothing counts them per node;
//   - pods with no topology and no host ports may also change zones within the
//     pool (a cheaper zone's spot price);
//   - a node keeps only types every pod on it accepts (class bits and the custom
//     labels the class asks the node to carry), as the first fill did;
//   - pool limits (resources and node count) are checked on the difference;
//   - pools with minValues and nodes holding a pod that may not move keep what
//     they have.
//
// The work is bounded by improveBudget (counted steps), not by a clock, so a
// plan stays the same function of its snapshot.

const (
	// improveBudget is the work the phase may do per solve, counted in shapes
	// looked at while filling trial nodes, simplex row operations and search
	// nodes (each some 10-30 ns): at most about 100 ms of one core, some 20-80 ms
	// on the real-catalog cases.
	improveBudget = 4_000_000
	// splitShapes is the most shapes one group of a pool may have before the
	// pool is repacked in parts (see improveGroups).
	splitShapes = 40
	// improveFrontier caps the candidate types a group tries per node.
	improveFrontier = 48
)

// shapeSet is interchangeable pods: same requests, same class.
type shapeSet struct {
	req vec
	cls *podClass
	// zone is where the shape's pods must stay (they carry zone-level
	// topology), -1 when they may go to any zone.
	zone int
	pods []*podInfo
	left int
	w    float64 // price of its dominant resource on the cheapest type for it
}

// slot is one candidate a group may open a node on: zone and index.
type slot struct{ z, i int }

// improveGroup is the movable pods of some planned nodes and where they may go.
type improveGroup struct {
	pool  *poolInfo
	zones []int // the zones its nodes may be in
	nodes []*node
}

// bin is a node of the new packing.
type bin struct {
	at    slot
	used  vec
	pods  []*podInfo
	extra map[string]string
}

func (s *solver) improve() {
	budget := improveBudget
	for _, g := range s.improveGroups() {
		if budget <= 0 {
			return
		}
		s.repack(g, &budget)
	}
}

// improveGroups gathers the planned nodes the phase may repack: per pool, every
// node whose pods may all move (see movable) forms one group over every zone.
// A pod with zone-level topology stays in its zone (its shape is pinned there,
// see groupShapes); the others may change zones. One group per pool lets the
// repack mix a zone's pinned pods with free ones on the same nodes. A pool
// group of more than splitShapes shapes is split as the phase did before: the
// nodes whose pods carry no topology, over every zone, and the others per zone
// (smaller problems, each within the budget).
func (s *solver) improveGroups() []improveGroup {
	byPool := map[int]*improveGroup{}
	var pools []*improveGroup
	for _, n := range s.nodes {
		if n.existing || n.inflight || len(n.pods) == 0 || len(n.pool.minVals) > 0 || n.inReservation() {
			continue
		}
		allMovable := true
		for _, p := range n.pods {
			allMovable = allMovable && movable(p)
		}
		if !allMovable {
			continue
		}
		g := byPool[n.pool.idx]
		if g == nil {
			g = &improveGroup{pool: n.pool}
			for z := range s.zones {
				g.zones = append(g.zones, z)
			}
			byPool[n.pool.idx] = g
			pools = append(pools, g)
		}
		g.nodes = append(g.nodes, n)
	}
	var res []improveGroup
	for _, g := range pools {
		if len(groupShapes(g.nodes)) <= splitShapes {
			res = append(res, *g)
			continue
		}
		free := improveGroup{pool: g.pool, zones: g.zones}
		zonal := map[int]*improveGroup{}
		var order []int
		for _, n := range g.nodes {
			allFree := true
			for _, p := range n.pods {
				allFree = allFree && zoneFree(p)
			}
			if allFree {
				free.nodes = append(free.nodes, n)
				continue
			}
			zg := zonal[n.z]
			if zg == nil {
				zg = &improveGroup{pool: g.pool, zones: []int{n.z}}
				zonal[n.z] = zg
				order = append(order, n.z)
			}
			zg.nodes = append(zg.nodes, n)
		}
		if len(free.nodes) > 0 {
			res = append(res, free)
		}
		for _, z := range order {
			res = append(res, *zonal[z])
		}
	}
	return res
}

// cheapestFor is the cheapest candidate of pool in zone z that every class in
// classes accepts with the given custom labels and that holds used; -1 if none.
func (s *solver) cheapestFor(pool *poolInfo, z int, used vec, pods []*podInfo) int {
	cs := pool.cands[z]
outer:
	for i := range cs {
		if cs[i].resv != nil || !used.fits(cs[i].avail) {
			continue // a reservation's slots are taken only by opening a node in one
		}
		for _, p := range pods {
			cp := p.cls.perPool[pool.idx]
			if !cp.ok || !bitSet(cp.bits[z], i) {
				continue outer
			}
		}
		return i
	}
	return -1
}

// repack packs a group's pods again and keeps the result when it is cheaper.
func (s *solver) repack(g improveGroup, budget *int) {
	pool := g.pool
	// What the group costs now, each node at the cheapest type that holds it
	// (downsize would get there anyway).
	before := 0.0
	var beforeCap vec
	for _, n := range g.nodes {
		i := s.cheapestFor(pool, n.z, n.used, n.pods)
		if i < 0 || i > n.minIdx {
			i = n.minIdx
		}
		before += pool.cands[n.z][i].price
		beforeCap = beforeCap.add(pool.cands[n.z][n.minIdx].cap)
	}
	shapes := groupShapes(g.nodes)
	front := s.frontier(g, shapes)
	if len(front) == 0 {
		return
	}
	for _, sh := range shapes {
		sh.w = math.Inf(1)
		for _, at := range front {
			c := &pool.cands[at.z][at.i]
			if !sh.takes(s, pool, at) || !sh.req.fits(c.avail) {
				continue
			}
			sh.w = math.Min(sh.w, c.price*dominantShare(sh.req, c.avail))
		}
		if math.IsInf(sh.w, 1) {
			return // a pod the frontier cannot hold: leave the group as it is
		}
	}
	// Far more shapes than nodes: the first fill is already fine-grained, and
	// neither packing below pays for itself.
	if len(shapes) > 8*len(g.nodes) {
		return
	}
	// The greedy fill is not started when it would not finish within what is
	// left of the budget: half a repack is wasted work.
	var bins []*bin
	var after float64
	var afterCap vec
	byLP := false
	if est := len(g.nodes) * len(front) * len(shapes) * min(len(shapes), 16); est <= *budget {
		bins = s.greedyBins(pool, front, shapes, budget)
		after, afterCap = s.shrinkBins(pool, bins)
	}
	// The linear program's packing, from the same pods; the cheaper one is
	// kept. Its rows are the shapes: past lpMaxShapes the basis costs more than
	// the packing can save.
	if len(shapes) <= lpMaxShapes {
		for _, sh := range shapes {
			sh.left = len(sh.pods)
		}
		if lp := s.colgen(pool, front, shapes, budget); lp != nil {
			if c, cp := s.shrinkBins(pool, lp); bins == nil || c < after*(1-1e-9) {
				bins, after, afterCap, byLP = lp, c, cp, true
			}
		}
	}
	if bins == nil {
		return
	}
	if after >= before*(1-1e-6) {
		return
	}
	how := "greedy fill (each node opened on the type whose price buys the most of the pods it takes, " +
		"each pod valued at the price of its dominant resource on the type that holds it most cheaply per unit)"
	if byLP {
		how = "linear program (column generation over node patterns: which pods share a node of which type, each pattern " +
			"worth more than its price at the program's dual prices per pod shape; the optimum rounded to whole nodes)"
	}
	// Limits: the new packing may use more of a limited resource, or more nodes.
	for d := range afterCap {
		if pool.limited[d] && afterCap[d] > beforeCap[d] && pool.used[d]+pool.reserved[d]+afterCap[d]-beforeCap[d] > pool.limit[d] {
			return
		}
	}
	if pool.maxNodes >= 0 && len(bins) > len(g.nodes) && pool.nodes+int64(len(bins)-len(g.nodes)) > pool.maxNodes {
		return
	}
	var was []string
	for _, n := range g.nodes {
		i := s.cheapestFor(pool, n.z, n.used, n.pods)
		if i < 0 || i > n.minIdx {
			i = n.minIdx
		}
		was = append(was, pool.cands[n.z][i].it.Name)
	}
	s.applyRepack(g, bins, how, fmt.Sprintf("%d node(s) of the first fill (%s; $%.4f/h) repacked into %d ($%.4f/h)",
		len(g.nodes), summarize(was), before, len(bins), after))
}

// greedyBins packs the shapes a node at a time: each on the frontier candidate
// whose fill buys the most pod value per dollar. nil when out of budget or a
// pod fits no candidate.
func (s *solver) greedyBins(pool *poolInfo, front []slot, shapes []*shapeSet, budget *int) []*bin {
	var bins []*bin
	left := 0
	for _, sh := range shapes {
		left += sh.left
	}
	for left > 0 {
		var best *bin
		bestRatio := -1.0
		for _, at := range front {
			if *budget <= 0 {
				return nil // out of budget: the group keeps its first-fill nodes
			}
			b := s.fill(pool, at, shapes, false, budget)
			if b == nil {
				continue
			}
			val := 0.0
			for _, p := range b.pods {
				val += shapeOf(shapes, p, at.z).w
			}
			ratio := val / pool.cands[at.z][at.i].price
			if ratio > bestRatio*(1+1e-9) || ratio >= bestRatio*(1-1e-9) && best != nil && len(b.pods) > len(best.pods) {
				best, bestRatio = b, ratio
			}
		}
		if best == nil {
			return nil
		}
		s.fill(pool, best.at, shapes, true, budget)
		left -= len(best.pods)
		bins = append(bins, best)
	}
	return bins
}

// shrinkBins moves each bin to the cheapest candidate of its zone that holds
// it and returns what the bins cost and the capacity they take.
func (s *solver) shrinkBins(pool *poolInfo, bins []*bin) (float64, vec) {
	cost := 0.0
	var capSum vec
	for _, b := range bins {
		if i := s.cheapestFor(pool, b.at.z, b.used, b.pods); i >= 0 {
			b.at.i = i
		}
		cost += pool.cands[b.at.z][b.at.i].price
		capSum = capSum.add(pool.cands[b.at.z][b.at.i].cap)
	}
	return cost, capSum
}

// summarize counts names: "3× m6i.4xlarge, r7i.xlarge".
func summarize(names []string) string {
	counts := map[string]int{}
	var order []string
	for _, n := range names {
		if counts[n] == 0 {
			order = append(order, n)
		}
		counts[n]++
	}
	parts := make([]string, 0, len(order))
	for _, n := range order {
		if counts[n] > 1 {
			parts = append(parts, fmt.Sprintf("%d× %s", counts[n], n))
		} else {
			parts = append(parts, n)
		}
	}
	if len(parts) > 6 {
		parts = append(parts[:6], fmt.Sprintf("%d more type(s)", len(parts)-6))
	}
	return strings.Join(parts, ", ")
}

// whyType is the explanation's account of the type: the dominant resource of the
// pods it holds, what the type charges per unit of it, and what the improvement
// phase replaced.
func (s *solver) whyType(n *node, c *cand) string {
	cpu, mem := float64(c.avail[dimCPU])/1000, float64(c.avail[dimMemory])/(1<<30)
	if cpu <= 0 || mem <= 0 {
		return ""
	}
	cpuShare, memShare := float64(n.used[dimCPU])/1000/cpu, float64(n.used[dimMemory])/(1<<30)/mem
	dom, unit, per := "CPU", "vCPU", c.price/cpu
	if memShare > cpuShare {
		dom, unit, per = "memory", "GiB", c.price/mem
	}
	out := fmt.Sprintf("; its pods are %s-bound (%.0f%% of the CPU, %.0f%% of the memory it offers): $%.4f per allocatable %s-hour",
		dom, 100*cpuShare, 100*memShare, per, unit)
	if n.improvedFrom == "" {
		return out + "; kept from the first fill"
	}
	return out + fmt.Sprintf("; the improvement phase put these pods (%s) together by its %s, then took the cheapest type of the zone that holds them; with the rest of its group it replaced %s",
		podMix(n.pods), n.improvedHow, n.improvedFrom)
}

// podMix counts a node's pods by requests, most numerous first:
// "12× 250m/512Mi, 3× 2/8Gi".
func podMix(pods []*podInfo) string {
	type k struct{ cpu, mem int64 }
	counts := map[k]int{}
	var order []k
	for _, p := range pods {
		key := k{p.req[dimCPU], p.req[dimMemory]}
		if counts[key] == 0 {
			order = append(order, key)
		}
		counts[key]++
	}
	slices.SortStableFunc(order, func(a, b k) int { return cmp.Compare(counts[b], counts[a]) })
	parts := make([]string, 0, len(order))
	for _, key := range order[:min(len(order), 6)] {
		parts = append(parts, fmt.Sprintf("%d× %s/%s", counts[key], formatQuantity("cpu", key.cpu), formatQuantity("memory", key.mem)))
	}
	if len(order) > 6 {
		parts = append(parts, fmt.Sprintf("%d more shape(s)", len(order)-6))
	}
	return strings.Join(parts, ", ")
}

// applyRepack moves the group's pods into the new packing, reusing the group's
// nodes (a node changing zone keeps nothing zonal: its pods carry no topology);
// how names the packing that won, why what it replaced.
func (s *solver) applyRepack(g improveGroup, bins []*bin, how, why string) {
	pool := g.pool
	targets := make([]*node, len(bins))
	for i, b := range bins {
		if i < len(g.nodes) {
			n := g.nodes[i]
			pool.used = pool.used.sub(pool.cands[n.z][n.minIdx].cap).add(pool.cands[b.at.z][b.at.i].cap)
			if n.z != b.at.z {
				s.zoneNew[n.z]--
				s.zoneNew[b.at.z]++
				n.z = b.at.z
				// Candidate indexes are per zone: start the new zone's set afresh
				// (refreshCompat narrows it once the pods are in).
				n.compat = allCompat((len(pool.cands[n.z]) + 63) / 64)
			}
			n.minIdx = b.at.i
			targets[i] = n
			continue
		}
		targets[i] = s.open(pool, b.at.z, b.at.i, b.pods[0].cls)
	}
	for i, b := range bins {
		to := targets[i]
		for _, p := range b.pods {
			if from := p.placedOn; from != to {
				s.move(p, from, to)
			}
		}
	}
	for _, n := range g.nodes[min(len(bins), len(g.nodes)):] {
		// Emptied: it leaves its pool's count (the pods all moved out above).
		pool.used = pool.used.sub(pool.cands[n.z][n.minIdx].cap)
		pool.nodes--
		s.zoneNew[n.z]--
	}
	for _, n := range targets {
		n.improvedFrom, n.improvedHow = why, how
		n.compat = allCompat(len(n.compat))
		s.refreshCompat(n)
	}
}

// accepts reports whether a pod of class cls may run on candidate at of pool.
func (s *solver) accepts(pool *poolInfo, at slot, cls *podClass) bool {
	cp := cls.perPool[pool.idx]
	return cp.ok && cp.any[at.z] && bitSet(cp.bits[at.z], at.i)
}

// fill packs the remaining shapes into a fresh node on candidate at: repeatedly
// the shape whose value per unit of the node's scarcest remaining room is best,
// as many at a time as keep it so. With take it also takes the pods.
func (s *solver) fill(pool *poolInfo, at slot, shapes []*shapeSet, take bool, budget *int) *bin {
	c := &pool.cands[at.z][at.i]
	b := &bin{at: at}
	room := c.avail
	taken := make([]int, len(shapes))
	for {
		*budget -= len(shapes)
		best, bestScore := -1, 0.0
		for k, sh := range shapes {
			if sh.left-taken[k] <= 0 || !sh.req.fits(room) || !sh.takes(s, pool, at) ||
				!extraAgrees(b.extra, sh.cls.perPool[pool.idx].extra) {
				continue
			}
			if sc := sh.w / dominantShare(sh.req, room); sc > bestScore {
				best, bestScore = k, sc
			}
		}
		if best < 0 {
			break
		}
		sh := shapes[best]
		n := min(sh.left-taken[best], copiesFit(sh.req, room))
		n = max(1, (n+1)/2) // half at a time: the next pick sees the room that is left
		for range n {
			room = room.sub(sh.req)
			b.used = b.used.add(sh.req)
		}
		b.addExtra(sh.cls.perPool[pool.idx].extra)
		start := sh.left - taken[best] - n
		for j := start; j < sh.left-taken[best]; j++ {
			b.pods = append(b.pods, sh.pods[j])
		}
		taken[best] += n
	}
	if len(b.pods) == 0 {
		return nil
	}
	if take {
		for k, sh := range shapes {
			sh.left -= taken[k]
		}
	}
	return b
}

// dominantShare is the largest share of room that req takes in any dimension.
func dominantShare(req, room vec) float64 {
	f := 0.0
	for d := range req {
		if req[d] == 0 {
			continue
		}
		if room[d] <= 0 {
			return math.Inf(1)
		}
		f = math.Max(f, float64(req[d])/float64(room[d]))
	}
	return f
}

// copiesFit is how many copies of req fit in room.
func copiesFit(req, room vec) int {
	n := math.MaxInt
	for d := range req {
		if req[d] > 0 {
			n = min(n, int(room[d]/req[d]))
		}
	}
	if n == math.MaxInt {
		return 1 << 20
	}
	return n
}

func shapeOf(shapes []*shapeSet, p *podInfo, z int) *shapeSet {
	if zoneFree(p) {
		z = -1
	}
	for _, sh := range shapes {
		if sh.cls == p.cls && sh.req == p.req && sh.zone == z {
			return sh
		}
	}
	return nil
}

// takes reports whether the shape's pods may run on candidate at of pool.
func (sh *shapeSet) takes(s *solver, pool *poolInfo, at slot) bool {
	return (sh.zone < 0 || sh.zone == at.z) && s.accepts(pool, at, sh.cls)
}

// groupShapes collects the group's pods into shapes, largest first, in a fixed
// order (pod keys within a shape).
func groupShapes(nodes []*node) []*shapeSet {
	type key struct {
		req  vec
		cls  *podClass
		zone int
	}
	by := map[key]*shapeSet{}
	var out []*shapeSet
	for _, n := range nodes {
		for _, p := range n.pods {
			k := key{p.req, p.cls, n.z}
			if zoneFree(p) {
				k.zone = -1
			}
			sh := by[k]
			if sh == nil {
				sh = &shapeSet{req: p.req, cls: p.cls, zone: k.zone}
				by[k] = sh
				out = append(out, sh)
			}
			sh.pods = append(sh.pods, p)
		}
	}
	for _, sh := range out {
		slices.SortFunc(sh.pods, func(a, b *podInfo) int { return cmp.Compare(a.key, b.key) })
		sh.left = len(sh.pods)
	}
	slices.SortStableFunc(out, func(a, b *shapeSet) int {
		if c := cmp.Compare(b.req[dimCPU], a.req[dimCPU]); c != 0 {
			return c
		}
		if c := cmp.Compare(b.req[dimMemory], a.req[dimMemory]); c != 0 {
			return c
		}
		if c := cmp.Compare(a.cls.id, b.cls.id); c != 0 {
			return c
		}
		return cmp.Compare(a.zone, b.zone)
	})
	return out
}

// frontier lists the candidates worth a trial: in the group's zones, accepted
// by some shape, not dominated by a candidate of the same zone that is no dearer
// with at least its room and accepted by every shape it accepts; at most
// improveFrontier of them, those that buy the group's demand cheapest first.
func (s *solver) frontier(g improveGroup, shapes []*shapeSet) []slot {
	pool := g.pool
	type scored struct {
		at  slot
		ppu float64
	}
	var res []slot
	seen := map[slot]bool{}
	perZone := max(improveFrontier/len(g.zones), 12)
	for _, z := range g.zones {
		// The zone's demand: its pinned pods and the free ones.
		var demand vec
		for _, sh := range shapes {
			if sh.zone < 0 || sh.zone == z {
				for range sh.left {
					demand = demand.add(sh.req)
				}
			}
		}
		cs := pool.cands[z]
		var kept []int
		var out []scored
		for i := range cs { // cheapest first
			if cs[i].resv != nil {
				continue
			}
			ok := false
			for _, sh := range shapes {
				if sh.takes(s, pool, slot{z, i}) && sh.req.fits(cs[i].avail) {
					ok = true
					break
				}
			}
			if !ok {
				continue
			}
			dominated := false
			for _, j := range kept {
				if cs[j].price <= cs[i].price && cs[i].avail.fits(cs[j].avail) {
					same := true
					for _, sh := range shapes {
						if sh.takes(s, pool, slot{z, i}) && !sh.takes(s, pool, slot{z, j}) {
							same = false
							break
						}
					}
					if same {
						dominated = true
						break
					}
				}
			}
			if dominated {
				continue
			}
			kept = append(kept, i)
			// Price per unit of the demand vector: the demand's dominant share.
			out = append(out, scored{slot{z, i}, cs[i].price * dominantShare(demand, cs[i].avail)})
		}
		// The cheapest for the zone's whole demand, and for each shape the few
		// cheapest for it alone: the CPU-bound pods' c types must be there for a
		// mixed demand.
		slices.SortStableFunc(out, func(a, b scored) int { return cmp.Compare(a.ppu, b.ppu) })
		for _, o := range out[:min(len(out), perZone)] {
			if !seen[o.at] {
				res = append(res, o.at)
				seen[o.at] = true
			}
		}
		// Shapes by the demand they carry: the few largest get their own types.
		var big []*shapeSet
		for _, sh := range shapes {
			if sh.zone < 0 || sh.zone == z {
				big = append(big, sh)
			}
		}
		slices.SortStableFunc(big, func(a, b *shapeSet) int {
			return cmp.Compare(float64(b.left)*dominantShare(b.req, demand), float64(a.left)*dominantShare(a.req, demand))
		})
		for _, sh := range big[:min(len(big), 8)] {
			own := slices.Clone(out)
			for k := range own {
				c := &pool.cands[own[k].at.z][own[k].at.i]
				own[k].ppu = math.Inf(1)
				if sh.takes(s, pool, own[k].at) && sh.req.fits(c.avail) {
					own[k].ppu = c.price * dominantShare(sh.req, c.avail)
				}
			}
			slices.SortStableFunc(own, func(a, b scored) int { return cmp.Compare(a.ppu, b.ppu) })
			for _, o := range own[:min(len(own), 3)] {
				if !seen[o.at] && !math.IsInf(o.ppu, 1) {
					res = append(res, o.at)
					seen[o.at] = true
				}
			}
		}
	}
	return res
}
