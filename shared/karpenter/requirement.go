package karpenter

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Matches evaluates the requirement against a label's value and presence. Karpenter
// adds Gte and Lte to Kubernetes' operators; the numeric operators fail on labels
// that are missing or not integers, as Kubernetes' Gt and Lt do.
func (r NodeSelectorRequirementWithMinValues) Matches(v string, present bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return present && slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !present || !slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return present
	case corev1.NodeSelectorOpDoesNotExist:
		return !present
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, NodeSelectorOpGte, NodeSelectorOpLte:
		if !present || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		switch r.Operator {
		case corev1.NodeSelectorOpGt:
			return have > want
		case corev1.NodeSelectorOpLt:
			return have < want
		case NodeSelectorOpGte:
			return have >= want
		}
		return have <= want
	}
	return false
}

// MatchesLabels evaluates the requirement against a node's labels.
func (r NodeSelectorRequirementWithMinValues) MatchesLabels(labels map[string]string) bool {
	v, ok := labels[r.Key]
	return r.Matches(v, ok)
}
