package awssim

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ---- launch templates ----

type xLaunchTemplate struct {
	LaunchTemplateID     string `xml:"launchTemplateId"`
	LaunchTemplateName   string `xml:"launchTemplateName"`
	CreateTime           string `xml:"createTime"`
	CreatedBy            string `xml:"createdBy"`
	DefaultVersionNumber int64  `xml:"defaultVersionNumber"`
	LatestVersionNumber  int64  `xml:"latestVersionNumber"`
	Tags                 []xTag `xml:"tagSet>item"`
}

type createLaunchTemplateOut struct {
	meta
	LaunchTemplate xLaunchTemplate `xml:"launchTemplate"`
}

type describeLaunchTemplatesOut struct {
	meta
	Items     []xLaunchTemplate `xml:"launchTemplates>item"`
	NextToken string            `xml:"nextToken,omitempty"`
}

type deleteLaunchTemplateOut struct {
	meta
	LaunchTemplate xLaunchTemplate `xml:"launchTemplate"`
}

var ltNameRE = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

func (s *Sim) ltXML(lt *LaunchTemplate) xLaunchTemplate {
	return xLaunchTemplate{
		LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name, CreateTime: formatTime(lt.CreateTime),
		CreatedBy:            fmt.Sprintf("arn:aws:sts::%s:assumed-role/joiner/awssim", s.w.account),
		DefaultVersionNumber: 1, LatestVersionNumber: 1, Tags: xTags(lt.Tags),
	}
}

// maxUserData is EC2's limit on user data before base64 encoding.
const maxUserData = 16 * 1024

func checkUserData(ud string) *apiError {
	if ud == "" {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(ud)
	if err != nil {
		return errf(http.StatusBadRequest, "InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
	}
	if len(raw) > maxUserData {
		return errf(http.StatusBadRequest, "InvalidParameterValue", "User data is limited to 16384 bytes; got %d", len(raw))
	}
	return nil
}

var volumeTypes = []string{"standard", "gp2", "gp3", "io1", "io2", "st1", "sc1"}

// parseBlockDevices reads prefix.N.DeviceName / prefix.N.Ebs.*.
func parseBlockDevices(p params, prefix string) ([]BlockDeviceMapping, *apiError) {
	var out []BlockDeviceMapping
	for _, i := range p.indices(prefix) {
		k := fmt.Sprintf("%s.%d.", prefix, i)
		b := BlockDeviceMapping{DeviceName: p.str(k + "DeviceName")}
		if b.DeviceName == "" {
			return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter %sDeviceName", k)
		}
		var err *apiError
		if b.VolumeSizeGiB, err = p.int(k+"Ebs.VolumeSize", 0); err != nil {
			return nil, err
		}
		if b.VolumeSizeGiB < 0 || b.VolumeSizeGiB > 65536 {
			return nil, errBadParam("Volume size %d GiB of %s is out of range", b.VolumeSizeGiB, b.DeviceName)
		}
		b.VolumeType = p.str(k + "Ebs.VolumeType")
		if b.VolumeType != "" && !slices.Contains(volumeTypes, b.VolumeType) {
			return nil, errBadParam("Value (%s) for parameter volumeType is invalid. Valid values: %s", b.VolumeType, strings.Join(volumeTypes, ", "))
		}
		if b.Encrypted, err = p.optBool(k + "Ebs.Encrypted"); err != nil {
			return nil, err
		}
		if b.DeleteOnTermination, err = p.optBool(k + "Ebs.DeleteOnTermination"); err != nil {
			return nil, err
		}
		if b.IOPS, err = p.int(k+"Ebs.Iops", 0); err != nil {
			return nil, err
		}
		if b.IOPS > 0 && b.VolumeType != "io1" && b.VolumeType != "io2" && b.VolumeType != "gp3" {
			return nil, errBadParam("Parameter iops is not supported for %s volumes.", cmpOr(b.VolumeType, "gp2"))
		}
		if b.Throughput, err = p.int(k+"Ebs.Throughput", 0); err != nil {
			return nil, err
		}
		if b.Throughput > 0 && b.VolumeType != "gp3" {
			return nil, errBadParam("Parameter throughput is only supported for gp3 volumes.")
		}
		b.KMSKeyID = p.str(k + "Ebs.KmsKeyId")
		b.SnapshotID = p.str(k + "Ebs.SnapshotId")
		out = append(out, b)
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func parseMetadataOptions(p params, prefix string) (*MetadataOptions, *apiError) {
	has := false
	for k := range p {
		if strings.HasPrefix(k, prefix+".") {
			has = true
			break
		}
	}
	if !has {
		return nil, nil
	}
	m := &MetadataOptions{
		HTTPTokens:           p.str(prefix + ".HttpTokens"),
		HTTPEndpoint:         p.str(prefix + ".HttpEndpoint"),
		HTTPProtocolIPv6:     p.str(prefix + ".HttpProtocolIpv6"),
		InstanceMetadataTags: p.str(prefix + ".InstanceMetadataTags"),
	}
	if m.HTTPTokens != "" && m.HTTPTokens != "optional" && m.HTTPTokens != "required" {
		return nil, errBadParam("Invalid value '%s' for HttpTokens (optional | required)", m.HTTPTokens)
	}
	if m.HTTPEndpoint != "" && m.HTTPEndpoint != "enabled" && m.HTTPEndpoint != "disabled" {
		return nil, errBadParam("Invalid value '%s' for HttpEndpoint (enabled | disabled)", m.HTTPEndpoint)
	}
	hop, err := p.int(prefix+".HttpPutResponseHopLimit", 0)
	if err != nil {
		return nil, err
	}
	if hop != 0 && (hop < 1 || hop > 64) {
		return nil, errBadParam("HttpPutResponseHopLimit must be between 1 and 64, got %d", hop)
	}
	m.HTTPPutResponseHopLimit = hop
	return m, nil
}

func (s *Sim) createLaunchTemplate(p params, _ *callCtx) (ec2Body, *apiError) {
	name := p.str("LaunchTemplateName")
	if name == "" {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter LaunchTemplateName")
	}
	if !ltNameRE.MatchString(name) {
		return nil, errf(http.StatusBadRequest, "InvalidLaunchTemplateName.MalformedException",
			"A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the following characters: - ( ) . / _.'")
	}
	for _, lt := range s.w.templates.list() {
		if lt.Name == name {
			return nil, errf(http.StatusBadRequest, "InvalidLaunchTemplateName.AlreadyExistsException",
				"Launch template name already in use.")
		}
	}
	const d = "LaunchTemplateData."
	data := LaunchTemplateData{
		ImageID:      p.str(d + "ImageId"),
		InstanceType: p.str(d + "InstanceType"),
		UserData:     p.str(d + "UserData"),
		KeyName:      p.str(d + "KeyName"),
	}
	if data.ImageID != "" && !amiIDRE.MatchString(data.ImageID) && !strings.HasPrefix(data.ImageID, "resolve:ssm:") {
		return nil, errf(http.StatusBadRequest, "InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", data.ImageID)
	}
	if data.InstanceType != "" {
		if _, ok := s.types[data.InstanceType]; !ok {
			return nil, errBadParam("Invalid value '%s' for InstanceType.", data.InstanceType)
		}
	}
	if err := checkUserData(data.UserData); err != nil {
		return nil, err
	}
	data.IAMInstanceProfile = cmpOr(p.str(d+"IamInstanceProfile.Arn"), p.str(d+"IamInstanceProfile.Name"))
	data.SecurityGroupIDs = p.list(d + "SecurityGroupId")
	for _, i := range p.indices(d + "NetworkInterface") {
		data.SecurityGroupIDs = append(data.SecurityGroupIDs, p.list(fmt.Sprintf("%sNetworkInterface.%d.SecurityGroupId", d, i))...)
	}
	var err *apiError
	if data.BlockDeviceMappings, err = parseBlockDevices(p, d+"BlockDeviceMapping"); err != nil {
		return nil, err
	}
	if data.MetadataOptions, err = parseMetadataOptions(p, d+"MetadataOptions"); err != nil {
		return nil, err
	}
	specs, err := p.tagSpecs(d + "TagSpecification")
	if err != nil {
		return nil, err
	}
	if len(specs) > 0 {
		data.TagSpecifications = specs
	}
	ltSpecs, err := p.tagSpecs("TagSpecification")
	if err != nil {
		return nil, err
	}
	for rt := range ltSpecs {
		if rt != "launch-template" {
			return nil, errBadParam("'%s' is not a valid taggable resource type for this operation.", rt)
		}
	}
	lt := &LaunchTemplate{ID: s.w.hexID("lt", 17), Name: name, CreateTime: s.clock.Now(), Tags: cloneTags(ltSpecs["launch-template"]), Data: data}
	s.w.templates.put(lt.ID, lt)
	return &createLaunchTemplateOut{LaunchTemplate: s.ltXML(lt)}, nil
}

func (s *Sim) templateByName(name string) (*LaunchTemplate, bool) {
	for _, lt := range s.w.templates.list() {
		if lt.Name == name {
			return lt, true
		}
	}
	return nil, false
}

func ltNameNotFound() *apiError {
	return errf(http.StatusBadRequest, "InvalidLaunchTemplateName.NotFoundException",
		"At least one of the launch templates specified in the request does not exist.")
}

func ltIDNotFound(id string) *apiError {
	return errf(http.StatusBadRequest, "InvalidLaunchTemplateId.NotFound",
		"The specified launch template, with template ID %s, does not exist.", id)
}

func (s *Sim) describeLaunchTemplates(p params, _ *callCtx) (ec2Body, *apiError) {
	ids, names := p.list("LaunchTemplateId"), p.list("LaunchTemplateName")
	for _, id := range ids {
		if _, ok := s.w.templates.get(id); !ok {
			return nil, ltIDNotFound(id)
		}
	}
	for _, n := range names {
		if _, ok := s.templateByName(n); !ok {
			return nil, ltNameNotFound()
		}
	}
	fs := p.filters()
	var items []xLaunchTemplate
	for _, lt := range s.w.templates.list() {
		if len(ids) > 0 && !slices.Contains(ids, lt.ID) || len(names) > 0 && !slices.Contains(names, lt.Name) {
			continue
		}
		ok, err := fieldFilters{
			"launch-template-name": one(lt.Name),
			"launch-template-id":   one(lt.ID),
			"create-time":          one(formatTime(lt.CreateTime)),
		}.match(fs, lt.Tags)
		if err != nil {
			return nil, err
		}
		if ok {
			items = append(items, s.ltXML(lt))
		}
	}
	start, end, next, err := page(p, "DescribeLaunchTemplates", len(items), 0, 1, 200)
	if err != nil {
		return nil, err
	}
	return &describeLaunchTemplatesOut{Items: items[start:end], NextToken: next}, nil
}

func (s *Sim) deleteLaunchTemplate(p params, _ *callCtx) (ec2Body, *apiError) {
	id, name := p.str("LaunchTemplateId"), p.str("LaunchTemplateName")
	var lt *LaunchTemplate
	switch {
	case id != "":
		var ok bool
		if lt, ok = s.w.templates.get(id); !ok {
			return nil, ltIDNotFound(id)
		}
	case name != "":
		var ok bool
		if lt, ok = s.templateByName(name); !ok {
			return nil, ltNameNotFound()
		}
	default:
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter LaunchTemplateName or LaunchTemplateId")
	}
	s.w.templates.del(lt.ID)
	return &deleteLaunchTemplateOut{LaunchTemplate: s.ltXML(lt)}, nil
}

// resolveTemplate finds the launch template of a launch specification.
func (s *Sim) resolveTemplate(id, name, version string) (*LaunchTemplate, *apiError) {
	var lt *LaunchTemplate
	var ok bool
	switch {
	case id != "":
		if lt, ok = s.w.templates.get(id); !ok {
			return nil, ltIDNotFound(id)
		}
	case name != "":
		if lt, ok = s.templateByName(name); !ok {
			return nil, ltNameNotFound()
		}
	default:
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The launch template specification must contain LaunchTemplateId or LaunchTemplateName")
	}
	switch version {
	case "", "$Latest", "$Default", "1":
	default:
		return nil, errf(http.StatusBadRequest, "InvalidLaunchTemplateId.VersionNotFound",
			"Could not find launch template version %s for launch template %s", version, lt.ID)
	}
	return lt, nil
}

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
		ovIdx := p.indices(k + "Overrides")
		if len(ovIdx) == 0 {
			ovIdx = []int{-1}
		}
		for _, j := range ovIdx {
			o := fmt.Sprintf("%sOverrides.%d.", k, j)
			pl := &pool{cfg: ci, lt: lt, ltVersion: version, weight: 1, order: len(pools)}
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
			if code, msg := s.checkImage(pl.imageID, pl.instanceType); code != "" {
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
	used, usedIPs := map[Offering]int{}, map[string]int{}
	var places []placement
	if spotT > 0 {
		failedSpot := clonePoolSet(failed)
		pl := s.plan(pools, CapacitySpot, spotStrategy, float64(spotT), &budget, used, usedIPs, &errs, failedSpot)
		if countUnits(pl) >= float64(max(minSpot, 1)) || minSpot == 0 {
			places = append(places, pl...)
		} else {
			for _, x := range pl {
				used[x.pool.offering(CapacitySpot)] -= x.count
			}
		}
	}
	if odT > 0 {
		failedOD := clonePoolSet(failed)
		pl := s.plan(pools, CapacityOnDemand, odStrategy, float64(odT), &budget, used, usedIPs, &errs, failedOD)
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
			fleetID: fleetID, reservationID: s.w.hexID("r", 17),
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

// ---- RunInstances ----

type xState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

var stateCodes = map[string]int{StatePending: 0, StateRunning: 16, StateShuttingDown: 32, StateTerminated: 48, "stopping": 64, "stopped": 80}

func stateXML(s string) xState { return xState{stateCodes[s], s} }

type xGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xInstanceEBS struct {
	VolumeID            string `xml:"volumeId"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xInstanceBDM struct {
	DeviceName string       `xml:"deviceName"`
	Ebs        xInstanceEBS `xml:"ebs"`
}

type xMetadataOptions struct {
	State                   string `xml:"state"`
	HTTPTokens              string `xml:"httpTokens"`
	HTTPPutResponseHopLimit int    `xml:"httpPutResponseHopLimit"`
	HTTPEndpoint            string `xml:"httpEndpoint"`
	HTTPProtocolIPv6        string `xml:"httpProtocolIpv6"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags"`
}

type xIAMProfile struct {
	Arn string `xml:"arn"`
	ID  string `xml:"id"`
}

type xStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xInstance struct {
	InstanceID            string            `xml:"instanceId"`
	ImageID               string            `xml:"imageId"`
	InstanceState         xState            `xml:"instanceState"`
	PrivateDNSName        string            `xml:"privateDnsName"`
	DNSName               string            `xml:"dnsName"`
	Reason                string            `xml:"reason"`
	AmiLaunchIndex        int               `xml:"amiLaunchIndex"`
	InstanceType          string            `xml:"instanceType"`
	LaunchTime            string            `xml:"launchTime"`
	Placement             xPlacement        `xml:"placement"`
	Monitoring            xMonitoring       `xml:"monitoring"`
	SubnetID              string            `xml:"subnetId,omitempty"`
	VpcID                 string            `xml:"vpcId,omitempty"`
	PrivateIPAddress      string            `xml:"privateIpAddress,omitempty"`
	SourceDestCheck       bool              `xml:"sourceDestCheck"`
	Groups                []xGroup          `xml:"groupSet>item"`
	StateReason           *xStateReason     `xml:"stateReason,omitempty"`
	Architecture          string            `xml:"architecture"`
	RootDeviceType        string            `xml:"rootDeviceType"`
	RootDeviceName        string            `xml:"rootDeviceName"`
	BlockDeviceMapping    []xInstanceBDM    `xml:"blockDeviceMapping>item"`
	InstanceLifecycle     string            `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string            `xml:"spotInstanceRequestId,omitempty"`
	VirtualizationType    string            `xml:"virtualizationType"`
	Tags                  []xTag            `xml:"tagSet>item"`
	Hypervisor            string            `xml:"hypervisor"`
	IamInstanceProfile    *xIAMProfile      `xml:"iamInstanceProfile,omitempty"`
	EbsOptimized          bool              `xml:"ebsOptimized"`
	EnaSupport            bool              `xml:"enaSupport"`
	MetadataOptions       *xMetadataOptions `xml:"metadataOptions,omitempty"`
	PlatformDetails       string            `xml:"platformDetails"`
	UsageOperation        string            `xml:"usageOperation"`
	CapacityReservation   xCapResSpec       `xml:"capacityReservationSpecification"`
}

type xPlacement struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	GroupName          string `xml:"groupName"`
	Tenancy            string `xml:"tenancy"`
}

type xMonitoring struct {
	State string `xml:"state"`
}

type xCapResSpec struct {
	Preference string `xml:"capacityReservationPreference"`
}

type xReservation struct {
	ReservationID string      `xml:"reservationId"`
	OwnerID       string      `xml:"ownerId"`
	Groups        []xGroup    `xml:"groupSet>item"`
	Instances     []xInstance `xml:"instancesSet>item"`
}

type runInstancesOut struct {
	meta
	ReservationID string      `xml:"reservationId"`
	OwnerID       string      `xml:"ownerId"`
	Groups        []xGroup    `xml:"groupSet>item"`
	Instances     []xInstance `xml:"instancesSet>item"`
}

func (s *Sim) instanceXML(in *Instance) xInstance {
	x := xInstance{
		InstanceID: in.ID, ImageID: in.ImageID, InstanceState: stateXML(in.State), PrivateDNSName: in.PrivateDNSName,
		Reason: in.StateTransitionReason, InstanceType: in.InstanceType, LaunchTime: formatTime(in.LaunchTime),
		Placement:  xPlacement{AvailabilityZone: in.Zone, AvailabilityZoneID: zoneID(s.w.region, in.Zone), Tenancy: "default"},
		Monitoring: xMonitoring{"disabled"}, SubnetID: in.SubnetID, VpcID: in.VpcID, PrivateIPAddress: in.PrivateIP,
		SourceDestCheck: true, Architecture: cmpOr(in.Architecture, "x86_64"), RootDeviceType: "ebs", RootDeviceName: "/dev/xvda",
		VirtualizationType: "hvm", Tags: xTags(in.Tags), Hypervisor: "xen", EbsOptimized: true, EnaSupport: true,
		PlatformDetails: linuxProduct, UsageOperation: "RunInstances", CapacityReservation: xCapResSpec{"open"},
	}
	if in.State == StateTerminated || in.State == StateShuttingDown {
		x.PrivateDNSName, x.PrivateIPAddress = "", ""
		if in.State == StateTerminated {
			x.SubnetID, x.VpcID = "", ""
		}
	}
	if in.StateReason != "" {
		code, msg, _ := strings.Cut(in.StateReason, ": ")
		x.StateReason = &xStateReason{code, cmpOr(msg, in.StateReason)}
	}
	for _, id := range in.SecurityGroupIDs {
		name := id
		if sg, ok := s.w.sgs.get(id); ok {
			name = sg.Name
		}
		x.Groups = append(x.Groups, xGroup{id, name})
	}
	if in.State != StateTerminated {
		for i, b := range in.BlockDeviceMappings {
			del := b.DeleteOnTermination == nil || *b.DeleteOnTermination
			x.BlockDeviceMapping = append(x.BlockDeviceMapping, xInstanceBDM{b.DeviceName,
				xInstanceEBS{fmt.Sprintf("vol-%s%02d", strings.TrimPrefix(in.ID, "i-")[:15], i), "attached", formatTime(in.LaunchTime), del}})
		}
	}
	if in.CapacityType == CapacitySpot {
		x.InstanceLifecycle, x.SpotInstanceRequestID = "spot", in.SpotRequestID
	}
	if in.IAMInstanceProfile != "" {
		arn := in.IAMInstanceProfile
		if !strings.HasPrefix(arn, "arn:") {
			arn = fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", s.w.account, arn)
		}
		x.IamInstanceProfile = &xIAMProfile{arn, "AIPA" + strings.ToUpper(strings.TrimPrefix(in.ID, "i-"))}
	}
	m := MetadataOptions{HTTPTokens: "optional", HTTPEndpoint: "enabled", HTTPPutResponseHopLimit: 1, HTTPProtocolIPv6: "disabled", InstanceMetadataTags: "disabled"}
	if o := in.MetadataOptions; o != nil {
		m.HTTPTokens = cmpOr(o.HTTPTokens, m.HTTPTokens)
		m.HTTPEndpoint = cmpOr(o.HTTPEndpoint, m.HTTPEndpoint)
		if o.HTTPPutResponseHopLimit > 0 {
			m.HTTPPutResponseHopLimit = o.HTTPPutResponseHopLimit
		}
		m.HTTPProtocolIPv6 = cmpOr(o.HTTPProtocolIPv6, m.HTTPProtocolIPv6)
		m.InstanceMetadataTags = cmpOr(o.InstanceMetadataTags, m.InstanceMetadataTags)
	}
	x.MetadataOptions = &xMetadataOptions{"applied", m.HTTPTokens, m.HTTPPutResponseHopLimit, m.HTTPEndpoint, m.HTTPProtocolIPv6, m.InstanceMetadataTags}
	return x
}

func (s *Sim) runInstances(p params, c *callCtx) (ec2Body, *apiError) {
	minCount, err := p.int("MinCount", 0)
	if err != nil {
		return nil, err
	}
	maxCount, err := p.int("MaxCount", 0)
	if err != nil {
		return nil, err
	}
	if minCount < 1 || maxCount < minCount {
		return nil, errf(http.StatusBadRequest, "InvalidParameterValue", "MinCount (%d) and MaxCount (%d) must be >= 1 with MinCount <= MaxCount", minCount, maxCount)
	}
	var lt *LaunchTemplate
	if p.str("LaunchTemplate.LaunchTemplateId") != "" || p.str("LaunchTemplate.LaunchTemplateName") != "" {
		var aerr *apiError
		if lt, aerr = s.resolveTemplate(p.str("LaunchTemplate.LaunchTemplateId"), p.str("LaunchTemplate.LaunchTemplateName"), p.str("LaunchTemplate.Version")); aerr != nil {
			return nil, aerr
		}
	}
	var data LaunchTemplateData
	if lt != nil {
		data = cloneTemplate(lt).Data
	}
	instanceType := cmpOr(p.str("InstanceType"), data.InstanceType)
	if instanceType == "" {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter InstanceType")
	}
	if _, ok := s.types[instanceType]; !ok {
		return nil, errBadParam("Invalid value '%s' for InstanceType.", instanceType)
	}
	imageID := cmpOr(p.str("ImageId"), data.ImageID)
	if code, msg := s.checkImage(imageID, instanceType); code != "" {
		return nil, errf(http.StatusBadRequest, code, "%s", msg)
	}
	ct := CapacityOnDemand
	if mt := p.str("InstanceMarketOptions.MarketType"); mt == "spot" {
		ct = CapacitySpot
	} else if mt != "" {
		return nil, errBadParam("Invalid value '%s' for InstanceMarketOptions.MarketType", mt)
	}
	sn, zone, aerr := s.subnetFor(p.str("SubnetId"), p.str("Placement.AvailabilityZone"))
	if aerr != nil {
		return nil, aerr
	}
	sgs := p.list("SecurityGroupId")
	if len(sgs) == 0 {
		sgs = data.SecurityGroupIDs
	}
	if aerr := s.checkSecurityGroups(sgs); aerr != nil {
		return nil, aerr
	}
	userData := cmpOr(p.str("UserData"), data.UserData)
	if aerr := checkUserData(userData); aerr != nil {
		return nil, aerr
	}
	bdms, aerr := parseBlockDevices(p, "BlockDeviceMapping")
	if aerr != nil {
		return nil, aerr
	}
	if len(bdms) == 0 {
		bdms = data.BlockDeviceMappings
	}
	md, aerr := parseMetadataOptions(p, "MetadataOptions")
	if aerr != nil {
		return nil, aerr
	}
	if md == nil {
		md = data.MetadataOptions
	}
	specs, aerr := p.tagSpecs("TagSpecification")
	if aerr != nil {
		return nil, aerr
	}
	tags := map[string]string{}
	for k, v := range data.TagSpecifications["instance"] {
		tags[k] = v
	}
	for k, v := range specs["instance"] {
		tags[k] = v
	}
	pl := &pool{lt: lt, ltVersion: p.str("LaunchTemplate.Version"), instanceType: instanceType, subnet: sn, zone: zone, imageID: imageID, weight: 1}
	o := pl.offering(ct)
	n := 0
	used, usedIPs := map[Offering]int{}, map[string]int{}
	budget := c.partial
	for n < maxCount && budget != 0 {
		if code, _ := s.launchBlocker(o, sn, used, usedIPs); code != "" {
			break
		}
		used[o]++
		if sn != nil {
			usedIPs[sn.ID]++
		}
		n++
		if budget > 0 {
			budget--
		}
	}
	if n < minCount {
		code, msg := s.launchBlocker(o, sn, used, usedIPs)
		if code == "" || code == "InsufficientInstanceCapacity" {
			// EC2 answers capacity shortages with HTTP 500, which the SDK retries.
			return nil, errf(http.StatusInternalServerError, "InsufficientInstanceCapacity", "%s",
				cmpOr(msg, fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity.", instanceType, zone)))
		}
		return nil, errf(http.StatusBadRequest, code, "%s", msg)
	}
	resID := s.w.hexID("r", 17)
	profile := cmpOr(cmpOr(p.str("IamInstanceProfile.Arn"), p.str("IamInstanceProfile.Name")), data.IAMInstanceProfile)
	ins := s.launch(pl, ct, n, launchSpec{sgIDs: sgs, userData: userData, profile: profile, metadata: md, bdms: bdms, tags: tags, reservationID: resID})
	out := &runInstancesOut{ReservationID: resID, OwnerID: s.w.account}
	for i, in := range ins {
		x := s.instanceXML(in)
		x.AmiLaunchIndex = i
		out.Instances = append(out.Instances, x)
	}
	return out, nil
}

// ---- DescribeInstances ----

type describeInstancesOut struct {
	meta
	Reservations []xReservation `xml:"reservationSet>item"`
	NextToken    string         `xml:"nextToken,omitempty"`
}

var instanceIDRE = regexp.MustCompile(`^i-[0-9a-f]{8}([0-9a-f]{9})?$`)

func (s *Sim) checkInstanceIDs(ids []string) *apiError {
	var missing []string
	for _, id := range ids {
		if !instanceIDRE.MatchString(id) {
			return errf(http.StatusBadRequest, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		if _, ok := s.w.instances.get(id); !ok {
			missing = append(missing, id)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return errf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	default:
		return errf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
	}
}

func (s *Sim) describeInstances(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("InstanceId")
	if len(ids) > 0 && p.has("MaxResults") {
		return nil, errf(http.StatusBadRequest, "InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	if err := s.checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	fs := p.filters()
	var items []*Instance
	for _, in := range s.w.instances.list() {
		if len(ids) > 0 && !slices.Contains(ids, in.ID) {
			continue
		}
		lifecycle := ""
		if in.CapacityType == CapacitySpot {
			lifecycle = "spot"
		}
		ok, err := fieldFilters{
			"instance-id":              one(in.ID),
			"instance-state-name":      one(in.State),
			"instance-state-code":      one(strconv.Itoa(stateCodes[in.State])),
			"instance-type":            one(in.InstanceType),
			"availability-zone":        one(in.Zone),
			"subnet-id":                one(in.SubnetID),
			"vpc-id":                   one(in.VpcID),
			"image-id":                 one(in.ImageID),
			"instance-lifecycle":       one(lifecycle),
			"private-dns-name":         one(in.PrivateDNSName),
			"private-ip-address":       one(in.PrivateIP),
			"reservation-id":           one(in.ReservationID),
			"spot-instance-request-id": one(in.SpotRequestID),
			"architecture":             one(in.Architecture),
			"launch-time":              one(formatTime(in.LaunchTime)),
		}.match(fs, in.Tags)
		if err != nil {
			return nil, err
		}
		if ok {
			items = append(items, in)
		}
	}
	start, end, next, err := page(p, "DescribeInstances", len(items), 0, 5, 1000)
	if err != nil {
		return nil, err
	}
	out := &describeInstancesOut{NextToken: next}
	for _, in := range items[start:end] {
		n := len(out.Reservations)
		if n == 0 || out.Reservations[n-1].ReservationID != in.ReservationID {
			out.Reservations = append(out.Reservations, xReservation{ReservationID: cmpOr(in.ReservationID, "r-"+strings.TrimPrefix(in.ID, "i-")), OwnerID: s.w.account})
			n++
		}
		out.Reservations[n-1].Instances = append(out.Reservations[n-1].Instances, s.instanceXML(in))
	}
	return out, nil
}

// ---- CreateTags / DeleteTags ----

type returnOut struct {
	meta
	Return bool `xml:"return"`
}

// taggable finds the tag map of a resource by ID.
func (s *Sim) taggable(id string) (map[string]string, func(map[string]string), *apiError) {
	prefix, _, _ := strings.Cut(id, "-")
	switch prefix {
	case "i":
		if in, ok := s.w.instances.get(id); ok {
			return in.Tags, func(m map[string]string) { in.Tags = m }, nil
		}
		if !instanceIDRE.MatchString(id) {
			return nil, nil, errf(http.StatusBadRequest, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		return nil, nil, errf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	case "subnet":
		if sn, ok := s.w.subnets.get(id); ok {
			return sn.Tags, func(m map[string]string) { sn.Tags = m }, nil
		}
		return nil, nil, errf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
	case "sg":
		if sg, ok := s.w.sgs.get(id); ok {
			return sg.Tags, func(m map[string]string) { sg.Tags = m }, nil
		}
		return nil, nil, errf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	case "ami":
		if img, ok := s.w.images.get(id); ok {
			return img.Tags, func(m map[string]string) { img.Tags = m }, nil
		}
		return nil, nil, errf(http.StatusBadRequest, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
	case "lt":
		if lt, ok := s.w.templates.get(id); ok {
			return lt.Tags, func(m map[string]string) { lt.Tags = m }, nil
		}
		return nil, nil, ltIDNotFound(id)
	}
	return nil, nil, errf(http.StatusBadRequest, "InvalidID", "The ID '%s' is not valid", id)
}

func (s *Sim) createTags(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("ResourceId")
	if len(ids) == 0 {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter resourceIdSet")
	}
	tags, err := p.tags("Tag")
	if err != nil {
		return nil, err
	}
	for k := range tags {
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return nil, errBadParam("Tag keys starting with 'aws:' are reserved for internal use")
		}
	}
	// Validate every resource first: a bad ID tags nothing.
	type target struct {
		cur map[string]string
		set func(map[string]string)
	}
	var targets []target
	for _, id := range ids {
		cur, set, err := s.taggable(id)
		if err != nil {
			return nil, err
		}
		merged := cloneTags(cur)
		for k, v := range tags {
			merged[k] = v
		}
		if len(merged) > 50 {
			return nil, errf(http.StatusBadRequest, "TagLimitExceeded", "The maximum number of tags per resource (50) would be exceeded for %s", id)
		}
		targets = append(targets, target{merged, set})
	}
	for _, t := range targets {
		t.set(t.cur)
	}
	return &returnOut{Return: true}, nil
}

func (s *Sim) deleteTags(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("ResourceId")
	if len(ids) == 0 {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter resourceIdSet")
	}
	type del struct {
		key   string
		value *string
	}
	var dels []del
	for _, i := range p.indices("Tag") {
		d := del{key: p.str(fmt.Sprintf("Tag.%d.Key", i))}
		if k := fmt.Sprintf("Tag.%d.Value", i); p.has(k) {
			v := p.str(k)
			d.value = &v
		}
		dels = append(dels, d)
	}
	for _, id := range ids {
		cur, set, err := s.taggable(id)
		if err != nil {
			return nil, err
		}
		m := cloneTags(cur)
		if len(dels) == 0 {
			m = map[string]string{}
		}
		for _, d := range dels {
			if v, ok := m[d.key]; ok && (d.value == nil || *d.value == v) {
				delete(m, d.key)
			}
		}
		set(m)
	}
	return &returnOut{Return: true}, nil
}

// ---- TerminateInstances ----

type xStateChange struct {
	InstanceID    string `xml:"instanceId"`
	CurrentState  xState `xml:"currentState"`
	PreviousState xState `xml:"previousState"`
}

type terminateInstancesOut struct {
	meta
	Items []xStateChange `xml:"instancesSet>item"`
}

func (s *Sim) terminateInstances(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("InstanceId")
	if len(ids) == 0 {
		return nil, errf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter InstanceId")
	}
	if err := s.checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	out := &terminateInstancesOut{}
	for _, id := range ids {
		in, _ := s.w.instances.get(id)
		prev := in.State
		if prev == StatePending || prev == StateRunning {
			in.StateReason = "Client.UserInitiatedShutdown: User initiated shutdown"
			in.StateTransitionReason = fmt.Sprintf("User initiated (%s)", now.Format("2006-01-02 15:04:05 MST"))
			s.setState(in, StateShuttingDown, now, now.Add(s.cfg.ShutdownTime))
		}
		out.Items = append(out.Items, xStateChange{id, stateXML(in.State), stateXML(prev)})
	}
	return out, nil
}
