package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// shape is one Deployment of a real-catalog case: replicas of one pod template.
type shape struct {
	app      string
	replicas int
	cpu, mem string
}

// The real-catalog cases below are what ordinary clusters pend: a handful of
// Deployments of different shapes on one diversified pool. They are where a plan
// costs money (the issue measured 1.10-1.20x the bound on such work while the
// Karpenter benchmark mix sat at 1.01-1.04), so each is a cost target.

// ordinaryShapes are five Deployments from 250m to 12 CPU with 2 to 12 GiB per CPU.
var ordinaryShapes = []shape{
	{"api", 160, "250m", "512Mi"},
	{"worker", 90, "2", "8Gi"},
	{"search", 40, "4", "32Gi"},
	{"analytics", 16, "12", "24Gi"},
	{"session-cache", 120, "1", "12Gi"},
}

// cpuHeavyShapes need 1 to 2 GiB per CPU: c-family work.
var cpuHeavyShapes = []shape{
	{"encoder", 300, "2", "2Gi"},
	{"frontend", 400, "500m", "1Gi"},
	{"compute", 120, "4", "6Gi"},
	{"gateway", 180, "1", "1536Mi"},
}

// memHeavyShapes need 6 to 16 GiB per CPU: r-family work.
var memHeavyShapes = []shape{
	{"redis", 250, "1", "12Gi"},
	{"jvm", 300, "500m", "4Gi"},
	{"olap", 60, "4", "64Gi"},
	{"indexer", 150, "2", "16Gi"},
}

// shapePods stamps the Deployments; with spread every Deployment spreads over
// zones (maxSkew 1, DoNotSchedule), as most production Deployments are told to.
func shapePods(shapes []shape, spread bool, edit func(*corev1.Pod)) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, sh := range shapes {
		p := appPod(sh.app, sh.cpu, sh.mem)
		if spread {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": sh.app}}}}
		}
		if edit != nil {
			edit(p)
		}
		pods = append(pods, replicas(sh.app, sh.replicas, p)...)
	}
	return pods
}

func shapeCount(shapes []shape) int {
	n := 0
	for _, sh := range shapes {
		n += sh.replicas
	}
	return n
}

// spotPool is a diversified spot pool: c, m and r of generation 5 and later on
// the given architectures.
func spotPool(name string, archs ...string) *karpenter.NodePool {
	return Pool(name, 0,
		Req(karpenter.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
		Req(karpenter.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "4"),
		Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, archs...),
		Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"))
}

// nodeAgent is the DaemonSet every node runs (log shipper, metrics agent).
func nodeAgent() *appsv1.DaemonSet {
	return daemonSet("node-agent", "monitoring", "100m", "128Mi", nil, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, 0)
}

// ShapesSnapshot is pods of shapes (zone-spread when spread) on one spot pool of
// the given architectures, with the node agent DaemonSet.
func ShapesSnapshot(cat *catalog.Catalog, shapes []shape, spread bool, archs ...string) *packer.Snapshot {
	return &packer.Snapshot{
		Pods:        shapePods(shapes, spread, nil),
		NodePools:   []*karpenter.NodePool{spotPool("default", archs...)},
		NodeClasses: []*karpenter.EC2NodeClass{DefaultNodeClass()},
		DaemonSets:  []*appsv1.DaemonSet{nodeAgent()},
		Catalog:     cat,
	}
}

// ExistingRoomSnapshot is 400 pending pods of the ordinary shapes (scaled down)
// on a cluster with six existing nodes: two with room left, one tainted for a
// team the pods do not tolerate, one cordoned, and two busy ones. Room that exists
// is free; the rest goes to the spot pool.
func ExistingRoomSnapshot(cat *catalog.Catalog) *packer.Snapshot {
	pool := spotPool("default", "amd64")
	shapes := []shape{
		{"api", 150, "250m", "512Mi"},
		{"worker", 100, "2", "8Gi"},
		{"search", 30, "4", "32Gi"},
		{"analytics", 10, "12", "24Gi"},
		{"session-cache", 110, "1", "12Gi"},
	}
	snap := &packer.Snapshot{
		Pods:        shapePods(shapes, false, nil),
		NodePools:   []*karpenter.NodePool{pool},
		NodeClasses: []*karpenter.EC2NodeClass{DefaultNodeClass()},
		DaemonSets:  []*appsv1.DaemonSet{nodeAgent()},
		Catalog:     cat,
	}
	type existing struct {
		typ     string
		running int // 1-CPU 2-GiB pods already there
		taint   bool
		cordon  bool
	}
	for i, e := range []existing{
		{"m6i.4xlarge", 4, false, false},
		{"r6i.2xlarge", 2, false, false},
		{"c6i.4xlarge", 2, true, false},
		{"m6i.2xlarge", 1, false, true},
		{"m6i.xlarge", 3, false, false},
		{"c6i.2xlarge", 7, false, false},
	} {
		it, ok := cat.Lookup(e.typ)
		if !ok {
			continue
		}
		name := fmt.Sprintf("ip-10-1-%d-%d.ec2.internal", i%3, 20+i)
		node := ExistingNode(name, pool, it, catalog.Offering{Zone: BenchZones[i%3], CapacityType: "spot"})
		if e.taint {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "team", Value: "payments", Effect: corev1.TaintEffectNoSchedule})
		}
		node.Spec.Unschedulable = e.cordon
		var running []*corev1.Pod
		for j := 0; j < e.running; j++ {
			p := appPod("legacy", "1", "2Gi")
			p.Name = fmt.Sprintf("legacy-%d-%d", i, j)
			p.Spec.NodeName = name
			p.Status.Phase = corev1.PodRunning
			running = append(running, p)
		}
		snap.Nodes = append(snap.Nodes, packer.NodeState{Node: node, Pods: running})
	}
	return snap
}

// BottlerocketSnapshot is 2,000 pods on a default pool of c/m/r generation 5 and
// later, both architectures, spot and on-demand, on Bottlerocket: web services
// spread over zones, memory-heavy services, and batch jobs.
func BottlerocketSnapshot(cat *catalog.Catalog) *packer.Snapshot {
	pool := Pool("default", 0,
		Req(karpenter.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
		Req(karpenter.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "4"),
		Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64"),
		Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"))
	class := DefaultNodeClass()
	class.Spec.AMISelectorTerms = []karpenter.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
	web := shapePods([]shape{
		{"web-a", 300, "500m", "1Gi"},
		{"web-b", 240, "1", "2Gi"},
		{"web-c", 160, "250m", "768Mi"},
		{"web-d", 100, "2", "4Gi"},
	}, true, nil)
	mem := shapePods([]shape{
		{"mem-a", 200, "1", "8Gi"},
		{"mem-b", 150, "2", "16Gi"},
		{"mem-c", 50, "500m", "6Gi"},
	}, false, nil)
	batch := shapePods([]shape{
		{"batch-a", 400, "1", "1Gi"},
		{"batch-b", 250, "2", "3Gi"},
		{"batch-c", 150, "4", "8Gi"},
	}, false, nil)
	return &packer.Snapshot{
		Pods:        append(append(web, mem...), batch...),
		NodePools:   []*karpenter.NodePool{pool},
		NodeClasses: []*karpenter.EC2NodeClass{class},
		DaemonSets:  []*appsv1.DaemonSet{nodeAgent()},
		Catalog:     cat,
	}
}

// realCases lists the real-catalog cost cases.
func realCases(real *catalog.Catalog, path string) []Case {
	mk := func(name string, pods int, f func() *packer.Snapshot) Case {
		return Case{Name: name, Pods: pods, Catalog: real, CatalogPath: path, Snapshot: f}
	}
	return []Case{
		mk(fmt.Sprintf("real-ordinary-%d", shapeCount(ordinaryShapes)), shapeCount(ordinaryShapes),
			func() *packer.Snapshot { return ShapesSnapshot(real, ordinaryShapes, false, "amd64") }),
		mk(fmt.Sprintf("real-ordinary-spread-%d", shapeCount(ordinaryShapes)), shapeCount(ordinaryShapes),
			func() *packer.Snapshot { return ShapesSnapshot(real, ordinaryShapes, true, "amd64") }),
		mk(fmt.Sprintf("real-cpu-heavy-%d", shapeCount(cpuHeavyShapes)), shapeCount(cpuHeavyShapes),
			func() *packer.Snapshot { return ShapesSnapshot(real, cpuHeavyShapes, false, "amd64", "arm64") }),
		mk(fmt.Sprintf("real-cpu-heavy-spread-%d", shapeCount(cpuHeavyShapes)), shapeCount(cpuHeavyShapes),
			func() *packer.Snapshot { return ShapesSnapshot(real, cpuHeavyShapes, true, "amd64", "arm64") }),
		mk(fmt.Sprintf("real-mem-heavy-%d", shapeCount(memHeavyShapes)), shapeCount(memHeavyShapes),
			func() *packer.Snapshot { return ShapesSnapshot(real, memHeavyShapes, false, "amd64", "arm64") }),
		mk(fmt.Sprintf("real-mem-heavy-spread-%d", shapeCount(memHeavyShapes)), shapeCount(memHeavyShapes),
			func() *packer.Snapshot { return ShapesSnapshot(real, memHeavyShapes, true, "amd64", "arm64") }),
		mk("real-existing-400", 400, func() *packer.Snapshot { return ExistingRoomSnapshot(real) }),
		mk("real-bottlerocket-2000", 2000, func() *packer.Snapshot { return BottlerocketSnapshot(real) }),
	}
}
