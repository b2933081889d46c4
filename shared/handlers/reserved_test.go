package handlers

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// TestReservedCapacityRequestedAndLabelled: a p5-style training pool that names
// reserved capacity, on a class selecting reservations, asks the launch for a
// reservation first; a pool that does not name it, or a class without
// reservation terms, never does. A node launched into a reservation carries
// karpenter.sh/capacity-type=reserved and Karpenter's reservation labels.
func TestReservedCapacityRequestedAndLabelled(t *testing.T) {
	pool := func(cts ...string) *karpenter.NodePool {
		np := &karpenter.NodePool{}
		np.Name = "training"
		np.Spec.Template.Spec.Requirements = []karpenter.NodeSelectorRequirementWithMinValues{{
			Key: karpenter.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: cts}}
		return np
	}
	withTerms := &karpenter.EC2NodeClass{}
	withTerms.Spec.CapacityReservationSelectorTerms = []karpenter.CapacityReservationSelectorTerm{{Tags: map[string]string{"purpose": "training"}}}
	for _, c := range []struct {
		name   string
		pool   *karpenter.NodePool
		class  *karpenter.EC2NodeClass
		chosen string
		want   []string
	}{
		{"reserved then on-demand", pool("reserved", "on-demand"), withTerms, "on-demand", []string{"reserved", "on-demand"}},
		{"reserved, spot then on-demand", pool("reserved", "spot", "on-demand"), withTerms, "spot", []string{"reserved", "spot", "on-demand"}},
		{"no reservation terms", pool("reserved", "on-demand"), &karpenter.EC2NodeClass{}, "on-demand", []string{"on-demand"}},
		{"pool does not name reserved", pool("spot", "on-demand"), withTerms, "spot", []string{"spot", "on-demand"}},
	} {
		if got := capacityTypes(c.pool, c.class, c.chosen); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	inst := cloud.Instance{ID: "i-0123456789abcdef0", ProviderID: "aws:///us-east-1b/i-0123456789abcdef0", InstanceType: "p5.48xlarge", Zone: "us-east-1b",
		CapacityType: karpenter.CapacityTypeReserved, CapacityReservationID: "cr-0a1b2c3d4e5f60718", CapacityReservationType: "default"}
	rec, _ := launchRecord(catalog.Embedded(), withTerms, &packer.NewNode{PricePerHour: 1}, inst)
	if rec.CapacityType != karpenter.CapacityTypeReserved || rec.Labels[karpenter.LabelCapacityReservationID] != "cr-0a1b2c3d4e5f60718" ||
		rec.Labels[karpenter.LabelCapacityReservationType] != "default" {
		t.Errorf("launch record %+v: want capacity type reserved and the reservation's id and type labels", rec)
	}
}
