package packertest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// A small catalog whose answers can be worked out by hand. Allocatable (Karpenter's
// overhead, shared/catalog): 2 vCPU → 1930m, 4 vCPU → 3920m; 8 GiB/29 pods → 6903Mi.
var zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

func offers(od, spot float64) []catalog.Offering {
	var out []catalog.Offering
	for _, z := range zones {
		out = append(out,
			catalog.Offering{Zone: z, CapacityType: "on-demand", PricePerHour: od, Available: true},
			catalog.Offering{Zone: z, CapacityType: "spot", PricePerHour: spot, Available: true})
	}
	return out
}

func smallTypes() []catalog.InstanceType {
	return []catalog.InstanceType{
		{Name: "m5.large", Arch: "amd64", VCPU: 2, MemoryMiB: 8192, MaxPods: 29, Offerings: offers(0.096, 0.04)},
		{Name: "m5.xlarge", Arch: "amd64", VCPU: 4, MemoryMiB: 16384, MaxPods: 58, Offerings: offers(0.192, 0.08)},
		{Name: "m5.2xlarge", Arch: "amd64", VCPU: 8, MemoryMiB: 32768, MaxPods: 58, Offerings: offers(0.384, 0.16)},
		{Name: "m6g.large", Arch: "arm64", VCPU: 2, MemoryMiB: 8192, MaxPods: 29, Offerings: offers(0.077, 0.03)},
		{Name: "g6.xlarge", Arch: "amd64", VCPU: 4, MemoryMiB: 16384, MaxPods: 58,
			GPU: &catalog.GPU{Count: 1, Name: "l4", Manufacturer: "nvidia", MemoryMiB: 22888}, Offerings: offers(0.8048, 0.35)},
	}
}

func mustCatalog(t testing.TB, types []catalog.InstanceType) *catalog.Catalog {
	t.Helper()
	c, err := catalog.New("us-east-1", types)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func qty(s string) resource.Quantity { return resource.MustParse(s) }

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = qty(kv[i+1])
	}
	return out
}

type podOpt func(*corev1.Pod)

func pod(name, cpu, mem string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
			Resources: corev1.ResourceRequirements{Requests: rl("cpu", cpu, "memory", mem)}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func pods(prefix string, n int, cpu, mem string, opts ...podOpt) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		out = append(out, pod(fmt.Sprintf("%s-%d", prefix, i), cpu, mem, opts...))
	}
	return out
}

func withLabel(k, v string) podOpt { return func(p *corev1.Pod) { p.Labels[k] = v } }

func withSelector(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[k] = v
	}
}

func tolerating(key string, effect corev1.TaintEffect) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect})
	}
}

func aff(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func spreadOn(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, app string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}})
	}
}

func term(key, app string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
}

func podAffinity(key, app string) podOpt {
	return func(p *corev1.Pod) {
		a := aff(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term(key, app))
	}
}

func podAntiAffinity(key, app string) podOpt {
	return func(p *corev1.Pod) {
		a := aff(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term(key, app))
	}
}

func nodeTerm(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: vals}}}
}

func requiredNodeAffinity(terms ...corev1.NodeSelectorTerm) podOpt {
	return func(p *corev1.Pod) {
		a := aff(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
	}
}

func preferredNodeAffinity(weight int32, t corev1.NodeSelectorTerm) podOpt {
	return func(p *corev1.Pod) {
		a := aff(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: t})
	}
}

func hostPort(port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

func poolOf(name string, weight int32, reqs ...karpenter.NodeSelectorRequirementWithMinValues) *karpenter.NodePool {
	return workload.Pool(name, weight, reqs...)
}

func bothCapacityTypes() karpenter.NodeSelectorRequirementWithMinValues {
	return workload.Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand")
}

func daemonSet(name, cpu, mem string, opts ...podOpt) *appsv1.DaemonSet {
	p := pod(name, cpu, mem, opts...)
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: p.Spec}}}
}

// snapshot is a cluster on the small catalog with a default pool allowing both
// capacity types, unless pools are given.
func snapshot(t testing.TB, ps []*corev1.Pod, pools ...*karpenter.NodePool) *packer.Snapshot {
	if len(pools) == 0 {
		pools = []*karpenter.NodePool{poolOf("default", 0, bothCapacityTypes())}
	}
	return &packer.Snapshot{Pods: ps, NodePools: pools, NodeClasses: []*karpenter.EC2NodeClass{workload.DefaultNodeClass()},
		Catalog: mustCatalog(t, smallTypes())}
}

// solved is a plan with indexes for assertions.
type solved struct {
	t     testing.TB
	plan  *packer.Plan
	where map[string]string // pod → node name ("" unschedulable)
	nodes map[string]*packer.NewNode
}

// solve runs the engine, fails on any checker error and indexes the plan.
func solve(t testing.TB, snap *packer.Snapshot) *solved {
	t.Helper()
	plan := packer.Solve(snap, packer.Options{})
	if plan == nil {
		t.Fatal("Solve returned nil")
	}
	for _, e := range check.Plan(snap, plan, snap.Catalog) {
		t.Errorf("checker: %v", e)
	}
	s := &solved{t: t, plan: plan, where: map[string]string{}, nodes: map[string]*packer.NewNode{}}
	for i := range plan.NewNodes {
		n := &plan.NewNodes[i]
		s.nodes[n.Name] = n
		for _, p := range n.Pods {
			s.where[p] = n.Name
		}
	}
	for _, e := range plan.ExistingNodes {
		for _, p := range e.Pods {
			s.where[p] = e.Name
		}
	}
	for _, u := range plan.Unschedulable {
		s.where[u.Pod] = ""
	}
	return s
}

// node returns the new node the pod is on, failing when it is not on a new node.
func (s *solved) node(podName string) *packer.NewNode {
	s.t.Helper()
	n := s.nodes[s.where["default/"+podName]]
	if n == nil {
		s.t.Fatalf("pod %s is not on a new node (plan: %s)", podName, s.dump())
	}
	return n
}

func (s *solved) unschedulable(podName string) string {
	for _, u := range s.plan.Unschedulable {
		if u.Pod == "default/"+podName {
			return u.Reason
		}
	}
	return ""
}

func (s *solved) dump() string {
	var b strings.Builder
	for _, n := range s.plan.NewNodes {
		fmt.Fprintf(&b, "\n  new %s %s/%s %s %s %v $%v %v", n.Name, n.NodePool, n.InstanceType, n.Zone, n.CapacityType, n.Options, n.PricePerHour, n.Pods)
	}
	for _, e := range s.plan.ExistingNodes {
		fmt.Fprintf(&b, "\n  existing %s %v", e.Name, e.Pods)
	}
	for _, u := range s.plan.Unschedulable {
		fmt.Fprintf(&b, "\n  unschedulable %s: %s", u.Pod, u.Reason)
	}
	return b.String()
}

// expectNode asserts pool, type, capacity type and price of a pod's new node.
func (s *solved) expectNode(podName, pool, typ, capacityType string, price float64) *packer.NewNode {
	s.t.Helper()
	n := s.node(podName)
	if n.NodePool != pool || n.InstanceType != typ || n.CapacityType != capacityType || n.PricePerHour != price {
		s.t.Errorf("pod %s: got %s/%s %s $%v, want %s/%s %s $%v%s", podName, n.NodePool, n.InstanceType, n.CapacityType, n.PricePerHour,
			pool, typ, capacityType, price, s.dump())
	}
	return n
}

func (s *solved) zonesOf(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, s.node(n).Zone)
	}
	sort.Strings(out)
	return out
}

func planJSON(t testing.TB, p *packer.Plan) []byte {
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
