package handlers

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// stateReader answers ReadState with a fixed state; a Recorder over it never
// reaches the other methods, so they stay nil and would panic if it did.
type stateReader struct {
	kube.Cluster
	st *kube.ClusterState
}

func (s stateReader) ReadState(context.Context) (*kube.ClusterState, error) { return s.st, nil }

// catalogReader answers the Cloud's reads from the embedded catalog.
type catalogReader struct {
	Cloud
	unavailable *cloud.UnavailableOfferings
}

func (c catalogReader) LiveCatalog(context.Context, []string) (*catalog.Catalog, error) {
	return catalog.Embedded(), nil
}
func (c catalogReader) ListOwned(context.Context) ([]cloud.OwnedInstance, error) { return nil, nil }
func (c catalogReader) Unavailable() *cloud.UnavailableOfferings                 { return c.unavailable }

// TestInterruptionDecisionsInMemory drives the interruption handler over a
// Recorder, as Nomad's scheduler tests drive a Harness: no API server, no EC2; the
// test asserts what the handler decided to write, in order.
func TestInterruptionDecisionsInMemory(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cat := catalog.Embedded()
	it, _ := cat.Lookup("m5.large")
	var off catalog.Offering
	for _, o := range it.Offerings {
		if o.Zone == "us-east-1a" && o.CapacityType == karpenter.CapacityTypeSpot {
			off = o
		}
	}
	class := &karpenter.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool := &karpenter.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpenter.NodePoolSpec{
		Template: karpenter.NodeClaimTemplate{Spec: karpenter.NodeClaimTemplateSpec{
			Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}}},
			NodeClassRef: &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "default"}}}}}
	labels := catalog.Labels(it, off)
	labels[karpenter.NodePoolLabelKey] = "default"
	labels[corev1.LabelHostname] = "spot-node"
	hourAgo := metav1.NewTime(now.Add(-time.Hour))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "spot-node", Labels: labels, CreationTimestamp: hourAgo},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + sampleInstance},
		Status: corev1.NodeStatus{Capacity: catalog.Capacity(it), Allocatable: catalog.Allocatable(it, catalog.OverheadFor(class)),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	claim := &karpenter.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", CreationTimestamp: hourAgo,
		Labels: map[string]string{karpenter.NodePoolLabelKey: "default", corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1a"}},
		Spec: karpenter.NodeClaimSpec{NodeClassRef: pool.Spec.Template.Spec.NodeClassRef},
		Status: karpenter.NodeClaimStatus{NodeName: "spot-node", ProviderID: node.Spec.ProviderID, Conditions: []metav1.Condition{
			{Type: karpenter.ConditionInitialized, Status: metav1.ConditionTrue, LastTransitionTime: hourAgo}}}}
	yes := true
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-rs", Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: "spot-node", Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	st := &kube.ClusterState{
		Snapshot: packer.Snapshot{Nodes: []packer.NodeState{{Node: node, Pods: []*corev1.Pod{web}}},
			NodePools: []*karpenter.NodePool{pool}, NodeClasses: []*karpenter.EC2NodeClass{class}},
		NodeClaims: []*karpenter.NodeClaim{claim}, AllNodes: []*corev1.Node{node},
		PodsByNode: map[string][]*corev1.Pod{"spot-node": {web}},
	}
	unavailable := cloud.NewUnavailableOfferings(func() time.Time { return now })
	clock := func() time.Time { return now }
	var rec *Recorder
	fn := NewFunctionFor(InterruptionHandler(), func(context.Context) (*Deps, error) {
		rec = NewRecorder(stateReader{st: st}, catalogReader{unavailable: unavailable}, clock)
		return &Deps{Config: Config{ClusterName: "c", Rebalance: RebalanceIgnore}, Cluster: rec, Cloud: rec, Now: clock, Log: quietLog(),
			Identity: "interruption/test"}, nil
	})
	fn.MetricsOut = io.Discard
	raw := sample(t, "spot-interruption.json", `"time": "2024-05-01T12:00:00Z"`, `"time": "2026-12-01T12:00:00Z"`)
	if _, err := fn.Invoke(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range rec.Decisions() {
		if d.Kind == DecideEvent || d.Kind == DecideNominate || d.Kind == DecideLifecycle {
			continue
		}
		got = append(got, fmt.Sprintf("%s %s%s %s%s", d.Kind, d.NodeClaim, d.Node, d.InstanceType, d.Detail))
	}
	want := []string{
		"TaintDisrupted default-abcdespot-node ",
		"CreateNodeClaim default-shadow3 ",
		"Launch default-shadow3 m5.large", // prefix: the option count follows
		"RecordLaunch default-shadow3 m5.large",
		"Drain default-abcdespot-node pods deleted at 2026-12-01T12:01:45Z",
		"DeleteNodeClaim default-abcdespot-node ",
	}
	if len(got) != len(want) {
		t.Fatalf("decisions:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("decision %d: %q, want %q", i, got[i], want[i])
		}
	}
	// The spot offering is marked unavailable before the replacement is planned:
	// the replacement must not be the interrupted spot pool.
	if !unavailable.IsUnavailable("m5.large", "us-east-1a", karpenter.CapacityTypeSpot) {
		t.Error("interrupted spot offering not marked unavailable")
	}
}
