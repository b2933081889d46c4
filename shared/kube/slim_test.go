package kube

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func replica(name, cpu string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", GenerateName: "web-7d9-",
			Labels:          map[string]string{"app": "web", "pod-template-hash": "7d9"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9", UID: "rs-1"}}},
		Spec: corev1.PodSpec{
			NodeName: "node-a",
			Containers: []corev1.Container{{Name: "app", Image: "shop/web:1", Env: []corev1.EnvVar{{Name: "POD", Value: name}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
			Tolerations: []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}},
		},
		Status: corev1.PodStatus{PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func TestReplicasShareWhatTheyHoldAlike(t *testing.T) {
	page := []corev1.Pod{replica("web-7d9-a", "500m"), replica("web-7d9-b", "500m"), replica("web-7d9-c", "2")}
	pods := podPtrs(page, newSharer())
	a, b, c := pods[0], pods[1], pods[2]
	same := func(what string, x, y any) {
		t.Helper()
		if reflect.ValueOf(x).Pointer() != reflect.ValueOf(y).Pointer() {
			t.Errorf("%s not shared between replicas", what)
		}
	}
	same("labels", a.Labels, b.Labels)
	same("labels of a resized replica", a.Labels, c.Labels)
	same("containers", a.Spec.Containers, b.Spec.Containers)
	same("owner references", a.OwnerReferences, b.OwnerReferences)
	same("tolerations", a.Spec.Tolerations, b.Spec.Tolerations)
	same("affinity", a.Spec.Affinity, b.Spec.Affinity)
	// A pod resized in place asks for another CPU than its template: its own.
	if reflect.ValueOf(a.Spec.Containers).Pointer() == reflect.ValueOf(c.Spec.Containers).Pointer() {
		t.Error("a replica with other requests shares the first one's containers")
	}
	if got := c.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(); got != 2000 {
		t.Errorf("resized replica asks for %dm CPU, want 2000m", got)
	}
	if a.Spec.Containers[0].Env != nil || a.Status.PodIP != "" {
		t.Errorf("not slimmed: env %v, pod IP %q", a.Spec.Containers[0].Env, a.Status.PodIP)
	}
	// Appending to a shared slice must copy, not write into the other replica's.
	if cap(a.Spec.Tolerations) != len(a.Spec.Tolerations) {
		t.Errorf("shared tolerations have spare capacity %d > %d", cap(a.Spec.Tolerations), len(a.Spec.Tolerations))
	}
	grown := append(a.Spec.Tolerations, corev1.Toleration{Key: "gpu"})
	if len(b.Spec.Tolerations) != 1 || &grown[0] == &b.Spec.Tolerations[0] {
		t.Error("appending to one replica's tolerations reached another's")
	}
}
