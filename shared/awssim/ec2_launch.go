package awssim

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
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
}

func (pl *pool) offering(ct string) Offering { return Offering{pl.instanceType, pl.zone, ct} }

// launchable says why an offering cannot launch one more instance now ("" if it can).
func (s *Sim) launchBlocker(o Offering, subnet *Subnet, used map[Offering]int, usedIPs map[string]int) (code, msg string) {
	if _, ok := s.types[o.InstanceType]; !ok {
		return "InvalidParameterValue", fmt.Sprintf("Invalid instance type %s", o.InstanceType)
	}
	cat, offered := s.catPrice[o]
	if !offered {
		return "Unsupported", fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", o.InstanceType, o.Zone)
	}
	ice := s.w.ice[o] || !cat.Available
	if n, limited := s.w.capacity[o]; limited && n-used[o] <= 0 {
		ice = true
	}
	if ice {
		if o.CapacityType == CapacitySpot {
			return "InsufficientInstanceCapacity", "There is no Spot capacity available that matches your request."
		}
		return "InsufficientInstanceCapacity", fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity.", o.InstanceType, o.Zone)
	}
	if subnet != nil && subnet.AvailableIPs-usedIPs[subnet.ID] <= 0 {
		return "InsufficientFreeAddressesInSubnet", fmt.Sprintf("There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", subnet.ID)
	}
	return "", ""
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
// state: used and usedIPs carry what earlier parts of the same call took.
func (s *Sim) plan(pools []*pool, ct, strategy string, target float64, budget *int,
	used map[Offering]int, usedIPs map[string]int, errs *[]poolError, failed map[*pool]bool) []placement {
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
			if code, msg := s.launchBlocker(pl.offering(ct), pl.subnet, used, usedIPs); code != "" {
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
		used[chosen.offering(ct)]++
		if chosen.subnet != nil {
			usedIPs[chosen.subnet.ID]++
		}
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
}

// launch creates count instances from a pool. The caller has checked capacity.
func (s *Sim) launch(pl *pool, ct string, count int, spec launchSpec) []*Instance {
	now := s.clock.Now()
	var out []*Instance
	for range count {
		o := pl.offering(ct)
		if n, limited := s.w.capacity[o]; limited {
			s.w.capacity[o] = n - 1
		}
		in := &Instance{
			ID: s.w.hexID("i", 17), InstanceType: pl.instanceType, Zone: pl.zone, CapacityType: ct,
			State: StatePending, LaunchTime: now.Truncate(time.Second), ImageID: pl.imageID,
			Architecture: s.archOf(pl.instanceType), FleetID: spec.fleetID, ReservationID: spec.reservationID,
			SecurityGroupIDs: slices.Clone(spec.sgIDs), UserData: spec.userData, IAMInstanceProfile: spec.profile,
			BlockDeviceMappings: slices.Clone(spec.bdms), Tags: cloneTags(spec.tags), PricePerHour: s.price(o),
			NextTransition: now.Add(s.cfg.BootTime),
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
	if !ok {
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
