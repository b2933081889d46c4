package disruption

import (
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// TestReplacementsPlaceOnlyReschedulablePods: the pods an interruption launches
// replacements for are the ones facts.IsReschedulable names, the same ones
// consolidation must fit elsewhere, plus the pending pods; pods already being
// deleted, DaemonSet, static and mirror pods and finished pods go with their node.
func TestReplacementsPlaceOnlyReschedulablePods(t *testing.T) {
	c := newCluster(t, testPool("default", karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, []string{"m5.large", "m5.xlarge"}))
	deleting := appPod("deleting", "500m", "512Mi")
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	yes := true
	static := appPod("static", "100m", "64Mi")
	static.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "going", Controller: &yes}}
	mirror := appPod("mirror", "100m", "64Mi", annotated(corev1.MirrorPodAnnotationKey, "h"))
	pods := []*corev1.Pod{appPod("web", "1500m", "1Gi"), deleting, dsPod("going"), static, mirror}
	going, _ := c.managed("going", "default", "m5.large", time.Hour, pods...)
	done := appPod("done", "100m", "64Mi")
	c.managed("staying", "default", "m5.large", time.Hour, appPod("busy", "1500m", "1Gi"))
	c.Snapshot.Pods = append(c.Snapshot.Pods, pendingPod("pending", "500m", "256Mi"))
	byNode := map[string][]*corev1.Pod{"going": append(pods, done)}
	done.Status.Phase = corev1.PodSucceeded

	plan := Replacements(c.input(), []*corev1.Node{going}, byNode)

	var placed []string
	for _, e := range plan.ExistingNodes {
		if e.Name == "going" {
			t.Errorf("pods %v planned onto the going node", e.Pods)
		}
		placed = append(placed, e.Pods...)
	}
	for _, nn := range plan.NewNodes {
		placed = append(placed, nn.Pods...)
	}
	sort.Strings(placed)
	if want := []string{"default/pending", "default/web"}; !slices.Equal(placed, want) {
		t.Errorf("pods placed: %v, want %v (unschedulable: %+v)", placed, want, plan.Unschedulable)
	}
	if len(plan.NewNodes) == 0 {
		t.Error("no replacement planned: web (1.5 CPU) does not fit beside busy on staying")
	}
	if pods[0].Spec.NodeName != "going" {
		t.Error("Replacements changed the cluster state's own pod")
	}
}

// TestInterruptDecisions covers what one instance of an interruption turns into.
func TestInterruptDecisions(t *testing.T) {
	c := newCluster(t, testPool("default", karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, []string{"m5.large"}))
	c.managed("ready", "default", "m5.large", time.Hour)
	tainted, _ := c.managed("tainted", "default", "m5.large", time.Hour)
	tainted.Spec.Taints = []corev1.Taint{{Key: karpenter.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}}
	_, deleting := c.managed("deleting", "default", "m5.large", time.Hour)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	_, unregistered := c.managed("unregistered", "default", "m5.large", time.Minute)
	unregistered.Labels[corev1.LabelTopologyZone] = zone
	var nodes []*corev1.Node
	for _, ns := range c.Snapshot.Nodes {
		if ns.Node.Name != "unregistered" {
			nodes = append(nodes, ns.Node)
		}
	}
	st := InterruptState{NodeClaims: c.NodeClaims, Nodes: nodes}
	deadline := now.Add(2 * time.Minute)
	cases := []struct {
		name   string
		it     Interruption
		leased bool
		want   InterruptKind
		check  func(t *testing.T, a InterruptAction)
	}{
		{name: "stranger's instance", it: Interruption{Reason: "SpotInterrupted", Instances: []string{"i-stranger"}, Involuntary: true, MarkSpot: true}, want: InterruptNotOwned,
			check: func(t *testing.T, a InterruptAction) {
				if a.Unavailable != nil || a.NodeClaim != "" {
					t.Errorf("a stranger's instance touched: %+v", a)
				}
			}},
		{name: "spot interruption drains before the deadline", it: Interruption{Reason: "SpotInterrupted", Instances: []string{"i-ready"}, Involuntary: true, Deadline: deadline}, want: InterruptDrain,
			check: func(t *testing.T, a InterruptAction) {
				if !a.GraceDeadline.Equal(deadline.Add(-15*time.Second)) || !a.DrainUntil.Equal(deadline.Add(-7500*time.Millisecond)) || a.Node != "ready" || a.NodeClaim != "ready-claim" {
					t.Errorf("drain %+v", a)
				}
			}},
		{name: "spot offering marked even for a NodeClaim without a node", it: Interruption{Reason: "SpotInterrupted", Instances: []string{"i-unregistered"}, MarkSpot: true}, want: InterruptDelete,
			check: func(t *testing.T, a InterruptAction) {
				if a.Unavailable == nil || *a.Unavailable != (Offering{InstanceType: "m5.large", Zone: zone, CapacityType: karpenter.CapacityTypeSpot}) {
					t.Errorf("offering %+v", a.Unavailable)
				}
			}},
		{name: "instance gone: delete the claim", it: Interruption{Reason: "InstanceTerminated", Instances: []string{"i-ready"}, Gone: true}, want: InterruptDelete},
		{name: "already deleting", it: Interruption{Reason: "InstanceStopping", Instances: []string{"i-deleting"}, Gone: true}, want: InterruptAlreadyDeleting},
		{name: "rebalance taint", it: Interruption{Reason: "RebalanceRecommendation", Instances: []string{"i-ready"}, TaintOnly: true}, want: InterruptTaint},
		{name: "rebalance taint, no node yet", it: Interruption{Reason: "RebalanceRecommendation", Instances: []string{"i-unregistered"}, TaintOnly: true}, want: InterruptNoNode},
		{name: "rebalance taint on a disrupted node", it: Interruption{Reason: "RebalanceRecommendation", Instances: []string{"i-tainted"}, TaintOnly: true}, want: InterruptAlreadyDisrupted},
		{name: "disrupted node without the lease: retry", it: Interruption{Reason: "ScheduledChange", Instances: []string{"i-tainted"}, Involuntary: true}, want: InterruptRetry},
		{name: "disrupted node under the lease: finish it", it: Interruption{Reason: "ScheduledChange", Instances: []string{"i-tainted"}, Involuntary: true}, leased: true, want: InterruptDrain},
		{name: "gone wins over the taint", it: Interruption{Reason: "InstanceTerminated", Instances: []string{"i-tainted"}, Gone: true}, want: InterruptDelete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := st
			s.Leased = tc.leased
			acts := Interrupt(tc.it, s)
			if len(acts) != 1 {
				t.Fatalf("%d actions, want 1", len(acts))
			}
			if acts[0].Kind != tc.want || acts[0].Reason != tc.it.Reason || acts[0].Instance != tc.it.Instances[0] {
				t.Fatalf("action %+v, want kind %s", acts[0], tc.want)
			}
			if tc.check != nil {
				tc.check(t, acts[0])
			}
			if got := tc.it.Owns(s); got != (tc.want != InterruptNotOwned) {
				t.Errorf("Owns = %v", got)
			}
		})
	}
}
