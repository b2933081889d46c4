package packer_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Three pending web pods that must spread over zones, one NodePool allowing spot
// and on-demand, and a two-type catalog: each pod gets the cheapest node that
// holds it (spot m5.large) in a zone of its own. A pod asking for more than any
// type has is listed as unschedulable, with the reason.
func ExampleSolve() {
	offer := func(od, spot float64) []catalog.Offering {
		var out []catalog.Offering
		for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
			out = append(out,
				catalog.Offering{Zone: z, CapacityType: karpenter.CapacityTypeOnDemand, PricePerHour: od, Available: true},
				catalog.Offering{Zone: z, CapacityType: karpenter.CapacityTypeSpot, PricePerHour: spot, Available: true})
		}
		return out
	}
	cat, err := catalog.New("us-east-1", []catalog.InstanceType{
		{Name: "m5.large", Arch: "amd64", VCPU: 2, MemoryMiB: 8192, MaxPods: 29, Offerings: offer(0.096, 0.04)},
		{Name: "m5.xlarge", Arch: "amd64", VCPU: 4, MemoryMiB: 16384, MaxPods: 58, Offerings: offer(0.192, 0.08)},
	})
	if err != nil {
		panic(err)
	}
	pod := func(name, cpu string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			},
		}
	}
	pool := &karpenter.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpenter.NodePoolSpec{
		Template: karpenter.NodeClaimTemplate{Spec: karpenter.NodeClaimTemplateSpec{
			Requirements: []karpenter.NodeSelectorRequirementWithMinValues{{Key: karpenter.CapacityTypeLabelKey,
				Operator: corev1.NodeSelectorOpIn, Values: []string{karpenter.CapacityTypeSpot, karpenter.CapacityTypeOnDemand}}},
			NodeClassRef: &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "default"}}}}}

	plan := packer.Solve(&packer.Snapshot{
		Pods:        []*corev1.Pod{pod("web-0", "1"), pod("web-1", "1"), pod("web-2", "1"), pod("huge", "64")},
		NodePools:   []*karpenter.NodePool{pool},
		NodeClasses: []*karpenter.EC2NodeClass{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}},
		Catalog:     cat,
	}, packer.Options{})

	for _, n := range plan.NewNodes {
		fmt.Println(n.Name, n.InstanceType, n.CapacityType, n.Zone, n.Pods)
	}
	for _, u := range plan.Unschedulable {
		fmt.Println("unschedulable:", u.Pod, "-", u.Reason)
	}
	fmt.Printf("$%.2f/h\n", plan.TotalPricePerHour)
	// Output:
	// default-1 m5.large spot us-east-1a [default/web-0]
	// default-2 m5.large spot us-east-1b [default/web-1]
	// default-3 m5.large spot us-east-1c [default/web-2]
	// unschedulable: default/huge - NodePool default: no instance type has room for requests cpu 64, memory 1Gi, pods 1 (largest allocatable less DaemonSets: cpu 3920m, memory 14162Mi, pods 58)
	// $0.12/h
}
