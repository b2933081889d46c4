package packer

import (
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func testPod(name, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
	}
}

func testPool(name string, reqs ...karpenter.NodeSelectorRequirementWithMinValues) *karpenter.NodePool {
	return &karpenter.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: karpenter.NodePoolSpec{
		Template: karpenter.NodeClaimTemplate{Spec: karpenter.NodeClaimTemplateSpec{
			Requirements: reqs,
			NodeClassRef: &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "default"}}}}}
}

func req(key string, op corev1.NodeSelectorOperator, vals ...string) karpenter.NodeSelectorRequirementWithMinValues {
	return karpenter.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals}
}

func testClass() *karpenter.EC2NodeClass {
	return &karpenter.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
}

func TestHeavyAppLandsOnCheapestFittingNodes(t *testing.T) {
	var pods []*corev1.Pod
	for i := 0; i < 5; i++ {
		pods = append(pods, testPod(fmt.Sprintf("heavy-app-%d", i), "1", "1Gi"))
	}
	snap := &Snapshot{
		Pods: pods,
		NodePools: []*karpenter.NodePool{testPool("default",
			req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m6i.large", "m6i.xlarge", "m7i.large", "m7i.xlarge"),
			req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"))},
		NodeClasses: []*karpenter.EC2NodeClass{testClass()},
		Catalog:     catalog.Embedded(),
	}
	plan := Solve(snap, Options{Explain: true})
	b, _ := json.MarshalIndent(plan, "", "  ")
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %s", b)
	}
	placed := 0
	for _, n := range plan.NewNodes {
		placed += len(n.Pods)
		if n.CapacityType != karpenter.CapacityTypeSpot {
			t.Errorf("node %s: capacity type %s, want spot", n.Name, n.CapacityType)
		}
	}
	if placed != 5 {
		t.Fatalf("placed %d pods, want 5: %s", placed, b)
	}
	t.Logf("%s", b)
}
