package packer

import corev1 "k8s.io/api/core/v1"

// block is what turns a pod away from a place its requests fit. Its kinds are
// in the order a reason names them (see before): one of the pod's own terms,
// another pod's anti-affinity, a host port, another pod's spread constraint. i
// indexes podInfo.own (blockOwn) or podInfo.matched (blockAnti, blockSkew). The
// zero block turns nothing away.
type block struct {
	kind blockKind
	i    int32
}

type blockKind int8

const (
	blockNone blockKind = iota
	blockOwn
	blockAnti
	blockPorts
	blockSkew
	// blockUnrecorded: a label level's domain is out on an attempt that keeps
	// no record of why (see levelMask.why).
	blockUnrecorded
)

func (b block) ok() bool { return b.kind == blockNone }

// before reports whether b is the one to name rather than o: a block before
// none, then by kind, then the pod's own terms, or other pods', in their order.
func (b block) before(o block) bool {
	switch {
	case b.kind == blockNone:
		return false
	case o.kind == blockNone:
		return true
	case b.kind != o.kind:
		return b.kind < o.kind
	}
	return b.i < o.i
}

// domainOK reports whether p, bound by a, may land in domain d of lv (see
// domainBlock).
func (s *solver) domainOK(p *podInfo, a *attempt, lv *level, d int) bool {
	return s.domainBlock(p, a, lv, d).ok()
}

// domainBlock is the one topology check, the same at every level: what turns p,
// bound by a, away from domain d of lv (-1: a node not opened yet), the zero
// block when nothing does. It judges p's own spread, affinity and anti-affinity
// terms on that level, in order, then other pods' anti-affinity (which is
// symmetric) and, while a binds them, the hard spread constraints of other pods p
// would count for.
func (s *solver) domainBlock(p *podInfo, a *attempt, lv *level, d int) block {
	for i, t := range p.own {
		g := t.g
		if g.lv != lv || !a.binds(t) {
			continue
		}
		switch g.kind {
		case kindSpread:
			v := s.spreadView(a, g, true)
			if !v.isDomain(d) || v.count(s, d)+self(t.selfHits)-v.min > g.maxSkew {
				return block{blockOwn, int32(i)}
			}
		case kindAffinity:
			if s.at(g, d) == 0 && !(g.total == 0 && t.selfHits) {
				return block{blockOwn, int32(i)}
			}
		case kindAntiAffinity:
			if s.at(g, d) > 0 {
				return block{blockOwn, int32(i)}
			}
		}
	}
	for i, g := range p.matched {
		if g.lv != lv {
			continue
		}
		if g.kind == kindAntiAffinity && s.ownersAt(g, d) > 0 {
			return block{blockAnti, int32(i)}
		}
		// A pod that only matches another pod's spread selector may not push a
		// domain that hosts such an owner past the skew; elsewhere it is free,
		// because Kubernetes checks the skew only where an owner lands.
		if a.othersSpread && g.kind == kindSpread && g.hardOwned && !p.ownsHard(g) && s.ownersAt(g, d) > 0 {
			if s.at(g, d)+1-s.spreadView(a, g, false).min > g.maxSkew {
				return block{blockSkew, int32(i)}
			}
		}
	}
	return block{}
}

func self(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// spreadView is what a spread check compares a domain's count against: the
// smallest count over the domains that count, and which those are.
type spreadView struct {
	g *topoGroup
	// own: the view of a pod owning the constraint, which counts the nodes its
	// policies include (nodeAffinityPolicy, nodeTaintsPolicy); otherwise every
	// node counts.
	own     bool
	counts  []int32 // per domain; nil: the group's own counts
	min     int32
	domains bitset // nil at hostname level, where every node is a domain
}

func (v *spreadView) isDomain(d int) bool {
	return v.g.lv.kind == levelHost || v.domains.has(d)
}

func (v *spreadView) count(s *solver, d int) int32 {
	if v.counts == nil {
		return s.at(v.g, d)
	}
	if d < 0 || d >= len(v.counts) {
		return 0
	}
	return v.counts[d]
}

// spreadView returns (caching per attempt) the view of g for p's own constraint
// (own) or another pod's. At hostname level the minimum is zero while a pool can
// still open a node for the pod, otherwise the emptiest node's count; at other
// levels it is taken over the domains that count for the pod, and is zero while
// fewer of them exist than the constraint's minDomains.
func (s *solver) spreadView(a *attempt, g *topoGroup, own bool) spreadView {
	if g.lv.kind == levelHost {
		// A node the pools could still launch is an empty hostname domain: then
		// the smallest count is zero. (Another pod's view counts nodes as its
		// defaults do.)
		v := spreadView{g: g, own: own}
		honorA, honorT := true, false
		if own {
			honorA, honorT = g.honorAffinity, g.honorTaints
		}
		if !a.launches(s, honorA, honorT) {
			if own && (g.honorAffinity && !a.hard.generic || g.honorTaints) {
				v.min = s.minHostEligible(g, a.hard)
			} else {
				v.min = g.minHost()
			}
		}
		if own && g.minDomains > 1 && int(g.minDomains) > len(s.nodes)+1 {
			v.min = 0 // fewer nodes than minDomains, however they are counted
		}
		return v
	}
	for _, v := range a.views[:a.nviews] {
		if v.g == g && v.own == own {
			return v
		}
	}
	for _, v := range a.moreViews {
		if v.g == g && v.own == own {
			return v
		}
	}
	v := spreadView{g: g, own: own}
	counts := g.counts
	if own {
		v.domains = s.domainSet(g.lv, a.hard, g.honorAffinity, g.honorTaints, true)
		if sure, maybe := s.eligibleCounts(g, a.hard); sure != nil {
			counts, v.counts = sure, maybe
		}
	} else {
		v.domains = s.domainSet(g.lv, a.hard, true, false, false)
	}
	v.min = minOver(counts, v.domains)
	if own && int(g.minDomains) > v.domains.count() {
		v.min = 0
	}
	if a.nviews < len(a.views) {
		a.views[a.nviews] = v
		a.nviews++
	} else {
		a.moreViews = append(a.moreViews, v)
	}
	return v
}

// minHostEligible is the smallest count of hostname group g over the nodes its
// owner's policies include for a pod of class hard (nodeAffinityPolicy Honor:
// those its required node affinity may select; nodeTaintsPolicy Honor: those
// whose taints it tolerates), as kube-scheduler takes it; a planned node that
// may become eligible counts, which keeps the minimum on the safe side. 0 when
// no node is included.
func (s *solver) minHostEligible(g *topoGroup, hard *podClass) int32 {
	byAffinity := g.honorAffinity && !hard.generic
	min := int32(-1)
	for _, n := range s.nodes {
		if g.honorTaints && !tolerated(hard.tolerations, n.taintsNow(), false) {
			continue
		}
		if byAffinity {
			if _, may := s.eligibility(n, hard); !may {
				continue
			}
		}
		if c := n.hc[g.slot]; min < 0 || c < min {
			min = c
			if min == 0 {
				return 0
			}
		}
	}
	return max(min, 0)
}

// domainKey identifies a domain set (see domainSet).
type domainKey struct {
	lv                             *level
	class                          int
	honorA, honorT, filterExisting bool
	gen                            int // solver.exhaustGen
}

// domainSet returns (cached per solve) the domains of lv that count for a pod of
// class hard: the values of the nodes the pools could launch (a pool its limits
// exhausted launches none: kube-scheduler will see no node there) and of the
// nodes that exist. Under honorA only nodes its required node affinity selects count,
// under honorT only nodes whose taints it tolerates; filterExisting applies them
// to existing nodes too (the view of another pod's constraint counts every
// existing node). Planned nodes add no domain: each is a candidate of a pool.
func (s *solver) domainSet(lv *level, hard *podClass, honorA, honorT, filterExisting bool) bitset {
	k := domainKey{lv, hard.id, honorA, honorT, filterExisting, s.exhaustGen}
	if d, ok := s.domainSets[k]; ok {
		return d
	}
	n := len(s.zones)
	if lv.kind == levelLabel {
		n = len(lv.values)
	}
	set := newBitset(n)
	for _, pool := range s.pools {
		if pool.unusable != "" || pool.exhausted || honorT && !tolerated(hard.tolerations, pool.taints, false) {
			continue
		}
		cp := hard.perPool[pool.idx]
		if honorA && cp.bits == nil {
			continue // no type matches the class
		}
		for z, cs := range pool.cands {
			if lv.kind == levelZone {
				if honorA && cp.labelAny[z] || !honorA && len(cs) > 0 {
					set.set(z)
				}
				continue
			}
			for i := range cs {
				if honorA && !bitSet(cp.bits[z], i) {
					continue
				}
				switch v := lv.cand[pool.idx][z][i]; {
				case v >= 0:
					set.set(int(v))
				case honorA && cp.extra[lv.key] != "":
					set.set(int(s.value(lv, cp.extra[lv.key])))
				default:
					for _, c := range lv.chosen[pool.idx] {
						set.set(int(c))
					}
				}
			}
		}
	}
	for _, nd := range s.nodes {
		if !nd.existing {
			if nd.pool != nil && nd.pool.exhausted && (!(honorT && filterExisting) || tolerated(hard.tolerations, nd.pool.taints, false)) {
				s.plannedDomains(&set, lv, nd, hard, honorA && filterExisting)
			}
			continue
		}
		d := s.domainOf(lv, nd)
		if d < 0 || filterExisting && (honorA && !s.eligible(nd, hard) || honorT && !tolerated(hard.tolerations, nd.taints, false)) {
			continue
		}
		if d >= len(set)*64 {
			set = append(set, make(bitset, d/64+1-len(set))...)
		}
		set.set(d)
	}
	if s.domainSets == nil {
		s.domainSets = map[domainKey]bitset{}
	}
	s.domainSets[k] = set
	return set
}

// plannedDomains adds to set the domains of lv a planned node of an exhausted
// pool lies in, or may still move to among its compatible candidates (its pool
// adds no domain for it any more); under honorA only if it may be selected.
func (s *solver) plannedDomains(set *bitset, lv *level, nd *node, hard *podClass, honorA bool) {
	if honorA {
		if _, may := s.eligibility(nd, hard); !may {
			return
		}
	}
	add := func(d int) {
		if d < 0 {
			return
		}
		if d >= len(*set)*64 {
			*set = append(*set, make(bitset, d/64+1-len(*set))...)
		}
		set.set(d)
	}
	if lv.kind != levelLabel {
		add(s.domainOf(lv, nd))
		return
	}
	if d := nd.ldom[lv.idx]; d >= 0 {
		add(int(d))
		return
	}
	vs := lv.cand[nd.pool.idx][nd.z]
	for i, v := range vs {
		if bitSet(nd.compat, i) {
			add(int(v))
		}
	}
	for _, c := range lv.chosen[nd.pool.idx] {
		add(int(c))
	}
}

// eligibleCounts returns a group's matching pods per domain, counting only the
// nodes its policies include for a pod of class hard; nil when they include
// every node, whose counts are the group's own. A planned node may still change
// type to any candidate it is compatible with, so it may become eligible or stop
// being: sure counts the nodes that are eligible whatever they end as (the
// minimum compares against those), maybe the nodes that are or may become
// eligible (a domain's own count), so both stay on the safe side.
func (s *solver) eligibleCounts(g *topoGroup, hard *podClass) (sure, maybe []int32) {
	byAffinity := g.honorAffinity && !hard.generic
	if !byAffinity && !g.honorTaints {
		return nil, nil
	}
	sure, maybe = make([]int32, len(g.counts)), make([]int32, len(g.counts))
	for _, n := range s.nodes {
		d := s.domainOf(g.lv, n)
		if d < 0 || d >= len(sure) || n.gc == nil || n.gc[g.slot] == 0 ||
			g.honorTaints && !tolerated(hard.tolerations, n.taintsNow(), false) {
			continue
		}
		is, may := true, true
		if byAffinity {
			is, may = s.eligibility(n, hard)
		}
		if is {
			sure[d] += n.gc[g.slot]
		}
		if may {
			maybe[d] += n.gc[g.slot]
		}
	}
	return sure, maybe
}

// eligibility reports whether n's labels satisfy the class's required node
// affinity whatever type it ends on (is), and whether they do or may (may).
func (s *solver) eligibility(n *node, cls *podClass) (is, may bool) {
	now := s.eligible(n, cls)
	if n.existing {
		return now, now
	}
	cp := cls.perPool[n.pool.idx]
	if cp.bits == nil {
		return now, now
	}
	all, anyOf := true, false
	for i, w := range n.compat {
		b := cp.bits[n.z][i]
		if w&b != 0 {
			anyOf = true
		}
		if w&^b != 0 {
			all = false
		}
	}
	// A label the pool will still choose a value for may change what matches,
	// if the class selects on it.
	for _, r := range n.pool.custom {
		if _, set := n.extra[r.Key]; !set && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) > 1 && n.pool.labels[r.Key] == "" && cls.selects(r.Key) {
			all = false
		}
	}
	return now && all, now || anyOf
}

// taintsNow are the taints a node has (a planned node its pool's).
func (n *node) taintsNow() []corev1.Taint {
	if n.existing {
		return n.taints
	}
	return n.pool.taints
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

// zoneMask returns the zones whose zone-level topology admits p, and notes in
// rec why each other zone does not.
func (s *solver) zoneMask(p *podInfo, a *attempt, rec *rejections) uint64 {
	rec.startZones(len(s.zones))
	var mask uint64
	for z := range s.zones {
		if b := s.domainBlock(p, a, s.topo.zone, z); b.ok() {
			mask |= 1 << uint(z)
		} else if rec != nil {
			rec.zones[z] = b
		}
	}
	return mask
}

// levelBound reports whether anything binds p at level lv on this attempt: then
// a node without a domain there cannot be checked and does not take it.
func (s *solver) levelBound(p *podInfo, a *attempt, lv *level) bool {
	for _, t := range p.own {
		if t.g.lv == lv && a.binds(t) {
			return true
		}
	}
	for _, g := range p.matched {
		if g.lv == lv && (g.kind == kindAntiAffinity || (a.othersSpread && g.kind == kindSpread && g.hardOwned)) {
			return true
		}
	}
	return false
}

// levelMask is the domains of a label level that admit a pod on one attempt.
type levelMask struct {
	lv      *level
	allowed bitset
	// needs is the term of the pod's own that keeps it off a node without the
	// key (see domainNeeder); none admits such a node: only anti-affinity binds
	// the pod on the level, and the scheduler applies it only where the key is.
	needs block
	// why is what keeps each domain out, kept only on an attempt that records.
	why []block
}

// labelMasks returns, for each label level that binds p, the domains its
// topology admits (nil when none binds it); with rec set, each mask also keeps
// why the other domains are out.
func (s *solver) labelMasks(p *podInfo, a *attempt, rec *rejections) []levelMask {
	var out []levelMask
	for _, lv := range p.levels {
		if !s.levelBound(p, a, lv) {
			continue
		}
		m := levelMask{lv: lv, allowed: newBitset(len(lv.values)), needs: s.domainNeeder(p, a, lv)}
		if rec != nil {
			m.why = make([]block, len(lv.values))
		}
		for d := range lv.values {
			if b := s.domainBlock(p, a, lv, d); b.ok() {
				m.allowed.set(d)
			} else if m.why != nil {
				m.why[d] = b
			}
		}
		out = append(out, m)
	}
	return out
}

// domainNeeder is the first of p's own terms that keeps it off a node without
// lv's key: its spread or affinity on lv, where it binds. The zero block when
// none does.
func (s *solver) domainNeeder(p *podInfo, a *attempt, lv *level) block {
	for i, t := range p.own {
		if t.g.lv == lv && a.binds(t) && t.g.kind != kindAntiAffinity {
			return block{blockOwn, int32(i)}
		}
	}
	return block{}
}

// labelsOK reports whether node n, on candidate idx (planned nodes), lies in
// domains a admits on every label level that binds p; a planned node whose
// pool chooses the value passes when an admitted value is left to choose.
func (s *solver) labelsOK(n *node, idx int, cls *podClass, a *attempt) bool {
	for _, m := range a.masks {
		d := s.labelDomain(m.lv, n, idx)
		if d < 0 && !n.existing && n.ldom[m.lv.idx] == domUnpinned && len(m.lv.chosen[n.pool.idx]) > 0 {
			d = s.chooseValue(m.lv, n.pool, cls, n.extra, m.allowed)
			if d < 0 {
				return false // a node of the pool always gets one of them
			}
		}
		if !m.admits(d) {
			return false
		}
	}
	return true
}

// candOK reports whether a new node of pool on candidate i of zone z lies in
// domains a admits on every label level that binds p.
func (s *solver) candOK(pool *poolInfo, z, i int, cls *podClass, a *attempt) bool {
	return s.candBlock(pool, z, i, cls, a).ok()
}

// candBlock is what, on a label level that binds p, turns away a new node of
// pool on candidate i of zone z: the zero block when nothing does.
func (s *solver) candBlock(pool *poolInfo, z, i int, cls *podClass, a *attempt) block {
	for k := range a.masks {
		m := &a.masks[k]
		d := m.lv.cand[pool.idx][z][i]
		if d < 0 && len(m.lv.chosen[pool.idx]) > 0 {
			d = s.chooseValue(m.lv, pool, cls, nil, m.allowed)
			if d < 0 {
				// A node of the pool always gets one of them.
				return m.outOf(m.lv.chosen[pool.idx])
			}
		}
		if !m.admits(d) {
			return m.outOf([]int32{d})
		}
	}
	return block{}
}

// admits reports whether domain d (-1: the node does not carry the key) is
// admitted.
func (m *levelMask) admits(d int32) bool {
	if d < 0 {
		return m.needs.ok()
	}
	return m.allowed.has(int(d))
}

// outOf is what keeps every one of domains out (-1: a node without the key),
// the first of them to name.
func (m *levelMask) outOf(domains []int32) block {
	var out block
	for _, d := range domains {
		b := block{kind: blockUnrecorded}
		switch {
		case d < 0:
			b = m.needs
		case int(d) < len(m.why):
			b = m.why[d]
		}
		if b.before(out) {
			out = b
		}
	}
	return out
}

// domainOf is n's domain at level lv, -1 when it has none.
func (s *solver) domainOf(lv *level, n *node) int {
	switch lv.kind {
	case levelHost:
		return n.id
	case levelZone:
		return n.z
	}
	return int(s.labelDomain(lv, n, n.minIdx))
}

// count adds one matching pod on n to each group.
func (s *solver) count(n *node, gs []*topoGroup) {
	for _, g := range gs {
		g.total++
		if g.lv.kind == levelHost {
			old := n.hc[g.slot]
			n.hc[g.slot]++
			if g.kind == kindSpread {
				g.histMove(old, old+1)
			}
			if old == 0 && g.kind == kindAffinity {
				g.nodes = append(g.nodes, n)
			}
			continue
		}
		d := s.domainOf(g.lv, n)
		if d < 0 {
			continue
		}
		g.counts[d]++
		if n.gc == nil {
			n.gc = make([]int32, s.topo.nodeSlots)
		}
		n.gc[g.slot]++
	}
}

// own records an owner of g's term on n: anti-affinity is symmetric, and other
// pods' spread constraints bind where their owners are.
func (s *solver) own(n *node, g *topoGroup) {
	if g.lv.kind == levelHost {
		n.ho[g.slot]++
	} else if d := s.domainOf(g.lv, n); d >= 0 {
		g.owners[d]++
	}
}
