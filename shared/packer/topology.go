package packer

import (
	"fmt"
	"math/bits"
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
// open; the zone key one per zone; any other key (karpenter.sh/capacity-type, a
// NodePool's own label, an instance-type label) one per value (see levels.go).
type level struct {
	key  string
	name string // for messages
	kind levelKind
	// label levels: idx indexes node.ldom and attempt masks; values are the
	// domains (registered as pools, nodes and pods name them).
	idx    int
	values []string
	index  map[string]int32
	// cand[pool][zone][i] is the value a node on candidate i carries, -1 when
	// such a node does not carry the key.
	cand [][][]int32
	// chosen[pool] are the values a node of the pool may be given for a key its
	// types do not label (a multi-valued In requirement); nil otherwise.
	chosen [][]int32
	groups []*topoGroup
}

type levelKind int8

const (
	levelHost levelKind = iota
	levelZone
	levelLabel
)

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
	// Spread only: which nodes count (nodeAffinityPolicy, default Honor;
	// nodeTaintsPolicy, default Ignore) and minDomains (0 when unset).
	honorAffinity, honorTaints bool
	minDomains                 int32
	// filteredOwners: some hard owner counts only some nodes (a node selector or
	// affinity under Honor, or taints under Honor): moving a matching pod
	// between two nodes of a zone may change what such an owner counts.
	filteredOwners bool
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
	case g.lv.kind == levelHost:
		return s.nodes[d].hc[g.slot]
	case d >= len(g.counts):
		return 0
	}
	return g.counts[d]
}

// ownersAt is the number of g's owners in domain d.
func (s *solver) ownersAt(g *topoGroup, d int) int32 {
	switch {
	case d < 0:
		return 0
	case g.lv.kind == levelHost:
		return s.nodes[d].ho[g.slot]
	case d >= len(g.owners):
		return 0
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

// minOver is the smallest count over the domains in set (0 when it is empty);
// a domain past the end of counts holds none.
func minOver(counts []int32, set bitset) int32 {
	min := int32(-1)
	for w, word := range set {
		for word != 0 {
			d := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			c := int32(0)
			if d < len(counts) {
				c = counts[d]
			}
			if min < 0 || c < min {
				min = c
			}
		}
	}
	if min < 0 {
		return 0
	}
	return min
}

// bitset is a set of small integers (domains, candidates).
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool {
	return i >= 0 && i/64 < len(b) && b[i/64]&(1<<uint(i%64)) != 0
}

func (b bitset) set(i int) { b[i/64] |= 1 << uint(i%64) }

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
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
	labels []*level // levels of other keys, by level.idx
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
		host: &level{key: corev1.LabelHostname, name: "hostname", kind: levelHost},
		zone: &level{key: corev1.LabelTopologyZone, name: "zone", kind: levelZone}}
}

// levelFor returns (creating) the level of a topology key.
func (t *topology) levelFor(key string) *level {
	key = normalizedKey(key)
	switch key {
	case t.host.key:
		return t.host
	case t.zone.key:
		return t.zone
	}
	for _, lv := range t.labels {
		if lv.key == key {
			return lv
		}
	}
	lv := &level{key: key, name: key, kind: levelLabel, idx: len(t.labels), index: map[string]int32{}}
	t.labels = append(t.labels, lv)
	return lv
}

// term is one spread, affinity or anti-affinity term as a pod states it.
type term struct {
	kind  groupKind
	key   string
	sel   *metav1.LabelSelector
	ns    []string
	nsSel *metav1.LabelSelector
	podNS string
	// spread only
	maxSkew                    int32
	honorAffinity, honorTaints bool
	minDomains                 int32
}

// spreadTerm is a topology spread constraint as a term: its selector narrowed by
// the pod's own values of matchLabelKeys, as the scheduler does.
func spreadTerm(pod *corev1.Pod, ns string, c *corev1.TopologySpreadConstraint) term {
	t := term{kind: kindSpread, key: normalizedKey(c.TopologyKey), sel: withLabelKeys(c.LabelSelector, pod, c.MatchLabelKeys, nil), podNS: ns,
		maxSkew: c.MaxSkew, honorAffinity: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor,
		honorTaints: c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor}
	if c.MinDomains != nil {
		t.minDomains = *c.MinDomains
	}
	return t
}

// affinityTerm is a pod (anti-)affinity term: its selector narrowed by
// matchLabelKeys (In the pod's value) and mismatchLabelKeys (NotIn it).
func affinityTerm(kind groupKind, pod *corev1.Pod, ns string, a *corev1.PodAffinityTerm) term {
	return term{kind: kind, key: normalizedKey(a.TopologyKey), sel: withLabelKeys(a.LabelSelector, pod, a.MatchLabelKeys, a.MismatchLabelKeys),
		ns: a.Namespaces, nsSel: a.NamespaceSelector, podNS: ns}
}

// withLabelKeys adds to sel, for each key the pod has a label for, a requirement
// that matching pods carry the same value (match) or another one (mismatch). A
// nil selector stays nil: it matches nothing either way.
func withLabelKeys(sel *metav1.LabelSelector, pod *corev1.Pod, match, mismatch []string) *metav1.LabelSelector {
	if sel == nil || len(match)+len(mismatch) == 0 {
		return sel
	}
	out := sel.DeepCopy()
	for i, keys := range [2][]string{match, mismatch} {
		op := metav1.LabelSelectorOpIn
		if i == 1 {
			op = metav1.LabelSelectorOpNotIn
		}
		for _, k := range keys {
			if v, ok := pod.Labels[k]; ok {
				out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: op, Values: []string{v}})
			}
		}
	}
	return out
}

// group returns (creating) the group for a term.
func (t *topology) group(tm term) (*topoGroup, error) {
	raw := rawTermKey(tm)
	if g, ok := t.byRaw[raw]; ok {
		return g, nil
	}
	s, err := metav1.LabelSelectorAsSelector(tm.sel)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector: %v", err)
	}
	if tm.sel == nil {
		// A nil selector matches nothing, as in Kubernetes.
		s = labels.Nothing()
	}
	allNS := tm.nsSel != nil && len(tm.nsSel.MatchLabels) == 0 && len(tm.nsSel.MatchExpressions) == 0
	ns := map[string]bool{}
	if !allNS {
		if len(tm.ns) == 0 {
			ns[tm.podNS] = true
		}
		for _, n := range tm.ns {
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
	k := fmt.Sprintf("%d|%s|%s|%s|%d|%v|%v|%d", tm.kind, tm.key, s.String(), nsKey, tm.maxSkew, tm.honorAffinity, tm.honorTaints, tm.minDomains)
	if g, ok := t.byKey[k]; ok {
		t.byRaw[raw] = g
		return g, nil
	}
	lv := t.levelFor(tm.key)
	g := &topoGroup{id: len(t.groups), kind: tm.kind, lv: lv, selector: s, allNS: allNS, ns: ns, maxSkew: tm.maxSkew,
		honorAffinity: tm.honorAffinity, honorTaints: tm.honorTaints, minDomains: tm.minDomains}
	// Every group exists before the first node does (preparePods makes them all),
	// so a node's counters are sized once.
	switch lv.kind {
	case levelHost:
		g.slot = t.hostSlots
		t.hostSlots++
	case levelZone:
		g.slot = t.nodeSlots
		t.nodeSlots++
		g.counts = make([]int32, len(t.zones))
		g.owners = make([]int32, len(t.zones))
	default:
		g.slot = t.nodeSlots
		t.nodeSlots++
		g.counts = make([]int32, len(lv.values))
		g.owners = make([]int32, len(lv.values))
		lv.groups = append(lv.groups, g)
	}
	g.desc = fmt.Sprintf("%s on %s for pods matching %q", tm.kind, lv.name, s.String())
	t.groups = append(t.groups, g)
	t.byKey[k] = g
	t.byRaw[raw] = g
	return g, nil
}

// rawTermKey identifies a term as written, so the many pods of one workload
// share a group without converting their selectors again.
func rawTermKey(tm term) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(tm.kind)))
	b.WriteByte('|')
	b.WriteString(tm.key)
	b.WriteByte('|')
	writeSelector(&b, tm.sel)
	b.WriteByte('|')
	for _, n := range tm.ns {
		b.WriteString(n)
		b.WriteByte(',')
	}
	b.WriteByte('|')
	if tm.nsSel != nil {
		b.WriteByte('S')
		writeSelector(&b, tm.nsSel)
	}
	b.WriteByte('|')
	b.WriteString(tm.podNS)
	b.WriteByte('|')
	b.WriteString(strconv.Itoa(int(tm.maxSkew)))
	if tm.honorAffinity {
		b.WriteString("|A")
	}
	if tm.honorTaints {
		b.WriteString("|T")
	}
	if tm.minDomains > 0 {
		b.WriteString("|m")
		b.WriteString(strconv.Itoa(int(tm.minDomains)))
	}
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
