package check_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// The fixture is a small cluster and a plan for it that a correct engine could
// produce; each test breaks one rule of it.

var zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

func offerings(od, spot float64) []catalog.Offering {
	var out []catalog.Offering
	for _, z := range zones {
		out = append(out,
			catalog.Offering{Zone: z, CapacityType: "on-demand", PricePerHour: od, Available: true},
			catalog.Offering{Zone: z, CapacityType: "spot", PricePerHour: spot, Available: true})
	}
	return out
}

func testCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.New("us-east-1", []catalog.InstanceType{
		{Name: "m5.large", Arch: "amd64", VCPU: 2, MemoryMiB: 8192, MaxPods: 29, Offerings: offerings(0.096, 0.04)},
		{Name: "m5.xlarge", Arch: "amd64", VCPU: 4, MemoryMiB: 16384, MaxPods: 58, Offerings: offerings(0.192, 0.08)},
		{Name: "m5n.large", Arch: "amd64", VCPU: 2, MemoryMiB: 8192, MaxPods: 29, Offerings: offerings(0.3, 0.12)},
		{Name: "m6g.large", Arch: "arm64", VCPU: 2, MemoryMiB: 8192, MaxPods: 29, Offerings: offerings(0.077, 0.03)},
		{Name: "g6.xlarge", Arch: "amd64", VCPU: 4, MemoryMiB: 16384, MaxPods: 58,
			GPU: &catalog.GPU{Count: 1, Name: "l4", Manufacturer: "nvidia", MemoryMiB: 22888}, Offerings: offerings(0.8048, 0.35)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func quantities(kv ...string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		rl[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return rl
}

type podOpt func(*corev1.Pod)

func mkPod(name, cpu, mem string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
			Resources: corev1.ResourceRequirements{Requests: quantities("cpu", cpu, "memory", mem)}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func label(k, v string) podOpt { return func(p *corev1.Pod) { p.Labels[k] = v } }

func nodeSelector(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[k] = v
	}
}

func tolerate(key string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	}
}

func spread(key string, maxSkew int32, app string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}})
	}
}

func affinityOpt(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func podAffinity(key, app string) podOpt {
	return func(p *corev1.Pod) {
		a := affinityOpt(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}})
	}
}

func antiAffinity(key, app string) podOpt {
	return func(p *corev1.Pod) {
		a := affinityOpt(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}})
	}
}

func nodeAffinityTerms(terms ...corev1.NodeSelectorTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinityOpt(p)
		a.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}
	}
}

func hostPortOpt(port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

func req(key string, op corev1.NodeSelectorOperator, vals ...string) karpenter.NodeSelectorRequirementWithMinValues {
	return karpenter.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals}
}

func gpuTaint() corev1.Taint {
	return corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
}

// fixture is a snapshot and a valid plan for it.
type fixture struct {
	snap *packer.Snapshot
	plan *packer.Plan
	cat  *catalog.Catalog
}

func (f *fixture) pool(name string) *karpenter.NodePool {
	for _, np := range f.snap.NodePools {
		if np.Name == name {
			return np
		}
	}
	return nil
}

func (f *fixture) pod(name string) *corev1.Pod {
	for _, p := range f.snap.Pods {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (f *fixture) newNode(name string) *packer.NewNode {
	for i := range f.plan.NewNodes {
		if f.plan.NewNodes[i].Name == name {
			return &f.plan.NewNodes[i]
		}
	}
	return nil
}

// place builds a new node the way a correct engine describes it.
func (f *fixture) place(t testing.TB, name, pool, typ, zone, ct string, options []string, pods ...string) packer.NewNode {
	t.Helper()
	np := f.pool(pool)
	it, ok := f.cat.Lookup(typ)
	if !ok {
		t.Fatalf("no type %s", typ)
	}
	var off catalog.Offering
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			off = o
		}
	}
	lbl := catalog.Labels(it, off)
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		lbl[k] = v
	}
	lbl[karpenter.NodePoolLabelKey] = pool
	alloc := map[string]string{}
	for rn, q := range catalog.Allocatable(it, catalog.Overhead{}) {
		alloc[string(rn)] = q.String()
	}
	if options == nil {
		options = []string{typ}
	}
	return packer.NewNode{Name: name, NodePool: pool, NodeClass: "default", InstanceType: typ, CapacityType: ct, Zone: zone,
		PricePerHour: off.PricePerHour, Options: options, Labels: lbl, Taints: np.Spec.Template.Spec.Taints,
		Allocatable: alloc, Pods: pods}
}

func (f *fixture) total() {
	f.plan.TotalPricePerHour = 0
	for _, n := range f.plan.NewNodes {
		f.plan.TotalPricePerHour += n.PricePerHour
	}
}

func existingNode(cat *catalog.Catalog, name, pool, typ, zone string) *corev1.Node {
	it, _ := cat.Lookup(typ)
	lbl := catalog.Labels(it, catalog.Offering{Zone: zone, CapacityType: "on-demand"})
	lbl[corev1.LabelHostname] = name
	if pool != "" {
		lbl[karpenter.NodePoolLabelKey] = pool
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl},
		Status: corev1.NodeStatus{Allocatable: catalog.Allocatable(it, catalog.Overhead{}), Capacity: catalog.Capacity(it)}}
}

func daemonSet(name string, cpu, mem string, opts ...podOpt) *appsv1.DaemonSet {
	p := mkPod(name, cpu, mem, opts...)
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: p.Spec}}}
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	cat := testCatalog(t)
	gpuLimit := quantities("nvidia.com/gpu", "2")
	snap := &packer.Snapshot{
		Catalog:     cat,
		NodeClasses: []*karpenter.EC2NodeClass{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}},
		NodePools: []*karpenter.NodePool{
			{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpenter.NodePoolSpec{
				Limits: quantities("cpu", "100"),
				Template: karpenter.NodeClaimTemplate{
					ObjectMeta: karpenter.TemplateMeta{Labels: map[string]string{"team": "web"}},
					Spec: karpenter.NodeClaimTemplateSpec{NodeClassRef: &karpenter.NodeClassReference{Name: "default"},
						Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
							req("kubernetes.io/arch", corev1.NodeSelectorOpIn, "amd64"),
							req("karpenter.sh/capacity-type", corev1.NodeSelectorOpIn, "spot", "on-demand"),
							req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "m"),
						}}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: karpenter.NodePoolSpec{
				Limits: gpuLimit,
				Template: karpenter.NodeClaimTemplate{
					ObjectMeta: karpenter.TemplateMeta{Labels: map[string]string{"gpu": "true"}},
					Spec: karpenter.NodeClaimTemplateSpec{NodeClassRef: &karpenter.NodeClassReference{Name: "default"},
						Taints: []corev1.Taint{gpuTaint()},
						Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
							req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "g6"),
							req("karpenter.sh/capacity-type", corev1.NodeSelectorOpIn, "spot", "on-demand"),
						}}}}},
		},
		DaemonSets: []*appsv1.DaemonSet{
			daemonSet("logger", "100m", "100Mi", func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			}),
			daemonSet("gpu-plugin", "50m", "50Mi", nodeSelector("gpu", "true"), tolerate("nvidia.com/gpu")),
		},
	}
	nodeA := existingNode(cat, "node-a", "default", "m5.xlarge", "us-east-1a")
	running := mkPod("running-web", "500m", "512Mi", label("app", "web"))
	running.Spec.NodeName = "node-a"
	snap.Nodes = []packer.NodeState{{Node: nodeA, Pods: []*corev1.Pod{running}}}
	snap.Pods = []*corev1.Pod{
		mkPod("web-0", "500m", "512Mi", label("app", "web"), spread(corev1.LabelTopologyZone, 1, "web")),
		mkPod("web-1", "500m", "512Mi", label("app", "web"), spread(corev1.LabelTopologyZone, 1, "web")),
		mkPod("web-2", "500m", "512Mi", label("app", "web"), spread(corev1.LabelTopologyZone, 1, "web")),
		mkPod("db-0", "500m", "1Gi", label("app", "db"), antiAffinity(corev1.LabelHostname, "db")),
		mkPod("db-1", "500m", "1Gi", label("app", "db"), antiAffinity(corev1.LabelHostname, "db")),
		mkPod("small-0", "100m", "128Mi", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: quantities("cpu", "1")}}}
		}),
		// Limits only, as seed 002's CUDA pod: requests its limits.
		mkPod("cuda-0", "0", "0", tolerate("nvidia.com/gpu"), nodeSelector("karpenter.k8s.aws/instance-gpu-name", "l4"), func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: quantities("nvidia.com/gpu", "1", "cpu", "1", "memory", "2Gi")}
		}),
	}
	f := &fixture{snap: snap, cat: cat, plan: &packer.Plan{Region: "us-east-1"}}
	f.plan.NewNodes = []packer.NewNode{
		f.place(t, "n-b", "default", "m5.large", "us-east-1b", "spot", []string{"m5.large", "m5.xlarge"}, "default/web-0", "default/db-0"),
		f.place(t, "n-c", "default", "m5.large", "us-east-1c", "spot", nil, "default/web-1", "default/db-1"),
		f.place(t, "n-gpu", "gpu", "g6.xlarge", "us-east-1a", "spot", nil, "default/cuda-0"),
	}
	f.plan.ExistingNodes = []packer.ExistingNode{{Name: "node-a", Pods: []string{"default/web-2", "default/small-0"}}}
	f.total()
	return f
}
