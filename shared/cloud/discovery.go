package cloud

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// ClusterInfo is what user data needs to know about the cluster.
type ClusterInfo struct {
	Name     string
	Endpoint string
	// CABundle is the base64-encoded PEM CA bundle.
	CABundle string
	// CIDR is the service CIDR.
	CIDR string
	// Version is the Kubernetes minor version, e.g. "1.30".
	Version string
}

// Cluster returns the configured cluster details, completed from EKS
// DescribeCluster when the endpoint or version is not configured (never for a
// self-managed cluster: see Config.SelfManaged).
func (p *Provider) Cluster(ctx context.Context) (ClusterInfo, error) {
	p.mu.Lock()
	if p.cluster != nil {
		c := *p.cluster
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	c := ClusterInfo{
		Name: p.cfg.ClusterName, Endpoint: p.cfg.ClusterEndpoint, CABundle: p.cfg.ClusterCABundle,
		CIDR: p.cfg.ClusterCIDR, Version: p.cfg.KubernetesVersion,
	}
	if p.cfg.SelfManaged {
		var missing []string
		if c.Endpoint == "" {
			missing = append(missing, "the API server endpoint (the cluster secret's \"endpoint\")")
		}
		if c.Version == "" {
			missing = append(missing, "the Kubernetes version (the API server's /version)")
		}
		if len(missing) > 0 {
			return ClusterInfo{}, fmt.Errorf("self-managed cluster %s: %s not configured (a self-managed cluster is never described through EKS)",
				c.Name, strings.Join(missing, " and "))
		}
	} else if c.Endpoint == "" || c.Version == "" {
		if p.api.EKS == nil {
			return ClusterInfo{}, fmt.Errorf("cluster %s: endpoint or Kubernetes version not configured and no EKS client to read them", c.Name)
		}
		ec, err := p.api.EKS.DescribeCluster(ctx, c.Name)
		if err != nil {
			return ClusterInfo{}, fmt.Errorf("%w (set the cluster endpoint and version for a self-managed cluster)", err)
		}
		if c.Endpoint == "" {
			c.Endpoint = ec.Endpoint
		}
		if c.CABundle == "" {
			c.CABundle = ec.CertificateAuthority.Data
		}
		if c.CIDR == "" {
			c.CIDR = cmp.Or(ec.KubernetesNetworkConfig.ServiceIPv4CIDR, ec.KubernetesNetworkConfig.ServiceIPv6CIDR)
		}
		if c.Version == "" {
			c.Version = ec.Version
		}
	}
	p.mu.Lock()
	p.cluster = &c
	p.mu.Unlock()
	return c, nil
}

// Subnet is a discovered subnet.
type Subnet struct {
	ID           string
	Zone         string
	ZoneID       string
	AvailableIPs int32
}

// SecurityGroup is a discovered security group.
type SecurityGroup struct {
	ID   string
	Name string
}

// tagFilters turns selector tags into EC2 filters: "*" matches any value.
func tagFilters(tags map[string]string) []ec2types.Filter {
	var fs []ec2types.Filter
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if v := tags[k]; v == "*" {
			fs = append(fs, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			fs = append(fs, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		}
	}
	return fs
}

func cacheKey(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Subnets returns the subnets the terms select (terms are ORed; within a term
// tags and id are ANDed), sorted by zone then ID. No match is an error.
func (p *Provider) Subnets(ctx context.Context, terms []karpenter.SubnetSelectorTerm) ([]Subnet, error) {
	key := cacheKey(terms)
	p.mu.Lock()
	if s, ok := p.subnets[key]; ok {
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	if len(terms) == 0 {
		return nil, errors.New("subnetSelectorTerms is empty")
	}
	found := map[string]Subnet{}
	for i, t := range terms {
		filters := tagFilters(t.Tags)
		if t.ID != "" {
			filters = append(filters, ec2types.Filter{Name: aws.String("subnet-id"), Values: []string{t.ID}})
		}
		if len(filters) == 0 {
			return nil, fmt.Errorf("subnetSelectorTerms[%d] is empty: give tags or id", i)
		}
		pg := ec2.NewDescribeSubnetsPaginator(p.api.EC2, &ec2.DescribeSubnetsInput{Filters: filters})
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				return nil, wrap("DescribeSubnets", err)
			}
			for _, s := range out.Subnets {
				if s.State != "" && s.State != ec2types.SubnetStateAvailable {
					continue
				}
				found[aws.ToString(s.SubnetId)] = Subnet{
					ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone),
					ZoneID: aws.ToString(s.AvailabilityZoneId), AvailableIPs: aws.ToInt32(s.AvailableIpAddressCount),
				}
			}
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("subnetSelectorTerms %s matched no available subnet", key)
	}
	out := slices.Collect(maps.Values(found))
	sort.Slice(out, func(i, j int) bool {
		if out[i].Zone != out[j].Zone {
			return out[i].Zone < out[j].Zone
		}
		return out[i].ID < out[j].ID
	})
	p.mu.Lock()
	p.subnets[key] = out
	p.mu.Unlock()
	return out, nil
}

// SecurityGroups returns the security groups the terms select (tags, id or
// name; terms ORed), sorted by ID. No match is an error.
func (p *Provider) SecurityGroups(ctx context.Context, terms []karpenter.SecurityGroupSelectorTerm) ([]SecurityGroup, error) {
	key := cacheKey(terms)
	p.mu.Lock()
	if s, ok := p.groups[key]; ok {
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	if len(terms) == 0 {
		return nil, errors.New("securityGroupSelectorTerms is empty")
	}
	found := map[string]SecurityGroup{}
	for i, t := range terms {
		filters := tagFilters(t.Tags)
		if t.ID != "" {
			filters = append(filters, ec2types.Filter{Name: aws.String("group-id"), Values: []string{t.ID}})
		}
		if t.Name != "" {
			filters = append(filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{t.Name}})
		}
		if len(filters) == 0 {
			return nil, fmt.Errorf("securityGroupSelectorTerms[%d] is empty: give tags, id or name", i)
		}
		pg := ec2.NewDescribeSecurityGroupsPaginator(p.api.EC2, &ec2.DescribeSecurityGroupsInput{Filters: filters})
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				return nil, wrap("DescribeSecurityGroups", err)
			}
			for _, g := range out.SecurityGroups {
				found[aws.ToString(g.GroupId)] = SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)}
			}
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("securityGroupSelectorTerms %s matched no security group", key)
	}
	out := slices.Collect(maps.Values(found))
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	p.mu.Lock()
	p.groups[key] = out
	p.mu.Unlock()
	return out, nil
}

// Zones returns the zones that have a selected subnet, sorted.
func Zones(subnets []Subnet) []string {
	set := map[string]bool{}
	for _, s := range subnets {
		set[s.Zone] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// offerings returns, per instance type, the zones that offer it
// (DescribeInstanceTypeOfferings by availability zone, all types, all pages).
func (p *Provider) offerings(ctx context.Context) (map[string]map[string]bool, error) {
	p.mu.Lock()
	if p.allOffered {
		o := p.offered
		p.mu.Unlock()
		return o, nil
	}
	p.mu.Unlock()
	offered, err := p.describeOfferings(ctx, nil)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.offered, p.allOffered = offered, true
	p.mu.Unlock()
	return offered, nil
}

// offeringsFor is offerings for some types only: a launch asks about its
// options, not the whole region (on a simulator the full list is slow).
func (p *Provider) offeringsFor(ctx context.Context, names []string) (map[string]map[string]bool, error) {
	p.mu.Lock()
	var missing []string
	for _, n := range names {
		if _, ok := p.offered[n]; !ok && !p.allOffered {
			missing = append(missing, n)
		}
	}
	p.mu.Unlock()
	for len(missing) > 0 {
		batch := missing[:min(len(missing), 100)]
		missing = missing[len(batch):]
		got, err := p.describeOfferings(ctx, batch)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		if p.offered == nil {
			p.offered = map[string]map[string]bool{}
		}
		for _, n := range batch {
			// Types with no offering are remembered as such.
			p.offered[n] = got[n]
			if p.offered[n] == nil {
				p.offered[n] = map[string]bool{}
			}
		}
		p.mu.Unlock()
	}
	out := make(map[string]map[string]bool, len(names))
	p.mu.Lock()
	for _, n := range names {
		out[n] = p.offered[n]
	}
	p.mu.Unlock()
	return out, nil
}

func (p *Provider) describeOfferings(ctx context.Context, names []string) (map[string]map[string]bool, error) {
	in := &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone, MaxResults: aws.Int32(1000)}
	if len(names) > 0 {
		in.Filters = []ec2types.Filter{{Name: aws.String("instance-type"), Values: names}}
	}
	offered := map[string]map[string]bool{}
	pg := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.api.EC2, in)
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrap("DescribeInstanceTypeOfferings", err)
		}
		for _, o := range out.InstanceTypeOfferings {
			t := string(o.InstanceType)
			if offered[t] == nil {
				offered[t] = map[string]bool{}
			}
			offered[t][aws.ToString(o.Location)] = true
		}
	}
	return offered, nil
}

// InstanceTypes returns every instance type EC2 reports in the region as
// catalog entries without offerings: the catalog's facts when it knows the
// type, else facts derived from DescribeInstanceTypes.
func (p *Provider) InstanceTypes(ctx context.Context) ([]catalog.InstanceType, error) {
	var out []catalog.InstanceType
	pg := ec2.NewDescribeInstanceTypesPaginator(p.api.EC2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrap("DescribeInstanceTypes", err)
		}
		for _, info := range page.InstanceTypes {
			if it, ok := p.catalog.Lookup(string(info.InstanceType)); ok {
				c := *it
				c.Offerings = nil
				out = append(out, c)
				continue
			}
			if it, ok := FromEC2(info); ok {
				out = append(out, it)
			}
		}
	}
	p.remember(out)
	return out, nil
}

// remember caches instance-type facts for launches.
func (p *Provider) remember(types []catalog.InstanceType) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.typeInfo == nil {
		p.typeInfo = map[string]*catalog.InstanceType{}
	}
	for i := range types {
		it := types[i]
		p.typeInfo[it.Name] = &it
	}
}

// typeFacts returns the facts of the named types: the catalog's, else
// DescribeInstanceTypes for the rest. Unknown names are an error.
func (p *Provider) typeFacts(ctx context.Context, names []string) (map[string]*catalog.InstanceType, error) {
	out := map[string]*catalog.InstanceType{}
	var missing []string
	p.mu.Lock()
	for _, n := range names {
		if it, ok := p.typeInfo[n]; ok {
			out[n] = it
		} else if it, ok := p.catalog.Lookup(n); ok {
			out[n] = it
		} else {
			missing = append(missing, n)
		}
	}
	p.mu.Unlock()
	for len(missing) > 0 {
		batch := missing[:min(len(missing), 100)]
		missing = missing[len(batch):]
		in := &ec2.DescribeInstanceTypesInput{}
		for _, n := range batch {
			in.InstanceTypes = append(in.InstanceTypes, ec2types.InstanceType(n))
		}
		page, err := p.api.EC2.DescribeInstanceTypes(ctx, in)
		if err != nil {
			return nil, wrap("DescribeInstanceTypes "+strings.Join(batch, ","), err)
		}
		var got []catalog.InstanceType
		for _, info := range page.InstanceTypes {
			if it, ok := FromEC2(info); ok {
				got = append(got, it)
			}
		}
		p.remember(got)
		for i := range got {
			out[got[i].Name] = &got[i]
		}
	}
	for _, n := range names {
		if out[n] == nil {
			return nil, fmt.Errorf("instance type %s is unknown to EC2 in %s or has no supported architecture", n, p.cfg.Region)
		}
	}
	return out, nil
}

// FromEC2 converts DescribeInstanceTypes facts to a catalog entry (without
// offerings). ok is false for architectures Joiner does not launch.
func FromEC2(info ec2types.InstanceTypeInfo) (catalog.InstanceType, bool) {
	it := catalog.InstanceType{Name: string(info.InstanceType)}
	if info.ProcessorInfo != nil {
		for _, a := range info.ProcessorInfo.SupportedArchitectures {
			switch a {
			case ec2types.ArchitectureTypeX8664:
				it.Arch = catalog.ArchAMD64
			case ec2types.ArchitectureTypeArm64:
				it.Arch = catalog.ArchARM64
			}
			if it.Arch != "" {
				break
			}
		}
	}
	if it.Arch == "" {
		return it, false
	}
	if info.VCpuInfo != nil {
		it.VCPU = int(aws.ToInt32(info.VCpuInfo.DefaultVCpus))
	}
	if info.MemoryInfo != nil {
		it.MemoryMiB = aws.ToInt64(info.MemoryInfo.SizeInMiB)
	}
	if n := info.NetworkInfo; n != nil {
		enis := aws.ToInt32(n.MaximumNetworkInterfaces)
		// Pods use the default network card's interfaces only.
		if idx := aws.ToInt32(n.DefaultNetworkCardIndex); int(idx) < len(n.NetworkCards) {
			if m := aws.ToInt32(n.NetworkCards[idx].MaximumNetworkInterfaces); m > 0 {
				enis = m
			}
		}
		ips := aws.ToInt32(n.Ipv4AddressesPerInterface)
		it.MaxPods = int(enis*(ips-1) + 2)
		if len(n.NetworkCards) > 0 {
			it.NetworkGbps = aws.ToFloat64(n.NetworkCards[0].BaselineBandwidthInGbps)
		}
	}
	if it.MaxPods <= 0 {
		it.MaxPods = 110
	}
	if g := info.GpuInfo; g != nil && len(g.Gpus) > 0 {
		d := g.Gpus[0]
		gpu := &catalog.GPU{Name: strings.ToLower(aws.ToString(d.Name)), Manufacturer: strings.ToLower(aws.ToString(d.Manufacturer))}
		for _, d := range g.Gpus {
			gpu.Count += int(aws.ToInt32(d.Count))
		}
		if d.MemoryInfo != nil {
			gpu.MemoryMiB = int64(aws.ToInt32(d.MemoryInfo.SizeInMiB))
		}
		it.GPU = gpu
	}
	if n := info.NeuronInfo; n != nil && len(n.NeuronDevices) > 0 {
		d := n.NeuronDevices[0]
		acc := &catalog.Accelerator{Name: strings.ToLower(aws.ToString(d.Name)), Manufacturer: "aws", Count: int(aws.ToInt32(d.Count))}
		if d.MemoryInfo != nil {
			acc.MemoryMiB = int64(aws.ToInt32(d.MemoryInfo.SizeInMiB))
		}
		if d.CoreInfo != nil {
			acc.CoresPerDevice = int(aws.ToInt32(d.CoreInfo.Count))
		}
		if acc.Count > 0 {
			it.Accelerator = acc
		}
	}
	return it, it.VCPU > 0 && it.MemoryMiB > 0
}
