package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/joiner-autoscaler/joiner/shared/facts"
)

func unschedulable(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
}

func TestHandlerAddsPendingAndDropsTheRest(t *testing.T) {
	b := NewBatcher(clocktesting.NewFakeClock(t0), time.Second, 10*time.Second, nil)
	var logs strings.Builder
	h := &podHandler{batcher: b, log: slog.New(slog.NewJSONHandler(&logs, nil))}

	h.observe(unschedulable("a"))
	h.observe(unschedulable("b"))
	bad := unschedulable("bad")
	bad.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}}}}
	h.observe(bad) // skipped with a warning, never a crash
	// The API server bounds no quantity: one past the engine's int64 arithmetic is
	// refused here too, rather than sent to read as 0 cores.
	huge := unschedulable("huge")
	huge.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1e18")}}}}
	h.observe(huge)
	h.observe("not a pod")        // likewise
	h.observe((*corev1.Pod)(nil)) // a nil pod must not stop the watch
	bound := unschedulable("b")
	bound.Spec.NodeName = "n1"
	h.observe(bound) // b got scheduled
	h.deleted(cache.DeletedFinalStateUnknown{Key: "default/a", Obj: unschedulable("a")})
	h.observe(unschedulable("c"))

	b.mu.Lock()
	got := b.takeLocked()
	b.mu.Unlock()
	if len(got) != 1 || got[0].Name != "c" {
		t.Fatalf("batch = %v, want [c]", names(got))
	}
	for _, want := range []string{`"pod":"default/bad"`, "containers[0].requests.cpu: must not be negative", `"pod":"default/huge"`, "containers[0].requests.cpu: 1e18 is out of range", "not a pod"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

func TestSlimPodKeepsWhatThePendingCheckAndEventNeed(t *testing.T) {
	p := unschedulable("p")
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	p.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 4096)}
	p.Spec.Containers = []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
	obj, err := slimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	s := obj.(*corev1.Pod)
	if s.ManagedFields != nil || s.Annotations != nil || s.Spec.Containers[0].Env != nil {
		t.Fatal("slimPod kept fields the forwarder never reads")
	}
	if !facts.IsPending(s) || s.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" {
		t.Fatal("slimPod dropped what the forwarder needs")
	}
}
