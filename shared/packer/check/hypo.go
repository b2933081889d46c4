package check

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// hypoNode is a node a pool could launch: one available offering of one instance
// type the pool's requirements allow.
type hypoNode struct {
	pool *karpenter.NodePool
	typ  *catalog.InstanceType
	off  catalog.Offering
	view *nodeView
}

// hypotheticals lists, once, every node any pool could launch.
func (c *checker) hypotheticals() []hypoNode {
	if c.hypoDone {
		return c.hypo
	}
	c.hypoDone = true
	pools := append([]*karpenter.NodePool(nil), c.snap.NodePools...)
	sort.SliceStable(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	for _, np := range pools {
		class := c.classFor(np.Name)
		for ti := range c.cat.InstanceTypes {
			it := &c.cat.InstanceTypes[ti]
			var alloc corev1.ResourceList
			for _, off := range it.Offerings {
				if !off.Available {
					continue
				}
				lbl := map[string]string{}
				for k, v := range c.expectedLabels(np, it, off) {
					lbl[k] = v
				}
				lbl = asNodeLabels(lbl)
				// Karpenter labels a node with a custom key's value when the pool
				// pins one value.
				for _, r := range np.Spec.Template.Spec.Requirements {
					if _, has := lbl[r.Key]; !has && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
						lbl[r.Key] = r.Values[0]
					}
				}
				if poolAllows(np, lbl) != "" {
					continue
				}
				if alloc == nil {
					alloc = c.allocatable(it, class)
				}
				v := &nodeView{name: "hypothetical-" + it.Name, kind: "hypothetical", labels: lbl, taints: np.Spec.Template.Spec.Taints, alloc: alloc, pool: np.Name}
				v.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: v.name, Labels: lbl}}
				c.hypo = append(c.hypo, hypoNode{pool: np, typ: it, off: off, view: v})
			}
		}
	}
	return c.hypo
}

// launchableValues lists the values of key on nodes a pool could launch, within
// what its limits leave after the plan, that the pod counts as eligible (its node
// affinity when honoured, the pool's taints when honoured). A value no pool can
// launch into any more has no node kube-scheduler could count.
func (c *checker) launchableValues(p *corev1.Pod, key string, honorA, honorT bool) []string {
	memo := key + "#" + eligibilitySig(p, honorA, honorT)
	if vals, ok := c.launchMemo[memo]; ok {
		return vals
	}
	seen := map[string]bool{}
	var out []string
	for _, h := range c.hypotheticals() {
		if honorT {
			if _, bad := untolerated(h.view.taints, p.Spec.Tolerations); bad {
				continue
			}
		}
		if !c.withinLimits(h) {
			continue
		}
		// A key the type does not label takes, on a node Karpenter launches, one
		// of the values the pool's In requirement on it allows.
		vals := []string{h.view.labels[key]}
		node := h.view.node
		if _, ok := h.view.labels[key]; !ok {
			vals = poolValues(h.pool, key)
		}
		for _, val := range vals {
			if seen[val] {
				continue
			}
			if honorA {
				if _, ok := h.view.labels[key]; !ok {
					lbl := maps.Clone(h.view.labels)
					lbl[key] = val
					node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.view.name, Labels: lbl}}
				}
				if m, _ := c.affinityOf(p).Match(node); !m {
					continue
				}
			}
			seen[val] = true
			out = append(out, val)
		}
	}
	sort.Strings(out)
	if c.launchMemo == nil {
		c.launchMemo = map[string][]string{}
	}
	c.launchMemo[memo] = out
	return out
}

// poolValues are the values a pool's In requirements on key allow.
func poolValues(np *karpenter.NodePool, key string) []string {
	var out []string
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == key && r.Operator == corev1.NodeSelectorOpIn {
			out = append(out, r.Values...)
		}
	}
	return out
}

// canLaunchEligible reports whether some pool, within what its limits leave after
// the plan, could launch a node the pod would count as eligible for spread.
func (c *checker) canLaunchEligible(p *corev1.Pod, honorA, honorT bool) bool {
	memo := "#launch#" + eligibilitySig(p, honorA, honorT)
	if vals, ok := c.launchMemo[memo]; ok {
		return len(vals) > 0
	}
	found := false
	for _, h := range c.hypotheticals() {
		if honorA {
			if m, _ := c.affinityOf(p).Match(h.view.node); !m {
				continue
			}
		}
		if honorT {
			if _, bad := untolerated(h.view.taints, p.Spec.Tolerations); bad {
				continue
			}
		}
		if c.withinLimits(h) {
			found = true
			break
		}
	}
	if c.launchMemo == nil {
		c.launchMemo = map[string][]string{}
	}
	if found {
		c.launchMemo[memo] = []string{"yes"}
	} else {
		c.launchMemo[memo] = nil
	}
	return found
}

// withinLimits reports whether one more node like h fits in what its pool's limits
// leave after the existing, in-flight and planned nodes.
func (c *checker) withinLimits(h hypoNode) bool {
	lim := h.pool.Spec.Limits
	if len(lim) == 0 {
		return true
	}
	if c.room == nil {
		c.room = map[string]corev1.ResourceList{}
	}
	left, ok := c.room[h.pool.Name]
	if !ok {
		used, planned := c.poolUsage(h.pool.Name)
		left = corev1.ResourceList{}
		for rn, q := range lim {
			l := q.DeepCopy()
			if u, ok := used[rn]; ok {
				l.Sub(u)
			}
			if pl, ok := planned[rn]; ok {
				l.Sub(pl)
			}
			left[rn] = l
		}
		c.room[h.pool.Name] = left
	}
	capacity := typeCapacity(h.typ)
	capacity[karpenter.ResourceLimitsNodes] = *resourceOne()
	for rn, l := range left {
		if q, ok := capacity[rn]; ok && exceeds(rn, q, l) {
			return false
		}
	}
	return true
}

// untolerated returns the first NoSchedule or NoExecute taint the tolerations do not
// tolerate.
func untolerated(taints []corev1.Taint, tolerations []corev1.Toleration) (corev1.Taint, bool) {
	if len(taints) == 0 {
		return corev1.Taint{}, false
	}
	return corev1helpersFind(taints, tolerations)
}

var quiet = klog.Background()

// unschedulable flags a pod the plan gives up on although, with no topology,
// affinity or host-port constraint to weigh, a single new node of some pool could
// take it: an available offering the pool and the pod allow, whose allocatable
// (less the DaemonSets that would land there) holds the pod, within the pool's
// limits left after the plan's own new nodes.
func (c *checker) unschedulable() {
	var repel []repeller
	for _, u := range c.plan.Unschedulable {
		p := c.pods[u.Pod]
		if p == nil || !unconstrained(p) || negativeQuantity(p) || c.snap.Volumes != nil && hasClaims(p) {
			continue
		}
		if repel == nil {
			repel = c.repellers()
		}
		if why := c.couldLaunchFor(p, repel); why != "" {
			c.errorf("suspicious unschedulable: pod %s (%q) fits %s", u.Pod, u.Reason, why)
		}
	}
}

// repeller is a required anti-affinity term of the final state and the domains
// its carriers occupy: a pod it matches may not join them (anti-affinity is
// symmetric).
type repeller struct {
	g       *termGroup
	domains map[string]bool
}

// repellers lists the required anti-affinity terms of running and placed pods on
// keys other than hostname (a new node is a fresh hostname domain).
func (c *checker) repellers() []repeller {
	out := []repeller{}
	all := c.finalPods()
	groups, order := c.termGroups(all, requiredAntiAffinity, false)
	for _, k := range order {
		g := groups[k]
		if g.key == corev1.LabelHostname {
			continue
		}
		r := repeller{g: g, domains: map[string]bool{}}
		for _, at := range g.carriers {
			if d, ok := c.nodes[at.node].domain(g.key); ok {
				r.domains[d] = true
			}
		}
		out = append(out, r)
	}
	return out
}

// repels reports whether a node like h would put p in a domain a repeller
// holds. A key the node's type does not label takes one of the values its pool
// allows: the node is judged by the best of them.
func (r repeller) repels(p *corev1.Pod, h hypoNode) bool {
	if !r.g.matches(p) {
		return false
	}
	if v, ok := h.view.labels[r.g.key]; ok {
		return r.domains[v]
	}
	vals := poolValues(h.pool, r.g.key)
	for _, v := range vals {
		if !r.domains[v] {
			return false
		}
	}
	return len(vals) > 0
}

func unconstrained(p *corev1.Pod) bool {
	for _, t := range p.Spec.TopologySpreadConstraints {
		if t.WhenUnsatisfiable == corev1.DoNotSchedule {
			return false
		}
	}
	return len(requiredAffinity(p)) == 0 && len(requiredAntiAffinity(p)) == 0 && len(podHostPorts(p)) == 0
}

func (c *checker) couldLaunchFor(p *corev1.Pod, repel []repeller) string {
	for _, h := range c.hypotheticals() {
		v := h.view
		if !c.podAccepts(p, v) || slices.ContainsFunc(repel, func(r repeller) bool { return r.repels(p, h) }) {
			continue
		}
		probe := &nodeView{name: v.name, labels: v.labels, taints: v.taints, alloc: v.alloc, node: v.node, placed: []*corev1.Pod{p}}
		c.matchDaemonSets(probe)
		if c.fitProblem(probe) != "" || !c.withinLimits(h) || !c.minValuesReachable(p, h) {
			continue
		}
		return fmt.Sprintf("a new %s %s node in %s of pool %s", h.typ.Name, h.off.CapacityType, h.off.Zone, h.pool.Name)
	}
	return ""
}

// maxOptions is how many options a NodeClaim lists (CreateFleet's override
// limit, Karpenter's and Joiner's default).
const maxOptions = 60

// minValuesReachable reports whether a node like h holding p alone could list
// options spanning the pool's minValues: the cheapest maxOptions launchable
// types of its zone and capacity type, no cheaper than h's, that take p (fit,
// DaemonSets, node selection) within the pool's limits and, when the pool has
// limits, no larger than h's type in the limited resources (Joiner's documented
// rule for pools with both, so that no fallback can break the limits).
func (c *checker) minValuesReachable(p *corev1.Pod, h hypoNode) bool {
	var reqs []karpenter.NodeSelectorRequirementWithMinValues
	for _, r := range h.pool.Spec.Template.Spec.Requirements {
		if r.MinValues != nil && !offeringDecided(r.Key) {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) == 0 {
		return true
	}
	type option struct {
		price  float64
		labels map[string]string
	}
	var opts []option
	hCap := typeCapacity(h.typ)
	for _, o := range c.hypotheticals() {
		if o.pool != h.pool || o.off.Zone != h.off.Zone || o.off.CapacityType != h.off.CapacityType ||
			o.off.PricePerHour < h.off.PricePerHour || !c.podAccepts(p, o.view) {
			continue
		}
		if larger(typeCapacity(o.typ), hCap, h.pool.Spec.Limits) {
			continue
		}
		probe := &nodeView{name: o.view.name, labels: o.view.labels, taints: o.view.taints, alloc: o.view.alloc, node: o.view.node, placed: []*corev1.Pod{p}}
		c.matchDaemonSets(probe)
		if c.fitProblem(probe) != "" || !c.withinLimits(o) {
			continue
		}
		opts = append(opts, option{o.off.PricePerHour, o.view.labels})
	}
	sort.SliceStable(opts, func(i, j int) bool { return opts[i].price < opts[j].price })
	if len(opts) > maxOptions {
		opts = opts[:maxOptions]
	}
	for _, r := range reqs {
		vals := map[string]bool{}
		for _, o := range opts {
			if v, ok := o.labels[r.Key]; ok {
				vals[v] = true
			}
		}
		if len(vals) < *r.MinValues {
			return false
		}
	}
	return true
}

// larger reports whether capacity a exceeds b in a resource limits names (the
// node count aside).
func larger(a, b, limits corev1.ResourceList) bool {
	for rn := range limits {
		if rn == karpenter.ResourceLimitsNodes {
			continue
		}
		if qa, ok := a[rn]; ok && amount(rn, qa) > amount(rn, b[rn]) {
			return true
		}
	}
	return false
}
