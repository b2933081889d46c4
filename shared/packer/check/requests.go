package check

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodRequests computes what a pod asks the scheduler for, written from Kubernetes'
// documented rule rather than shared with the engine (which uses facts.PodRequests,
// built on k8s.io/component-helpers), so that a bug in one is caught by the other:
//
//	max( Σ app containers + Σ sidecars,
//	     max over init containers i of (request of i + sidecars started before i) )
//	+ pod overhead
//
// A sidecar is an init container with restartPolicy Always. A container that sets
// a limit but no request for a resource requests its limit (API defaulting, which
// manifests read from files have not been through). Pod-level resources
// (spec.resources), when set, replace the container sum for the resources they name.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addTo(out, containerRequests(&pod.Spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{}
	initPeak := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := containerRequests(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			// A sidecar keeps running next to the app containers and every later
			// init container.
			addTo(out, req)
			addTo(sidecars, req)
			maxInto(initPeak, sidecars)
			continue
		}
		during := corev1.ResourceList{}
		addTo(during, req)
		addTo(during, sidecars)
		maxInto(initPeak, during)
	}
	maxInto(out, initPeak)
	if pod.Spec.Resources != nil {
		for name, q := range pod.Spec.Resources.Requests {
			out[name] = q.DeepCopy()
		}
		for name, q := range pod.Spec.Resources.Limits {
			if _, ok := pod.Spec.Resources.Requests[name]; !ok {
				out[name] = q.DeepCopy()
			}
		}
	}
	addTo(out, pod.Spec.Overhead)
	return out
}

func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range c.Resources.Requests {
		out[name] = q.DeepCopy()
	}
	for name, q := range c.Resources.Limits {
		if _, ok := out[name]; !ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

func addTo(dst, src corev1.ResourceList) {
	for name, q := range src {
		cur, ok := dst[name]
		if !ok {
			dst[name] = q.DeepCopy()
			continue
		}
		cur.Add(q)
		dst[name] = cur
	}
}

func maxInto(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}

// amount returns a quantity in thousandths for cpu and in units otherwise, so that
// fit checks compare integers as Kubernetes rounds them. Only for quantities
// inInt64 says fit.
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// inInt64 reports whether amount can represent q: past it MilliValue and Value
// give 0 or wrap, and a pod asking for 1e18 cores would seem to fit anywhere.
func inInt64(name corev1.ResourceName, q resource.Quantity) bool {
	limit := int64(math.MaxInt64)
	if name == corev1.ResourceCPU {
		limit /= 1000
	}
	return q.CmpInt64(limit) <= 0 && q.CmpInt64(-limit) >= 0
}

// exceeds reports whether q is more than a in the units Kubernetes compares; past
// int64 the exact values are compared (rounding a thousandth no longer matters).
func exceeds(name corev1.ResourceName, q, a resource.Quantity) bool {
	if inInt64(name, q) && inInt64(name, a) {
		return amount(name, q) > amount(name, a)
	}
	return q.Cmp(a) > 0
}

// negativeQuantity reports whether any amount a pod states is negative: the API
// server refuses such a pod, and so may a plan.
func negativeQuantity(p *corev1.Pod) bool {
	neg := func(l corev1.ResourceList) bool {
		for _, q := range l {
			if q.Sign() < 0 {
				return true
			}
		}
		return false
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if neg(cs[i].Resources.Requests) || neg(cs[i].Resources.Limits) {
				return true
			}
		}
	}
	return neg(p.Spec.Overhead) || p.Spec.Resources != nil && (neg(p.Spec.Resources.Requests) || neg(p.Spec.Resources.Limits))
}
