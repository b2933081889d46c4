// Package quantity bounds the resource quantities Joiner reads from people and
// events (manifests, Pending Pods events, catalogs, the pods the engine is given).
//
// resource.Quantity holds any decimal, but the packing engine counts in int64:
// millicores for cpu, whole units (bytes, devices) for everything else. Past int64
// the conversion silently gives 0 ("1e18" cores, "1e400" bytes) or wraps negative
// ("9300000000000000" cores is past int64 in millicores), and a pod that asks for
// more than any machine has would be packed as if it asked for nothing. Every
// decoder calls [Problem] (or [PodSpec]) so such a value is an error naming its
// field instead.
package quantity

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Max is the largest amount Joiner accepts, in the engine's units: 2^53
// millicores of cpu (about 9×10^12 cores), 2^53 bytes (8 PiB) of memory or
// storage, 2^53 devices. It is far past any machine, exact in a float64 (the
// lower-bound solver's arithmetic), and 1,024 such amounts still sum within int64.
const Max int64 = 1 << 53

var (
	maxMilli = resource.NewMilliQuantity(Max, resource.DecimalSI)
	maxUnits = resource.NewQuantity(Max, resource.BinarySI)
)

// Milli reports whether the engine counts name in thousandths (cpu) rather than
// whole units.
func Milli(name corev1.ResourceName) bool { return name == corev1.ResourceCPU }

// Problem says what is wrong with q as an amount of name, or "" when it is in
// range: negative, or larger than Max in the engine's units.
func Problem(name corev1.ResourceName, q resource.Quantity) string {
	if q.Sign() < 0 {
		return fmt.Sprintf("must not be negative, got %s", q.String())
	}
	limit := maxUnits
	if Milli(name) {
		limit = maxMilli
	}
	if q.Cmp(*limit) > 0 {
		return fmt.Sprintf("%s is out of range: at most %s (no machine has more; larger values would overflow the engine's arithmetic)", q.String(), maxString(name))
	}
	return ""
}

// maxString writes Max in the resource's usual unit.
func maxString(name corev1.ResourceName) string {
	switch name {
	case corev1.ResourceCPU:
		return fmt.Sprint(Max / 1000)
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return "8Pi"
	}
	return fmt.Sprint(Max)
}

// Named is one out-of-range entry of a resource list.
type Named struct {
	Name    corev1.ResourceName
	Message string
}

// List checks every entry of l, in name order.
func List(l corev1.ResourceList) []Named {
	var out []Named
	for name, q := range l {
		if msg := Problem(name, q); msg != "" {
			out = append(out, Named{name, msg})
		}
	}
	slices.SortFunc(out, func(a, b Named) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}

// PodSpec checks every quantity the engine reads from a pod spec (containers' and
// init containers' requests and limits, which stand in for missing requests, the
// overhead and pod-level resources), calling report with the field holding the
// list, relative to the spec ("containers[0].resources.requests"), the resource
// name and the message. Amounts in range can still add up past it, so it also
// bounds what all of them together could ask for (field "": the pod's total, an
// over-estimate that only matters near Max).
func PodSpec(spec *corev1.PodSpec, report func(field string, name corev1.ResourceName, msg string)) {
	// This runs on every pod the engine is given: nothing is formatted or
	// allocated unless something is wrong.
	var sums []sum
	var reported []corev1.ResourceName
	check := func(field func() string, l, count corev1.ResourceList) {
		for name, q := range l {
			if Problem(name, q) != "" {
				for _, p := range List(l) { // again, in name order
					report(field(), p.Name, p.Message)
					reported = append(reported, p.Name)
				}
				break
			}
		}
		for name, q := range count {
			sums = add(sums, name, q.AsApproximateFloat64())
		}
	}
	containers := func(kind string, cs []corev1.Container) {
		for i := range cs {
			r := &cs[i].Resources
			check(func() string { return fmt.Sprintf("%s[%d].resources.requests", kind, i) }, r.Requests, r.Requests)
			if len(r.Limits) > 0 {
				check(func() string { return fmt.Sprintf("%s[%d].resources.limits", kind, i) }, r.Limits, missing(r.Limits, r.Requests))
			}
		}
	}
	containers("initContainers", spec.InitContainers)
	containers("containers", spec.Containers)
	check(func() string { return "overhead" }, spec.Overhead, spec.Overhead)
	if r := spec.Resources; r != nil {
		check(func() string { return "resources.requests" }, r.Requests, r.Requests)
		check(func() string { return "resources.limits" }, r.Limits, missing(r.Limits, r.Requests))
	}
	slices.SortFunc(sums, func(a, b sum) int { return strings.Compare(string(a.name), string(b.name)) })
	for _, t := range sums {
		limit := float64(Max)
		if Milli(t.name) {
			limit /= 1000
		}
		if t.total > limit && !slices.Contains(reported, t.name) {
			report("", t.name, fmt.Sprintf("the pod's containers together ask for more than %s allows (each amount is in range, their sum is not)", maxString(t.name)))
		}
	}
}

// sum is a running total of one resource over a pod's lists.
type sum struct {
	name  corev1.ResourceName
	total float64
}

func add(sums []sum, name corev1.ResourceName, v float64) []sum {
	for i := range sums {
		if sums[i].name == name {
			sums[i].total += v
			return sums
		}
	}
	return append(sums, sum{name, v})
}

// missing returns the entries of limits that requests lacks (a limit without a
// request is the request, as API defaulting makes it).
func missing(limits, requests corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for name, q := range limits {
		if _, ok := requests[name]; !ok {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}

// PodProblem is PodSpec's first problem as one sentence ("" when there is none),
// for callers that reject a whole pod (the engine's input boundary).
func PodProblem(pod *corev1.Pod) string {
	var first string
	PodSpec(&pod.Spec, func(field string, name corev1.ResourceName, msg string) {
		if first == "" {
			if field == "" {
				first = fmt.Sprintf("%s: %s", name, msg)
			} else {
				first = fmt.Sprintf("spec.%s.%s: %s", field, name, msg)
			}
		}
	})
	return first
}
