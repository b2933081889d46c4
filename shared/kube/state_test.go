package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/testworld"
)

func pod(name, node string, cpu string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
	if node == "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	} else {
		p.Status.Phase = corev1.PodRunning
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

var claim = testworld.SmallClaim

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

// TestAssembleSplitsInFlight checks the snapshot the engine gets: pending pods,
// initialized nodes with their pods, and not-yet-initialized NodeClaims as in-flight
// capacity net of what is already bound to their node.
func TestAssembleSplitsInFlight(t *testing.T) {
	deleting := claim("gone", "aws:///z/i-3", false)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	st := &ClusterState{
		AllNodes: []*corev1.Node{node("ready", "aws:///z/i-1"), node("gpu-starting", "aws:///z/i-2"), node("static", "")},
		NodeClaims: []*karpenter.NodeClaim{claim("c-ready", "aws:///z/i-1", true), claim("c-gpu", "aws:///z/i-2", false),
			claim("c-launching", "", false), deleting},
	}
	pods := []*corev1.Pod{
		pod("pending", "", "1"), pod("on-ready", "ready", "500m"), pod("on-gpu", "gpu-starting", "1500m"),
		pod("done", "ready", "1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
	}
	assemble(st, pods)
	if len(st.Snapshot.Pods) != 1 || st.Snapshot.Pods[0].Name != "pending" {
		t.Fatalf("pending pods %v", names(st.Snapshot.Pods))
	}
	var nodeNames []string
	for _, ns := range st.Snapshot.Nodes {
		nodeNames = append(nodeNames, ns.Node.Name)
		if ns.Node.Name == "ready" && (len(ns.Pods) != 1 || ns.Pods[0].Name != "on-ready") {
			t.Errorf("pods on ready: %v (terminal pods must not count)", names(ns.Pods))
		}
	}
	if len(nodeNames) != 2 || nodeNames[0] != "ready" || nodeNames[1] != "static" {
		t.Errorf("snapshot nodes %v, want [ready static] (gpu-starting is in-flight)", nodeNames)
	}
	if len(st.Snapshot.InFlight) != 2 {
		t.Fatalf("in-flight %d, want c-gpu and c-launching (not the deleting one)", len(st.Snapshot.InFlight))
	}
	gpu := st.Snapshot.InFlight[0]
	if gpu.Name != "c-gpu" {
		t.Fatalf("in-flight[0] = %s", gpu.Name)
	}
	if q := gpu.Status.Allocatable[corev1.ResourceCPU]; q.String() != "2500m" {
		t.Errorf("in-flight cpu %s, want 2500m (4 minus the 1500m already bound)", q.String())
	}
	if q := gpu.Status.Allocatable[corev1.ResourcePods]; q.Value() != 109 {
		t.Errorf("in-flight pods %s, want 109", q.String())
	}
	if q := st.NodeClaims[1].Status.Allocatable[corev1.ResourceCPU]; q.String() != "4" {
		t.Errorf("the NodeClaim in ClusterState was modified: cpu %s", q.String())
	}
	if got := st.NodeClaimForNode(st.AllNodes[0]); got == nil || got.Name != "c-ready" {
		t.Errorf("NodeClaimForNode(ready) = %v", got)
	}
}

func names(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// TestInFlightRoomCountsSidecars: the room an in-flight NodeClaim still offers
// leaves out what its bound pods request by kube-scheduler's rule (facts.PodRequests).
// kube kept its own sum, which took a sidecar (an init container with restartPolicy
// Always) for an ordinary init container and so counted max(app, sidecar) instead
// of app + sidecar: the claim's room was overstated and the provisioner packed pods
// onto capacity that was not there.
func TestInFlightRoomCountsSidecars(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	cpu := func(v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
	}
	withSidecar := pod("meshed", "starting", "1", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{
			{Name: "proxy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: cpu("500m")}},
			{Name: "migrate", Resources: corev1.ResourceRequirements{Requests: cpu("1200m")}},
		}
		p.Spec.Overhead = cpu("100m")
	})
	limitsOnly := pod("limits", "starting", "1", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: cpu("250m")}
	})
	nc := claim("c", "aws:///us-east-1a/i-0abc", false)
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
	st := &ClusterState{AllNodes: []*corev1.Node{node("starting", "aws:///us-east-1a/i-0abc")}, NodeClaims: []*karpenter.NodeClaim{nc}}
	assemble(st, []*corev1.Pod{withSidecar, limitsOnly})
	if len(st.Snapshot.InFlight) != 1 {
		t.Fatalf("in-flight %d, want the claim", len(st.Snapshot.InFlight))
	}
	got := st.Snapshot.InFlight[0]
	// meshed: max(1 + 500m, 1200m + 500m) + 100m = 1800m; limits: 250m. 4 - 2050m.
	if q := got.Status.Allocatable[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1950m")) != 0 {
		t.Errorf("in-flight cpu %s, want 1950m (the sidecar runs beside the app and the later init container)", q.String())
	}
	if q := got.Status.Allocatable[corev1.ResourcePods]; q.Value() != 108 {
		t.Errorf("in-flight pods %s, want 108", q.String())
	}
	if q := nc.Status.Allocatable[corev1.ResourceCPU]; q.Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("the NodeClaim itself was modified: cpu %s", q.String())
	}
}

func TestSetReadyFollowsDependents(t *testing.T) {
	var conds []metav1.Condition
	now := time.Now()
	setCond(&conds, karpenter.ConditionLaunched, metav1.ConditionTrue, "Launched", "", now, 1)
	setReady(&conds, now, 1)
	if c := findCond(conds, karpenter.ConditionReady); c.Status != metav1.ConditionUnknown || c.Reason != ReasonReconcilingDependents {
		t.Errorf("ready after launch: %+v", c)
	}
	setCond(&conds, karpenter.ConditionRegistered, metav1.ConditionTrue, "Registered", "", now, 1)
	setCond(&conds, karpenter.ConditionInitialized, metav1.ConditionTrue, "Initialized", "", now, 1)
	setReady(&conds, now, 1)
	if c := findCond(conds, karpenter.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Errorf("ready when all true: %+v", c)
	}
	setCond(&conds, karpenter.ConditionLaunched, metav1.ConditionFalse, "LaunchFailed", "insufficient capacity", now, 1)
	setReady(&conds, now, 1)
	if c := findCond(conds, karpenter.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != ReasonUnhealthyDependents {
		t.Errorf("ready after failure: %+v", c)
	}
}

func findCond(conds []metav1.Condition, typ string) metav1.Condition {
	for _, c := range conds {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// TestAssembleMatchesClaimsAsKarpenter: a claim finds its Node by providerID or,
// without one, by status.nodeName; a Node labelled karpenter.sh/initialized is
// initialized whatever the claim's condition says yet (Karpenter's StateNode reads
// the label); a deleting claim is never capacity.
func TestAssembleMatchesClaimsAsKarpenter(t *testing.T) {
	byName := claim("c-named", "", false)
	byName.Status.NodeName = "named"
	labelled := claim("c-labelled", "aws:///z/i-5", false)
	initNode := node("labelled", "aws:///z/i-5")
	initNode.Labels = map[string]string{karpenter.NodeInitializedLabelKey: "true"}
	deleting := claim("c-deleting", "aws:///z/i-6", false)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	snap, _, _ := packer.Assemble([]*corev1.Node{node("named", ""), initNode, node("draining", "aws:///z/i-6")},
		[]*corev1.Pod{pod("on-named", "named", "1")}, []*karpenter.NodeClaim{byName, labelled, deleting}, func(*corev1.Pod) bool { return false })
	var nodeNames, inFlight []string
	for _, ns := range snap.Nodes {
		nodeNames = append(nodeNames, ns.Node.Name)
	}
	for _, nc := range snap.InFlight {
		inFlight = append(inFlight, nc.Name)
	}
	if len(nodeNames) != 2 || nodeNames[0] != "labelled" || nodeNames[1] != "draining" {
		t.Errorf("nodes %v, want [labelled draining]", nodeNames)
	}
	if len(inFlight) != 1 || inFlight[0] != "c-named" {
		t.Fatalf("in-flight %v, want [c-named]", inFlight)
	}
	if q := snap.InFlight[0].Status.Allocatable[corev1.ResourceCPU]; q.String() != "3" {
		t.Errorf("c-named cpu %s, want 3 (4 minus the pod bound to its node, found by name)", q.String())
	}
}
