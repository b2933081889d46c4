package cloud

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/amifamily"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// EC2NodeClass condition types, as Karpenter's nodeclass controller sets them;
// Ready is true when every other one is.
const (
	ConditionSubnetsReady              = "SubnetsReady"
	ConditionSecurityGroupsReady       = "SecurityGroupsReady"
	ConditionAMIsReady                 = "AMIsReady"
	ConditionInstanceProfileReady      = "InstanceProfileReady"
	ConditionCapacityReservationsReady = "CapacityReservationsReady"
)

// Resolved is what an EC2NodeClass's selectors resolve to now: the status
// Karpenter writes (subnets, security groups, AMIs, instance profile, capacity
// reservations, conditions without times), and the AMI IDs drift compares a
// node's image with. AMIsResolved is false when the AMIs could not be
// resolved; drift must not then read an empty set as "every image is gone".
type Resolved struct {
	Status       karpenter.EC2NodeClassStatus
	AMIsResolved bool
}

// AMIIDs lists the resolved images.
func (r Resolved) AMIIDs() []string {
	out := make([]string, 0, len(r.Status.AMIs))
	for _, a := range r.Status.AMIs {
		out = append(out, a.ID)
	}
	return out
}

// Ready reports whether every dependent condition is true.
func (r Resolved) Ready() bool {
	for _, c := range r.Status.Conditions {
		if c.Type == karpenter.ConditionReady {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// ResolveNodeClass resolves the class's selectors as a launch would (the same
// per-invocation caches), readies its instance profile, and returns the
// status to write. A part that fails sets its condition false with the
// reason; it is not an error of the call.
func (p *Provider) ResolveNodeClass(ctx context.Context, nc *karpenter.EC2NodeClass) (Resolved, error) {
	var r Resolved
	var conds []metav1.Condition
	set := func(typ string, err error, notFound bool, what string) {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ}
		switch {
		case err != nil:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, strings.TrimSuffix(typ, "Ready")+"ResolutionFailed", err.Error()
		case notFound:
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, strings.TrimSuffix(typ, "Ready")+"NotFound", what
		}
		conds = append(conds, c)
	}

	subnets, err := p.Subnets(ctx, nc.Spec.SubnetSelectorTerms)
	for _, s := range subnets {
		r.Status.Subnets = append(r.Status.Subnets, karpenter.Subnet{ID: s.ID, Zone: s.Zone, ZoneID: s.ZoneID})
	}
	set(ConditionSubnetsReady, err, len(subnets) == 0, "SubnetSelector did not match any Subnets")

	groups, err := p.SecurityGroups(ctx, nc.Spec.SecurityGroupSelectorTerms)
	for _, g := range groups {
		r.Status.SecurityGroups = append(r.Status.SecurityGroups, karpenter.SecurityGroup{ID: g.ID, Name: g.Name})
	}
	set(ConditionSecurityGroupsReady, err, len(groups) == 0, "SecurityGroupSelector did not match any SecurityGroups")

	amis, err := p.AMIs(ctx, nc)
	for _, a := range amis {
		r.Status.AMIs = append(r.Status.AMIs, karpenter.AMI{ID: a.ID, Name: a.Name, Requirements: amiRequirements(a)})
	}
	r.AMIsResolved = err == nil && len(amis) > 0
	set(ConditionAMIsReady, err, len(amis) == 0, "AMISelector did not match any AMIs")

	profile, err := p.InstanceProfile(ctx, nc)
	if err == nil && nc.Spec.InstanceProfile != nil && *nc.Spec.InstanceProfile != "" && p.api.IAM != nil {
		// A profile the user names must exist, or every launch fails at EC2.
		if got, gerr := p.getProfile(ctx, profile); gerr != nil {
			err = gerr
		} else if got == nil {
			err = fmt.Errorf("instance profile %s (spec.instanceProfile) does not exist", profile)
		}
	}
	if err == nil {
		r.Status.InstanceProfile = profile
	}
	set(ConditionInstanceProfileReady, err, false, "")

	if len(nc.Spec.CapacityReservationSelectorTerms) > 0 {
		crs, err := p.CapacityReservations(ctx, nc)
		for _, cr := range crs {
			r.Status.CapacityReservations = append(r.Status.CapacityReservations, cr.status())
		}
		set(ConditionCapacityReservationsReady, err, false, "")
	} else {
		set(ConditionCapacityReservationsReady, nil, false, "")
	}

	var unhealthy []string
	for _, c := range conds {
		if c.Status != metav1.ConditionTrue {
			unhealthy = append(unhealthy, c.Type)
		}
	}
	ready := metav1.Condition{Type: karpenter.ConditionReady, Status: metav1.ConditionTrue, Reason: karpenter.ConditionReady}
	if len(unhealthy) > 0 {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "UnhealthyDependents", strings.Join(unhealthy, ", ")+" not ready"
	}
	r.Status.Conditions = append(conds, ready)
	return r, ctx.Err()
}

// amiRequirements are the instance requirements an image serves, as Karpenter
// writes them into status.amis: its architecture, and for alias images whether
// the type has an NVIDIA GPU or a Neuron accelerator.
func amiRequirements(a AMI) []corev1.NodeSelectorRequirement {
	reqs := []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{a.Arch}}}
	gpu := corev1.NodeSelectorRequirement{Key: karpenter.LabelInstanceGPUCount}
	acc := corev1.NodeSelectorRequirement{Key: karpenter.LabelInstanceAcceleratorCount}
	switch a.Variant {
	case "":
		return reqs
	case amifamily.VariantNVIDIA:
		gpu.Operator = corev1.NodeSelectorOpExists
		return append(reqs, gpu)
	case amifamily.VariantNeuron:
		acc.Operator = corev1.NodeSelectorOpExists
		return append(reqs, acc)
	}
	gpu.Operator, acc.Operator = corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpDoesNotExist
	return append(reqs, gpu, acc)
}
