package check

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// A new node's requirements may allow more zones and capacity types than the
// one offering the plan chose: its launch tries that one first and, when EC2
// has no capacity there, the others. Every offering the launch may take must
// then be one the plan would be valid on, so checkFallback judges each option
// in each other allowed zone and capacity type as checkOptions judges it in
// the chosen one, and refuses a second zone (capacity type) on a node holding
// a pod that a hard topology term keyed on the zone (capacity type) counts:
// the plan checked those counts in the chosen domain only.

// hardTerm is a required topology term of a pod of the final state: a
// DoNotSchedule spread constraint or a required pod (anti-)affinity term.
type hardTerm struct {
	carrier *corev1.Pod
	key     string
	nsAll   bool
	ns      map[string]bool
	sel     labels.Selector
	what    string
}

func (t *hardTerm) counts(p *corev1.Pod) bool {
	return (t.nsAll || t.ns[p.Namespace]) && t.sel.Matches(labels.Set(p.Labels))
}

// hardTerms lists (once) the required topology terms of every pod.
func (c *checker) hardTerms() []hardTerm {
	if c.terms != nil {
		return *c.terms
	}
	var out []hardTerm
	for _, at := range c.finalPods() {
		p := at.pod
		for _, tsc := range p.Spec.TopologySpreadConstraints {
			if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
				continue
			}
			out = append(out, hardTerm{carrier: p, key: tsc.TopologyKey, ns: map[string]bool{p.Namespace: true},
				sel: withMatchLabelKeys(selectorFor(tsc.LabelSelector), p, tsc.MatchLabelKeys, nil), what: "topology spread"})
		}
		for _, kind := range []struct {
			what  string
			terms []corev1.PodAffinityTerm
		}{{"pod affinity", requiredAffinity(p)}, {"pod anti-affinity", requiredAntiAffinity(p)}} {
			what, ts := kind.what, kind.terms
			for i := range ts {
				_, g, ok := termKey(p, &ts[i])
				if !ok {
					continue
				}
				out = append(out, hardTerm{carrier: p, key: g.key, nsAll: g.nsAll, ns: g.ns, sel: g.sel, what: what})
			}
		}
	}
	c.terms = &out
	return out
}

// countedOn names, per pod, a hard term keyed by one of keys that the pod
// carries or that counts it (computed once per key set). Pods without one are
// absent.
func (c *checker) countedOn(keys ...string) map[*corev1.Pod]string {
	memo := strings.Join(keys, ",")
	if got, ok := c.counted[memo]; ok {
		return got
	}
	out := map[*corev1.Pod]string{}
	var groups []*hardTerm
	seen := map[string]bool{}
	terms := c.hardTerms()
	for i := range terms {
		t := &terms[i]
		if !slices.Contains(keys, t.key) {
			continue
		}
		if _, has := out[t.carrier]; !has {
			out[t.carrier] = "carries a required " + t.what + " on " + t.key
		}
		// Terms of one selector and namespaces count the same pods.
		ns := make([]string, 0, len(t.ns))
		for n := range t.ns {
			ns = append(ns, n)
		}
		slices.Sort(ns)
		if t.nsAll {
			ns = []string{"*"}
		}
		gk := t.key + "|" + t.sel.String() + "|" + strings.Join(ns, ",")
		if !seen[gk] {
			seen[gk] = true
			groups = append(groups, t)
		}
	}
	if len(groups) > 0 {
		for _, at := range c.finalPods() {
			if _, has := out[at.pod]; has {
				continue
			}
			for _, t := range groups {
				if t.counts(at.pod) {
					out[at.pod] = "is counted by the required " + t.what + " on " + t.key + " of pod " + PodKey(t.carrier)
					break
				}
			}
		}
	}
	if c.counted == nil {
		c.counted = map[string]map[*corev1.Pod]string{}
	}
	c.counted[memo] = out
	return out
}

// allowedValues are the values a NodeClaim's requirements admit for key (the
// In values less the NotIn ones); has is false when no In requirement names it.
func allowedValues(reqs []karpenter.NodeSelectorRequirementWithMinValues, key string) (vals []string, has bool) {
	var notIn []string
	for _, r := range reqs {
		if r.Key != key {
			continue
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			if !has {
				vals, has = slices.Clone(r.Values), true
			} else {
				vals = slices.DeleteFunc(vals, func(v string) bool { return !slices.Contains(r.Values, v) })
			}
		case corev1.NodeSelectorOpNotIn:
			notIn = append(notIn, r.Values...)
		}
	}
	return slices.DeleteFunc(vals, func(v string) bool { return slices.Contains(notIn, v) }), has
}

func (c *checker) checkFallback(v *nodeView, np *karpenter.NodePool, class string, extra map[string]string, extraSig string, distinct []podSel) {
	nn := v.newNode
	name := "new node " + nn.Name
	// A plan written without requirements (they are optional in the format)
	// names one offering.
	zones, hasZ := allowedValues(nn.Requirements, corev1.LabelTopologyZone)
	if !hasZ {
		zones = []string{nn.Zone}
	}
	cts, hasCT := allowedValues(nn.Requirements, karpenter.CapacityTypeLabelKey)
	if !hasCT {
		cts = []string{nn.CapacityType}
	}
	if !slices.Contains(zones, nn.Zone) {
		c.errorf("%s: its requirements allow zones %v, not its zone %s", name, zones, nn.Zone)
		return
	}
	if !slices.Contains(cts, nn.CapacityType) {
		c.errorf("%s: its requirements allow capacity types %v, not its %s", name, cts, nn.CapacityType)
		return
	}
	if nn.CapacityType == karpenter.CapacityTypeReserved && (len(zones) > 1 || len(cts) > 1) {
		c.errorf("%s: in capacity reservation %s, but its requirements allow zones %v and capacity types %v", name, nn.CapacityReservationID, zones, cts)
	}
	for _, p := range v.placed {
		if len(zones) > 1 {
			if why := c.countedOn(corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone, karpenter.LabelTopologyZoneID)[p]; why != "" {
				c.errorf("%s: may launch in zones %v, but pod %s %s", name, zones, PodKey(p), why)
			}
		}
		if len(cts) > 1 {
			if why := c.countedOn(karpenter.CapacityTypeLabelKey)[p]; why != "" {
				c.errorf("%s: may launch as %v, but pod %s %s", name, cts, PodKey(p), why)
			}
		}
	}
	offered := map[string]bool{nn.Zone: true}
	for _, z := range zones {
		for _, ct := range cts {
			if z == nn.Zone && ct == nn.CapacityType {
				continue // checkOptions judged it
			}
			for _, o := range nn.Options {
				it, ok := c.cat.Lookup(o)
				if !ok {
					continue
				}
				off, ok := findOffering(it, z, ct)
				if !ok || !off.Available {
					continue
				}
				offered[z] = true
				var chosen *optionFact
				if planned, ok, _ := c.nodeOffering(nn, it); ok {
					chosen = c.optionFacts(np, it, planned, extraSig, extra)
				}
				c.judgeOption(v, np, class, it, off, extra, extraSig, distinct, chosen)
			}
		}
	}
	for _, z := range zones {
		if !offered[z] {
			c.errorf("%s: its requirements allow zone %s, where none of its options is offered", name, z)
		}
	}
}

// podSel is a pod standing for every pod of the node with its node
// selection (eligibilitySig).
type podSel struct {
	sig string
	pod *corev1.Pod
}

// acceptKey is a node selection judged against an option's labels.
type acceptKey struct {
	sig string
	f   *optionFact
}

// judgeOption checks one offering a new node may launch on: allowed by the
// pool, holding the node's pods with the DaemonSets that land on it, accepted
// by every pod's node affinity. chosen, when set, is the same type's offering
// the plan chose, already judged: the node's pods fit this one as they fit
// that when the same DaemonSets land on both.
func (c *checker) judgeOption(v *nodeView, np *karpenter.NodePool, class string, it *catalog.InstanceType, off catalog.Offering,
	extra map[string]string, extraSig string, distinct []podSel, chosen *optionFact) {
	nn := v.newNode
	name := "new node " + nn.Name
	where := it.Name
	if off.Zone != nn.Zone || off.CapacityType != nn.CapacityType {
		where = strings.Join([]string{it.Name, off.CapacityType, "in", off.Zone}, " ")
	}
	oc := c.optionFacts(np, it, off, extraSig, extra)
	if oc.poolWhy != "" {
		c.errorf("%s: option %s is not allowed by pool %s: %s", name, where, np.Name, oc.poolWhy)
	}
	if chosen == nil || !slices.Equal(chosen.daemons, oc.daemons) {
		probe := &nodeView{name: nn.Name, labels: oc.labels, taints: np.Spec.Template.Spec.Taints, alloc: c.allocatable(it, c.classes[class]), placed: v.placed}
		probe.sum, probe.count = c.podSum(v)
		probe.node = oc.node
		probe.daemons = oc.daemons
		if why := c.fitProblem(probe); why != "" {
			c.errorf("%s: option %s does not fit the node's pods: %s", name, where, why)
		}
		if why := daemonPortClash(probe.daemons, v.placed); why != "" {
			c.errorf("%s: option %s: %s", name, where, why)
		}
	}
	if c.accepts == nil {
		c.accepts = map[acceptKey]bool{}
	}
	for _, sp := range distinct {
		k := acceptKey{sp.sig, oc}
		ok, seen := c.accepts[k]
		if !seen {
			ok, _ = c.affinityOf(sp.pod).Match(oc.node)
			c.accepts[k] = ok
		}
		if !ok {
			c.errorf("%s: option %s breaks the node affinity of pod %s", name, where, PodKey(sp.pod))
		}
	}
}
