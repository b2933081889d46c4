package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/lifecycle"
	"github.com/joiner-autoscaler/joiner/shared/nominate"
)

// Well-known node labels written on a launched NodeClaim (and so on its Node).
const (
	LabelInstanceType = "node.kubernetes.io/instance-type"
	LabelZone         = "topology.kubernetes.io/zone"
)

// Condition reasons, as Karpenter writes them.
const (
	ReasonLaunchFailedCondition = "LaunchFailed"
	ReasonNotLaunched           = "NotLaunched"
	ReasonNodeNotFound          = "NodeNotFound"
	ReasonUnhealthyDependents   = "UnhealthyDependents"
	ReasonReconcilingDependents = "ReconcilingDependents"
)

// InstanceTerminator ends the EC2 instance behind a NodeClaim. It finds the instance by
// status.providerID, or by the karpenter.sh/nodeclaim tag when the launch was never
// recorded, and returns nil when no such instance exists any more. It must refuse an
// instance without Joiner's ownership tags.
type InstanceTerminator interface {
	Terminate(ctx context.Context, nc *karpenter.NodeClaim) error
}

// Launch is what the EC2 side reports after a launch.
type Launch struct {
	ProviderID   string
	InstanceType string
	Zone         string
	CapacityType string
	ImageID      string
	Capacity     corev1.ResourceList
	Allocatable  corev1.ResourceList
	// Labels are further labels of the chosen instance type (arch, family, ...).
	Labels map[string]string
	// Pods are the pods planned onto the node, named in the Launched Event; nil
	// names none (the caller tells each pod with a Nominated Event of its own).
	Pods []string
}

// CreateNodeClaim writes nc before its instance is launched, so a concurrent
// invocation already counts its capacity. It adds the termination finalizer (the
// instance is terminated before the NodeClaim can go) and names it <nodepool>-xxxxx
// when it has no name.
func (c *Client) CreateNodeClaim(ctx context.Context, nc *karpenter.NodeClaim) (*karpenter.NodeClaim, error) {
	nc = deepCopyNodeClaim(nc)
	pool := nc.Labels[karpenter.NodePoolLabelKey]
	var errs []string
	if pool == "" {
		errs = append(errs, "label "+karpenter.NodePoolLabelKey+" is required")
	}
	if nc.Spec.NodeClassRef == nil || nc.Spec.NodeClassRef.Name == "" {
		errs = append(errs, "spec.nodeClassRef is required")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("create NodeClaim %s: %s", nc.Name, strings.Join(errs, "; "))
	}
	if nc.Spec.Requirements == nil {
		nc.Spec.Requirements = []karpenter.NodeSelectorRequirementWithMinValues{}
	}
	if nc.Name == "" && nc.GenerateName == "" {
		nc.GenerateName = pool + "-"
	}
	if !slices.Contains(nc.Finalizers, karpenter.TerminationFinalizer) {
		nc.Finalizers = append(nc.Finalizers, karpenter.TerminationFinalizer)
	}
	// No status: the API server drops it on create, and the conditions are
	// written once, with the launch (MarkLaunched or MarkLaunchFailed), as
	// Karpenter's lifecycle controller writes them. Until then the NodeClaim
	// counts as in flight, and a launch that never happens times out from its
	// creation (lifecycle.Decide). A separate write of "not launched yet"
	// conditions was one request per node of a 1,000-node burst.
	nc.Status = karpenter.NodeClaimStatus{}
	u, err := NodeClaimToUnstructured(nc)
	if err != nil {
		return nil, err
	}
	created, err := c.clients.Dynamic.Resource(NodeClaimGVR).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create NodeClaim %s: %w", nc.Name+nc.GenerateName, crdHint(err))
	}
	return NodeClaimFromUnstructured(created)
}

// MarkLaunched records the launched instance: labels for instance type, zone and
// capacity type (shown by `kubectl get nodeclaims`), then providerID, image,
// capacity, allocatable and Launched=True.
func (c *Client) MarkLaunched(ctx context.Context, name string, l Launch) (*karpenter.NodeClaim, error) {
	if l.ProviderID == "" {
		return nil, fmt.Errorf("mark NodeClaim %s launched: providerID is empty", name)
	}
	labels := map[string]string{}
	for k, v := range l.Labels {
		labels[k] = v
	}
	for k, v := range map[string]string{LabelInstanceType: l.InstanceType, LabelZone: l.Zone, karpenter.CapacityTypeLabelKey: l.CapacityType} {
		if v != "" {
			labels[k] = v
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	u, err := c.clients.Dynamic.Resource(NodeClaimGVR).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("label NodeClaim %s: %w", name, err)
	}
	nc, err := NodeClaimFromUnstructured(u)
	if err != nil {
		return nil, err
	}
	now := c.now()
	nc.Status.ProviderID, nc.Status.ImageID = l.ProviderID, l.ImageID
	nc.Status.Capacity, nc.Status.Allocatable = l.Capacity, l.Allocatable
	setCond(&nc.Status.Conditions, karpenter.ConditionLaunched, metav1.ConditionTrue, karpenter.ConditionLaunched, "", now, nc.Generation)
	setCond(&nc.Status.Conditions, karpenter.ConditionRegistered, metav1.ConditionUnknown, ReasonNodeNotFound, "Node not registered with cluster", now, nc.Generation)
	setCond(&nc.Status.Conditions, karpenter.ConditionInitialized, metav1.ConditionUnknown, ReasonNodeNotFound, "Node not registered with cluster", now, nc.Generation)
	setReady(&nc.Status.Conditions, now, nc.Generation)
	out, err := c.patchNodeClaimStatus(ctx, nc)
	if err != nil {
		return nil, err
	}
	note := fmt.Sprintf("Launched instance %s (%s, %s, %s)", facts.InstanceID(l.ProviderID), l.InstanceType, l.Zone, l.CapacityType)
	if len(l.Pods) > 0 {
		note = NoteNamingPods(note+"; ", l.Pods)
	}
	c.normal(ctx, NodeClaimRef(out), ReasonLaunched, "Launch", note)
	return out, nil
}

// MarkLaunchFailed records why the launch failed (Launched=False), then deletes and
// finalizes the NodeClaim; term terminates an instance the failed call may still have
// started, so nothing is left behind.
func (c *Client) MarkLaunchFailed(ctx context.Context, name string, cause error, term InstanceTerminator) error {
	nc, err := c.getNodeClaim(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	now := c.now()
	msg := "launch failed"
	if cause != nil {
		msg = cause.Error()
	}
	setCond(&nc.Status.Conditions, karpenter.ConditionLaunched, metav1.ConditionFalse, ReasonLaunchFailedCondition, msg, now, nc.Generation)
	setCond(&nc.Status.Conditions, karpenter.ConditionRegistered, metav1.ConditionUnknown, ReasonNotLaunched, "Node not launched", now, nc.Generation)
	setCond(&nc.Status.Conditions, karpenter.ConditionInitialized, metav1.ConditionUnknown, ReasonNotLaunched, "Node not launched", now, nc.Generation)
	setReady(&nc.Status.Conditions, now, nc.Generation)
	if nc, err = c.patchNodeClaimStatus(ctx, nc); err != nil {
		return err
	}
	c.warn(ctx, NodeClaimRef(nc), ReasonLaunchFailed, "Launch", msg)
	if err := c.DeleteNodeClaim(ctx, name); err != nil {
		return err
	}
	nc, err = c.getNodeClaim(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = c.finalize(ctx, nil, nc, term)
	return err
}

// DeleteNodeClaim marks a NodeClaim for deletion; its finalizer keeps it until the
// instance is terminated (Reconcile or a Disruption finishes that).
func (c *Client) DeleteNodeClaim(ctx context.Context, name string) error {
	err := c.clients.Dynamic.Resource(NodeClaimGVR).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete NodeClaim %s: %w", name, err)
	}
	return nil
}

// SetEmpty sets the NodeClaim's Empty condition: True since at when its node holds
// no pods but DaemonSet and mirror pods, False when it runs pods again. Pods that
// left a node leave no trace in a snapshot, so this condition is what keeps the
// emptiness timer (consolidateAfter) between consolidation rounds.
func (c *Client) SetEmpty(ctx context.Context, name string, empty bool, at time.Time) error {
	nc, err := c.getNodeClaim(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	status, reason := metav1.ConditionFalse, "NotEmpty"
	if empty {
		status, reason = metav1.ConditionTrue, karpenter.ConditionEmpty
	}
	setCond(&nc.Status.Conditions, karpenter.ConditionEmpty, status, reason, "", at, nc.Generation)
	_, err = c.patchNodeClaimStatus(ctx, nc)
	return err
}

// SetDrifted sets the NodeClaim's Drifted condition, as Karpenter's drift
// controller does (True with the drift reason; removed when no longer drifted), so
// kubectl shows it and a Karpenter taking the cluster back reads it.
func (c *Client) SetDrifted(ctx context.Context, name, reason, message string, at time.Time) error {
	nc, err := c.getNodeClaim(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if reason == "" {
		if !meta.RemoveStatusCondition(&nc.Status.Conditions, karpenter.ConditionDrifted) {
			return nil
		}
	} else {
		setCond(&nc.Status.Conditions, karpenter.ConditionDrifted, metav1.ConditionTrue, reason, message, at, nc.Generation)
	}
	_, err = c.patchNodeClaimStatus(ctx, nc)
	return err
}

func (c *Client) getNodeClaim(ctx context.Context, name string) (*karpenter.NodeClaim, error) {
	u, err := c.clients.Dynamic.Resource(NodeClaimGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return NodeClaimFromUnstructured(u)
}

// patchNodeClaimStatus writes nc.Status through the status subresource (a merge patch:
// conditions are replaced as a whole, as computed here).
func (c *Client) patchNodeClaimStatus(ctx context.Context, nc *karpenter.NodeClaim) (*karpenter.NodeClaim, error) {
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&nc.Status)
	if err != nil {
		return nil, err
	}
	dropNulls(st)
	patch, _ := json.Marshal(map[string]any{"status": st})
	u, err := c.clients.Dynamic.Resource(NodeClaimGVR).Patch(ctx, nc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("update NodeClaim %s status: %w", nc.Name, err)
	}
	return NodeClaimFromUnstructured(u)
}

func setCond(conds *[]metav1.Condition, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time, gen int64) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(now), ObservedGeneration: gen})
}

// setReady derives the root Ready condition from Launched, Registered and Initialized,
// the way Karpenter's status conditions do.
func setReady(conds *[]metav1.Condition, now time.Time, gen int64) {
	status, reason, msg := metav1.ConditionTrue, karpenter.ConditionReady, ""
	for _, t := range []string{karpenter.ConditionLaunched, karpenter.ConditionRegistered, karpenter.ConditionInitialized} {
		cd := meta.FindStatusCondition(*conds, t)
		switch {
		case cd == nil || cd.Status == metav1.ConditionUnknown:
			if status == metav1.ConditionTrue {
				status, reason, msg = metav1.ConditionUnknown, ReasonReconcilingDependents, t+" is not yet true"
			}
		case cd.Status == metav1.ConditionFalse:
			status, reason, msg = metav1.ConditionFalse, ReasonUnhealthyDependents, t+": "+cd.Message
		}
	}
	setCond(conds, karpenter.ConditionReady, status, reason, msg, now, gen)
}

// ReconcileReport says what Advance did, by NodeClaim name.
type ReconcileReport struct {
	Registered  []string
	Initialized []string
	// TimedOut NodeClaims were never registered (or launched) in time and were removed.
	TimedOut []string
	// Finalized NodeClaims had their instance terminated and their finalizer removed.
	Finalized []string
	// Draining NodeClaims are being deleted but their node still has pods to move.
	Draining []string
	// Errors are per-NodeClaim failures; the others were still processed.
	Errors []error
}

// Reconcile advances the lifecycle of every NodeClaim in st, as Karpenter's
// controllers would: the decisions are pure, the transitions due at now
// (lifecycle.Decide) and the nominations of the pods planned for the nodes they
// register (nominate.ForRegistration); c only writes them (WriteNominations, then
// Advance). c is any Cluster: the Client, or a recording executor. One failure does
// not stop the rest; the report's Errors list them all.
func Reconcile(ctx context.Context, c Cluster, st *ClusterState, now time.Time, term InstanceTerminator) *ReconcileReport {
	trs := lifecycle.Decide(lifecycle.Input{Now: now, NodeClaims: st.NodeClaims, Nodes: st.AllNodes})
	// Nominations first: registering lifts karpenter.sh/unregistered.
	_, nerr := c.WriteNominations(ctx, nominate.ForRegistration(st.NominationInput(), trs))
	rep := c.Advance(ctx, st, trs, term)
	if nerr != nil {
		rep.Errors = append(rep.Errors, nerr)
	}
	return rep
}

// Advance writes lifecycle transitions decided on st, in order: registration,
// initialization, removal after a timeout or the loss of the Node, and finalization
// (drain, terminate, delete node, drop finalizer) of deleted NodeClaims; then it
// writes each NodePool's resources in use. One NodeClaim's failure does not stop
// the others (its own later transitions are skipped).
func (c *Client) Advance(ctx context.Context, st *ClusterState, trs []lifecycle.Transition, term InstanceTerminator) *ReconcileReport {
	rep := &ReconcileReport{}
	failed := map[string]bool{}
	// registered holds the Nodes as registering them left them, for the
	// initialization that follows.
	registered := map[string]*corev1.Node{}
	var last *karpenter.NodeClaim
	for _, t := range trs {
		nc := t.NodeClaim
		if nc != last {
			if ctx.Err() != nil {
				break
			}
			last = nc
		}
		if failed[nc.Name] {
			continue
		}
		var err error
		switch t.Kind {
		case lifecycle.Finalize:
			var done bool
			done, err = c.finalize(ctx, st, nc, term)
			if err == nil && done {
				rep.Finalized = append(rep.Finalized, nc.Name)
			} else if err == nil {
				rep.Draining = append(rep.Draining, nc.Name)
			}
		case lifecycle.Expire:
			err = c.expire(ctx, nc, term, t.Why)
			if err == nil && t.Cause.Timeout() {
				rep.TimedOut = append(rep.TimedOut, nc.Name)
			} else if err == nil {
				rep.Finalized = append(rep.Finalized, nc.Name)
			}
		case lifecycle.Register:
			var node *corev1.Node
			if node, err = c.register(ctx, nc, t.Node); err == nil {
				registered[nc.Name] = node
				rep.Registered = append(rep.Registered, nc.Name)
			}
		case lifecycle.Initialize:
			node := t.Node
			if n := registered[nc.Name]; n != nil {
				node = n
			}
			if err = c.initialize(ctx, nc, node); err == nil {
				rep.Initialized = append(rep.Initialized, nc.Name)
			}
		case lifecycle.AwaitInitialization:
			err = c.awaitInitialization(ctx, nc, t.Reason, t.Message)
		default:
			err = fmt.Errorf("unknown lifecycle transition %q", t.Kind)
		}
		if err != nil {
			failed[nc.Name] = true
			rep.Errors = append(rep.Errors, fmt.Errorf("NodeClaim %s: %w", nc.Name, err))
		}
	}
	if err := c.UpdateNodePoolStatus(ctx, st); err != nil {
		rep.Errors = append(rep.Errors, err)
	}
	return rep
}

// expire removes a NodeClaim whose instance never became a node, or whose Node was
// deleted, terminating the instance.
func (c *Client) expire(ctx context.Context, nc *karpenter.NodeClaim, term InstanceTerminator, why string) error {
	reason := ReasonRegistrationTimeout
	if ConditionTrue(nc.Status.Conditions, karpenter.ConditionRegistered) {
		reason = ReasonTerminating
	}
	c.warn(ctx, NodeClaimRef(nc), reason, "Delete", why)
	c.log.WarnContext(ctx, "removing NodeClaim", "nodeclaim", nc.Name, "providerID", nc.Status.ProviderID, "why", why)
	if err := c.DeleteNodeClaim(ctx, nc.Name); err != nil {
		return err
	}
	fresh, err := c.getNodeClaim(ctx, nc.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = c.finalize(ctx, nil, fresh, term)
	return err
}

// register syncs the NodeClaim's labels and taints onto its new Node (see
// lifecycle.ApplyRegistration) and marks the NodeClaim registered.
func (c *Client) register(ctx context.Context, nc *karpenter.NodeClaim, node *corev1.Node) (*corev1.Node, error) {
	updated, err := c.patchNode(ctx, node, func(n *corev1.Node) bool {
		lifecycle.ApplyRegistration(nc, n)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("register node %s: %w", node.Name, err)
	}
	now := c.now()
	nc.Status.NodeName = updated.Name
	setCond(&nc.Status.Conditions, karpenter.ConditionRegistered, metav1.ConditionTrue, karpenter.ConditionRegistered, "", now, nc.Generation)
	setCond(&nc.Status.Conditions, karpenter.ConditionInitialized, metav1.ConditionUnknown, lifecycle.ReasonNodeNotReady, lifecycle.NodeNotReadyMessage, now, nc.Generation)
	setReady(&nc.Status.Conditions, now, nc.Generation)
	out, err := c.patchNodeClaimStatus(ctx, nc)
	if err != nil {
		return nil, err
	}
	*nc = *out
	c.normal(ctx, NodeClaimRef(nc), ReasonRegistered, "Register", "Node "+updated.Name+" registered")
	return updated, nil
}

// awaitInitialization records why the NodeClaim is not initialized yet; until it
// is, its capacity stays in flight.
func (c *Client) awaitInitialization(ctx context.Context, nc *karpenter.NodeClaim, reason, msg string) error {
	now := c.now()
	setCond(&nc.Status.Conditions, karpenter.ConditionInitialized, metav1.ConditionUnknown, reason, msg, now, nc.Generation)
	setReady(&nc.Status.Conditions, now, nc.Generation)
	out, err := c.patchNodeClaimStatus(ctx, nc)
	if err == nil {
		*nc = *out
	}
	return err
}

// initialize labels the node initialized and marks the NodeClaim initialized.
func (c *Client) initialize(ctx context.Context, nc *karpenter.NodeClaim, node *corev1.Node) error {
	if _, err := c.patchNode(ctx, node, func(n *corev1.Node) bool {
		if n.Labels[karpenter.NodeInitializedLabelKey] == "true" {
			return false
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[karpenter.NodeInitializedLabelKey] = "true"
		return true
	}); err != nil {
		return fmt.Errorf("label node %s initialized: %w", node.Name, err)
	}
	now := c.now()
	setCond(&nc.Status.Conditions, karpenter.ConditionInitialized, metav1.ConditionTrue, karpenter.ConditionInitialized, "", now, nc.Generation)
	setReady(&nc.Status.Conditions, now, nc.Generation)
	out, err := c.patchNodeClaimStatus(ctx, nc)
	if err != nil {
		return err
	}
	*nc = *out
	c.normal(ctx, NodeClaimRef(nc), ReasonInitialized, "Initialize", "Node "+node.Name+" initialized")
	return nil
}

// finalize completes a deleted NodeClaim: its node is drained (taint, evictions) if it
// still runs pods, the instance is terminated, the Node deleted and the finalizer
// removed, in that order (a node deleted before its instance would re-register).
// done is false while the drain is still under way.
func (c *Client) finalize(ctx context.Context, st *ClusterState, nc *karpenter.NodeClaim, term InstanceTerminator) (done bool, err error) {
	if term == nil {
		return false, errors.New("finalize: no InstanceTerminator configured")
	}
	node, err := c.nodeForClaim(ctx, st, nc)
	if err != nil {
		return false, err
	}
	// A node already being deleted is drained all the same: a Node Karpenter
	// registered carries its karpenter.sh/termination finalizer and waits, running
	// its pods, for whoever terminates it (see releaseNode).
	if node != nil {
		if err := c.taintDisrupted(ctx, node); err != nil {
			return false, err
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		opts := DrainOptions{Reason: "NodeClaim deleted"}
		if tgp := nc.Spec.TerminationGracePeriod; tgp != nil && nc.DeletionTimestamp != nil {
			opts.GraceDeadline = nc.DeletionTimestamp.Add(tgp.Duration)
		}
		res, derr := c.Drain(dctx, node.Name, opts)
		cancel()
		if derr != nil && !errors.Is(derr, context.DeadlineExceeded) {
			return false, derr
		}
		if len(res.Remaining) > 0 {
			return false, nil
		}
	}
	if err := term.Terminate(ctx, nc); err != nil {
		return false, fmt.Errorf("terminate instance %s: %w", nc.Status.ProviderID, err)
	}
	c.normal(ctx, NodeClaimRef(nc), ReasonInstanceTerminated, "Terminate", "Terminated instance "+facts.InstanceID(nc.Status.ProviderID))
	if node != nil {
		err := c.clients.Core.Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &node.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, fmt.Errorf("delete node %s: %w", node.Name, err)
		}
		if err := c.releaseNode(ctx, node.Name, node.UID); err != nil {
			return false, err
		}
	}
	return true, c.removeFinalizer(ctx, nc)
}

// releaseNode removes the karpenter.sh/termination finalizer from a deleted Node once
// its instance is terminated. Karpenter puts that finalizer on every Node it
// registers and its node termination controller removes it; with Karpenter scaled
// to zero, a Node it launched would otherwise stay Terminating for good. Other
// finalizers are left to their owners.
func (c *Client) releaseNode(ctx context.Context, name string, uid types.UID) error {
	for attempt := 0; attempt < 5; attempt++ {
		n, err := c.clients.Core.Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && n.UID != uid) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("release node %s: %w", name, err)
		}
		if !slices.Contains(n.Finalizers, karpenter.TerminationFinalizer) {
			return nil
		}
		rest := slices.DeleteFunc(slices.Clone(n.Finalizers), func(f string) bool { return f == karpenter.TerminationFinalizer })
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": rest, "resourceVersion": n.ResourceVersion}})
		_, err = c.clients.Core.Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("remove finalizer %s of node %s: %w", karpenter.TerminationFinalizer, name, err)
		}
	}
	return fmt.Errorf("remove finalizer %s of node %s: kept conflicting", karpenter.TerminationFinalizer, name)
}

func (c *Client) nodeForClaim(ctx context.Context, st *ClusterState, nc *karpenter.NodeClaim) (*corev1.Node, error) {
	if nc.Status.ProviderID == "" {
		return nil, nil
	}
	if st != nil {
		for _, n := range st.AllNodes {
			if n.Spec.ProviderID == nc.Status.ProviderID {
				return n, nil
			}
		}
		return nil, nil
	}
	if nc.Status.NodeName != "" {
		n, err := c.clients.Core.Nodes().Get(ctx, nc.Status.NodeName, metav1.GetOptions{})
		if err == nil && n.Spec.ProviderID == nc.Status.ProviderID {
			return n, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	// The node may have registered without the NodeClaim recording its name (the
	// status write failed): found by providerID, it is not left behind.
	list, err := c.clients.Core.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Spec.ProviderID == nc.Status.ProviderID {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

func (c *Client) removeFinalizer(ctx context.Context, nc *karpenter.NodeClaim) error {
	for attempt := 0; attempt < 5; attempt++ {
		rest := slices.DeleteFunc(slices.Clone(nc.Finalizers), func(f string) bool { return f == karpenter.TerminationFinalizer })
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": rest, "resourceVersion": nc.ResourceVersion}})
		_, err := c.clients.Dynamic.Resource(NodeClaimGVR).Patch(ctx, nc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("remove finalizer of NodeClaim %s: %w", nc.Name, err)
			}
			return nil
		}
		if nc, err = c.getNodeClaim(ctx, nc.Name); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
	}
	return fmt.Errorf("remove finalizer of NodeClaim %s: kept conflicting", nc.Name)
}

// UpdateNodePoolStatus writes each NodePool's resources in use (the capacity of its
// live NodeClaims, plus "nodes") when they changed.
func (c *Client) UpdateNodePoolStatus(ctx context.Context, st *ClusterState) error {
	var errs []error
	for _, ps := range lifecycle.PoolStatuses(st.Snapshot.NodePools, st.NodeClaims) {
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"resources": ps.Resources, "nodes": ps.Nodes}})
		if _, err := c.clients.Dynamic.Resource(NodePoolGVR).Patch(ctx, ps.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("update NodePool %s status: %w", ps.Name, err))
		}
	}
	return errors.Join(errs...)
}

func deepCopyNodeClaim(nc *karpenter.NodeClaim) *karpenter.NodeClaim {
	b, _ := json.Marshal(nc)
	out := &karpenter.NodeClaim{}
	_ = json.Unmarshal(b, out)
	return out
}

func addList(dst, src corev1.ResourceList) {
	for k, v := range src {
		cur := dst[k]
		cur.Add(v)
		dst[k] = cur
	}
}
