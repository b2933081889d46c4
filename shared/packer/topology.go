package packer

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// groupKind is the role of a topology group.
type groupKind int

const (
	kindSpread groupKind = iota
	kindAffinity
	kindAntiAffinity
)

func (k groupKind) String() string {
	return [...]string{"topology spread", "pod affinity", "pod anti-affinity"}[k]
}

// level is the set of domains of one topology key. A group counts matching pods
// per domain of its level, and one check (domainOK) compares those counts the same
// way at every level; levels differ only in what their domains are. The hostname
// key has a domain per node, plus an empty one for every node a pool could still
// open; the zone key one per zone.
type level struct {
	key  string
	name string // short name for messages
	// host marks the hostname level: its domains are node ids, and a node not yet
	// opened is domain -1.
	host bool
}

// domainOf is n's domain at level lv, -1 when it has none (a node without a
// known zone).
func (lv *level) domainOf(n *node) int {
	if lv.host {
		return n.id
	}
	return n.z
}

// topoGroup is one distinct (kind, topology key, selector, namespaces) term: every
// pod owning such a term shares the group's counts.
type topoGroup struct {
	id       int
	kind     groupKind
	lv       *level
	selector labels.Selector
	allNS    bool
	ns       map[string]bool
	maxSkew  int32
	desc     string
	// slot indexes a node's per-group counters: for hostname groups the node is
	// the domain, and its counts (node.hc, node.ho) live on it; other levels keep
	// a node's share too (node.gc), to count only the nodes a pod may use.
	slot int

	counts    []int32 // matching pods per domain (hostname groups: on the nodes)
	owners    []int32 // pods owning the term (anti-affinity, spread) per domain
	total     int32   // matching pods anywhere
	hardOwned bool    // some pod owns this term as a hard constraint
	nodes     []*node // hostname groups: nodes with a matching pod
	hist      []int32 // hostname spread: nodes per count
}

func (g *topoGroup) matches(ns string, l labels.Set) bool {
	if !g.allNS && !g.ns[ns] {
		return false
	}
	return g.selector.Matches(l)
}

// at is g's count in domain d; a domain not opened yet (-1) holds nothing.
func (s *solver) at(g *topoGroup, d int) int32 {
	switch {
	case d < 0:
		return 0
	case g.lv.host:
		return s.nodes[d].hc[g.slot]
	}
	return g.counts[d]
}

// ownersAt is the number of g's owners in domain d.
func (s *solver) ownersAt(g *topoGroup, d int) int32 {
	switch {
	case d < 0:
		return 0
	case g.lv.host:
		return s.nodes[d].ho[g.slot]
	}
	return g.owners[d]
}

// minHost is the smallest count of matching pods on any node (hostname spread).
// Counting every node, not only the pod's eligible ones, can only lower the
// minimum, so a placement it admits never exceeds the skew Kubernetes computes.
func (g *topoGroup) minHost() int32 {
	for c, n := range g.hist {
		if n > 0 {
			return int32(c)
		}
	}
	return 0
}

func (g *topoGroup) histMove(from, to int32) {
	for int(to) >= len(g.hist) {
		g.hist = append(g.hist, 0)
	}
	if from >= 0 {
		g.hist[from]--
	}
	g.hist[to]++
}

// minOver is the smallest count over the domains set in mask (0 when none is).
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

// ownTerm is a pod's own term: the group and whether it is only a preference.
type ownTerm struct {
	g        *topoGroup
	soft     bool // ScheduleAnyway spread or preferred (anti-)affinity
	selfHits bool // the pod matches its own selector
}

// topology owns every group of one solve.
type topology struct {
	zones  []string
	host   *level
	zone   *level
	groups []*topoGroup
	byKey  map[string]*topoGroup
	byRaw  map[string]*topoGroup
	// hostSlots and nodeSlots size a node's counters (node.hc and node.ho for
	// hostname groups, node.gc for the others).
	hostSlots int
	nodeSlots int
	// labelClasses caches, per (namespace, labels), the groups a pod matches.
	labelClasses map[string][]*topoGroup
}

func newTopology(zones []string) *topology {
	return &topology{zones: zones, byKey: map[string]*topoGroup{}, byRaw: map[string]*topoGroup{}, labelClasses: map[string][]*topoGroup{},
		host: &level{key: corev1.LabelHostname, name: "hostname", host: true},
		zone: &level{key: corev1.LabelTopologyZone, name: "zone"}}
}

// levelFor returns the level of a topology key. Keys other than hostname and
// zone are not modelled; the caller reports them.
func (t *topology) levelFor(key string) (*level, error) {
	switch key {
	case t.host.key:
		return t.host, nil
	case t.zone.key:
		return t.zone, nil
	}
	return nil, fmt.Errorf("topology key %q is not supported (only %s and %s)", key, t.host.key, t.zone.key)
}

// group returns (creating) the group for a term.
func (t *topology) group(kind groupKind, key string, sel *metav1.LabelSelector, nsList []string, nsSel *metav1.LabelSelector, podNS string, maxSkew int32) (*topoGroup, error) {
	lv, err := t.levelFor(key)
	if err != nil {
		return nil, err
	}
	raw := rawTermKey(kind, key, sel, nsList, nsSel, podNS, maxSkew)
	if g, ok := t.byRaw[raw]; ok {
		return g, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector: %v", err)
	}
	if sel == nil {
		// A nil selector matches nothing, as in Kubernetes.
		s = labels.Nothing()
	}
	allNS := nsSel != nil && len(nsSel.MatchLabels) == 0 && len(nsSel.MatchExpressions) == 0
	ns := map[string]bool{}
	if !allNS {
		if len(nsList) == 0 {
			ns[podNS] = true
		}
		for _, n := range nsList {
			ns[n] = true
		}
	}
	nsKey := "*"
	if !allNS {
		names := make([]string, 0, len(ns))
		for n := range ns {
			names = append(names, n)
		}
		sort.Strings(names)
		nsKey = strings.Join(names, ",")
	}
	k := fmt.Sprintf("%d|%s|%s|%s|%d", kind, key, s.String(), nsKey, maxSkew)
	if g, ok := t.byKey[k]; ok {
		t.byRaw[raw] = g
		return g, nil
	}
	g := &topoGroup{id: len(t.groups), kind: kind, lv: lv, selector: s, allNS: allNS, ns: ns, maxSkew: maxSkew}
	// Every group exists before the first node does (preparePods makes them all),
	// so a node's counters are sized once.
	if lv.host {
		g.slot = t.hostSlots
		t.hostSlots++
	} else {
		g.slot = t.nodeSlots
		t.nodeSlots++
		g.counts = make([]int32, len(t.zones))
		g.owners = make([]int32, len(t.zones))
	}
	g.desc = fmt.Sprintf("%s on %s for pods matching %q", kind, lv.name, s.String())
	t.groups = append(t.groups, g)
	t.byKey[k] = g
	t.byRaw[raw] = g
	return g, nil
}

// rawTermKey identifies a term as written, so the many pods of one workload
// share a group without converting their selectors again.
func rawTermKey(kind groupKind, key string, sel *metav1.LabelSelector, nsList []string, nsSel *metav1.LabelSelector, podNS string, maxSkew int32) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(kind)))
	b.WriteByte('|')
	b.WriteString(key)
	b.WriteByte('|')
	writeSelector(&b, sel)
	b.WriteByte('|')
	for _, n := range nsList {
		b.WriteString(n)
		b.WriteByte(',')
	}
	b.WriteByte('|')
	if nsSel != nil {
		b.WriteByte('S')
		writeSelector(&b, nsSel)
	}
	b.WriteByte('|')
	b.WriteString(podNS)
	b.WriteByte('|')
	b.WriteString(strconv.Itoa(int(maxSkew)))
	return b.String()
}

func writeSelector(b *strings.Builder, sel *metav1.LabelSelector) {
	if sel == nil {
		b.WriteString("<nil>")
		return
	}
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(sel.MatchLabels[k])
		b.WriteByte(';')
	}
	for _, e := range sel.MatchExpressions {
		b.WriteString(e.Key)
		b.WriteByte(' ')
		b.WriteString(string(e.Operator))
		for _, v := range e.Values {
			b.WriteByte(' ')
			b.WriteString(v)
		}
		b.WriteByte(';')
	}
}

// matching returns the groups whose selector matches a pod with these labels.
func (t *topology) matching(ns string, l map[string]string) []*topoGroup {
	key := labelsKey(ns, l)
	if gs, ok := t.labelClasses[key]; ok {
		return gs
	}
	var gs []*topoGroup
	set := labels.Set(l)
	for _, g := range t.groups {
		if g.matches(ns, set) {
			gs = append(gs, g)
		}
	}
	t.labelClasses[key] = gs
	return gs
}

func labelsKey(ns string, l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(ns)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(l[k])
	}
	return b.String()
}

// domainOK is the one topology check, the same at every level: whether p, bound
// by a, may land in domain d of lv (-1: a node not opened yet). It judges p's own
// spread, affinity and anti-affinity terms on that level, other pods'
// anti-affinity (which is symmetric) and, while a binds them, the hard spread
// constraints of other pods p would count for.
func (s *solver) domainOK(p *podInfo, a *attempt, lv *level, d int) bool {
	for _, t := range p.own {
		g := t.g
		if g.lv != lv || !a.binds(t) {
			continue
		}
		switch g.kind {
		case kindSpread:
			v := s.spreadView(a, g, true)
			if !v.isDomain(d) || v.count(s, d)+self(t.selfHits)-v.min > g.maxSkew {
				return false
			}
		case kindAffinity:
			if s.at(g, d) == 0 && !(g.total == 0 && t.selfHits) {
				return false
			}
		case kindAntiAffinity:
			if s.at(g, d) > 0 {
				return false
			}
		}
	}
	for _, g := range p.matched {
		if g.lv != lv {
			continue
		}
		if g.kind == kindAntiAffinity && s.ownersAt(g, d) > 0 {
			return false
		}
		// A pod that only matches another pod's spread selector may not push a
		// domain that hosts such an owner past the skew; elsewhere it is free,
		// because Kubernetes checks the skew only where an owner lands.
		if a.othersSpread && g.kind == kindSpread && g.hardOwned && !p.ownsHard(g) && s.ownersAt(g, d) > 0 {
			if s.at(g, d)+1-s.spreadView(a, g, false).min > g.maxSkew {
				return false
			}
		}
	}
	return true
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
	// own: the view of a pod owning the constraint, whose counts include only the
	// nodes its required node affinity selects; otherwise every node counts.
	own     bool
	counts  []int32 // per domain; nil: the group's own counts
	min     int32
	domains uint64 // zone level; every node is a hostname domain
}

func (v *spreadView) isDomain(d int) bool {
	return v.g.lv.host || v.domains&(1<<uint(d)) != 0
}

func (v *spreadView) count(s *solver, d int) int32 {
	if v.counts == nil {
		return s.at(v.g, d)
	}
	return v.counts[d]
}

// spreadView returns (caching per attempt) the view of g for p's own constraint
// (own) or another pod's. At hostname level the minimum is zero while a pool can
// still open a node for the pod, otherwise the emptiest node's count; at zone
// level it is taken over the zones that count as domains for the pod.
func (s *solver) spreadView(a *attempt, g *topoGroup, own bool) spreadView {
	if g.lv.host {
		v := spreadView{g: g, own: own}
		if !a.canLaunch {
			v.min = g.minHost()
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
	v := spreadView{g: g, own: own, domains: a.domains}
	if own {
		v.counts = s.eligibleCounts(g, a.hard)
	}
	counts := v.counts
	if counts == nil {
		counts = g.counts
	}
	v.min = minOver(counts, a.domains)
	if a.nviews < len(a.views) {
		a.views[a.nviews] = v
		a.nviews++
	} else {
		a.moreViews = append(a.moreViews, v)
	}
	return v
}

// eligibleCounts returns a group's matching pods per domain, counting only nodes
// the class's node affinity selects; nil for a class without one, whose counts
// are the group's own.
func (s *solver) eligibleCounts(g *topoGroup, hard *podClass) []int32 {
	if hard.generic {
		return nil
	}
	counts := make([]int32, len(g.counts))
	for _, n := range s.nodes {
		d := g.lv.domainOf(n)
		if d < 0 || n.gc == nil || n.gc[g.slot] == 0 || !s.eligible(n, hard) {
			continue
		}
		counts[d] += n.gc[g.slot]
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

// zoneMask returns the zones whose zone-level topology admits p.
func (s *solver) zoneMask(p *podInfo, a *attempt) uint64 {
	var mask uint64
	for z := range s.zones {
		if s.domainOK(p, a, s.topo.zone, z) {
			mask |= 1 << uint(z)
		}
	}
	return mask
}

// zoneBound reports whether p has zone-level constraints, which nodes without a
// known zone cannot be checked against.
func (s *solver) zoneBound(p *podInfo, a *attempt) bool {
	for _, t := range p.own {
		if !t.g.lv.host && a.binds(t) {
			return true
		}
	}
	for _, g := range p.matched {
		if !g.lv.host && (g.kind == kindAntiAffinity || (a.othersSpread && g.kind == kindSpread && g.hardOwned)) {
			return true
		}
	}
	return false
}

// count adds one matching pod on n to each group.
func (s *solver) count(n *node, gs []*topoGroup) {
	for _, g := range gs {
		g.total++
		if g.lv.host {
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
		d := g.lv.domainOf(n)
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
	if g.lv.host {
		n.ho[g.slot]++
	} else if d := g.lv.domainOf(n); d >= 0 {
		g.owners[d]++
	}
}
