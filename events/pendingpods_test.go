package events

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

func quantities(t *testing.T, l corev1.ResourceList) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

// The sample's pods exercise the three request forms: plain containers; containers
// with a sidecar, a heavier init container and overhead; and a precomputed map.
func TestEffectiveRequests(t *testing.T) {
	ev := mustDecode(t, readFile(t, "pending-pods.json")).(*PendingPods)
	want := []map[string]string{
		{"cpu": "100m", "memory": "70Mi"},
		// Init phase: migrate 2 CPU + the sidecar started before it (50m) = 2050m beats
		// the running phase 1 + 50m; memory: running 1Gi + 64Mi beats 512Mi + 64Mi.
		// Overhead (10m, 16Mi) on top.
		{"cpu": "2060m", "memory": "1104Mi"},
		{"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
	}
	for i, p := range ev.Detail.Pods {
		got := quantities(t, p.EffectiveRequests())
		if len(got) != len(want[i]) {
			t.Errorf("%s: %v, want %v", p.Key(), got, want[i])
			continue
		}
		for k, v := range want[i] {
			if q := p.EffectiveRequests()[corev1.ResourceName(k)]; q.Cmp(resource.MustParse(v)) != 0 {
				t.Errorf("%s: %s = %s, want %s", p.Key(), k, q.String(), v)
			}
		}
		// ToPod feeds the packer: the scheduler's formula on it gives the same answer.
		viaPod := resourcehelper.PodRequests(p.ToPod(), resourcehelper.PodResourcesOptions{})
		if !semantic.DeepEqual(viaPod, p.EffectiveRequests()) {
			t.Errorf("%s: PodRequests(ToPod) = %v, EffectiveRequests = %v", p.Key(), viaPod, p.EffectiveRequests())
		}
	}
}

// FromPod then ToPod keeps every scheduling-relevant field.
func TestFromPodToPod(t *testing.T) {
	src := realisticPod(42)
	src.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Mi")}
	src.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	pp := FromPod(src)
	if err := pp.Validate(); err != nil {
		t.Fatal(err)
	}
	back := pp.ToPod()
	if back.Namespace != src.Namespace || back.Name != src.Name || back.UID != src.UID ||
		!semantic.DeepEqual(back.Labels, src.Labels) || *back.Spec.Priority != *src.Spec.Priority ||
		back.Spec.SchedulerName != src.Spec.SchedulerName ||
		!semantic.DeepEqual(back.Spec.NodeSelector, src.Spec.NodeSelector) ||
		!semantic.DeepEqual(back.Spec.Affinity, src.Spec.Affinity) ||
		!semantic.DeepEqual(back.Spec.Tolerations, src.Spec.Tolerations) ||
		!semantic.DeepEqual(back.Spec.TopologySpreadConstraints, src.Spec.TopologySpreadConstraints) ||
		!semantic.DeepEqual(back.Spec.Overhead, src.Spec.Overhead) ||
		!semantic.DeepEqual(back.Spec.Resources.Requests, src.Spec.Resources.Requests) ||
		back.OwnerReferences[0].Kind != "ReplicaSet" || !*back.OwnerReferences[0].Controller {
		t.Fatalf("round trip lost data:\n src %+v\nback %+v", src, back)
	}
	if got, want := resourcehelper.PodRequests(back, resourcehelper.PodResourcesOptions{}), resourcehelper.PodRequests(src, resourcehelper.PodResourcesOptions{}); !semantic.DeepEqual(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	if back.Status.Conditions[0].Message != src.Status.Conditions[0].Message {
		t.Errorf("reason %q", back.Status.Conditions[0].Message)
	}
	// FromPod copies: changing the result leaves the source alone.
	pp.Labels["app"] = "changed"
	pp.Affinity.NodeAffinity = nil
	if src.Labels["app"] == "changed" || src.Spec.Affinity.NodeAffinity == nil {
		t.Error("FromPod aliases the source pod")
	}
}

func TestValidatePendingPod(t *testing.T) {
	never := corev1.ContainerRestartPolicy("Never")
	p := PendingPod{InitContainers: []ContainerRequests{{Name: "i", RestartPolicy: &never}},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}}
	err := p.Validate()
	if err == nil {
		t.Fatal("invalid pod accepted")
	}
	for _, want := range []string{"namespace is missing", "name is missing", "uid is missing", "overhead.cpu: must not be negative", `restartPolicy "Never"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
