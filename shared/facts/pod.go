package facts

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// PodRequests returns what a pod asks the scheduler for, by Kubernetes' rule
// (k8s.io/component-helpers/resource.PodRequests, as kube-scheduler computes it):
// the larger of the sum of app containers plus sidecars (init containers with
// restartPolicy Always) and the largest init container with the sidecars started
// before it; pod-level resources where set; plus pod overhead. A container that
// sets limits but no requests requests its limits, as API defaulting does:
// manifests read from files have not been through that defaulting. The result
// does not count the pod itself (the "pods" resource): callers that track pod
// slots add one per pod.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	if needsLimitDefaulting(pod) {
		pod = withDefaultedRequests(pod)
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// RequestsAreContainerSum reports whether PodRequests(pod) is simply the sum of
// its app containers' requests (no init containers, overhead, pod-level resources
// or limits standing in for requests), which lets a hot path add them up without
// the general rule's allocations.
func RequestsAreContainerSum(pod *corev1.Pod) bool {
	return len(pod.Spec.InitContainers) == 0 && len(pod.Spec.Overhead) == 0 && pod.Spec.Resources == nil && !needsLimitDefaulting(pod)
}

func needsLimitDefaulting(pod *corev1.Pod) bool {
	check := func(cs []corev1.Container) bool {
		for i := range cs {
			for n := range cs[i].Resources.Limits {
				if _, ok := cs[i].Resources.Requests[n]; !ok {
					return true
				}
			}
		}
		return false
	}
	return check(pod.Spec.Containers) || check(pod.Spec.InitContainers)
}

func withDefaultedRequests(pod *corev1.Pod) *corev1.Pod {
	p := *pod
	fix := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		copy(out, cs)
		for i := range out {
			if len(out[i].Resources.Limits) == 0 {
				continue
			}
			req := corev1.ResourceList{}
			for n, q := range out[i].Resources.Requests {
				req[n] = q
			}
			for n, q := range out[i].Resources.Limits {
				if _, ok := req[n]; !ok {
					req[n] = q
				}
			}
			out[i].Resources.Requests = req
		}
		return out
	}
	p.Spec.Containers = fix(pod.Spec.Containers)
	p.Spec.InitContainers = fix(pod.Spec.InitContainers)
	return &p
}

// IsTerminal reports whether the pod has finished (phase Succeeded or Failed): it
// holds no capacity and needs no home.
func IsTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// IsTerminating reports whether the pod is being deleted.
func IsTerminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// IsActive reports whether the pod is neither finished nor being deleted.
func IsActive(p *corev1.Pod) bool { return !IsTerminal(p) && !IsTerminating(p) }

// PodNamespace is the pod's namespace, "default" when unset (a manifest may leave
// it out; the API server fills it in).
func PodNamespace(p *corev1.Pod) string {
	if p.Namespace == "" {
		return "default"
	}
	return p.Namespace
}

// PodKey is namespace/name, the pod's name in plans, logs and Events.
func PodKey(p *corev1.Pod) string { return PodNamespace(p) + "/" + p.Name }

// DoNotDisrupt reports whether an object's annotations (a pod's, a Node's or a
// NodeClaim's) carry karpenter.sh/do-not-disrupt: "true", which forbids voluntary
// disruption. Any other value, "false" included, does not.
func DoNotDisrupt(annotations map[string]string) bool {
	return annotations[karpenter.DoNotDisruptAnnotation] == "true"
}

// PodBlocksDisruption reports whether the pod keeps its node from being disrupted
// voluntarily: it is annotated do-not-disrupt and has not finished.
func PodBlocksDisruption(p *corev1.Pod) bool {
	return !IsTerminal(p) && DoNotDisrupt(p.Annotations)
}
