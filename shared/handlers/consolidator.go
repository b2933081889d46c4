package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/disruption"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// consolidatorLeaseWait: the next tick comes within minutes; waiting longer than
// this only delays the tick after it.
const consolidatorLeaseWait = 5 * time.Second

// Bounds of the consolidator's search (searchBudget).
const (
	maxSearchTime = 30 * time.Second
	minSearchTime = 2 * time.Second
)

// searchBudget is how long the consolidation search may take: at most
// maxSearchTime, and less when what the invocation has left (ctx's deadline,
// which Invoke already set cleanupReserve before Lambda's) would not also hold a
// replacement's wait (replacementWait) after it; never under minSearchTime, since
// a round that cannot search at all would never remove anything.
func searchBudget(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return searchBudgetFor(0, false)
	}
	return searchBudgetFor(time.Until(dl), true)
}

// searchBudgetFor is searchBudget for an invocation with remaining time left
// (limited is false when it has no deadline).
func searchBudgetFor(remaining time.Duration, limited bool) time.Duration {
	b := maxSearchTime
	if limited {
		b = min(b, remaining-replacementWait)
	}
	return max(b, minSearchTime)
}

// replacementWait bounds how long a consolidation waits for its replacement node to
// be ready before it gives up this round (the replacement stays: it is capacity the
// next round can use or remove).
const replacementWait = 3 * time.Minute

func runConsolidator(ctx context.Context, d *Deps, ev events.Event, sum *Summary) error {
	switch ev.(type) {
	case *events.ScheduledRule, *events.SchedulerTick:
	default:
		sum.Action, sum.Ignored = "ignored", fmt.Sprintf("%s is not a consolidation trigger", ev.Kind())
		return nil
	}
	release, err := d.takeLease(ctx, consolidatorLeaseWait, sum)
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
	if st, err = d.clearStaleDisruptions(ctx, st, sum); err != nil {
		return err
	}
	if st, err = d.adoptHashes(ctx, st, sum); err != nil {
		return err
	}
	if err := d.resolveNodeClasses(ctx, st); err != nil {
		return err
	}
	cat, err := d.catalogFor(ctx)
	if err != nil {
		return err
	}
	snap := st.Snapshot
	snap.Catalog = cat
	// The search's time is real time (a replay's simulated clock does not advance
	// while it thinks), so its deadline is read from the system clock.
	budget := searchBudget(ctx)
	start = time.Now()
	dec := disruption.Decide(disruption.Input{Now: d.now(), Snapshot: &snap, NodeClaims: st.NodeClaims, PDBs: st.PDBs,
		Options: disruption.Options{MinSavingsFraction: d.Config.MinSavingsFraction, Packer: packer.Options{Prepared: d.preparedFor(cat)},
			Deadline: time.Now().Add(budget), Clock: time.Now}})
	if dec.Summary.SearchStopped != "" {
		sum.SearchStopped = dec.Summary.SearchStopped
		d.log().Warn("consolidation search stopped early; the candidates not tried wait for the next round",
			"limit", dec.Summary.SearchStopped, "simulations", dec.Summary.Simulations, "budget", budget.String())
	}
	for _, w := range dec.Warnings {
		d.log().Warn("consolidation input", "warning", w)
	}
	for _, b := range dec.Blocked {
		d.log().Info("not disrupted", "node", b.Node, "reason", b.Reason)
	}
	sum.took(PhaseDecide, start)
	start = time.Now()
	defer sum.took(PhaseAct, start)
	d.recordConditions(ctx, dec.Actions)
	var done []string
	for _, cmd := range dec.Commands() {
		if ctx.Err() != nil {
			break
		}
		if msg, err := d.executeCommand(ctx, st, cat, cmd, sum); err != nil {
			sum.fail(err)
		} else if msg != "" {
			done = append(done, msg)
		}
	}
	leaks, err := d.cleanLeaks(ctx, st, sum)
	if err != nil {
		sum.fail(err)
	}
	done = append(done, leaks...)
	done = append(done, d.collectProfiles(ctx, st)...)
	if len(done) == 0 {
		sum.Action = fmt.Sprintf("nothing to consolidate (%d node(s) considered, %d blocked)", len(st.Snapshot.Nodes), len(dec.Blocked))
		return nil
	}
	sum.Action = strings.Join(done, "; ")
	return nil
}

// clearStaleDisruptions removes, holding the lease, the karpenter.sh/disrupted taints
// that no running disruption owns, and reads the cluster again when it removed any.
// Decide counts a tainted node as already being deleted: an invocation killed
// outright (Lambda's timeout) before it untainted its node would otherwise keep that
// node out of every later round, tainted for good; the round can now finish the job.
func (d *Deps) clearStaleDisruptions(ctx context.Context, st *kube.ClusterState, sum *Summary) (*kube.ClusterState, error) {
	if d.Config.DryRun {
		return st, nil
	}
	cleared, err := d.Cluster.ClearStaleDisruptions(ctx, st)
	if err != nil {
		// The next round tries again; this one decides on what it has.
		sum.fail(err)
	}
	if len(cleared) == 0 {
		return st, nil
	}
	d.log().Warn("removed stale disruption taints", "nodes", cleared)
	st, err = d.Cluster.ReadState(ctx)
	if err != nil {
		return nil, fmt.Errorf("read cluster: %w", err)
	}
	return st, nil
}

// adoptHashes writes, holding the lease and before drift is judged, the hash
// annotations that bring NodeClaims written by another hash version (Karpenter's, on
// a cluster switching to Joiner) under Joiner's, and stamps each NodePool and
// EC2NodeClass with its current hash (disruption.HashStamps says why and how). It
// stops at the first failed write: an object is never stamped before all its
// NodeClaims, and the next round carries on from there.
func (d *Deps) adoptHashes(ctx context.Context, st *kube.ClusterState, sum *Summary) (*kube.ClusterState, error) {
	stamps := disruption.HashStamps(st.Snapshot.NodePools, st.Snapshot.NodeClasses, st.NodeClaims)
	if len(stamps) == 0 || d.Config.DryRun {
		return st, nil
	}
	if d.Config.Mode == ModeShadow {
		// The recorder writes nothing, and a re-read would show the old hashes:
		// the decision sees the stamps on copies, as it would after the writes.
		for _, s := range stamps {
			_ = d.Cluster.Annotate(ctx, s.Kind, s.Name, s.Annotations)
		}
		return withStamps(st, stamps), nil
	}
	var claims []string
	for _, s := range stamps {
		if err := d.Cluster.Annotate(ctx, s.Kind, s.Name, s.Annotations); err != nil {
			sum.fail(err)
			break
		}
		if s.Kind == karpenter.NodeClaimKind {
			claims = append(claims, s.Name)
		}
	}
	if len(claims) > 0 {
		d.log().Info("adopted NodeClaims of another drift-hash version", "nodeclaims", claims)
	}
	st, err := d.Cluster.ReadState(ctx)
	if err != nil {
		return nil, fmt.Errorf("read cluster: %w", err)
	}
	return st, nil
}

// resolveNodeClasses resolves, holding the lease, what every EC2NodeClass's
// selectors select now, writes it as the class's status (as Karpenter's nodeclass
// controller does, so kubectl get ec2nodeclasses shows READY), and puts it in the
// snapshot the decision reads. The status on the API server is not trusted for
// drift: it may be another controller's (Karpenter's last, on a cluster moving to
// Joiner) or older than a new image behind an alias, and drift compares each node's
// image with what the class selects now. A class whose AMIs cannot be resolved has
// none in the snapshot, so no node is judged drifted by image this round.
func (d *Deps) resolveNodeClasses(ctx context.Context, st *kube.ClusterState) error {
	for _, nc := range st.Snapshot.NodeClasses {
		r, err := d.Cloud.ResolveNodeClass(ctx, nc)
		if err != nil {
			return fmt.Errorf("resolve EC2NodeClass %s: %w", nc.Name, err)
		}
		for _, c := range r.Status.Conditions {
			if c.Status != metav1.ConditionTrue && c.Type != karpenter.ConditionReady {
				d.log().Warn("EC2NodeClass not ready", "nodeClass", nc.Name, "condition", c.Type, "reason", c.Reason, "message", c.Message)
			}
		}
		if !d.Config.DryRun {
			wrote, err := d.Cluster.UpdateNodeClassStatus(ctx, nc, r.Status)
			if err != nil {
				// The decision still uses what was resolved; the next round writes again.
				d.log().Warn("could not write EC2NodeClass status", "nodeClass", nc.Name, "error", err.Error())
			} else if wrote {
				d.log().Info("EC2NodeClass status", "nodeClass", nc.Name, "ready", r.Ready(), "amis", r.AMIIDs())
			}
		}
		nc.Status = r.Status
		if !r.AMIsResolved {
			nc.Status.AMIs = nil
		}
	}
	return nil
}

// withStamps is st with the stamps' annotations merged into copies of the objects
// they name.
func withStamps(st *kube.ClusterState, stamps []disruption.HashStamp) *kube.ClusterState {
	out := *st
	merge := func(kind, name string, meta *metav1.ObjectMeta) {
		for _, s := range stamps {
			if s.Kind != kind || s.Name != name {
				continue
			}
			a := make(map[string]string, len(meta.Annotations)+len(s.Annotations))
			for k, v := range meta.Annotations {
				a[k] = v
			}
			for k, v := range s.Annotations {
				a[k] = v
			}
			meta.Annotations = a
		}
	}
	out.NodeClaims = make([]*karpenter.NodeClaim, len(st.NodeClaims))
	for i, nc := range st.NodeClaims {
		cp := *nc
		merge(karpenter.NodeClaimKind, nc.Name, &cp.ObjectMeta)
		out.NodeClaims[i] = &cp
	}
	out.Snapshot.NodePools = make([]*karpenter.NodePool, len(st.Snapshot.NodePools))
	for i, np := range st.Snapshot.NodePools {
		cp := *np
		merge(karpenter.NodePoolKind, np.Name, &cp.ObjectMeta)
		out.Snapshot.NodePools[i] = &cp
	}
	out.Snapshot.NodeClasses = make([]*karpenter.EC2NodeClass, len(st.Snapshot.NodeClasses))
	for i, c := range st.Snapshot.NodeClasses {
		cp := *c
		merge(karpenter.NodeClassKind, c.Name, &cp.ObjectMeta)
		out.Snapshot.NodeClasses[i] = &cp
	}
	return &out
}

// recordConditions writes the decision's condition actions on the NodeClaims (best
// effort: a failed write is made again next round): MarkEmpty and ClearEmpty, first
// observation time for a mark, so the emptiness timer survives between rounds;
// MarkDrifted and ClearDrifted, so kubectl and a Karpenter taking the cluster back
// see which nodes are drifted and why.
func (d *Deps) recordConditions(ctx context.Context, actions []disruption.Action) {
	if d.Config.DryRun {
		return
	}
	for _, a := range actions {
		var err error
		switch a.Kind {
		case disruption.MarkEmpty, disruption.ClearEmpty:
			err = d.Cluster.SetEmpty(ctx, a.NodeClaim, a.Kind == disruption.MarkEmpty, d.now())
		case disruption.MarkDrifted:
			err = d.Cluster.SetDrifted(ctx, a.NodeClaim, a.DriftedReason, a.Explanation, d.now())
		case disruption.ClearDrifted:
			err = d.Cluster.SetDrifted(ctx, a.NodeClaim, "", "", d.now())
		default:
			continue
		}
		if err != nil {
			d.log().Warn("could not record condition", "nodeclaim", a.NodeClaim, "action", a.Kind, "error", err.Error())
		}
	}
}

// executeCommand carries out one unit of the decision: launch its replacements and
// wait until they are ready, then disrupt every node of the unit. A replacement that
// fails or is not ready in time abandons the unit: nothing is drained.
func (d *Deps) executeCommand(ctx context.Context, st *kube.ClusterState, cat *catalog.Catalog, cmd []disruption.Action, sum *Summary) (string, error) {
	var replacements []packer.NewNode
	for _, a := range cmd {
		if a.Replacement != nil {
			replacements = append(replacements, *a.Replacement)
		}
		replacements = append(replacements, a.AdditionalReplacements...)
	}
	names := make([]string, 0, len(cmd))
	for _, a := range cmd {
		names = append(names, a.Node)
	}
	if d.Config.DryRun {
		return fmt.Sprintf("would %s %s (%s, dry run)", strings.ToLower(string(cmd[0].Kind)), strings.Join(names, ", "), cmd[0].Reason), nil
	}
	if len(replacements) > 0 {
		plan := &packer.Plan{NewNodes: replacements}
		got := d.launchPlan(ctx, st, cat, plan, string(cmd[0].Reason), sum)
		if len(got) < len(replacements) {
			return "", fmt.Errorf("%s of %s: a replacement did not launch; nothing disrupted", cmd[0].Reason, strings.Join(names, ", "))
		}
		if err := d.waitReady(ctx, got); err != nil {
			return "", fmt.Errorf("%s of %s: %w; nothing disrupted this round", cmd[0].Reason, strings.Join(names, ", "), err)
		}
		var err error
		if st, err = d.Cluster.ReadState(ctx); err != nil {
			return "", err
		}
	}
	var saved float64
	for _, a := range cmd {
		if err := d.disruptNode(ctx, st, a); err != nil {
			return "", fmt.Errorf("%s node %s: %w", a.Reason, a.Node, err)
		}
		saved += a.SavingsPerHour
		sum.NodesTerminated = append(sum.NodesTerminated, a.NodeClaim)
		d.Metrics.Add("NodesTerminated", "Count", 1)
	}
	sum.SavingsPerHour += saved
	d.Metrics.Add("SavingsPerHour", "None", saved)
	verb := "deleted"
	if len(replacements) > 0 {
		verb = "replaced"
	}
	note := ""
	for _, nc := range st.NodeClaims {
		for _, a := range cmd {
			if nc.Name == a.NodeClaim && nc.Labels[karpenter.CapacityTypeLabelKey] == karpenter.CapacityTypeReserved {
				// Priced as Karpenter prices a reservation's slot: the reservation
				// itself is paid for whether an instance runs in it or not.
				note = "; reserved capacity, whose reservation is paid for used or not"
			}
		}
	}
	amount := fmt.Sprintf("$%.4f/h", saved)
	if saved > 0 && saved < 0.00005 {
		amount = fmt.Sprintf("$%.7f/h", saved) // a reservation's slot: four places would say nothing
	}
	return fmt.Sprintf("%s %s (%s, saving %s%s)", verb, strings.Join(names, ", "), cmd[0].Reason, amount, note), nil
}

// disruptNode taints, drains and deletes one node; any failure untaints it again.
func (d *Deps) disruptNode(ctx context.Context, st *kube.ClusterState, a disruption.Action) error {
	dis, err := d.Cluster.BeginDisruption(ctx, st, a.Node, kube.DisruptOptions{Reason: string(a.Reason), Involuntary: a.Forceful})
	if err != nil {
		return err
	}
	defer dis.Abandon(ctx)
	opts := kube.DrainOptions{Reason: string(a.Reason)}
	if a.Forceful {
		opts.GraceDeadline = d.now()
	}
	if _, err := dis.Drain(ctx, opts); err != nil {
		return err
	}
	return dis.Complete(ctx, terminator{d.Cloud})
}

// waitReady polls until every launched NodeClaim is Initialized.
func (d *Deps) waitReady(ctx context.Context, got []launched) error {
	if d.Config.Mode == ModeShadow {
		return nil // recorded launches never become ready; the decision goes on as if they had
	}
	deadline := d.now().Add(replacementWait)
	for {
		st, err := d.Cluster.ReadState(ctx)
		if err != nil {
			return err
		}
		if rep := d.advance(ctx, st); len(rep.Errors) > 0 {
			return errors.Join(rep.Errors...)
		}
		if st, err = d.Cluster.ReadState(ctx); err != nil {
			return err
		}
		ready := 0
		for _, l := range got {
			for _, nc := range st.NodeClaims {
				if nc.Name == l.NodeClaim && kube.ConditionTrue(nc.Status.Conditions, karpenter.ConditionInitialized) {
					ready++
				}
			}
		}
		if ready == len(got) {
			return nil
		}
		if !d.now().Before(deadline) {
			return fmt.Errorf("replacement not ready after %s", replacementWait)
		}
		if err := d.sleep(ctx, 10*time.Second); err != nil {
			return err
		}
	}
}

func (d *Deps) sleep(ctx context.Context, t time.Duration) error {
	if d.Sleep != nil {
		return d.Sleep(ctx, t)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(t):
		return nil
	}
}

// collectProfiles deletes the instance profiles Joiner created for
// EC2NodeClasses that were deleted, once no instance holds them. A failure is
// logged, not the round's: the profile is looked at again next round.
func (d *Deps) collectProfiles(ctx context.Context, st *kube.ClusterState) []string {
	live := make([]string, 0, len(st.Snapshot.NodeClasses))
	for _, nc := range st.Snapshot.NodeClasses {
		live = append(live, nc.Name)
	}
	gone, err := d.Cloud.CollectInstanceProfiles(ctx, live)
	if err != nil {
		d.log().Warn("could not delete the instance profiles of deleted EC2NodeClasses; trying again next round", "error", err.Error())
	}
	out := make([]string, 0, len(gone))
	for _, name := range gone {
		out = append(out, "deleted instance profile "+name+" of a deleted EC2NodeClass")
	}
	return out
}

// cleanLeaks terminates instances of this cluster's pools that no NodeClaim owns and
// removes NodeClaims whose node never registered.
func (d *Deps) cleanLeaks(ctx context.Context, st *kube.ClusterState, sum *Summary) ([]string, error) {
	owned, err := d.Cloud.ListOwned(ctx)
	if err != nil {
		return nil, fmt.Errorf("list owned instances: %w", err)
	}
	in := make([]disruption.OwnedInstance, 0, len(owned))
	for _, o := range owned {
		in = append(in, disruption.OwnedInstance{ID: o.ID, State: o.State, LaunchTime: o.LaunchTime, Tags: o.Tags})
	}
	var out []string
	var errs []error
	for _, l := range disruption.Leaks(d.Config.ClusterName, in, st.NodeClaims, d.now(), 0) {
		d.log().Warn("leak", "kind", l.Kind, "instance", l.InstanceID, "nodeclaim", l.NodeClaim, "reason", l.Reason)
		if d.Config.DryRun {
			out = append(out, fmt.Sprintf("would clean %s %s%s (dry run)", l.Kind, l.InstanceID, l.NodeClaim))
			continue
		}
		switch l.Kind {
		case disruption.TerminateInstance:
			if _, err := d.Cloud.Terminate(ctx, l.InstanceID); err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, "terminated leaked instance "+l.InstanceID)
		case disruption.DeleteNodeClaim:
			if err := d.Cluster.DeleteNodeClaim(ctx, l.NodeClaim); err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, "removed NodeClaim "+l.NodeClaim+" that never registered")
		}
		sum.NodesTerminated = append(sum.NodesTerminated, l.InstanceID+l.NodeClaim)
	}
	return out, errors.Join(errs...)
}
