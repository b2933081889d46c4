package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/disruption"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// lateDrainFloor is the least time a drain gets when its event's deadline has
// already passed: enough to delete the pods and remove the node.
const lateDrainFloor = 10 * time.Second

var stateReasons = map[string]string{
	events.StateStopping: "InstanceStopping", events.StateStopped: "InstanceStopped",
	events.StateShuttingDown: "InstanceShuttingDown", events.StateTerminated: "InstanceTerminated",
}

// interruptionFor is what an event asks of its instances; ignored says why it asks
// nothing.
func interruptionFor(ev events.Event, rebalance string) (it disruption.Interruption, ignored string) {
	switch e := ev.(type) {
	case *events.SpotInterruption:
		return disruption.Interruption{Reason: "SpotInterrupted", Instances: []string{e.InstanceID}, Involuntary: true, Deadline: e.Deadline(), MarkSpot: true}, ""
	case *events.RebalanceRecommendation:
		switch rebalance {
		case RebalanceIgnore:
			return it, "rebalance recommendations are ignored (REBALANCE_MODE=ignore)"
		case RebalanceTaint:
			return disruption.Interruption{Reason: "RebalanceRecommendation", Instances: []string{e.InstanceID}, TaintOnly: true}, ""
		}
		return disruption.Interruption{Reason: "RebalanceRecommendation", Instances: []string{e.InstanceID}}, ""
	case *events.StateChange:
		switch e.State {
		case events.StateStopping, events.StateStopped, events.StateShuttingDown, events.StateTerminated:
			return disruption.Interruption{Reason: stateReasons[e.State], Instances: []string{e.InstanceID}, Involuntary: true, Gone: true}, ""
		}
		return it, "instance state " + e.State + " needs nothing"
	case *events.HealthScheduledChange:
		start, _ := e.Window()
		return disruption.Interruption{Reason: "ScheduledChange", Instances: e.InstanceIDs(), Involuntary: true, Deadline: start}, ""
	}
	return it, fmt.Sprintf("%s is not an interruption", ev.Kind())
}

// runInterruption reads the cluster, decides with disruption.Interrupt and carries
// the actions out.
func runInterruption(ctx context.Context, d *Deps, ev events.Event, sum *Summary) error {
	it, ignored := interruptionFor(ev, d.Config.Rebalance)
	if ignored != "" {
		sum.Action, sum.Ignored = "ignored", ignored
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
	if !it.Gone && it.Owns(interruptState(st, false)) {
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
	for _, a := range disruption.Interrupt(it, interruptState(st, leased)) {
		done, err := d.interrupt(ctx, st, a, sum)
		if err != nil {
			sum.fail(fmt.Errorf("instance %s: %w", a.Instance, err))
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

func interruptState(st *kube.ClusterState, leased bool) disruption.InterruptState {
	return disruption.InterruptState{NodeClaims: st.NodeClaims, Nodes: st.AllNodes, Leased: leased}
}

// interrupt carries out one instance's action and says what it did.
func (d *Deps) interrupt(ctx context.Context, st *kube.ClusterState, a disruption.InterruptAction, sum *Summary) (string, error) {
	if a.Kind == disruption.InterruptNotOwned {
		// Not launched by Joiner for this cluster: never touched.
		d.log().Info("not a Joiner instance; ignored", "instance", a.Instance, "reason", a.Reason)
		return "", nil
	}
	if u := a.Unavailable; u != nil {
		d.Cloud.Unavailable().MarkUnavailable(u.InstanceType, u.Zone, u.CapacityType)
	}
	if a.Kind == disruption.InterruptAlreadyDeleting {
		return "", nil // a repeat of this event
	}
	if d.Config.DryRun {
		return fmt.Sprintf("would handle %s on NodeClaim %s (dry run)", a.Reason, a.NodeClaim), nil
	}
	switch a.Kind {
	case disruption.InterruptAlreadyDisrupted:
		return fmt.Sprintf("%s: node %s is already being disrupted", a.Reason, a.Node), nil
	case disruption.InterruptRetry:
		// Another invocation may be disrupting it right now; a retry finds out.
		return "", fmt.Errorf("node %s already carries %s and the cluster lease is held elsewhere: retry", a.Node, karpenter.DisruptedTaintKey)
	case disruption.InterruptNoNode:
		return fmt.Sprintf("%s: NodeClaim %s has no node yet; nothing to taint", a.Reason, a.NodeClaim), nil
	case disruption.InterruptTaint:
		// The node keeps its pods; new ones prefer other nodes.
		if err := d.Cluster.TaintRebalance(ctx, st, a.Node); err != nil {
			if errors.Is(err, kube.ErrNotOwned) {
				return "", nil
			}
			return "", err
		}
		sum.Interruptions++
		d.Metrics.Add("InterruptionsHandled", "Count", 1)
		return fmt.Sprintf("%s: tainted node %s %s", a.Reason, a.Node, kube.RebalanceTaint.ToString()), nil
	}
	sum.Interruptions++
	d.Metrics.Add("InterruptionsHandled", "Count", 1)
	if a.Kind == disruption.InterruptDelete {
		// Nothing left to drain onto: delete the NodeClaim; its finalizer removes the Node.
		if err := d.Cluster.DeleteNodeClaim(ctx, a.NodeClaim); err != nil {
			return "", err
		}
		if st2, err := d.Cluster.ReadState(ctx); err == nil {
			if rep := d.advance(ctx, st2); len(rep.Errors) > 0 {
				d.log().Warn("reconcile after delete", "error", errors.Join(rep.Errors...).Error())
			}
		}
		sum.NodesTerminated = append(sum.NodesTerminated, a.NodeClaim)
		d.Metrics.Add("NodesTerminated", "Count", 1)
		return fmt.Sprintf("%s: deleted NodeClaim %s", a.Reason, a.NodeClaim), nil
	}
	var node *corev1.Node
	for _, n := range st.AllNodes {
		if n.Name == a.Node {
			node = n
		}
	}
	dis, err := d.Cluster.BeginDisruption(ctx, st, a.Node, kube.DisruptOptions{Reason: a.Reason, Involuntary: a.Involuntary})
	if err != nil {
		if errors.Is(err, kube.ErrNotOwned) {
			return "", nil
		}
		return "", err
	}
	defer dis.Abandon(ctx)
	// Replacement capacity first, so the drained pods have somewhere to go.
	if err := d.replace(ctx, st, []*corev1.Node{node}, a.Reason, sum); err != nil {
		d.log().Warn("replacement", "node", a.Node, "error", err.Error())
	}
	dctx := ctx
	opts := kube.DrainOptions{Reason: a.Reason, Involuntary: a.Involuntary, GraceDeadline: a.GraceDeadline}
	if !a.DrainUntil.IsZero() {
		// Measured on the handler's clock (simulated in replay). An event handled
		// late (delivered or retried past its deadline) still drains: its pods are
		// past their grace deadline and deleted at once, within lateDrainFloor.
		left := max(a.DrainUntil.Sub(d.now()), lateDrainFloor)
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, left)
		defer cancel()
	}
	if _, err := dis.Drain(dctx, opts); err != nil {
		return "", fmt.Errorf("drain node %s: %w", a.Node, err)
	}
	if err := dis.Complete(ctx, terminator{d.Cloud}); err != nil {
		return "", err
	}
	sum.NodesTerminated = append(sum.NodesTerminated, a.NodeClaim)
	d.Metrics.Add("NodesTerminated", "Count", 1)
	return fmt.Sprintf("%s: replaced and drained node %s (NodeClaim %s)", a.Reason, a.Node, a.NodeClaim), nil
}

// replace launches capacity for the pods of nodes that are about to go, as if the
// nodes were already gone (disruption.Replacements), with the same engine the
// provisioner uses.
func (d *Deps) replace(ctx context.Context, st *kube.ClusterState, going []*corev1.Node, reason string, sum *Summary) error {
	cat, err := d.catalogFor(ctx)
	if err != nil {
		return err
	}
	snap := st.Snapshot
	snap.Catalog = cat
	// A free slot in a reservation the class selects is where a replacement
	// goes first, as for any new node.
	snap.Reservations = d.reservations(ctx, snap.NodeClasses)
	plan := disruption.Replacements(disruption.Input{Now: d.now(), Snapshot: &snap, NodeClaims: st.NodeClaims, PDBs: st.PDBs,
		Options: disruption.Options{Packer: packer.Options{Explain: true, Prepared: d.preparedFor(cat)}}}, going, st.PodsByNode)
	d.launchPlan(ctx, st, cat, plan, reason, sum)
	return nil
}
