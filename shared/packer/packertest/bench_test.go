package packertest

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// caseFacts are measured once per case, outside the timed loop: the lower bound,
// the checker's verdict and the peak heap of one Solve.
type caseFacts struct {
	bound     float64
	boundWhy  string
	errors    int
	peakHeap  uint64
	baseHeap  uint64
	firstPlan *packer.Plan
}

var (
	factsMu sync.Mutex
	facts   = map[string]*caseFacts{}
)

func factsFor(b *testing.B, name string, snap *packer.Snapshot) *caseFacts {
	factsMu.Lock()
	defer factsMu.Unlock()
	if f := facts[name]; f != nil {
		return f
	}
	f := &caseFacts{}
	f.bound, f.boundWhy = workload.LowerBound(snap)
	f.peakHeap, f.baseHeap = workload.PeakHeap(func() { f.firstPlan = packer.Solve(snap, packer.Options{}) })
	errs := check.Plan(snap, f.firstPlan, snap.Catalog)
	f.errors = len(errs)
	for i, e := range errs {
		if i == 3 {
			break
		}
		b.Logf("%s: checker: %v", name, e)
	}
	b.Logf("%s: bound $%.3f/h: %s", name, f.bound, f.boundWhy)
	facts[name] = f
	return f
}

// benchSolve times packer.Solve on snap and reports, besides ns/op and allocations:
// pods/s (in-process, the engine alone), nodes, cost in $/h, cost/bound (the plan's
// price over workload.LowerBound), unschedulable pods, checker errors and
// peak-heap-MiB — the largest HeapAlloc (live objects plus garbage not yet
// collected, input included) sampled every 100µs during one untimed Solve; B/op
// from -benchmem is the total allocated per Solve (TotalAlloc), a different figure.
func benchSolve(b *testing.B, name string, snap *packer.Snapshot) {
	f := factsFor(b, name, snap)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var plan *packer.Plan
	for i := 0; i < b.N; i++ {
		plan = packer.Solve(snap, packer.Options{})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(len(snap.Pods))*float64(b.N)/elapsed.Seconds(), "pods/s")
	b.ReportMetric(float64(len(plan.NewNodes)), "nodes")
	b.ReportMetric(plan.TotalPricePerHour, "$/h")
	if f.bound > 0 {
		b.ReportMetric(plan.TotalPricePerHour/f.bound, "cost/bound")
	}
	b.ReportMetric(float64(len(plan.Unschedulable)), "unschedulable")
	b.ReportMetric(float64(f.errors), "checker-errors")
	b.ReportMetric(float64(f.peakHeap)/(1<<20), "peak-heap-MiB")
}

func benchCases(b *testing.B) []workload.Case {
	cases, err := workload.Cases()
	if err != nil {
		b.Fatal(err)
	}
	return cases
}

// BenchmarkSolve is Karpenter's scheduling benchmark workload on its 400 fake
// instance types, at 100 to 20,000 pods and at 100,000 (workload.ScalePods).
func BenchmarkSolve(b *testing.B) {
	for _, c := range benchCases(b) {
		if c.Name != "karpenter-"+strconv.Itoa(c.Pods) {
			continue
		}
		snap := c.Snapshot()
		b.Run(strconv.Itoa(c.Pods), func(b *testing.B) { benchSolve(b, c.Name, snap) })
	}
}

// benchCase benchmarks Solve on the case named name.
func benchCase(b *testing.B, name string) {
	for _, c := range benchCases(b) {
		if c.Name == name {
			benchSolve(b, c.Name, c.Snapshot())
			return
		}
	}
	b.Fatal("no " + name + " case")
}

// BenchmarkSolvePreferences4000 is 4,000 pods shaped by preferred node affinity and
// ScheduleAnyway spread (workload.PreferencePods).
func BenchmarkSolvePreferences4000(b *testing.B) { benchCase(b, "preferences-4000") }

// BenchmarkSolveLimit300 is 300 of Karpenter's benchmark pods against a pool
// whose cpu limit holds about half of them (workload.LimitSnapshot; issue 20:
// at most 10 ms).
func BenchmarkSolveLimit300(b *testing.B) { benchCase(b, "limit-300") }

// BenchmarkSolveRealCatalog5000 is the mixed 5,000-pod workload on the real
// us-east-1 catalog (1,345 types), read from ../shared/catalog/us-east-1.json next
// to the repository or JOINER_REAL_CATALOG; skipped when absent.
func BenchmarkSolveRealCatalog5000(b *testing.B) {
	for _, c := range benchCases(b) {
		if c.Name == "real-mixed-5000" {
			benchSolve(b, c.Name, c.Snapshot())
			return
		}
	}
	b.Skip("us-east-1.json not found (set " + workload.EnvRealCatalog + ")")
}
