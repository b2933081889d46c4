package workload

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Namespace of every generated pod.
const Namespace = "default"

// KarpenterSeed is the seed of Karpenter's benchmark (rand.NewSource(42)).
const KarpenterSeed = 42

// karpenterRand draws exactly as Karpenter's scheduling_benchmark_test.go does
// (math/rand v1 with its seed), so the same pod count gives the same pods.
type karpenterRand struct{ r *rand.Rand }

func (k karpenterRand) labelValue() string {
	vals := []string{"a", "b", "c", "d", "e", "f", "g"}
	return vals[k.r.Intn(len(vals))]
}

func (k karpenterRand) memory() resource.Quantity {
	mem := []int{100, 256, 512, 1024, 2048, 4096}
	return resource.MustParse(fmt.Sprintf("%dMi", mem[k.r.Intn(len(mem))]))
}

func (k karpenterRand) cpu() resource.Quantity {
	cpu := []int{100, 250, 500, 1000, 1500}
	return resource.MustParse(fmt.Sprintf("%dm", cpu[k.r.Intn(len(cpu))]))
}

func benchPod(name string, lbl map[string]string, cpu, mem resource.Quantity) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: lbl},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:      "app",
			Image:     "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}},
		}}},
	}
}

// KarpenterPods is the pod mix of Karpenter's scheduling benchmark
// (kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/
// scheduling_benchmark_test.go, makeDiversePods): count/5 each of generic pods,
// zonal topology spread, hostname topology spread, zonal self-affinity and hostname
// anti-affinity, the remainder generic; cpu from {100m,250m,500m,1,1.5}, memory
// from {100Mi,256Mi,512Mi,1Gi,2Gi,4Gi}; pod labels my-label=a..g; spread selectors
// my-label=a..g drawn independently of the pod's own label; self-affinity pods
// labelled and selecting my-affinity=X on zone; anti-affinity pods app=nginx away
// from app=nginx on hostname. Seeded with 42 and drawn in Karpenter's order.
func KarpenterPods(count int) []*corev1.Pod {
	kr := karpenterRand{rand.New(rand.NewSource(KarpenterSeed))}
	per := count / 5
	pods := make([]*corev1.Pod, 0, count)
	generic := func(n int, prefix string) {
		for i := 0; i < n; i++ {
			lbl := map[string]string{"my-label": kr.labelValue()}
			cpu := kr.cpu()
			mem := kr.memory()
			pods = append(pods, benchPod(fmt.Sprintf("%s-%d", prefix, i), lbl, cpu, mem))
		}
	}
	spreadPods := func(n int, key, prefix string) {
		for i := 0; i < n; i++ {
			lbl := map[string]string{"my-label": kr.labelValue()}
			sel := map[string]string{"my-label": kr.labelValue()}
			cpu := kr.cpu()
			mem := kr.memory()
			p := benchPod(fmt.Sprintf("%s-%d", prefix, i), lbl, cpu, mem)
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
			}}
			pods = append(pods, p)
		}
	}
	generic(per, "generic")
	spreadPods(per, corev1.LabelTopologyZone, "zone-spread")
	spreadPods(per, corev1.LabelHostname, "host-spread")
	for i := 0; i < per; i++ {
		lbl := map[string]string{"my-affinity": kr.labelValue()}
		cpu := kr.cpu()
		mem := kr.memory()
		p := benchPod(fmt.Sprintf("zone-affinity-%d", i), lbl, cpu, mem)
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"my-affinity": lbl["my-affinity"]}},
				TopologyKey:   corev1.LabelTopologyZone,
			}},
		}}
		pods = append(pods, p)
	}
	for i := 0; i < per; i++ {
		cpu := kr.cpu()
		mem := kr.memory()
		p := benchPod(fmt.Sprintf("host-anti-%d", i), map[string]string{"app": "nginx"}, cpu, mem)
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
		pods = append(pods, p)
	}
	generic(count-len(pods), "generic-rest")
	return pods
}

// DefaultNodeClass is the EC2NodeClass every generated pool refers to.
func DefaultNodeClass() *karpenter.EC2NodeClass {
	return &karpenter.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpenter.AWSAPIVersion, Kind: karpenter.NodeClassKind},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: karpenter.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole-bench",
			AMISelectorTerms:           []karpenter.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []karpenter.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "bench"}}},
			SecurityGroupSelectorTerms: []karpenter.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "bench"}}},
		},
	}
}

// Pool builds a NodePool on the default node class.
func Pool(name string, weight int32, reqs ...karpenter.NodeSelectorRequirementWithMinValues) *karpenter.NodePool {
	np := &karpenter.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: karpenter.APIVersion, Kind: karpenter.NodePoolKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpenter.NodePoolSpec{Template: karpenter.NodeClaimTemplate{Spec: karpenter.NodeClaimTemplateSpec{
			NodeClassRef: &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "default"},
			Requirements: reqs,
		}}},
	}
	if weight != 0 {
		np.Spec.Weight = &weight
	}
	return np
}

// Req is a NodePool requirement.
func Req(key string, op corev1.NodeSelectorOperator, vals ...string) karpenter.NodeSelectorRequirementWithMinValues {
	return karpenter.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals}
}

// KarpenterSnapshot is the benchmark case: KarpenterPods(count) against one pool
// that allows spot and on-demand (so the cheapest, spot, is expected), on cat.
// Karpenter's benchmark pool has no capacity-type requirement; stating both keeps
// the expected answer independent of defaulting.
func KarpenterSnapshot(count int, cat *catalog.Catalog) *packer.Snapshot {
	return &packer.Snapshot{
		Pods:        KarpenterPods(count),
		NodePools:   []*karpenter.NodePool{Pool("default", 0, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"))},
		NodeClasses: []*karpenter.EC2NodeClass{DefaultNodeClass()},
		Catalog:     cat,
	}
}

// LimitCPU is the cpu limit of LimitSnapshot's pool: about half of what its
// pods ask for, so the limit binds and the rest stay pending.
const LimitCPU = "100"

// LimitSnapshot is KarpenterPods(count) against a pool whose cpu limit
// (LimitCPU) holds about half of them: the case where every pod the limit
// refuses makes the engine look for room it may still buy (the issue measured
// 300 such pods at ten times an unlimited solve of the same size).
func LimitSnapshot(count int, cat *catalog.Catalog) *packer.Snapshot {
	snap := KarpenterSnapshot(count, cat)
	snap.NodePools[0].Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(LimitCPU)}
	return snap
}
