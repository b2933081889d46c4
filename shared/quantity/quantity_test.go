package quantity

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestProblem(t *testing.T) {
	for _, tc := range []struct {
		name corev1.ResourceName
		q    string
		want string // "" in range, else a part of the message
	}{
		{corev1.ResourceCPU, "1e18", "out of range: at most 9007199254740"},
		{corev1.ResourceCPU, "9300000000000000", "out of range"}, // wraps negative in millicores
		{corev1.ResourceCPU, "9007199254740", ""},
		{corev1.ResourceCPU, "9007199254741", "out of range"},
		{corev1.ResourceCPU, "1m", ""},
		{corev1.ResourceCPU, "-1", "must not be negative, got -1"},
		{corev1.ResourceMemory, "1e400", "out of range: at most 8Pi"},
		{corev1.ResourceMemory, "8Pi", ""},
		{corev1.ResourceMemory, "8193Ti", "out of range"},
		{corev1.ResourceMemory, "1e18", "out of range"},
		{corev1.ResourceEphemeralStorage, "1e16", "out of range: at most 8Pi"},
		{"nvidia.com/gpu", "9007199254740993", "out of range: at most 9007199254740992"},
		{"nvidia.com/gpu", "8", ""},
		{corev1.ResourcePods, "-3", "must not be negative"},
	} {
		got := Problem(tc.name, resource.MustParse(tc.q))
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Problem(%s, %s) = %q, want %q", tc.name, tc.q, got, tc.want)
		}
	}
}

func TestPodSpecNamesTheField(t *testing.T) {
	big := resource.MustParse("5e12") // in range alone, not twice
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1e400")}}}},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: big}}},
			{Name: "b", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: big}}},
		},
		Overhead: corev1.ResourceList{"example.com/dongle": resource.MustParse("-1")},
	}
	var got []string
	PodSpec(spec, func(field string, name corev1.ResourceName, msg string) {
		got = append(got, field+" "+string(name)+": "+msg)
	})
	want := []string{
		"initContainers[0].resources.limits memory: 10e399 is out of range",
		"overhead example.com/dongle: must not be negative",
		" cpu: the pod's containers together ask for more than 9007199254740",
		// memory's total is not reported again: its one entry already is.
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
	if p := PodProblem(&corev1.Pod{Spec: *spec}); !strings.HasPrefix(p, "spec.initContainers[0].resources.limits.memory: 10e399 is out of range") {
		t.Errorf("PodProblem = %q", p)
	}
	if p := PodProblem(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ok"}}}}); p != "" {
		t.Errorf("PodProblem of a pod without requests = %q", p)
	}
}

func BenchmarkPodProblem(b *testing.B) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}}}}}
	b.ReportAllocs()
	for b.Loop() {
		if PodProblem(pod) != "" {
			b.Fatal("in-range pod refused")
		}
	}
}
