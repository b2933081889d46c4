package disruption

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// bigCluster is nodes nodes of three sizes running pods app pods (plus one
// DaemonSet pod each), unevenly: some nodes are nearly empty, some busy, a few
// empty, a few drifted. The seed is fixed, so every run builds the same cluster.
func bigCluster(tb testing.TB, nodes, pods int, generalBudgets ...karpenter.Budget) Input {
	r := rand.New(rand.NewPCG(5, 500))
	c := newCluster(tb,
		testPool("general", whenUnderused, 0, []string{"m5.large", "m5.xlarge", "m5.2xlarge", "r5.large", "r5.xlarge"}, budgets(generalBudgets...)),
		testPool("batch", whenEmpty, 5*time.Minute, []string{"m5.xlarge", "m5.2xlarge"}))
	types := []string{"m5.large", "m5.xlarge", "m5.2xlarge"}
	cpuMilli := map[string]int{"m5.large": 1800, "m5.xlarge": 3800, "m5.2xlarge": 7700}
	// Spread the pods with weights so node loads differ widely.
	weights := make([]float64, nodes)
	total := 0.0
	for i := range weights {
		weights[i] = r.Float64() * r.Float64()
		if i%37 == 0 {
			weights[i] = 0 // empty
		}
		total += weights[i]
	}
	placed := 0
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("node-%04d", i)
		it := types[i%3]
		pool := "general"
		if i%10 == 9 {
			pool, it = "batch", "m5.2xlarge"
		}
		want := int(float64(pods) * weights[i] / total)
		if i == nodes-1 {
			want = pods - placed
		}
		var ps []*appPodSpec
		free := cpuMilli[it]
		for j := 0; j < want; j++ {
			cpu := 50 + r.IntN(200)
			if cpu > free {
				break
			}
			free -= cpu
			ps = append(ps, &appPodSpec{fmt.Sprintf("%s-p%02d", name, j), fmt.Sprintf("%dm", cpu), fmt.Sprintf("%dMi", 64+r.IntN(512))})
		}
		placed += len(ps)
		bound := make([]*corev1.Pod, 0, len(ps)+1)
		for _, p := range ps {
			bound = append(bound, appPod(p.name, p.cpu, p.mem))
		}
		bound = append(bound, dsPod(name))
		_, nc := c.managed(name, pool, it, time.Duration(24+i)*time.Hour, bound...)
		if i%50 == 7 {
			nc.Annotations = map[string]string{NodeClassHashAnnotation: "stale"}
		}
	}
	return c.input()
}

type appPodSpec struct{ name, cpu, mem string }

// BenchmarkDecide500Nodes5000Pods is a consolidation round of a 500-node cluster
// running 5,000 pods with Karpenter's default budgets (10% of each pool).
func BenchmarkDecide500Nodes5000Pods(b *testing.B) {
	benchDecide(b, bigCluster(b, 500, 5000))
}

// BenchmarkDecide500Nodes5000PodsNoBudget lets every node be disrupted, so every
// candidate is looked at: the worst case for one round.
func BenchmarkDecide500Nodes5000PodsNoBudget(b *testing.B) {
	benchDecide(b, bigCluster(b, 500, 5000, karpenter.Budget{Nodes: "100%"}))
}

func benchDecide(b *testing.B, in Input) {
	var d Decision
	b.ReportAllocs()
	// The machine is shared: process CPU time says more about the decision's cost
	// than wall time does.
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d = Decide(in)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(d.Summary.Simulations), "simulations")
	b.ReportMetric(float64(d.Summary.Deletes+d.Summary.Replaces), "disruptions")
	b.Logf("%s", d.Summary)
}

// TestBigClusterDecision checks the benchmark's cluster is a real workload for it:
// the decision disrupts nodes within the pools' 10% budgets, and every disrupted
// node's pods have a home.
func TestBigClusterDecision(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	in := bigCluster(t, 500, 5000)
	d := Decide(in)
	if d.Summary.Deletes+d.Summary.Replaces == 0 {
		t.Fatalf("nothing decided on the benchmark cluster: %s", d.Summary)
	}
	perPool := map[string]int{}
	for _, a := range d.Actions {
		if (a.Kind == Delete || a.Kind == Replace) && a.Reason != ReasonExpired {
			perPool[a.NodePool]++
		}
	}
	// 450 general and 50 batch nodes; the default budget is 10%, rounded up.
	if perPool["general"] > 45 || perPool["batch"] > 5 {
		t.Fatalf("budgets exceeded: %v", perPool)
	}
	for _, a := range d.Actions {
		if a.NodePool == "batch" && a.Reason == ReasonUnderutilized {
			t.Fatalf("WhenEmpty pool consolidated as underutilized: %+v", a)
		}
	}
	t.Logf("%s", d.Summary)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
