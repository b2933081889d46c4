package packer

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// requirementMatches evaluates one Karpenter requirement against a node's labels.
// Karpenter adds Gte and Lte to Kubernetes' operators; numeric operators fail on
// labels that are missing or not integers, as Kubernetes' Gt and Lt do.
func requirementMatches(r karpenter.NodeSelectorRequirementWithMinValues, labels map[string]string) bool {
	v, ok := labels[r.Key]
	return requirementMatchesValue(r, v, ok)
}

// requirementMatchesValue evaluates a requirement against the value (and presence)
// of its key.
func requirementMatchesValue(r karpenter.NodeSelectorRequirementWithMinValues, v string, ok bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		if !ok {
			return false
		}
		for _, x := range r.Values {
			if x == v {
				return true
			}
		}
		return false
	case corev1.NodeSelectorOpNotIn:
		if !ok {
			return true
		}
		for _, x := range r.Values {
			if x == v {
				return false
			}
		}
		return true
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpenter.NodeSelectorOpGte, karpenter.NodeSelectorOpLte:
		if !ok || len(r.Values) != 1 {
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
		case karpenter.NodeSelectorOpGte:
			return have >= want
		default:
			return have <= want
		}
	}
	return false
}

// requirementAllows reports whether a requirement on a key the instance does not
// label itself (a custom key such as team=a) admits value v.
func requirementAllows(r karpenter.NodeSelectorRequirementWithMinValues, v string) bool {
	return requirementMatches(r, map[string]string{r.Key: v})
}
