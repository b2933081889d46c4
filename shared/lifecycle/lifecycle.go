// Package lifecycle decides how each NodeClaim moves through its life: registered
// when its Node appears, initialized when that Node is ready for pods, finalized
// once deleted, and removed when it never launched, never registered or lost its
// Node. It only decides: Decide reads NodeClaims and Nodes and returns transitions,
// and an executor (shared/kube) writes them. Nothing here performs I/O or reads the
// clock, as in shared/packer and shared/disruption.
//
// The rules are Karpenter's NodeClaim lifecycle controller's (launch, registration,
// initialization, liveness) and its termination controller's.
package lifecycle

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Timeouts (Karpenter's registration TTL is 15 minutes).
const (
	// RegistrationTimeout is how long a launched NodeClaim may wait for its Node.
	RegistrationTimeout = 15 * time.Minute
	// LaunchTimeout is how long a NodeClaim may stay unlaunched before it is taken
	// for the leftover of a crashed invocation.
	LaunchTimeout = 5 * time.Minute
)

// Kind says what a transition does.
type Kind string

// Transition kinds.
const (
	// Register copies the NodeClaim's labels and taints onto its new Node (see
	// ApplyRegistration), removes karpenter.sh/unregistered and sets Registered=True.
	Register Kind = "Register"
	// Initialize labels the Node initialized and sets Initialized=True: it is
	// Ready, its startup taints are gone and it advertises every extended resource
	// it was launched for.
	Initialize Kind = "Initialize"
	// AwaitInitialization records why a registered NodeClaim is not initialized
	// yet (Initialized=Unknown with Reason and Message).
	AwaitInitialization Kind = "AwaitInitialization"
	// Finalize completes a deleted NodeClaim: drain its Node, terminate the
	// instance, delete the Node, remove the finalizer.
	Finalize Kind = "Finalize"
	// Expire deletes a NodeClaim (then finalizes it): its instance never launched
	// or never registered in time, or its Node was deleted.
	Expire Kind = "Expire"
)

// Cause says why a NodeClaim expires.
type Cause string

// Expiry causes.
const (
	CauseLaunchTimeout       Cause = "LaunchTimeout"
	CauseRegistrationTimeout Cause = "RegistrationTimeout"
	CauseNodeDeleted         Cause = "NodeDeleted"
	// CauseNodeDeleting: a Node carrying karpenter.sh/termination is being
	// deleted (by someone, or by Karpenter before it was scaled down).
	CauseNodeDeleting Cause = "NodeDeleting"
)

// Timeout reports whether the cause is a timeout (the NodeClaim never became a
// node), as opposed to the loss of a node it had.
func (c Cause) Timeout() bool { return c == CauseLaunchTimeout || c == CauseRegistrationTimeout }

// Reasons Initialized=Unknown carries while a NodeClaim waits (Karpenter's).
const (
	ReasonNodeNotReady          = "NodeNotReady"
	ReasonStartupTaintsExist    = "StartupTaintsExist"
	ReasonResourceNotRegistered = "ResourceNotRegistered"
	// NodeNotReadyMessage goes with ReasonNodeNotReady.
	NodeNotReadyMessage = "Node not ready"
)

// Transition is one step of one NodeClaim.
type Transition struct {
	Kind      Kind
	NodeClaim *karpenter.NodeClaim
	// Node is the NodeClaim's Node in the snapshot (nil when it has none). For an
	// Initialize or AwaitInitialization that follows a Register of the same
	// NodeClaim, the executor uses the Node as its Register left it.
	Node *corev1.Node
	// Cause and Why say why an Expire happens (Why is the human-readable message).
	Cause Cause
	Why   string
	// Reason and Message are AwaitInitialization's condition.
	Reason, Message string
}

// Input is what Decide looks at.
type Input struct {
	// Now is the decision time; Decide never reads the clock.
	Now time.Time
	// NodeClaims are every NodeClaim, in the order transitions are wanted.
	NodeClaims []*karpenter.NodeClaim
	// Nodes are every Node.
	Nodes []*corev1.Node
	// LaunchTimeout and RegistrationTimeout default to the package's constants.
	LaunchTimeout, RegistrationTimeout time.Duration
}

// Decide returns the transitions due now, NodeClaim by NodeClaim in input order:
// for one NodeClaim, at most a Register followed by an Initialize or an
// AwaitInitialization, or a single Finalize or Expire.
func Decide(in Input) []Transition {
	launchTimeout, regTimeout := in.LaunchTimeout, in.RegistrationTimeout
	if launchTimeout <= 0 {
		launchTimeout = LaunchTimeout
	}
	if regTimeout <= 0 {
		regTimeout = RegistrationTimeout
	}
	nodeByProvider := map[string]*corev1.Node{}
	for _, n := range in.Nodes {
		if n.Spec.ProviderID != "" {
			nodeByProvider[n.Spec.ProviderID] = n
		}
	}
	var out []Transition
	for _, nc := range in.NodeClaims {
		var node *corev1.Node
		if nc.Status.ProviderID != "" {
			node = nodeByProvider[nc.Status.ProviderID]
		}
		expire := func(c Cause, why string) {
			out = append(out, Transition{Kind: Expire, NodeClaim: nc, Node: node, Cause: c, Why: why})
		}
		switch {
		case nc.DeletionTimestamp != nil:
			if slices.Contains(nc.Finalizers, karpenter.TerminationFinalizer) {
				out = append(out, Transition{Kind: Finalize, NodeClaim: nc, Node: node})
			}
		case node != nil && node.DeletionTimestamp != nil && slices.Contains(node.Finalizers, karpenter.TerminationFinalizer):
			// Someone deleted a Node Karpenter registered (or Karpenter was part-way
			// through terminating it when it was scaled down): as Karpenter's node
			// termination controller would, drain it and end its instance and
			// NodeClaim, then let the Node go.
			expire(CauseNodeDeleting, "Node "+node.Name+" is being deleted")
		case !conditionTrue(nc.Status.Conditions, karpenter.ConditionLaunched):
			if in.Now.Sub(nc.CreationTimestamp.Time) > launchTimeout {
				expire(CauseLaunchTimeout, fmt.Sprintf("NodeClaim not launched within %s", launchTimeout))
			}
		case node == nil && conditionTrue(nc.Status.Conditions, karpenter.ConditionRegistered):
			// Its Node was deleted (the snapshot lists both at one resourceVersion): as
			// with Karpenter, the NodeClaim and its instance go too.
			expire(CauseNodeDeleted, "Node "+nc.Status.NodeName+" was deleted")
		case node == nil:
			if in.Now.Sub(LaunchedAt(nc)) > regTimeout {
				expire(CauseRegistrationTimeout, fmt.Sprintf("Node did not register with the cluster within %s of launch", regTimeout))
			}
		default:
			registered := conditionTrue(nc.Status.Conditions, karpenter.ConditionRegistered)
			if !registered {
				out = append(out, Transition{Kind: Register, NodeClaim: nc, Node: node})
				node = Registered(nc, node)
			}
			if conditionTrue(nc.Status.Conditions, karpenter.ConditionInitialized) {
				continue
			}
			reason, msg := initialization(nc, node)
			if reason == "" {
				out = append(out, Transition{Kind: Initialize, NodeClaim: nc, Node: node})
				continue
			}
			// The condition is written only when it changes; registering sets it
			// to "not ready".
			cur := meta.FindStatusCondition(nc.Status.Conditions, karpenter.ConditionInitialized)
			if !registered {
				cur = &metav1.Condition{Reason: ReasonNodeNotReady, Message: NodeNotReadyMessage}
			}
			if cur != nil && cur.Reason == reason && cur.Message == msg {
				continue
			}
			out = append(out, Transition{Kind: AwaitInitialization, NodeClaim: nc, Node: node, Reason: reason, Message: msg})
		}
	}
	return out
}

// LaunchedAt is when the NodeClaim's instance launched (Launched=True), else when
// the NodeClaim was created.
func LaunchedAt(nc *karpenter.NodeClaim) time.Time {
	if cd := meta.FindStatusCondition(nc.Status.Conditions, karpenter.ConditionLaunched); cd != nil && cd.Status == metav1.ConditionTrue {
		return cd.LastTransitionTime.Time
	}
	return nc.CreationTimestamp.Time
}

// ApplyRegistration applies to n what registering it under nc writes: nc's labels, the
// karpenter.sh/nodeclaim and karpenter.sh/registered labels, nc's taints and
// startup taints, and no karpenter.sh/unregistered taint.
func ApplyRegistration(nc *karpenter.NodeClaim, n *corev1.Node) {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range nc.Labels {
		n.Labels[k] = v
	}
	n.Labels[karpenter.NodeClaimLabelKey] = nc.Name
	n.Labels[karpenter.NodeRegisteredLabelKey] = "true"
	taints := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.Key == karpenter.UnregisteredTaintKey })
	for _, t := range append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...) {
		if !slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) }) {
			taints = append(taints, t)
		}
	}
	n.Spec.Taints = taints
	// As Karpenter's registration does: its termination finalizer (the Node stays
	// until its instance is terminated; kube.Client's finalization lifts it) and an
	// owner reference to the NodeClaim, so a Karpenter taking the cluster back finds
	// Joiner's Nodes as it leaves its own.
	if !slices.Contains(n.Finalizers, karpenter.TerminationFinalizer) {
		n.Finalizers = append(n.Finalizers, karpenter.TerminationFinalizer)
	}
	if nc.UID != "" && !slices.ContainsFunc(n.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == nc.UID }) {
		n.OwnerReferences = append(n.OwnerReferences, metav1.OwnerReference{APIVersion: karpenter.APIVersion, Kind: karpenter.NodeClaimKind,
			Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: ptr.To(true)})
	}
}

// Registered is a copy of node as registering it under nc leaves it.
func Registered(nc *karpenter.NodeClaim, node *corev1.Node) *corev1.Node {
	n := node.DeepCopy()
	ApplyRegistration(nc, n)
	return n
}

// initialization returns why the NodeClaim's Node is not initialized yet, or "" when
// it is: Ready, without startup taints, advertising every extended resource it was
// launched for (nvidia.com/gpu, ...). Until then its capacity stays in flight.
func initialization(nc *karpenter.NodeClaim, node *corev1.Node) (reason, msg string) {
	switch {
	case !facts.NodeReady(node):
		return ReasonNodeNotReady, NodeNotReadyMessage
	case hasAnyTaint(node, nc.Spec.StartupTaints):
		return ReasonStartupTaintsExist, "StartupTaints exist on the node"
	}
	if missing := missingResources(nc, node); len(missing) > 0 {
		return ReasonResourceNotRegistered, "Resources " + strings.Join(missing, ", ") + " not registered"
	}
	return "", ""
}

func hasAnyTaint(n *corev1.Node, taints []corev1.Taint) bool {
	for _, t := range taints {
		if slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) }) {
			return true
		}
	}
	return false
}

// wellKnownResources are always advertised by the kubelet itself.
var wellKnownResources = map[corev1.ResourceName]bool{
	corev1.ResourceCPU: true, corev1.ResourceMemory: true, corev1.ResourcePods: true, corev1.ResourceEphemeralStorage: true,
}

// missingResources lists the extended resources the NodeClaim expects (in its
// allocatable or requests) that the node does not advertise yet.
func missingResources(nc *karpenter.NodeClaim, n *corev1.Node) []string {
	want := map[corev1.ResourceName]bool{}
	for _, l := range []corev1.ResourceList{nc.Status.Allocatable, nc.Spec.Resources.Requests} {
		for name, q := range l {
			if !wellKnownResources[name] && !strings.HasPrefix(string(name), "hugepages-") && q.Sign() > 0 {
				want[name] = true
			}
		}
	}
	var missing []string
	for name := range want {
		if q, ok := n.Status.Allocatable[name]; !ok || q.Sign() <= 0 {
			missing = append(missing, string(name))
		}
	}
	sort.Strings(missing)
	return missing
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}

// PoolStatus is what a NodePool's status says is in use: the capacity of its live
// NodeClaims, and their number (also as the "nodes" resource).
type PoolStatus struct {
	Name      string
	Resources corev1.ResourceList
	Nodes     int64
}

// PoolStatuses returns the status of every NodePool whose recorded status differs
// from its live NodeClaims.
func PoolStatuses(pools []*karpenter.NodePool, claims []*karpenter.NodeClaim) []PoolStatus {
	var out []PoolStatus
	for _, np := range pools {
		res := corev1.ResourceList{}
		var count int64
		for _, nc := range claims {
			if nc.Labels[karpenter.NodePoolLabelKey] != np.Name || nc.DeletionTimestamp != nil {
				continue
			}
			count++
			for k, v := range nc.Status.Capacity {
				cur := res[k]
				cur.Add(v)
				res[k] = cur
			}
		}
		res[karpenter.ResourceLimitsNodes] = *resource.NewQuantity(count, resource.DecimalSI)
		if count == np.Status.NodeCount && equalResources(res, np.Status.Resources) {
			continue
		}
		out = append(out, PoolStatus{Name: np.Name, Resources: res, Nodes: count})
	}
	return out
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}
