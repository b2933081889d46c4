package disruption

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Interruption is what one EC2 or AWS Health event asks of the instances it names:
// the handler turns the event into it, Interrupt turns it into actions.
type Interruption struct {
	// Reason names the event in Events and logs ("SpotInterrupted", "ScheduledChange", ...).
	Reason    string
	Instances []string
	// Involuntary disruptions ignore karpenter.sh/do-not-disrupt: the instance goes anyway.
	Involuntary bool
	// Deadline is when the instance goes away (zero: no deadline).
	Deadline time.Time
	// MarkSpot marks the instance's spot offering unavailable (a spot interruption).
	MarkSpot bool
	// TaintOnly taints the node and leaves its pods (a rebalance recommendation).
	TaintOnly bool
	// Gone means the instance is stopping or gone: nothing left to drain onto.
	Gone bool
}

// InterruptKind says what the executor does for one instance.
type InterruptKind string

// Interrupt action kinds.
const (
	// InterruptNotOwned: no NodeClaim of this cluster names the instance; it is never touched.
	InterruptNotOwned InterruptKind = "NotOwned"
	// InterruptAlreadyDeleting: the NodeClaim is being deleted already (a repeated event).
	InterruptAlreadyDeleting InterruptKind = "AlreadyDeleting"
	// InterruptAlreadyDisrupted: a taint-only event for a node already being disrupted.
	InterruptAlreadyDisrupted InterruptKind = "AlreadyDisrupted"
	// InterruptRetry: the node is being disrupted by an invocation that holds the
	// cluster lease; a redelivery finds out how that ended.
	InterruptRetry InterruptKind = "Retry"
	// InterruptNoNode: a taint-only event for a NodeClaim whose node has not registered.
	InterruptNoNode InterruptKind = "NoNode"
	// InterruptTaint taints the node kube.RebalanceTaint; its pods stay.
	InterruptTaint InterruptKind = "Taint"
	// InterruptDelete deletes the NodeClaim; its finalizer removes Node and instance.
	InterruptDelete InterruptKind = "Delete"
	// InterruptDrain taints the node, launches the capacity Replacements plans, drains
	// the node until DrainUntil and completes its deletion.
	InterruptDrain InterruptKind = "Drain"
)

// drainMargin is kept between the end of a drain and the moment the instance goes
// away, so the Node and NodeClaim are deleted before EC2 pulls the plug.
const drainMargin = 15 * time.Second

// Offering names an instance type, zone and capacity type.
type Offering struct {
	InstanceType, Zone, CapacityType string
}

// InterruptAction is what to do about one instance of an Interruption.
type InterruptAction struct {
	Kind      InterruptKind
	Instance  string
	NodeClaim string `json:",omitempty"`
	Node      string `json:",omitempty"`
	Reason    string
	// Involuntary is the Interruption's: do-not-disrupt does not hold the node.
	Involuntary bool `json:",omitempty"`
	// Unavailable is the offering to mark unavailable before anything is planned.
	Unavailable *Offering `json:",omitempty"`
	// GraceDeadline (InterruptDrain): pods still running then are deleted without
	// waiting for their grace period. Zero: no deadline.
	GraceDeadline time.Time `json:",omitzero"`
	// DrainUntil (InterruptDrain): when the drain must end, measured on the
	// executor's clock (which adds a floor for an event handled late). Zero: none.
	DrainUntil time.Time `json:",omitzero"`
}

// InterruptState is the part of the cluster an interruption looks at.
type InterruptState struct {
	NodeClaims []*karpenter.NodeClaim
	// Nodes are every Node, registered or initializing.
	Nodes []*corev1.Node
	// Leased: the decision holds the cluster lease, so a karpenter.sh/disrupted
	// taint is nobody's work in progress.
	Leased bool
}

// instance returns the Node (nil when not registered) and NodeClaim of an instance.
func (st InterruptState) instance(id string) (*corev1.Node, *karpenter.NodeClaim) {
	var nc *karpenter.NodeClaim
	for _, c := range st.NodeClaims {
		if facts.InstanceID(c.Status.ProviderID) == id {
			nc = c
		}
	}
	if nc == nil {
		return nil, nil
	}
	for _, n := range st.Nodes {
		if n.Spec.ProviderID == nc.Status.ProviderID {
			return n, nc
		}
	}
	return nil, nc
}

// Owns reports whether any of the interruption's instances is one of the cluster's
// NodeClaims: only then is the cluster lease worth taking.
func (it Interruption) Owns(st InterruptState) bool {
	for _, id := range it.Instances {
		if _, nc := st.instance(id); nc != nil {
			return true
		}
	}
	return false
}

// Interrupt decides, for each instance of the interruption, what the executor does.
// It never touches an instance no NodeClaim of the cluster names.
func Interrupt(it Interruption, st InterruptState) []InterruptAction {
	out := make([]InterruptAction, 0, len(it.Instances))
	for _, id := range it.Instances {
		out = append(out, interruptOne(it, st, id))
	}
	return out
}

func interruptOne(it Interruption, st InterruptState, id string) InterruptAction {
	a := InterruptAction{Instance: id, Reason: it.Reason, Involuntary: it.Involuntary}
	node, nc := st.instance(id)
	if nc == nil {
		a.Kind = InterruptNotOwned
		return a
	}
	a.NodeClaim = nc.Name
	if node != nil {
		a.Node = node.Name
	}
	if it.MarkSpot {
		if t, z := nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone]; t != "" && z != "" {
			a.Unavailable = &Offering{InstanceType: t, Zone: z, CapacityType: karpenter.CapacityTypeSpot}
		}
	}
	if nc.DeletionTimestamp != nil {
		a.Kind = InterruptAlreadyDeleting
		return a
	}
	if node != nil && !it.Gone && hasDisruptedTaint(node) {
		switch {
		case it.TaintOnly:
			a.Kind = InterruptAlreadyDisrupted
			return a
		case !st.Leased:
			a.Kind = InterruptRetry
			return a
		}
		// Under the lease the taint is nobody's work in progress but, possibly, an
		// interruption acting without the lease: a disruption cut off before its
		// clean-up, or one that runs out of time anyway. Finish it.
	}
	switch {
	case it.TaintOnly && node == nil:
		// A hint, not a notice: nothing to taint until the node registers.
		a.Kind = InterruptNoNode
	case it.TaintOnly:
		a.Kind = InterruptTaint
	case it.Gone || node == nil:
		// Nothing left to drain onto.
		a.Kind = InterruptDelete
	default:
		a.Kind = InterruptDrain
		if !it.Deadline.IsZero() {
			a.GraceDeadline = it.Deadline.Add(-drainMargin)
			a.DrainUntil = it.Deadline.Add(-drainMargin / 2)
		}
	}
	return a
}

// Replacements places the pods of nodes about to go as if the nodes were gone
// already, together with the pending pods: the plan's new nodes are the capacity to
// launch before the nodes are drained. It asks the decision's own what-if (the
// simulation consolidation uses), so an interruption and a consolidation judge the
// same cluster the same way. pods are the pods bound to each going node (an
// initializing node is not among in.Snapshot's nodes; its capacity is in flight and
// goes with it).
func Replacements(in Input, going []*corev1.Node, pods map[string][]*corev1.Pod) *packer.Plan {
	s := newState(in)
	if s == nil {
		return &packer.Plan{}
	}
	gone := map[string]bool{}
	goneProvider := map[string]bool{}
	for _, n := range going {
		gone[n.Name] = true
		if n.Spec.ProviderID != "" {
			goneProvider[n.Spec.ProviderID] = true
		}
	}
	var without []*nodeInfo
	for _, n := range s.nodes {
		if gone[n.name()] {
			without = append(without, n)
		}
	}
	s.inflight = slices.DeleteFunc(s.inflight, func(nc *karpenter.NodeClaim) bool {
		return nc.Status.ProviderID != "" && goneProvider[nc.Status.ProviderID]
	})
	// The what-if counts nodes already being deleted as capacity, as the cluster
	// does until they are gone: only the going nodes leave.
	clear(s.removed)
	moved := append([]*corev1.Pod(nil), s.snap.Pods...)
	for _, n := range going {
		for _, p := range pods[n.Name] {
			if facts.IsReschedulable(p) {
				moved = append(moved, p)
			}
		}
	}
	return s.solve(moved, without)
}
