package replay

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
)

// Expectation is one expected outcome: one check, checked at At (the end when nil).
// Checks about the whole run (maxNodes, launched, terminated, interruptions,
// maxPodWait, cost, costRatio, errors) are checked at the end.
type Expectation struct {
	At *Duration `json:"at,omitempty"`

	AllPodsRunning *bool  `json:"allPodsRunning,omitempty"`
	PodsRunning    *Range `json:"podsRunning,omitempty"`
	Pending        *Range `json:"pending,omitempty"`
	Nodes          *Range `json:"nodes,omitempty"`
	MaxNodes       *int   `json:"maxNodes,omitempty"`
	PodOn          *PodOn `json:"podOn,omitempty"`
	// NodesWith counts the Nodes carrying every one of some labels.
	NodesWith        *NodesWith `json:"nodesWith,omitempty"`
	NoDisruptedTaint *bool      `json:"noDisruptedTaint,omitempty"`
	NoOrphans        *bool      `json:"noOrphans,omitempty"`
	Untouched        string     `json:"untouched,omitempty"`
	Gone             string     `json:"gone,omitempty"`
	// KarpenterAdoptable asks that every live NodeClaim, its Node and its instance
	// carry what Karpenter needs to take them over (the way back from Joiner).
	KarpenterAdoptable *bool     `json:"karpenterAdoptable,omitempty"`
	Launched           *Range    `json:"launched,omitempty"`
	Terminated         *Range    `json:"terminated,omitempty"`
	Interruptions      *Range    `json:"interruptions,omitempty"`
	MaxPodWait         *Duration `json:"maxPodWait,omitempty"`
	CostRatio          *Range    `json:"costRatio,omitempty"`
	Cost               *Range    `json:"cost,omitempty"`
	Errors             *Range    `json:"errors,omitempty"`
	// OnReleasedImage asks that every running instance Joiner owns runs an image a
	// releaseAMI step published: every node from before the release was replaced.
	OnReleasedImage *bool `json:"onReleasedImage,omitempty"`
	// ReleasedKept asks that no instance launched from a released image was
	// terminated: a node launched after the release is not drifted, so no node is
	// replaced twice.
	ReleasedKept *bool `json:"releasedKept,omitempty"`
	// NeverJoined counts the instances whose executed user data never joined
	// their node; with Cause, each of them must name it, in the summary and in a
	// NodeBootFailed Event on its NodeClaim.
	NeverJoined *NeverJoined `json:"neverJoined,omitempty"`

	// InMemoryOnly skips the check against a real API server, for checks that rest
	// on object ages: the server stamps creationTimestamp with its own clock.
	InMemoryOnly bool `json:"inMemoryOnly,omitempty"`
}

// Range bounds a number; either end may be open.
type Range struct {
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// PodOn asks for a pod (or, with a trailing *, any pod of that prefix) on a node with
// these labels.
type PodOn struct {
	Pod    string            `json:"pod"`
	Labels map[string]string `json:"labels"`
}

// NodesWith bounds how many Nodes carry all of Labels.
type NodesWith struct {
	Labels map[string]string `json:"labels"`
	Count  Range             `json:"count"`
}

// NeverJoined bounds the instances that never joined and names their cause.
type NeverJoined struct {
	Count Range  `json:"count"`
	Cause string `json:"cause,omitempty"`
}

// Outcome is one expectation checked.
type Outcome struct {
	Check  string `json:"check"`
	Met    bool   `json:"met"`
	Detail string `json:"detail"`
	// Skipped is an InMemoryOnly check on a real API server (Met is true).
	Skipped bool `json:"skipped,omitempty"`
}

func (e Expectation) checks() []string {
	var out []string
	for name, set := range map[string]bool{
		"allPodsRunning": e.AllPodsRunning != nil, "podsRunning": e.PodsRunning != nil, "pending": e.Pending != nil,
		"nodes": e.Nodes != nil, "maxNodes": e.MaxNodes != nil, "podOn": e.PodOn != nil,
		"nodesWith":        e.NodesWith != nil,
		"noDisruptedTaint": e.NoDisruptedTaint != nil, "noOrphans": e.NoOrphans != nil, "untouched": e.Untouched != "",
		"gone": e.Gone != "", "karpenterAdoptable": e.KarpenterAdoptable != nil,
		"launched": e.Launched != nil, "terminated": e.Terminated != nil, "interruptions": e.Interruptions != nil,
		"maxPodWait": e.MaxPodWait != nil, "costRatio": e.CostRatio != nil, "cost": e.Cost != nil, "errors": e.Errors != nil,
		"onReleasedImage": e.OnReleasedImage != nil, "releasedKept": e.ReleasedKept != nil,
		"neverJoined": e.NeverJoined != nil,
	} {
		if set {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// wholeRun reports whether the check is about the whole run (checked at the end).
func (e Expectation) wholeRun() bool {
	return e.MaxNodes != nil || e.Interruptions != nil || e.MaxPodWait != nil || e.CostRatio != nil || e.Cost != nil || e.Errors != nil || e.NeverJoined != nil
}

// when returns the offset the expectation is checked at.
func (e Expectation) when(end time.Duration) time.Duration {
	if e.At == nil || e.wholeRun() {
		return end
	}
	return e.At.D()
}

// view is what a check looks at.
type view struct {
	cluster   string
	real      bool // on a real API server
	at        time.Duration
	start     time.Time
	pods      []corev1.Pod
	nodes     []corev1.Node
	claims    []*karpenter.NodeClaim
	pools     []*karpenter.NodePool
	instances []awssim.Instance // owned by the cluster, any state
	res       *Result
	released  map[string]bool // images releaseAMI steps published
	// bootEvents are the notes of the NodeBootFailed Events, by NodeClaim.
	bootEvents map[string]string
}

func (e Expectation) check(v *view) Outcome {
	name := e.checks()[0]
	o := Outcome{Check: name}
	if !e.wholeRun() {
		o.Check = fmt.Sprintf("%s at %s", name, fmtOffset(v.at))
	}
	if e.InMemoryOnly && v.real {
		o.Met, o.Skipped, o.Detail = true, true, strings.TrimPrefix(e.Gone+e.Untouched+": ", ": ")+"not checked against a real API server (it stamps creation times with its own clock)"
		return o
	}
	o.Met, o.Detail = e.evaluate(v)
	return o
}

func (e Expectation) evaluate(v *view) (bool, string) {
	r := v.res
	switch {
	case e.AllPodsRunning != nil:
		running, pending := podCounts(v)
		return (pending == 0) == *e.AllPodsRunning, fmt.Sprintf("%d running, %d not running", running, pending)
	case e.PodsRunning != nil:
		running, _ := podCounts(v)
		return e.PodsRunning.in(float64(running)), fmt.Sprintf("%d running (want %s)", running, e.PodsRunning)
	case e.Pending != nil:
		_, pending := podCounts(v)
		return e.Pending.in(float64(pending)), fmt.Sprintf("%d pending (want %s)", pending, e.Pending)
	case e.Nodes != nil:
		return e.Nodes.in(float64(len(v.nodes))), fmt.Sprintf("%d node(s) (want %s)", len(v.nodes), e.Nodes)
	case e.MaxNodes != nil:
		return r.MaxNodes <= *e.MaxNodes, fmt.Sprintf("at most %d node(s) at once (want ≤ %d)", r.MaxNodes, *e.MaxNodes)
	case e.PodOn != nil:
		return podOn(v, e.PodOn)
	case e.NodesWith != nil:
		return nodesWith(v, e.NodesWith)
	case e.NoDisruptedTaint != nil:
		return noTaint(v)
	case e.NoOrphans != nil:
		return noOrphans(v)
	case e.Untouched != "":
		return untouched(v, e.Untouched)
	case e.Gone != "":
		return gone(v, e.Gone)
	case e.KarpenterAdoptable != nil:
		return karpenterAdoptable(v)
	case e.Launched != nil:
		n, _ := instanceCounts(v)
		return e.Launched.in(float64(n)), fmt.Sprintf("%d launched so far (want %s)", n, e.Launched)
	case e.Terminated != nil:
		_, n := instanceCounts(v)
		return e.Terminated.in(float64(n)), fmt.Sprintf("%d terminated so far (want %s)", n, e.Terminated)
	case e.Interruptions != nil:
		return e.Interruptions.in(float64(r.Interruptions)), fmt.Sprintf("%d handled (want %s)", r.Interruptions, e.Interruptions)
	case e.MaxPodWait != nil:
		return r.Pods.WaitMax <= e.MaxPodWait.D(), fmt.Sprintf("longest wait %s (want ≤ %s)", FormatDuration(r.Pods.WaitMax), e.MaxPodWait.D())
	case e.CostRatio != nil:
		ratio := r.CostRatio()
		return e.CostRatio.in(ratio), fmt.Sprintf("cost/lower bound %.2f (want %s)", ratio, e.CostRatio)
	case e.Cost != nil:
		return e.Cost.in(r.Cost), fmt.Sprintf("$%.4f (want %s)", r.Cost, e.Cost)
	case e.Errors != nil:
		return e.Errors.in(float64(r.Errors)), fmt.Sprintf("%d failed invocation(s) (want %s)", r.Errors, e.Errors)
	case e.OnReleasedImage != nil:
		return onReleasedImage(v)
	case e.ReleasedKept != nil:
		return releasedKept(v)
	case e.NeverJoined != nil:
		return neverJoined(v, e.NeverJoined)
	}
	return false, "no check"
}

func onReleasedImage(v *view) (bool, string) {
	if len(v.released) == 0 {
		return false, "no releaseAMI step has run"
	}
	var old []string
	running := 0
	for _, in := range v.instances {
		if in.State != awssim.StateRunning && in.State != awssim.StatePending {
			continue
		}
		running++
		if !v.released[in.ImageID] {
			old = append(old, in.ID+" ("+in.ImageID+")")
		}
	}
	if len(old) > 0 {
		slices.Sort(old)
		return false, fmt.Sprintf("%d of %d running instance(s) still on an image from before the release: %s", len(old), running, strings.Join(old, ", "))
	}
	return true, fmt.Sprintf("all %d running instance(s) on released images", running)
}

func releasedKept(v *view) (bool, string) {
	var gone []string
	launched := 0
	for _, in := range v.instances {
		if !v.released[in.ImageID] {
			continue
		}
		launched++
		if in.State == awssim.StateShuttingDown || in.State == awssim.StateTerminated {
			gone = append(gone, in.ID)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		return false, fmt.Sprintf("%d of %d instance(s) launched from a released image were terminated: %s", len(gone), launched, strings.Join(gone, ", "))
	}
	return true, fmt.Sprintf("none of %d instance(s) launched from a released image terminated", launched)
}

func (r *Range) in(x float64) bool {
	return (r.Min == nil || x >= *r.Min-1e-9) && (r.Max == nil || x <= *r.Max+1e-9)
}

func (r *Range) String() string {
	switch {
	case r.Min != nil && r.Max != nil:
		return fmt.Sprintf("%g–%g", *r.Min, *r.Max)
	case r.Min != nil:
		return fmt.Sprintf("≥ %g", *r.Min)
	case r.Max != nil:
		return fmt.Sprintf("≤ %g", *r.Max)
	}
	return "any"
}

// instanceCounts counts the instances Joiner launched during the replay and those
// of them terminating or terminated.
func instanceCounts(v *view) (launched, terminated int) {
	for _, in := range v.instances {
		if in.LaunchTime.Before(v.start) {
			continue
		}
		launched++
		if in.State == awssim.StateShuttingDown || in.State == awssim.StateTerminated {
			terminated++
		}
	}
	return launched, terminated
}

func total(cs []Count) int {
	n := 0
	for _, c := range cs {
		n += c.Count
	}
	return n
}

// podCounts counts pods (DaemonSet pods aside) running on a Ready node, and the others.
func podCounts(v *view) (running, other int) {
	ready := map[string]bool{}
	for i := range v.nodes {
		if facts.NodeReady(&v.nodes[i]) {
			ready[v.nodes[i].Name] = true
		}
	}
	for i := range v.pods {
		p := &v.pods[i]
		if facts.IsDaemonSetPod(p) || facts.IsTerminal(p) {
			continue
		}
		if p.Spec.NodeName != "" && ready[p.Spec.NodeName] && p.Status.Phase == corev1.PodRunning {
			running++
		} else {
			other++
		}
	}
	return running, other
}

func podOn(v *view, want *PodOn) (bool, string) {
	nodes := map[string]*corev1.Node{}
	for i := range v.nodes {
		nodes[v.nodes[i].Name] = &v.nodes[i]
	}
	prefix, isPrefix := strings.CutSuffix(want.Pod, "*")
	var seen []string
	for i := range v.pods {
		p := &v.pods[i]
		key := facts.PodKey(p)
		if key != want.Pod && !(isPrefix && strings.HasPrefix(key, prefix)) {
			continue
		}
		n := nodes[p.Spec.NodeName]
		if n == nil {
			seen = append(seen, key+" not on a node")
			continue
		}
		for k, val := range want.Labels {
			if n.Labels[k] != val {
				seen = append(seen, fmt.Sprintf("%s on %s (%s=%q)", key, n.Name, k, n.Labels[k]))
				n = nil
				break
			}
		}
		if n != nil {
			return true, fmt.Sprintf("%s on %s (%s %s)", key, n.Name, n.Labels[corev1.LabelInstanceTypeStable], n.Labels[karpenter.CapacityTypeLabelKey])
		}
	}
	if len(seen) == 0 {
		return false, "no pod " + want.Pod
	}
	return false, strings.Join(seen, "; ")
}

func nodesWith(v *view, want *NodesWith) (bool, string) {
	var names []string
	for i := range v.nodes {
		n := &v.nodes[i]
		ok := true
		for k, val := range want.Labels {
			if n.Labels[k] != val {
				ok = false
				break
			}
		}
		if ok {
			names = append(names, n.Name)
		}
	}
	slices.Sort(names)
	detail := fmt.Sprintf("%d node(s) (want %s)", len(names), &want.Count)
	if len(names) > 0 {
		detail += ": " + strings.Join(names, ", ")
	}
	return want.Count.in(float64(len(names))), detail
}

func noTaint(v *view) (bool, string) {
	var tainted []string
	for _, n := range v.nodes {
		for _, t := range n.Spec.Taints {
			if t.Key == karpenter.DisruptedTaintKey {
				tainted = append(tainted, n.Name)
			}
		}
	}
	if len(tainted) > 0 {
		return false, "tainted: " + strings.Join(tainted, ", ")
	}
	return true, fmt.Sprintf("none of %d node(s) tainted", len(v.nodes))
}

// noOrphans: every running instance has a live NodeClaim naming it, and every
// launched NodeClaim's instance is running (or on its way out with the claim).
func noOrphans(v *view) (bool, string) {
	claimed := map[string]*karpenter.NodeClaim{}
	for _, nc := range v.claims {
		if id := facts.InstanceID(nc.Status.ProviderID); id != "" {
			claimed[id] = nc
		}
	}
	state := map[string]string{}
	var problems []string
	for _, in := range v.instances {
		state[in.ID] = in.State
		if (in.State == awssim.StateRunning || in.State == awssim.StatePending) && claimed[in.ID] == nil {
			problems = append(problems, "instance "+in.ID+" has no NodeClaim")
		}
	}
	for id, nc := range claimed {
		if s := state[id]; s != awssim.StateRunning && s != awssim.StatePending && nc.DeletionTimestamp == nil {
			problems = append(problems, fmt.Sprintf("NodeClaim %s's instance %s is %q", nc.Name, id, s))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return false, strings.Join(problems, "; ")
	}
	return true, fmt.Sprintf("%d instance(s), %d NodeClaim(s), all matched", len(v.instances), len(v.claims))
}

func untouched(v *view, name string) (bool, string) {
	for _, n := range v.nodes {
		if n.Name != name {
			continue
		}
		for _, t := range n.Spec.Taints {
			if t.Key == karpenter.DisruptedTaintKey {
				return false, name + " is tainted " + t.Key
			}
		}
		return true, name + " is there, untainted"
	}
	return false, name + " is gone"
}

func gone(v *view, name string) (bool, string) {
	for _, n := range v.nodes {
		if n.Name == name {
			if n.DeletionTimestamp != nil {
				return false, name + " is still there, being deleted (finalizers " + strings.Join(n.Finalizers, ", ") + ")"
			}
			return false, name + " is still there"
		}
	}
	return true, name + " is gone"
}

// karpenterAdoptable checks what Karpenter v1 relies on to manage a NodeClaim it did
// not write: its termination finalizer, the karpenter.sh/nodepool label and an
// EC2NodeClass reference, both drift-hash annotations with their versions (Karpenter
// re-stamps a version not its own), the instance-type, zone and capacity-type labels,
// providerID and node name, and the owner reference to its NodePool; on the Node the
// nodepool and registered labels, the termination finalizer and the owner reference
// to its NodeClaim; on the instance the tags it lists and garbage-collects by. Owner
// references are checked as Karpenter writes them (karpenter.sh/v1, the owner's name
// and UID, blockOwnerDeletion), whoever wrote the object.
func karpenterAdoptable(v *view) (bool, string) {
	nodes := map[string]*corev1.Node{}
	for i := range v.nodes {
		nodes[v.nodes[i].Name] = &v.nodes[i]
	}
	pools := map[string]*karpenter.NodePool{}
	for _, np := range v.pools {
		pools[np.Name] = np
	}
	instances := map[string]awssim.Instance{}
	for _, in := range v.instances {
		instances[in.ID] = in
	}
	var problems []string
	checked := 0
	for _, nc := range v.claims {
		if nc.DeletionTimestamp != nil {
			continue
		}
		checked++
		bad := func(format string, a ...any) {
			problems = append(problems, "NodeClaim "+nc.Name+": "+fmt.Sprintf(format, a...))
		}
		if !slices.Contains(nc.Finalizers, karpenter.TerminationFinalizer) {
			bad("no %s finalizer", karpenter.TerminationFinalizer)
		}
		pool := nc.Labels[karpenter.NodePoolLabelKey]
		for _, k := range []string{karpenter.NodePoolLabelKey, kube.LabelInstanceType, kube.LabelZone, karpenter.CapacityTypeLabelKey} {
			if nc.Labels[k] == "" {
				bad("no label %s", k)
			}
		}
		if np := pools[pool]; np == nil {
			bad("NodePool %q does not exist", pool)
		} else if !ownedBy(nc.OwnerReferences, karpenter.NodePoolKind, np.Name, np.UID) {
			bad("no owner reference to NodePool %s (uid %s) with blockOwnerDeletion: %s", np.Name, np.UID, refsString(nc.OwnerReferences))
		}
		ref := nc.Spec.NodeClassRef
		if ref == nil || ref.Group != karpenter.AWSGroup || ref.Kind != karpenter.NodeClassKind || ref.Name == "" {
			bad("nodeClassRef %+v is not a karpenter.k8s.aws EC2NodeClass", ref)
		}
		for _, k := range []string{"karpenter.sh/nodepool-hash", "karpenter.sh/nodepool-hash-version", "karpenter.k8s.aws/ec2nodeclass-hash", "karpenter.k8s.aws/ec2nodeclass-hash-version"} {
			if nc.Annotations[k] == "" {
				bad("no annotation %s", k)
			}
		}
		id := facts.InstanceID(nc.Status.ProviderID)
		if id == "" {
			bad("no providerID")
			continue
		}
		in, ok := instances[id]
		if !ok {
			bad("instance %s unknown", id)
			continue
		}
		want := map[string]string{"kubernetes.io/cluster/" + v.cluster: "owned", "eks:eks-cluster-name": v.cluster,
			karpenter.NodePoolLabelKey: pool, karpenter.NodeClaimLabelKey: nc.Name}
		if ref != nil {
			want[karpenter.NodeClassLabelKey] = ref.Name
		}
		for k, val := range want {
			if in.Tags[k] != val {
				bad("instance %s tag %s=%q, want %q", id, k, in.Tags[k], val)
			}
		}
		if !kube.ConditionTrue(nc.Status.Conditions, karpenter.ConditionRegistered) {
			continue
		}
		n := nodes[nc.Status.NodeName]
		switch {
		case n == nil:
			bad("registered, but node %q does not exist", nc.Status.NodeName)
		case n.Spec.ProviderID != nc.Status.ProviderID:
			bad("node %s has providerID %s", n.Name, n.Spec.ProviderID)
		case n.Labels[karpenter.NodePoolLabelKey] != pool || n.Labels[karpenter.NodeRegisteredLabelKey] != "true":
			bad("node %s lacks labels %s=%s, %s=true", n.Name, karpenter.NodePoolLabelKey, pool, karpenter.NodeRegisteredLabelKey)
		case !slices.Contains(n.Finalizers, karpenter.TerminationFinalizer):
			bad("node %s has no %s finalizer", n.Name, karpenter.TerminationFinalizer)
		case !ownedBy(n.OwnerReferences, karpenter.NodeClaimKind, nc.Name, nc.UID):
			bad("node %s has no owner reference to its NodeClaim (uid %s) with blockOwnerDeletion: %s", n.Name, nc.UID, refsString(n.OwnerReferences))
		}
	}
	if checked == 0 {
		return false, "no live NodeClaim to check"
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return false, strings.Join(problems, "; ")
	}
	return true, fmt.Sprintf("%d NodeClaim(s) with their nodes and instances", checked)
}

// neverJoined checks how many instances never joined and that the summary and
// an Event on each one's NodeClaim name the cause.
func neverJoined(v *view, want *NeverJoined) (bool, string) {
	r := v.res
	detail := fmt.Sprintf("%d instance(s) never joined (want %s)", r.NeverJoined, &want.Count)
	if !want.Count.in(float64(r.NeverJoined)) {
		return false, detail
	}
	if want.Cause == "" {
		return true, detail
	}
	for _, c := range r.JoinFailures {
		if !strings.Contains(c, want.Cause) {
			return false, fmt.Sprintf("%s; cause %q does not say %q", detail, c, want.Cause)
		}
	}
	if len(v.bootEvents) < r.NeverJoined {
		return false, fmt.Sprintf("%s; %d NodeBootFailed Event(s)", detail, len(v.bootEvents))
	}
	for nc, note := range v.bootEvents {
		if !strings.Contains(note, want.Cause) {
			return false, fmt.Sprintf("%s; Event on NodeClaim %s says %q, not %q", detail, nc, note, want.Cause)
		}
	}
	return true, fmt.Sprintf("%s, each named in the summary and a NodeBootFailed Event: %s", detail, want.Cause)
}

func refsString(refs []metav1.OwnerReference) string {
	if len(refs) == 0 {
		return "none"
	}
	parts := make([]string, len(refs))
	for i, o := range refs {
		parts[i] = fmt.Sprintf("%s %s/%s uid %s blockOwnerDeletion %v", o.APIVersion, o.Kind, o.Name, o.UID, o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion)
	}
	return strings.Join(parts, ", ")
}

// ownedBy reports whether refs hold an owner reference to the karpenter.sh/v1
// object kind/name with that UID, as Karpenter writes one (blockOwnerDeletion).
func ownedBy(refs []metav1.OwnerReference, kind, name string, uid types.UID) bool {
	return uid != "" && slices.ContainsFunc(refs, func(o metav1.OwnerReference) bool {
		return o.APIVersion == karpenter.APIVersion && o.Kind == kind && o.Name == name && o.UID == uid &&
			o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion
	})
}
