package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/amifamily"
	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// MaxOverrides caps the instance type × subnet overrides of one CreateFleet.
const MaxOverrides = 60

// maxFleetCalls bounds the CreateFleet calls of one capacity type in one
// launch's chosen zones, and again in all its zones; each call past the first
// needs a fresh unavailable offering, so the bound is only reached by an
// endpoint that misbehaves.
const maxFleetCalls = 20

// LaunchRequest asks for one instance for one NodeClaim.
type LaunchRequest struct {
	// NodeClaim names the NodeClaim the instance is for (tagged karpenter.sh/nodeclaim).
	NodeClaim string
	// NodePool names its NodePool (tagged karpenter.sh/nodepool).
	NodePool string
	// NodeClass is the resolved EC2NodeClass.
	NodeClass *karpenter.EC2NodeClass
	// InstanceTypes are the acceptable types in order of preference (cheapest first).
	InstanceTypes []string
	// Zones are the allowed zones; empty allows every zone with a selected subnet.
	Zones []string
	// FallbackZones are further zones the NodeClaim allows, tried in the same
	// call for a capacity type once every offering of it in Zones turned out
	// unavailable: the engine picked a zone, but an ICE there must not wait for
	// the next invocation.
	FallbackZones []string
	// FallbackAnyZone, for a NodeClaim that does not restrict its zone, makes
	// every zone of the class's subnets the fallback.
	FallbackAnyZone bool
	// CapacityTypes are the allowed capacity types; empty means on-demand.
	// Reserved is tried first when allowed (a free slot in one of the class's
	// capacity reservations), then spot, then on-demand.
	CapacityTypes []string
	// CapacityReservationID, when set, is the reservation the engine planned the
	// node in (its slot counted): the launch goes into that reservation and
	// nowhere else, and fails with ErrInsufficientCapacity when it is full, so
	// the next plan, without it, falls back to spot or on-demand.
	CapacityReservationID string
	// Labels and Taints (pool taints and startup taints) go into user data.
	Labels map[string]string
	Taints []corev1.Taint
}

// Instance is a launched instance (or, in DRY_RUN, the launch that would have been).
type Instance struct {
	ID             string
	ProviderID     string
	InstanceType   string
	Zone           string
	CapacityType   string
	SubnetID       string
	ImageID        string
	LaunchTemplate string
	// FleetCalls is how many CreateFleet calls the launch made.
	FleetCalls int
	// ExcessTerminated lists extra instances a fleet returned that were terminated.
	ExcessTerminated []string
	// ExcessLeft lists extra instances whose termination failed; they carry the
	// ownership tags, so leak clean-up (ListOwned) finds them.
	ExcessLeft []string
	// DryRun holds the dry-run answers when Config.DryRun is set (ID is empty then).
	DryRun []DryRunResult
	// CapacityReservationID and CapacityReservationType (default or
	// capacity-block) are set when the instance went into a reservation
	// (CapacityType is then reserved).
	CapacityReservationID, CapacityReservationType string
}

// offeringDependentLabels vary with the instance type, zone or capacity type
// a fleet picks, so they stay out of user data (one launch template serves
// every option, in every zone the NodeClaim allows); the kubelet or Joiner's
// registration sets them.
var offeringDependentLabels = map[string]bool{
	corev1.LabelInstanceTypeStable: true, corev1.LabelInstanceType: true,
	corev1.LabelTopologyZone: true, corev1.LabelTopologyRegion: true, karpenter.LabelTopologyZoneID: true,
	corev1.LabelFailureDomainBetaZone: true, corev1.LabelFailureDomainBetaRegion: true,
	corev1.LabelArchStable: true, corev1.LabelOSStable: true, corev1.LabelHostname: true,
	karpenter.CapacityTypeLabelKey: true, karpenter.NodeClaimLabelKey: true,
}

// UserDataLabels returns the labels that go into user data.
func UserDataLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if offeringDependentLabels[k] || strings.HasPrefix(k, "karpenter.k8s.aws/instance-") {
			continue
		}
		out[k] = v
	}
	return out
}

// launchPlan is everything resolved once per Launch.
type launchPlan struct {
	req     LaunchRequest
	family  amifamily.Family
	subnets map[string]Subnet // zone → chosen subnet
	allSubs []Subnet
	zones   []string // every zone the launch may use, with a usable subnet
	// primary are the zones tried first (req.Zones), the rest of zones only
	// once those have no offering left; nil when there is no rest.
	primary  []string
	facts    map[string]*catalog.InstanceType
	offered  map[string]map[string]bool
	groupOf  map[string]string // instance type → template name
	spotOf   map[string]string // template name → its spot variant (spotTemplate)
	specs    map[string]templateSpec
	tags     map[string]string
	skipped  []string
	capTypes []string
}

// Launch launches one instance for a NodeClaim: one CreateFleet (type instant)
// per attempt with up to MaxOverrides type × subnet overrides, spot first
// (price-capacity-optimized) then on-demand (lowest-price). Within a capacity
// type the request's Zones come first and its fallback zones after, once
// those have no offering left: the engine's zone is its first choice, and a
// spot shortage there goes to spot in the NodeClaim's other zones before
// on-demand, as Karpenter prefers spot wherever the NodeClaim allows it.
// Offerings a fleet reports as unfulfillable are marked unavailable and the
// next attempt leaves them out. A fleet that returns more than one instance
// has the extras terminated. Every instance carries the ownership tags from
// creation.
func (p *Provider) Launch(ctx context.Context, req LaunchRequest) (Instance, error) {
	plan, err := p.planLaunch(ctx, req)
	if err != nil {
		return Instance{}, err
	}
	var dry []DryRunResult
	if inst, ok, err := p.launchReserved(ctx, plan, &dry); err != nil || ok {
		return inst, err
	} else if req.CapacityReservationID != "" {
		return inst, fmt.Errorf("launching NodeClaim %s into capacity reservation %s (%s): %w: the reservation took no instance",
			req.NodeClaim, req.CapacityReservationID, strings.Join(req.InstanceTypes, ","), ErrInsufficientCapacity)
	}
	calls := 0
	var tried []string
	for _, ct := range plan.capTypes {
		for _, wide := range []bool{false, true} {
			if wide {
				if plan.primary == nil {
					break
				}
				p.log.Info("no capacity in the chosen zones; trying the NodeClaim's other zones", "nodeClaim", req.NodeClaim,
					"capacityType", ct, "zones", plan.primary, "allowed", plan.zones)
			}
			for attempt := 0; attempt < maxFleetCalls; attempt++ {
				configs, overrides := p.overrides(plan, ct, wide)
				if overrides == 0 {
					break
				}
				if err := p.ensureTemplates(ctx, plan, configs, &dry); err != nil {
					return Instance{}, err
				}
				in := p.fleetInput(plan, ct, configs, calls)
				calls++
				out, err := p.api.EC2.CreateFleet(ctx, in)
				if p.cfg.DryRun {
					r, ok := dryRunOutcome("CreateFleet", req.NodeClaim, err)
					if !ok {
						return Instance{}, wrap("CreateFleet (dry run) for NodeClaim "+req.NodeClaim, err)
					}
					p.recordDryRun(r, &dry)
					first := firstOverride(configs)
					return Instance{
						InstanceType: string(first.InstanceType), Zone: aws.ToString(first.AvailabilityZone),
						SubnetID: aws.ToString(first.SubnetId), CapacityType: ct, FleetCalls: calls, DryRun: dry,
					}, nil
				}
				if err != nil {
					return Instance{}, wrap("CreateFleet for NodeClaim "+req.NodeClaim, err)
				}
				marked, fatal := p.noteFleetErrors(plan, ct, out.Errors)
				launched := fleetInstances(out, ct)
				if len(launched) > 0 {
					inst, err := p.keepOne(ctx, plan, launched)
					inst.FleetCalls = calls
					return inst, err
				}
				tried = append(tried, fmt.Sprintf("%s: %s", ct, summarizeErrors(out.Errors)))
				if len(fatal) > 0 {
					return Instance{FleetCalls: calls}, fmt.Errorf("CreateFleet for NodeClaim %s launched nothing: %s", req.NodeClaim, strings.Join(fatal, "; "))
				}
				if marked == 0 {
					// Nothing new learned: another identical call would fail the same way.
					break
				}
			}
		}
	}
	reason := "every allowed offering is marked unavailable"
	if len(tried) > 0 {
		reason = strings.Join(tried, "; ")
	}
	return Instance{FleetCalls: calls}, fmt.Errorf("launching NodeClaim %s (types %s, capacity types %s, zones %s): %w: %s",
		req.NodeClaim, strings.Join(req.InstanceTypes, ","), strings.Join(plan.capTypes, ","), strings.Join(plan.zones, ","), ErrInsufficientCapacity, reason)
}

func (p *Provider) planLaunch(ctx context.Context, req LaunchRequest) (*launchPlan, error) {
	switch {
	case req.NodeClaim == "":
		return nil, errors.New("launch: NodeClaim name is required")
	case req.NodePool == "":
		return nil, fmt.Errorf("launch %s: NodePool name is required", req.NodeClaim)
	case req.NodeClass == nil:
		return nil, fmt.Errorf("launch %s: EC2NodeClass is required", req.NodeClaim)
	case len(req.InstanceTypes) == 0:
		return nil, fmt.Errorf("launch %s: no instance type options", req.NodeClaim)
	}
	nc := req.NodeClass
	family, err := amifamily.Of(nc)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	plan := &launchPlan{req: req, family: family, specs: map[string]templateSpec{}, groupOf: map[string]string{}, spotOf: map[string]string{}}
	for _, ct := range []string{karpenter.CapacityTypeSpot, karpenter.CapacityTypeOnDemand} {
		if slices.Contains(req.CapacityTypes, ct) || (len(req.CapacityTypes) == 0 && ct == karpenter.CapacityTypeOnDemand) {
			plan.capTypes = append(plan.capTypes, ct)
		}
	}
	if len(plan.capTypes) == 0 && !slices.Contains(req.CapacityTypes, karpenter.CapacityTypeReserved) {
		return nil, fmt.Errorf("launch %s: capacity types %v: Joiner launches spot, on-demand and reserved capacity", req.NodeClaim, req.CapacityTypes)
	}
	if len(plan.capTypes) == 0 && len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
		return nil, fmt.Errorf("launch %s: capacity type reserved only, but EC2NodeClass %s has no capacityReservationSelectorTerms to select a reservation", req.NodeClaim, nc.Name)
	}
	subnets, err := p.Subnets(ctx, nc.Spec.SubnetSelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	plan.allSubs = subnets
	plan.subnets = map[string]Subnet{}
	for _, s := range subnets {
		if !plan.allows(s.Zone) || p.unavailable.IsSubnetUnavailable(s.ID) {
			continue
		}
		// The subnet with the most free addresses in each zone, as Karpenter picks.
		if cur, ok := plan.subnets[s.Zone]; !ok || s.AvailableIPs > cur.AvailableIPs {
			plan.subnets[s.Zone] = s
		}
	}
	plan.zones = slices.Sorted(maps.Keys(plan.subnets))
	if len(plan.zones) == 0 {
		return nil, fmt.Errorf("launch %s: EC2NodeClass %s has no usable subnet in the allowed zones %v (its subnets are in %v)", req.NodeClaim, nc.Name,
			append(slices.Clone(req.Zones), req.FallbackZones...), Zones(subnets))
	}
	if len(req.Zones) > 0 && req.CapacityReservationID == "" && slices.ContainsFunc(plan.zones, func(z string) bool { return !slices.Contains(req.Zones, z) }) {
		plan.primary = req.Zones
	}
	groups, err := p.SecurityGroups(ctx, nc.Spec.SecurityGroupSelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	amis, err := p.AMIs(ctx, nc)
	if err != nil {
		return nil, err
	}
	if plan.facts, err = p.typeFacts(ctx, req.InstanceTypes); err != nil {
		return nil, fmt.Errorf("launch %s: %w", req.NodeClaim, err)
	}
	if plan.offered, err = p.offeringsFor(ctx, req.InstanceTypes); err != nil {
		return nil, err
	}
	opts, err := p.userDataOptions(ctx, req, family)
	if err != nil {
		return nil, err
	}
	profile, err := p.InstanceProfile(ctx, nc)
	if err != nil {
		return nil, err
	}
	if reads := bootstrap.IMDSv1Reads(opts.UserData); len(reads) > 0 && family.FeatureFlags().ShellUserData && amifamily.HTTPTokens(nc) == karpenter.DefaultHTTPTokens {
		p.log.Warn("EC2NodeClass "+amifamily.IMDSv1Cause(reads)+"; "+amifamily.IMDSv1Fix, "nodeClass", nc.Name)
	}
	// One launch template per (AMI, max-pods): user data differs by max-pods
	// except for Custom, whose user data does not use it.
	rendered := map[string]string{}
	for _, name := range req.InstanceTypes {
		it := plan.facts[name]
		ami, ok := amiFor(amis, it)
		if !ok {
			plan.skipped = append(plan.skipped, fmt.Sprintf("%s (no %s image)", name, it.Arch))
			continue
		}
		o := opts
		if !family.FeatureFlags().UserDataIsBootstrap {
			o.MaxPods = int32(catalog.MaxPods(it, catalog.Overhead{Kubelet: nc.Spec.Kubelet, AMIFamily: family.Name()}))
		}
		key := fmt.Sprintf("%s/%d", ami.ID, o.MaxPods)
		tname, ok := rendered[key]
		if !ok {
			ud, err := p.render(family, o)
			if err != nil {
				return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
			}
			spec, err := p.buildTemplate(nc, family, ami, ud, profile, groups)
			if err != nil {
				return nil, err
			}
			tname = spec.name
			rendered[key] = tname
			plan.specs[tname] = spec
			if slices.Contains(plan.capTypes, karpenter.CapacityTypeSpot) {
				spot, err := p.spotTemplate(nc, spec)
				if err != nil {
					return nil, err
				}
				plan.specs[spot.name] = spot
				plan.spotOf[tname] = spot.name
			}
		}
		plan.groupOf[name] = tname
	}
	if len(plan.groupOf) == 0 {
		return nil, fmt.Errorf("launch %s: no option has a matching image: %s", req.NodeClaim, strings.Join(plan.skipped, ", "))
	}
	plan.tags = p.instanceTags(req)
	return plan, nil
}

// allows reports whether the launch may use zone at all: one of the request's
// zones or fallback zones (any zone when it names none, or with
// FallbackAnyZone); a reservation's launch keeps to its zone.
func (plan *launchPlan) allows(zone string) bool {
	req := plan.req
	switch {
	case len(req.Zones) == 0 || slices.Contains(req.Zones, zone):
		return true
	case req.CapacityReservationID != "":
		return false
	}
	return req.FallbackAnyZone || slices.Contains(req.FallbackZones, zone)
}

// render is the family's UserData, remembered for the provider's life: an
// invocation's launches mostly share their user data, and rendering it (YAML in
// MIME) cost more than the rest of a launch's planning.
func (p *Provider) render(family amifamily.Family, o bootstrap.Options) (string, error) {
	raw, kerr := json.Marshal(o)
	key := family.Name() + "\x00" + string(raw)
	if kerr == nil {
		p.mu.Lock()
		ud, ok := p.userData[key]
		p.mu.Unlock()
		if ok {
			return ud, nil
		}
	}
	ud, err := family.UserData(o)
	if err != nil || kerr != nil {
		return ud, err
	}
	p.mu.Lock()
	p.userData[key] = ud
	p.mu.Unlock()
	return ud, nil
}

// userDataOptions gathers what user data needs, reading the kubeadm bootstrap
// token only when the class's user data uses it.
func (p *Provider) userDataOptions(ctx context.Context, req LaunchRequest, family amifamily.Family) (bootstrap.Options, error) {
	nc := req.NodeClass
	cluster, err := p.Cluster(ctx)
	if err != nil {
		return bootstrap.Options{}, err
	}
	o := bootstrap.Options{
		ClusterName: cluster.Name, ClusterEndpoint: cluster.Endpoint, CABundle: cluster.CABundle, ClusterCIDR: cluster.CIDR,
		Labels: UserDataLabels(req.Labels), Taints: req.Taints, Kubelet: nc.Spec.Kubelet,
	}
	if nc.Spec.UserData != nil {
		o.UserData = *nc.Spec.UserData
	}
	if !family.FeatureFlags().UserDataIsBootstrap {
		return o, nil
	}
	src, err := bootstrap.TokenSourceFromAnnotations(nc.Annotations)
	if err != nil {
		return o, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	o.Custom = bootstrap.CustomValues{Token: src, Region: p.cfg.Region, CACertHash: p.cfg.CACertHash}
	if h := nc.Annotations[bootstrap.AnnotationCACertHash]; h != "" {
		o.Custom.CACertHash = h
	}
	if _, err := bootstrap.Placeholders(o.UserData); err != nil {
		return o, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	return o, nil
}

// instanceTags are the tags of the instance and its volumes: the class's
// tags, then Joiner's identity tags over them. A class tag naming another
// cluster's ownership is dropped: it would hand the instance to that cluster.
func (p *Provider) instanceTags(req LaunchRequest) map[string]string {
	tags := map[string]string{}
	for k, v := range req.NodeClass.Spec.Tags {
		if strings.HasPrefix(k, "kubernetes.io/cluster/") && k != p.ownerTagKey() {
			p.log.Warn("ignoring EC2NodeClass tag that claims another cluster's ownership", "nodeClass", req.NodeClass.Name, "tag", k)
			continue
		}
		tags[k] = v
	}
	if _, ok := tags[TagName]; !ok {
		tags[TagName] = req.NodeClaim
	}
	tags[p.ownerTagKey()] = "owned"
	tags[TagEKSClusterName] = p.cfg.ClusterName
	tags[TagNodePool] = req.NodePool
	tags[TagNodeClaim] = req.NodeClaim
	tags[TagNodeClass] = req.NodeClass.Name
	return tags
}

// overrides builds the launch template configs for one capacity type: options
// in order, each in every zone that offers it and is not marked unavailable,
// at most MaxOverrides in all; the primary zones alone unless wide.
func (p *Provider) overrides(plan *launchPlan, ct string, wide bool) ([]ec2types.FleetLaunchTemplateConfigRequest, int) {
	byTemplate := map[string][]ec2types.FleetLaunchTemplateOverridesRequest{}
	var order []string
	n := 0
	for _, name := range plan.req.InstanceTypes {
		tname, ok := plan.groupOf[name]
		if !ok {
			continue
		}
		if ct == karpenter.CapacityTypeSpot {
			tname = plan.spotOf[tname]
		}
		for _, zone := range plan.zones {
			if n == MaxOverrides {
				break
			}
			if !wide && plan.primary != nil && !slices.Contains(plan.primary, zone) {
				continue
			}
			if !plan.offered[name][zone] || p.unavailable.IsUnavailable(name, zone, ct) {
				continue
			}
			if _, seen := byTemplate[tname]; !seen {
				order = append(order, tname)
			}
			byTemplate[tname] = append(byTemplate[tname], ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(name), SubnetId: aws.String(plan.subnets[zone].ID),
				AvailabilityZone: aws.String(zone), ImageId: aws.String(plan.specs[tname].ami.ID),
			})
			n++
		}
	}
	configs := make([]ec2types.FleetLaunchTemplateConfigRequest, 0, len(order))
	for _, tname := range order {
		configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(tname), Version: aws.String("$Latest")},
			Overrides:                   byTemplate[tname],
		})
	}
	return configs, n
}

func (p *Provider) ensureTemplates(ctx context.Context, plan *launchPlan, configs []ec2types.FleetLaunchTemplateConfigRequest, dry *[]DryRunResult) error {
	for _, c := range configs {
		name := aws.ToString(c.LaunchTemplateSpecification.LaunchTemplateName)
		if _, err := p.ensureTemplate(ctx, plan.req.NodeClass, plan.specs[name], dry); err != nil {
			return err
		}
	}
	return nil
}

// fleetInput is the CreateFleet of the launch's call number call.
func (p *Provider) fleetInput(plan *launchPlan, ct string, configs []ec2types.FleetLaunchTemplateConfigRequest, call int) *ec2.CreateFleetInput {
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(ct),
		},
		// The fleet too carries the tags from creation: the functions' role may only
		// create fleets with the ownership tag.
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: ec2Tags(plan.tags)},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: ec2Tags(plan.tags)},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: ec2Tags(plan.tags)},
		},
		DryRun: aws.Bool(p.cfg.DryRun),
	}
	if ct == karpenter.CapacityTypeSpot {
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	// An idempotency token: should the SDK retry a CreateFleet whose answer was
	// lost, EC2 returns the first call's result instead of launching again.
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d", p.cfg.ClusterName, plan.req.NodeClaim, ct, call)
	for _, c := range configs {
		for _, o := range c.Overrides {
			fmt.Fprintf(h, "\x00%s/%s", o.InstanceType, aws.ToString(o.SubnetId))
		}
	}
	in.ClientToken = aws.String("joiner-" + hex.EncodeToString(h.Sum(nil))[:40])
	return in
}

// noteFleetErrors marks unfulfillable offerings (and exhausted subnets,
// and spot when its service-linked role is missing) and returns how many new
// marks were made and the errors that are not about capacity.
func (p *Provider) noteFleetErrors(plan *launchPlan, ct string, errs []ec2types.CreateFleetError) (int, []string) {
	marked := 0
	var fatal []string
	for _, e := range errs {
		code := aws.ToString(e.ErrorCode)
		var itype, zone, subnet string
		if lo := e.LaunchTemplateAndOverrides; lo != nil && lo.Overrides != nil {
			itype = string(lo.Overrides.InstanceType)
			zone = aws.ToString(lo.Overrides.AvailabilityZone)
			subnet = aws.ToString(lo.Overrides.SubnetId)
		}
		if zone == "" && subnet != "" {
			zone = zoneOf(plan.allSubs, subnet)
		}
		errCT := ct
		if e.Lifecycle != "" {
			errCT = string(e.Lifecycle)
		}
		switch {
		case IsUnfulfillableCapacity(code):
			if itype == "" || zone == "" {
				// Nothing to mark; without a new mark the launch moves on.
				p.log.Warn("capacity error without an offering", "nodeClaim", plan.req.NodeClaim, "code", code)
				continue
			}
			if !p.unavailable.IsUnavailable(itype, zone, errCT) {
				marked++
			}
			p.unavailable.MarkUnavailable(itype, zone, errCT)
			p.log.Info("offering unavailable", "nodeClaim", plan.req.NodeClaim, "instanceType", itype, "zone", zone, "capacityType", errCT, "code", code, "ttl", UnavailableTTL.String())
		case code == codeFreeAddresses && subnet != "":
			if !p.unavailable.IsSubnetUnavailable(subnet) {
				marked++
			}
			p.unavailable.MarkSubnetUnavailable(subnet)
			// The zone's subnet choice changes: pick again from the rest.
			p.rechooseSubnet(plan, zone)
		case code == codeSpotSLR:
			p.unavailable.MarkCapacityTypeUnavailable(karpenter.CapacityTypeSpot)
			marked++
		default:
			fatal = append(fatal, fmt.Sprintf("%s %s/%s: %s", code, itype, zone, aws.ToString(e.ErrorMessage)))
		}
	}
	return marked, fatal
}

func (p *Provider) rechooseSubnet(plan *launchPlan, zone string) {
	delete(plan.subnets, zone)
	for _, s := range plan.allSubs {
		if s.Zone != zone || p.unavailable.IsSubnetUnavailable(s.ID) || !plan.allows(zone) {
			continue
		}
		if cur, ok := plan.subnets[zone]; !ok || s.AvailableIPs > cur.AvailableIPs {
			plan.subnets[zone] = s
		}
	}
	plan.zones = slices.Sorted(maps.Keys(plan.subnets))
}

type launched struct {
	id, itype, zone, subnet, ct, template string
}

func fleetInstances(out *ec2.CreateFleetOutput, ct string) []launched {
	var all []launched
	for _, fi := range out.Instances {
		l := launched{itype: string(fi.InstanceType), zone: aws.ToString(fi.AvailabilityZone), subnet: aws.ToString(fi.SubnetId), ct: ct}
		if fi.Lifecycle != "" {
			l.ct = string(fi.Lifecycle)
		}
		if lo := fi.LaunchTemplateAndOverrides; lo != nil {
			if lo.Overrides != nil {
				if l.zone == "" {
					l.zone = aws.ToString(lo.Overrides.AvailabilityZone)
				}
				if l.subnet == "" {
					l.subnet = aws.ToString(lo.Overrides.SubnetId)
				}
				if l.itype == "" {
					l.itype = string(lo.Overrides.InstanceType)
				}
			}
			if lo.LaunchTemplateSpecification != nil {
				l.template = aws.ToString(lo.LaunchTemplateSpecification.LaunchTemplateName)
			}
		}
		for _, id := range fi.InstanceIds {
			l.id = id
			all = append(all, l)
		}
	}
	return all
}

// keepOne keeps the launched instance earliest in the options (the cheapest)
// and terminates the others, which a fleet asked for one instance should not
// have returned.
func (p *Provider) keepOne(ctx context.Context, plan *launchPlan, all []launched) (Instance, error) {
	rank := func(l launched) int {
		if i := slices.Index(plan.req.InstanceTypes, l.itype); i >= 0 {
			return i
		}
		return len(plan.req.InstanceTypes)
	}
	slices.SortStableFunc(all, func(a, b launched) int { return rank(a) - rank(b) })
	keep, extra := all[0], all[1:]
	// Each option belongs to exactly one template of this launch; EC2's answer
	// names the template by ID only, if at all.
	if t, ok := plan.groupOf[keep.itype]; ok {
		keep.template = t
		if keep.ct == karpenter.CapacityTypeSpot {
			keep.template = plan.spotOf[t]
		}
	}
	inst := Instance{
		ID: keep.id, InstanceType: keep.itype, Zone: keep.zone, CapacityType: keep.ct, SubnetID: keep.subnet,
		LaunchTemplate: keep.template, ProviderID: fmt.Sprintf("aws:///%s/%s", keep.zone, keep.id),
	}
	if spec, ok := plan.specs[keep.template]; ok {
		inst.ImageID = spec.ami.ID
	}
	var errs []error
	if len(extra) > 0 {
		ids := make([]string, 0, len(extra))
		for _, e := range extra {
			ids = append(ids, e.id)
		}
		p.log.Warn("fleet returned more instances than asked for; terminating the extras", "nodeClaim", plan.req.NodeClaim, "kept", keep.id, "extra", ids)
		if err := p.tagAndTerminate(ctx, ids, plan.tags); err != nil {
			inst.ExcessLeft = ids
			errs = append(errs, err)
			p.log.Error("could not terminate extra instances; they carry the ownership tags for leak clean-up", "instances", ids, "error", err.Error())
		} else {
			inst.ExcessTerminated = ids
		}
	}
	// EC2 applies TagSpecifications at creation; ConfirmLaunched checks all of an
	// invocation's launches with one read instead of one per launch.
	p.mu.Lock()
	p.unconfirmed = append(p.unconfirmed, pendingTags{id: inst.ID, tags: plan.tags})
	p.mu.Unlock()
	p.log.Info("launched", "nodeClaim", plan.req.NodeClaim, "nodePool", plan.req.NodePool, "instance", inst.ID, "instanceType", inst.InstanceType, "zone", inst.Zone, "capacityType", inst.CapacityType)
	if len(errs) > 0 {
		// The instance exists and is recorded in the result even so.
		p.log.Error("launch completed with errors", "nodeClaim", plan.req.NodeClaim, "instance", inst.ID, "error", errors.Join(errs...).Error())
	}
	return inst, nil
}

// pendingTags is a launched instance whose tags ConfirmLaunched has not checked.
type pendingTags struct {
	id   string
	tags map[string]string
}

// ConfirmLaunched checks, with one DescribeInstances, that every instance launched
// since the last call carries its ownership tags, and tags any that does not (or
// every one, when the read fails: CreateTags is idempotent). EC2 applies a fleet's
// TagSpecifications at creation, so this is a safety net: an instance must never be
// left unowned, where neither leak clean-up nor termination would find it.
func (p *Provider) ConfirmLaunched(ctx context.Context) error {
	p.mu.Lock()
	pending := p.unconfirmed
	p.unconfirmed = nil
	p.mu.Unlock()
	if len(pending) == 0 || p.cfg.DryRun {
		return nil
	}
	ids := make([]string, 0, len(pending))
	for _, pt := range pending {
		ids = append(ids, pt.id)
	}
	have := map[string]map[string]string{}
	pg := ec2.NewDescribeInstancesPaginator(p.api.EC2, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: ids}},
	})
	var readErr error
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			readErr = err
			break
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				have[aws.ToString(i.InstanceId)] = tagMap(i.Tags)
			}
		}
	}
	var errs []error
	for _, pt := range pending {
		got, seen := have[pt.id]
		ok := seen && readErr == nil
		for k, v := range pt.tags {
			if ok && got[k] != v {
				ok = false
			}
		}
		if ok {
			continue
		}
		p.log.Warn("launched instance lacks its tags; tagging it", "instance", pt.id, "seen", seen)
		if err := p.tag(ctx, []string{pt.id}, pt.tags); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *Provider) tag(ctx context.Context, ids []string, tags map[string]string) error {
	_, err := p.api.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: ids, Tags: ec2Tags(tags)})
	return wrap("CreateTags "+strings.Join(ids, ","), err)
}

// tagAndTerminate is for instances this launch created: they are tagged
// (again) so that a failed termination still leaves them findable, then terminated.
func (p *Provider) tagAndTerminate(ctx context.Context, ids []string, tags map[string]string) error {
	tagErr := p.tag(ctx, ids, tags)
	_, err := p.api.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
	if err != nil {
		return errors.Join(tagErr, wrap("TerminateInstances "+strings.Join(ids, ","), err))
	}
	return nil
}

func firstOverride(configs []ec2types.FleetLaunchTemplateConfigRequest) ec2types.FleetLaunchTemplateOverridesRequest {
	for _, c := range configs {
		if len(c.Overrides) > 0 {
			return c.Overrides[0]
		}
	}
	return ec2types.FleetLaunchTemplateOverridesRequest{}
}

func summarizeErrors(errs []ec2types.CreateFleetError) string {
	if len(errs) == 0 {
		return "fleet returned no instance and no error"
	}
	counts := map[string]int{}
	for _, e := range errs {
		counts[aws.ToString(e.ErrorCode)]++
	}
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s×%d", code, counts[code]))
	}
	return strings.Join(parts, ", ")
}
