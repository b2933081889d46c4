package workload

import (
	"fmt"
	"math/rand"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Preference groups of PreferencePods, by the value of their "app" label.
const (
	// PrefZone pods prefer us-east-1a (weight 50): satisfiable, so all should land there.
	PrefZone = "pref-zone"
	// PrefImpossible pods prefer a label no node has (weight 100) and, weakly,
	// us-east-1b (weight 1): the first must be relaxed, the second can be kept.
	PrefImpossible = "pref-impossible"
	// PrefSpread pods spread over zones with ScheduleAnyway, maxSkew 1: satisfiable.
	PrefSpread = "pref-spread"
	// PrefConflict pods prefer us-east-1c and spread over zones with ScheduleAnyway:
	// both cannot hold; either outcome is valid.
	PrefConflict = "pref-conflict"
)

func preferZone(weight int32, key string, vals ...string) corev1.PreferredSchedulingTerm {
	return corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: vals}},
	}}
}

func softSpread(app string) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
}

// PreferencePods is the preferences benchmark: count pods in four equal groups
// (PrefZone, PrefImpossible, PrefSpread, PrefConflict) whose placement is shaped by
// preferred node affinity and ScheduleAnyway zone spread only, with Karpenter's cpu
// and memory distributions (seed 42). None of the preferences makes a node dearer,
// so the plan's cost is comparable with LowerBound.
func PreferencePods(count int) []*corev1.Pod {
	kr := karpenterRand{rand.New(rand.NewSource(KarpenterSeed))}
	groups := []string{PrefZone, PrefImpossible, PrefSpread, PrefConflict}
	pods := make([]*corev1.Pod, 0, count)
	for i := 0; i < count; i++ {
		app := groups[i*len(groups)/count]
		cpu := kr.cpu()
		mem := kr.memory()
		p := benchPod(fmt.Sprintf("%s-%d", app, i), map[string]string{"app": app}, cpu, mem)
		na := &corev1.NodeAffinity{}
		switch app {
		case PrefZone:
			na.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{preferZone(50, corev1.LabelTopologyZone, "us-east-1a")}
		case PrefImpossible:
			na.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{
				preferZone(100, "example.com/tier", "gold"),
				preferZone(1, corev1.LabelTopologyZone, "us-east-1b"),
			}
		case PrefSpread:
			na = nil
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{softSpread(app)}
		case PrefConflict:
			na.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{preferZone(10, corev1.LabelTopologyZone, "us-east-1c")}
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{softSpread(app)}
		}
		if na != nil {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: na}
		}
		pods = append(pods, p)
	}
	return pods
}

// PreferenceSnapshot is PreferencePods(count) on the benchmark pool and cat.
func PreferenceSnapshot(count int, cat *catalog.Catalog) *packer.Snapshot {
	return &packer.Snapshot{
		Pods:        PreferencePods(count),
		NodePools:   []*karpenter.NodePool{Pool("default", 0, Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"))},
		NodeClasses: []*karpenter.EC2NodeClass{DefaultNodeClass()},
		Catalog:     cat,
	}
}
