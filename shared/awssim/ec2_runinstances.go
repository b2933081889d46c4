package awssim

import (
	"fmt"
	"net/http"
	"strings"
)

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
	CapacityReservationID string            `xml:"capacityReservationId,omitempty"`
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
	Preference string         `xml:"capacityReservationPreference,omitempty"`
	Target     *xCapResTarget `xml:"capacityReservationTarget,omitempty"`
}

type xCapResTarget struct {
	ID string `xml:"capacityReservationId"`
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
		PlatformDetails: linuxProduct, UsageOperation: "RunInstances", CapacityReservation: xCapResSpec{Preference: "open"},
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
	if in.CapacityReservationID != "" {
		x.CapacityReservationID = in.CapacityReservationID
		x.CapacityReservation = xCapResSpec{Target: &xCapResTarget{in.CapacityReservationID}}
	}
	if in.IAMInstanceProfile != "" {
		arn := in.IAMInstanceProfile
		if !strings.HasPrefix(arn, "arn:") {
			arn = fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", s.w.account, arn)
		}
		x.IamInstanceProfile = &xIAMProfile{arn, "AIPA" + strings.ToUpper(strings.TrimPrefix(in.ID, "i-"))}
	}
	m := effectiveMetadataOptions(*in)
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
	profile := cmpOr(cmpOr(p.str("IamInstanceProfile.Arn"), p.str("IamInstanceProfile.Name")), data.IAMInstanceProfile)
	resTarget, resPref, aerr := parseReservationTarget(p, "CapacityReservationSpecification")
	if aerr != nil {
		return nil, aerr
	}
	if resTarget == "" && resPref == "" {
		resTarget, resPref = data.CapacityReservationID, data.CapacityReservationPreference
	}
	pl := &pool{lt: lt, ltVersion: p.str("LaunchTemplate.Version"), instanceType: instanceType, subnet: sn, zone: zone, imageID: imageID, weight: 1, reservation: resTarget}
	if code, msg := s.checkPool(pl, launchInput{profile: profile, userData: userData, sgIDs: sgs, bdms: bdms, tags: userTags(tags)}); code != "" {
		return nil, errf(http.StatusBadRequest, code, "%s", msg)
	}
	n := 0
	u := newUsage()
	budget := c.partial
	for n < maxCount && budget != 0 {
		if code, _ := s.launchBlocker(pl, ct, u); code != "" {
			break
		}
		u.take(pl, ct, 1)
		n++
		if budget > 0 {
			budget--
		}
	}
	if n < minCount {
		code, msg := s.launchBlocker(pl, ct, u)
		if code == "" || code == "InsufficientInstanceCapacity" {
			// EC2 answers capacity shortages with HTTP 500, which the SDK retries.
			return nil, errf(http.StatusInternalServerError, "InsufficientInstanceCapacity", "%s",
				cmpOr(msg, fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity.", instanceType, zone)))
		}
		return nil, errf(http.StatusBadRequest, code, "%s", msg)
	}
	resID := s.w.hexID("r", 17)
	ins := s.launch(pl, ct, n, launchSpec{sgIDs: sgs, userData: userData, profile: profile, metadata: md, bdms: bdms, tags: tags,
		reservationID: resID, reservationPreference: resPref})
	out := &runInstancesOut{ReservationID: resID, OwnerID: s.w.account}
	for i, in := range ins {
		x := s.instanceXML(in)
		x.AmiLaunchIndex = i
		out.Instances = append(out.Instances, x)
	}
	return out, nil
}
