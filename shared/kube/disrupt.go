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
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// ErrDoNotDisrupt is returned when a node or one of its pods carries
// karpenter.sh/do-not-disrupt: "true" and the disruption is voluntary.
var ErrDoNotDisrupt = errors.New(`blocked by karpenter.sh/do-not-disrupt: "true"`)

// ErrNotOwned is returned for a node Joiner did not launch (no NodeClaim, no nodepool
// label) or a control-plane or infra node (facts.IsProtectedNode): Joiner never touches those.
var ErrNotOwned = errors.New("not launched by Joiner")

// DisruptedTaint is the taint that keeps new pods off a node being disrupted.
var DisruptedTaint = corev1.Taint{Key: karpenter.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}

// DisruptionUntilAnnotation goes on a node with DisruptedTaint: until when the
// disruption that tainted it may still be running (its invocation's deadline, which
// Lambda's timeout bounds). Past it the invocation is gone; had it ended normally it
// would have deleted the node or removed the taint, so the taint is stale: an
// invocation killed outright left it, and ClearStaleDisruptions removes it.
const DisruptionUntilAnnotation = "joiner.dev/disruption-until"

// maxDisruptionHold is how long a disruption without a deadline counts as running:
// Lambda's longest function timeout.
const maxDisruptionHold = 15 * time.Minute

// RebalanceTaint marks a node whose instance got an EC2 rebalance recommendation
// (REBALANCE_MODE=taint). PreferNoSchedule, not NoSchedule: the recommendation is an
// early hint that the instance may be interrupted, often hours ahead or never, so new
// pods should prefer other nodes but still land here when nothing else fits, rather
// than wait pending (or make the provisioner launch nodes) while it runs. Its own key,
// not karpenter.sh/disrupted: the node is not being disrupted, so budgets and
// consolidation treat it as any other node, and ClearStaleDisruptions, which removes
// disruption taints no running disruption owns, leaves it alone.
var RebalanceTaint = corev1.Taint{Key: "joiner.dev/rebalance-recommended", Effect: corev1.TaintEffectPreferNoSchedule}

// DisruptOptions describe why a node is disrupted.
type DisruptOptions struct {
	// Reason is shown in Events ("Underutilized", "Empty", "Drifted", "Expired", "SpotInterrupted", ...).
	Reason string
	// Involuntary disruptions (the instance is going away anyway: spot interruption,
	// scheduled retirement) ignore karpenter.sh/do-not-disrupt.
	Involuntary bool
}

// NodeDisruption is a disruption in progress as the handlers drive it: *Disruption
// against the API server, or an executor that only records (shadow mode, tests).
type NodeDisruption interface {
	// Drain evicts the node's pods.
	Drain(ctx context.Context, opts DrainOptions) (*DrainResult, error)
	// Complete deletes the NodeClaim, terminates its instance and removes the Node.
	Complete(ctx context.Context, term InstanceTerminator) error
	// Abandon removes the disruption taint unless Complete committed the deletion.
	Abandon(ctx context.Context)
}

var _ NodeDisruption = (*Disruption)(nil)

// Disruption is a node tainted for disruption. Call Abandon in a defer right after
// BeginDisruption: unless Complete succeeded it removes the taint again, so no node
// stays cordoned by mistake, even when the context has already ended.
type Disruption struct {
	c         *Client
	Node      *corev1.Node
	NodeClaim *karpenter.NodeClaim
	opts      DisruptOptions
	committed bool
}

// Disruptable checks that nodeName may be disrupted: it is in the snapshot, a
// NodeClaim owns it, it is no control-plane or infra node, and (for a voluntary
// disruption) neither it nor any of its pods carries karpenter.sh/do-not-disrupt
// (blocker names the pod that does). Every executor asks it, the one that only
// records too, so no executor can disrupt what this refuses.
func (st *ClusterState) Disruptable(nodeName string, opts DisruptOptions) (node *corev1.Node, nc *karpenter.NodeClaim, blocker *corev1.Pod, err error) {
	for _, n := range st.AllNodes {
		if n.Name == nodeName {
			node = n
		}
	}
	if node == nil {
		return nil, nil, nil, fmt.Errorf("disrupt node %s: not in the snapshot", nodeName)
	}
	nc = st.NodeClaimForNode(node)
	switch {
	case facts.IsProtectedNode(node):
		return node, nc, nil, fmt.Errorf("disrupt node %s: control-plane or infra node: %w", nodeName, ErrNotOwned)
	case nc == nil || node.Labels[karpenter.NodePoolLabelKey] == "":
		return node, nc, nil, fmt.Errorf("disrupt node %s: no NodeClaim owns it: %w", nodeName, ErrNotOwned)
	}
	if opts.Involuntary {
		return node, nc, nil, nil
	}
	if facts.DoNotDisrupt(node.Annotations) {
		return node, nc, nil, fmt.Errorf("disrupt node %s: %w", nodeName, ErrDoNotDisrupt)
	}
	for _, p := range st.PodsByNode[nodeName] {
		if facts.PodBlocksDisruption(p) {
			return node, nc, p, fmt.Errorf("disrupt node %s: pod %s/%s: %w", nodeName, p.Namespace, p.Name, ErrDoNotDisrupt)
		}
	}
	return node, nc, nil, nil
}

// BeginDisruption checks that nodeName is Joiner's to disrupt and taints it
// karpenter.sh/disrupted:NoSchedule. A voluntary disruption is refused (with a
// DisruptionBlocked Event) when the node or any of its pods is annotated
// karpenter.sh/do-not-disrupt: "true".
func (c *Client) BeginDisruption(ctx context.Context, st *ClusterState, nodeName string, opts DisruptOptions) (NodeDisruption, error) {
	node, nc, blocker, err := st.Disruptable(nodeName, opts)
	if errors.Is(err, ErrDoNotDisrupt) {
		if blocker == nil {
			note := fmt.Sprintf("Node has %q annotation", karpenter.DoNotDisruptAnnotation)
			c.warn(ctx, NodeRef(node), ReasonDisruptionBlocked, "Disrupt", note)
			c.warn(ctx, NodeClaimRef(nc), ReasonDisruptionBlocked, "Disrupt", note)
		} else {
			note := fmt.Sprintf("Pod %s/%s has %q annotation", blocker.Namespace, blocker.Name, karpenter.DoNotDisruptAnnotation)
			c.warn(ctx, PodRef(blocker), ReasonDisruptionBlocked, "Disrupt", fmt.Sprintf("Pod has %q annotation", karpenter.DoNotDisruptAnnotation))
			c.warn(ctx, NodeRef(node), ReasonDisruptionBlocked, "Disrupt", note)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := c.taintDisruptedUntil(ctx, node, c.disruptionUntil(ctx), true); err != nil {
		return nil, err
	}
	note := "Disrupting Node: " + opts.Reason
	c.normal(ctx, NodeRef(node), ReasonDisrupting, "Disrupt", note)
	c.normal(ctx, NodeClaimRef(nc), ReasonDisrupting, "Disrupt", note)
	return &Disruption{c: c, Node: node, NodeClaim: nc, opts: opts}, nil
}

// Drain evicts the node's pods (see Client.Drain), honouring the NodeClaim's
// terminationGracePeriod.
func (d *Disruption) Drain(ctx context.Context, opts DrainOptions) (*DrainResult, error) {
	opts.Involuntary = opts.Involuntary || d.opts.Involuntary
	if opts.Reason == "" {
		opts.Reason = d.opts.Reason
	}
	return d.c.Drain(ctx, d.Node.Name, opts)
}

// Complete finishes the disruption of a drained node: the NodeClaim is deleted, its
// instance terminated, the Node deleted and the finalizer removed. After a successful
// Complete, Abandon does nothing.
func (d *Disruption) Complete(ctx context.Context, term InstanceTerminator) error {
	if err := d.c.DeleteNodeClaim(ctx, d.NodeClaim.Name); err != nil {
		return err
	}
	// From here the deletion is committed: the next sweep finishes it if this one dies.
	d.committed = true
	nc, err := d.c.getNodeClaim(ctx, d.NodeClaim.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	done, err := d.c.finalize(ctx, nil, nc, term)
	if err == nil && !done {
		err = fmt.Errorf("complete disruption of node %s: pods still draining", d.Node.Name)
	}
	return err
}

// Abandon removes the disruption taint unless Complete committed the deletion. It
// runs on a context of its own, so it still works after ctx's deadline.
func (d *Disruption) Abandon(ctx context.Context) {
	if d == nil || d.committed {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.c.untaintDisrupted(actx, d.Node.Name); err != nil {
		d.c.log.ErrorContext(actx, "could not remove disruption taint", "node", d.Node.Name, "error", err.Error())
		return
	}
	d.committed = true
	d.c.normal(actx, NodeRef(d.Node), ReasonDisruptionAbandoned, "Untaint", "Disruption abandoned ("+d.opts.Reason+"): taint "+karpenter.DisruptedTaintKey+" removed")
}

// disruptionUntil is when a disruption begun now stops running: the invocation's
// deadline, on the client's clock (simulated in replay), to the next second.
func (c *Client) disruptionUntil(ctx context.Context) time.Time {
	hold := maxDisruptionHold
	if dl, ok := ctx.Deadline(); ok {
		hold = max(min(hold, time.Until(dl)), 0)
	}
	return c.now().Add(hold + time.Second).UTC().Truncate(time.Second)
}

// taintDisrupted taints the node (a NodeClaim's finalization), leaving a taint
// already there as it is.
func (c *Client) taintDisrupted(ctx context.Context, node *corev1.Node) error {
	return c.taintDisruptedUntil(ctx, node, c.disruptionUntil(ctx), false)
}

// taintDisruptedUntil taints the node and records until when this disruption owns
// the taint; with takeOver it renews the record of a taint already there.
func (c *Client) taintDisruptedUntil(ctx context.Context, node *corev1.Node, until time.Time, takeOver bool) error {
	stamp := until.Format(time.RFC3339)
	_, err := c.patchNode(ctx, node, func(n *corev1.Node) bool {
		changed := false
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&DisruptedTaint) }) {
			n.Spec.Taints = append(n.Spec.Taints, DisruptedTaint)
			changed = true
		}
		if (changed || takeOver) && n.Annotations[DisruptionUntilAnnotation] != stamp {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[DisruptionUntilAnnotation] = stamp
			changed = true
		}
		return changed
	})
	if err != nil {
		return fmt.Errorf("taint node %s %s: %w", node.Name, karpenter.DisruptedTaintKey, err)
	}
	return nil
}

// disruptionRunning reports whether a disruption may still own the node's
// disruption taint, at now.
func disruptionRunning(n *corev1.Node, now time.Time) bool {
	until, err := time.Parse(time.RFC3339, n.Annotations[DisruptionUntilAnnotation])
	return err == nil && now.Before(until)
}

// ClearStaleDisruptions removes karpenter.sh/disrupted from Joiner's nodes that no
// disruption owns any more, as Karpenter does at the start of each disruption round:
// the invocation that tainted the node was killed before it could finish or clean
// up (its DisruptionUntilAnnotation has passed, or is missing). Left alone are
// nodes whose Node or NodeClaim is being deleted (the deletion is committed and
// Reconcile finishes it), nodes a running disruption owns, and nodes Joiner did
// not launch. Call it holding the cluster lease, so no disruption under the lease
// is in progress. It returns the nodes it untainted.
func (c *Client) ClearStaleDisruptions(ctx context.Context, st *ClusterState) ([]string, error) {
	now := c.now()
	var cleared []string
	var errs []error
	for _, n := range st.AllNodes {
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpenter.DisruptedTaintKey }) {
			continue
		}
		nc := st.NodeClaimForNode(n)
		switch {
		case facts.IsProtectedNode(n), nc == nil, n.Labels[karpenter.NodePoolLabelKey] == "":
			continue // not Joiner's
		case n.DeletionTimestamp != nil, nc.DeletionTimestamp != nil:
			continue
		case disruptionRunning(n, now):
			continue
		}
		if err := c.untaintDisrupted(ctx, n.Name); err != nil {
			errs = append(errs, fmt.Errorf("remove stale %s from node %s: %w", karpenter.DisruptedTaintKey, n.Name, err))
			continue
		}
		cleared = append(cleared, n.Name)
		note := "Stale taint " + karpenter.DisruptedTaintKey + " removed: the disruption that set it is no longer running"
		if at := n.Annotations[DisruptionUntilAnnotation]; at != "" {
			note += " (it owned the node until " + at + ")"
		}
		c.normal(ctx, NodeRef(n), ReasonDisruptionAbandoned, "Untaint", note)
	}
	return cleared, errors.Join(errs...)
}

// TaintRebalance puts RebalanceTaint on a Joiner-launched node (see RebalanceTaint).
func (c *Client) TaintRebalance(ctx context.Context, st *ClusterState, nodeName string) error {
	var node *corev1.Node
	for _, n := range st.AllNodes {
		if n.Name == nodeName {
			node = n
		}
	}
	switch {
	case node == nil:
		return fmt.Errorf("taint node %s: not in the snapshot", nodeName)
	case facts.IsProtectedNode(node):
		return fmt.Errorf("taint node %s: control-plane or infra node: %w", nodeName, ErrNotOwned)
	case st.NodeClaimForNode(node) == nil || node.Labels[karpenter.NodePoolLabelKey] == "":
		return fmt.Errorf("taint node %s: no NodeClaim owns it: %w", nodeName, ErrNotOwned)
	}
	_, err := c.patchNode(ctx, node, func(n *corev1.Node) bool {
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&RebalanceTaint) }) {
			return false
		}
		n.Spec.Taints = append(n.Spec.Taints, RebalanceTaint)
		return true
	})
	if err != nil {
		return fmt.Errorf("taint node %s %s: %w", nodeName, RebalanceTaint.Key, err)
	}
	c.normal(ctx, NodeRef(node), ReasonRebalanceRecommended, "Taint",
		"EC2 rebalance recommendation: tainted "+RebalanceTaint.ToString()+" so new pods prefer other nodes")
	return nil
}

func (c *Client) untaintDisrupted(ctx context.Context, name string) error {
	node, err := c.clients.Core.Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = c.patchNode(ctx, node, func(n *corev1.Node) bool {
		before := len(n.Spec.Taints)
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpenter.DisruptedTaintKey })
		_, stamped := n.Annotations[DisruptionUntilAnnotation]
		delete(n.Annotations, DisruptionUntilAnnotation)
		return len(n.Spec.Taints) != before || stamped
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// patchNode applies mutate to a copy of node and writes labels and taints back with a
// merge patch guarded by resourceVersion; on a conflict it re-reads the node and tries
// again. mutate returns false when there is nothing to write.
func (c *Client) patchNode(ctx context.Context, node *corev1.Node, mutate func(*corev1.Node) bool) (*corev1.Node, error) {
	cur := node
	for attempt := 0; attempt < 5; attempt++ {
		next := cur.DeepCopy()
		if !mutate(next) {
			return cur, nil
		}
		taints := next.Spec.Taints
		if taints == nil {
			taints = []corev1.Taint{}
		}
		meta := map[string]any{"labels": next.Labels, "resourceVersion": cur.ResourceVersion}
		// Annotations as a merge patch: changed keys, and null for removed ones.
		annotations := map[string]any{}
		for k, v := range next.Annotations {
			if old, ok := cur.Annotations[k]; !ok || old != v {
				annotations[k] = v
			}
		}
		for k := range cur.Annotations {
			if _, ok := next.Annotations[k]; !ok {
				annotations[k] = nil
			}
		}
		if len(annotations) > 0 {
			meta["annotations"] = annotations
		}
		// Lists go whole in a merge patch; resourceVersion keeps that safe.
		if !slices.Equal(next.Finalizers, cur.Finalizers) {
			meta["finalizers"] = next.Finalizers
		}
		if !equality.Semantic.DeepEqual(next.OwnerReferences, cur.OwnerReferences) {
			meta["ownerReferences"] = next.OwnerReferences
		}
		patch, _ := json.Marshal(map[string]any{
			"metadata": meta,
			"spec":     map[string]any{"taints": taints},
		})
		out, err := c.clients.Core.Nodes().Patch(ctx, cur.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			return out, nil
		}
		if !apierrors.IsConflict(err) {
			return nil, err
		}
		if cur, err = c.clients.Core.Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("patch node %s: kept conflicting", node.Name)
}

// DrainOptions tune Drain.
type DrainOptions struct {
	// Reason is shown in the pods' Evicted Events.
	Reason string
	// Involuntary drains evict pods annotated karpenter.sh/do-not-disrupt too.
	Involuntary bool
	// GraceDeadline, when set, is when the node must be gone (the NodeClaim's
	// terminationGracePeriod): a pod is then deleted, bypassing its PDB and
	// do-not-disrupt, at GraceDeadline minus its own terminationGracePeriodSeconds.
	GraceDeadline time.Time
	// RetryInitial and RetryMax bound the backoff between rounds while PDBs refuse
	// evictions (429); defaults 1s and 10s.
	RetryInitial, RetryMax time.Duration
}

// DrainResult lists pods by namespace/name.
type DrainResult struct {
	Evicted []string
	// Deleted pods were removed past the grace deadline.
	Deleted []string
	// Skipped pods stay with the node (DaemonSet, mirror, terminal, tolerating the disruption taint).
	Skipped []string
	// Remaining pods were still on the node when the drain stopped.
	Remaining []string
}

// Drain moves every pod off a node through the Eviction API, so PodDisruptionBudgets
// are honoured: a 429 is retried with backoff until ctx ends. DaemonSet and mirror
// pods are left alone; non-critical pods go before system-critical ones; it returns
// once no evictable pod remains (pods being deleted count until their grace period
// is over). A voluntary drain refuses pods annotated karpenter.sh/do-not-disrupt.
func (c *Client) Drain(ctx context.Context, nodeName string, opts DrainOptions) (*DrainResult, error) {
	if opts.RetryInitial <= 0 {
		opts.RetryInitial = time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 10 * time.Second
	}
	res := &DrainResult{}
	evicted := map[types.UID]bool{}
	blocked := map[types.UID]bool{}
	delay := opts.RetryInitial
	for {
		list, err := c.clients.Core.Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String()})
		if err != nil {
			return c.drainStopped(ctx, nodeName, res, nil, fmt.Errorf("list pods on node %s: %w", nodeName, err))
		}
		now := c.now()
		res.Skipped = res.Skipped[:0]
		var waiting, normal, critical []*corev1.Pod
		for i := range list.Items {
			p := &list.Items[i]
			if p.Spec.NodeName != nodeName {
				continue
			}
			switch {
			case facts.IsDaemonSetPod(p), facts.IsMirrorPod(p), facts.IsTerminal(p), toleratesDisrupted(p):
				res.Skipped = append(res.Skipped, facts.PodKey(p))
			case p.DeletionTimestamp != nil:
				if now.Before(p.DeletionTimestamp.Time) { // still inside its grace period
					waiting = append(waiting, p)
				}
			case isCritical(p):
				critical = append(critical, p)
			default:
				normal = append(normal, p)
			}
		}
		candidates := normal
		if len(candidates) == 0 {
			candidates = critical
		}
		if len(candidates) == 0 && len(waiting) == 0 {
			res.Remaining = nil
			return res, nil
		}
		for _, p := range candidates {
			if err := ctx.Err(); err != nil {
				break
			}
			pastGrace := !opts.GraceDeadline.IsZero() && !now.Before(opts.GraceDeadline.Add(-podGrace(p)))
			if facts.DoNotDisrupt(p.Annotations) && !opts.Involuntary && !pastGrace {
				c.warn(ctx, PodRef(p), ReasonDisruptionBlocked, "Evict", fmt.Sprintf("Pod has %q annotation", karpenter.DoNotDisruptAnnotation))
				return c.drainStopped(ctx, nodeName, res, append(candidates, waiting...), fmt.Errorf("drain node %s: pod %s: %w", nodeName, facts.PodKey(p), ErrDoNotDisrupt))
			}
			if pastGrace {
				if err := c.deletePod(ctx, p, opts.GraceDeadline.Sub(now)); err != nil {
					return c.drainStopped(ctx, nodeName, res, candidates, err)
				}
				res.Deleted = append(res.Deleted, facts.PodKey(p))
				c.normal(ctx, PodRef(p), ReasonEvicted, "Delete", "Deleted pod: terminationGracePeriod of node "+nodeName+" reached")
				continue
			}
			err := c.evict(ctx, p)
			switch {
			case err == nil:
				if !evicted[p.UID] {
					evicted[p.UID] = true
					res.Evicted = append(res.Evicted, facts.PodKey(p))
					c.normal(ctx, PodRef(p), ReasonEvicted, "Evict", "Evicted pod: "+opts.Reason)
				}
			case apierrors.IsNotFound(err), apierrors.IsConflict(err) && strings.Contains(err.Error(), "UID"):
				// gone already (or replaced by a new pod of the same name)
			case apierrors.IsTooManyRequests(err):
				if !blocked[p.UID] {
					blocked[p.UID] = true
					c.warn(ctx, PodRef(p), ReasonDisruptionBlocked, "Evict", "Eviction blocked: "+errMessage(err))
				}
			default:
				if ctx.Err() == nil {
					return c.drainStopped(ctx, nodeName, res, candidates, fmt.Errorf("evict pod %s: %w", facts.PodKey(p), err))
				}
			}
		}
		sleep := delay
		if len(waiting) > 0 && len(candidates) == 0 {
			sleep = min(delay, opts.RetryInitial)
		}
		if err := c.opts.Sleep(ctx, sleep); err != nil {
			return c.drainStopped(ctx, nodeName, res, append(candidates, waiting...), fmt.Errorf("drain node %s: %w", nodeName, err))
		}
		delay = min(delay*2, opts.RetryMax)
	}
}

// drainStopped records what was left and a FailedDraining Event.
func (c *Client) drainStopped(ctx context.Context, nodeName string, res *DrainResult, left []*corev1.Pod, err error) (*DrainResult, error) {
	res.Remaining = res.Remaining[:0]
	for _, p := range left {
		res.Remaining = append(res.Remaining, facts.PodKey(p))
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c.Record(ectx, Event{Regarding: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: nodeName}, Type: corev1.EventTypeWarning,
		Reason: ReasonFailedDraining, Action: "Drain", Note: fmt.Sprintf("Failed to drain node, %d pods are waiting to be evicted", len(res.Remaining))})
	return res, err
}

// evict posts one Eviction; PodAPI.EvictV1 does not retry a 429 (PDB not yet evaluated)
// itself, so the drain loop's retries are the only ones and stay within its deadline.
func (c *Client) evict(ctx context.Context, p *corev1.Pod) error {
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}},
	}
	return c.clients.Core.Pods(p.Namespace).EvictV1(ctx, ev)
}

func (c *Client) deletePod(ctx context.Context, p *corev1.Pod, left time.Duration) error {
	grace := int64(max(left, 0) / time.Second)
	err := c.clients.Core.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", facts.PodKey(p), err)
	}
	return nil
}

func podGrace(p *corev1.Pod) time.Duration {
	if p.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

func isCritical(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical"
}

// toleratesDisrupted pods would schedule straight back onto the node: Karpenter leaves them.
func toleratesDisrupted(p *corev1.Pod) bool {
	for _, t := range p.Spec.Tolerations {
		keyOK := t.Key == DisruptedTaint.Key || (t.Key == "" && t.Operator == corev1.TolerationOpExists)
		effectOK := t.Effect == "" || t.Effect == DisruptedTaint.Effect
		valueOK := t.Operator == corev1.TolerationOpExists || t.Value == DisruptedTaint.Value
		if keyOK && effectOK && valueOK {
			return true
		}
	}
	return false
}

func errMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Message
	}
	return err.Error()
}

// DeleteNode deletes a Node Joiner launched.
func (c *Client) DeleteNode(ctx context.Context, node *corev1.Node) error {
	if facts.IsProtectedNode(node) || node.Labels[karpenter.NodePoolLabelKey] == "" {
		return fmt.Errorf("delete node %s: %w", node.Name, ErrNotOwned)
	}
	err := c.clients.Core.Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &node.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", node.Name, err)
	}
	return nil
}
