package workload

import (
	"fmt"
	"math/rand"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// MixedSeed seeds MixedSnapshot.
const MixedSeed = 7

func q(s string) resource.Quantity { return resource.MustParse(s) }

// replicas stamps n identical pods <name>-<i> from a template, as a Deployment would.
func replicas(name string, n int, tmpl *corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		p := tmpl.DeepCopy()
		p.Name = fmt.Sprintf("%s-%d", name, i)
		p.Namespace = Namespace
		out[i] = p
	}
	return out
}

func appPod(app string, cpu, mem string) *corev1.Pod {
	return benchPod("", map[string]string{"app": app}, q(cpu), q(mem))
}

// MixedSnapshot is a production-like cluster for the real catalog (count pods,
// default 5,000): three pools (general c/m/r generation > 5 on amd64 and arm64, spot
// and on-demand; a spot-only batch pool with a taint and a higher weight; a GPU pool
// with an nvidia.com/gpu taint and a GPU limit), two DaemonSets (one everywhere
// with a host port, one on GPU nodes), twelve existing general nodes with running
// pods, and Deployments of web services with zonal spread, arm64 services,
// memory-heavy services on r types, batch jobs, StatefulSet-like groups with
// hostname anti-affinity, zonal self-affinity caches, pods with init containers and
// sidecars, and GPU pods requesting nvidia.com/gpu through limits only.
func MixedSnapshot(count int, cat *catalog.Catalog) *packer.Snapshot {
	r := rand.New(rand.NewSource(MixedSeed))
	general := Pool("general", 10,
		Req(karpenter.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
		Req(karpenter.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "5"),
		Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64"),
		Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"))
	general.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: q("50000")}
	batch := Pool("batch", 50,
		Req(karpenter.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c"),
		Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
		Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"))
	batch.Spec.Template.ObjectMeta.Labels = map[string]string{"workload": "batch"}
	batch.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "workload", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	gpu := Pool("gpu", 0,
		Req(karpenter.LabelInstanceFamily, corev1.NodeSelectorOpIn, "g5", "g6", "g6e"),
		Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"))
	gpu.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	gpu.Spec.Limits = corev1.ResourceList{"nvidia.com/gpu": q("200")}

	snap := &packer.Snapshot{
		NodePools:   []*karpenter.NodePool{general, batch, gpu},
		NodeClasses: []*karpenter.EC2NodeClass{DefaultNodeClass()},
		Catalog:     cat,
		DaemonSets: []*appsv1.DaemonSet{
			daemonSet("node-exporter", "monitoring", "50m", "64Mi", nil, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, 9100),
			daemonSet("nvidia-device-plugin", "kube-system", "50m", "100Mi",
				&corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpenter.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists}}}}}},
				[]corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}, 0),
		},
	}
	// Existing general nodes with some pods running.
	if it, ok := cat.Lookup("m6i.2xlarge"); ok {
		for i := 0; i < 12; i++ {
			zone := BenchZones[i%3]
			name := fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i%3, 10+i)
			node := ExistingNode(name, general, it, catalog.Offering{Zone: zone, CapacityType: "on-demand"})
			var running []*corev1.Pod
			for j := 0; j < 3; j++ {
				p := appPod(fmt.Sprintf("web-%d", j), "500m", "1Gi")
				p.Name = fmt.Sprintf("running-%d-%d", i, j)
				p.Spec.NodeName = name
				p.Status.Phase = corev1.PodRunning
				running = append(running, p)
			}
			snap.Nodes = append(snap.Nodes, packer.NodeState{Node: node, Pods: running})
		}
	}

	cpus := []string{"250m", "500m", "1", "1500m", "2"}
	mems := []string{"512Mi", "1Gi", "2Gi", "3Gi", "4Gi"}
	var pods []*corev1.Pod
	add := func(name string, n int, tmpl *corev1.Pod) {
		if left := count - len(pods); n > left {
			n = left
		}
		if n > 0 {
			pods = append(pods, replicas(name, n, tmpl)...)
		}
	}
	share := func(f float64) int { return int(f * float64(count)) }
	// Web services spread over zones (40%).
	for i := 0; len(pods) < share(0.40); i++ {
		app := fmt.Sprintf("web-%d", i)
		p := appPod(app, cpus[r.Intn(len(cpus))], mems[r.Intn(len(mems))])
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
		add(app, 20+r.Intn(81), p)
	}
	// arm64 services (15%).
	for i := 0; len(pods) < share(0.55); i++ {
		app := fmt.Sprintf("arm-%d", i)
		p := appPod(app, cpus[r.Intn(len(cpus))], mems[r.Intn(len(mems))])
		p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"}
		add(app, 10+r.Intn(91), p)
	}
	// Memory-heavy services on r types (10%).
	for i := 0; len(pods) < share(0.65); i++ {
		app := fmt.Sprintf("cache-mem-%d", i)
		p := appPod(app, []string{"1", "2"}[r.Intn(2)], []string{"8Gi", "12Gi", "16Gi", "30Gi"}[r.Intn(4)])
		p.Spec.NodeSelector = map[string]string{karpenter.LabelInstanceCategory: "r"}
		add(app, 5+r.Intn(46), p)
	}
	// Batch jobs on the tainted spot pool (10%).
	for i := 0; len(pods) < share(0.75); i++ {
		app := fmt.Sprintf("batch-%d", i)
		p := appPod(app, []string{"1", "2", "4"}[r.Intn(3)], []string{"2Gi", "4Gi", "8Gi"}[r.Intn(3)])
		p.Spec.NodeSelector = map[string]string{"workload": "batch"}
		p.Spec.Tolerations = []corev1.Toleration{{Key: "workload", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
		add(app, 20+r.Intn(81), p)
	}
	// Stateful groups, one replica per node (5%).
	for i := 0; len(pods) < share(0.80); i++ {
		app := fmt.Sprintf("db-%d", i)
		p := appPod(app, []string{"1", "2"}[r.Intn(2)], []string{"4Gi", "8Gi"}[r.Intn(2)])
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
		add(app, 3+r.Intn(3), p)
	}
	// Zonal self-affinity caches (8%).
	for i := 0; len(pods) < share(0.88); i++ {
		app := fmt.Sprintf("cache-%d", i)
		p := appPod(app, cpus[r.Intn(len(cpus))], mems[r.Intn(len(mems))])
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
		add(app, 5+r.Intn(26), p)
	}
	// Init containers and sidecars (10%).
	always := corev1.ContainerRestartPolicyAlways
	for i := 0; len(pods) < share(0.98); i++ {
		app := fmt.Sprintf("meshed-%d", i)
		p := appPod(app, cpus[r.Intn(len(cpus))], mems[r.Intn(len(mems))])
		p.Spec.InitContainers = []corev1.Container{
			{Name: "proxy", Image: "envoy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("128Mi")}}},
			{Name: "migrate", Image: "migrate", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("1Gi")}}},
		}
		add(app, 10+r.Intn(41), p)
	}
	// GPU pods requesting through limits only (the rest, about 2%).
	for i := 0; len(pods) < count; i++ {
		app := fmt.Sprintf("cuda-%d", i)
		p := appPod(app, "0", "0")
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{
			"nvidia.com/gpu": q("1"), corev1.ResourceCPU: q([]string{"2", "3"}[r.Intn(2)]), corev1.ResourceMemory: q([]string{"8Gi", "12Gi"}[r.Intn(2)])}}
		p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		add(app, 2+r.Intn(9), p)
	}
	snap.Pods = pods
	return snap
}

func daemonSet(name, ns, cpu, mem string, aff *corev1.NodeAffinity, tol []corev1.Toleration, hostPort int32) *appsv1.DaemonSet {
	c := corev1.Container{Name: name, Image: name, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q(cpu), corev1.ResourceMemory: q(mem)}}}
	if hostPort > 0 {
		c.Ports = []corev1.ContainerPort{{ContainerPort: hostPort, HostPort: hostPort}}
	}
	spec := corev1.PodSpec{Containers: []corev1.Container{c}, Tolerations: tol}
	if aff != nil {
		spec.Affinity = &corev1.Affinity{NodeAffinity: aff}
	}
	lbl := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: spec}},
	}
}

// ExistingNode builds a ready Node of pool launched as (it, off), with the labels
// Karpenter gives it and the catalog's capacity and allocatable.
func ExistingNode(name string, pool *karpenter.NodePool, it *catalog.InstanceType, off catalog.Offering) *corev1.Node {
	lbl := catalog.Labels(it, off)
	lbl[corev1.LabelHostname] = name
	if pool != nil {
		lbl[karpenter.NodePoolLabelKey] = pool.Name
		for k, v := range pool.Spec.Template.ObjectMeta.Labels {
			lbl[k] = v
		}
	}
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl},
		Status: corev1.NodeStatus{
			Capacity:    catalog.Capacity(it),
			Allocatable: catalog.Allocatable(it, catalog.Overhead{}),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	if pool != nil {
		n.Spec.Taints = append(n.Spec.Taints, pool.Spec.Template.Spec.Taints...)
	}
	return n
}
