package facts_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
)

// list parses "cpu=1,memory=1Gi"-style pairs.
func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func ctr(req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func sidecar(req corev1.ResourceList) corev1.Container {
	c := ctr(req, nil)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func TestPodRequests(t *testing.T) {
	cases := []struct {
		name string
		spec corev1.PodSpec
		want corev1.ResourceList
		// containerSum: RequestsAreContainerSum holds, so the hot path may add the
		// app containers up itself.
		containerSum bool
	}{
		{"app containers add up",
			corev1.PodSpec{Containers: []corev1.Container{ctr(list("cpu", "100m", "memory", "64Mi"), nil), ctr(list("cpu", "200m"), nil)}},
			list("cpu", "300m", "memory", "64Mi"), true},
		{"no requests at all", corev1.PodSpec{Containers: []corev1.Container{ctr(nil, nil)}}, list(), true},
		{"init container larger than the app containers wins",
			corev1.PodSpec{InitContainers: []corev1.Container{ctr(list("cpu", "2", "memory", "1Gi"), nil)},
				Containers: []corev1.Container{ctr(list("cpu", "500m"), nil), ctr(list("cpu", "250m"), nil)}},
			list("cpu", "2", "memory", "1Gi"), false},
		{"init container smaller than the app containers",
			corev1.PodSpec{InitContainers: []corev1.Container{ctr(list("cpu", "100m"), nil)},
				Containers: []corev1.Container{ctr(list("cpu", "500m"), nil)}},
			list("cpu", "500m"), false},
		{"sidecar runs next to the app containers",
			corev1.PodSpec{InitContainers: []corev1.Container{sidecar(list("cpu", "200m", "memory", "128Mi"))},
				Containers: []corev1.Container{ctr(list("cpu", "100m", "memory", "64Mi"), nil)}},
			list("cpu", "300m", "memory", "192Mi"), false},
		// The init container after a sidecar runs beside it: 200m + 1 > 300m.
		{"init container after a sidecar",
			corev1.PodSpec{InitContainers: []corev1.Container{sidecar(list("cpu", "200m")), ctr(list("cpu", "1"), nil)},
				Containers: []corev1.Container{ctr(list("cpu", "100m"), nil)}},
			list("cpu", "1200m"), false},
		// The init container before the sidecar never sees it: max(1, 300m).
		{"init container before a sidecar",
			corev1.PodSpec{InitContainers: []corev1.Container{ctr(list("cpu", "1"), nil), sidecar(list("cpu", "200m"))},
				Containers: []corev1.Container{ctr(list("cpu", "100m"), nil)}},
			list("cpu", "1"), false},
		{"overhead is added",
			corev1.PodSpec{Containers: []corev1.Container{ctr(list("cpu", "100m"), nil)}, Overhead: list("cpu", "250m", "memory", "120Mi")},
			list("cpu", "350m", "memory", "120Mi"), false},
		{"overhead on top of the init peak",
			corev1.PodSpec{InitContainers: []corev1.Container{ctr(list("cpu", "2"), nil)},
				Containers: []corev1.Container{ctr(list("cpu", "100m"), nil)}, Overhead: list("cpu", "250m")},
			list("cpu", "2250m"), false},
		{"limits stand in for missing requests",
			corev1.PodSpec{Containers: []corev1.Container{ctr(nil, list("cpu", "2", "memory", "1Gi"))}},
			list("cpu", "2", "memory", "1Gi"), false},
		{"a request below its limit stays",
			corev1.PodSpec{Containers: []corev1.Container{ctr(list("cpu", "1"), list("cpu", "2", "memory", "1Gi"))}},
			list("cpu", "1", "memory", "1Gi"), false},
		{"limits equal to requests keep the fast path",
			corev1.PodSpec{Containers: []corev1.Container{ctr(list("cpu", "1"), list("cpu", "1"))}},
			list("cpu", "1"), true},
		{"a sidecar's limits stand in for its requests",
			corev1.PodSpec{InitContainers: []corev1.Container{func() corev1.Container { c := sidecar(nil); c.Resources.Limits = list("cpu", "200m"); return c }()},
				Containers: []corev1.Container{ctr(list("cpu", "100m"), nil)}},
			list("cpu", "300m"), false},
		{"pod-level requests replace the container sum",
			corev1.PodSpec{Containers: []corev1.Container{ctr(list("cpu", "100m", "nvidia.com/gpu", "1"), nil)},
				Resources: &corev1.ResourceRequirements{Requests: list("cpu", "2")}},
			list("cpu", "2", "nvidia.com/gpu", "1"), false},
		{"extended resources",
			corev1.PodSpec{Containers: []corev1.Container{ctr(list("nvidia.com/gpu", "1"), nil), ctr(list("nvidia.com/gpu", "2"), nil)}},
			list("nvidia.com/gpu", "3"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tc.spec}
			before := pod.DeepCopy()
			got := facts.PodRequests(pod)
			if !equal(got, tc.want) {
				t.Errorf("PodRequests = %v, want %v", got, tc.want)
			}
			if !equal(got, check.PodRequests(pod)) {
				t.Errorf("PodRequests = %v, the independent checker says %v", got, check.PodRequests(pod))
			}
			if _, ok := got[corev1.ResourcePods]; ok {
				t.Errorf("PodRequests counts the pod itself: %v", got)
			}
			if got := facts.RequestsAreContainerSum(pod); got != tc.containerSum {
				t.Errorf("RequestsAreContainerSum = %v, want %v", got, tc.containerSum)
			}
			if !equalPods(pod, before) {
				t.Errorf("PodRequests changed its argument")
			}
		})
	}
}

func equal(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		if w, ok := b[n]; !ok || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func equalPods(a, b *corev1.Pod) bool {
	for i := range a.Spec.Containers {
		if !equal(a.Spec.Containers[i].Resources.Requests, b.Spec.Containers[i].Resources.Requests) {
			return false
		}
	}
	for i := range a.Spec.InitContainers {
		if !equal(a.Spec.InitContainers[i].Resources.Requests, b.Spec.InitContainers[i].Resources.Requests) {
			return false
		}
	}
	return true
}

func TestPodPhases(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		name                 string
		phase                corev1.PodPhase
		deleting             bool
		terminal, active     bool
		terminating, blocked bool // blocked: with do-not-disrupt it holds its node
	}{
		{"pending", corev1.PodPending, false, false, true, false, true},
		{"running", corev1.PodRunning, false, false, true, false, true},
		{"unknown", corev1.PodUnknown, false, false, true, false, true},
		{"no phase yet", "", false, false, true, false, true},
		{"succeeded", corev1.PodSucceeded, false, true, false, false, false},
		{"failed", corev1.PodFailed, false, true, false, false, false},
		{"running, being deleted", corev1.PodRunning, true, false, false, true, true},
		{"failed, being deleted", corev1.PodFailed, true, true, false, true, false},
	}
	for _, tc := range cases {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: tc.phase}}
		p.Annotations = map[string]string{"karpenter.sh/do-not-disrupt": "true"}
		if tc.deleting {
			p.DeletionTimestamp = &now
		}
		if got := facts.IsTerminal(p); got != tc.terminal {
			t.Errorf("%s: IsTerminal = %v, want %v", tc.name, got, tc.terminal)
		}
		if got := facts.IsTerminating(p); got != tc.terminating {
			t.Errorf("%s: IsTerminating = %v, want %v", tc.name, got, tc.terminating)
		}
		if got := facts.IsActive(p); got != tc.active {
			t.Errorf("%s: IsActive = %v, want %v", tc.name, got, tc.active)
		}
		if got := facts.PodBlocksDisruption(p); got != tc.blocked {
			t.Errorf("%s: PodBlocksDisruption = %v, want %v", tc.name, got, tc.blocked)
		}
	}
}

func TestDoNotDisrupt(t *testing.T) {
	cases := []struct {
		annotations map[string]string
		want        bool
	}{
		{nil, false},
		{map[string]string{}, false},
		{map[string]string{"karpenter.sh/do-not-disrupt": "true"}, true},
		{map[string]string{"karpenter.sh/do-not-disrupt": "false"}, false},
		{map[string]string{"karpenter.sh/do-not-disrupt": ""}, false},
		{map[string]string{"karpenter.sh/do-not-disrupt": "True"}, false}, // Karpenter compares with "true" exactly
		{map[string]string{"karpenter.sh/do-not-evict": "true"}, false},   // the pre-v1 name no longer counts
	}
	for _, tc := range cases {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
		if got := facts.DoNotDisrupt(pod.Annotations); got != tc.want {
			t.Errorf("pod annotated %v: DoNotDisrupt = %v, want %v", tc.annotations, got, tc.want)
		}
		if got := facts.PodBlocksDisruption(pod); got != tc.want {
			t.Errorf("running pod annotated %v: PodBlocksDisruption = %v, want %v", tc.annotations, got, tc.want)
		}
		if got := facts.DoNotDisrupt(node.Annotations); got != tc.want {
			t.Errorf("node annotated %v: DoNotDisrupt = %v, want %v", tc.annotations, got, tc.want)
		}
	}
}

func TestPodKey(t *testing.T) {
	cases := []struct{ ns, name, key, namespace string }{
		{"kube-system", "coredns-1", "kube-system/coredns-1", "kube-system"},
		{"", "web-0", "default/web-0", "default"}, // a manifest that leaves the namespace out
		{"default", "web-0", "default/web-0", "default"},
	}
	for _, tc := range cases {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: tc.name}}
		if got := facts.PodKey(p); got != tc.key {
			t.Errorf("PodKey(%q, %q) = %q, want %q", tc.ns, tc.name, got, tc.key)
		}
		if got := facts.PodNamespace(p); got != tc.namespace {
			t.Errorf("PodNamespace(%q) = %q, want %q", tc.ns, got, tc.namespace)
		}
	}
}

func TestHostPorts(t *testing.T) {
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9000, Protocol: corev1.ProtocolUDP}}}},
		Containers: []corev1.Container{
			{Name: "app", Ports: []corev1.ContainerPort{{ContainerPort: 8080}, {ContainerPort: 80, HostPort: 80}}},
			{Name: "sctp", Ports: []corev1.ContainerPort{{ContainerPort: 7, HostPort: 7, Protocol: corev1.ProtocolSCTP}}},
		},
	}
	want := []facts.HostPort{{Protocol: corev1.ProtocolUDP, Port: 9000}, {Protocol: corev1.ProtocolTCP, Port: 80}, {Protocol: corev1.ProtocolSCTP, Port: 7}}
	if got := facts.HostPorts(spec); !slices.Equal(got, want) {
		t.Errorf("HostPorts = %v, want %v", got, want)
	}
	if got := facts.HostPorts(&corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}); got != nil {
		t.Errorf("HostPorts of a pod without host ports = %v, want nil", got)
	}
}

func owner(apiVersion, kind string, controller *bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "o", UID: "uid-o", Controller: controller}
}

// ownership is every way a pod can be owned that the facts below tell apart.
var (
	yes, no   = true, false
	ownership = []struct {
		name        string
		refs        []metav1.OwnerReference
		annotations map[string]string
		daemonSet   bool
		mirror      bool
	}{
		{"bare pod", nil, nil, false, false},
		{"ReplicaSet", []metav1.OwnerReference{owner("apps/v1", "ReplicaSet", &yes)}, nil, false, false},
		{"StatefulSet", []metav1.OwnerReference{owner("apps/v1", "StatefulSet", &yes)}, nil, false, false},
		{"Job", []metav1.OwnerReference{owner("batch/v1", "Job", &yes)}, nil, false, false},
		{"DaemonSet controller", []metav1.OwnerReference{owner("apps/v1", "DaemonSet", &yes)}, nil, true, false},
		// Karpenter's IsOwnedByDaemonSet does not look at the controller flag.
		{"DaemonSet, not controller", []metav1.OwnerReference{owner("apps/v1", "DaemonSet", &no)}, nil, true, false},
		{"DaemonSet, flag unset", []metav1.OwnerReference{owner("apps/v1", "DaemonSet", nil)}, nil, true, false},
		{"DaemonSet after another owner", []metav1.OwnerReference{owner("v1", "ConfigMap", nil), owner("apps/v1", "DaemonSet", &yes)}, nil, true, false},
		// Another group's DaemonSet (OpenKruise's Advanced DaemonSet) is not the
		// apps DaemonSet the engine counts as overhead, nor for Karpenter.
		{"other group's DaemonSet", []metav1.OwnerReference{owner("apps.kruise.io/v1alpha1", "DaemonSet", &yes)}, nil, false, false},
		{"DaemonSet without apiVersion", []metav1.OwnerReference{owner("", "DaemonSet", &yes)}, nil, false, false},
		{"mirror by annotation", nil, map[string]string{corev1.MirrorPodAnnotationKey: "hash"}, false, true},
		{"mirror by Node owner", []metav1.OwnerReference{owner("v1", "Node", &yes)}, nil, false, true},
		{"mirror by both", []metav1.OwnerReference{owner("v1", "Node", &yes)}, map[string]string{corev1.MirrorPodAnnotationKey: "hash"}, false, true},
		{"config hash only (not a mirror)", nil, map[string]string{"kubernetes.io/config.hash": "hash"}, false, false},
	}
)

func TestOwnership(t *testing.T) {
	for _, tc := range ownership {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: tc.refs, Annotations: tc.annotations}}
		if got := facts.IsDaemonSetPod(p); got != tc.daemonSet {
			t.Errorf("%s: IsDaemonSetPod = %v, want %v", tc.name, got, tc.daemonSet)
		}
		if ref := facts.DaemonSetRef(p); (ref != nil) != tc.daemonSet || (ref != nil && ref.Kind != "DaemonSet") {
			t.Errorf("%s: DaemonSetRef = %+v", tc.name, ref)
		}
		if got := facts.IsMirrorPod(p); got != tc.mirror {
			t.Errorf("%s: IsMirrorPod = %v, want %v", tc.name, got, tc.mirror)
		}
	}
}

func TestIsReschedulable(t *testing.T) {
	now := metav1.Now()
	for _, tc := range ownership {
		for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed} {
			for _, deleting := range []bool{false, true} {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: tc.refs, Annotations: tc.annotations},
					Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: phase}}
				if deleting {
					p.DeletionTimestamp = &now
				}
				// DaemonSet and mirror pods go with the node, finished pods need no
				// home, terminating ones are leaving.
				want := !tc.daemonSet && !tc.mirror && !deleting && phase != corev1.PodSucceeded && phase != corev1.PodFailed
				if got := facts.IsReschedulable(p); got != want {
					t.Errorf("%s, %s, deleting=%v: IsReschedulable = %v, want %v", tc.name, phase, deleting, got, want)
				}
			}
		}
	}
}

func TestIsPending(t *testing.T) {
	now := metav1.Now()
	unschedulable := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	cases := []struct {
		name string
		mut  func(*corev1.Pod)
		want bool
	}{
		{"unschedulable", nil, true},
		{"bound", func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, false},
		{"terminating", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, false},
		{"preempting (nominated)", func(p *corev1.Pod) { p.Status.NominatedNodeName = "n1" }, false},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false},
		{"not judged yet", func(p *corev1.Pod) { p.Status.Conditions = nil }, false},
		{"scheduling gated", func(p *corev1.Pod) { p.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated }, false},
		{"scheduler error", func(p *corev1.Pod) { p.Status.Conditions[0].Reason = "SchedulerError" }, false},
		{"scheduled", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionTrue }, false},
		{"another condition first", func(p *corev1.Pod) {
			p.Status.Conditions = append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}, p.Status.Conditions...)
		}, true},
		{"ReplicaSet pod", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{owner("apps/v1", "ReplicaSet", &yes)} }, true},
		{"DaemonSet pod", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{owner("apps/v1", "DaemonSet", &yes)} }, false},
		{"DaemonSet pod, not controller", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{owner("apps/v1", "DaemonSet", &no)} }, false},
		{"mirror pod", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{owner("v1", "Node", &yes)} }, false},
	}
	for _, tc := range cases {
		if got := facts.IsPending(unschedulable(tc.mut)); got != tc.want {
			t.Errorf("%s: IsPending = %v, want %v", tc.name, got, tc.want)
		}
	}
}
