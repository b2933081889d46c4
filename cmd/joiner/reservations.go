package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// reservationCounts is --reservation ID=N, repeatable: how many more instances
// a capacity reservation takes. Offline, nothing else can say (EC2 reports the
// count; an EC2NodeClass's status names the reservation, not its count).
type reservationCounts map[string]int

func (r reservationCounts) String() string {
	parts := make([]string, 0, len(r))
	for id, n := range r {
		parts = append(parts, fmt.Sprintf("%s=%d", id, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (r reservationCounts) Set(v string) error {
	id, n, ok := strings.Cut(v, "=")
	if !ok || !strings.HasPrefix(id, "cr-") {
		return fmt.Errorf("%q: want cr-ID=COUNT (how many more instances the reservation takes)", v)
	}
	count, err := strconv.Atoi(n)
	if err != nil || count < 0 || count > 100000 {
		return fmt.Errorf("%q: the count must be a whole number from 0 to 100000", v)
	}
	r[id] = count
	return nil
}

// offlineReservations are the reservations the classes' status lists (as the
// consolidator or Karpenter wrote it) with the counts given: a reservation
// without a count is planned as full, said on w; a count for a reservation no
// class lists is an error.
func offlineReservations(classes []*karpenter.EC2NodeClass, counts reservationCounts, w io.Writer) ([]packer.Reservation, error) {
	var out []packer.Reservation
	at := map[string]int{}
	for _, nc := range classes {
		for _, cr := range nc.Status.CapacityReservations {
			if cr.ID == "" || cr.State != "" && cr.State != "active" {
				continue
			}
			if i, ok := at[cr.ID]; ok {
				out[i].NodeClasses = append(out[i].NodeClasses, nc.Name)
				continue
			}
			n, ok := counts[cr.ID]
			if !ok {
				fmt.Fprintf(w, "EC2NodeClass %s: capacity reservation %s (%s in %s) has no available count here; planned as full (pass --reservation %s=N)\n",
					nc.Name, cr.ID, cr.InstanceType, cr.AvailabilityZone, cr.ID)
			}
			at[cr.ID] = len(out)
			out = append(out, packer.Reservation{ID: cr.ID, InstanceType: cr.InstanceType, Zone: cr.AvailabilityZone,
				Type: cr.ReservationType, Available: n, NodeClasses: []string{nc.Name}})
		}
	}
	for id := range counts {
		if _, ok := at[id]; !ok {
			return nil, fmt.Errorf("--reservation %s: no EC2NodeClass's status.capacityReservations lists it", id)
		}
	}
	return out, nil
}
