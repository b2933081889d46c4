package cloud

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// codeReservationFull is EC2's answer when a targeted reservation has no free slot.
const codeReservationFull = "ReservationCapacityExceeded"

// reservedCandidates are the class's active reservations with a free slot for
// one of the request's options in a zone the NodeClaim allows (its chosen zones,
// its fallback zones, or any zone when it does not restrict them), in the order
// of the options: Karpenter prices a reserved offering far below on-demand, so
// any free slot is preferred over every spot and on-demand offering.
func (p *Provider) reservedCandidates(ctx context.Context, plan *launchPlan) ([]CapacityReservation, error) {
	req := plan.req
	if !slices.Contains(req.CapacityTypes, karpenter.CapacityTypeReserved) || len(req.NodeClass.Spec.CapacityReservationSelectorTerms) == 0 {
		return nil, nil
	}
	crs, err := p.CapacityReservations(ctx, req.NodeClass)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: %w", req.NodeClass.Name, err)
	}
	zoneOK := func(z string) bool {
		return len(req.Zones) == 0 || req.FallbackAnyZone || slices.Contains(req.Zones, z) || slices.Contains(req.FallbackZones, z)
	}
	var out []CapacityReservation
	for _, it := range req.InstanceTypes {
		if _, ok := plan.groupOf[it]; !ok {
			continue
		}
		for _, cr := range crs {
			if req.CapacityReservationID != "" {
				// The plan counted this reservation's slot: EC2, not a count read
				// earlier in the invocation, says whether it still has one.
				if cr.ID == req.CapacityReservationID && cr.InstanceType == it && p.subnetIn(plan, cr.Zone) != nil {
					out = append(out, cr)
				}
				continue
			}
			if cr.InstanceType == it && cr.Available > 0 && zoneOK(cr.Zone) && p.subnetIn(plan, cr.Zone) != nil &&
				!p.unavailable.IsUnavailable(it, cr.Zone, ReservedCapacityType(cr.ID)) {
				out = append(out, cr)
			}
		}
	}
	return out, nil
}

// ReservedCapacityType is the capacity type under which the unavailable-offerings
// cache remembers a full reservation: one per reservation, so a full one does
// not hide another of the same type and zone.
func ReservedCapacityType(id string) string { return karpenter.CapacityTypeReserved + "/" + id }

// tookSlot lowers the remembered available count of reservation id after a
// launch into it, so the invocation's later reads see the slot gone.
func (p *Provider) tookSlot(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, crs := range p.reservations {
		for i := range crs {
			if crs[i].ID == id && crs[i].Available > 0 {
				crs[i].Available--
			}
		}
	}
}

// subnetIn is the class's usable subnet with the most free addresses in zone.
func (p *Provider) subnetIn(plan *launchPlan, zone string) *Subnet {
	var best *Subnet
	for i, s := range plan.allSubs {
		if s.Zone == zone && !p.unavailable.IsSubnetUnavailable(s.ID) && (best == nil || s.AvailableIPs > best.AvailableIPs) {
			best = &plan.allSubs[i]
		}
	}
	return best
}

// launchReserved launches into the first reservation that has a slot: one
// on-demand fleet per reservation, its launch template targeting the
// reservation (as Karpenter launches reserved capacity). A full reservation
// is remembered as unavailable and the next one is tried; ok is false when
// none took the instance, and the launch goes on with spot and on-demand.
func (p *Provider) launchReserved(ctx context.Context, plan *launchPlan, dry *[]DryRunResult) (inst Instance, ok bool, err error) {
	crs, err := p.reservedCandidates(ctx, plan)
	if err != nil || len(crs) == 0 {
		return Instance{}, false, err
	}
	calls := 0
	for _, cr := range crs {
		base := plan.specs[plan.groupOf[cr.InstanceType]]
		data := *base.data
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(cr.ID)},
		}
		spec, err := p.namedTemplate(plan.req.NodeClass, &data, base.ami)
		if err != nil {
			return Instance{}, false, err
		}
		if _, err := p.ensureTemplate(ctx, plan.req.NodeClass, spec, dry); err != nil {
			return Instance{}, false, err
		}
		sub := p.subnetIn(plan, cr.Zone)
		configs := []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(spec.name), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceType(cr.InstanceType),
				SubnetId: aws.String(sub.ID), AvailabilityZone: aws.String(cr.Zone), ImageId: aws.String(base.ami.ID)}},
		}}
		in := p.fleetInput(plan, karpenter.CapacityTypeOnDemand, configs, calls)
		in.ClientToken = aws.String(aws.ToString(in.ClientToken)[:20] + "-" + cr.ID)
		calls++
		out, err := p.api.EC2.CreateFleet(ctx, in)
		if p.cfg.DryRun {
			r, okDry := dryRunOutcome("CreateFleet", plan.req.NodeClaim, err)
			if !okDry {
				return Instance{}, false, wrap("CreateFleet (dry run) for NodeClaim "+plan.req.NodeClaim, err)
			}
			p.recordDryRun(r, dry)
			return Instance{InstanceType: cr.InstanceType, Zone: cr.Zone, SubnetID: sub.ID, CapacityType: karpenter.CapacityTypeReserved,
				CapacityReservationID: cr.ID, CapacityReservationType: cr.Type, FleetCalls: calls, DryRun: *dry}, true, nil
		}
		if err != nil {
			return Instance{}, false, wrap("CreateFleet for NodeClaim "+plan.req.NodeClaim+" in reservation "+cr.ID, err)
		}
		if launched := fleetInstances(out, karpenter.CapacityTypeOnDemand); len(launched) > 0 {
			inst, err := p.keepOne(ctx, plan, launched)
			inst.FleetCalls, inst.LaunchTemplate = calls, spec.name
			inst.CapacityType, inst.CapacityReservationID, inst.CapacityReservationType = karpenter.CapacityTypeReserved, cr.ID, cr.Type
			p.tookSlot(cr.ID)
			return inst, true, err
		}
		// A full (or vanished) reservation: the next launch of this invocation leaves it out.
		p.unavailable.MarkUnavailable(cr.InstanceType, cr.Zone, ReservedCapacityType(cr.ID))
		p.log.Info("capacity reservation took no instance; trying the next", "nodeClaim", plan.req.NodeClaim, "reservation", cr.ID,
			"errors", summarizeErrors(out.Errors))
	}
	return Instance{FleetCalls: calls}, false, nil
}
