package workload

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

func TestGeneratedBenchCatalogEqualsTheSharedFile(t *testing.T) {
	gen, err := GenerateBenchCatalog(400)
	if err != nil {
		t.Fatal(err)
	}
	if got := gen.InstanceTypes[399]; got.VCPU != 400 || got.MemoryMiB != 819200 || got.MaxPods != 4000 || got.Offerings[0].PricePerHour != 125.899346 {
		t.Errorf("fake-it-399: %+v", got)
	}
	p := FindSharedCatalog(EnvBenchCatalog, "karpenter-bench-400.json")
	if p == "" {
		t.Skip("karpenter-bench-400.json not found; the generated catalog is used")
	}
	file, err := catalog.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(file.InstanceTypes) != len(gen.InstanceTypes) {
		t.Fatalf("%d types in %s, %d generated", len(file.InstanceTypes), p, len(gen.InstanceTypes))
	}
	for i := range gen.InstanceTypes {
		a, b := gen.InstanceTypes[i], file.InstanceTypes[i]
		if a.Name != b.Name || a.VCPU != b.VCPU || a.MemoryMiB != b.MemoryMiB || a.MaxPods != b.MaxPods || a.Arch != b.Arch || len(a.Offerings) != len(b.Offerings) {
			t.Fatalf("type %d: generated %+v, file %+v", i, a, b)
		}
		for j := range a.Offerings {
			if a.Offerings[j] != b.Offerings[j] {
				t.Fatalf("%s offering %d: generated %+v, file %+v", a.Name, j, a.Offerings[j], b.Offerings[j])
			}
		}
	}
}

func TestKarpenterPods(t *testing.T) {
	pods := KarpenterPods(1003)
	if len(pods) != 1003 {
		t.Fatalf("%d pods", len(pods))
	}
	kinds := map[string]int{}
	names := map[string]bool{}
	cpus := map[string]bool{}
	mems := map[string]bool{}
	for _, p := range pods {
		if names[p.Name] {
			t.Fatalf("duplicate name %s", p.Name)
		}
		names[p.Name] = true
		req := p.Spec.Containers[0].Resources.Requests
		cpus[req.Cpu().String()] = true
		mems[req.Memory().String()] = true
		switch {
		case len(p.Spec.TopologySpreadConstraints) == 1:
			c := p.Spec.TopologySpreadConstraints[0]
			if c.WhenUnsatisfiable != corev1.DoNotSchedule || c.MaxSkew != 1 || c.LabelSelector.MatchLabels["my-label"] == "" {
				t.Fatalf("spread pod %s: %+v", p.Name, c)
			}
			kinds["spread "+c.TopologyKey]++
		case p.Spec.Affinity != nil && p.Spec.Affinity.PodAffinity != nil:
			term := p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
			if term.TopologyKey != corev1.LabelTopologyZone || term.LabelSelector.MatchLabels["my-affinity"] != p.Labels["my-affinity"] {
				t.Fatalf("affinity pod %s is not self-affine on zone", p.Name)
			}
			kinds["affinity"]++
		case p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil:
			term := p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
			if term.TopologyKey != corev1.LabelHostname || p.Labels["app"] != "nginx" || term.LabelSelector.MatchLabels["app"] != "nginx" {
				t.Fatalf("anti-affinity pod %s", p.Name)
			}
			kinds["anti"]++
		default:
			kinds["generic"]++
		}
	}
	want := map[string]int{"generic": 203, "spread topology.kubernetes.io/zone": 200, "spread kubernetes.io/hostname": 200, "affinity": 200, "anti": 200}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%s: %d pods, want %d (%v)", k, kinds[k], n, kinds)
		}
	}
	if len(cpus) != 5 || len(mems) != 6 {
		t.Errorf("cpu values %v, memory values %v: want Karpenter's 5 and 6", cpus, mems)
	}
	// Same seed, same pods.
	again := KarpenterPods(1003)
	for i := range pods {
		if pods[i].Name != again[i].Name || !pods[i].Spec.Containers[0].Resources.Requests.Cpu().Equal(*again[i].Spec.Containers[0].Resources.Requests.Cpu()) {
			t.Fatalf("pod %d differs between runs", i)
		}
	}
}

func TestPreferencePods(t *testing.T) {
	pods := PreferencePods(4000)
	count := map[string]int{}
	for _, p := range pods {
		count[p.Labels["app"]]++
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
				t.Fatalf("%s has a hard spread", p.Name)
			}
		}
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			t.Fatalf("%s has required node affinity", p.Name)
		}
	}
	for _, g := range []string{PrefZone, PrefImpossible, PrefSpread, PrefConflict} {
		if count[g] != 1000 {
			t.Errorf("%s: %d pods", g, count[g])
		}
	}
}

func TestMixedSnapshotOnRealCatalog(t *testing.T) {
	cat, path, err := RealCatalog()
	if err != nil {
		t.Fatal(err)
	}
	if cat == nil {
		t.Skip("us-east-1.json not found")
	}
	snap := MixedSnapshot(5000, cat)
	if len(snap.Pods) != 5000 {
		t.Fatalf("%d pods", len(snap.Pods))
	}
	if len(snap.Nodes) != 12 || len(snap.DaemonSets) != 2 || len(snap.NodePools) != 3 {
		t.Errorf("nodes %d, daemonsets %d, pools %d", len(snap.Nodes), len(snap.DaemonSets), len(snap.NodePools))
	}
	gpu := 0
	for _, p := range snap.Pods {
		if _, ok := p.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; ok {
			gpu++
		}
	}
	if gpu == 0 {
		t.Error("no GPU pods")
	}
	t.Logf("%s: %d types, %d GPU pods", path, len(cat.InstanceTypes), gpu)
}

func TestRandomIsSeeded(t *testing.T) {
	a, b := Random(5, 200), Random(5, 200)
	if len(a.Pods) != len(b.Pods) || len(a.NodePools) != len(b.NodePools) || len(a.Catalog.InstanceTypes) != len(b.Catalog.InstanceTypes) {
		t.Fatal("same seed, different clusters")
	}
	for i := range a.Pods {
		if a.Pods[i].Name != b.Pods[i].Name || a.Pods[i].Spec.String() != b.Pods[i].Spec.String() {
			t.Fatalf("pod %d differs", i)
		}
	}
	if c := Random(6, 200); c.Pods[0].Spec.String() == a.Pods[0].Spec.String() && len(c.Pods) == len(a.Pods) {
		t.Error("different seeds gave the same cluster")
	}
}

func benchSnapshot(t *testing.T, pods []*corev1.Pod) *packer.Snapshot {
	t.Helper()
	cat, err := GenerateBenchCatalog(400)
	if err != nil {
		t.Fatal(err)
	}
	return &packer.Snapshot{Pods: pods, Catalog: cat, NodeClasses: []*karpenter.EC2NodeClass{DefaultNodeClass()},
		NodePools: []*karpenter.NodePool{Pool("default", 0, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"))}}
}

func simplePod(name, cpu, mem string) *corev1.Pod {
	return benchPod(name, map[string]string{}, resource.MustParse(cpu), resource.MustParse(mem))
}

func TestLowerBound(t *testing.T) {
	spot0 := 0.125899 // fake-it-0 spot: 1 vCPU, 940m allocatable
	t.Run("anti-affinity clique needs one node per pod", func(t *testing.T) {
		var pods []*corev1.Pod
		for i := 0; i < 10; i++ {
			p := simplePod("anti-"+string(rune('a'+i)), "100m", "100Mi")
			p.Labels["app"] = "nginx"
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}}}}}}
			pods = append(pods, p)
		}
		got, why := LowerBound(benchSnapshot(t, pods))
		if math.Abs(got-10*spot0) > 1e-6 {
			t.Errorf("bound %v, want 10 × %v (%s)", got, spot0, why)
		}
	})
	t.Run("resource bound is below the cheapest feasible plan", func(t *testing.T) {
		// One pod of 1.5 CPU: the cheapest node is fake-it-1 (2 vCPU) at 0.251799.
		got, why := LowerBound(benchSnapshot(t, []*corev1.Pod{simplePod("p", "1500m", "1Gi")}))
		if got <= 0 || got > 0.251799 {
			t.Errorf("bound %v not in (0, 0.251799] (%s)", got, why)
		}
	})
	t.Run("bound never exceeds one-node-per-pod", func(t *testing.T) {
		snap := benchSnapshot(t, KarpenterPods(500))
		got, why := LowerBound(snap)
		naive := 0.0
		for _, p := range snap.Pods {
			// the cheapest type whose allocatable holds the pod alone
			req := p.Spec.Containers[0].Resources.Requests
			for i := range snap.Catalog.InstanceTypes {
				it := &snap.Catalog.InstanceTypes[i]
				a := catalog.Allocatable(it, catalog.Overhead{})
				if a.Cpu().Cmp(*req.Cpu()) >= 0 && a.Memory().Cmp(*req.Memory()) >= 0 {
					naive += it.Offerings[3].PricePerHour
					break
				}
			}
		}
		if got <= 0 || got > naive {
			t.Errorf("bound %v, naive plan %v (%s)", got, naive, why)
		}
		t.Logf("bound %.3f, naive %.3f: %s", got, naive, why)
	})
	t.Run("free room on an existing node costs nothing", func(t *testing.T) {
		snap := benchSnapshot(t, []*corev1.Pod{simplePod("p", "1", "1Gi")})
		it := &snap.Catalog.InstanceTypes[3]
		snap.Nodes = []packer.NodeState{{Node: ExistingNode("n", snap.NodePools[0], it, it.Offerings[0])}}
		if got, why := LowerBound(snap); got > 1e-9 {
			t.Errorf("bound %v, want 0 (%s)", got, why)
		}
	})
	t.Run("a pod nothing can hold is left out", func(t *testing.T) {
		got, why := LowerBound(benchSnapshot(t, []*corev1.Pod{simplePod("p", "1000", "1Gi")}))
		if got != 0 || !strings.Contains(why, "1 pods left out") && !strings.Contains(why, "1 left out") {
			t.Errorf("bound %v (%s)", got, why)
		}
	})
	t.Run("gpu pods need gpu types", func(t *testing.T) {
		cat, err := catalog.New("us-east-1", []catalog.InstanceType{
			{Name: "m5.large", Arch: "amd64", VCPU: 2, MemoryMiB: 8192, MaxPods: 29, Offerings: []catalog.Offering{{Zone: "us-east-1a", CapacityType: "on-demand", PricePerHour: 0.096, Available: true}}},
			{Name: "g6.xlarge", Arch: "amd64", VCPU: 4, MemoryMiB: 16384, MaxPods: 58, GPU: &catalog.GPU{Count: 1, Name: "l4", Manufacturer: "nvidia", MemoryMiB: 22888},
				Offerings: []catalog.Offering{{Zone: "us-east-1a", CapacityType: "on-demand", PricePerHour: 0.8048, Available: true}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var pods []*corev1.Pod
		for i := 0; i < 3; i++ {
			p := simplePod("cuda-"+string(rune('a'+i)), "100m", "100Mi")
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
			pods = append(pods, p)
		}
		snap := benchSnapshot(t, pods)
		snap.Catalog = cat
		got, why := LowerBound(snap)
		if math.Abs(got-3*0.8048) > 1e-6 {
			t.Errorf("bound %v, want 3 × 0.8048 (%s)", got, why)
		}
	})
	t.Run("pool limit raises the bound", func(t *testing.T) {
		// Spot allowed but the spot pool may only run 2 CPUs: the rest is on-demand.
		spotPool := Pool("spot", 10, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"))
		spotPool.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		odPool := Pool("od", 0, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"))
		snap := benchSnapshot(t, []*corev1.Pod{simplePod("a", "3", "1Gi"), simplePod("b", "3", "1Gi")})
		unlimited, _ := LowerBound(snap)
		snap.NodePools = []*karpenter.NodePool{spotPool, odPool}
		limited, why := LowerBound(snap)
		if limited <= unlimited*1.5 {
			t.Errorf("limited bound %v should be well above the spot-only %v (%s)", limited, unlimited, why)
		}
	})
}

func TestWriteYAMLExpandsToTheSamePods(t *testing.T) {
	cat, err := GenerateBenchCatalog(400)
	if err != nil {
		t.Fatal(err)
	}
	for _, snap := range []*packer.Snapshot{KarpenterSnapshot(2000, cat), PreferenceSnapshot(400, cat), Random(3, 200)} {
		dir := t.TempDir()
		n, err := WriteYAML(dir, snap)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(snap.Pods) {
			t.Fatalf("manifests expand to %d pods, snapshot has %d", n, len(snap.Pods))
		}
		// Read back: Deployments × replicas + Pods without nodeName = pending pods.
		data, err := os.ReadFile(filepath.Join(dir, "workloads.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		pending := 0
		docs := 0
		for _, doc := range bytes.Split(data, []byte("---\n")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			docs++
			var obj struct {
				Kind string `json:"kind"`
				Spec struct {
					Replicas int            `json:"replicas"`
					Selector map[string]any `json:"selector"`
					Template map[string]any `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("bad YAML document: %v\n%s", err, doc)
			}
			switch obj.Kind {
			case "Deployment":
				if obj.Spec.Selector == nil || obj.Spec.Template == nil {
					t.Fatalf("deployment without selector/template:\n%s", doc)
				}
				pending += obj.Spec.Replicas
			case "Pod":
				pending++
			default:
				t.Fatalf("unexpected kind %q", obj.Kind)
			}
		}
		if pending != len(snap.Pods) {
			t.Errorf("read back %d pending pods, want %d", pending, len(snap.Pods))
		}
		if _, err := os.Stat(filepath.Join(dir, "pools.yaml")); err != nil {
			t.Error(err)
		}
		// ReadYAML decodes them as joiner plan does: the same pods' requests,
		// the same pools, and a plan for every pod.
		back, err := ReadYAML(dir, cat)
		if err != nil {
			t.Fatal(err)
		}
		if len(back.Pods) != len(snap.Pods) || len(back.NodePools) != len(snap.NodePools) || len(back.Nodes) != len(snap.Nodes) {
			t.Errorf("read back %d pods, %d pools, %d nodes; wrote %d, %d, %d", len(back.Pods), len(back.NodePools), len(back.Nodes),
				len(snap.Pods), len(snap.NodePools), len(snap.Nodes))
		}
		plan := packer.Solve(back, packer.Options{})
		placed := len(plan.Unschedulable)
		for _, nn := range plan.NewNodes {
			placed += len(nn.Pods)
		}
		for _, e := range plan.ExistingNodes {
			placed += len(e.Pods)
		}
		if placed != len(snap.Pods) {
			t.Errorf("the plan of the read-back snapshot accounts for %d of %d pods", placed, len(snap.Pods))
		}
		t.Logf("%d pods in %d documents", pending, docs)
	}
}

// Under a binding limit LowerBound has no solution; the bound of the pods the
// plan placed is finite, below the plan's cost, and above nothing.
func TestLowerBoundPlacedUnderLimit(t *testing.T) {
	cat, _, err := BenchCatalog()
	if err != nil {
		t.Fatal(err)
	}
	snap := LimitSnapshot(300, cat)
	plan := packer.Solve(snap, packer.Options{})
	if len(plan.Unschedulable) == 0 {
		t.Fatalf("the limit (%s cpu) does not bind: every pod placed", LimitCPU)
	}
	if b, why := LowerBound(snap); b > 0 {
		t.Errorf("LowerBound = %.2f (%s), want no bound: the limit cannot hold every pod", b, why)
	}
	var left []string
	for _, u := range plan.Unschedulable {
		left = append(left, u.Pod)
	}
	b, why := LowerBoundPlaced(snap, left)
	if !(b > 0) || b > plan.TotalPricePerHour*(1+1e-9) {
		t.Errorf("LowerBoundPlaced = %.4f (%s), plan $%.4f/h", b, why, plan.TotalPricePerHour)
	}
}
