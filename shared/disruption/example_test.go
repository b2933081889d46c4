package disruption_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/disruption"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Two on-demand m5.xlarge nodes Joiner launched an hour ago: one is empty, the
// other runs a single small pod. Decide deletes the empty node (the pool's
// consolidateAfter is 0s) and replaces the other by the cheapest type that still
// holds its pod; the executor launches the replacement before it drains the node.
// The pool's budget lets all its nodes go at once (Karpenter's default, 10%,
// would hold the second one for a later round, and say so in Blocked).
func ExampleDecide() {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cat := catalog.Embedded()
	pool := &karpenter.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpenter.NodePoolSpec{
		Template: karpenter.NodeClaimTemplate{Spec: karpenter.NodeClaimTemplateSpec{
			Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
				{Key: karpenter.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpenter.CapacityTypeOnDemand}},
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}},
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}},
			},
			NodeClassRef: &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "default"}}},
		Disruption: karpenter.Disruption{ConsolidationPolicy: karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized,
			ConsolidateAfter: karpenter.NewDuration(0), Budgets: []karpenter.Budget{{Nodes: "100%"}}}}}
	class := &karpenter.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	it, _ := cat.Lookup("m5.xlarge")
	hourAgo := metav1.NewTime(now.Add(-time.Hour))
	snap := &packer.Snapshot{NodePools: []*karpenter.NodePool{pool}, NodeClasses: []*karpenter.EC2NodeClass{class}, Catalog: cat}
	var claims []*karpenter.NodeClaim
	node := func(name string, pods ...*corev1.Pod) {
		var off catalog.Offering
		for _, o := range it.Offerings {
			if o.Zone == "us-east-1a" && o.CapacityType == karpenter.CapacityTypeOnDemand {
				off = o
			}
		}
		labels := catalog.Labels(it, off)
		labels[karpenter.NodePoolLabelKey] = "default"
		labels[corev1.LabelHostname] = name
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: hourAgo},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name},
			Status: corev1.NodeStatus{Capacity: catalog.Capacity(it), Allocatable: catalog.Allocatable(it, catalog.OverheadFor(class)),
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		for _, p := range pods {
			p.Spec.NodeName = name
		}
		snap.Nodes = append(snap.Nodes, packer.NodeState{Node: n, Pods: pods})
		claims = append(claims, &karpenter.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-claim", CreationTimestamp: hourAgo,
				Labels: map[string]string{karpenter.NodePoolLabelKey: "default", corev1.LabelInstanceTypeStable: "m5.xlarge"}},
			Spec: karpenter.NodeClaimSpec{NodeClassRef: pool.Spec.Template.Spec.NodeClassRef},
			Status: karpenter.NodeClaimStatus{NodeName: name, ProviderID: n.Spec.ProviderID, Conditions: []metav1.Condition{
				{Type: karpenter.ConditionInitialized, Status: metav1.ConditionTrue, LastTransitionTime: hourAgo}}}})
	}
	yes := true
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: hourAgo,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-rs", Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	node("idle")
	node("busy", web)

	dec := disruption.Decide(disruption.Input{Now: now, Snapshot: snap, NodeClaims: claims})
	for _, a := range dec.Actions {
		fmt.Printf("%s %s (%s), saving $%.4f/h\n", a.Kind, a.Node, a.Reason, a.SavingsPerHour)
		if a.Replacement != nil {
			fmt.Println("  replacement:", a.Replacement.CapacityType, a.Replacement.InstanceType, "for", a.Replacement.Pods)
		}
	}
	for _, b := range dec.Blocked {
		fmt.Println("blocked", b.Node, b.Reason)
	}
	// Output:
	// Delete idle (Empty), saving $0.1920/h
	// Replace busy (Underutilized), saving $0.0960/h
	//   replacement: on-demand m5.large for [default/web]
}
