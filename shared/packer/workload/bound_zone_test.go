package workload

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// zoneCatalog is three types in three zones whose spot prices differ by zone,
// as the real catalog's do.
func zoneCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	var types []catalog.InstanceType
	for i, size := range []int{2, 4, 8} {
		var offs []catalog.Offering
		for z, f := range []float64{1, 1.15, 1.3} {
			offs = append(offs, catalog.Offering{Zone: BenchZones[z], CapacityType: "spot", PricePerHour: round6(0.02 * float64(size) * f * (1 + 0.05*float64(i))), Available: true})
		}
		types = append(types, catalog.InstanceType{Name: fmt.Sprintf("z-it-%d", size), Arch: "amd64", VCPU: size, MemoryMiB: int64(size) * 4096, MaxPods: 110, Offerings: offs})
	}
	cat, err := catalog.New("us-east-1", types)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// bruteForce is the cheapest plan for pods on cat: every partition of the pods
// into nodes, every zone per node, each node on the cheapest type of its zone that
// holds its pods; zone spread (maxSkew over all three zones, every zone a domain)
// judged on the final counts of the pods labelled app=spread.
func bruteForce(t *testing.T, cat *catalog.Catalog, pods []*corev1.Pod, maxSkew int) float64 {
	t.Helper()
	overhead := catalog.OverheadFor(DefaultNodeClass())
	type typ struct {
		cpu, mem int64
		price    [3]float64
	}
	var types []typ
	for i := range cat.InstanceTypes {
		it := &cat.InstanceTypes[i]
		a := catalog.Allocatable(it, overhead)
		tp := typ{cpu: a.Cpu().MilliValue(), mem: a.Memory().Value()}
		for _, o := range it.Offerings {
			for z, name := range BenchZones {
				if o.Zone == name {
					tp.price[z] = o.PricePerHour
				}
			}
		}
		types = append(types, tp)
	}
	n := len(pods)
	block := make([]int, n)
	best := math.Inf(1)
	var assign func(i, blocks int)
	assign = func(i, blocks int) {
		if i < n {
			for b := 0; b <= blocks; b++ {
				block[i] = b
				assign(i+1, max(blocks, b+1))
			}
			return
		}
		cpu, mem := make([]int64, blocks), make([]int64, blocks)
		for p, b := range block {
			r := pods[p].Spec.Containers[0].Resources.Requests
			cpu[b] += r.Cpu().MilliValue()
			mem[b] += r.Memory().Value()
		}
		zone := make([]int, blocks)
		var zones func(b int)
		zones = func(b int) {
			if b < blocks {
				for z := range 3 {
					zone[b] = z
					zones(b + 1)
				}
				return
			}
			var count [3]int
			for p, bl := range block {
				if pods[p].Labels["app"] == "spread" {
					count[zone[bl]]++
				}
			}
			if maxSkew > 0 && max(count[0], count[1], count[2])-min(count[0], count[1], count[2]) > maxSkew {
				return
			}
			cost := 0.0
			for bl := range blocks {
				price := math.Inf(1)
				for _, tp := range types {
					if cpu[bl] <= tp.cpu && mem[bl] <= tp.mem {
						price = math.Min(price, tp.price[zone[bl]])
					}
				}
				cost += price
			}
			best = math.Min(best, cost)
		}
		zones(0)
	}
	assign(0, 0)
	return best
}

// The zone-aware bound never exceeds the cheapest valid plan, found by brute
// force on small random cases, and with zone spread it rises above the plain
// bound, which would put every pod in the cheapest zone.
func TestLowerBoundBelowBruteForce(t *testing.T) {
	cat := zoneCatalog(t)
	r := rand.New(rand.NewSource(3))
	cpus := []string{"250m", "500m", "1", "1500m", "3"}
	mems := []string{"512Mi", "1Gi", "3Gi", "6Gi", "12Gi"}
	tighter := 0
	for seed := range 40 {
		n := 2 + r.Intn(5)
		skew := r.Intn(3) // 0: no spread
		var pods []*corev1.Pod
		for i := range n {
			app := "plain"
			if skew > 0 && i%4 != 3 {
				app = "spread"
			}
			p := benchPod(fmt.Sprintf("p-%d", i), map[string]string{"app": app}, resource.MustParse(cpus[r.Intn(len(cpus))]), resource.MustParse(mems[r.Intn(len(mems))]))
			if app == "spread" {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: int32(skew), TopologyKey: corev1.LabelTopologyZone,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
			}
			pods = append(pods, p)
		}
		snap := &packer.Snapshot{Pods: pods, Catalog: cat, NodeClasses: []*karpenter.EC2NodeClass{DefaultNodeClass()},
			NodePools: []*karpenter.NodePool{Pool("default", 0, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"))}}
		bound, why := LowerBound(snap)
		opt := bruteForce(t, cat, pods, skew)
		if bound > opt+1e-9 {
			t.Fatalf("seed %d (%d pods, maxSkew %d): bound %.6f above the cheapest valid plan %.6f (%s)", seed, n, skew, bound, opt, why)
		}
		// The plain bound: the same pods without their spread constraints.
		plain := make([]*corev1.Pod, len(pods))
		for i, p := range pods {
			plain[i] = p.DeepCopy()
			plain[i].Spec.TopologySpreadConstraints = nil
		}
		snap.Pods = plain
		if pb, _ := LowerBound(snap); bound > pb+1e-9 {
			tighter++
		}
	}
	if tighter == 0 {
		t.Error("zone spread never raised the bound above the plain one")
	}
	t.Logf("zone spread raised the bound in %d of 40 cases", tighter)
}
