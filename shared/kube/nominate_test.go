package kube

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/nominate"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// TestAssembleCountsNominatedPods: a pending pod nominated to a node is held there
// (kube-scheduler counts it against that node), not planned again; one nominated to
// a node that is gone is pending again; one nominated to the registered node of an
// in-flight NodeClaim comes off that NodeClaim's capacity.
func TestAssembleCountsNominatedPods(t *testing.T) {
	nominated := func(node string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Status.NominatedNodeName = node }
	}
	st := &ClusterState{
		AllNodes:   []*corev1.Node{node("ready", "aws:///z/i-1"), node("starting", "aws:///z/i-2")},
		NodeClaims: []*karpenter.NodeClaim{claim("c-ready", "aws:///z/i-1", true), claim("c-starting", "aws:///z/i-2", false)},
	}
	pods := []*corev1.Pod{
		pod("bound", "ready", "1"),
		pod("to-ready", "", "500m", nominated("ready")),
		pod("to-starting", "", "1500m", nominated("starting")),
		pod("to-gone", "", "1", nominated("gone")),
		pod("plain", "", "1"),
	}
	assemble(st, pods)
	if got := names(st.Snapshot.Pods); !slices.Equal(got, []string{"to-gone", "plain"}) {
		t.Errorf("pending %v, want [to-gone plain]", got)
	}
	if got := names(st.Snapshot.Nodes[0].Pods); !slices.Equal(got, []string{"bound", "to-ready"}) {
		t.Errorf("pods counted on ready: %v, want [bound to-ready]", got)
	}
	if got := names(st.PodsByNode["ready"]); !slices.Equal(got, []string{"bound"}) {
		t.Errorf("PodsByNode[ready] = %v: only bound pods may be drained", got)
	}
	if q := st.Snapshot.InFlight[0].Status.Allocatable[corev1.ResourceCPU]; q.String() != "2500m" {
		t.Errorf("in-flight cpu %s, want 2500m (4 less the 1500m nominated)", q.String())
	}
}

// TestWriteNominations: a plan's pods for an initialized node are nominated to it
// through the status subresource.
func TestWriteNominations(t *testing.T) {
	n := node("n1", "")
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}
	p := pod("web", "", "1")
	c, cs := fakeClient(n, p)
	st := &ClusterState{AllNodes: []*corev1.Node{n}}
	assemble(st, []*corev1.Pod{p})
	d := nominate.ForPlan(st.NominationInput(), &packer.Plan{ExistingNodes: []packer.ExistingNode{{Name: "n1", Pods: []string{"default/web"}}}})
	got, err := c.WriteNominations(context.Background(), d)
	if err != nil || got != 1 {
		t.Fatalf("WriteNominations = %d, %v; want 1 nomination", got, err)
	}
	out, err := cs.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.NominatedNodeName != "n1" {
		t.Errorf("nominatedNodeName %q, want n1", out.Status.NominatedNodeName)
	}
}
