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

// legacyLabels are the deprecated spellings a real node also carries: the kubelet
// sets beta.kubernetes.io/arch and /os beside the stable keys, and the cloud node
// controller keeps the failure-domain and instance-type beta labels in step with
// theirs. A selector written either way must therefore select the same nodes.
var legacyLabels = map[string]string{
	corev1.LabelArchStable:         "beta.kubernetes.io/arch",
	corev1.LabelOSStable:           "beta.kubernetes.io/os",
	corev1.LabelInstanceTypeStable: corev1.LabelInstanceType,
	corev1.LabelTopologyZone:       corev1.LabelFailureDomainBetaZone,
	corev1.LabelTopologyRegion:     corev1.LabelFailureDomainBetaRegion,
}

// asNodeLabels returns labels as the node will carry them: with the deprecated
// spelling of every stable key it has (labels itself when nothing is added).
func asNodeLabels(labels map[string]string) map[string]string {
	var out map[string]string
	for stable, legacy := range legacyLabels {
		v, has := labels[stable]
		if _, set := labels[legacy]; !has || set {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(labels)+len(legacyLabels))
			for k, x := range labels {
				out[k] = x
			}
		}
		out[legacy] = v
	}
	if out == nil {
		return labels
	}
	return out
}
