package awssim

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

// ---- DescribeInstanceTypes ----

type xInstanceType struct {
	InstanceType                 string    `xml:"instanceType"`
	CurrentGeneration            bool      `xml:"currentGeneration"`
	FreeTierEligible             bool      `xml:"freeTierEligible"`
	SupportedUsageClasses        []string  `xml:"supportedUsageClasses>item"`
	SupportedRootDeviceTypes     []string  `xml:"supportedRootDeviceTypes>item"`
	SupportedVirtualizationTypes []string  `xml:"supportedVirtualizationTypes>item"`
	BareMetal                    bool      `xml:"bareMetal"`
	Hypervisor                   string    `xml:"hypervisor,omitempty"`
	ProcessorInfo                xProc     `xml:"processorInfo"`
	VCpuInfo                     xVCpu     `xml:"vCpuInfo"`
	MemoryInfo                   xMem      `xml:"memoryInfo"`
	InstanceStorageSupported     bool      `xml:"instanceStorageSupported"`
	EbsInfo                      xEbsInfo  `xml:"ebsInfo"`
	NetworkInfo                  xNetInfo  `xml:"networkInfo"`
	GpuInfo                      *xGpuInfo `xml:"gpuInfo,omitempty"`
	NeuronInfo                   *xNeuron  `xml:"neuronInfo,omitempty"`
	PlacementGroupStrategies     []string  `xml:"placementGroupInfo>supportedStrategies>item"`
	HibernationSupported         bool      `xml:"hibernationSupported"`
	BurstablePerformanceSupport  bool      `xml:"burstablePerformanceSupported"`
	DedicatedHostsSupported      bool      `xml:"dedicatedHostsSupported"`
	AutoRecoverySupported        bool      `xml:"autoRecoverySupported"`
	SupportedBootModes           []string  `xml:"supportedBootModes>item"`
}

type xProc struct {
	SupportedArchitectures []string `xml:"supportedArchitectures>item"`
	Manufacturer           string   `xml:"manufacturer,omitempty"`
}

type xVCpu struct {
	DefaultVCpus          int `xml:"defaultVCpus"`
	DefaultCores          int `xml:"defaultCores"`
	DefaultThreadsPerCore int `xml:"defaultThreadsPerCore"`
}

type xMem struct {
	SizeInMiB int64 `xml:"sizeInMiB"`
}

type xEbsInfo struct {
	EbsOptimizedSupport string `xml:"ebsOptimizedSupport"`
	EncryptionSupport   string `xml:"encryptionSupport"`
	NvmeSupport         string `xml:"nvmeSupport"`
}

type xNetInfo struct {
	NetworkPerformance        string     `xml:"networkPerformance,omitempty"`
	MaximumNetworkInterfaces  int        `xml:"maximumNetworkInterfaces"`
	MaximumNetworkCards       int        `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex   int        `xml:"defaultNetworkCardIndex"`
	NetworkCards              []xNetCard `xml:"networkCards>item"`
	Ipv4AddressesPerInterface int        `xml:"ipv4AddressesPerInterface"`
	Ipv6AddressesPerInterface int        `xml:"ipv6AddressesPerInterface"`
	Ipv6Supported             bool       `xml:"ipv6Supported"`
	EnaSupport                string     `xml:"enaSupport"`
	EfaSupported              bool       `xml:"efaSupported"`
	EncryptionInTransit       bool       `xml:"encryptionInTransitSupported"`
}

type xNetCard struct {
	NetworkCardIndex         int     `xml:"networkCardIndex"`
	NetworkPerformance       string  `xml:"networkPerformance,omitempty"`
	MaximumNetworkInterfaces int     `xml:"maximumNetworkInterfaces"`
	BaselineBandwidthInGbps  float64 `xml:"baselineBandwidthInGbps,omitempty"`
	PeakBandwidthInGbps      float64 `xml:"peakBandwidthInGbps,omitempty"`
}

type xGpuInfo struct {
	Gpus                []xGpu `xml:"gpus>item"`
	TotalGpuMemoryInMiB int64  `xml:"totalGpuMemoryInMiB"`
}

type xGpu struct {
	Name         string `xml:"name"`
	Manufacturer string `xml:"manufacturer"`
	Count        int    `xml:"count"`
	MemoryInfo   xMem   `xml:"memoryInfo"`
}

type xNeuron struct {
	NeuronDevices []xNeuronDevice `xml:"neuronDevices>item"`
	TotalMemory   int64           `xml:"totalNeuronDeviceMemoryInMiB"`
}

type xNeuronDevice struct {
	Count      int        `xml:"count"`
	Name       string     `xml:"name"`
	CoreInfo   *xCoreInfo `xml:"coreInfo,omitempty"`
	MemoryInfo xMem       `xml:"memoryInfo"`
}

type xCoreInfo struct {
	Count   int `xml:"count"`
	Version int `xml:"version"`
}

type describeInstanceTypesOut struct {
	meta
	Items     []xInstanceType `xml:"instanceTypeSet>item"`
	NextToken string          `xml:"nextToken,omitempty"`
}

// awsGPUNames maps the catalog's (Karpenter label) GPU names back to how EC2 spells them.
var awsGPUNames = map[string]string{
	"l4": "L4", "l40s": "L40S", "a10g": "A10G", "t4": "T4", "t4g": "T4g", "a100": "A100", "h100": "H100",
	"h200": "H200", "b200": "B200", "b300": "B300", "v100": "V100", "k80": "K80", "m60": "M60",
	"radeon-pro-v520": "Radeon Pro V520", "rtx-pro-server-6000": "RTX PRO Server 6000", "rtx-pro-4500": "RTX PRO 4500",
	"gaudi-hl-205": "Gaudi HL-205", "inferentia": "Inferentia", "inferentia2": "Inferentia2",
	"trainium": "Trainium", "trainium2": "Trainium2",
}

var awsManufacturers = map[string]string{"nvidia": "NVIDIA", "amd": "AMD", "aws": "AWS", "habana": "Habana", "xilinx": "Xilinx", "intel": "Intel"}

func awsName(m map[string]string, v string) string {
	if n, ok := m[strings.ToLower(v)]; ok {
		return n
	}
	return v
}

// eniLimits derives (ENIs, IPv4 per ENI) that reproduce the catalog's max pods
// through Karpenter's formula ENIs × (IPs − 1) + 2, preferring the pairs EC2
// actually uses.
func eniLimits(maxPods int) (enis, ips int) {
	if maxPods < 3 {
		return 1, 2
	}
	for _, e := range []int{3, 4, 8, 15, 2, 7, 6, 5, 12, 14, 16, 24, 30, 32, 48, 50, 64, 100} {
		if (maxPods-2)%e == 0 {
			if per := (maxPods-2)/e + 1; per >= 2 && per <= 50 {
				return e, per
			}
		}
	}
	return 1, maxPods - 1
}

var sizeRE = regexp.MustCompile(`^([a-z]+)(\d+)([a-z-]*)\.(.+)$`)

func processorManufacturer(it *catalog.InstanceType) string {
	if it.Arch == "arm64" {
		return "AWS"
	}
	if m := sizeRE.FindStringSubmatch(it.Name); m != nil && strings.Contains(m[3], "a") {
		return "AMD"
	}
	return "Intel"
}

func networkPerformance(gbps float64) string {
	if gbps <= 0 {
		return ""
	}
	return strconv.FormatFloat(gbps, 'f', -1, 64) + " Gigabit"
}

func (s *Sim) instanceTypeXML(it *catalog.InstanceType) xInstanceType {
	arch := "x86_64"
	if it.Arch == "arm64" {
		arch = "arm64"
	}
	threads := 2
	if arch == "arm64" || it.VCPU < 2 {
		threads = 1
	}
	metal := strings.Contains(it.Name, "metal")
	hyper := "nitro"
	if metal {
		hyper = ""
	}
	family := it.Name
	if i := strings.IndexByte(family, '.'); i >= 0 {
		family = family[:i]
	}
	enis, ips := eniLimits(it.MaxPods)
	x := xInstanceType{
		InstanceType:                 it.Name,
		CurrentGeneration:            true,
		SupportedUsageClasses:        []string{"on-demand", "spot"},
		SupportedRootDeviceTypes:     []string{"ebs"},
		SupportedVirtualizationTypes: []string{"hvm"},
		BareMetal:                    metal,
		Hypervisor:                   hyper,
		ProcessorInfo:                xProc{SupportedArchitectures: []string{arch}, Manufacturer: processorManufacturer(it)},
		VCpuInfo:                     xVCpu{DefaultVCpus: it.VCPU, DefaultCores: max(it.VCPU/threads, 1), DefaultThreadsPerCore: threads},
		MemoryInfo:                   xMem{it.MemoryMiB},
		EbsInfo:                      xEbsInfo{"default", "supported", "required"},
		NetworkInfo: xNetInfo{
			NetworkPerformance:        networkPerformance(it.NetworkGbps),
			MaximumNetworkInterfaces:  enis,
			MaximumNetworkCards:       1,
			NetworkCards:              []xNetCard{{NetworkPerformance: networkPerformance(it.NetworkGbps), MaximumNetworkInterfaces: enis, BaselineBandwidthInGbps: it.NetworkGbps, PeakBandwidthInGbps: it.NetworkGbps}},
			Ipv4AddressesPerInterface: ips,
			Ipv6AddressesPerInterface: ips,
			Ipv6Supported:             true,
			EnaSupport:                "required",
			EncryptionInTransit:       true,
		},
		PlacementGroupStrategies:    []string{"cluster", "partition", "spread"},
		BurstablePerformanceSupport: strings.HasPrefix(family, "t"),
		AutoRecoverySupported:       true,
		SupportedBootModes:          []string{"legacy-bios", "uefi"},
	}
	if arch == "arm64" {
		x.SupportedBootModes = []string{"uefi"}
	}
	if g := it.GPU; g != nil {
		x.GpuInfo = &xGpuInfo{
			Gpus:                []xGpu{{Name: awsName(awsGPUNames, g.Name), Manufacturer: awsName(awsManufacturers, g.Manufacturer), Count: g.Count, MemoryInfo: xMem{g.MemoryMiB}}},
			TotalGpuMemoryInMiB: int64(g.Count) * g.MemoryMiB,
		}
	}
	if a := it.Accelerator; a != nil {
		x.NeuronInfo = &xNeuron{
			NeuronDevices: []xNeuronDevice{{Count: a.Count, Name: awsName(awsGPUNames, a.Name), MemoryInfo: xMem{a.MemoryMiB}}},
			TotalMemory:   int64(a.Count) * a.MemoryMiB,
		}
		if a.CoresPerDevice > 0 {
			version := 1
			if strings.HasSuffix(a.Name, "2") {
				version = 2
			}
			x.NeuronInfo.NeuronDevices[0].CoreInfo = &xCoreInfo{a.CoresPerDevice, version}
		}
	}
	return x
}

func (s *Sim) describeInstanceTypes(p params, _ *callCtx) (ec2Body, *apiError) {
	names := p.list("InstanceType")
	var missing []string
	for _, n := range names {
		if _, ok := s.types[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, errf(http.StatusBadRequest, "InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
	}
	candidates := s.typeNames
	if len(names) > 0 {
		candidates = names
	}
	fs := p.filters()
	var items []*catalog.InstanceType
	for _, n := range candidates {
		it := s.types[n]
		arch := "x86_64"
		if it.Arch == "arm64" {
			arch = "arm64"
		}
		ok, err := fieldFilters{
			"instance-type":                         one(it.Name),
			"processor-info.supported-architecture": one(arch),
			"current-generation":                    one("true"),
			"bare-metal":                            one(strconv.FormatBool(strings.Contains(it.Name, "metal"))),
			"vcpu-info.default-vcpus":               one(strconv.Itoa(it.VCPU)),
			"memory-info.size-in-mib":               one(strconv.FormatInt(it.MemoryMiB, 10)),
			"supported-usage-class":                 func() []string { return []string{"on-demand", "spot"} },
			"supported-virtualization-type":         one("hvm"),
			"hypervisor":                            one("nitro"),
		}.match(fs, nil)
		if err != nil {
			return nil, err
		}
		if ok {
			items = append(items, it)
		}
	}
	start, end, next, err := page(p, "DescribeInstanceTypes", len(items), 100, 5, 100)
	if err != nil {
		return nil, err
	}
	out := &describeInstanceTypesOut{NextToken: next}
	for _, it := range items[start:end] {
		out.Items = append(out.Items, s.instanceTypeXML(it))
	}
	return out, nil
}

// ---- DescribeInstanceTypeOfferings ----

type xOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type describeOfferingsOut struct {
	meta
	Items     []xOffering `xml:"instanceTypeOfferingSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

// zoneID maps us-east-1a to use1-az1, the way EC2 names zone IDs.
func zoneID(region, zone string) string {
	short := map[string]string{"northeast": "ne", "southeast": "se", "northwest": "nw", "southwest": "sw"}
	parts := strings.Split(region, "-")
	var b strings.Builder
	for i, p := range parts {
		switch {
		case i == 0 || i == len(parts)-1:
			b.WriteString(p)
		case short[p] != "":
			b.WriteString(short[p])
		case p != "":
			b.WriteByte(p[0])
		}
	}
	suffix := strings.TrimPrefix(zone, region)
	n := 1
	if len(suffix) == 1 && suffix[0] >= 'a' && suffix[0] <= 'z' {
		n = int(suffix[0]-'a') + 1
	}
	return fmt.Sprintf("%s-az%d", b.String(), n)
}

func (s *Sim) describeInstanceTypeOfferings(p params, _ *callCtx) (ec2Body, *apiError) {
	lt := p.str("LocationType")
	if lt == "" {
		lt = "region"
	}
	if lt != "region" && lt != "availability-zone" && lt != "availability-zone-id" {
		return nil, errBadParam("Invalid value '%s' for LocationType", lt)
	}
	fs := p.filters()
	var items []xOffering
	for _, n := range s.typeNames {
		it := s.types[n]
		var locs []string
		if lt == "region" {
			if len(it.Offerings) > 0 {
				locs = []string{s.w.region}
			}
		} else {
			seen := map[string]bool{}
			for _, o := range it.Offerings {
				loc := o.Zone
				if lt == "availability-zone-id" {
					loc = zoneID(s.w.region, o.Zone)
				}
				if !seen[loc] {
					seen[loc] = true
					locs = append(locs, loc)
				}
			}
			slices.Sort(locs)
		}
		for _, loc := range locs {
			ok, err := fieldFilters{"instance-type": one(n), "location": one(loc)}.match(fs, nil)
			if err != nil {
				return nil, err
			}
			if ok {
				items = append(items, xOffering{n, lt, loc})
			}
		}
	}
	start, end, next, err := page(p, "DescribeInstanceTypeOfferings", len(items), 1000, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &describeOfferingsOut{Items: items[start:end], NextToken: next}, nil
}

// ---- DescribeSpotPriceHistory ----

type xSpotPrice struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
}

type describeSpotPriceHistoryOut struct {
	meta
	Items     []xSpotPrice `xml:"spotPriceHistorySet>item"`
	NextToken string       `xml:"nextToken,omitempty"`
}

const linuxProduct = "Linux/UNIX"

// spotPrice is the current spot price of a type in a zone: an override, or the catalog's.
func (s *Sim) spotPrice(instanceType, zone string) (float64, bool) {
	if p, ok := s.w.spotPrices[[2]string{instanceType, zone}]; ok {
		return p, true
	}
	o, ok := s.catPrice[Offering{instanceType, zone, CapacitySpot}]
	return o.PricePerHour, ok
}

// price is what an instance of the offering costs per hour.
func (s *Sim) price(o Offering) float64 {
	if o.CapacityType == CapacitySpot {
		p, _ := s.spotPrice(o.InstanceType, o.Zone)
		return p
	}
	return s.catPrice[o].PricePerHour
}

func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func (s *Sim) describeSpotPriceHistory(p params, _ *callCtx) (ec2Body, *apiError) {
	types := p.list("InstanceType")
	for _, t := range types {
		if _, ok := s.types[t]; !ok {
			return nil, errBadParam("The following supplied instance types do not exist: [%s]", t)
		}
	}
	products := p.list("ProductDescription")
	zoneParam := p.str("AvailabilityZone")
	for _, k := range []string{"StartTime", "EndTime"} {
		if v := p.str(k); v != "" {
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				return nil, errBadParam("Invalid value '%s' for %s", v, k)
			}
		}
	}
	candidates := s.typeNames
	if len(types) > 0 {
		candidates = types
	}
	now := s.clock.Now()
	// The simulator keeps one price per pool, set at the top of the current hour,
	// as a real pool whose price has not moved recently.
	stamp := formatTime(now.Truncate(time.Hour))
	fs := p.filters()
	var items []xSpotPrice
	for _, n := range candidates {
		it := s.types[n]
		for _, o := range it.Offerings {
			if o.CapacityType != CapacitySpot {
				continue
			}
			if zoneParam != "" && o.Zone != zoneParam {
				continue
			}
			if len(products) > 0 && !slices.Contains(products, linuxProduct) && !slices.Contains(products, linuxProduct+" (Amazon VPC)") {
				continue
			}
			price, _ := s.spotPrice(n, o.Zone)
			x := xSpotPrice{o.Zone, zoneID(s.w.region, o.Zone), n, linuxProduct, strconv.FormatFloat(price, 'f', 6, 64), stamp}
			ok, err := fieldFilters{
				"instance-type":       one(n),
				"availability-zone":   one(o.Zone),
				"product-description": one(linuxProduct),
				"spot-price":          one(x.SpotPrice),
				"timestamp":           one(stamp),
			}.match(fs, nil)
			if err != nil {
				return nil, err
			}
			if ok {
				items = append(items, x)
			}
		}
	}
	start, end, next, err := page(p, "DescribeSpotPriceHistory", len(items), 1000, 1, 1000)
	if err != nil {
		return nil, err
	}
	return &describeSpotPriceHistoryOut{Items: items[start:end], NextToken: next}, nil
}

// ---- DescribeSubnets ----

type xSubnet struct {
	SubnetID                string `xml:"subnetId"`
	SubnetArn               string `xml:"subnetArn"`
	State                   string `xml:"state"`
	OwnerID                 string `xml:"ownerId"`
	VpcID                   string `xml:"vpcId"`
	CidrBlock               string `xml:"cidrBlock"`
	AvailableIPAddressCount int    `xml:"availableIpAddressCount"`
	AvailabilityZone        string `xml:"availabilityZone"`
	AvailabilityZoneID      string `xml:"availabilityZoneId"`
	DefaultForAz            bool   `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool   `xml:"mapPublicIpOnLaunch"`
	Tags                    []xTag `xml:"tagSet>item"`
}

type describeSubnetsOut struct {
	meta
	Items     []xSubnet `xml:"subnetSet>item"`
	NextToken string    `xml:"nextToken,omitempty"`
}

func (s *Sim) describeSubnets(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("SubnetId")
	for _, id := range ids {
		if _, ok := s.w.subnets.get(id); !ok {
			return nil, errf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	items, err := selectItems(p, s.w.subnets.list(), ids, func(sn *Subnet) string { return sn.ID },
		func(sn *Subnet) (fieldFilters, map[string]string) {
			return fieldFilters{
				"subnet-id":            one(sn.ID),
				"vpc-id":               one(sn.VpcID),
				"availability-zone":    one(sn.Zone),
				"availability-zone-id": one(zoneID(s.w.region, sn.Zone)),
				"cidr-block":           one(sn.CIDR),
				"cidr":                 one(sn.CIDR),
				"state":                one("available"),
				"owner-id":             one(s.w.account),
				"default-for-az":       one("false"),
			}, sn.Tags
		},
		func(sn *Subnet) xSubnet {
			return xSubnet{
				SubnetID: sn.ID, SubnetArn: fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", s.w.region, s.w.account, sn.ID),
				State: "available", OwnerID: s.w.account, VpcID: sn.VpcID, CidrBlock: sn.CIDR,
				AvailableIPAddressCount: sn.AvailableIPs, AvailabilityZone: sn.Zone, AvailabilityZoneID: zoneID(s.w.region, sn.Zone),
				Tags: xTags(sn.Tags),
			}
		})
	if err != nil {
		return nil, err
	}
	start, end, next, err := page(p, "DescribeSubnets", len(items), 0, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &describeSubnetsOut{Items: items[start:end], NextToken: next}, nil
}

// ---- DescribeSecurityGroups ----

type xSecurityGroup struct {
	OwnerID          string `xml:"ownerId"`
	GroupID          string `xml:"groupId"`
	GroupName        string `xml:"groupName"`
	GroupDescription string `xml:"groupDescription"`
	VpcID            string `xml:"vpcId"`
	SecurityGroupArn string `xml:"securityGroupArn"`
	Tags             []xTag `xml:"tagSet>item"`
}

type describeSecurityGroupsOut struct {
	meta
	Items     []xSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string           `xml:"nextToken,omitempty"`
}

func (s *Sim) describeSecurityGroups(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("GroupId")
	for _, id := range ids {
		if _, ok := s.w.sgs.get(id); !ok {
			return nil, errf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	names := p.list("GroupName")
	for _, n := range names {
		found := false
		for _, sg := range s.w.sgs.list() {
			found = found || sg.Name == n
		}
		if !found {
			return nil, errf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC", n)
		}
	}
	fs := p.filters()
	var items []xSecurityGroup
	for _, sg := range s.w.sgs.list() {
		if len(ids) > 0 && !slices.Contains(ids, sg.ID) || len(names) > 0 && !slices.Contains(names, sg.Name) {
			continue
		}
		ok, err := fieldFilters{
			"group-id":    one(sg.ID),
			"group-name":  one(sg.Name),
			"vpc-id":      one(sg.VpcID),
			"description": one(sg.Description),
			"owner-id":    one(s.w.account),
		}.match(fs, sg.Tags)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		items = append(items, xSecurityGroup{
			OwnerID: s.w.account, GroupID: sg.ID, GroupName: sg.Name, GroupDescription: sg.Description, VpcID: sg.VpcID,
			SecurityGroupArn: fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", s.w.region, s.w.account, sg.ID),
			Tags:             xTags(sg.Tags),
		})
	}
	start, end, next, err := page(p, "DescribeSecurityGroups", len(items), 0, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &describeSecurityGroupsOut{Items: items[start:end], NextToken: next}, nil
}

// ---- DescribeImages ----

type xImage struct {
	ImageID            string      `xml:"imageId"`
	ImageLocation      string      `xml:"imageLocation"`
	ImageState         string      `xml:"imageState"`
	ImageOwnerID       string      `xml:"imageOwnerId"`
	CreationDate       string      `xml:"creationDate"`
	IsPublic           bool        `xml:"isPublic"`
	Architecture       string      `xml:"architecture"`
	ImageType          string      `xml:"imageType"`
	ImageOwnerAlias    string      `xml:"imageOwnerAlias,omitempty"`
	Name               string      `xml:"name"`
	Description        string      `xml:"description,omitempty"`
	RootDeviceType     string      `xml:"rootDeviceType"`
	RootDeviceName     string      `xml:"rootDeviceName"`
	VirtualizationType string      `xml:"virtualizationType"`
	Hypervisor         string      `xml:"hypervisor"`
	EnaSupport         bool        `xml:"enaSupport"`
	PlatformDetails    string      `xml:"platformDetails"`
	UsageOperation     string      `xml:"usageOperation"`
	DeprecationTime    string      `xml:"deprecationTime,omitempty"`
	BlockDeviceMapping []xImageBDM `xml:"blockDeviceMapping>item"`
	Tags               []xTag      `xml:"tagSet>item"`
}

type xImageBDM struct {
	DeviceName string    `xml:"deviceName"`
	Ebs        xImageEBS `xml:"ebs"`
}

type xImageEBS struct {
	SnapshotID          string `xml:"snapshotId"`
	VolumeSize          int    `xml:"volumeSize"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	VolumeType          string `xml:"volumeType"`
	Encrypted           bool   `xml:"encrypted"`
}

type describeImagesOut struct {
	meta
	Items     []xImage `xml:"imagesSet>item"`
	NextToken string   `xml:"nextToken,omitempty"`
}

var amiIDRE = regexp.MustCompile(`^ami-[0-9a-f]{8}([0-9a-f]{9})?$`)

func (s *Sim) describeImages(p params, _ *callCtx) (ec2Body, *apiError) {
	ids := p.list("ImageId")
	for _, id := range ids {
		if !amiIDRE.MatchString(id) {
			return nil, errf(http.StatusBadRequest, "InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", id)
		}
	}
	owners := p.list("Owner")
	includeDeprecated := p.bool("IncludeDeprecated")
	now := s.clock.Now()
	fs := p.filters()
	var items []xImage
	for _, img := range s.w.images.list() {
		if len(ids) > 0 && !slices.Contains(ids, img.ID) {
			continue
		}
		if img.State == imageDeregistered { // gone from every listing, as in EC2
			continue
		}
		if len(owners) > 0 && !s.ownerMatches(owners, img) {
			continue
		}
		if img.DeprecationTime != "" && len(ids) == 0 && !includeDeprecated {
			if t, err := time.Parse(time.RFC3339, img.DeprecationTime); err == nil && !now.Before(t) {
				continue
			}
		}
		alias := img.OwnerAlias
		ok, err := fieldFilters{
			"image-id":            one(img.ID),
			"name":                one(img.Name),
			"description":         one(img.Description),
			"architecture":        one(img.Architecture),
			"state":               one(img.State),
			"owner-id":            one(img.OwnerID),
			"owner-alias":         one(alias),
			"is-public":           one(strconv.FormatBool(img.Public)),
			"image-type":          one("machine"),
			"root-device-type":    one("ebs"),
			"virtualization-type": one("hvm"),
		}.match(fs, img.Tags)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		created := img.CreationDate
		if t, err := time.Parse(time.RFC3339, created); err == nil {
			created = formatTime(t)
		}
		dep := ""
		if t, err := time.Parse(time.RFC3339, img.DeprecationTime); err == nil {
			dep = formatTime(t)
		}
		var bdms []xImageBDM
		for _, b := range img.BlockDevices {
			bdms = append(bdms, xImageBDM{b.DeviceName, xImageEBS{b.SnapshotID, b.VolumeSizeGiB, true, "gp3", false}})
		}
		items = append(items, xImage{
			ImageID: img.ID, ImageLocation: img.OwnerID + "/" + img.Name, ImageState: img.State, ImageOwnerID: img.OwnerID,
			CreationDate: created, IsPublic: img.Public, Architecture: img.Architecture, ImageType: "machine",
			ImageOwnerAlias: alias, Name: img.Name, Description: img.Description, RootDeviceType: "ebs",
			RootDeviceName: img.RootDeviceName, VirtualizationType: "hvm", Hypervisor: "xen", EnaSupport: true,
			PlatformDetails: linuxProduct, UsageOperation: "RunInstances", DeprecationTime: dep, BlockDeviceMapping: bdms, Tags: xTags(img.Tags),
		})
	}
	start, end, next, err := page(p, "DescribeImages", len(items), 0, 1, 1000)
	if err != nil {
		return nil, err
	}
	return &describeImagesOut{Items: items[start:end], NextToken: next}, nil
}

func (s *Sim) ownerMatches(owners []string, img *Image) bool {
	for _, o := range owners {
		switch {
		case o == "self" && img.OwnerID == s.w.account:
			return true
		case o == img.OwnerID:
			return true
		case img.OwnerAlias != "" && o == img.OwnerAlias:
			return true
		}
	}
	return false
}

// ---- DescribeAvailabilityZones ----

type xZone struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	ZoneType           string `xml:"zoneType"`
	OptInStatus        string `xml:"optInStatus"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
}

type describeZonesOut struct {
	meta
	Items []xZone `xml:"availabilityZoneInfo>item"`
}

func (s *Sim) describeAvailabilityZones(p params, _ *callCtx) (ec2Body, *apiError) {
	names, ids := p.list("ZoneName"), p.list("ZoneId")
	for _, n := range names {
		if !slices.Contains(s.zones, n) {
			return nil, errBadParam("The zone '%s' does not exist.", n)
		}
	}
	fs := p.filters()
	out := &describeZonesOut{}
	for _, z := range s.zones {
		id := zoneID(s.w.region, z)
		if len(names) > 0 && !slices.Contains(names, z) || len(ids) > 0 && !slices.Contains(ids, id) {
			continue
		}
		ok, err := fieldFilters{
			"zone-name": one(z), "zone-id": one(id), "state": one("available"), "region-name": one(s.w.region),
			"zone-type": one("availability-zone"), "group-name": one(s.w.region), "opt-in-status": one("opt-in-not-required"),
		}.match(fs, nil)
		if err != nil {
			return nil, err
		}
		if ok {
			out.Items = append(out.Items, xZone{z, id, "available", s.w.region, "availability-zone", "opt-in-not-required", s.w.region, s.w.region})
		}
	}
	return out, nil
}
