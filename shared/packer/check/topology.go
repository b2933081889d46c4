package check

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// podAt is a pod of the final state: running before the plan, or placed by it.
type podAt struct {
	pod    *corev1.Pod
	node   int
	placed bool
}

func (c *checker) finalPods() []podAt {
	var out []podAt
	for i, v := range c.nodes {
		for _, p := range v.running {
			out = append(out, podAt{p, i, false})
		}
		for _, p := range v.placed {
			out = append(out, podAt{p, i, true})
		}
	}
	return out
}

// domain is the node's value for a topology key; hostname falls back to the node name.
func (v *nodeView) domain(key string) (string, bool) {
	if key == corev1.LabelHostname {
		return v.hostname, true
	}
	d, ok := v.labels[key]
	return d, ok
}

func (c *checker) topology() {
	all := c.finalPods()
	c.spread(all)
	c.affinity(all)
	c.antiAffinity(all)
}

// withMatchLabelKeys narrows a selector by the pod's own values for matchLabelKeys
// (same value) and mismatchLabelKeys (any other value), as the scheduler does.
func withMatchLabelKeys(sel labels.Selector, p *corev1.Pod, keys, mismatch []string) labels.Selector {
	for op, ks := range map[selection.Operator][]string{selection.Equals: keys, selection.NotEquals: mismatch} {
		for _, k := range ks {
			if v, ok := p.Labels[k]; ok {
				r, err := labels.NewRequirement(k, op, []string{v})
				if err == nil {
					sel = sel.Add(*r)
				}
			}
		}
	}
	return sel
}

type spreadCarrier struct {
	at         podAt
	maxSkew    int32
	minDomains int32
	sig        string
}

type spreadGroup struct {
	ns, key  string
	sel      labels.Selector
	carriers []spreadCarrier
	// rep is a pod per eligibility signature, to evaluate eligibility with.
	rep map[string]spreadCarrierRep
	// seen holds the carriers' pods: each counts once.
	seen map[*corev1.Pod]bool
}

type spreadCarrierRep struct {
	pod    *corev1.Pod
	honorA bool
	honorT bool
}

// spread checks DoNotSchedule topology spread constraints on the final state.
//
// For a domain d that received placed pods carrying a constraint, take the last
// such carrier c bound into d. When c was bound, d already held every running
// matching pod and every other matching carrier placed in d, and the minimum over
// c's eligible domains was at most the final minimum. So
//
//	running(d) + matching carriers(d) − final min ≤ maxSkew
//
// holds for c in every binding order. The check asks for one carrier of d that
// satisfies it (c is unknown). When all matching placed pods carry the constraint —
// the usual Deployment case — this is exactly "final count − final min ≤ maxSkew".
// Eligible nodes follow nodeAffinityPolicy (default Honor) and nodeTaintsPolicy
// (default Ignore). Zones (and any key the catalog labels) a compatible pool can
// launch in count as domains even when empty; hostname domains are the nodes plus,
// while a pool may still launch a node the pod counts as eligible, an empty one.
func (c *checker) spread(all []podAt) {
	groups := map[string]*spreadGroup{}
	var order []string
	for _, at := range all {
		if !at.placed {
			continue
		}
		p := at.pod
		for _, tsc := range p.Spec.TopologySpreadConstraints {
			if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
				continue
			}
			sel := withMatchLabelKeys(selectorFor(tsc.LabelSelector), p, tsc.MatchLabelKeys, nil)
			// Each constraint is judged on its own: two on one key and selector
			// (say maxSkew 1, and maxSkew 2 with minDomains) are two groups.
			gk := fmt.Sprintf("%s|%s|%s|%d|%v|%v|%v", p.Namespace, tsc.TopologyKey, sel.String(), tsc.MaxSkew,
				ptrString(tsc.MinDomains), ptrString(tsc.NodeAffinityPolicy), ptrString(tsc.NodeTaintsPolicy))
			g := groups[gk]
			if g == nil {
				g = &spreadGroup{ns: p.Namespace, key: tsc.TopologyKey, sel: sel, rep: map[string]spreadCarrierRep{}, seen: map[*corev1.Pod]bool{}}
				groups[gk] = g
				order = append(order, gk)
			}
			honorA := tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
			honorT := tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
			sig := eligibilitySig(p, honorA, honorT)
			if _, ok := g.rep[sig]; !ok {
				g.rep[sig] = spreadCarrierRep{p, honorA, honorT}
			}
			md := int32(1)
			if tsc.MinDomains != nil {
				md = *tsc.MinDomains
			}
			if g.seen[p] {
				continue // the same constraint written twice binds once
			}
			g.seen[p] = true
			g.carriers = append(g.carriers, spreadCarrier{at: at, maxSkew: tsc.MaxSkew, minDomains: md, sig: sig})
		}
	}
	for _, gk := range order {
		g := groups[gk]
		type sigState struct {
			eligible []bool
			min      int
			running  map[string]int
			carriers map[string]int
			domains  int
			// minAt names the emptiest domains, marking those with no node yet.
			minAt string
		}
		states := map[string]*sigState{}
		for sig, rep := range g.rep {
			st := &sigState{eligible: make([]bool, len(c.nodes)), running: map[string]int{}, carriers: map[string]int{}}
			counts := map[string]int{}
			hasNode := map[string]bool{}
			for i, v := range c.nodes {
				d, ok := v.domain(g.key)
				if !ok {
					continue
				}
				if rep.honorA {
					if m, _ := c.affinityOf(rep.pod).Match(v.node); !m {
						continue
					}
				}
				if rep.honorT {
					if _, bad := untolerated(v.taints, rep.pod.Spec.Tolerations); bad {
						continue
					}
				}
				st.eligible[i] = true
				counts[d] += 0
				hasNode[d] = true
			}
			if g.key != corev1.LabelHostname {
				for _, d := range c.launchableValues(rep.pod, g.key, rep.honorA, rep.honorT) {
					counts[d] += 0
				}
			} else if c.canLaunchEligible(rep.pod, rep.honorA, rep.honorT) {
				// A node a pool could still launch is an empty hostname domain, as
				// Karpenter counts it: a node may not take more than maxSkew.
				counts["\x00new-node"] += 0
			}
			for _, at := range all {
				if !st.eligible[at.node] || at.pod.Namespace != g.ns || !g.sel.Matches(labels.Set(at.pod.Labels)) {
					continue
				}
				d, _ := c.nodes[at.node].domain(g.key)
				counts[d]++
				if !at.placed {
					st.running[d]++
				}
			}
			st.domains = len(counts)
			st.min = -1
			for _, n := range counts {
				if st.min < 0 || n < st.min {
					st.min = n
				}
			}
			if st.min < 0 {
				st.min = 0
			}
			var at []string
			for d, n := range counts {
				if n == st.min {
					name := d
					if d == "\x00new-node" {
						name = "a node a pool could launch"
					} else if !hasNode[d] {
						name += " (no node yet, launchable)"
					}
					at = append(at, name)
				}
			}
			sort.Strings(at)
			st.minAt = strings.Join(at, ", ")
			states[sig] = st
		}
		// Matching carriers per domain, counted on each signature's eligible nodes.
		byDomain := map[string][]spreadCarrier{}
		var domains []string
		for _, cr := range g.carriers {
			v := c.nodes[cr.at.node]
			d, ok := v.domain(g.key)
			if !ok {
				c.errorf("pod %s: topology spread on %s, but %s node %s has no %s label", PodKey(cr.at.pod), g.key, v.kind, v.name, g.key)
				continue
			}
			if _, seen := byDomain[d]; !seen {
				domains = append(domains, d)
			}
			byDomain[d] = append(byDomain[d], cr)
			if g.sel.Matches(labels.Set(cr.at.pod.Labels)) {
				for _, st := range states {
					if st.eligible[cr.at.node] {
						st.carriers[d]++
					}
				}
			}
		}
		sort.Strings(domains)
		for _, d := range domains {
			var worst string
			ok := false
			for _, cr := range byDomain[d] {
				st := states[cr.sig]
				min := st.min
				if int(cr.minDomains) > st.domains {
					min = 0
				}
				skew := st.running[d] + st.carriers[d] - min
				if skew <= int(cr.maxSkew) {
					ok = true
					break
				}
				if worst == "" {
					worst = fmt.Sprintf("pod %s in %s=%s: %d running + %d placed matching pods vs minimum %d over %d domains (in %s), skew %d > maxSkew %d",
						PodKey(cr.at.pod), g.key, d, st.running[d], st.carriers[d], min, st.domains, st.minAt, skew, cr.maxSkew)
				}
			}
			if !ok {
				c.errorf("topology spread (%s, selector %q): %s", g.key, g.sel.String(), worst)
			}
		}
	}
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func eligibilitySig(p *corev1.Pod, honorA, honorT bool) string {
	var b strings.Builder
	if honorA {
		ns, _ := json.Marshal(p.Spec.NodeSelector)
		b.Write(ns)
		if p.Spec.Affinity != nil && p.Spec.Affinity.NodeAffinity != nil {
			a, _ := json.Marshal(p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
			b.Write(a)
		}
	}
	b.WriteString("|")
	if honorT {
		t, _ := json.Marshal(p.Spec.Tolerations)
		b.Write(t)
	}
	return b.String()
}

// termGroup is one required (anti-)affinity term shared by several pods.
type termGroup struct {
	nsAll    bool
	ns       map[string]bool
	key      string
	sel      labels.Selector
	carriers []podAt
}

func (g *termGroup) matches(p *corev1.Pod) bool {
	return (g.nsAll || g.ns[p.Namespace]) && g.sel.Matches(labels.Set(p.Labels))
}

// termKey resolves a term's namespaces and selector for the pod carrying it. ok is
// false for a non-empty namespaceSelector, which needs Namespace objects the
// snapshot does not carry.
func termKey(p *corev1.Pod, t *corev1.PodAffinityTerm) (key string, g *termGroup, ok bool) {
	g = &termGroup{ns: map[string]bool{}, key: t.TopologyKey}
	if t.NamespaceSelector != nil {
		if len(t.NamespaceSelector.MatchLabels) > 0 || len(t.NamespaceSelector.MatchExpressions) > 0 {
			return "", nil, false
		}
		g.nsAll = true
	}
	for _, n := range t.Namespaces {
		g.ns[n] = true
	}
	if !g.nsAll && len(g.ns) == 0 {
		g.ns[p.Namespace] = true
	}
	g.sel = withMatchLabelKeys(selectorFor(t.LabelSelector), p, t.MatchLabelKeys, t.MismatchLabelKeys)
	names := make([]string, 0, len(g.ns))
	for n := range g.ns {
		names = append(names, n)
	}
	sort.Strings(names)
	if g.nsAll {
		names = []string{"*"}
	}
	return strings.Join(names, ",") + "|" + t.TopologyKey + "|" + g.sel.String(), g, true
}

func requiredAffinity(p *corev1.Pod) []corev1.PodAffinityTerm {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAffinity == nil {
		return nil
	}
	return p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
}

func requiredAntiAffinity(p *corev1.Pod) []corev1.PodAffinityTerm {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
		return nil
	}
	return p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
}

// affinity checks required pod affinity. A placed pod's domain must hold a matching
// pod that was there first: a running one, or a placed one that does not itself
// need this term. Otherwise the domain was started by the group itself, which the
// scheduler allows only for a pod matching its own term while no matching pod
// exists anywhere: at most one such domain, and none if a matching pod runs.
func (c *checker) affinity(all []podAt) {
	groups, order := c.termGroups(all, requiredAffinity, true)
	for _, gk := range order {
		g := groups[gk]
		isCarrier := map[*corev1.Pod]bool{}
		for _, cr := range g.carriers {
			isCarrier[cr.pod] = true
		}
		anchored := map[string]bool{}
		selfMatching := map[string]int{}
		runningAnywhere := 0
		for _, at := range all {
			if !g.matches(at.pod) {
				continue
			}
			if !at.placed {
				runningAnywhere++
			}
			d, ok := c.nodes[at.node].domain(g.key)
			if !ok {
				continue
			}
			switch {
			case !at.placed || !isCarrier[at.pod]:
				anchored[d] = true
			default:
				selfMatching[d]++
			}
		}
		seeded := map[string]bool{}
		for _, cr := range g.carriers {
			v := c.nodes[cr.node]
			d, ok := v.domain(g.key)
			if !ok {
				c.errorf("pod %s: required pod affinity on %s, but %s node %s has no %s label", PodKey(cr.pod), g.key, v.kind, v.name, g.key)
				continue
			}
			if anchored[d] {
				continue
			}
			if selfMatching[d] == 0 {
				c.errorf("pod %s on %s node %s: required pod affinity (%s, selector %q) has no matching pod in %s=%s", PodKey(cr.pod), v.kind, v.name, g.key, g.sel.String(), g.key, d)
				continue
			}
			seeded[d] = true
		}
		if len(seeded) > 1 {
			ds := make([]string, 0, len(seeded))
			for d := range seeded {
				ds = append(ds, d)
			}
			sort.Strings(ds)
			c.errorf("required pod affinity (%s, selector %q): the group starts itself in %d domains %v; only the first pod may start a domain", g.key, g.sel.String(), len(ds), ds)
		}
		if len(seeded) == 1 && runningAnywhere > 0 {
			c.errorf("required pod affinity (%s, selector %q): placed in a domain with no matching pod although %d matching pods already run elsewhere", g.key, g.sel.String(), runningAnywhere)
		}
	}
}

func (c *checker) termGroups(all []podAt, terms func(*corev1.Pod) []corev1.PodAffinityTerm, placedOnly bool) (map[string]*termGroup, []string) {
	groups := map[string]*termGroup{}
	var order []string
	for _, at := range all {
		if placedOnly && !at.placed {
			continue
		}
		ts := terms(at.pod)
		for i := range ts {
			k, g, ok := termKey(at.pod, &ts[i])
			if !ok {
				continue
			}
			if have := groups[k]; have != nil {
				g = have
			} else {
				groups[k] = g
				order = append(order, k)
			}
			g.carriers = append(g.carriers, at)
		}
	}
	return groups, order
}

// antiAffinity: no two pods share a domain where one carries a required
// anti-affinity term the other matches, unless both were already running.
func (c *checker) antiAffinity(all []podAt) {
	groups, order := c.termGroups(all, requiredAntiAffinity, false)
	reported := 0
	for _, gk := range order {
		g := groups[gk]
		placed := map[string][]*corev1.Pod{}
		running := map[string]int{}
		for _, at := range all {
			if !g.matches(at.pod) {
				continue
			}
			d, ok := c.nodes[at.node].domain(g.key)
			if !ok {
				continue
			}
			if at.placed {
				placed[d] = append(placed[d], at.pod)
			} else {
				running[d]++
			}
		}
		for _, cr := range g.carriers {
			v := c.nodes[cr.node]
			d, ok := v.domain(g.key)
			if !ok {
				continue
			}
			self := g.matches(cr.pod)
			others := len(placed[d])
			if cr.placed && self {
				others--
			}
			conflicts := others
			if cr.placed {
				r := running[d]
				conflicts += r
			}
			if conflicts <= 0 {
				continue
			}
			reported++
			if reported > 50 {
				continue
			}
			var with string
			for _, q := range placed[d] {
				if q != cr.pod {
					with = PodKey(q)
					break
				}
			}
			if with == "" {
				with = "a running pod"
			}
			c.errorf("pod %s on %s node %s: required anti-affinity (%s, selector %q) broken by %s in %s=%s", PodKey(cr.pod), v.kind, v.name, g.key, g.sel.String(), with, g.key, d)
		}
	}
	if reported > 50 {
		c.errorf("... and %d more anti-affinity conflicts", reported-50)
	}
}
