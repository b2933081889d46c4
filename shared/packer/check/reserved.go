package check

import (
	"slices"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Capacity reservations, by Karpenter's rule (aws/karpenter-provider-aws,
// offering/reserved_capacity_resolver.go): a reservation an EC2NodeClass selects
// is an offering of its instance type in its zone, capacity type reserved,
// priced at the type's on-demand price divided by 10,000,000, available while
// its count is not spent; a node in it carries its ID and type as labels.

// reservedDivisor is Karpenter's divisor of the on-demand price.
const reservedDivisor = 10_000_000.0

// reservation finds the snapshot's reservation id.
func (c *checker) reservation(id string) (packer.Reservation, bool) {
	for _, r := range c.snap.Reservations {
		if r.ID == id {
			return r, true
		}
	}
	return packer.Reservation{}, false
}

// nodeOffering is the offering a new node names: the catalog's for spot and
// on-demand; for reserved capacity the node's reservation as an offering,
// found only when the reservation is of this type and zone and selected by
// the node's class (why says what is wrong otherwise).
func (c *checker) nodeOffering(nn *packer.NewNode, it *catalog.InstanceType) (off catalog.Offering, ok bool, why string) {
	if nn.CapacityType != karpenter.CapacityTypeReserved {
		if nn.CapacityReservationID != "" {
			return catalog.Offering{}, false, "names capacity reservation " + nn.CapacityReservationID + " but is " + nn.CapacityType
		}
		off, ok = findOffering(it, nn.Zone, nn.CapacityType)
		return off, ok, ""
	}
	r, found := c.reservation(nn.CapacityReservationID)
	switch {
	case nn.CapacityReservationID == "":
		return catalog.Offering{}, false, "is reserved capacity without a capacityReservationID"
	case !found:
		return catalog.Offering{}, false, "names capacity reservation " + nn.CapacityReservationID + ", which the snapshot does not have"
	case r.InstanceType != it.Name || r.Zone != nn.Zone:
		return catalog.Offering{}, false, "capacity reservation " + r.ID + " is for " + r.InstanceType + " in " + r.Zone
	case !slices.Contains(r.NodeClasses, nn.NodeClass):
		return catalog.Offering{}, false, "capacity reservation " + r.ID + " is not selected by EC2NodeClass " + nn.NodeClass
	}
	od := 0.0
	for _, o := range it.Offerings {
		if o.CapacityType == karpenter.CapacityTypeOnDemand && (od == 0 || o.Zone == nn.Zone) {
			od = o.PricePerHour
		}
	}
	return catalog.Offering{Zone: nn.Zone, CapacityType: karpenter.CapacityTypeReserved, PricePerHour: od / reservedDivisor,
		Available: r.Available > 0}, true, ""
}

// reservationLabels are the labels a node in reservation id carries beyond its
// offering's (nil when the node is not reserved).
func (c *checker) reservationLabels(nn *packer.NewNode) map[string]string {
	r, ok := c.reservation(nn.CapacityReservationID)
	if nn.CapacityType != karpenter.CapacityTypeReserved || !ok {
		return nil
	}
	typ := r.Type
	if typ == "" {
		typ = "default"
	}
	return map[string]string{karpenter.LabelCapacityReservationID: r.ID, karpenter.LabelCapacityReservationType: typ}
}

// reservationCounts: no reservation holds more of the plan's new nodes than it
// has instances available.
func (c *checker) reservationCounts() {
	used := map[string]int{}
	for _, nn := range c.plan.NewNodes {
		if nn.CapacityReservationID != "" {
			used[nn.CapacityReservationID]++
		}
	}
	for id, n := range used {
		if r, ok := c.reservation(id); ok && n > r.Available {
			c.errorf("capacity reservation %s: %d new node(s) planned in it, but it has %d instance(s) available", id, n, r.Available)
		}
	}
}
