package handlers

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// TestWithoutNodesReplacesOnlyReschedulablePods: the pods an interruption launches
// replacements for are the ones facts.IsReschedulable names, the same ones
// consolidation must fit elsewhere. Before the facts were shared, this handler's own
// rule also re-provisioned pods already being deleted, and mirror pods known only by
// their Node owner, which launched capacity for pods that were never coming back.
func TestWithoutNodesReplacesOnlyReschedulablePods(t *testing.T) {
	now := metav1.Now()
	ctrl := true
	mk := func(name string, mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "going"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	going := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "going"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}}
	staying := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "staying"}}
	pending := mk("pending", func(p *corev1.Pod) { p.Spec.NodeName = "" })
	st := &kube.ClusterState{
		Snapshot: packer.Snapshot{Pods: []*corev1.Pod{pending},
			Nodes: []packer.NodeState{{Node: going}, {Node: staying}}},
		PodsByNode: map[string][]*corev1.Pod{"going": {
			mk("web", nil),
			mk("deleting", func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
			mk("agent", func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: &ctrl}}
			}),
			mk("static", func(p *corev1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "going", Controller: &ctrl}}
			}),
			mk("mirror", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "h"} }),
			mk("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		}},
	}
	snap := withoutNodes(st, []*corev1.Node{going})
	var names []string
	for _, p := range snap.Pods {
		names = append(names, p.Name)
		if p.Name == "web" && p.Spec.NodeName != "" {
			t.Errorf("pod web is pending again but still bound to %s", p.Spec.NodeName)
		}
	}
	if want := []string{"pending", "web"}; !slices.Equal(names, want) {
		t.Errorf("pods to place: %v, want %v", names, want)
	}
	if len(snap.Nodes) != 1 || snap.Nodes[0].Node.Name != "staying" {
		t.Errorf("nodes left: %+v, want only staying", snap.Nodes)
	}
	if st.PodsByNode["going"][0].Spec.NodeName != "going" {
		t.Error("withoutNodes changed the cluster state's own pod")
	}
}
