package packer

import "github.com/joiner-autoscaler/joiner/shared/karpenter"

// requirementAllows reports whether a requirement on a key the instance does not
// label itself (a custom key such as team=a) admits value v.
func requirementAllows(r karpenter.NodeSelectorRequirementWithMinValues, v string) bool {
	return r.Matches(v, true)
}
