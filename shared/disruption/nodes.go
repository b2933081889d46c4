package disruption

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// podDeletionCostAnnotation lowers or raises a pod's eviction cost, as the
// ReplicaSet controller reads it.
const podDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// nodeInfo is one snapshot node and what the decision knows about it.
type nodeInfo struct {
	state *corev1.Node
	pods  []*corev1.Pod // all bound pods
	// movable pods must find another home before the node can go: everything but
	// DaemonSet, mirror, finished and terminating pods.
	movable []*corev1.Pod
	claim   *karpenter.NodeClaim
	pool    *karpenter.NodePool
	// managed: a NodeClaim owns it, the claim names an existing pool and it is not
	// a control-plane or infra node.
	managed      bool
	controlPlane bool
	initialized  bool
	// deleting nodes are already being disrupted (disrupted taint, or the Node or
	// NodeClaim is being deleted): they count against budgets and take no pods.
	deleting bool
	notReady bool
	// done is set once this decision disrupts the node.
	done bool

	instanceType, zone, capacityType string
	price                            float64
	priceKnown                       bool
	cost                             float64 // Karpenter's disruption cost: lower goes first
	util                             float64 // largest of cpu and memory requests over allocatable
}

func (n *nodeInfo) name() string { return n.state.Name }

func (n *nodeInfo) claimName() string {
	if n.claim == nil {
		return ""
	}
	return n.claim.Name
}

func (n *nodeInfo) poolName() string {
	if n.pool == nil {
		return ""
	}
	return n.pool.Name
}

// labels are the node's labels over the NodeClaim's (a node may not yet carry every
// label its claim was created with).
func (n *nodeInfo) labels() map[string]string {
	if n.claim == nil || len(n.claim.Labels) == 0 {
		return n.state.Labels
	}
	out := make(map[string]string, len(n.state.Labels)+len(n.claim.Labels))
	for k, v := range n.claim.Labels {
		out[k] = v
	}
	for k, v := range n.state.Labels {
		out[k] = v
	}
	return out
}

func (n *nodeInfo) empty() bool { return len(n.movable) == 0 }

// candidate reports whether the node may be considered for disruption at all.
func (n *nodeInfo) candidate() bool {
	return n.managed && n.initialized && !n.deleting && !n.done
}

// pdbInfo is a PodDisruptionBudget and the evictions it still allows this round.
type pdbInfo struct {
	pdb       *policyv1.PodDisruptionBudget
	sel       labels.Selector
	remaining int
}

func (p *pdbInfo) name() string { return p.pdb.Namespace + "/" + p.pdb.Name }

func (p *pdbInfo) matches(pod *corev1.Pod) bool {
	return p.sel != nil && p.pdb.Namespace == facts.PodNamespace(pod) && p.sel.Matches(labels.Set(pod.Labels))
}

func newPDBs(in []*policyv1.PodDisruptionBudget, warn func(string)) []*pdbInfo {
	var out []*pdbInfo
	for _, p := range in {
		if p == nil {
			continue
		}
		pi := &pdbInfo{pdb: p, remaining: int(p.Status.DisruptionsAllowed)}
		// policy/v1: a nil selector selects no pod, an empty one every pod of the namespace.
		if p.Spec.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			if err != nil {
				// An unreadable PDB still protects: treat it as selecting every pod in
				// its namespace with no disruptions allowed (fail closed).
				warn(fmt.Sprintf("PodDisruptionBudget %s/%s: selector: %v; treating it as blocking its namespace", p.Namespace, p.Name, err))
				sel, pi.remaining = labels.Everything(), 0
			}
			pi.sel = sel
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name() < out[j].name() })
	return out
}

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpenter.DisruptedTaintKey {
			return true
		}
	}
	return false
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	c := findCondition(conds, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}

// voluntaryBlock explains why the node may not be disrupted voluntarily (do-not-
// disrupt on the node, its NodeClaim or one of its running pods; a PDB that
// allows no further eviction of one of its pods), or returns "".
func (s *state) voluntaryBlock(n *nodeInfo) (BlockCode, string) {
	if facts.DoNotDisrupt(n.state.Annotations) {
		return BlockDoNotDisrupt, fmt.Sprintf("node is annotated %s: \"true\"", karpenter.DoNotDisruptAnnotation)
	}
	if n.claim != nil && facts.DoNotDisrupt(n.claim.Annotations) {
		return BlockDoNotDisrupt, fmt.Sprintf("NodeClaim %s is annotated %s: \"true\"", n.claim.Name, karpenter.DoNotDisruptAnnotation)
	}
	for _, p := range n.pods {
		if facts.PodBlocksDisruption(p) {
			return BlockDoNotDisrupt, fmt.Sprintf("pod %s is annotated %s: \"true\"", facts.PodKey(p), karpenter.DoNotDisruptAnnotation)
		}
	}
	for _, p := range n.movable {
		var hit []*pdbInfo
		for _, b := range s.pdbs {
			if b.matches(p) {
				hit = append(hit, b)
			}
		}
		switch {
		case len(hit) > 1:
			names := make([]string, len(hit))
			for i, b := range hit {
				names[i] = b.name()
			}
			return BlockPDB, fmt.Sprintf("pod %s is selected by more than one PodDisruptionBudget (%s): the eviction API refuses to evict it",
				facts.PodKey(p), strings.Join(names, ", "))
		case len(hit) == 1 && hit[0].remaining <= 0:
			allowed := hit[0].pdb.Status.DisruptionsAllowed
			if int(allowed) > 0 {
				return BlockPDB, fmt.Sprintf("PodDisruptionBudget %s (pod %s): its %d allowed disruption(s) are taken by nodes disrupted earlier this round",
					hit[0].name(), facts.PodKey(p), allowed)
			}
			return BlockPDB, fmt.Sprintf("PodDisruptionBudget %s allows 0 disruptions (pod %s)", hit[0].name(), facts.PodKey(p))
		}
	}
	return "", ""
}

// consumePDBs charges the node's pods to their PDBs once it is disrupted.
func (s *state) consumePDBs(n *nodeInfo) {
	for _, p := range n.movable {
		for _, b := range s.pdbs {
			if b.matches(p) && b.remaining > 0 {
				b.remaining--
			}
		}
	}
}

// price sets the node's offering and its hourly price from the catalog.
func (s *state) price(n *nodeInfo) {
	l := n.labels()
	n.instanceType = l[corev1.LabelInstanceTypeStable]
	n.zone = l[corev1.LabelTopologyZone]
	n.capacityType = l[karpenter.CapacityTypeLabelKey]
	if n.capacityType == "" {
		n.capacityType = karpenter.CapacityTypeOnDemand
	}
	n.price, n.priceKnown = s.offeringPrice(n.instanceType, n.zone, n.capacityType)
}

func (s *state) offeringPrice(instanceType, zone, capacityType string) (float64, bool) {
	it, ok := s.snap.Catalog.Lookup(instanceType)
	if !ok {
		return 0, false
	}
	if capacityType == karpenter.CapacityTypeReserved {
		// A node in a capacity reservation: priced as the engine prices the
		// reserved offering it was planned on (Karpenter's rule), so nothing
		// replaces it to save money, and nothing is taken for free.
		return packer.ReservedPrice(it, zone), true
	}
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == capacityType {
			return o.PricePerHour, true
		}
	}
	return 0, false
}

// rank computes Karpenter's disruption cost (each movable pod costs 1, adjusted by
// its deletion cost and priority, scaled by the share of the node's lifetime left:
// nodes about to expire are cheap to disrupt) and the node's utilisation.
func (s *state) rank(n *nodeInfo) {
	cost := 0.0
	var cpu, mem int64
	for _, p := range n.movable {
		c := 1.0
		if v, ok := p.Annotations[podDeletionCostAnnotation]; ok {
			if d, err := strconv.Atoi(v); err == nil {
				c += float64(d) / math.Pow(2, 27)
			}
		}
		if p.Spec.Priority != nil {
			c += float64(*p.Spec.Priority) / math.Pow(2, 25)
		}
		cost += max(-10, min(10, c))
		r := facts.PodRequests(p)
		cpu += r.Cpu().MilliValue()
		mem += r.Memory().Value()
	}
	if n.claim != nil && n.pool != nil {
		if d, ok := expireAfter(n.claim, n.pool); ok && d > 0 {
			left := n.claim.CreationTimestamp.Add(d).Sub(s.now)
			cost *= max(0, min(1, float64(left)/float64(d)))
		}
	}
	n.cost = cost
	alloc := n.state.Status.Allocatable
	if c := alloc.Cpu().MilliValue(); c > 0 {
		n.util = float64(cpu) / float64(c)
	}
	if m := alloc.Memory().Value(); m > 0 {
		n.util = max(n.util, float64(mem)/float64(m))
	}
}

// consolidateAfter is the pool's consolidateAfter; ok is false for "Never".
func consolidateAfter(np *karpenter.NodePool) (time.Duration, bool) {
	d := np.Spec.Disruption.ConsolidateAfter
	switch {
	case d.IsNever():
		return 0, false
	case d.Duration != nil:
		return *d.Duration, true
	}
	return karpenter.DefaultConsolidateAfter, true
}

func policy(np *karpenter.NodePool) karpenter.ConsolidationPolicy {
	if p := np.Spec.Disruption.ConsolidationPolicy; p != "" {
		return p
	}
	return karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized
}

// lastPodEvent is the latest moment the snapshot shows a pod arriving at or
// leaving the node (DaemonSet and mirror pods aside), or the node's creation.
func lastPodEvent(n *nodeInfo) time.Time {
	t := n.state.CreationTimestamp.Time
	if n.claim != nil && n.claim.Status.LastPodEventTime.After(t) {
		t = n.claim.Status.LastPodEventTime.Time
	}
	for _, p := range n.pods {
		if facts.IsDaemonSetPod(p) || facts.IsMirrorPod(p) {
			continue
		}
		t = latest(t, p.CreationTimestamp.Time)
		if p.DeletionTimestamp != nil {
			t = latest(t, p.DeletionTimestamp.Time)
		}
		for _, c := range p.Status.Conditions {
			t = latest(t, c.LastTransitionTime.Time)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil {
				t = latest(t, term.FinishedAt.Time)
			}
		}
	}
	return t
}

// emptySince is when the node became empty: the Empty condition's
// lastTransitionTime once recorded, before that the latest pod event the snapshot
// shows. Whichever is later wins: a recorded Empty=False means the node had pods
// then, and a pod that came and went since Empty=True restarts the wait.
func emptySince(n *nodeInfo) time.Time {
	t := lastPodEvent(n)
	if n.claim != nil {
		if c := findCondition(n.claim.Status.Conditions, karpenter.ConditionEmpty); c != nil {
			t = latest(t, c.LastTransitionTime.Time)
		}
	}
	return t
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
