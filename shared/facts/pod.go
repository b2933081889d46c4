package facts

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// DaemonSetRef returns the owner reference naming the DaemonSet that owns the
// pod, or nil. Any reference to an apps DaemonSet counts, whether or not it is
// marked controller, as Karpenter's IsOwnedByDaemonSet has it (a reference
// without apiVersion, which the API server would refuse, or to a DaemonSet-like
// kind of another group does not).
func DaemonSetRef(p *corev1.Pod) *metav1.OwnerReference {
	for i := range p.OwnerReferences {
		o := &p.OwnerReferences[i]
		if o.Kind == "DaemonSet" && strings.HasPrefix(o.APIVersion, "apps/") {
			return o
		}
	}
	return nil
}

// IsDaemonSetPod reports whether a DaemonSet owns the pod (see DaemonSetRef). Its
// pod goes with its node: it needs no new home when the node goes, no node is
// launched for it, and the engine counts it as its DaemonSet's overhead.
func IsDaemonSetPod(p *corev1.Pod) bool { return DaemonSetRef(p) != nil }

// IsMirrorPod reports whether the pod is the API server's mirror of a static pod,
// which the kubelet runs from a file: it carries the kubernetes.io/config.mirror
// annotation (what kubectl drain looks at) or a Node as owner (what Karpenter looks
// at; kubelets set both). It cannot be evicted and goes with its node.
func IsMirrorPod(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "Node" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// IsReschedulable reports whether the pod needs a new home when its node goes
// (what consolidation must fit elsewhere and what an interruption must replace):
// an active pod that is neither a DaemonSet's nor a mirror pod, as Karpenter's
// IsReschedulable. Finished pods need no home and terminating ones are leaving.
func IsReschedulable(p *corev1.Pod) bool {
	return IsActive(p) && !IsDaemonSetPod(p) && !IsMirrorPod(p)
}

// IsPending reports whether the scheduler gave up on the pod for lack of capacity
// and Joiner should provision for it, as Karpenter's IsProvisionable: not bound,
// not finished or terminating, not nominated to a node (waiting on a preemption or
// placed there by Joiner's plan), not a DaemonSet's or a mirror pod, and
// PodScheduled=False with reason Unschedulable. A pod the scheduler has not judged
// yet, or gated, is not pending.
func IsPending(p *corev1.Pod) bool {
	return p.Status.NominatedNodeName == "" && Unschedulable(p)
}

// IsNominated reports whether p waits, unbound and alive, on its nominated node.
func IsNominated(p *corev1.Pod) bool {
	return p.Status.NominatedNodeName != "" && p.Spec.NodeName == "" && IsActive(p)
}

// Unschedulable is IsPending but for the nomination: a pod nominated to a node that
// is gone is one nothing holds room for any more.
func Unschedulable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || !IsActive(p) || IsDaemonSetPod(p) || IsMirrorPod(p) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

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

// HostPort is a host port a pod binds on its node.
type HostPort struct {
	Protocol corev1.Protocol
	Port     int32
}

// ContainerHostPort is the host port a container port binds, false when it binds
// none. A port without a protocol is TCP, as the API server defaults it: manifests
// read from files have not been through that defaulting.
func ContainerHostPort(port corev1.ContainerPort) (HostPort, bool) {
	if port.HostPort <= 0 {
		return HostPort{}, false
	}
	proto := port.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	return HostPort{proto, port.HostPort}, true
}

// HostPorts lists the host ports a pod spec binds, in spec order, init
// containers' too: a placement errs on the side of a clash.
func HostPorts(spec *corev1.PodSpec) []HostPort {
	var out []HostPort
	for _, cs := range [2][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			for _, port := range cs[i].Ports {
				if hp, ok := ContainerHostPort(port); ok {
					out = append(out, hp)
				}
			}
		}
	}
	return out
}
