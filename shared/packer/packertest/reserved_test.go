package packertest

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// Capacity reservations as offerings, as Karpenter's AWS provider makes them
// (offering/reserved_capacity_resolver.go): one offering per reservation the
// class selects, in its zone, capacity type reserved, priced at the on-demand
// price / 10,000,000, with as many nodes as it has instances available.

const crGPU = "cr-0a1b2c3d4e5f60718"

func gpuPods(n int) []*corev1.Pod {
	ps := pods("train", n, "1", "4Gi")
	for _, p := range ps {
		p.Spec.Containers[0].Resources.Requests[karpenter.ResourceNVIDIAGPU] = qty("1")
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{karpenter.ResourceNVIDIAGPU: qty("1")}
	}
	return ps
}

func capacityTypes(cts ...string) karpenter.NodeSelectorRequirementWithMinValues {
	return workload.Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, cts...)
}

func reservedSnapshot(t *testing.T, ps []*corev1.Pod, available int, pools ...*karpenter.NodePool) *packer.Snapshot {
	snap := snapshot(t, ps, pools...)
	snap.Reservations = []packer.Reservation{{ID: crGPU, InstanceType: "g6.xlarge", Zone: "us-east-1b", Available: available, NodeClasses: []string{"default"}}}
	return snap
}

func reservedNodes(plan *packer.Plan) (reserved, other []packer.NewNode) {
	for _, n := range plan.NewNodes {
		if n.CapacityType == karpenter.CapacityTypeReserved {
			reserved = append(reserved, n)
		} else {
			other = append(other, n)
		}
	}
	return reserved, other
}

// TestReservedOfferingsPreferredThenFallBack: a pool allowing reserved and
// on-demand fills the reservation's two slots first (each pod needs the one
// GPU of a g6.xlarge), in its zone, with Karpenter's price and labels and a
// NodeClaim requirement naming the reservation; the third pod falls back to
// on-demand.
func TestReservedOfferingsPreferredThenFallBack(t *testing.T) {
	s := solve(t, reservedSnapshot(t, gpuPods(3), 2, poolOf("train", 0, capacityTypes("reserved", "on-demand"))))
	res, other := reservedNodes(s.plan)
	if len(res) != 2 || len(other) != 1 {
		t.Fatalf("want 2 reserved and 1 on-demand node, got %s", s.dump())
	}
	od := 0.8048 // g6.xlarge on-demand in the small catalog
	price := od / 10_000_000
	for _, n := range res {
		if n.InstanceType != "g6.xlarge" || n.Zone != "us-east-1b" || n.CapacityReservationID != crGPU || n.PricePerHour != price {
			t.Errorf("reserved node %s: %s in %s, reservation %q, $%v; want g6.xlarge in us-east-1b in %s at $%v", n.Name, n.InstanceType, n.Zone,
				n.CapacityReservationID, n.PricePerHour, crGPU, price)
		}
		if n.Labels[karpenter.LabelCapacityReservationID] != crGPU || n.Labels[karpenter.LabelCapacityReservationType] != "default" ||
			n.Labels[karpenter.CapacityTypeLabelKey] != "reserved" || n.Labels[corev1.LabelTopologyZone] != "us-east-1b" {
			t.Errorf("reserved node %s labels %v", n.Name, n.Labels)
		}
		if !slices.Equal(n.Options, []string{"g6.xlarge"}) {
			t.Errorf("reserved node %s options %v: a reserved node launches its reservation's type only", n.Name, n.Options)
		}
		if !slices.ContainsFunc(n.Requirements, func(r karpenter.NodeSelectorRequirementWithMinValues) bool {
			return r.Key == karpenter.LabelCapacityReservationID && slices.Equal(r.Values, []string{crGPU})
		}) {
			t.Errorf("reserved node %s requirements %v: want %s In [%s]", n.Name, n.Requirements, karpenter.LabelCapacityReservationID, crGPU)
		}
	}
	if n := other[0]; n.CapacityType != "on-demand" || n.CapacityReservationID != "" || n.Labels[karpenter.LabelCapacityReservationID] != "" {
		t.Errorf("fallback node %+v: want on-demand outside any reservation", n)
	}
}

// TestReservedOnlyPoolPlansReservedAndSaysWhenFull: a pool that allows only
// reserved capacity plans reserved nodes, as many as the reservation has
// slots; the pods left over wait with a reason naming the full reservation.
func TestReservedOnlyPoolPlansReservedAndSaysWhenFull(t *testing.T) {
	s := solve(t, reservedSnapshot(t, gpuPods(3), 2, poolOf("train", 0, capacityTypes("reserved"))))
	res, other := reservedNodes(s.plan)
	if len(res) != 2 || len(other) != 0 || len(s.plan.Unschedulable) != 1 {
		t.Fatalf("want 2 reserved nodes and 1 pod waiting, got %s", s.dump())
	}
	why := s.plan.Unschedulable[0].Reason
	if !strings.Contains(why, "NodePool train: the capacity reservations that would hold it are full") || !strings.Contains(why, crGPU) {
		t.Errorf("reason %q: want it to say the reservation %s is full", why, crGPU)
	}

	// With nothing available at all, the pool plans nothing and says why.
	s = solve(t, reservedSnapshot(t, gpuPods(1), 0, poolOf("train", 0, capacityTypes("reserved"))))
	if len(s.plan.NewNodes) != 0 || !strings.Contains(s.unschedulable("train-0"), "capacity reservations that would hold it are full") {
		t.Errorf("reservation with 0 available: %s", s.dump())
	}
	// Without reservations the pool has no offering at all.
	snap := snapshot(t, gpuPods(1), poolOf("train", 0, capacityTypes("reserved")))
	s = solve(t, snap)
	if len(s.plan.NewNodes) != 0 || !strings.Contains(s.unschedulable("train-0"), "no available instance type offering satisfies its requirements") {
		t.Errorf("no reservations: %s", s.dump())
	}
}

// TestReservationSlotsSharedAcrossPools: two pools on classes that both
// select the reservation share its slots; a class that does not select it
// never launches into it.
func TestReservationSlotsSharedAcrossPools(t *testing.T) {
	other := workload.DefaultNodeClass()
	other.Name = "other"
	b := poolOf("b", 0, capacityTypes("reserved"))
	b.Spec.Template.Spec.NodeClassRef = &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "other"}
	ps := append(gpuPods(2), pods("b", 2, "1", "4Gi", withSelector(karpenter.NodePoolLabelKey, "b"))...)
	for _, p := range ps[2:] {
		p.Spec.Containers[0].Resources.Requests[karpenter.ResourceNVIDIAGPU] = qty("1")
	}
	for i := range ps[:2] {
		ps[i].Spec.NodeSelector = map[string]string{karpenter.NodePoolLabelKey: "a"}
	}
	snap := reservedSnapshot(t, ps, 3, poolOf("a", 0, capacityTypes("reserved")), b)
	snap.NodeClasses = append(snap.NodeClasses, other)
	snap.Reservations[0].NodeClasses = []string{"default", "other"}
	s := solve(t, snap)
	if res, _ := reservedNodes(s.plan); len(res) != 3 || len(s.plan.Unschedulable) != 1 {
		t.Fatalf("3 slots for 4 pods of two pools: want 3 reserved nodes and 1 pod waiting, got %s", s.dump())
	}

	snap.Reservations[0].NodeClasses = []string{"default"}
	s = solve(t, snap)
	for _, n := range s.plan.NewNodes {
		if n.NodePool == "b" {
			t.Errorf("pool b's class does not select the reservation, but %s is in it", n.Name)
		}
	}
	if got := len(s.plan.Unschedulable); got != 2 {
		t.Errorf("pool b's pods: want both waiting (its class selects no reservation), got %s", s.dump())
	}
}

// TestPodsSelectReservations: a pod may ask for a reservation by its labels
// (or refuse reserved capacity), as on Karpenter's offerings.
func TestPodsSelectReservations(t *testing.T) {
	pool := poolOf("train", 0, capacityTypes("reserved", "on-demand"))
	ps := gpuPods(2)
	ps[0].Spec.NodeSelector = map[string]string{karpenter.LabelCapacityReservationID: crGPU}
	ps[1].Spec.NodeSelector = map[string]string{karpenter.CapacityTypeLabelKey: "on-demand"}
	s := solve(t, reservedSnapshot(t, ps, 2, pool))
	if n := s.node("train-0"); n.CapacityReservationID != crGPU {
		t.Errorf("train-0 selects the reservation: %s", s.dump())
	}
	if n := s.node("train-1"); n.CapacityType != "on-demand" {
		t.Errorf("train-1 selects on-demand: %s", s.dump())
	}
	// A pool requirement on the reservation ID decides as an offering label.
	pool = poolOf("train", 0, capacityTypes("reserved"), workload.Req(karpenter.LabelCapacityReservationID, corev1.NodeSelectorOpIn, "cr-00000000000000000"))
	s = solve(t, reservedSnapshot(t, gpuPods(1), 2, pool))
	if len(s.plan.NewNodes) != 0 {
		t.Errorf("the pool allows another reservation only: %s", s.dump())
	}
}

// TestReservationSlotsUnderALimit: under a pool limit the engine looks only at
// the candidates the limit still allows (capWindow); a full reservation must
// still turn a pod away there: two slots, four pods, a cpu limit with room for
// all four (16 vCPU: four 4-vCPU g6.xlarge); two reserved nodes and two
// on-demand ones, never a third reserved.
func TestReservationSlotsUnderALimit(t *testing.T) {
	pool := poolOf("train", 0, capacityTypes("reserved", "on-demand"))
	pool.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: qty("16")}
	s := solve(t, reservedSnapshot(t, gpuPods(4), 2, pool))
	res, other := reservedNodes(s.plan)
	if len(res) != 2 || len(other) != 2 {
		t.Fatalf("want 2 reserved and 2 on-demand nodes, got %s", s.dump())
	}
}
