package awssim

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// ---- launching ----

// pool is one launch option of a CreateFleet or RunInstances call.
type pool struct {
	cfg          int // index of the launch template config
	lt           *LaunchTemplate
	ltVersion    string
	instanceType string
	subnet       *Subnet
	zone         string
	imageID      string
	priority     float64
	hasPriority  bool
	weight       float64
	ov           xOverrides // the override as given, echoed in answers
	order        int
	// reservation is the capacity reservation the pool's launches target.
	reservation string
}

func (pl *pool) offering(ct string) Offering { return Offering{pl.instanceType, pl.zone, ct} }

// usage is what earlier parts of one call took: offerings' capacity, subnets'
// addresses and reservations' slots, none of which the call has consumed yet.
type usage struct {
	offerings    map[Offering]int
	ips          map[string]int
	reservations map[string]int
}

func newUsage() *usage {
	return &usage{offerings: map[Offering]int{}, ips: map[string]int{}, reservations: map[string]int{}}
}

func (u *usage) take(pl *pool, ct string, n int) {
	u.offerings[pl.offering(ct)] += n
	if pl.subnet != nil {
		u.ips[pl.subnet.ID] += n
	}
	if pl.reservation != "" {
		u.reservations[pl.reservation] += n
	}
}

// launchBlocker says why a pool cannot launch one more instance of capacity
// type ct now ("" if it can).
func (s *Sim) launchBlocker(pl *pool, ct string, u *usage) (code, msg string) {
	o := pl.offering(ct)
	if _, ok := s.types[o.InstanceType]; !ok {
		return "InvalidParameterValue", fmt.Sprintf("Invalid instance type %s", o.InstanceType)
	}
	cat, offered := s.catPrice[o]
	if !offered {
		// moto launches any type anywhere. "Error codes for the Amazon EC2 API":
		// Unsupported, "The specified request is unsupported. For example, you
		// might be trying to launch an instance in an Availability Zone that
		// currently has constraints on that instance type. The returned message
		// provides details of the unsupported request."; the message is EC2's.
		msg := fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", o.InstanceType, o.Zone)
		if zones := s.offeredZones(o.InstanceType, ct); len(zones) > 0 {
			msg += fmt.Sprintf(" Please retry your request by not specifying an Availability Zone or choosing %s.", strings.Join(zones, ", "))
		}
		return "Unsupported", msg
	}
	if pl.reservation != "" {
		// A reservation's slots are capacity set aside: the zone's shortage does not touch them.
		if code, msg := s.reservationBlocker(pl.reservation, o, u.reservations); code != "" {
			return code, msg
		}
	} else {
		ice := s.w.ice[o] || !cat.Available
		if n, limited := s.w.capacity[o]; limited && n-u.offerings[o] <= 0 {
			ice = true
		}
		if ice {
			if o.CapacityType == CapacitySpot {
				return "InsufficientInstanceCapacity", "There is no Spot capacity available that matches your request."
			}
			return "InsufficientInstanceCapacity", fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity.", o.InstanceType, o.Zone)
		}
	}
	if subnet := pl.subnet; subnet != nil && subnet.AvailableIPs-u.ips[subnet.ID] <= 0 {
		return "InsufficientFreeAddressesInSubnet", fmt.Sprintf("There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", subnet.ID)
	}
	return "", ""
}

// offeredZones lists the zones that offer an instance type with a capacity type.
func (s *Sim) offeredZones(instanceType, ct string) []string {
	var out []string
	for _, z := range s.zones {
		if _, ok := s.catPrice[Offering{instanceType, z, ct}]; ok {
			out = append(out, z)
		}
	}
	return out
}

// remaining is the capacity left in an offering (MaxInt when unlimited).
func (s *Sim) remaining(o Offering) int {
	if n, ok := s.w.capacity[o]; ok {
		return n
	}
	return math.MaxInt
}

// orderPools sorts pools by an allocation strategy, most preferred first.
func (s *Sim) orderPools(pools []*pool, ct, strategy string) []*pool {
	out := slices.Clone(pools)
	price := func(pl *pool) float64 {
		if _, ok := s.catPrice[pl.offering(ct)]; !ok {
			return math.Inf(1)
		}
		return s.price(pl.offering(ct)) / pl.weight
	}
	prio := func(pl *pool) float64 {
		if !pl.hasPriority {
			return math.Inf(1)
		}
		return pl.priority
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch strategy {
		case "prioritized", "capacity-optimized-prioritized":
			if prio(a) != prio(b) {
				return prio(a) < prio(b)
			}
		case "capacity-optimized":
			if ra, rb := s.remaining(a.offering(ct)), s.remaining(b.offering(ct)); ra != rb {
				return ra > rb
			}
		case "diversified":
			return a.order < b.order
		}
		if pa, pb := price(a), price(b); pa != pb {
			return pa < pb
		}
		if strategy == "price-capacity-optimized" {
			if ra, rb := s.remaining(a.offering(ct)), s.remaining(b.offering(ct)); ra != rb {
				return ra > rb
			}
		}
		return a.order < b.order
	})
	return out
}

// placement is one planned group of instances from one pool.
type placement struct {
	pool  *pool
	ct    string
	count int
}

type poolError struct {
	pool      *pool
	ct        string
	code, msg string
}

// plan decides where target units of capacity type ct go. It never mutates
// state: u carries what earlier parts of the same call took.
func (s *Sim) plan(pools []*pool, ct, strategy string, target float64, budget *int,
	u *usage, errs *[]poolError, failed map[*pool]bool) []placement {
	ordered := s.orderPools(pools, ct, strategy)
	counts := map[*pool]int{}
	var got float64
	rr := 0
	for got < target {
		if *budget == 0 {
			// A partial-fleet fault: report the shortfall against the next choice.
			for _, pl := range ordered {
				if !failed[pl] {
					*errs = append(*errs, poolError{pl, ct, "InsufficientInstanceCapacity",
						fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity.", pl.instanceType, pl.zone)})
					break
				}
			}
			break
		}
		var chosen *pool
		for k := 0; k < len(ordered); k++ {
			idx := k
			if strategy == "diversified" {
				idx = (rr + k) % len(ordered)
			}
			pl := ordered[idx]
			if failed[pl] {
				continue
			}
			if code, msg := s.launchBlocker(pl, ct, u); code != "" {
				failed[pl] = true
				*errs = append(*errs, poolError{pl, ct, code, msg})
				continue
			}
			chosen = pl
			if strategy == "diversified" {
				rr = idx + 1
			}
			break
		}
		if chosen == nil {
			break
		}
		counts[chosen]++
		u.take(chosen, ct, 1)
		got += chosen.weight
		if *budget > 0 {
			*budget--
		}
	}
	var out []placement
	for _, pl := range ordered {
		if n := counts[pl]; n > 0 {
			out = append(out, placement{pl, ct, n})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].pool.order < out[j].pool.order })
	return out
}

// launchSpec is everything an instance is launched with, besides its pool.
type launchSpec struct {
	sgIDs         []string
	userData      string
	profile       string
	metadata      *MetadataOptions
	bdms          []BlockDeviceMapping
	tags          map[string]string
	fleetID       string
	reservationID string
	// reservationPreference is the launch's CapacityReservationPreference:
	// "open" (the default) lets on-demand launches fill open reservations.
	reservationPreference string
}

// launch creates count instances from a pool. The caller has checked capacity.
func (s *Sim) launch(pl *pool, ct string, count int, spec launchSpec) []*Instance {
	now := s.clock.Now()
	var out []*Instance
	for range count {
		o := pl.offering(ct)
		res := pl.reservation
		if res == "" {
			res = s.openReservation(o, spec.reservationPreference)
		}
		if res == "" {
			if n, limited := s.w.capacity[o]; limited {
				s.w.capacity[o] = n - 1
			}
		} else if cr, ok := s.w.reservations.get(res); ok {
			cr.AvailableCount--
		}
		in := &Instance{
			ID: s.w.hexID("i", 17), InstanceType: pl.instanceType, Zone: pl.zone, CapacityType: ct,
			State: StatePending, LaunchTime: now.Truncate(time.Second), ImageID: pl.imageID,
			Architecture: s.archOf(pl.instanceType), FleetID: spec.fleetID, ReservationID: spec.reservationID,
			SecurityGroupIDs: slices.Clone(spec.sgIDs), UserData: spec.userData, IAMInstanceProfile: spec.profile,
			BlockDeviceMappings: slices.Clone(spec.bdms), Tags: cloneTags(spec.tags), PricePerHour: s.price(o),
			NextTransition: now.Add(s.cfg.BootTime), CapacityReservationID: res,
		}
		if spec.metadata != nil {
			m := *spec.metadata
			in.MetadataOptions = &m
		}
		if pl.lt != nil {
			in.LaunchTemplateID, in.LaunchTemplateName = pl.lt.ID, pl.lt.Name
			in.Tags["aws:ec2launchtemplate:id"] = pl.lt.ID
			in.Tags["aws:ec2launchtemplate:version"] = "1"
		}
		if spec.fleetID != "" {
			in.Tags["aws:ec2:fleet-id"] = spec.fleetID
		}
		if ct == CapacitySpot {
			in.SpotRequestID = s.w.hexID("sir", 8)
		}
		if sn := pl.subnet; sn != nil {
			in.SubnetID, in.VpcID = sn.ID, sn.VpcID
			in.PrivateIP = s.w.nextIP(sn)
			in.PrivateDNSName = privateDNS(in.PrivateIP, s.w.region)
			sn.AvailableIPs--
		}
		s.w.instances.put(in.ID, in)
		ev := s.eventEnvelope("EC2 Instance State-change Notification", now, in.ID, map[string]string{"instance-id": in.ID, "state": StatePending})
		s.w.events = append(s.w.events, ev)
		out = append(out, in)
	}
	return out
}

// subnetFor picks the subnet of a pool: the one named, else the first one in the zone.
func (s *Sim) subnetFor(subnetID, zone string) (*Subnet, string, *apiError) {
	if subnetID != "" {
		sn, ok := s.w.subnets.get(subnetID)
		if !ok {
			return nil, "", errf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", subnetID)
		}
		if zone != "" && zone != sn.Zone {
			return nil, "", errBadParam("The subnet %s is in %s, not in the requested Availability Zone %s", subnetID, sn.Zone, zone)
		}
		return sn, sn.Zone, nil
	}
	for _, sn := range s.w.subnets.list() {
		if zone == "" || sn.Zone == zone {
			return sn, sn.Zone, nil
		}
	}
	if zone == "" {
		if len(s.zones) == 0 {
			return nil, "", errBadParam("no subnet and no zone to launch into")
		}
		zone = s.zones[0]
	}
	if !slices.Contains(s.zones, zone) {
		return nil, "", errBadParam("Invalid availability zone: [%s]", zone)
	}
	return nil, zone, nil
}

// checkImage validates the AMI of a pool against its instance type.
func (s *Sim) checkImage(imageID, instanceType string) (code, msg string) {
	if imageID == "" {
		return "MissingParameter", "The request must contain the parameter ImageId"
	}
	img, ok := s.w.images.get(imageID)
	if !ok || img.State == imageDeregistered {
		// A deregistered image is gone for launches, even from a launch template
		// that still names it (DeregisterImage: "After you deregister an AMI, it
		// can't be used to launch new instances."); moto deletes the image, so a
		// launch there finds no image. "Error codes for the Amazon EC2 API" has
		// InvalidAMIID.NotFound, "The specified AMI doesn't exist. ...", and
		// InvalidAMIID.Unavailable, "The specified AMI has been deregistered or is
		// in a transitional state. ...": EC2 may answer either for a deregistered
		// image, and Joiner treats both alike (a launch error that is not about
		// capacity). The simulator answers the first, with EC2's message.
		return "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", imageID)
	}
	if img.State != "available" {
		return "InvalidAMIID.Unavailable", fmt.Sprintf("The image id '[%s]' is not available (state %s)", imageID, img.State)
	}
	if _, known := s.types[instanceType]; known {
		if arch := s.archOf(instanceType); arch != img.Architecture {
			return "InvalidParameterValue", fmt.Sprintf("The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI. Specify an instance type and an AMI that have matching architectures, and try again.", arch, img.Architecture)
		}
	}
	return "", ""
}

func (s *Sim) checkSecurityGroups(ids []string) *apiError {
	for _, id := range ids {
		if _, ok := s.w.sgs.get(id); !ok {
			return errf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	return nil
}

// openReservation finds an active open reservation an on-demand launch of o
// fills without naming it, as EC2 matches open reservations; "" when none
// (or the launch opted out with preference none).
func (s *Sim) openReservation(o Offering, preference string) string {
	if o.CapacityType != CapacityOnDemand || preference == "none" || preference == "capacity-reservations-only" {
		return ""
	}
	for _, cr := range s.w.reservations.list() {
		if cr.InstanceMatchCriteria == "open" && cr.State == "active" && cr.AvailableCount > 0 &&
			cr.InstanceType == o.InstanceType && cr.Zone == o.Zone {
			return cr.ID
		}
	}
	return ""
}
