package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/nominate"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// provisionerLeaseWait is how long the provisioner waits for the cluster lease: a
// consolidation in progress finishes within a minute, and the next sweep retries.
const provisionerLeaseWait = 10 * time.Second

// runProvisioner handles Pending Pods batches and the scheduled sweep alike: the
// batch is only the trigger; what is pending is read from the cluster, so a
// forwarder outage, a nodeless cluster or a replayed batch all end the same way.
func runProvisioner(ctx context.Context, d *Deps, ev events.Event, sum *Summary) error {
	switch e := ev.(type) {
	case *events.PendingPods:
		if e.Detail.Cluster != "" && e.Detail.Cluster != d.Config.ClusterName {
			sum.Action, sum.Ignored = "ignored", fmt.Sprintf("batch for cluster %q, not %q", e.Detail.Cluster, d.Config.ClusterName)
			return nil
		}
		// The batch is only the trigger, so a malformed entry loses nothing (the
		// pod is read from the cluster below); it is logged so the sender gets fixed.
		for _, r := range e.Rejected {
			d.log().Warn("Pending Pods entry refused", "pod", r.Namespace+"/"+r.Name, "reason", r.Reason)
		}
	case *events.ScheduledRule, *events.SchedulerTick:
	default:
		sum.Action, sum.Ignored = "ignored", fmt.Sprintf("%s is not a provisioner trigger", ev.Kind())
		return nil
	}
	release, err := d.takeLease(ctx, provisionerLeaseWait, sum)
	if err != nil || release == nil {
		return err
	}
	defer release()
	start := time.Now()
	st, err := d.readReconciled(ctx)
	if err != nil {
		return err
	}
	sum.took(PhaseRead, start)
	sum.PodsPending = len(st.Snapshot.Pods)
	d.Metrics.Add("PodsPending", "Count", float64(sum.PodsPending))
	// The pods of nodes being deleted are planned with the pending ones, so their
	// new home launches ahead of the drain (only pending pods are nominated and
	// told why they wait: the others still run).
	snap, moving := packer.ReplanDeleting(st.Snapshot, st.NodeClaims)
	if len(snap.Pods) == 0 {
		sum.Action = "nothing pending"
		return nil
	}
	start = time.Now()
	cat, err := d.catalogFor(ctx)
	if err != nil {
		return err
	}
	snap.Catalog = cat
	snap.Reservations = d.reservations(ctx, snap.NodeClasses)
	plan := packer.Solve(&snap, packer.Options{Explain: true, Prepared: d.preparedFor(snap.Catalog)})
	sum.took(PhaseDecide, start)
	start = time.Now()
	defer sum.took(PhaseAct, start)
	d.reportUnschedulable(ctx, st, plan)
	got := d.launchPlan(ctx, st, cat, plan, "provisioning", sum)
	if !d.Config.DryRun {
		// Pods planned onto existing nodes and in-flight NodeClaims: kube-scheduler
		// learns where they go (see nominate.ForPlan); a failure costs only placement.
		n, err := d.Cluster.WriteNominations(ctx, nominate.ForPlan(st.NominationInput(), plan))
		if err != nil {
			d.log().Warn("could not record every planned placement", "error", err.Error())
		}
		sum.Nominated = n
	}
	onExisting := 0
	for _, n := range plan.ExistingNodes {
		onExisting += len(n.Pods)
	}
	sum.Action = fmt.Sprintf("launched %d of %d planned node(s); %d pod(s) fit existing or in-flight capacity; %d unschedulable",
		len(got), len(plan.NewNodes), onExisting, len(plan.Unschedulable))
	if len(moving) > 0 {
		sum.Action += fmt.Sprintf(" (%d of the pods planned run on nodes being deleted)", len(moving))
	}
	return nil
}

// takeLease acquires the cluster lease, waiting up to wait. It returns a nil release
// and no error when another invocation holds it (the summary says so): that one is
// deciding already. Dry runs write nothing, so they take no lease.
func (d *Deps) takeLease(ctx context.Context, wait time.Duration, sum *Summary) (func(), error) {
	if d.Config.DryRun {
		return func() {}, nil
	}
	l := d.Cluster.Lease(d.Identity, d.Config.LeaseDuration)
	if err := l.TryAcquire(ctx, wait); err != nil {
		var held *kube.HeldError
		if errors.As(err, &held) {
			sum.Action = "skipped: " + held.Error()
			return nil, nil
		}
		return nil, fmt.Errorf("take lease: %w", err)
	}
	return func() {
		if err := l.Release(context.WithoutCancel(ctx)); err != nil {
			d.log().Warn("could not release lease", "error", err.Error())
		}
	}, nil
}

// readReconciled reads the cluster and advances NodeClaim lifecycles, reading again
// when that changed anything, so decisions see registered and removed capacity.
func (d *Deps) readReconciled(ctx context.Context) (*kube.ClusterState, error) {
	st, err := d.Cluster.ReadState(ctx)
	if err != nil {
		return nil, fmt.Errorf("read cluster: %w", err)
	}
	if d.Config.DryRun {
		return st, nil
	}
	rep := d.advance(ctx, st)
	// One NodeClaim's (or the NodePool status's) failure must not stop the
	// decision: the next invocation reconciles it again.
	for _, e := range rep.Errors {
		d.log().Warn("reconcile", "error", e.Error())
	}
	if len(rep.Registered)+len(rep.Initialized)+len(rep.TimedOut)+len(rep.Finalized) == 0 {
		return st, nil
	}
	st, err = d.Cluster.ReadState(ctx)
	if err != nil {
		return nil, fmt.Errorf("read cluster: %w", err)
	}
	return st, nil
}

// advance decides the NodeClaim lifecycle transitions due on st and writes them.
func (d *Deps) advance(ctx context.Context, st *kube.ClusterState) *kube.ReconcileReport {
	return kube.Reconcile(ctx, d.Cluster, st, d.now(), terminator{d.Cloud})
}

func (d *Deps) reportUnschedulable(ctx context.Context, st *kube.ClusterState, plan *packer.Plan) {
	if len(plan.Unschedulable) == 0 {
		return
	}
	pods := map[string]*corev1.Pod{}
	for _, p := range st.Snapshot.Pods {
		pods[facts.PodKey(p)] = p
	}
	var evs []kube.Event
	for _, u := range plan.Unschedulable {
		d.log().Warn("unschedulable", "pod", u.Pod, "reason", u.Reason)
		if p := pods[u.Pod]; p != nil {
			evs = append(evs, kube.Event{Regarding: kube.PodRef(p), Type: corev1.EventTypeWarning, Reason: kube.ReasonFailedScheduling,
				Action: "Plan", Note: "Joiner cannot launch a node for this pod: " + u.Reason})
		}
	}
	d.recordAll(ctx, evs)
}
