package check

import (
	"fmt"
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

// launchableValues lists the values of key on nodes a pool could launch that the pod
// counts as eligible (its node affinity when honoured, the pool's taints when honoured).
func (c *checker) launchableValues(p *corev1.Pod, key string, honorA, honorT bool) []string {
	memo := key + "#" + eligibilitySig(p, honorA, honorT)
	if vals, ok := c.launchMemo[memo]; ok {
		return vals
	}
	seen := map[string]bool{}
	var out []string
	for _, h := range c.hypotheticals() {
		val, ok := h.view.labels[key]
		if !ok || seen[val] {
			continue
		}
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
		seen[val] = true
		out = append(out, val)
	}
	sort.Strings(out)
	if c.launchMemo == nil {
		c.launchMemo = map[string][]string{}
	}
	c.launchMemo[memo] = out
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
		if q, ok := capacity[rn]; ok && amount(rn, q) > amount(rn, l) {
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
	for _, u := range c.plan.Unschedulable {
		p := c.pods[u.Pod]
		if p == nil || !unconstrained(p) {
			continue
		}
		if why := c.couldLaunchFor(p); why != "" {
			c.errorf("suspicious unschedulable: pod %s (%q) fits %s", u.Pod, u.Reason, why)
		}
	}
}

func unconstrained(p *corev1.Pod) bool {
	for _, t := range p.Spec.TopologySpreadConstraints {
		if t.WhenUnsatisfiable == corev1.DoNotSchedule {
			return false
		}
	}
	return len(requiredAffinity(p)) == 0 && len(requiredAntiAffinity(p)) == 0 && len(podHostPorts(p)) == 0
}

func (c *checker) couldLaunchFor(p *corev1.Pod) string {
	for _, h := range c.hypotheticals() {
		v := h.view
		if !c.podAccepts(p, v) {
			continue
		}
		probe := &nodeView{name: v.name, labels: v.labels, taints: v.taints, alloc: v.alloc, node: v.node, placed: []*corev1.Pod{p}}
		c.matchDaemonSets(probe)
		if c.fitProblem(probe) != "" || !c.withinLimits(h) {
			continue
		}
		return fmt.Sprintf("a new %s %s node in %s of pool %s", h.typ.Name, h.off.CapacityType, h.off.Zone, h.pool.Name)
	}
	return ""
}
