package handlers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

const sampleInstance = "i-1234567890abcdef0"

// twice delivers raw to a fresh function, then again to the same one (a warm
// container: its dedupe answers) and to another fresh one (another container: only
// the cluster's state can tell). The repeats must change nothing: no NodeClaim,
// instance, taint, deletion or pod move.
func (w *world) twice(t *testing.T, what, function string, o fnOpts, raw []byte) Summary {
	t.Helper()
	fn := w.fresh(t, function, o)
	first := mustDeliver(t, fn, raw)
	after := w.fingerprint(t)
	if s := mustDeliver(t, fn, raw); s.Action != "duplicate" {
		t.Errorf("%s to the same container again: action %q, want duplicate", what, s.Action)
	}
	again := mustDeliver(t, w.fresh(t, function, o), raw)
	if g := w.fingerprint(t); !after.equal(g) {
		t.Errorf("%s delivered again changed the cluster or EC2: %s", what, after.diff(g))
	}
	if len(again.NodesLaunched)+len(again.NodesTerminated)+again.Interruptions > 0 {
		t.Errorf("%s delivered again acted: %+v", what, again)
	}
	return first
}

// TestSampleEventsTwiceChangeNothingNew delivers every sample in events/ twice (the
// instance and cluster names pointed at this test's world); the second delivery,
// in the same or another container, does nothing new.
func TestSampleEventsTwiceChangeNothingNew(t *testing.T) {
	w := newWorld(t)
	w.fastRetries()
	w.pending(t, "app", 4, "3")

	s := w.twice(t, "scheduled-rule.json", Provisioner, fnOpts{}, sample(t, "scheduled-rule.json"))
	if len(s.NodesLaunched) != 4 {
		t.Fatalf("sweep: %+v, want 4 nodes for 4 pods of 3 CPUs", s)
	}
	w.pending(t, "extra", 1, "3")
	s = w.twice(t, "pending-pods.json", Provisioner, fnOpts{},
		sample(t, "pending-pods.json", `"cluster": "technews-karpenter-eks"`, `"cluster": "e2e"`))
	if len(s.NodesLaunched) != 1 {
		t.Fatalf("pending pods: %+v, want 1 node for the extra pod", s)
	}
	// The scheduler sweep arriving after the batch finds nothing new either.
	if s := mustDeliver(t, w.fresh(t, Provisioner, fnOpts{}), sample(t, "scheduler.json")); len(s.NodesLaunched) != 0 {
		t.Fatalf("scheduler tick after the batch launched again: %+v", s)
	}

	nodes := w.registerNew(t)
	if len(nodes) != 5 {
		t.Fatalf("registered %v, want 5 nodes", nodes)
	}
	for i, p := range []string{"app-0", "app-1", "app-2", "app-3", "extra-0"} {
		w.bind(t, nodes[i], p)
	}

	cases := []struct {
		file, node string
		o          fnOpts
		extra      []string
	}{
		{file: "rebalance.json", node: nodes[0], o: fnOpts{rebalance: RebalanceReplace}},
		{file: "spot-interruption.json", node: nodes[1], extra: []string{`"time": "2024-05-01T12:00:00Z"`, `"time": "` + time.Now().UTC().Format(time.RFC3339) + `"`}},
		{file: "health-scheduled-change.json", node: nodes[2]},
		{file: "state-change-terminated.json", node: nodes[3]},
	}
	for _, c := range cases {
		raw := sample(t, c.file, append([]string{sampleInstance, c.node}, c.extra...)...)
		s := w.twice(t, c.file, Interruption, c.o, raw)
		if s.Interruptions != 1 || len(s.NodesTerminated) != 1 {
			t.Errorf("%s on %s: %+v, want it handled once", c.file, c.node, s)
		}
		if pods := w.podsOn(t, c.node); len(pods) != 0 {
			t.Errorf("%s: pods %v still on %s", c.file, pods, c.node)
		}
	}
	// The unchanged samples name an instance Joiner never launched: ignored, twice.
	for _, file := range []string{"spot-interruption.json", "rebalance.json", "health-scheduled-change.json", "state-change-terminated.json"} {
		s := w.twice(t, file+" (foreign instance)", Interruption, fnOpts{rebalance: RebalanceReplace}, sample(t, file))
		if s.Action != "ignored" {
			t.Errorf("%s for a foreign instance: %+v", file, s)
		}
	}
	if tainted := w.fingerprint(t); strings.Contains(fmt.Sprint(tainted.Nodes), "tainted") {
		t.Errorf("nodes left tainted: %v", tainted.Nodes)
	}
}

// TestConsolidatorTickTwiceChangesNothingNew: the consolidator's schedule event twice
// removes an empty node once.
func TestConsolidatorTickTwiceChangesNothingNew(t *testing.T) {
	w := newWorld(t)
	w.fastRetries()
	w.pending(t, "batch", 1, "500m")
	mustDeliver(t, w.fresh(t, Provisioner, fnOpts{}), sample(t, "scheduled-rule.json"))
	nodes := w.registerNew(t)
	if len(nodes) != 1 {
		t.Fatalf("registered %v", nodes)
	}
	// The batch pod finished: the node is empty. A first tick sees it so;
	// consolidateAfter (1m) runs from there.
	if err := w.cs.CoreV1().Pods(w.ns).Delete(context.Background(), "batch-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	mustDeliver(t, w.fresh(t, Consolidator, fnOpts{now: skewed(2 * time.Minute)}), tick(t, "scheduler.json", "observe")(0))
	later := skewed(5 * time.Minute)
	for _, file := range []string{"scheduler.json", "scheduled-rule.json"} {
		raw := sample(t, file, `"id": "`, `"id": "consolidate-`)
		s := w.twice(t, file, Consolidator, fnOpts{now: later}, raw)
		if file == "scheduler.json" && len(s.NodesTerminated) != 1 {
			t.Fatalf("%s: %+v, want the empty node removed", file, s)
		}
	}
	w.assertConverged(t)
	if n := w.aliveInstances(t); n != 0 {
		t.Errorf("%d instances alive, want the empty node's terminated", n)
	}
}

// TestConcurrentProvisionersDoNotOverProvision: ten invocations at once for the same
// pending pods (ten containers, ten identities) launch what one would.
func TestConcurrentProvisionersDoNotOverProvision(t *testing.T) {
	w := newWorld(t)
	w.fastRetries()
	w.pending(t, "web", 6, "1500m")
	var wg sync.WaitGroup
	sums := make([]Summary, 10)
	errs := make([]error, 10)
	for i := range sums {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw := sample(t, "pending-pods.json", `"cluster": "technews-karpenter-eks"`, `"cluster": "e2e"`,
				`"id": "0d1c7f9e`, fmt.Sprintf(`"id": "%d-0d1c7f9e`, i))
			sums[i], errs[i] = deliver(t, context.Background(), w.fresh(t, Provisioner, fnOpts{}), raw)
		}()
	}
	wg.Wait()
	launched := 0
	for i, s := range sums {
		if errs[i] != nil {
			t.Errorf("invocation %d: %v", i, errs[i])
		}
		launched += len(s.NodesLaunched)
	}
	st := w.state(t)
	// Six pods of 1.5 CPUs take one 2-vCPU node each, or two per 4-vCPU node: the
	// plan one invocation makes on its own.
	want := w.planAlone(t)
	if launched != want || liveClaims(st) != want || w.aliveInstances(t) != want {
		t.Fatalf("10 concurrent invocations launched %d (NodeClaims %d, instances %d), one alone plans %d",
			launched, liveClaims(st), w.aliveInstances(t), want)
	}
	w.assertConverged(t)
	// And a sweep afterwards still finds every pod covered.
	if s := mustDeliver(t, w.fresh(t, Provisioner, fnOpts{}), sample(t, "scheduled-rule.json")); len(s.NodesLaunched) != 0 {
		t.Fatalf("sweep after the burst launched %v", s.NodesLaunched)
	}
}

// planAlone counts the new nodes one invocation alone plans for the pending pods:
// the engine on the current snapshot with no capacity in flight.
func (w *world) planAlone(t *testing.T) int {
	t.Helper()
	st := w.state(t)
	prov, err := cloud.New(cloud.Config{ClusterName: "e2e", Region: "us-east-1", Logger: quietLog()}, w.cloud)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := prov.LiveCatalog(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot
	snap.InFlight, snap.Catalog = nil, cat
	plan := packer.Solve(&snap, packer.Options{})
	if len(plan.Unschedulable) > 0 || len(plan.NewNodes) == 0 {
		t.Fatalf("plan alone: %d new nodes, unschedulable %v", len(plan.NewNodes), plan.Unschedulable)
	}
	return len(plan.NewNodes)
}

// killedDisruption begins a disruption of node as an invocation would, with a
// deadline within from now, and (when drain is set) drains until that deadline (a
// PodDisruptionBudget refusing); then it stops, never cleaning up, as when the
// runtime kills the invocation before its deferred Abandon runs. It leaves the node
// tainted, with the disruption's deadline recorded on it.
func (w *world) killedDisruption(t *testing.T, node string, now func() time.Time, within time.Duration, drain, involuntary bool) {
	t.Helper()
	kc := kube.New(w.clients, kube.Options{ClusterName: "e2e", Identity: "consolidator/killed", Now: now, Log: quietLog()})
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	st, err := kc.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dis, err := kc.BeginDisruption(ctx, st, node, kube.DisruptOptions{Reason: "Underutilized", Involuntary: involuntary})
	if err != nil {
		t.Fatal(err)
	}
	if drain {
		_, _ = dis.Drain(ctx, kube.DrainOptions{})
	}
	n, err := w.cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !tainted(n) || n.Annotations[kube.DisruptionUntilAnnotation] == "" {
		t.Fatalf("the killed disruption left taints %v, annotations %v: want %s with %s", n.Spec.Taints, n.Annotations, karpenter.DisruptedTaintKey, kube.DisruptionUntilAnnotation)
	}
}

// TestConsolidationKilledMidDrainIsUntaintedAndFinished: a consolidation killed
// outright mid-drain (Lambda's timeout: no clean-up ran) leaves its node tainted
// karpenter.sh/disrupted, which Decide takes for a deletion in progress. The next
// round, holding the lease, finds no running disruption owning the taint and removes
// it: while the PodDisruptionBudget still refuses, the round tries again and, cut
// off, untaints the node itself; once the budget allows, the round removes the node.
// No node stays tainted.
func TestConsolidationKilledMidDrainIsUntaintedAndFinished(t *testing.T) {
	w := newWorld(t)
	w.fastRetries()
	ctx := context.Background()
	nodes, unblock := w.consolidationCandidate(t)

	w.killedDisruption(t, nodes[1], skewed(10*time.Minute), 2*time.Second, true, false)

	// The next round, the budget still refusing: the stale taint goes, the round
	// disrupts the node again and, cut off, takes its own taint back.
	later := fnOpts{now: skewed(11 * time.Minute)}
	cctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	s, err := deliver(t, cctx, w.fresh(t, Consolidator, later), tick(t, "scheduler.json", "blocked")(0))
	if err == nil || !strings.Contains(err.Error(), "drain") {
		t.Errorf("round while the budget refuses: error %v, summary %+v; want the drain cut off", err, s)
	}
	if w.nodeGone(t, nodes[1]) || len(w.podsOn(t, nodes[1])) != 1 {
		t.Fatalf("the cut-off round removed the node or its pod: %+v", s)
	}
	for _, n := range nodes {
		if w.isTainted(t, n) {
			t.Errorf("node %s still tainted after a round that ended before its deadline", n)
		}
	}

	// Killed again, then the budget allows: the next round finishes the job.
	w.killedDisruption(t, nodes[1], skewed(12*time.Minute), 2*time.Second, true, false)
	unblock()
	later.now = skewed(13 * time.Minute)
	s = mustDeliver(t, w.fresh(t, Consolidator, later), tick(t, "scheduler.json", "next")(0))
	if !w.nodeGone(t, nodes[1]) || !w.instanceGone(t, nodes[1]) || len(s.NodesTerminated) != 1 {
		t.Fatalf("next round: %+v; node gone %v, instance gone %v", s, w.nodeGone(t, nodes[1]), w.instanceGone(t, nodes[1]))
	}
	if w.nodeGone(t, nodes[0]) || w.isTainted(t, nodes[0]) {
		t.Errorf("the do-not-disrupt node was removed (%v) or left tainted", w.nodeGone(t, nodes[0]))
	}
	w.assertConverged(t)
}

// TestConsolidatorLeavesARunningDisruptionsTaint: an interruption that could not
// take the lease disrupts a node while the consolidator holds it; the consolidator
// must not take that node's taint away while the disruption may still run (until its
// invocation's deadline), and does once that deadline has passed.
func TestConsolidatorLeavesARunningDisruptionsTaint(t *testing.T) {
	w := newWorld(t)
	w.fastRetries()
	node := w.oneNodeWithPod(t, "api")
	// Nothing to consolidate: the pod may not be disrupted voluntarily.
	patch := `{"metadata":{"annotations":{"` + karpenter.DoNotDisruptAnnotation + `":"true"}}}`
	if _, err := w.cs.CoreV1().Pods(w.ns).Patch(context.Background(), "api-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The interruption's invocation may run for 10 more minutes; the test stops it
	// right after the taint (as if it were still replacing the node's capacity).
	w.killedDisruption(t, node, time.Now, 10*time.Minute, false, true)

	s := mustDeliver(t, w.fresh(t, Consolidator, fnOpts{}), tick(t, "scheduler.json", "running")(0))
	if !w.isTainted(t, node) || w.nodeGone(t, node) || len(s.NodesTerminated) != 0 {
		t.Errorf("round during the disruption: %+v; tainted %v, node gone %v: want the node left as the disruption has it", s, w.isTainted(t, node), w.nodeGone(t, node))
	}
	s = mustDeliver(t, w.fresh(t, Consolidator, fnOpts{now: skewed(11 * time.Minute)}), tick(t, "scheduler.json", "after")(0))
	if w.isTainted(t, node) || w.nodeGone(t, node) || len(w.podsOn(t, node)) != 1 {
		t.Errorf("round after the disruption's deadline: %+v; tainted %v, node gone %v, pods %v: want untainted, running its pod",
			s, w.isTainted(t, node), w.nodeGone(t, node), w.podsOn(t, node))
	}
	w.assertConverged(t)
}
