package packer

import (
	"cmp"
	"math"
	"slices"
)

// Column generation: the improvement phase's second way to pack a group (see
// improve.go). The greedy fill opens one node at a time on the type that buys
// most of the pods it takes; it cannot see that a c-type node full of CPU-bound
// pods next to an r-type node full of memory-bound ones beats two m-types, when
// each choice alone looks no better. The linear program does:
//
//	minimise   Σ_p price(p) · x_p
//	such that  Σ_p count_k(p) · x_p ≥ pods of shape k, for every shape k;  x ≥ 0
//
// over patterns p (a candidate type and how many pods of each shape it holds).
// Patterns are generated as the simplex asks for them: with the duals y (what a
// pod of each shape is worth at the optimum so far), each candidate type packs
// the pods that are worth most for the room they take, and a pattern worth more
// than its price enters. The optimum is rounded down to whole nodes, the pods
// left are solved again the same way, and a polish empties the least-used nodes
// into the room the others have left. Every step is deterministic and counted
// against the phase's work budget, so plans stay reproducible.

const (
	// lpPivots caps the simplex iterations per solve of the master problem.
	lpPivots = 400
	// lpRounds caps the round-down / re-solve rounds of one group.
	lpRounds = 64
	lpEps    = 1e-9
	// lpMaxShapes caps the shapes (master rows) a group may have for column
	// generation to run.
	lpMaxShapes = 96
	// lpGap is how close to Farley's lower bound the master's optimum must
	// come before column generation stops.
	lpGap = 0.002
	// bbItems and bbNodes bound the exact search of pricePattern: at most that
	// many shapes on a candidate, and that many search nodes.
	bbItems = 6
	bbNodes = 150
)

// pattern is a column: a node on candidate at holding cnt[k] pods of shape k.
type pattern struct {
	at    slot
	cnt   []int32
	price float64
}

// master is the restricted master problem of one group, solved by a revised
// simplex with a dense basis inverse (a group has tens of shapes, so the basis
// is small).
type master struct {
	m     int
	need  []float64 // pods of each shape still to place
	cols  []pattern
	basic []int // per row: a column index, or -1-k for the surplus of row k
	binv  [][]float64
	xb    []float64
}

// colgen packs the group's shapes by column generation; nil when it cannot
// (out of budget, or a shape no candidate holds). The first optimum is rounded
// down to whole copies of its patterns; the pods left are packed two ways,
// by solving again and by the greedy fill, and the cheaper packing is kept.
func (s *solver) colgen(pool *poolInfo, front []slot, shapes []*shapeSet, budget *int) []*bin {
	m := len(shapes)
	need := make([]int, m)
	for k, sh := range shapes {
		need[k] = sh.left
	}
	mp := s.solveMaster(pool, front, shapes, need, nil, true, budget)
	if mp == nil {
		return nil
	}
	var best []*bin
	bestCost := math.Inf(1)
	for _, greedyRest := range []bool{false, true} {
		bins := s.roundMaster(pool, front, shapes, mp, slices.Clone(need), greedyRest, budget)
		if bins == nil {
			continue
		}
		bins = s.polish(pool, bins, budget)
		cost := 0.0
		for _, b := range bins {
			i := s.cheapestFor(pool, b.at.z, b.used, b.pods)
			if i < 0 {
				i = b.at.i
			}
			cost += pool.cands[b.at.z][i].price
		}
		if cost < bestCost*(1-1e-12) {
			best, bestCost = bins, cost
		}
	}
	return best
}

// roundMaster turns the optimum mp into whole bins holding every pod of need:
// whole copies of its patterns, then the pods left solved again and rounded
// the same way, or with greedyRest packed by the greedy fill.
func (s *solver) roundMaster(pool *poolInfo, front []slot, shapes []*shapeSet, mp *master, need []int, greedyRest bool, budget *int) []*bin {
	m := len(shapes)
	var bins []*bin
	taken := make([]int, m) // pods of each shape given to bins so far
	for round := 0; round < lpRounds; round++ {
		left := 0
		for k := range need {
			left += need[k]
		}
		if left == 0 {
			return bins
		}
		if round > 0 && greedyRest {
			for k, sh := range shapes {
				sh.left = need[k]
			}
			rest := s.greedyBins(pool, front, shapes, budget)
			for _, sh := range shapes {
				sh.left = len(sh.pods)
			}
			if rest == nil {
				return nil
			}
			return append(bins, rest...)
		}
		if round > 0 {
			if mp = s.solveMaster(pool, front, shapes, need, mp.cols[m:], true, budget); mp == nil {
				return nil
			}
		}
		// The optimum's patterns, largest x first.
		order := make([]int, 0, m)
		for r := range mp.basic {
			if mp.basic[r] >= 0 && mp.xb[r] > lpEps {
				order = append(order, r)
			}
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case mp.xb[a] > mp.xb[b]:
				return -1
			case mp.xb[a] < mp.xb[b]:
				return 1
			}
			return 0
		})
		progress := false
		for _, r := range order {
			p := &mp.cols[mp.basic[r]]
			for copies := int(math.Floor(mp.xb[r] + 1e-6)); copies > 0; copies-- {
				if b := s.takePattern(pool, p, shapes, need, taken); b != nil {
					bins = append(bins, b)
					progress = true
				}
			}
		}
		if !progress && len(order) > 0 {
			// Every x is below one: open the pattern the optimum leans on most.
			if b := s.takePattern(pool, &mp.cols[mp.basic[order[0]]], shapes, need, taken); b != nil {
				bins = append(bins, b)
				progress = true
			}
		}
		if !progress {
			return nil
		}
	}
	for k := range need {
		if need[k] > 0 {
			return nil // out of rounds
		}
	}
	return bins
}

// worth is what a pattern's pods are worth at the duals y.
func worth(p *pattern, y []float64) float64 {
	v := 0.0
	for k, c := range p.cnt {
		if c != 0 {
			v += y[k] * float64(c)
		}
	}
	return v
}

// takePattern opens a bin of pattern p with the pods still needed, the last
// ones of each shape's list first; nil when it would hold none.
func (s *solver) takePattern(pool *poolInfo, p *pattern, shapes []*shapeSet, need, taken []int) *bin {
	b := &bin{at: p.at}
	for k, c := range p.cnt {
		n := min(int(c), need[k])
		if n <= 0 {
			continue
		}
		sh := shapes[k]
		for j := 0; j < n; j++ {
			b.pods = append(b.pods, sh.pods[len(sh.pods)-1-taken[k]-j])
			b.used = b.used.add(sh.req)
		}
		b.addExtra(sh.cls.perPool[pool.idx].extra)
		need[k] -= n
		taken[k] += n
	}
	if len(b.pods) == 0 {
		return nil
	}
	return b
}

// solveMaster solves the master problem for need by column generation.
//
// With exact, candidates holding few shapes are priced by an exact search
// (the first solve, whose optimum shapes the packing); the re-solves of what
// rounding left price greedily.
func (s *solver) solveMaster(pool *poolInfo, front []slot, shapes []*shapeSet, need []int, known []pattern, exact bool, budget *int) *master {
	m := len(shapes)
	mp := &master{m: m, need: make([]float64, m), basic: make([]int, m), xb: make([]float64, m), binv: make([][]float64, m)}
	for k := range need {
		mp.need[k] = float64(need[k])
		mp.binv[k] = make([]float64, m)
	}
	// Start from one single-shape pattern per shape (the cheapest per pod):
	// a diagonal, feasible basis. A shape already placed keeps a zero row.
	for k, sh := range shapes {
		best, bestPer, bestN := slot{}, math.Inf(1), 0
		for _, at := range front {
			c := &pool.cands[at.z][at.i]
			if !sh.takes(s, pool, at) || !sh.req.fits(c.avail) {
				continue
			}
			n := min(copiesFit(sh.req, c.avail), max(need[k], 1))
			if per := c.price / float64(n); per < bestPer*(1-1e-12) {
				best, bestPer, bestN = at, per, n
			}
		}
		if bestN == 0 {
			return nil
		}
		cnt := make([]int32, m)
		cnt[k] = int32(bestN)
		mp.cols = append(mp.cols, pattern{at: best, cnt: cnt, price: pool.cands[best.z][best.i].price})
		mp.basic[k] = len(mp.cols) - 1
		mp.binv[k][k] = 1 / float64(bestN)
		mp.xb[k] = mp.need[k] / float64(bestN)
	}
	// Earlier rounds' patterns, cut to the pods still needed.
	for _, p := range known {
		cnt := make([]int32, m)
		any := false
		for k, c := range p.cnt {
			cnt[k] = min(c, int32(need[k]))
			any = any || cnt[k] > 0
		}
		if any {
			mp.cols = append(mp.cols, pattern{at: p.at, cnt: cnt, price: p.price})
		}
	}
	y := make([]float64, m)
	d := make([]float64, m)
	for it := 0; it < lpPivots; it++ {
		if *budget <= 0 {
			// Out of budget: every basis on the way is feasible, so the
			// optimum so far still rounds to a complete packing.
			return mp
		}
		*budget -= m * m
		// Duals: y = c_B · B⁻¹.
		for j := range y {
			y[j] = 0
		}
		for r, b := range mp.basic {
			if b < 0 {
				continue
			}
			cb := mp.cols[b].price
			for j := range y {
				y[j] += cb * mp.binv[r][j]
			}
		}
		// A surplus with a negative dual enters first; else the best new pattern.
		enter, enterCol := 0, (*pattern)(nil)
		for j := range y {
			if y[j] < -lpEps && !slices.Contains(mp.basic, -1-j) {
				enter = -1 - j
				break
			}
		}
		if enter == 0 {
			// Patterns are judged by worth per dollar (the reduced cost relative
			// to the price), not by the reduced cost itself: among sizes of one
			// family that price alike per unit the smallest is found first and
			// kept, and small patterns round to whole nodes with less waste.
			// Patterns found in earlier rounds first (cheap to price again).
			best := 1 + 1e-9
			*budget -= m * len(mp.cols)
			for c := range mp.cols {
				if v := worth(&mp.cols[c], y) / mp.cols[c].price; v > best && !slices.Contains(mp.basic, c) {
					best, enter = v, c+1
				}
			}
			if enter > 0 {
				enter--
			} else {
				for _, at := range front {
					p, v := s.pricePattern(pool, at, shapes, y, need, exact, budget)
					if p != nil && v/p.price > best {
						best, enterCol = v/p.price, p
					}
				}
				if enterCol == nil {
					return mp // optimal for the patterns the pricing finds
				}
				// Farley's bound: no packing costs less than y·need / best, the
				// best pattern's worth per dollar. Close enough to it, stop.
				obj := 0.0
				for j := range y {
					obj += y[j] * mp.need[j]
				}
				if obj <= obj/best*(1+lpGap) {
					return mp
				}
				mp.cols = append(mp.cols, *enterCol)
				enter = len(mp.cols) - 1
			}
		}
		// d = B⁻¹ · column.
		for r := range d {
			d[r] = 0
			if enter < 0 {
				d[r] = -mp.binv[r][-1-enter]
				continue
			}
			for k, c := range mp.cols[enter].cnt {
				if c != 0 {
					d[r] += mp.binv[r][k] * float64(c)
				}
			}
		}
		leave, theta := -1, math.Inf(1)
		for r := range d {
			if d[r] > lpEps {
				if t := mp.xb[r] / d[r]; t < theta-1e-12 {
					leave, theta = r, t
				}
			}
		}
		if leave < 0 {
			return mp // unbounded cannot happen with positive prices; stop
		}
		for r := range mp.xb {
			if r != leave {
				mp.xb[r] -= theta * d[r]
				if mp.xb[r] < 0 {
					mp.xb[r] = 0
				}
			}
		}
		mp.xb[leave] = theta
		piv := d[leave]
		row := mp.binv[leave]
		for j := range row {
			row[j] /= piv
		}
		for r := range mp.binv {
			if r == leave || d[r] == 0 {
				continue
			}
			f := d[r]
			br := mp.binv[r]
			for j := range br {
				br[j] -= f * row[j]
			}
		}
		mp.basic[leave] = enter
	}
	return mp
}

// priceItem is a shape as pricePattern sees it on one candidate.
type priceItem struct {
	k   int
	d   float64 // worth per share of the node
	ex  map[string]string
	req vec
}

func (it priceItem) extraLabels() map[string]string { return it.ex }

// pricePattern packs candidate at with the pods worth most (dual y) for the
// room they take, two ways: by worth per share of the whole node, taking as
// many as fit in that order, and by worth per share of the room left,
// re-judged after each take among the few shapes worth most (which mixes
// CPU-bound with memory-bound pods on one node). It returns the better pattern
// and its worth.
func (s *solver) pricePattern(pool *poolInfo, at slot, shapes []*shapeSet, y []float64, need []int, exact bool, budget *int) (*pattern, float64) {
	c := &pool.cands[at.z][at.i]
	nd := len(s.dims.names)
	items := make([]priceItem, 0, len(shapes))
	for k, sh := range shapes {
		if y[k] > lpEps && need[k] > 0 && sh.req.fits(c.avail) && sh.takes(s, pool, at) {
			items = append(items, priceItem{k, y[k] / shareOf(&sh.req, &c.avail, nd), sh.cls.perPool[pool.idx].extra, sh.req})
		}
	}
	*budget -= len(shapes)
	if len(items) == 0 {
		return nil, 0
	}
	slices.SortStableFunc(items, func(a, b priceItem) int {
		switch {
		case a.d > b.d:
			return -1
		case a.d < b.d:
			return 1
		}
		return 0
	})
	m := len(shapes)
	best := make([]int32, m)
	bestV := 0.0
	cnt := make([]int32, m)
	var extra map[string]string
	room := c.avail
	take := func(it *priceItem, n int) {
		for range n {
			room = room.sub(it.req)
		}
		cnt[it.k] += int32(n)
		if len(it.ex) > 0 {
			if extra == nil {
				extra = map[string]string{}
			}
			for key, v := range it.ex {
				extra[key] = v
			}
		}
	}
	agrees := func(it *priceItem) bool { return len(it.ex) == 0 || extraAgrees(extra, it.ex) }
	keep := func() {
		v := 0.0
		for k, n := range cnt {
			v += y[k] * float64(n)
		}
		if v > bestV*(1+1e-12) {
			copy(best, cnt)
			bestV = v
		}
		clear(cnt)
		extra, room = nil, c.avail
	}
	// By worth per share of the node, as many as fit.
	for i := range items {
		it := &items[i]
		if agrees(it) {
			if n := min(need[it.k], copiesFit(it.req, room)); n > 0 {
				take(it, n)
			}
		}
	}
	*budget -= len(items)
	keep()
	// By worth per share of the room left, among the few worth most.
	top := items[:min(len(items), 8)]
	for {
		*budget -= len(top)
		pick, score := -1, 0.0
		for i := range top {
			it := &top[i]
			if int(cnt[it.k]) >= need[it.k] || !it.req.fits(room) || !agrees(it) {
				continue
			}
			if sc := y[it.k] / shareOf(&it.req, &room, nd); sc > score {
				pick, score = i, sc
			}
		}
		if pick < 0 {
			break
		}
		it := &top[pick]
		n := min(need[it.k]-int(cnt[it.k]), copiesFit(it.req, room))
		take(it, max(1, (n+1)/2))
	}
	// What is left of the room goes to the others, in worth order.
	for i := len(top); i < len(items); i++ {
		it := &items[i]
		if agrees(it) {
			if n := min(need[it.k]-int(cnt[it.k]), copiesFit(it.req, room)); n > 0 {
				take(it, n)
			}
		}
	}
	keep()
	// Few shapes: search the counts exactly (branch and bound, bounded work),
	// starting from the greedy packings' best as the incumbent.
	if exact && len(items) <= bbItems && !anyExtra(items) {
		nodes := bbNodes
		// suffix[i][d]: the best worth per unit of dimension d among items[i:]
		// (infinite when one of them does not use d).
		suffix := make([][maxDims]float64, len(items)+1)
		for i := len(items) - 1; i >= 0; i-- {
			suffix[i] = suffix[i+1]
			for d := 0; d < nd; d++ {
				per := math.Inf(1)
				if r := items[i].req[d]; r > 0 {
					per = y[items[i].k] / float64(r)
				}
				suffix[i][d] = math.Max(suffix[i][d], per)
			}
		}
		var dfs func(i int, room vec, v float64)
		dfs = func(i int, room vec, v float64) {
			if nodes <= 0 {
				return
			}
			nodes--
			if v > bestV*(1+1e-12) {
				copy(best, cnt)
				bestV = v
			}
			if i == len(items) {
				return
			}
			// Bound: per dimension, the remaining room at the best worth per
			// unit any remaining shape offers there; the least of them.
			ub := math.Inf(1)
			for d := 0; d < nd; d++ {
				if b := suffix[i][d] * float64(max(room[d], 0)); b < ub {
					ub = b
				}
			}
			if v+ub <= bestV*(1+1e-12) {
				return
			}
			it := &items[i]
			n := min(need[it.k], copiesFit(it.req, room))
			r := room
			for range n {
				r = r.sub(it.req)
			}
			for ; n >= 0; n-- {
				cnt[it.k] = int32(n)
				dfs(i+1, r, v+y[it.k]*float64(n))
				r = r.add(it.req)
			}
			cnt[it.k] = 0
		}
		clear(cnt)
		dfs(0, c.avail, 0)
		*budget -= (bbNodes - nodes) * nd
	}
	if bestV <= 0 {
		return nil, 0
	}
	return &pattern{at: at, cnt: best, price: c.price}, bestV
}

// anyExtra reports whether some item asks its node for custom labels (the
// exact search does not track them).
func anyExtra[T interface{ extraLabels() map[string]string }](items []T) bool {
	for _, it := range items {
		if len(it.extraLabels()) > 0 {
			return true
		}
	}
	return false
}

// shareOf is dominantShare over the first nd dimensions (those the solve
// tracks), without the generic loop's math.Max.
func shareOf(req, room *vec, nd int) float64 {
	f := 0.0
	for d := 0; d < nd; d++ {
		r := req[d]
		if r == 0 {
			continue
		}
		if room[d] <= 0 {
			return math.Inf(1)
		}
		if x := float64(r) / float64(room[d]); x > f {
			f = x
		}
	}
	return f
}

// polish empties the least-used bins into the room the others have left on
// their types, least used first, then each bin shrinks to the cheapest type
// that holds it (the caller's cheapestFor).
func (s *solver) polish(pool *poolInfo, bins []*bin, budget *int) []*bin {
	use := func(b *bin) float64 { return dominantShare(b.used, pool.cands[b.at.z][b.at.i].avail) }
	order := slices.Clone(bins)
	slices.SortStableFunc(order, func(a, b *bin) int {
		ua, ub := use(a), use(b)
		switch {
		case ua < ub:
			return -1
		case ua > ub:
			return 1
		}
		return 0
	})
	gone := map[*bin]bool{}
	for _, b := range order[:min(len(order), 16)] {
		if *budget <= 0 {
			break
		}
		// Where each pod would go: the fullest bin that has room (best fit).
		dest := make([]*bin, len(b.pods))
		added := map[*bin]vec{}
		okAll := true
		for i, p := range b.pods {
			*budget -= len(bins)
			var to *bin
			toUse := -1.0
			for _, o := range bins {
				if o == b || gone[o] || o.at.z != b.at.z && !zoneFree(p) || !s.accepts(pool, o.at, p.cls) ||
					!extraAgrees(o.extra, p.cls.perPool[pool.idx].extra) {
					continue
				}
				room := pool.cands[o.at.z][o.at.i].avail.sub(o.used).sub(added[o])
				if !p.req.fits(room) {
					continue
				}
				if u := use(o); u > toUse {
					to, toUse = o, u
				}
			}
			if to == nil {
				okAll = false
				break
			}
			dest[i] = to
			added[to] = added[to].add(p.req)
		}
		if !okAll {
			continue
		}
		for i, p := range b.pods {
			o := dest[i]
			o.pods = append(o.pods, p)
			o.used = o.used.add(p.req)
			o.addExtra(p.cls.perPool[pool.idx].extra)
		}
		gone[b] = true
	}
	return s.mergePairs(pool, without(bins, gone), budget)
}

// addExtra adds the custom labels a pod's class asks its node to carry.
func (b *bin) addExtra(ex map[string]string) {
	if len(ex) == 0 {
		return
	}
	if b.extra == nil {
		b.extra = map[string]string{}
	}
	for k, v := range ex {
		b.extra[k] = v
	}
}

// without is bins less those gone, in order (in place).
func without(bins []*bin, gone map[*bin]bool) []*bin {
	out := bins[:0]
	for _, b := range bins {
		if !gone[b] {
			out = append(out, b)
		}
	}
	return out
}

// mergePairs merges two bins of a zone into one node when the cheapest type
// that holds both costs less than the two do, least-used bins first.
func (s *solver) mergePairs(pool *poolInfo, bins []*bin, budget *int) []*bin {
	price := func(b *bin) float64 {
		if i := s.cheapestFor(pool, b.at.z, b.used, b.pods); i >= 0 {
			return pool.cands[b.at.z][i].price
		}
		return pool.cands[b.at.z][b.at.i].price
	}
	order := slices.Clone(bins)
	slices.SortStableFunc(order, func(a, b *bin) int { return cmp.Compare(price(a), price(b)) })
	order = order[:min(len(order), 24)]
	gone := map[*bin]bool{}
	for i, a := range order {
		for _, b := range order[i+1:] {
			if *budget <= 0 {
				break
			}
			if gone[a] || gone[b] || a.at.z != b.at.z || !extraAgrees(a.extra, b.extra) {
				continue
			}
			*budget -= len(pool.cands[a.at.z])
			both := append(slices.Clone(a.pods), b.pods...)
			j := s.cheapestFor(pool, a.at.z, a.used.add(b.used), both)
			if j < 0 || pool.cands[a.at.z][j].price >= (price(a)+price(b))*(1-1e-9) {
				continue
			}
			a.pods, a.used, a.at.i = both, a.used.add(b.used), j
			a.addExtra(b.extra)
			gone[b] = true
		}
	}
	return without(bins, gone)
}

// zoneFree reports whether a pod may change zones in a repack: it carries no
// topology and binds no host port.
func zoneFree(p *podInfo) bool {
	return len(p.own) == 0 && len(p.matched) == 0 && len(p.ports) == 0
}
