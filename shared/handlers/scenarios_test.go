package handlers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// label sets labels on a pod of the test's namespace.
func (w *world) label(t *testing.T, pod string, kv ...string) {
	t.Helper()
	labels := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		labels[kv[i]] = kv[i+1]
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":%s}}`, mustJSON(labels))
	if _, err := w.cs.CoreV1().Pods(w.ns).Patch(context.Background(), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(v map[string]string) string {
	var parts []string
	for k, x := range v {
		parts = append(parts, fmt.Sprintf("%q:%q", k, x))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// blockEvictions installs a PodDisruptionBudget over app=<app> and marks its pods
// running and ready (the Eviction API lets pods that are not running go regardless).
// No disruption controller runs next to the test API server, so the budget is never
// processed and every eviction is refused (429) until it is deleted. Its status says
// one disruption is allowed, so decisions that read budgets go ahead: the refusal
// comes mid-drain, as when another eviction has just used the budget up.
func (w *world) blockEvictions(t *testing.T, app string) (unblock func()) {
	t.Helper()
	ctx := context.Background()
	pods, err := w.cs.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of app %s: %v", app, err)
	}
	for _, p := range pods.Items {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
		if _, err := w.cs.CoreV1().Pods(w.ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: w.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	created, err := w.cs.PolicyV1().PodDisruptionBudgets(w.ns).Create(ctx, pdb, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: int32(len(pods.Items)),
		DesiredHealthy: int32(len(pods.Items)) - 1, ExpectedPods: int32(len(pods.Items)), ObservedGeneration: created.Generation - 1}
	if _, err := w.cs.PolicyV1().PodDisruptionBudgets(w.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := w.cs.PolicyV1().PodDisruptionBudgets(w.ns).Delete(ctx, app, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func (w *world) taint(t *testing.T, node string) {
	t.Helper()
	patch := `{"spec":{"taints":[{"key":"` + karpenter.DisruptedTaintKey + `","effect":"NoSchedule"}]}}`
	if _, err := w.cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (w *world) nodeGone(t *testing.T, node string) bool {
	t.Helper()
	_, err := w.cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	return err != nil
}

func (w *world) isTainted(t *testing.T, node string) bool {
	t.Helper()
	n, err := w.cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tainted(n)
}

func (w *world) instanceGone(t *testing.T, id string) bool {
	in, ok := w.sim.Instance(id)
	return !ok || in.State == "shutting-down" || in.State == "terminated"
}

// claimOf returns the NodeClaim of an instance ("" when none).
func (w *world) claimOf(t *testing.T, id string) string {
	t.Helper()
	for _, nc := range w.state(t).NodeClaims {
		if facts.InstanceID(nc.Status.ProviderID) == id {
			return nc.Name
		}
	}
	return ""
}

// oneNodeWithPod provisions and registers one node running pod <app>-0 (3 CPUs).
func (w *world) oneNodeWithPod(t *testing.T, app string) string {
	t.Helper()
	w.pending(t, app, 1, "3")
	w.label(t, app+"-0", "app", app)
	mustDeliver(t, w.fresh(t, Provisioner, fnOpts{}), tick(t, "scheduled-rule.json", app)(0))
	nodes := w.registerNew(t)
	if len(nodes) != 1 {
		t.Fatalf("registered %v", nodes)
	}
	w.bind(t, nodes[0], app+"-0")
	return nodes[0]
}

func spotFor(t *testing.T, id string, at time.Time) []byte {
	return sample(t, "spot-interruption.json", sampleInstance, id,
		`"time": "2024-05-01T12:00:00Z"`, `"time": "`+at.UTC().Format(time.RFC3339)+`"`)
}

// TestInterruptionCutOffMidDrainRetried: a spot warning's drain is cut
// off by the function's deadline while a PodDisruptionBudget refuses the eviction.
// The invocation ends before its deadline with the node untainted (or, killed
// outright, with the taint left behind); the retried event, once the budget allows,
// finishes the job: node drained, NodeClaim and Node deleted, instance terminated, and
// no second replacement.
func TestInterruptionCutOffMidDrainRetried(t *testing.T) {
	for _, killed := range []bool{false, true} {
		name := "deadline"
		if killed {
			name = "killed"
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			w.fastRetries()
			node := w.oneNodeWithPod(t, "db")
			claim := w.claimOf(t, node)
			unblock := w.blockEvictions(t, "db")
			ev := spotFor(t, node, time.Now())

			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
			defer cancel()
			dl, _ := ctx.Deadline()
			s, err := deliver(t, ctx, w.fresh(t, Interruption, fnOpts{}), ev)
			if err == nil || !strings.Contains(err.Error(), "drain") {
				t.Fatalf("cut-off invocation: error %v, summary %+v; want a drain error", err, s)
			}
			if time.Now().After(dl) {
				t.Errorf("the invocation returned %v after its deadline: Lambda would have frozen it before its clean-up", time.Since(dl))
			}
			if len(s.NodesLaunched) != 1 {
				t.Errorf("replacement: %+v, want one node launched before the drain", s)
			}
			if w.nodeGone(t, node) || len(w.podsOn(t, node)) != 1 || w.instanceGone(t, node) {
				t.Fatalf("the cut-off invocation removed the node, pod or instance")
			}
			if w.isTainted(t, node) {
				t.Errorf("node %s left tainted by an invocation that ended before its deadline", node)
			}
			if killed {
				w.taint(t, node) // as if the runtime had killed it before Abandon ran
			}
			instances := w.aliveInstances(t)

			unblock()
			s = mustDeliver(t, w.fresh(t, Interruption, fnOpts{}), ev)
			if s.Interruptions != 1 || len(s.NodesTerminated) != 1 || s.NodesTerminated[0] != claim || len(s.NodesLaunched) != 0 {
				t.Errorf("retry: %+v, want NodeClaim %s removed and no second replacement", s, claim)
			}
			if !w.nodeGone(t, node) || !w.instanceGone(t, node) || w.claimOf(t, node) != "" {
				t.Errorf("after the retry: node gone %v, instance gone %v, NodeClaim %q", w.nodeGone(t, node), w.instanceGone(t, node), w.claimOf(t, node))
			}
			if pods := w.podsOn(t, node); len(pods) != 0 {
				t.Errorf("pods %v still on the drained node", pods)
			}
			if got := w.aliveInstances(t); got != instances-1 {
				t.Errorf("%d instances alive, want %d (the replacement only)", got, instances-1)
			}
			w.registerNew(t)
			w.assertConverged(t)
		})
	}
}

// TestConsolidatorCutOffMidDrainIsFinishedByTheNextTick: a consolidation's drain is
// cut off by the deadline while a PodDisruptionBudget refuses the eviction; the node
// stays, untainted, and the next tick (the budget allowing) removes it.
func TestConsolidatorCutOffMidDrainIsFinishedByTheNextTick(t *testing.T) {
	w := newWorld(t)
	w.fastRetries()
	ctx := context.Background()
	nodes, unblock := w.consolidationCandidate(t)
	later := fnOpts{now: skewed(10 * time.Minute)}

	cctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	dl, _ := cctx.Deadline()
	s, err := deliver(t, cctx, w.fresh(t, Consolidator, later), tick(t, "scheduler.json", "cut")(0))
	if err == nil {
		t.Fatalf("cut-off consolidation succeeded: %+v", s)
	}
	if time.Now().After(dl) {
		t.Errorf("the invocation returned %v after its deadline", time.Since(dl))
	}
	if w.nodeGone(t, nodes[1]) || len(w.podsOn(t, nodes[1])) != 1 {
		t.Fatalf("the cut-off consolidation removed the node or its pod: %+v", s)
	}
	for _, n := range nodes {
		if w.isTainted(t, n) {
			t.Errorf("node %s left tainted after the cut-off", n)
		}
	}
	unblock()
	later.now = skewed(12 * time.Minute)
	s = mustDeliver(t, w.fresh(t, Consolidator, later), tick(t, "scheduler.json", "next")(0))
	if !w.nodeGone(t, nodes[1]) || !w.instanceGone(t, nodes[1]) || len(s.NodesTerminated) != 1 {
		t.Fatalf("next tick: %+v; node gone %v, instance gone %v", s, w.nodeGone(t, nodes[1]), w.instanceGone(t, nodes[1]))
	}
	if w.nodeGone(t, nodes[0]) {
		t.Errorf("the do-not-disrupt node was removed")
	}
	w.assertConverged(t)
}

func mustQty(s string) resource.Quantity { return resource.MustParse(s) }

// consolidationCandidate builds two Joiner nodes of which the second is the one to
// consolidate: the first keeps its 2-CPU pod (do-not-disrupt), the second's pod is
// replaced by a small one that fits next to it, and a PodDisruptionBudget-like refusal
// blocks that pod's eviction until unblock is called.
func (w *world) consolidationCandidate(t *testing.T) (nodes []string, unblock func()) {
	t.Helper()
	ctx := context.Background()
	w.pending(t, "big", 2, "2")
	mustDeliver(t, w.fresh(t, Provisioner, fnOpts{}), tick(t, "scheduled-rule.json", "p")(0))
	nodes = w.registerNew(t)
	if len(nodes) != 2 {
		t.Fatalf("registered %v, want 2 nodes", nodes)
	}
	w.bind(t, nodes[0], "big-0")
	patch := `{"metadata":{"annotations":{"` + karpenter.DoNotDisruptAnnotation + `":"true"}}}`
	if _, err := w.cs.CoreV1().Pods(w.ns).Patch(ctx, "big-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.cs.CoreV1().Pods(w.ns).Delete(ctx, "big-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	small := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: w.ns, Labels: map[string]string{"app": "small"}},
		Spec: corev1.PodSpec{NodeName: nodes[1], TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: mustQty("500m"), corev1.ResourceMemory: mustQty("512Mi")}}}}}}
	if _, err := w.cs.CoreV1().Pods(w.ns).Create(ctx, small, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return nodes, w.blockEvictions(t, "small")
}
