package packer

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Assemble is the one rule that turns a cluster's Nodes, pods and NodeClaims into
// the engine's view, for the functions and for joiner plan alike: the pods
// pending says need a node (facts.IsPending in a cluster; every unbound pod of a
// manifest, which has no status), and those nominated to a node that is gone and
// still unschedulable; Nodes with their bound, non-terminal pods and the pods
// nominated to them (kube-scheduler holds their room there); and, as in-flight capacity, every
// NodeClaim that is neither initialized nor being deleted. The Node of such a
// claim (registered, not yet initialized) is left out of Nodes: its startup
// taints and node.kubernetes.io/not-ready are passing, as Karpenter drops
// ephemeral and startup taints until initialization, so the claim (its own
// taints, its allocatable net of the pods bound or nominated there) stands for it. A
// NodeClaim being deleted is no capacity. A claim is matched to its Node by
// providerID, else by status.nodeName; it is initialized when its Initialized
// condition is True or its Node carries karpenter.sh/initialized=true.
// It returns the snapshot, the bound pods by node name and the nominated pods by
// node name.
func Assemble(nodes []*corev1.Node, pods []*corev1.Pod, claims []*karpenter.NodeClaim, pending func(*corev1.Pod) bool) (Snapshot, map[string][]*corev1.Pod, map[string][]*corev1.Pod) {
	var snap Snapshot
	byNode := make(map[string][]*corev1.Pod, len(nodes))
	nominated := map[string][]*corev1.Pod{}
	nodeByProvider := make(map[string]*corev1.Node, len(nodes))
	nodeByName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		if n.Spec.ProviderID != "" {
			nodeByProvider[n.Spec.ProviderID] = n
		}
		nodeByName[n.Name] = n
	}
	for _, p := range pods {
		switch {
		case p.Spec.NodeName != "":
			if !facts.IsTerminal(p) {
				byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
			}
		case pending(p):
			snap.Pods = append(snap.Pods, p)
		case facts.IsNominated(p) && nodeByName[p.Status.NominatedNodeName] != nil:
			nominated[p.Status.NominatedNodeName] = append(nominated[p.Status.NominatedNodeName], p)
		case facts.IsNominated(p) && facts.Unschedulable(p):
			// Nominated to a node that is gone: nothing holds room for it any more.
			snap.Pods = append(snap.Pods, p)
		}
	}
	// on is what a node holds: its bound pods and those nominated to it.
	on := func(n *corev1.Node) []*corev1.Pod {
		if nom := nominated[n.Name]; len(nom) > 0 {
			return append(slices.Clip(byNode[n.Name]), nom...)
		}
		return byNode[n.Name]
	}
	nodeOf := func(nc *karpenter.NodeClaim) *corev1.Node {
		if nc.Status.ProviderID != "" {
			if n := nodeByProvider[nc.Status.ProviderID]; n != nil {
				return n
			}
		}
		if nc.Status.NodeName != "" {
			return nodeByName[nc.Status.NodeName]
		}
		return nil
	}
	inFlightNode := map[*corev1.Node]bool{}
	for _, nc := range claims {
		n := nodeOf(nc)
		if nc.DeletionTimestamp != nil || meta.IsStatusConditionTrue(nc.Status.Conditions, karpenter.ConditionInitialized) ||
			(n != nil && n.Labels[karpenter.NodeInitializedLabelKey] == "true") {
			continue
		}
		if n != nil {
			inFlightNode[n] = true
			if held := on(n); len(held) > 0 {
				nc = withoutBoundPods(nc, held)
			}
		}
		snap.InFlight = append(snap.InFlight, nc)
	}
	for _, n := range nodes {
		if !inFlightNode[n] {
			snap.Nodes = append(snap.Nodes, NodeState{Node: n, Pods: on(n)})
		}
	}
	return snap, byNode, nominated
}

// withoutBoundPods returns a copy of nc whose allocatable excludes what the pods already
// bound or nominated to its (registered, not yet initialized) node request, so in-flight capacity is
// not offered twice.
func withoutBoundPods(nc *karpenter.NodeClaim, pods []*corev1.Pod) *karpenter.NodeClaim {
	cp := *nc
	alloc := nc.Status.Allocatable.DeepCopy()
	if alloc == nil {
		alloc = corev1.ResourceList{}
	}
	for _, p := range pods {
		facts.SubtractPod(alloc, facts.PodRequests(p))
	}
	cp.Status.Allocatable = alloc
	return &cp
}

// ReplanDeleting returns snap with the pods of deleting nodes added to the pods
// to place, so their new home is launched ahead of the drain, as Karpenter's
// provisioner schedules the reschedulable pods of nodes marked for deletion with
// the pending ones. A node is deleting when it or its NodeClaim (claims, matched
// by providerID, else status.nodeName) has a deletionTimestamp, or it carries
// karpenter.sh/disrupted (Joiner or Karpenter is draining it). Its reschedulable
// pods (facts.IsReschedulable) move, PodDisruptionBudgets notwithstanding: the
// room planned for them is what lets a budget allow the next eviction. A
// do-not-disrupt pod moves only when its NodeClaim has a terminationGracePeriod,
// which evicts it at the deadline; without one the drain never evicts it, and a
// node launched for it would stand idle. The node stays (cordoned: it takes no
// pods) with the pods that stay, so topology counts each pod once: where it runs
// now if it stays, where the plan puts it if it moves. moved are the pods added;
// snap itself is not modified.
func ReplanDeleting(snap Snapshot, claims []*karpenter.NodeClaim) (out Snapshot, moved []*corev1.Pod) {
	claimOf := make(map[string]*karpenter.NodeClaim, len(claims))
	for _, nc := range claims {
		if nc.Status.ProviderID != "" {
			claimOf["p/"+nc.Status.ProviderID] = nc
		}
		if nc.Status.NodeName != "" {
			claimOf["n/"+nc.Status.NodeName] = nc
		}
	}
	out = snap
	cloned := false
	for i, ns := range snap.Nodes {
		n := ns.Node
		nc := claimOf["p/"+n.Spec.ProviderID]
		if nc == nil || n.Spec.ProviderID == "" {
			nc = claimOf["n/"+n.Name]
		}
		deleting := n.DeletionTimestamp != nil || (nc != nil && nc.DeletionTimestamp != nil) ||
			slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpenter.DisruptedTaintKey })
		if !deleting {
			continue
		}
		graceful := nc != nil && nc.Spec.TerminationGracePeriod != nil
		var stay []*corev1.Pod
		var moves []*corev1.Pod
		for _, p := range ns.Pods {
			if facts.IsReschedulable(p) && (graceful || !facts.DoNotDisrupt(p.Annotations)) {
				moves = append(moves, p)
			} else {
				stay = append(stay, p)
			}
		}
		if n.Spec.Unschedulable && len(moves) == 0 {
			continue // cordoned already, nothing moves: nothing to change
		}
		if !cloned {
			out.Nodes, cloned = slices.Clone(snap.Nodes), true // snap is not modified
		}
		cordoned := n.DeepCopy()
		cordoned.Spec.Unschedulable = true
		out.Nodes[i] = NodeState{Node: cordoned, Pods: stay}
		moved = append(moved, moves...)
	}
	if len(moved) > 0 {
		out.Pods = append(slices.Clip(snap.Pods), moved...)
	}
	return out, moved
}
