package testworld_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/testworld"
)

// TestViewsAgree: the world's Snapshot (what the disruption tests decide on) and
// kube.NewState of its Objects (what the in-memory handler tests read) see the same
// nodes with the same pods, the same pending pods, and an in-flight NodeClaim as
// in-flight capacity.
func TestViewsAgree(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := testworld.New(t, now, testworld.Pool("default", karpenter.ConsolidationPolicyWhenEmpty, time.Minute, []string{"m5.large", "m5.xlarge"}))
	w.Managed("a", "default", "m5.large", time.Hour, testworld.AppPod(now, "web", "500m", "512Mi"), testworld.DaemonSetPod(now, "a"))
	w.Node("static", "", "m5.xlarge", 24*time.Hour)
	w.Pending(testworld.PendingPod(now, "waiting", "1", "1Gi"))
	w.InFlight("default-x", "default", "m5.xlarge", testworld.Zone, karpenter.CapacityTypeOnDemand, "i-0123456789abcdef0", time.Minute)
	nodes := w.Nodes()
	st := kube.NewState(kube.Objects{Pods: w.Pods(), Nodes: nodes, NodeClaims: w.NodeClaims, NodePools: w.Snapshot.NodePools,
		NodeClasses: w.Snapshot.NodeClasses, PDBs: w.PDBs}, now)
	if len(st.Snapshot.Nodes) != len(w.Snapshot.Nodes) {
		t.Fatalf("%d nodes assembled, world has %d", len(st.Snapshot.Nodes), len(w.Snapshot.Nodes))
	}
	for i, ns := range w.Snapshot.Nodes {
		got := st.Snapshot.Nodes[i]
		if got.Node.Name != ns.Node.Name || len(got.Pods) != len(ns.Pods) {
			t.Errorf("node %d: assembled %s with %d pods, world %s with %d", i, got.Node.Name, len(got.Pods), ns.Node.Name, len(ns.Pods))
		}
	}
	if len(st.Snapshot.Pods) != 1 || st.Snapshot.Pods[0].Name != "waiting" {
		t.Errorf("pending %v, want [waiting]", st.Snapshot.Pods)
	}
	if len(st.Snapshot.InFlight) != 1 || st.Snapshot.InFlight[0].Name != "default-x" {
		t.Errorf("in flight %v, want default-x", st.Snapshot.InFlight)
	}
	if nc := st.NodeClaimForNode(nodes[0]); nc == nil || nc.Name != "a-claim" {
		t.Errorf("node a's NodeClaim: %v", nc)
	}
	if q := nodes[0].Status.Allocatable[corev1.ResourceCPU]; q.IsZero() {
		t.Error("a catalog node without allocatable cpu")
	}
}
