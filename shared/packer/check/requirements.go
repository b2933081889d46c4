package check

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// requirementHolds evaluates one NodePool requirement against a node's labels with
// Karpenter's operators (In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte). As in
// Kubernetes, NotIn and DoesNotExist hold for a node without the label.
func requirementHolds(r karpenter.NodeSelectorRequirementWithMinValues, labels map[string]string) bool {
	v, has := labels[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		if !has {
			return false
		}
		for _, want := range r.Values {
			if v == want {
				return true
			}
		}
		return false
	case corev1.NodeSelectorOpNotIn:
		if !has {
			return true
		}
		for _, bad := range r.Values {
			if v == bad {
				return false
			}
		}
		return true
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpenter.NodeSelectorOpGte, karpenter.NodeSelectorOpLte:
		if !has || len(r.Values) != 1 {
			return false
		}
		got, err1 := strconv.ParseInt(v, 10, 64)
		bound, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		switch r.Operator {
		case corev1.NodeSelectorOpGt:
			return got > bound
		case corev1.NodeSelectorOpLt:
			return got < bound
		case karpenter.NodeSelectorOpGte:
			return got >= bound
		default:
			return got <= bound
		}
	}
	return false
}

// requirementsHold reports the first requirement the labels break, or "" when all hold.
func requirementsHold(reqs []karpenter.NodeSelectorRequirementWithMinValues, labels map[string]string) string {
	for _, r := range reqs {
		if !requirementHolds(r, labels) {
			return fmt.Sprintf("%s %s %v (node has %q)", r.Key, r.Operator, r.Values, labels[r.Key])
		}
	}
	return ""
}
