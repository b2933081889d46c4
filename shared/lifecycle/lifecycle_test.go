package lifecycle

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

const provider = "aws:///us-east-1a/i-0abc"

// claim is a NodeClaim created at t0 with the given conditions true (at t0).
func claim(conds ...string) *karpenter.NodeClaim {
	nc := &karpenter.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x", CreationTimestamp: metav1.NewTime(t0),
		Labels: map[string]string{karpenter.NodePoolLabelKey: "default"}, Finalizers: []string{karpenter.TerminationFinalizer}}}
	for _, c := range conds {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)})
		if c == karpenter.ConditionLaunched {
			nc.Status.ProviderID = provider
		}
	}
	return nc
}

func readyNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1"}, Spec: corev1.NodeSpec{ProviderID: provider,
		Taints: []corev1.Taint{{Key: karpenter.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
}

// describe renders transitions as "Kind[:Cause|Reason]" for comparison.
func describe(trs []Transition) string {
	var out []string
	for _, t := range trs {
		s := string(t.Kind)
		switch {
		case t.Cause != "":
			s += ":" + string(t.Cause)
		case t.Reason != "":
			s += ":" + t.Reason
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestDecide(t *testing.T) {
	launched, registered, initialized := karpenter.ConditionLaunched, karpenter.ConditionRegistered, karpenter.ConditionInitialized
	cases := []struct {
		name  string
		nc    func() *karpenter.NodeClaim
		node  func() *corev1.Node // nil: no Node
		after time.Duration       // decision time after t0
		want  string
	}{
		{name: "deleted with finalizer is finalized", after: time.Minute, want: "Finalize",
			nc: func() *karpenter.NodeClaim {
				nc := claim(launched)
				nc.DeletionTimestamp = &metav1.Time{Time: t0}
				return nc
			}},
		{name: "deleted without finalizer is someone else's to finish", after: time.Minute, want: "",
			nc: func() *karpenter.NodeClaim {
				nc := claim(launched)
				nc.DeletionTimestamp, nc.Finalizers = &metav1.Time{Time: t0}, nil
				return nc
			}},
		{name: "unlaunched within the launch timeout waits", after: LaunchTimeout, want: "", nc: func() *karpenter.NodeClaim { return claim() }},
		{name: "unlaunched past the launch timeout expires", after: LaunchTimeout + time.Second, want: "Expire:LaunchTimeout",
			nc: func() *karpenter.NodeClaim { return claim() }},
		{name: "launched without a node waits for registration", after: RegistrationTimeout, want: "",
			nc: func() *karpenter.NodeClaim { return claim(launched) }},
		{name: "launched without a node past the registration timeout expires", after: RegistrationTimeout + time.Second,
			want: "Expire:RegistrationTimeout", nc: func() *karpenter.NodeClaim { return claim(launched) }},
		{name: "registered whose node was deleted expires", after: time.Minute, want: "Expire:NodeDeleted",
			nc: func() *karpenter.NodeClaim { return claim(launched, registered, initialized) }},
		{name: "node being deleted under karpenter.sh/termination expires its claim", after: time.Minute, want: "Expire:NodeDeleting",
			nc: func() *karpenter.NodeClaim { return claim(launched, registered, initialized) },
			node: func() *corev1.Node {
				n := readyNode()
				n.DeletionTimestamp, n.Finalizers = &metav1.Time{Time: t0}, []string{karpenter.TerminationFinalizer}
				return n
			}},
		{name: "ready node registers and initializes at once", after: time.Minute, want: "Register Initialize",
			nc: func() *karpenter.NodeClaim { return claim(launched) }, node: readyNode},
		{name: "node not ready registers; not-ready is what registering writes", after: time.Minute, want: "Register",
			nc:   func() *karpenter.NodeClaim { return claim(launched) },
			node: func() *corev1.Node { n := readyNode(); n.Status.Conditions = nil; return n }},
		{name: "startup taints the registration adds keep it uninitialized", after: time.Minute, want: "Register AwaitInitialization:StartupTaintsExist",
			nc: func() *karpenter.NodeClaim {
				nc := claim(launched)
				nc.Spec.StartupTaints = []corev1.Taint{{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}}
				return nc
			}, node: readyNode},
		{name: "a GPU not advertised yet", after: time.Minute, want: "AwaitInitialization:ResourceNotRegistered",
			nc: func() *karpenter.NodeClaim {
				nc := claim(launched, registered)
				nc.Status.Allocatable = corev1.ResourceList{karpenter.ResourceNVIDIAGPU: resource.MustParse("1")}
				return nc
			}, node: readyNode},
		{name: "an unchanged wait is not written again", after: time.Minute, want: "",
			nc: func() *karpenter.NodeClaim {
				nc := claim(launched, registered)
				nc.Status.Allocatable = corev1.ResourceList{karpenter.ResourceNVIDIAGPU: resource.MustParse("1")}
				nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: initialized, Status: metav1.ConditionUnknown,
					Reason: ReasonResourceNotRegistered, Message: "Resources nvidia.com/gpu not registered"})
				return nc
			}, node: readyNode},
		{name: "initialized and healthy needs nothing", after: time.Hour, want: "",
			nc: func() *karpenter.NodeClaim { return claim(launched, registered, initialized) }, node: readyNode},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Now: t0.Add(c.after), NodeClaims: []*karpenter.NodeClaim{c.nc()}}
			if c.node != nil {
				in.Nodes = []*corev1.Node{c.node()}
			}
			trs := Decide(in)
			if got := describe(trs); got != c.want {
				t.Errorf("Decide = %q, want %q", got, c.want)
			}
			for _, tr := range trs {
				if tr.Kind == Expire && tr.Why == "" {
					t.Errorf("%s without a message", tr.Kind)
				}
			}
		})
	}
}

// TestDecideIsPure: deciding writes nothing into its input, and the Node a
// Register leaves is what the following initialization is judged on.
func TestDecideIsPure(t *testing.T) {
	nc, n := claim(karpenter.ConditionLaunched), readyNode()
	before := fmt.Sprintf("%+v %+v", nc, n)
	trs := Decide(Input{Now: t0.Add(time.Minute), NodeClaims: []*karpenter.NodeClaim{nc}, Nodes: []*corev1.Node{n}})
	if after := fmt.Sprintf("%+v %+v", nc, n); after != before {
		t.Errorf("Decide changed its input")
	}
	if len(trs) != 2 || trs[1].Node == n {
		t.Fatalf("want Register then Initialize on the registered copy, got %q", describe(trs))
	}
	reg := trs[1].Node
	if reg.Labels[karpenter.NodeClaimLabelKey] != nc.Name || reg.Labels[karpenter.NodePoolLabelKey] != "default" || reg.Labels[karpenter.NodeRegisteredLabelKey] != "true" {
		t.Errorf("registered labels %v", reg.Labels)
	}
	for _, tt := range reg.Spec.Taints {
		if tt.Key == karpenter.UnregisteredTaintKey {
			t.Errorf("registration kept %s", tt.Key)
		}
	}
}

func TestMissingResources(t *testing.T) {
	nc := claim(karpenter.ConditionLaunched)
	nc.Status.Allocatable = corev1.ResourceList{karpenter.ResourceNVIDIAGPU: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("4"),
		"hugepages-2Mi": resource.MustParse("1Gi")}
	n := readyNode()
	if got := missingResources(nc, n); len(got) != 1 || got[0] != "nvidia.com/gpu" {
		t.Errorf("missing %v, want [nvidia.com/gpu]", got)
	}
	n.Status.Allocatable[karpenter.ResourceNVIDIAGPU] = resource.MustParse("1")
	if got := missingResources(nc, n); len(got) != 0 {
		t.Errorf("missing %v once the device plugin advertised the GPU", got)
	}
}

func TestPoolStatuses(t *testing.T) {
	pool := &karpenter.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	a, b, gone := claim(karpenter.ConditionLaunched), claim(karpenter.ConditionLaunched), claim(karpenter.ConditionLaunched)
	gone.DeletionTimestamp = &metav1.Time{Time: t0}
	for _, nc := range []*karpenter.NodeClaim{a, b, gone} {
		nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	}
	got := PoolStatuses([]*karpenter.NodePool{pool}, []*karpenter.NodeClaim{a, b, gone})
	if len(got) != 1 || got[0].Nodes != 2 {
		t.Fatalf("PoolStatuses = %+v, want one status with 2 nodes", got)
	}
	if cpu := got[0].Resources[corev1.ResourceCPU]; cpu.String() != "4" {
		t.Errorf("cpu in use %s, want 4 (the deleting claim does not count)", cpu.String())
	}
	pool.Status.NodeCount, pool.Status.Resources = got[0].Nodes, got[0].Resources
	if again := PoolStatuses([]*karpenter.NodePool{pool}, []*karpenter.NodeClaim{a, b, gone}); len(again) != 0 {
		t.Errorf("an unchanged status is written again: %+v", again)
	}
}

// Registering a Node leaves it as Karpenter's registration does: the NodeClaim's
// labels and taints, no unregistered taint, Karpenter's termination finalizer and
// an owner reference to the NodeClaim (once, however often it is applied).
func TestRegistrationAsKarpenterLeavesANode(t *testing.T) {
	nc := claim(karpenter.ConditionLaunched)
	nc.UID = "6b0c2b1e-1f0a-4d0e-9d55-2f6d7f0e9a11"
	n := Registered(nc, readyNode())
	n = Registered(nc, n)
	if len(n.Spec.Taints) != 0 || n.Labels[karpenter.NodeClaimLabelKey] != nc.Name || n.Labels[karpenter.NodeRegisteredLabelKey] != "true" {
		t.Errorf("taints %v, labels %v", n.Spec.Taints, n.Labels)
	}
	if len(n.Finalizers) != 1 || n.Finalizers[0] != karpenter.TerminationFinalizer {
		t.Errorf("finalizers %v, want [%s]", n.Finalizers, karpenter.TerminationFinalizer)
	}
	if len(n.OwnerReferences) != 1 {
		t.Fatalf("owner references %+v, want one to the NodeClaim", n.OwnerReferences)
	}
	o := n.OwnerReferences[0]
	if o.APIVersion != "karpenter.sh/v1" || o.Kind != "NodeClaim" || o.Name != nc.Name || o.UID != nc.UID || o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion || o.Controller != nil {
		t.Errorf("owner reference %+v", o)
	}
	// A NodeClaim not yet stored has no UID: no reference (the API server refuses one without).
	nc.UID = ""
	if n := Registered(nc, readyNode()); len(n.OwnerReferences) != 0 {
		t.Errorf("owner reference without a UID: %+v", n.OwnerReferences)
	}
}
