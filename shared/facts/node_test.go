package facts_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/facts"
)

func TestIsProtectedNode(t *testing.T) {
	taint := func(key string) []corev1.Taint {
		return []corev1.Taint{{Key: key, Effect: corev1.TaintEffectNoSchedule}}
	}
	cases := []struct {
		name   string
		labels map[string]string
		taints []corev1.Taint
		want   bool
	}{
		{"worker", map[string]string{"node-role.kubernetes.io/worker": ""}, nil, false},
		{"no role", nil, nil, false},
		{"control-plane label", map[string]string{"node-role.kubernetes.io/control-plane": ""}, nil, true},
		{"control-plane taint only", nil, taint("node-role.kubernetes.io/control-plane"), true},
		{"master label", map[string]string{"node-role.kubernetes.io/master": "true"}, nil, true},
		{"master taint only", nil, taint("node-role.kubernetes.io/master"), true},
		{"infra label", map[string]string{"node-role.kubernetes.io/infra": ""}, nil, true},
		{"infra taint only (NoExecute)", nil, []corev1.Taint{{Key: "node-role.kubernetes.io/infra", Effect: corev1.TaintEffectNoExecute}}, true},
		{"label and taint", map[string]string{"node-role.kubernetes.io/control-plane": ""}, taint("node-role.kubernetes.io/control-plane"), true},
		{"other taints", nil, append(taint("dedicated"), taint("karpenter.sh/disrupted")...), false},
		// A role's name as a label value or under another prefix is not the role.
		{"role as a value", map[string]string{"role": "control-plane"}, nil, false},
		{"similar key", map[string]string{"node-role.kubernetes.io/control-plane-ish": ""}, nil, false},
	}
	for _, tc := range cases {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}, Spec: corev1.NodeSpec{Taints: tc.taints}}
		if got := facts.IsProtectedNode(n); got != tc.want {
			t.Errorf("%s: IsProtectedNode = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNodeReady(t *testing.T) {
	cond := func(typ corev1.NodeConditionType, st corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: st}
	}
	cases := []struct {
		name  string
		conds []corev1.NodeCondition
		want  bool
	}{
		{"ready", []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue)}, true},
		{"not ready", []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse)}, false},
		{"unknown (kubelet stopped posting)", []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown)}, false},
		{"no conditions yet", nil, false},
		{"only other conditions", []corev1.NodeCondition{cond(corev1.NodeMemoryPressure, corev1.ConditionFalse), cond(corev1.NodeDiskPressure, corev1.ConditionTrue)}, false},
		{"ready after pressure conditions", []corev1.NodeCondition{cond(corev1.NodeMemoryPressure, corev1.ConditionTrue), cond(corev1.NodeReady, corev1.ConditionTrue)}, true},
	}
	for _, tc := range cases {
		n := &corev1.Node{Status: corev1.NodeStatus{Conditions: tc.conds}}
		if got := facts.NodeReady(n); got != tc.want {
			t.Errorf("%s: NodeReady = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSubtractPod(t *testing.T) {
	cases := []struct {
		name       string
		alloc, req corev1.ResourceList
		want       corev1.ResourceList
	}{
		{"room left", list("cpu", "4", "memory", "8Gi", "pods", "110"), list("cpu", "1500m", "memory", "1Gi"),
			list("cpu", "2500m", "memory", "7Gi", "pods", "109")},
		{"floored at zero", list("cpu", "1", "memory", "1Gi", "pods", "0"), list("cpu", "2", "memory", "2Gi"),
			list("cpu", "0", "memory", "0", "pods", "0")},
		{"names alloc lacks stay out", list("cpu", "4"), list("cpu", "1", "nvidia.com/gpu", "1"), list("cpu", "3")},
		{"a pod with no requests still takes a slot", list("cpu", "4", "pods", "2"), list(), list("cpu", "4", "pods", "1")},
	}
	for _, tc := range cases {
		alloc := tc.alloc.DeepCopy()
		facts.SubtractPod(alloc, tc.req)
		if !equal(alloc, tc.want) {
			t.Errorf("%s: %v - %v = %v, want %v", tc.name, tc.alloc, tc.req, alloc, tc.want)
		}
		for n, q := range alloc {
			if q.Sign() < 0 {
				t.Errorf("%s: %s went negative: %s", tc.name, n, q.String())
			}
		}
	}
	// Quantities are values: the request list is left as it was.
	req := list("cpu", "1")
	facts.SubtractPod(list("cpu", "4"), req)
	if q := req[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("SubtractPod changed the requests: %s", q.String())
	}
}
