package packertest

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
	"github.com/joiner-autoscaler/joiner/shared/quantity"
)

// hostile gives every every-th pending pod of a random cluster its own first
// container asking for the quantities given (those that parse), as requests, or as
// limits alone (which stand in for requests).
func hostile(snap *packer.Snapshot, every int, asLimits bool, amounts map[corev1.ResourceName]string) int {
	changed := 0
	for i, p := range snap.Pods {
		if i%every != 0 || len(p.Spec.Containers) == 0 {
			continue
		}
		cp := p.DeepCopy()
		c := &cp.Spec.Containers[0]
		list := corev1.ResourceList{}
		for name, s := range amounts {
			if q, err := resource.ParseQuantity(s); err == nil {
				list[name] = q
			}
		}
		if asLimits {
			c.Resources = corev1.ResourceRequirements{Limits: list}
		} else {
			c.Resources.Requests = list
		}
		snap.Pods[i] = cp
		changed++
	}
	return changed
}

// judge plans snap and fails on anything the independent checker finds (a pod
// placed where its requests exceed the node's allocatable first of all) and on a
// pod with an out-of-range quantity that was placed at all.
func judge(t *testing.T, snap *packer.Snapshot, what string) {
	t.Helper()
	plan := packer.Solve(snap, packer.Options{})
	if errs := check.Plan(snap, plan, snap.Catalog); len(errs) > 0 {
		var b strings.Builder
		for i, e := range errs {
			if i == 5 {
				fmt.Fprintf(&b, "\n  ... %d more", len(errs)-5)
				break
			}
			fmt.Fprintf(&b, "\n  %v", e)
		}
		t.Fatalf("%s: %d checker errors:%s", what, len(errs), b.String())
	}
	refused := map[string]bool{}
	for _, u := range plan.Unschedulable {
		refused[u.Pod] = true
	}
	for _, p := range snap.Pods {
		if msg := quantity.PodProblem(p); msg != "" && !refused[check.PodKey(p)] {
			t.Fatalf("%s: pod %s was placed although %s", what, check.PodKey(p), msg)
		}
	}
}

// hostileAmounts are the values issue 15 found read as 0 or wrapped, and the edges
// around the bound.
var hostileAmounts = []string{"1e18", "1e400", "9300000000000000", "-1", "-1e400", "9007199254740", "9007199254741",
	"8Pi", "8193Ti", "0", "0.0001", "1m", "9223372036854775807", "9223372036854775808", "1e-400", "7.5", "64Gi", "250m"}

// TestPropertyHostileRequests: whatever a pod asks for, a plan never places it
// where its requests exceed the node's allocatable, and a pod whose quantities the
// engine cannot count is never placed.
func TestPropertyHostileRequests(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		for i, cpu := range hostileAmounts {
			mem := hostileAmounts[(i*7+int(seed))%len(hostileAmounts)]
			gpu := hostileAmounts[(i*5+int(seed)*3)%len(hostileAmounts)]
			snap := workload.Random(seed, 60)
			amounts := map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, "nvidia.com/gpu": gpu}
			if hostile(snap, 1+i%4, i%3 == 0, amounts) == 0 {
				continue
			}
			judge(t, snap, fmt.Sprintf("seed %d, cpu %s, memory %s, gpu %s", seed, cpu, mem, gpu))
		}
	}
}

// FuzzPlanFits is TestPropertyHostileRequests on any input: a random cluster (by
// seed) whose pods ask for arbitrary quantity strings.
func FuzzPlanFits(f *testing.F) {
	for i, a := range hostileAmounts {
		f.Add(uint8(i), a, hostileAmounts[(i+3)%len(hostileAmounts)], hostileAmounts[(i+7)%len(hostileAmounts)], uint8(i%4), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, seed uint8, cpu, mem, gpu string, every uint8, asLimits bool) {
		snap := workload.Random(int64(seed%32)+1, 40)
		amounts := map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, "nvidia.com/gpu": gpu}
		if hostile(snap, 1+int(every%4), asLimits, amounts) == 0 {
			return
		}
		judge(t, snap, fmt.Sprintf("seed %d, cpu %q, memory %q, gpu %q", seed%32+1, cpu, mem, gpu))
	})
}
