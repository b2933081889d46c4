package workload

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// RandomCatalog builds a small catalog of realistic-looking types (c/m/r families,
// amd64 and arm64, a GPU family), with some offerings missing or unavailable.
func RandomCatalog(r *rand.Rand) *catalog.Catalog {
	sizes := []struct {
		name string
		vcpu int
	}{{"medium", 1}, {"large", 2}, {"xlarge", 4}, {"2xlarge", 8}, {"4xlarge", 16}, {"8xlarge", 32}}
	var types []catalog.InstanceType
	for _, fam := range []struct {
		name  string
		arch  string
		gibPC int
	}{{"c6i", "amd64", 2}, {"m6i", "amd64", 4}, {"r6i", "amd64", 8}, {"c7g", "arm64", 2}, {"m7g", "arm64", 4}} {
		for _, s := range sizes {
			if r.Intn(4) == 0 {
				continue
			}
			types = append(types, randomType(r, fam.name+"."+s.name, fam.arch, s.vcpu, fam.gibPC, nil))
		}
	}
	for _, g := range []struct {
		size       string
		vcpu, gpus int
	}{{"xlarge", 4, 1}, {"2xlarge", 8, 1}, {"12xlarge", 48, 4}} {
		types = append(types, randomType(r, "g6."+g.size, "amd64", g.vcpu, 4, &catalog.GPU{Count: g.gpus, Name: "l4", Manufacturer: "nvidia", MemoryMiB: 22888}))
	}
	c, err := catalog.New("us-east-1", types)
	if err != nil {
		panic("workload: random catalog is invalid: " + err.Error())
	}
	return c
}

func randomType(r *rand.Rand, name, arch string, vcpu, gibPerCPU int, gpu *catalog.GPU) catalog.InstanceType {
	mem := int64(vcpu * gibPerCPU * 1024)
	maxPods := 8 + vcpu*7
	if maxPods > 234 {
		maxPods = 234
	}
	od := float64(vcpu)*0.034 + float64(mem)/1024*0.0045
	if gpu != nil {
		od += float64(gpu.Count) * 0.55
	}
	od = math.Round(od*(0.95+0.1*r.Float64())*1e4) / 1e4
	var offs []catalog.Offering
	for _, z := range BenchZones {
		if r.Intn(8) == 0 {
			continue
		}
		offs = append(offs, catalog.Offering{Zone: z, CapacityType: "on-demand", PricePerHour: od, Available: r.Intn(20) != 0})
		spot := math.Round(od*(0.3+0.25*r.Float64())*1e4) / 1e4
		offs = append(offs, catalog.Offering{Zone: z, CapacityType: "spot", PricePerHour: spot, Available: r.Intn(6) != 0})
	}
	if len(offs) == 0 {
		offs = append(offs, catalog.Offering{Zone: BenchZones[0], CapacityType: "on-demand", PricePerHour: od, Available: true})
	}
	return catalog.InstanceType{Name: name, Arch: arch, VCPU: vcpu, MemoryMiB: mem, MaxPods: maxPods, GPU: gpu, Offerings: offs}
}

// Random builds a seeded random cluster for property tests: a random catalog; one to
// three pools with random requirements, taints, weights and (sometimes tight)
// limits; existing and in-flight nodes with running pods; DaemonSets with
// selectors and tolerations; and up to maxPods pending pods in Deployment-like
// groups carrying random requests (init containers, sidecars, overhead, GPUs,
// limits-only containers), node selectors, required and preferred node affinity,
// tolerations, zone and hostname spread, pod affinity and anti-affinity and host
// ports. A second stream seeded from the same seed adds topology keys beyond
// hostname and zone (capacity type, arch, a label pools choose values for), node
// inclusion policies, minDomains, matchLabelKeys and system nodes no pool owns,
// minValues, without changing what the first stream draws. The same seed gives the same
// snapshot.
func Random(seed int64, maxPods int) *packer.Snapshot {
	r := rand.New(rand.NewSource(seed))
	r2 := rand.New(rand.NewSource(seed*7919 + 1))
	cat := RandomCatalog(r)
	snap := &packer.Snapshot{Catalog: cat, NodeClasses: []*karpenter.EC2NodeClass{DefaultNodeClass()}}

	npools := 1 + r.Intn(3)
	for i := 0; i < npools; i++ {
		np := randomPool(r, i)
		if r2.Intn(4) == 0 {
			// minValues on a key the types decide.
			key := []string{corev1.LabelInstanceTypeStable, karpenter.LabelInstanceFamily}[r2.Intn(2)]
			req := Req(key, corev1.NodeSelectorOpExists)
			req.MinValues = ptr(2 + r2.Intn(3))
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req)
		}
		if r2.Intn(3) == 0 {
			// A label the pool gives its nodes one of several values of.
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, Req("rack", corev1.NodeSelectorOpIn, pick(r2, racks, 1+r2.Intn(3))...))
		}
		snap.NodePools = append(snap.NodePools, np)
	}
	// Most clusters get a plain catch-all pool so that most pods can land somewhere.
	if r.Intn(4) != 0 {
		snap.NodePools = append(snap.NodePools, Pool("catch-all", 0, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand")))
	}
	apps := []string{"a", "b", "c", "d", "e"}

	// Existing nodes.
	nexist := r.Intn(5)
	for i := 0; i < nexist; i++ {
		np := snap.NodePools[r.Intn(len(snap.NodePools))]
		it := &cat.InstanceTypes[r.Intn(len(cat.InstanceTypes))]
		off := it.Offerings[r.Intn(len(it.Offerings))]
		name := fmt.Sprintf("existing-%d", i)
		node := ExistingNode(name, np, it, off)
		var running []*corev1.Pod
		for j := r.Intn(4); j > 0; j-- {
			p := benchPod(fmt.Sprintf("running-%d-%d", i, j), map[string]string{"app": apps[r.Intn(len(apps))]}, q("100m"), q("128Mi"))
			p.Spec.NodeName = name
			p.Status.Phase = corev1.PodRunning
			if r.Intn(5) == 0 {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}}}}}
			}
			running = append(running, p)
		}
		if r2.Intn(3) == 0 {
			node.Labels["rack"] = racks[r2.Intn(len(racks))]
		}
		snap.Nodes = append(snap.Nodes, packer.NodeState{Node: node, Pods: running})
	}
	// System nodes no pool owns, often tainted, with a pod of some app.
	for i := r2.Intn(3); i > 0; i-- {
		it := &cat.InstanceTypes[r2.Intn(len(cat.InstanceTypes))]
		name := fmt.Sprintf("system-%d", i)
		node := ExistingNode(name, nil, it, it.Offerings[r2.Intn(len(it.Offerings))])
		node.Labels["role"] = "system"
		if r2.Intn(2) == 0 {
			node.Spec.Taints = []corev1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}
		p := benchPod(name+"-pod", map[string]string{"app": apps[r2.Intn(len(apps))]}, q("100m"), q("128Mi"))
		p.Spec.NodeName = name
		p.Status.Phase = corev1.PodRunning
		snap.Nodes = append(snap.Nodes, packer.NodeState{Node: node, Pods: []*corev1.Pod{p}})
	}
	// In-flight claims.
	for i := r.Intn(3); i > 0; i-- {
		np := snap.NodePools[r.Intn(len(snap.NodePools))]
		it := &cat.InstanceTypes[r.Intn(len(cat.InstanceTypes))]
		off := it.Offerings[r.Intn(len(it.Offerings))]
		nc := &karpenter.NodeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: karpenter.APIVersion, Kind: karpenter.NodeClaimKind},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-inflight-%d", np.Name, i), Labels: map[string]string{karpenter.NodePoolLabelKey: np.Name}},
			Spec: karpenter.NodeClaimSpec{
				Taints:       np.Spec.Template.Spec.Taints,
				NodeClassRef: np.Spec.Template.Spec.NodeClassRef,
				Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
					Req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, it.Name),
					Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, off.Zone),
					Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, off.CapacityType),
					Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, it.Arch),
				},
			},
		}
		for k, v := range np.Spec.Template.ObjectMeta.Labels {
			nc.Labels[k] = v
		}
		// As Karpenter writes a NodeClaim: the pool's requirements on the keys the
		// offering does not decide.
		for _, req := range np.Spec.Template.Spec.Requirements {
			if !slices.ContainsFunc(nc.Spec.Requirements, func(x karpenter.NodeSelectorRequirementWithMinValues) bool { return x.Key == req.Key }) {
				nc.Spec.Requirements = append(nc.Spec.Requirements, req)
			}
		}
		snap.InFlight = append(snap.InFlight, nc)
	}
	// DaemonSets.
	for i := r.Intn(3); i > 0; i-- {
		var aff *corev1.NodeAffinity
		var tol []corev1.Toleration
		if r.Intn(2) == 0 {
			np := snap.NodePools[r.Intn(len(snap.NodePools))]
			aff = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpenter.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{np.Name}}}}}}}
		}
		if r.Intn(2) == 0 {
			tol = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		port := int32(0)
		if r.Intn(3) == 0 {
			port = 9100
		}
		snap.DaemonSets = append(snap.DaemonSets, daemonSet(fmt.Sprintf("ds-%d", i), "kube-system",
			[]string{"50m", "100m", "200m"}[r.Intn(3)], []string{"64Mi", "128Mi", "256Mi"}[r.Intn(3)], aff, tol, port))
	}

	// Pending pods in groups.
	target := 1 + r.Intn(maxPods)
	group := 0
	for len(snap.Pods) < target {
		n := 1 + r.Intn(12)
		if n > target-len(snap.Pods) {
			n = target - len(snap.Pods)
		}
		tmpl := randomPodTemplate(r, snap, group, apps)
		moreTopology(r2, tmpl)
		snap.Pods = append(snap.Pods, replicas(fmt.Sprintf("g%d", group), n, tmpl)...)
		group++
	}
	return snap
}

func randomPool(r *rand.Rand, i int) *karpenter.NodePool {
	name := fmt.Sprintf("pool-%d", i)
	var reqs []karpenter.NodeSelectorRequirementWithMinValues
	switch r.Intn(3) {
	case 0:
		reqs = append(reqs, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"))
	case 1:
		reqs = append(reqs, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"))
	default:
		reqs = append(reqs, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"))
	}
	if r.Intn(2) == 0 {
		reqs = append(reqs, Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, []string{"amd64", "arm64"}[r.Intn(2)]))
	}
	if r.Intn(3) == 0 {
		reqs = append(reqs, Req(karpenter.LabelInstanceCategory, corev1.NodeSelectorOpIn, pick(r, []string{"c", "m", "r", "g"}, 1+r.Intn(3))...))
	}
	if r.Intn(4) == 0 {
		reqs = append(reqs, Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, pick(r, BenchZones, 1+r.Intn(3))...))
	}
	if r.Intn(4) == 0 {
		reqs = append(reqs, Req(karpenter.LabelInstanceCPU, corev1.NodeSelectorOpLt, strconv.Itoa([]int{5, 9, 17}[r.Intn(3)])))
	}
	np := Pool(name, int32(r.Intn(3)*10), reqs...)
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"pool": name}
	if r.Intn(3) == 0 {
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: name, Effect: []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute}[r.Intn(2)]}}
	}
	if r.Intn(6) == 0 {
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: "soft", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule})
	}
	if r.Intn(3) == 0 {
		np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: q(strconv.Itoa([]int{6, 16, 40, 200}[r.Intn(4)]))}
		if r.Intn(2) == 0 {
			np.Spec.Limits["nodes"] = q(strconv.Itoa(1 + r.Intn(8)))
		}
		if r.Intn(3) == 0 {
			np.Spec.Limits["nvidia.com/gpu"] = q(strconv.Itoa(r.Intn(5)))
		}
	}
	return np
}

func pick(r *rand.Rand, from []string, n int) []string {
	idx := r.Perm(len(from))[:n]
	sort.Ints(idx)
	out := make([]string, n)
	for i, j := range idx {
		out[i] = from[j]
	}
	return out
}

func randomPodTemplate(r *rand.Rand, snap *packer.Snapshot, group int, apps []string) *corev1.Pod {
	app := fmt.Sprintf("app-%d", group)
	if r.Intn(3) == 0 {
		app = apps[r.Intn(len(apps))]
	}
	cpu := []string{"50m", "100m", "250m", "500m", "1", "2", "3500m"}[r.Intn(7)]
	mem := []string{"64Mi", "256Mi", "512Mi", "1Gi", "2Gi", "6Gi", "14Gi"}[r.Intn(7)]
	p := benchPod("", map[string]string{"app": app}, q(cpu), q(mem))
	always := corev1.ContainerRestartPolicyAlways
	switch r.Intn(10) {
	case 0:
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("1500m")}}}}
	case 1:
		p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("200m"), corev1.ResourceMemory: q("256Mi")}}}}
	case 2:
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("120Mi")}
	case 3:
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q(cpu), corev1.ResourceMemory: q(mem)}}
	}
	if r.Intn(12) == 0 {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": q(strconv.Itoa(1 + r.Intn(2)))}
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists})
	}
	// Tolerations for pool taints.
	if r.Intn(3) == 0 {
		np := snap.NodePools[r.Intn(len(snap.NodePools))]
		for _, t := range np.Spec.Template.Spec.Taints {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect})
		}
	}
	if r.Intn(12) == 0 {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
	}
	// Node selection.
	switch r.Intn(10) {
	case 0:
		p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: []string{"amd64", "arm64"}[r.Intn(2)]}
	case 1:
		p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: BenchZones[r.Intn(3)]}
	case 2:
		np := snap.NodePools[r.Intn(len(snap.NodePools))]
		p.Spec.NodeSelector = map[string]string{karpenter.NodePoolLabelKey: np.Name}
	case 3:
		p.Spec.NodeSelector = map[string]string{karpenter.CapacityTypeLabelKey: []string{"spot", "on-demand"}[r.Intn(2)]}
	case 4:
		aff := affinity(p)
		aff.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpenter.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"r"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpenter.LabelInstanceCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"7"}}}},
		}}}
	case 5:
		aff := affinity(p)
		aff.NodeAffinity = &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
			{Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{BenchZones[r.Intn(3)]}}}}},
		}}
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	switch r.Intn(12) {
	case 0, 1:
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: int32(1 + r.Intn(2)), TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
	case 2:
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
	case 3:
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel}}
	case 4, 5:
		affinity(p).PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: sel}}}
	case 6:
		affinity(p).PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelTopologyZone, LabelSelector: sel}}}
	case 7:
		affinity(p).PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: sel}}}
	case 8:
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
	}
	return p
}

// racks are the values of the label some random pools choose for their nodes.
var racks = []string{"r1", "r2", "r3"}

// moreTopology gives a random pod template, drawing from its own stream,
// constraints on keys beyond hostname and zone and the spread fields Kubernetes
// added later (policies, minDomains, matchLabelKeys).
func moreTopology(r *rand.Rand, p *corev1.Pod) {
	if r.Intn(2) == 0 {
		p.Labels["rev"] = []string{"1", "2"}[r.Intn(2)]
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}
	keys := []string{karpenter.CapacityTypeLabelKey, corev1.LabelArchStable, "rack", corev1.LabelTopologyZone}
	switch r.Intn(8) {
	case 0, 1:
		c := corev1.TopologySpreadConstraint{MaxSkew: int32(1 + r.Intn(2)), TopologyKey: keys[r.Intn(len(keys))], WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}
		if r.Intn(3) == 0 {
			c.NodeAffinityPolicy = ptr(corev1.NodeInclusionPolicyIgnore)
		}
		if r.Intn(3) == 0 {
			c.NodeTaintsPolicy = ptr(corev1.NodeInclusionPolicyHonor)
		}
		if r.Intn(3) == 0 {
			c.MinDomains = ptr(int32(2 + r.Intn(3)))
		}
		if r.Intn(3) == 0 {
			c.MatchLabelKeys = []string{"rev"}
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	case 2:
		affinity(p).PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: keys[r.Intn(3)], LabelSelector: sel, MatchLabelKeys: []string{"rev"}}}}
	case 3:
		affinity(p).PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: keys[r.Intn(3)], LabelSelector: sel}}}
	}
}

func ptr[T any](v T) *T { return &v }

func affinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}
