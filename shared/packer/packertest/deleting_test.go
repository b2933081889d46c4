package packertest

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// TestReplanDeleting: the pods of a node being deleted are planned with the
// pending ones (Karpenter's provisioner schedules the reschedulable pods of
// nodes marked for deletion), so their new home launches before the drain
// evicts them; the node takes no pods, DaemonSet and mirror pods stay with it,
// and a do-not-disrupt pod moves only when a terminationGracePeriod will evict
// it. A node not being deleted keeps its pods.
func TestReplanDeleting(t *testing.T) {
	cat := mustCatalog(t, smallTypes())
	it, _ := cat.Lookup("m5.xlarge")
	pool := poolOf("default", 0, bothCapacityTypes())
	now := metav1.NewTime(time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC))
	ds := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptrTo(true)}}
	}
	mirror := func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }
	dnd := func(p *corev1.Pod) { p.Annotations = map[string]string{karpenter.DoNotDisruptAnnotation: "true"} }
	cases := []struct {
		name string
		// how the node is being deleted (nil: it is not)
		mark  func(n *corev1.Node, nc *karpenter.NodeClaim)
		grace bool
		// pods on the node, and the names expected to move
		pods []*corev1.Pod
		move []string
	}{
		{name: "not deleting", pods: []*corev1.Pod{pod("web-0", "1", "1Gi")}},
		{name: "Node deleting", mark: func(n *corev1.Node, _ *karpenter.NodeClaim) { n.DeletionTimestamp = &now },
			pods: []*corev1.Pod{pod("web-0", "1", "1Gi"), pod("web-1", "1", "1Gi")}, move: []string{"web-0", "web-1"}},
		{name: "NodeClaim deleting", mark: func(_ *corev1.Node, nc *karpenter.NodeClaim) { nc.DeletionTimestamp = &now },
			pods: []*corev1.Pod{pod("web-0", "1", "1Gi")}, move: []string{"web-0"}},
		{name: "disrupted taint", mark: func(n *corev1.Node, _ *karpenter.NodeClaim) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: karpenter.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule})
		}, pods: []*corev1.Pod{pod("web-0", "1", "1Gi")}, move: []string{"web-0"}},
		{name: "DaemonSet, mirror and finished pods stay", mark: func(n *corev1.Node, _ *karpenter.NodeClaim) { n.DeletionTimestamp = &now },
			pods: []*corev1.Pod{pod("agent-x", "100m", "64Mi", ds), pod("static", "100m", "64Mi", mirror),
				pod("done", "1", "1Gi", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), pod("web-0", "1", "1Gi")},
			move: []string{"web-0"}},
		{name: "do-not-disrupt stays without a grace period", mark: func(_ *corev1.Node, nc *karpenter.NodeClaim) { nc.DeletionTimestamp = &now },
			pods: []*corev1.Pod{pod("batch", "1", "1Gi", dnd), pod("web-0", "1", "1Gi")}, move: []string{"web-0"}},
		{name: "do-not-disrupt moves with a grace period", mark: func(_ *corev1.Node, nc *karpenter.NodeClaim) { nc.DeletionTimestamp = &now },
			grace: true, pods: []*corev1.Pod{pod("batch", "1", "1Gi", dnd), pod("web-0", "1", "1Gi")}, move: []string{"batch", "web-0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := workload.ExistingNode("node-a", pool, it, catalog.Offering{Zone: "us-east-1a", CapacityType: "on-demand"})
			node.Spec.ProviderID = "aws:///us-east-1a/i-0a"
			nc := &karpenter.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a"}}
			nc.Status.ProviderID = node.Spec.ProviderID
			if tc.grace {
				nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
			}
			if tc.mark != nil {
				tc.mark(node, nc)
			}
			for _, p := range tc.pods {
				p.Spec.NodeName = node.Name
			}
			pending := pod("new-0", "500m", "512Mi")
			snap := snapshot(t, []*corev1.Pod{pending}, pool)
			snap.Catalog = cat
			snap.Nodes = []packer.NodeState{{Node: node, Pods: tc.pods}}
			before := snap.Nodes[0]
			out, moved := packer.ReplanDeleting(*snap, []*karpenter.NodeClaim{nc})
			if snap.Nodes[0].Node != before.Node || len(snap.Pods) != 1 {
				t.Fatal("ReplanDeleting modified its input")
			}
			var names []string
			for _, p := range moved {
				names = append(names, p.Name)
			}
			if !slices.Equal(names, tc.move) {
				t.Fatalf("moved %v, want %v", names, tc.move)
			}
			if len(out.Pods) != 1+len(tc.move) {
				t.Errorf("%d pods to place, want %d", len(out.Pods), 1+len(tc.move))
			}
			if len(out.Nodes[0].Pods) != len(tc.pods)-len(tc.move) {
				t.Errorf("%d pods stay on the node, want %d", len(out.Nodes[0].Pods), len(tc.pods)-len(tc.move))
			}
			s := solve(t, &out)
			for _, name := range append([]string{"new-0"}, tc.move...) {
				where, ok := s.where["default/"+name]
				switch {
				case !ok || where == "":
					t.Errorf("%s not placed:%s", name, s.dump())
				case tc.mark != nil && where == "node-a":
					t.Errorf("%s planned onto the node being deleted:%s", name, s.dump())
				}
			}
			if tc.mark == nil && s.where["default/new-0"] != "node-a" {
				t.Errorf("a node not being deleted takes pods: want new-0 on node-a:%s", s.dump())
			}
		})
	}
}
