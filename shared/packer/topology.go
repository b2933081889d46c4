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

// topoGroup is one distinct (kind, topology key, selector, namespaces) term: every
// pod owning such a term shares the group's counts.
type topoGroup struct {
	id        int
	kind      groupKind
	hostname  bool // topology key kubernetes.io/hostname; otherwise zone
	selector  labels.Selector
	allNS     bool
	ns        map[string]bool
	maxSkew   int32
	desc      string
	slot      int // index into a node's hostname counters (hostname groups only)
	zslot     int // index into a node's zone-group counters (zone groups only)
	ownerSlot int // index into a node's owner counters (hostname anti-affinity and spread groups)

	zoneCounts []int32 // matching pods per zone
	zoneOwners []int32 // pods owning the term (anti-affinity, spread) per zone
	total      int32   // matching pods anywhere
	hardOwned  bool    // some pod owns this term as a hard constraint
	nodes      []*node // hostname groups: nodes with a matching pod
	hist       []int32 // hostname spread: nodes per count
}

func (g *topoGroup) matches(ns string, l labels.Set) bool {
	if !g.allNS && !g.ns[ns] {
		return false
	}
	return g.selector.Matches(l)
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

// minZone is the smallest zone count over the zones set in mask.
func (g *topoGroup) minZone(mask uint64) int32 {
	min := int32(-1)
	for z, c := range g.zoneCounts {
		if mask&(1<<uint(z)) == 0 {
			continue
		}
		if min < 0 || c < min {
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
	zones      []string
	groups     []*topoGroup
	byKey      map[string]*topoGroup
	byRaw      map[string]*topoGroup
	hostSlots  int
	zoneSlots  int
	ownerSlots int
	// labelClasses caches, per (namespace, labels), the groups a pod matches.
	labelClasses map[string][]*topoGroup
}

func newTopology(zones []string) *topology {
	return &topology{zones: zones, byKey: map[string]*topoGroup{}, byRaw: map[string]*topoGroup{}, labelClasses: map[string][]*topoGroup{}}
}

const (
	keyHostname = corev1.LabelHostname
	keyZone     = corev1.LabelTopologyZone
)

// group returns (creating) the group for a term. Keys other than hostname and
// zone are not modelled; the caller reports them.
func (t *topology) group(kind groupKind, key string, sel *metav1.LabelSelector, nsList []string, nsSel *metav1.LabelSelector, podNS string, maxSkew int32) (*topoGroup, error) {
	if key != keyHostname && key != keyZone {
		return nil, fmt.Errorf("topology key %q is not supported (only %s and %s)", key, keyHostname, keyZone)
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
	g := &topoGroup{
		id: len(t.groups), kind: kind, hostname: key == keyHostname, selector: s,
		allNS: allNS, ns: ns, maxSkew: maxSkew, slot: -1, ownerSlot: -1,
		zoneCounts: make([]int32, len(t.zones)), zoneOwners: make([]int32, len(t.zones)),
	}
	short := "zone"
	if !g.hostname {
		g.zslot = t.zoneSlots
		t.zoneSlots++
	}
	if g.hostname {
		short = "hostname"
		g.slot = t.hostSlots
		t.hostSlots++
		if kind == kindAntiAffinity || kind == kindSpread {
			g.ownerSlot = t.ownerSlots
			t.ownerSlots++
		}
	}
	g.desc = fmt.Sprintf("%s on %s for pods matching %q", kind, short, s.String())
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
