package cloud

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// RequestFor turns the engine's decision for one new node into a launch
// request. The options are the node's Options (cheapest first). The engine's
// zone is the first choice, the other zones its requirements allow the
// fallback; capacity types come from its requirements, the engine's pick
// first, so the launch may fall back to any the pods accept. Without a
// capacity-type requirement only the engine's pick is allowed, and without a
// zone requirement every zone of the class is. A node planned in a capacity
// reservation launches there only.
func RequestFor(n packer.NewNode, nc *karpenter.EC2NodeClass) LaunchRequest {
	req := LaunchRequest{
		NodeClaim: n.Name, NodePool: n.NodePool, NodeClass: nc,
		InstanceTypes: slices.Clone(n.Options), Labels: n.Labels, Taints: slices.Clone(n.Taints),
		CapacityReservationID: n.CapacityReservationID,
	}
	if len(req.InstanceTypes) == 0 && n.InstanceType != "" {
		req.InstanceTypes = []string{n.InstanceType}
	}
	allowedZones := AllowedZones(n.Requirements)
	switch {
	case n.Zone == "":
		req.Zones = allowedZones
	case n.CapacityReservationID != "":
		req.Zones = []string{n.Zone} // the reservation's zone is the node's
	default:
		req.Zones = []string{n.Zone}
		req.FallbackZones = slices.DeleteFunc(allowedZones, func(z string) bool { return z == n.Zone })
		req.FallbackAnyZone = allowedZones == nil
	}
	req.CapacityTypes = allowed(n.Requirements, karpenter.CapacityTypeLabelKey, []string{n.CapacityType})
	if i := slices.Index(req.CapacityTypes, n.CapacityType); i > 0 {
		req.CapacityTypes = append(append([]string{n.CapacityType}, req.CapacityTypes[:i]...), req.CapacityTypes[i+1:]...)
	}
	if n.CapacityType == "" && len(req.CapacityTypes) == 1 && req.CapacityTypes[0] == "" {
		req.CapacityTypes = nil
	}
	return req
}

// AllowedZones are the zones a node's requirements permit; nil when they do
// not restrict the zone (any zone of the class's subnets will do).
func AllowedZones(reqs []karpenter.NodeSelectorRequirementWithMinValues) []string {
	return allowed(reqs, corev1.LabelTopologyZone, nil)
}

// allowed returns the values an In requirement on key permits, less NotIn
// values; def when there is no In requirement.
func allowed(reqs []karpenter.NodeSelectorRequirementWithMinValues, key string, def []string) []string {
	var in, notIn []string
	hasIn := false
	for _, r := range reqs {
		if r.Key != key {
			continue
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			if hasIn {
				in = slices.DeleteFunc(in, func(v string) bool { return !slices.Contains(r.Values, v) })
			} else {
				in, hasIn = slices.Clone(r.Values), true
			}
		case corev1.NodeSelectorOpNotIn:
			notIn = append(notIn, r.Values...)
		}
	}
	if !hasIn {
		in = slices.Clone(def)
	}
	return slices.DeleteFunc(in, func(v string) bool { return slices.Contains(notIn, v) })
}
