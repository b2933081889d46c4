package packer

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Capacity reservations as offerings. Karpenter's AWS provider adds, for every
// capacity reservation an EC2NodeClass selects, one offering to that class's
// instance type: capacity type reserved, the reservation's zone, labelled with
// its ID and type, priced at the type's on-demand price divided by 10,000,000
// (reservedPriceDivisor) so that it is all but free, which makes every other
// offering lose to it, while keeping reservations ordered among themselves; and
// it stops offering the reservation once its available count is spent. The
// engine does the same: a reservation is a candidate of each pool whose class
// selects it, and its slots are counted across every pool of the solve.
//
// A node opened on a reserved candidate keeps it (its pods fill it, it is
// never grown, shrunk, rebalanced or repacked onto another type), and a node
// opened on any other candidate never moves into a reservation: a slot is
// taken exactly when a node opens in it, so a plan never holds more reserved
// nodes than the reservation has room for. When the slots are spent, a pool
// that allows on-demand or spot falls back to them, cheapest first as always;
// a pool that allows only reserved leaves the pod waiting, saying so.

// reservedPriceDivisor is what Karpenter divides a type's on-demand price by to
// price a reserved offering of it (offering/reserved_capacity_resolver.go).
const reservedPriceDivisor = 10_000_000.0

// reservation is a capacity reservation in one solve.
type reservation struct {
	id, instanceType, zone, typ string
	// left is how many more nodes the plan may open in it.
	left int
	// classes are the EC2NodeClasses selecting it.
	classes []string
}

// buildReservations gathers the snapshot's reservations by ID (an ID listed
// twice keeps the smaller count and every class) and indexes the catalog's
// types by name for them.
func (s *solver) buildReservations() {
	if len(s.snap.Reservations) == 0 {
		return
	}
	s.resv = map[string]*reservation{}
	for _, r := range s.snap.Reservations {
		if r.ID == "" || r.InstanceType == "" || r.Zone == "" {
			continue
		}
		cur := s.resv[r.ID]
		if cur == nil {
			cur = &reservation{id: r.ID, instanceType: r.InstanceType, zone: r.Zone, typ: r.Type, left: max(0, r.Available)}
			if cur.typ == "" {
				cur.typ = "default"
			}
			s.resv[r.ID] = cur
			s.resvOrder = append(s.resvOrder, cur)
		} else {
			cur.left = min(cur.left, max(0, r.Available))
		}
		for _, c := range r.NodeClasses {
			if !slices.Contains(cur.classes, c) {
				cur.classes = append(cur.classes, c)
			}
		}
	}
	slices.SortFunc(s.resvOrder, func(a, b *reservation) int { return strings.Compare(a.id, b.id) })
	s.typeIndex = make(map[string]int, len(s.snap.Catalog.InstanceTypes))
	for i, it := range s.snap.Catalog.InstanceTypes {
		s.typeIndex[it.Name] = i
	}
}

// reservationsIn lists the reservations pool may launch into in zone, by ID.
func (s *solver) reservationsIn(p *poolInfo, zone string) []*reservation {
	if p.nc == nil {
		return nil
	}
	var out []*reservation
	for _, r := range s.resvOrder {
		if r.zone == zone && slices.Contains(r.classes, p.nc.Name) {
			out = append(out, r)
		}
	}
	return out
}

// ReservedPrice is Karpenter's price of a reserved offering of type it in
// zone: the on-demand price (the zone's, else any zone's) over
// reservedPriceDivisor, or 0 when the catalog has no on-demand price for it
// (Karpenter then leaves it at zero too). The consolidator prices a node in a
// reservation by it, so that no on-demand or spot replacement is ever cheaper.
func ReservedPrice(it *catalog.InstanceType, zone string) float64 {
	price := 0.0
	for _, o := range it.Offerings {
		if o.CapacityType != karpenter.CapacityTypeOnDemand {
			continue
		}
		if price == 0 || o.Zone == zone {
			price = o.PricePerHour
		}
	}
	return price / reservedPriceDivisor
}

// reservedLabels are the labels of a node of type ti in reservation r for
// pool p: the type's, the pool's over them, and the offering's (zone, its zone
// ID, region, capacity type, reservation ID and type) over both, as
// nodeLabelsOf orders them.
func (s *solver) reservedLabels(ti int, p *poolInfo, r *reservation) map[string]string {
	il := s.prep.labels[ti]
	l := make(map[string]string, len(il)+len(p.labels)+6)
	for k, v := range il {
		l[k] = v
	}
	for k, v := range p.labels {
		l[k] = v
	}
	l[corev1.LabelTopologyZone] = r.zone
	if id := p.zoneIDs[r.zone]; id != "" {
		l[karpenter.LabelTopologyZoneID] = id
	}
	if region := catalog.RegionOfZone(r.zone); region != "" {
		l[corev1.LabelTopologyRegion] = region
	}
	l[karpenter.CapacityTypeLabelKey] = karpenter.CapacityTypeReserved
	l[karpenter.LabelCapacityReservationID] = r.id
	l[karpenter.LabelCapacityReservationType] = r.typ
	return l
}

// reservationKey reports the label keys a reserved offering decides.
func reservationKey(k string) bool {
	return k == karpenter.LabelCapacityReservationID || k == karpenter.LabelCapacityReservationType
}

// offeringValue is the value an offering gives a key offeringKey names (ok false
// when it gives none): r is nil for an offering that is not a reservation;
// zoneIDs are the pool's class's zone IDs by zone.
func offeringValue(key, zone, capacityType string, r *reservation, zoneIDs map[string]string) (string, bool) {
	switch key {
	case karpenter.LabelTopologyZoneID:
		v, ok := zoneIDs[zone]
		return v, ok
	case corev1.LabelTopologyZone:
		return zone, true
	case karpenter.CapacityTypeLabelKey:
		return capacityType, true
	case corev1.LabelTopologyRegion:
		v := catalog.RegionOfZone(zone)
		return v, v != ""
	case karpenter.LabelCapacityReservationID:
		if r != nil {
			return r.id, true
		}
	case karpenter.LabelCapacityReservationType:
		if r != nil {
			return r.typ, true
		}
	}
	return "", false
}

// slotFree reports whether a node may open on c: any candidate but a
// reservation whose slots the plan has spent.
func slotFree(c *cand) bool { return c.resv == nil || c.resv.left > 0 }

// markReserved records, per zone, which of the pool's candidates are
// reservations (after the candidates are sorted).
func (p *poolInfo) markReserved(z int) {
	cs := p.cands[z]
	for i := range cs {
		if cs[i].resv == nil {
			continue
		}
		if p.resvBits == nil {
			p.resvBits = make([][]uint64, len(p.cands))
		}
		if p.resvBits[z] == nil {
			p.resvBits[z] = make([]uint64, (len(cs)+63)/64)
		}
		p.resvBits[z][i/64] |= 1 << uint(i%64)
	}
}

// pinOffering keeps a planned node on its side of the reservations: a node in
// a reservation compatible with that candidate alone, any other node with
// every candidate but the reservations.
func (n *node) pinOffering() {
	p := n.pool
	if p.resvBits == nil || p.resvBits[n.z] == nil {
		return
	}
	if p.cands[n.z][n.minIdx].resv != nil {
		clear(n.compat)
		n.compat[n.minIdx/64] |= 1 << uint(n.minIdx%64)
		return
	}
	for i, b := range p.resvBits[n.z] {
		n.compat[i] &^= b
	}
}

// inReservation reports whether a planned node holds a reservation's slot.
func (n *node) inReservation() bool {
	return !n.existing && n.pool != nil && n.pool.cands[n.z][n.minIdx].resv != nil
}

// fullReservations notes the reservations of pool that would have held the pod
// but had no slot left.
func (r *rejections) fullReservation(pool int, c *cand) {
	if r == nil || c.resv == nil {
		return
	}
	if !slices.Contains(r.pools[pool].full, c.resv.id) {
		r.pools[pool].full = append(r.pools[pool].full, c.resv.id)
	}
}

// fullText is the reason a pod waits on a pool whose reservations are full.
func (s *solver) fullText(pool *poolInfo, ids []string) string {
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		r := s.resv[id]
		parts = append(parts, fmt.Sprintf("%s (%s in %s)", id, r.instanceType, r.zone))
	}
	return fmt.Sprintf("NodePool %s: the capacity reservations that would hold it are full: %s", pool.name, strings.Join(parts, ", "))
}
