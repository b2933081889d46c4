package packer

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Deprecated label keys (beta.kubernetes.io/arch, beta.kubernetes.io/os,
// beta.kubernetes.io/instance-type, failure-domain.beta.kubernetes.io/zone and
// /region) mean their stable keys wherever the engine reads node selection: pod
// node selectors and node affinity, DaemonSet node selection, NodePool
// requirements and topology keys, as Karpenter normalizes every requirement it
// builds. Nodes carry both spellings (the kubelet and the cloud node controller
// set the beta labels), so a selector written either way selects the same nodes.

// normalizedKey is the stable key of a deprecated one, else key itself.
func normalizedKey(key string) string {
	if k, ok := karpenter.DeprecatedLabels[key]; ok {
		return k
	}
	return key
}

// normalizedSelector returns sel with deprecated keys renamed (sel itself when
// it has none).
func normalizedSelector(sel map[string]string) map[string]string {
	out, _ := renameSelector(sel)
	return out
}

func renameSelector(sel map[string]string) (map[string]string, bool) {
	found := false
	for k := range sel {
		if _, ok := karpenter.DeprecatedLabels[k]; ok {
			found = true
			break
		}
	}
	if !found {
		return sel, false
	}
	out := make(map[string]string, len(sel))
	for k, v := range sel {
		out[normalizedKey(k)] = v
	}
	return out, true
}

// normalizedTerms returns terms with deprecated keys renamed (terms itself when
// they have none).
func normalizedTerms(terms []corev1.NodeSelectorTerm) []corev1.NodeSelectorTerm {
	out, _ := renameTerms(terms)
	return out
}

func renameTerms(terms []corev1.NodeSelectorTerm) ([]corev1.NodeSelectorTerm, bool) {
	found := false
	for _, t := range terms {
		for _, r := range t.MatchExpressions {
			if _, ok := karpenter.DeprecatedLabels[r.Key]; ok {
				found = true
			}
		}
	}
	if !found {
		return terms, false
	}
	out := make([]corev1.NodeSelectorTerm, len(terms))
	for i, t := range terms {
		out[i] = corev1.NodeSelectorTerm{MatchFields: t.MatchFields, MatchExpressions: make([]corev1.NodeSelectorRequirement, len(t.MatchExpressions))}
		for j, r := range t.MatchExpressions {
			r.Key = normalizedKey(r.Key)
			out[i].MatchExpressions[j] = r
		}
	}
	return out, true
}

// normalizedNodeSelection returns a pod's node selection with deprecated keys
// renamed: spec itself when it has none, else a copy with a new node selector
// and required node affinity.
func normalizedNodeSelection(spec *corev1.PodSpec) *corev1.PodSpec {
	sel, changed := renameSelector(spec.NodeSelector)
	var terms []corev1.NodeSelectorTerm
	termsChanged := false
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms, termsChanged = renameTerms(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}
	if !changed && !termsChanged {
		return spec
	}
	out := *spec
	out.NodeSelector = sel
	if termsChanged {
		na := *spec.Affinity.NodeAffinity
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
		aff := *spec.Affinity
		aff.NodeAffinity = &na
		out.Affinity = &aff
	}
	return &out
}

// normalizedRequirements returns a pool's requirements with deprecated keys
// renamed (reqs itself when they have none).
func normalizedRequirements(reqs []karpenter.NodeSelectorRequirementWithMinValues) []karpenter.NodeSelectorRequirementWithMinValues {
	for i, r := range reqs {
		if _, ok := karpenter.DeprecatedLabels[r.Key]; ok {
			out := append([]karpenter.NodeSelectorRequirementWithMinValues(nil), reqs...)
			for j := i; j < len(out); j++ {
				out[j].Key = normalizedKey(out[j].Key)
			}
			return out
		}
	}
	return reqs
}
