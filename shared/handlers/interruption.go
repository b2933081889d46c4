package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// drainMargin is kept between the end of a drain and the moment the instance goes
// away, so the Node and NodeClaim are deleted before EC2 pulls the plug.
const drainMargin = 15 * time.Second

// lateDrainFloor is the least time a drain gets when its event's deadline has
// already passed: enough to delete the pods and remove the node.
const lateDrainFloor = 10 * time.Second

var stateReasons = map[string]string{
	events.StateStopping: "InstanceStopping", events.StateStopped: "InstanceStopped",
	events.StateShuttingDown: "InstanceShuttingDown", events.StateTerminated: "InstanceTerminated",
}

// interruption is what one event asks for one instance.
type interruption struct {
	reason      string
	involuntary bool
	deadline    time.Time // zero: no deadline
	markSpot    bool      // mark the spot offering unavailable
	taintOnly   bool
	gone        bool // the instance is stopping or gone: delete at once
}

func runInterruption(ctx context.Context, d *Deps, ev events.Event, sum *Summary) error {
	var ids []string
	var it interruption
	switch e := ev.(type) {
	case *events.SpotInterruption:
		ids = []string{e.InstanceID}
		it = interruption{reason: "SpotInterrupted", involuntary: true, deadline: e.Deadline(), markSpot: true}
	case *events.RebalanceRecommendation:
		switch d.Config.Rebalance {
		case RebalanceIgnore:
			sum.Action, sum.Ignored = "ignored", "rebalance recommendations are ignored (REBALANCE_MODE=ignore)"
			return nil
		case RebalanceTaint:
			it = interruption{reason: "RebalanceRecommendation", taintOnly: true}
		default:
			it = interruption{reason: "RebalanceRecommendation"}
		}
		ids = []string{e.InstanceID}
	case *events.StateChange:
		switch e.State {
		case events.StateStopping, events.StateStopped, events.StateShuttingDown, events.StateTerminated:
			ids = []string{e.InstanceID}
			it = interruption{reason: stateReasons[e.State], involuntary: true, gone: true}
		default:
			sum.Action, sum.Ignored = "ignored", "instance state "+e.State+" needs nothing"
			return nil
		}
	case *events.HealthScheduledChange:
		ids = e.InstanceIDs()
		start, _ := e.Window()
		it = interruption{reason: "ScheduledChange", involuntary: true, deadline: start}
	default:
		sum.Action, sum.Ignored = "ignored", fmt.Sprintf("%s is not an interruption", ev.Kind())
		return nil
	}
	// Reconciled first, so a node that registered since the last sweep is linked to
	// its NodeClaim (its deletion then removes the Node too).
	st, err := d.readReconciled(ctx)
	if err != nil {
		return err
	}
	// The lease serialises this with the provisioner, the consolidator and other
	// deliveries of the same warning. It is taken only when there is something to
	// do, and the interruption path may not wait long: it acts without it if it must.
	leased := false
	if !it.gone && ownsAny(st, ids) {
		if release, lerr := d.takeLease(ctx, d.Config.LeaseWait, &Summary{}); lerr == nil && release != nil {
			defer release()
			leased = true
			// What the previous holder did while this one waited.
			if st, err = d.Cluster.ReadState(ctx); err != nil {
				return fmt.Errorf("read cluster: %w", err)
			}
		}
	}
	var acted []string
	for _, id := range ids {
		done, err := d.interrupt(ctx, st, id, it, leased, sum)
		if err != nil {
			sum.fail(fmt.Errorf("instance %s: %w", id, err))
			continue
		}
		if done != "" {
			acted = append(acted, done)
		}
	}
	if len(acted) == 0 && len(sum.Errors) == 0 {
		sum.Action, sum.Ignored = "ignored", "no instance of this event is one Joiner launched for cluster "+d.Config.ClusterName
		return nil
	}
	sum.Action = strings.Join(acted, "; ")
	return nil
}

// findInstance returns the Node (nil when not registered) and NodeClaim of an instance.
func findInstance(st *kube.ClusterState, id string) (*corev1.Node, *karpenter.NodeClaim) {
	var nc *karpenter.NodeClaim
	for _, c := range st.NodeClaims {
		if kube.InstanceID(c.Status.ProviderID) == id {
			nc = c
		}
	}
	if nc == nil {
		return nil, nil
	}
	for _, n := range st.AllNodes {
		if n.Spec.ProviderID == nc.Status.ProviderID {
			return n, nc
		}
	}
	return nil, nc
}

// ownsAny reports whether any of the instances is one of this cluster's NodeClaims.
func ownsAny(st *kube.ClusterState, ids []string) bool {
	for _, id := range ids {
		if _, nc := findInstance(st, id); nc != nil {
			return true
		}
	}
	return false
}

func (d *Deps) interrupt(ctx context.Context, st *kube.ClusterState, id string, it interruption, leased bool, sum *Summary) (string, error) {
	node, nc := findInstance(st, id)
	if nc == nil {
		// Not launched by Joiner for this cluster: never touched.
		d.log().Info("not a Joiner instance; ignored", "instance", id, "reason", it.reason)
		return "", nil
	}
	if it.markSpot {
		if t, z := nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone]; t != "" && z != "" {
			d.Cloud.Unavailable().MarkUnavailable(t, z, karpenter.CapacityTypeSpot)
		}
	}
	if nc.DeletionTimestamp != nil {
		return "", nil // already being removed: a repeat of this event
	}
	if d.Config.DryRun {
		return fmt.Sprintf("would handle %s on NodeClaim %s (dry run)", it.reason, nc.Name), nil
	}
	if node != nil && !it.gone && slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpenter.DisruptedTaintKey }) {
		switch {
		case it.taintOnly:
			return fmt.Sprintf("%s: node %s is already being disrupted", it.reason, node.Name), nil
		case !leased:
			// Another invocation may be disrupting it right now; a retry finds out.
			return "", fmt.Errorf("node %s already carries %s and the cluster lease is held elsewhere: retry", node.Name, karpenter.DisruptedTaintKey)
		}
		// Under the lease the taint is nobody's work in progress but, possibly, an
		// interruption acting without the lease: a disruption cut off before its
		// clean-up, or one that runs out of time anyway. Finish it.
	}
	if it.taintOnly {
		if node == nil {
			// A hint, not a notice: nothing to taint until the node registers.
			return fmt.Sprintf("%s: NodeClaim %s has no node yet; nothing to taint", it.reason, nc.Name), nil
		}
		// The node keeps its pods; new ones prefer other nodes.
		if err := d.Cluster.TaintRebalance(ctx, st, node.Name); err != nil {
			if errors.Is(err, kube.ErrNotOwned) {
				return "", nil
			}
			return "", err
		}
		sum.Interruptions++
		d.Metrics.Add("InterruptionsHandled", "Count", 1)
		return fmt.Sprintf("%s: tainted node %s %s", it.reason, node.Name, kube.RebalanceTaint.ToString()), nil
	}
	sum.Interruptions++
	d.Metrics.Add("InterruptionsHandled", "Count", 1)
	if it.gone || node == nil {
		// Nothing left to drain onto: delete the NodeClaim; its finalizer removes the Node.
		if err := d.Cluster.DeleteNodeClaim(ctx, nc.Name); err != nil {
			return "", err
		}
		if st2, err := d.Cluster.ReadState(ctx); err == nil {
			if rep := d.advance(ctx, st2); len(rep.Errors) > 0 {
				d.log().Warn("reconcile after delete", "error", errors.Join(rep.Errors...).Error())
			}
		}
		sum.NodesTerminated = append(sum.NodesTerminated, nc.Name)
		d.Metrics.Add("NodesTerminated", "Count", 1)
		return fmt.Sprintf("%s: deleted NodeClaim %s", it.reason, nc.Name), nil
	}
	dis, err := d.Cluster.BeginDisruption(ctx, st, node.Name, kube.DisruptOptions{Reason: it.reason, Involuntary: it.involuntary})
	if err != nil {
		if errors.Is(err, kube.ErrNotOwned) {
			return "", nil
		}
		return "", err
	}
	defer dis.Abandon(ctx)
	// Replacement capacity first, so the drained pods have somewhere to go.
	if err := d.replace(ctx, st, []*corev1.Node{node}, it.reason, sum); err != nil {
		d.log().Warn("replacement", "node", node.Name, "error", err.Error())
	}
	dctx := ctx
	opts := kube.DrainOptions{Reason: it.reason, Involuntary: it.involuntary}
	if !it.deadline.IsZero() {
		opts.GraceDeadline = it.deadline.Add(-drainMargin)
		// Measured on the handler's clock (simulated in replay). An event handled
		// late (delivered or retried past its deadline) still drains: its pods are
		// past their grace deadline and deleted at once, within lateDrainFloor.
		left := max(it.deadline.Add(-drainMargin/2).Sub(d.now()), lateDrainFloor)
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
	}
	if _, err := dis.Drain(dctx, opts); err != nil {
		return "", fmt.Errorf("drain node %s: %w", node.Name, err)
	}
	if err := dis.Complete(ctx, terminator{d.Cloud}); err != nil {
		return "", err
	}
	sum.NodesTerminated = append(sum.NodesTerminated, nc.Name)
	d.Metrics.Add("NodesTerminated", "Count", 1)
	return fmt.Sprintf("%s: replaced and drained node %s (NodeClaim %s)", it.reason, node.Name, nc.Name), nil
}

// replace launches capacity for the pods of nodes that are about to go, as if the
// nodes were already gone, with the same engine the provisioner uses.
func (d *Deps) replace(ctx context.Context, st *kube.ClusterState, going []*corev1.Node, reason string, sum *Summary) error {
	cat, err := d.catalogFor(ctx)
	if err != nil {
		return err
	}
	snap := withoutNodes(st, going)
	snap.Catalog = cat
	plan := packer.Solve(snap, packer.Options{Explain: true})
	d.launchPlan(ctx, st, cat, plan, reason, sum)
	return nil
}

// withoutNodes is the cluster snapshot with the given nodes removed and their pods
// pending again (DaemonSet and mirror pods go with their node). A node whose
// NodeClaim is not initialized yet is in the snapshot as in-flight capacity: that
// goes too.
func withoutNodes(st *kube.ClusterState, going []*corev1.Node) *packer.Snapshot {
	snap := st.Snapshot
	gone := map[string]bool{}
	goneProvider := map[string]bool{}
	for _, n := range going {
		gone[n.Name] = true
		if n.Spec.ProviderID != "" {
			goneProvider[n.Spec.ProviderID] = true
		}
	}
	snap.Nodes = nil
	for _, ns := range st.Snapshot.Nodes {
		if !gone[ns.Node.Name] {
			snap.Nodes = append(snap.Nodes, ns)
		}
	}
	snap.InFlight = nil
	for _, nc := range st.Snapshot.InFlight {
		if !goneProvider[nc.Status.ProviderID] || nc.Status.ProviderID == "" {
			snap.InFlight = append(snap.InFlight, nc)
		}
	}
	snap.Pods = append([]*corev1.Pod(nil), st.Snapshot.Pods...)
	for _, n := range going {
		for _, p := range st.PodsByNode[n.Name] {
			if facts.IsReschedulable(p) {
				q := p.DeepCopy()
				q.Spec.NodeName = ""
				snap.Pods = append(snap.Pods, q)
			}
		}
	}
	return &snap
}
