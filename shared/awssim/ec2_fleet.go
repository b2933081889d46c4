package awssim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// ---- CreateFleet ----

type xLTSpec struct {
	LaunchTemplateID   string `xml:"launchTemplateId,omitempty"`
	LaunchTemplateName string `xml:"launchTemplateName,omitempty"`
	Version            string `xml:"version,omitempty"`
}

type xOverrides struct {
	InstanceType     string   `xml:"instanceType,omitempty"`
	SubnetID         string   `xml:"subnetId,omitempty"`
	AvailabilityZone string   `xml:"availabilityZone,omitempty"`
	ImageID          string   `xml:"imageId,omitempty"`
	MaxPrice         string   `xml:"maxPrice,omitempty"`
	Priority         *float64 `xml:"priority,omitempty"`
	WeightedCapacity *float64 `xml:"weightedCapacity,omitempty"`
}

type xLTAndOverrides struct {
	LaunchTemplateSpecification xLTSpec     `xml:"launchTemplateSpecification"`
	Overrides                   *xOverrides `xml:"overrides,omitempty"`
}

type xFleetInstance struct {
	LaunchTemplateAndOverrides xLTAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string          `xml:"lifecycle"`
	InstanceIDs                []string        `xml:"instanceIds>item"`
	InstanceType               string          `xml:"instanceType"`
}

type xFleetError struct {
	LaunchTemplateAndOverrides xLTAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string          `xml:"lifecycle"`
	ErrorCode                  string          `xml:"errorCode"`
	ErrorMessage               string          `xml:"errorMessage"`
}

type createFleetOut struct {
	meta
	FleetID   string           `xml:"fleetId"`
	Errors    []xFleetError    `xml:"errorSet>item"`
	Instances []xFleetInstance `xml:"fleetInstanceSet>item"`
}

var spotStrategies = []string{"lowest-price", "diversified", "capacity-optimized", "capacity-optimized-prioritized", "price-capacity-optimized"}
var onDemandStrategies = []string{"lowest-price", "prioritized"}

func (pl *pool) ltAndOverrides() xLTAndOverrides {
	ov := pl.ov
	x := xLTAndOverrides{LaunchTemplateSpecification: xLTSpec{LaunchTemplateID: pl.lt.ID, Version: cmpOr(pl.ltVersion, "1")}}
	if ov != (xOverrides{}) {
		x.Overrides = &ov
	}
	return x
}

func (s *Sim) createFleet(p params, c *callCtx) (ec2Body, *apiError) {
	if t := p.str("Type"); t != "instant" {
		return nil, errf(http.StatusBadRequest, "InvalidParameterValue", "awssim supports CreateFleet Type=instant only (got %q)", cmpOr(t, "maintain (the default)"))
	}
	const tcs = "TargetCapacitySpecification."
	total, err := p.int(tcs+"TotalTargetCapacity", -1)
	if err != nil {
		return nil, err
	}
	if total <= 0 {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "TargetCapacitySpecification.TotalTargetCapacity must be a positive integer")
	}
	defType := cmpOr(p.str(tcs+"DefaultTargetCapacityType"), CapacityOnDemand) // as moto and EC2 default it
	if defType != CapacitySpot && defType != CapacityOnDemand {
		return nil, errBadParam("DefaultTargetCapacityType must be spot or on-demand, got %q", defType)
	}
	spotT, err := p.int(tcs+"SpotTargetCapacity", 0)
	if err != nil {
		return nil, err
	}
	odT, err := p.int(tcs+"OnDemandTargetCapacity", 0)
	if err != nil {
		return nil, err
	}
	if spotT < 0 || odT < 0 || spotT+odT > total {
		return nil, errBadParam("SpotTargetCapacity + OnDemandTargetCapacity (%d) exceeds TotalTargetCapacity (%d)", spotT+odT, total)
	}
	if defType == CapacitySpot {
		spotT += total - spotT - odT
	} else {
		odT += total - spotT - odT
	}
	spotStrategy := cmpOr(p.str("SpotOptions.AllocationStrategy"), "lowest-price")
	if !slices.Contains(spotStrategies, spotStrategy) {
		return nil, errBadParam("Invalid SpotOptions.AllocationStrategy %q (want one of %s)", spotStrategy, strings.Join(spotStrategies, ", "))
	}
	odStrategy := cmpOr(p.str("OnDemandOptions.AllocationStrategy"), "lowest-price")
	if !slices.Contains(onDemandStrategies, odStrategy) {
		return nil, errBadParam("Invalid OnDemandOptions.AllocationStrategy %q (want one of %s)", odStrategy, strings.Join(onDemandStrategies, ", "))
	}
	minSpot, err := p.int("SpotOptions.MinTargetCapacity", 0)
	if err != nil {
		return nil, err
	}
	minOD, err := p.int("OnDemandOptions.MinTargetCapacity", 0)
	if err != nil {
		return nil, err
	}
	specs, err := p.tagSpecs("TagSpecification")
	if err != nil {
		return nil, err
	}
	for rt := range specs {
		if rt != "instance" && rt != "fleet" && rt != "volume" && rt != "network-interface" {
			return nil, errBadParam("'%s' is not a valid taggable resource type for this operation.", rt)
		}
	}

	cfgIdx := p.indices("LaunchTemplateConfigs")
	if len(cfgIdx) == 0 {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter LaunchTemplateConfigs")
	}
	var pools []*pool
	var errs []poolError
	failed := map[*pool]bool{}
	for ci, i := range cfgIdx {
		k := fmt.Sprintf("LaunchTemplateConfigs.%d.", i)
		ls := k + "LaunchTemplateSpecification."
		version := p.str(ls + "Version")
		lt, aerr := s.resolveTemplate(p.str(ls+"LaunchTemplateId"), p.str(ls+"LaunchTemplateName"), version)
		if aerr != nil {
			return nil, aerr
		}
		if aerr := s.checkSecurityGroups(lt.Data.SecurityGroupIDs); aerr != nil {
			return nil, aerr
		}
		input := launchInput{profile: lt.Data.IAMInstanceProfile, userData: lt.Data.UserData, sgIDs: lt.Data.SecurityGroupIDs,
			bdms: lt.Data.BlockDeviceMappings, tags: map[string]string{}}
		for k, v := range lt.Data.TagSpecifications["instance"] {
			input.tags[k] = v
		}
		for k, v := range specs["instance"] {
			input.tags[k] = v
		}
		ovIdx := p.indices(k + "Overrides")
		if len(ovIdx) == 0 {
			ovIdx = []int{-1}
		}
		for _, j := range ovIdx {
			o := fmt.Sprintf("%sOverrides.%d.", k, j)
			pl := &pool{cfg: ci, lt: lt, ltVersion: version, weight: 1, order: len(pools), reservation: lt.Data.CapacityReservationID}
			if j >= 0 {
				pl.ov = xOverrides{
					InstanceType: p.str(o + "InstanceType"), SubnetID: p.str(o + "SubnetId"),
					AvailabilityZone: p.str(o + "AvailabilityZone"), ImageID: p.str(o + "ImageId"), MaxPrice: p.str(o + "MaxPrice"),
				}
				if v, ok, aerr := p.float(o + "Priority"); aerr != nil {
					return nil, aerr
				} else if ok {
					pl.priority, pl.hasPriority = v, true
					pl.ov.Priority = &v
				}
				if v, ok, aerr := p.float(o + "WeightedCapacity"); aerr != nil {
					return nil, aerr
				} else if ok {
					if v <= 0 {
						return nil, errBadParam("WeightedCapacity must be positive, got %v", v)
					}
					pl.weight = v
					pl.ov.WeightedCapacity = &v
				}
			}
			pl.instanceType = cmpOr(pl.ov.InstanceType, lt.Data.InstanceType)
			pl.imageID = cmpOr(pl.ov.ImageID, lt.Data.ImageID)
			if pl.instanceType == "" {
				return nil, errf(http.StatusBadRequest, "MissingParameter", "No instance type in launch template %s or its overrides", lt.ID)
			}
			sn, zone, aerr := s.subnetFor(pl.ov.SubnetID, pl.ov.AvailabilityZone)
			if aerr != nil {
				return nil, aerr
			}
			pl.subnet, pl.zone = sn, zone
			pools = append(pools, pl)
			if code, msg := s.checkPool(pl, input); code != "" {
				failed[pl] = true
				for _, ct := range []string{CapacitySpot, CapacityOnDemand} {
					if ct == CapacitySpot && spotT > 0 || ct == CapacityOnDemand && odT > 0 {
						errs = append(errs, poolError{pl, ct, code, msg})
					}
				}
			}
		}
	}
	if len(pools) > 300 {
		return nil, errBadParam("A fleet request can have at most 300 launch template overrides, got %d", len(pools))
	}

	budget := c.partial // -1: unlimited
	u := newUsage()
	var places []placement
	if spotT > 0 {
		failedSpot := clonePoolSet(failed)
		pl := s.plan(pools, CapacitySpot, spotStrategy, float64(spotT), &budget, u, &errs, failedSpot)
		if countUnits(pl) >= float64(max(minSpot, 1)) || minSpot == 0 {
			places = append(places, pl...)
		} else {
			for _, x := range pl {
				u.take(x.pool, CapacitySpot, -x.count)
			}
		}
	}
	if odT > 0 {
		failedOD := clonePoolSet(failed)
		pl := s.plan(pools, CapacityOnDemand, odStrategy, float64(odT), &budget, u, &errs, failedOD)
		if countUnits(pl) >= float64(max(minOD, 1)) || minOD == 0 {
			places = append(places, pl...)
		}
	}

	fleetID := "fleet-" + s.w.uuid()
	out := &createFleetOut{FleetID: fleetID}
	for _, e := range errs {
		out.Errors = append(out.Errors, xFleetError{e.pool.ltAndOverrides(), e.ct, e.code, e.msg})
	}
	for _, pl := range places {
		lt := pl.pool.lt
		tags := map[string]string{}
		for k, v := range lt.Data.TagSpecifications["instance"] {
			tags[k] = v
		}
		for k, v := range specs["instance"] {
			tags[k] = v
		}
		ins := s.launch(pl.pool, pl.ct, pl.count, launchSpec{
			sgIDs: lt.Data.SecurityGroupIDs, userData: lt.Data.UserData, profile: lt.Data.IAMInstanceProfile,
			metadata: lt.Data.MetadataOptions, bdms: lt.Data.BlockDeviceMappings, tags: tags,
			fleetID: fleetID, reservationID: s.w.hexID("r", 17), reservationPreference: lt.Data.CapacityReservationPreference,
		})
		fi := xFleetInstance{LaunchTemplateAndOverrides: pl.pool.ltAndOverrides(), Lifecycle: pl.ct, InstanceType: pl.pool.instanceType}
		for _, in := range ins {
			fi.InstanceIDs = append(fi.InstanceIDs, in.ID)
		}
		out.Instances = append(out.Instances, fi)
	}
	return out, nil
}

func clonePoolSet(m map[*pool]bool) map[*pool]bool {
	out := make(map[*pool]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func countUnits(ps []placement) float64 {
	var n float64
	for _, p := range ps {
		n += float64(p.count) * p.pool.weight
	}
	return n
}
