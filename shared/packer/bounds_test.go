package packer

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// A pending pod whose requests the vectors cannot hold (read from the API server,
// which bounds nothing) is unschedulable with the reason, not packed as asking for
// nothing: the "1e18" pod went onto an 8-CPU node beside seven 4-CPU pods.
func TestOutOfRangeRequestsAreUnschedulable(t *testing.T) {
	for _, cpu := range []string{"1e18", "9300000000000000", "1e400"} {
		t.Run(cpu, func(t *testing.T) {
			pods := []*corev1.Pod{testPod("huge", cpu, "1Gi")}
			for i := range 7 {
				pods = append(pods, testPod(fmt.Sprintf("small-%d", i), "4", "1Gi"))
			}
			snap := &Snapshot{
				Pods: pods,
				NodePools: []*karpenter.NodePool{testPool("default",
					req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m6i.2xlarge"))},
				NodeClasses: []*karpenter.EC2NodeClass{testClass()},
				Catalog:     catalog.Embedded(),
			}
			plan := Solve(snap, Options{})
			if len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod != "default/huge" ||
				!strings.Contains(plan.Unschedulable[0].Reason, "spec.containers[0].resources.requests.cpu") ||
				!strings.Contains(plan.Unschedulable[0].Reason, "out of range") {
				t.Fatalf("unschedulable = %+v, want default/huge with its cpu out of range", plan.Unschedulable)
			}
			placed := 0
			for _, n := range plan.NewNodes {
				placed += len(n.Pods)
				if len(n.Pods) > 1 {
					t.Errorf("%s holds %v: an m6i.2xlarge has room for one 4-CPU pod", n.Name, n.Pods)
				}
			}
			if placed != 7 {
				t.Errorf("placed %d pods, want the 7 in range", placed)
			}
		})
	}
}
