package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

const crP5 = "cr-0a1b2c3d4e5f60718"

// trainingCluster: a pool allowing reserved and on-demand p5/p4d, consolidating
// when underutilized, one on-demand p4d node running an 8-GPU trainer.
func trainingCluster(t *testing.T) *cluster {
	pool := testPool("training", karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, []string{"p5.48xlarge", "p4d.24xlarge"})
	pool.Spec.Template.Spec.Requirements[1] = req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn,
		karpenter.CapacityTypeReserved, karpenter.CapacityTypeOnDemand)
	c := newCluster(t, pool)
	trainer := appPod("trainer-0", "8", "64Gi")
	trainer.Spec.Containers[0].Resources.Requests[karpenter.ResourceNVIDIAGPU] = resource.MustParse("8")
	c.managed("p4d-od", "training", "p4d.24xlarge", 2*time.Hour, trainer)
	return c
}

// TestConsolidationMovesOnDemandIntoAFreedReservation: once a reservation the
// class selects has a free slot, the on-demand node's pods fit a reserved node
// that Karpenter's pricing makes all but free, so the consolidator replaces the
// on-demand node with one in the reservation (the replacement names it).
func TestConsolidationMovesOnDemandIntoAFreedReservation(t *testing.T) {
	c := trainingCluster(t)
	if d := c.decide(); len(kinds(d, Replace)) != 0 {
		t.Fatalf("no reservation: want the on-demand p4d kept, got %s", dump(d))
	}
	c.Snapshot.Reservations = []packer.Reservation{{ID: crP5, InstanceType: "p5.48xlarge", Zone: zone, Available: 1, NodeClasses: []string{"default"}}}
	d := c.decide()
	rs := kinds(d, Replace)
	if len(rs) != 1 || rs[0].Node != "p4d-od" || rs[0].Replacement == nil {
		t.Fatalf("want p4d-od replaced, got %s", dump(d))
	}
	if r := rs[0].Replacement; r.CapacityType != karpenter.CapacityTypeReserved || r.CapacityReservationID != crP5 || r.InstanceType != "p5.48xlarge" {
		t.Errorf("replacement %s %s in %q, want reserved p5.48xlarge in %s", r.CapacityType, r.InstanceType, r.CapacityReservationID, crP5)
	}
	if c.Snapshot.Reservations[0].Available != 1 {
		t.Errorf("Decide changed the caller's snapshot: reservation available %d", c.Snapshot.Reservations[0].Available)
	}
	// A full reservation offers nothing.
	c.Snapshot.Reservations[0].Available = 0
	if d := c.decide(); len(kinds(d, Replace)) != 0 {
		t.Errorf("reservation full: want no replacement, got %s", dump(d))
	}
}

// TestReservedNodePricedAsItsReservation: a node in a reservation is priced as
// Karpenter prices the reserved offering (on-demand / 10,000,000), known, so
// no on-demand or spot replacement is ever cheaper and its deletion when empty
// reports that price.
func TestReservedNodePricedAsItsReservation(t *testing.T) {
	c := trainingCluster(t)
	n, nc := c.managed("p5-reserved", "training", "p5.48xlarge", 2*time.Hour, appPod("small", "1", "1Gi"))
	for _, l := range []map[string]string{n.Labels, nc.Labels} {
		l[karpenter.CapacityTypeLabelKey] = karpenter.CapacityTypeReserved
		l[karpenter.LabelCapacityReservationID] = crP5
	}
	s := newState(c.input())
	var info *nodeInfo
	for _, n := range s.nodes {
		if n.name() == "p5-reserved" {
			info = n
		}
	}
	it, _ := c.Snapshot.Catalog.Lookup("p5.48xlarge")
	if info == nil || !info.priceKnown || info.price != packer.ReservedPrice(it, zone) || info.price <= 0 || info.price > 1e-4 {
		t.Fatalf("reserved node priced %+v, want known at the on-demand price / 10,000,000", info)
	}
	for _, a := range kinds(c.decide(), Replace) {
		if a.Node == "p5-reserved" {
			t.Errorf("a reserved node was replaced to save money: %+v", a)
		}
	}
}

// TestInterruptionReplacementTakesAFreeReservation: the pods of an interrupted
// node are replaced into a free slot of a reservation the class selects, as any
// new node would be; with the reservation full, on-demand.
func TestInterruptionReplacementTakesAFreeReservation(t *testing.T) {
	c := trainingCluster(t)
	going := c.Snapshot.Nodes[0]
	c.Snapshot.Reservations = []packer.Reservation{{ID: crP5, InstanceType: "p5.48xlarge", Zone: zone, Available: 1, NodeClasses: []string{"default"}}}
	pods := map[string][]*corev1.Pod{going.Node.Name: going.Pods}
	plan := Replacements(c.input(), []*corev1.Node{going.Node}, pods)
	if len(plan.NewNodes) != 1 || plan.NewNodes[0].CapacityReservationID != crP5 {
		t.Fatalf("replacement %+v (unschedulable %v), want one node in %s", plan.NewNodes, plan.Unschedulable, crP5)
	}
	c.Snapshot.Reservations[0].Available = 0
	plan = Replacements(c.input(), []*corev1.Node{going.Node}, pods)
	if len(plan.NewNodes) != 1 || plan.NewNodes[0].CapacityType != karpenter.CapacityTypeOnDemand {
		t.Errorf("reservation full: replacement %+v, want one on-demand node", plan.NewNodes)
	}
}
