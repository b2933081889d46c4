package awssim

// The contract suite: one set of provider-level scenarios, run through the real
// aws-sdk-go-v2 clients against moto_server (the independent reference) and
// against the simulator. A behaviour moto has and the simulator lacks is a
// simulator bug.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"
)

const contractCluster = "contract"

// backend is one server under contract, with the resources the scenarios use.
type backend struct {
	name    string
	c       clients
	clock   *FakeClock // nil for moto
	sim     *Sim       // nil for moto
	subnets []string   // in us-east-1a and us-east-1b, tagged karpenter.sh/discovery=contract
	sg      string
	image   string // an x86_64 image owned by amazon
	imageNm string
	// strictPaging: the server honours MaxResults. moto 5.2.1 does not (it
	// pages instance types by 10 and answers DescribeInstances in one page),
	// a gap in the reference, not a behaviour to copy.
	strictPaging bool
}

// callLog summarises the simulator's call log for failure messages.
func (b *backend) callLog() string {
	if b.sim == nil {
		return ""
	}
	var sb strings.Builder
	for _, c := range b.sim.Calls() {
		fmt.Fprintf(&sb, "%d %s %s attempt=%d dryrun=%v\n", c.Seq, c.Action, c.Code, c.Attempt, c.DryRun)
	}
	return sb.String()
}

// settle lets simulated time pass so transitional states end (moto has none).
func (b *backend) settle() {
	if b.clock != nil {
		b.clock.Advance(5 * time.Minute)
	}
}

func discoveryTags(rt ec2types.ResourceType, name string) []ec2types.TagSpecification {
	return []ec2types.TagSpecification{{ResourceType: rt, Tags: []ec2types.Tag{
		{Key: aws.String("karpenter.sh/discovery"), Value: aws.String(contractCluster)},
		{Key: aws.String("Name"), Value: aws.String(name)},
	}}}
}

// motoBackend creates in moto what the scenarios need: a VPC, two tagged
// subnets and a tagged security group.
func motoBackend(t *testing.T) *backend {
	ctx := context.Background()
	b := &backend{name: "moto", c: newClients(fastRetries(NewAWSConfig(motoEndpoint(t))))}
	vpc, err := b.c.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.42.0.0/16")})
	if err != nil {
		t.Fatalf("moto CreateVpc: %v", err)
	}
	for i, z := range []string{"us-east-1a", "us-east-1b"} {
		sn, err := b.c.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{
			VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String("10.42." + string(rune('1'+i)) + ".0/24"), AvailabilityZone: aws.String(z),
			TagSpecifications: discoveryTags(ec2types.ResourceTypeSubnet, "contract-"+z),
		})
		if err != nil {
			t.Fatalf("moto CreateSubnet: %v", err)
		}
		b.subnets = append(b.subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	sg, err := b.c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
		GroupName: aws.String("contract-node"), Description: aws.String("contract nodes"), VpcId: vpc.Vpc.VpcId,
		TagSpecifications: discoveryTags(ec2types.ResourceTypeSecurityGroup, "contract-node"),
	})
	if err != nil {
		t.Fatalf("moto CreateSecurityGroup: %v", err)
	}
	b.sg = aws.ToString(sg.GroupId)
	b.pickImage(t)
	return b
}

// simBackend seeds the simulator with the same shape of account.
func simBackend(t *testing.T) *backend {
	s, clk := startSim(t, func(c *Config) {
		c.Seed = &Seed{
			Subnets: []Subnet{
				{ID: "subnet-0aaaaaaaaaaaaaaa1", Zone: "us-east-1a", CIDR: "10.42.1.0/24", Tags: map[string]string{"karpenter.sh/discovery": contractCluster, "Name": "contract-us-east-1a"}},
				{ID: "subnet-0bbbbbbbbbbbbbbb1", Zone: "us-east-1b", CIDR: "10.42.2.0/24", Tags: map[string]string{"karpenter.sh/discovery": contractCluster, "Name": "contract-us-east-1b"}},
				{ID: "subnet-0ccccccccccccccc1", Zone: "us-east-1c", CIDR: "10.42.3.0/24", Tags: map[string]string{"Name": "untagged"}},
			},
			SecurityGroups: []SecurityGroup{
				{ID: "sg-0c0000000000000c1", Name: "contract-node", Description: "contract nodes", Tags: map[string]string{"karpenter.sh/discovery": contractCluster, "Name": "contract-node"}},
				{ID: "sg-0e0000000000000e1", Name: "other"},
			},
		}
	})
	b := &backend{name: "sim", c: newClients(fastRetries(s.AWSConfig())), clock: clk, sim: s,
		subnets: []string{"subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb1"}, sg: "sg-0c0000000000000c1", strictPaging: true}
	b.pickImage(t)
	return b
}

// pickImage finds an amazon-owned x86_64 image the same way on both servers.
func (b *backend) pickImage(t *testing.T) {
	out, err := b.c.ec2.DescribeImages(context.Background(), &ec2.DescribeImagesInput{
		Owners:  []string{"amazon"},
		Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}},
	})
	if err != nil {
		t.Fatalf("%s DescribeImages: %v", b.name, err)
	}
	if len(out.Images) == 0 {
		t.Fatalf("%s has no amazon x86_64 image", b.name)
	}
	b.image, b.imageNm = aws.ToString(out.Images[0].ImageId), aws.ToString(out.Images[0].Name)
}

func TestContract(t *testing.T) {
	for _, bk := range []struct {
		name string
		mk   func(*testing.T) *backend
	}{{"sim", simBackend}, {"moto", motoBackend}} {
		t.Run(bk.name, func(t *testing.T) { runContract(t, bk.mk(t)) })
	}
}

func runContract(t *testing.T, b *backend) {
	ctx := context.Background()
	e := b.c.ec2

	t.Run("DescribeInstanceTypes/g6.xlarge", func(t *testing.T) {
		out, err := e.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"g6.xlarge"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.InstanceTypes) != 1 {
			t.Fatalf("got %d instance types, want 1", len(out.InstanceTypes))
		}
		it := out.InstanceTypes[0]
		if it.InstanceType != "g6.xlarge" || aws.ToInt32(it.VCpuInfo.DefaultVCpus) != 4 || aws.ToInt64(it.MemoryInfo.SizeInMiB) != 16384 {
			t.Errorf("type %s vcpu %d memory %d, want g6.xlarge 4 16384", it.InstanceType, aws.ToInt32(it.VCpuInfo.DefaultVCpus), aws.ToInt64(it.MemoryInfo.SizeInMiB))
		}
		if !slices.Equal(it.ProcessorInfo.SupportedArchitectures, []ec2types.ArchitectureType{"x86_64"}) {
			t.Errorf("architectures %v, want [x86_64]", it.ProcessorInfo.SupportedArchitectures)
		}
		if it.GpuInfo == nil || len(it.GpuInfo.Gpus) != 1 {
			t.Fatalf("gpu info %+v, want one GPU entry", it.GpuInfo)
		}
		g := it.GpuInfo.Gpus[0]
		if aws.ToInt32(g.Count) != 1 || aws.ToString(g.Name) != "L4" || aws.ToString(g.Manufacturer) != "NVIDIA" || aws.ToInt32(g.MemoryInfo.SizeInMiB) != 22888 {
			t.Errorf("gpu %d x %s %s %d MiB, want 1 x L4 NVIDIA 22888 MiB", aws.ToInt32(g.Count), aws.ToString(g.Name), aws.ToString(g.Manufacturer), aws.ToInt32(g.MemoryInfo.SizeInMiB))
		}
		enis, ips := aws.ToInt32(it.NetworkInfo.MaximumNetworkInterfaces), aws.ToInt32(it.NetworkInfo.Ipv4AddressesPerInterface)
		if pods := enis*(ips-1) + 2; pods != 58 {
			t.Errorf("ENIs %d x IPv4 %d gives max pods %d, want 58", enis, ips, pods)
		}
		if !slices.Contains(it.SupportedUsageClasses, ec2types.UsageClassTypeSpot) {
			t.Errorf("usage classes %v lack spot", it.SupportedUsageClasses)
		}
	})

	t.Run("DescribeInstanceTypes/paging", func(t *testing.T) {
		pg := ec2.NewDescribeInstanceTypesPaginator(e, &ec2.DescribeInstanceTypesInput{
			MaxResults: aws.Int32(5),
			Filters:    []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m6i.*"}}},
		})
		var names []string
		pages := 0
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if b.strictPaging && len(out.InstanceTypes) > 5 {
				t.Fatalf("page of %d types exceeds MaxResults 5", len(out.InstanceTypes))
			}
			for _, it := range out.InstanceTypes {
				names = append(names, string(it.InstanceType))
			}
		}
		for _, want := range []string{"m6i.large", "m6i.xlarge", "m6i.2xlarge", "m6i.4xlarge", "m6i.8xlarge", "m6i.12xlarge"} {
			if !slices.Contains(names, want) {
				t.Errorf("paged listing lacks %s (got %v)", want, names)
			}
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "m6i.") {
				t.Errorf("filter instance-type=m6i.* returned %s", n)
			}
		}
		if b.strictPaging && pages < 2 {
			t.Errorf("got %d pages for %d types at MaxResults 5, want several", pages, len(names))
		}
	})

	t.Run("DescribeInstanceTypes/unknown", func(t *testing.T) {
		_, err := e.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"nope.large"}})
		wantAPIErr(t, err, "InvalidInstanceType", 400)
	})

	t.Run("DescribeInstanceTypeOfferings", func(t *testing.T) {
		out, err := e.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{
			LocationType: ec2types.LocationTypeAvailabilityZone,
			Filters:      []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"g6.xlarge"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var zones []string
		for _, o := range out.InstanceTypeOfferings {
			if o.InstanceType != "g6.xlarge" || o.LocationType != ec2types.LocationTypeAvailabilityZone {
				t.Errorf("offering %s in %s (%s) does not match the request", o.InstanceType, aws.ToString(o.Location), o.LocationType)
			}
			zones = append(zones, aws.ToString(o.Location))
		}
		for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
			if !slices.Contains(zones, z) {
				t.Errorf("g6.xlarge not offered in %s (zones %v)", z, zones)
			}
		}
	})

	t.Run("DescribeAvailabilityZones", func(t *testing.T) {
		out, err := e.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, z := range out.AvailabilityZones {
			if aws.ToString(z.ZoneName) == "us-east-1a" {
				found = true
				if z.State != ec2types.AvailabilityZoneStateAvailable || aws.ToString(z.ZoneId) == "" || aws.ToString(z.RegionName) != "us-east-1" {
					t.Errorf("us-east-1a: state %s zone id %q region %q", z.State, aws.ToString(z.ZoneId), aws.ToString(z.RegionName))
				}
			}
		}
		if !found {
			t.Errorf("us-east-1a missing from %d zones", len(out.AvailabilityZones))
		}
	})

	t.Run("DescribeSubnets/tags", func(t *testing.T) {
		out, err := e.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{contractCluster}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, sn := range out.Subnets {
			got = append(got, aws.ToString(sn.SubnetId))
			if aws.ToInt32(sn.AvailableIpAddressCount) <= 0 || aws.ToString(sn.VpcId) == "" {
				t.Errorf("subnet %s: %d free addresses, vpc %q", aws.ToString(sn.SubnetId), aws.ToInt32(sn.AvailableIpAddressCount), aws.ToString(sn.VpcId))
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(b.subnets))
		if !slices.Equal(got, want) {
			t.Errorf("subnets tagged %s = %v, want %v", contractCluster, got, want)
		}
		out, err = e.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag-key"), Values: []string{"karpenter.sh/discovery"}},
			{Name: aws.String("availability-zone"), Values: []string{"us-east-1b"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Subnets) != 1 || aws.ToString(out.Subnets[0].SubnetId) != b.subnets[1] {
			t.Errorf("tag-key + zone filter returned %d subnets, want just %s", len(out.Subnets), b.subnets[1])
		}
		_, err = e.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0123456789abcdeff"}})
		wantAPIErr(t, err, "InvalidSubnetID.NotFound", 400)
	})

	t.Run("DescribeSecurityGroups/tags", func(t *testing.T) {
		out, err := e.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{contractCluster}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.SecurityGroups) != 1 || aws.ToString(out.SecurityGroups[0].GroupId) != b.sg {
			t.Fatalf("tag filter returned %d groups, want just %s", len(out.SecurityGroups), b.sg)
		}
		out, err = e.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
			{Name: aws.String("group-name"), Values: []string{"contract-node"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.SecurityGroups) != 1 || aws.ToString(out.SecurityGroups[0].GroupName) != "contract-node" {
			t.Errorf("group-name filter returned %d groups", len(out.SecurityGroups))
		}
	})

	t.Run("DescribeImages/filters", func(t *testing.T) {
		out, err := e.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{b.imageNm}}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Images) == 0 || aws.ToString(out.Images[0].ImageId) != b.image {
			t.Fatalf("name filter %q did not find %s (%d images)", b.imageNm, b.image, len(out.Images))
		}
		out, err = e.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: []string{b.image}}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Images) != 1 || out.Images[0].Architecture != ec2types.ArchitectureValuesX8664 {
			t.Fatalf("image-id filter returned %d images", len(out.Images))
		}
		if _, err := e.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{b.image}, Tags: []ec2types.Tag{{Key: aws.String("joiner/contract"), Value: aws.String("ami")}}}); err != nil {
			t.Fatal(err)
		}
		out, err = e.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:joiner/contract"), Values: []string{"ami"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Images) != 1 || aws.ToString(out.Images[0].ImageId) != b.image {
			t.Fatalf("tag filter returned %d images, want just %s", len(out.Images), b.image)
		}
		out, err = e.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{b.image}, Owners: []string{"amazon"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Images) != 1 {
			t.Fatalf("ImageIds+Owners amazon returned %d images", len(out.Images))
		}
	})

	t.Run("LaunchTemplate", func(t *testing.T) {
		ud := b64("#!/bin/bash\necho contract\n")
		in := &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String("joiner-contract-lt"),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
				ImageId:  aws.String(b.image),
				UserData: aws.String(ud),
				BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{
					DeviceName: aws.String("/dev/xvda"),
					Ebs:        &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(200), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)},
				}},
				MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
					HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1),
					HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
				},
				SecurityGroupIds: []string{b.sg},
				TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeInstance,
					Tags: []ec2types.Tag{{Key: aws.String("from-template"), Value: aws.String("yes")}}}},
			},
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate,
				Tags: []ec2types.Tag{{Key: aws.String("karpenter.k8s.aws/cluster"), Value: aws.String(contractCluster)}}}},
		}
		created, err := e.CreateLaunchTemplate(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		id := aws.ToString(created.LaunchTemplate.LaunchTemplateId)
		if !strings.HasPrefix(id, "lt-") || aws.ToString(created.LaunchTemplate.LaunchTemplateName) != "joiner-contract-lt" {
			t.Fatalf("created %q named %q", id, aws.ToString(created.LaunchTemplate.LaunchTemplateName))
		}
		// The SDK filled in a client token on the first call; a new request
		// needs a new one (the same token would be an idempotent replay).
		in.ClientToken = nil
		_, err = e.CreateLaunchTemplate(ctx, in)
		wantAPIErr(t, err, "InvalidLaunchTemplateName.AlreadyExistsException", 400)

		desc, err := e.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"joiner-contract-lt"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(desc.LaunchTemplates) != 1 || aws.ToString(desc.LaunchTemplates[0].LaunchTemplateId) != id {
			t.Fatalf("describe by name returned %d templates", len(desc.LaunchTemplates))
		}
		if v := aws.ToInt64(desc.LaunchTemplates[0].LatestVersionNumber); v != 1 {
			t.Errorf("latest version %d, want 1", v)
		}
		desc, err = e.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:karpenter.k8s.aws/cluster"), Values: []string{contractCluster}}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(desc.LaunchTemplates) != 1 || aws.ToString(desc.LaunchTemplates[0].LaunchTemplateId) != id {
			t.Fatalf("describe by tag returned %d templates", len(desc.LaunchTemplates))
		}
		_, err = e.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"no-such-template"}})
		wantAPIErr(t, err, "InvalidLaunchTemplateName.NotFoundException", 400)

		if _, err := e.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("joiner-contract-lt")}); err != nil {
			t.Fatal(err)
		}
		_, err = e.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"joiner-contract-lt"}})
		wantAPIErr(t, err, "InvalidLaunchTemplateName.NotFoundException", 400)
	})

	// A launch template for the fleet scenarios.
	lt, err := e.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("joiner-contract-fleet"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId: aws.String(b.image), UserData: aws.String(b64("#!/bin/bash\n")), SecurityGroupIds: []string{b.sg},
		},
	})
	if err != nil {
		t.Fatalf("fleet launch template: %v", err)
	}
	ltID := aws.ToString(lt.LaunchTemplate.LaunchTemplateId)
	ownerTags := []ec2types.Tag{
		{Key: aws.String("kubernetes.io/cluster/" + contractCluster), Value: aws.String("owned")},
		{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")},
		{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("default-abc12")},
	}
	fleetInput := func(ct ec2types.DefaultTargetCapacityType, n int32) *ec2.CreateFleetInput {
		in := &ec2.CreateFleetInput{
			Type: ec2types.FleetTypeInstant,
			LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
				LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String(ltID), Version: aws.String("$Latest")},
				Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{
					{InstanceType: "m6i.large", SubnetId: aws.String(b.subnets[0])},
					{InstanceType: "m7i.large", SubnetId: aws.String(b.subnets[1])},
				},
			}},
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(n), DefaultTargetCapacityType: ct},
			TagSpecifications:           []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: ownerTags}},
		}
		if ct == ec2types.DefaultTargetCapacityTypeSpot {
			in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
		} else {
			in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
		}
		return in
	}
	describe := func(t *testing.T, ids []string) []ec2types.Instance {
		t.Helper()
		out, err := e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
		if err != nil {
			t.Fatal(err)
		}
		var all []ec2types.Instance
		for _, r := range out.Reservations {
			all = append(all, r.Instances...)
		}
		return all
	}
	tagsOf := func(in ec2types.Instance) map[string]string {
		m := map[string]string{}
		for _, tg := range in.Tags {
			m[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		return m
	}

	var spotID string
	t.Run("CreateFleet/spot", func(t *testing.T) {
		out, err := e.CreateFleet(ctx, fleetInput(ec2types.DefaultTargetCapacityTypeSpot, 1))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(aws.ToString(out.FleetId), "fleet-") {
			t.Errorf("fleet id %q", aws.ToString(out.FleetId))
		}
		if len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 1 {
			t.Fatalf("fleet answered %d instance groups (errors %+v), want one instance", len(out.Instances), out.Errors)
		}
		fi := out.Instances[0]
		if fi.Lifecycle != ec2types.InstanceLifecycleSpot {
			t.Errorf("lifecycle %q, want spot", fi.Lifecycle)
		}
		if fi.InstanceType != "m6i.large" && fi.InstanceType != "m7i.large" {
			t.Errorf("launched %s, not one of the overrides", fi.InstanceType)
		}
		if fi.LaunchTemplateAndOverrides == nil || aws.ToString(fi.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateId) != ltID {
			t.Errorf("launchTemplateAndOverrides %+v does not name %s", fi.LaunchTemplateAndOverrides, ltID)
		}
		spotID = fi.InstanceIds[0]
		got := describe(t, []string{spotID})
		if len(got) != 1 {
			t.Fatalf("DescribeInstances found %d instances for %s", len(got), spotID)
		}
		in := got[0]
		tags := tagsOf(in)
		for _, tg := range ownerTags {
			if tags[aws.ToString(tg.Key)] != aws.ToString(tg.Value) {
				t.Errorf("tag %s = %q, want %q", aws.ToString(tg.Key), tags[aws.ToString(tg.Key)], aws.ToString(tg.Value))
			}
		}
		if in.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot {
			t.Errorf("instance lifecycle %q, want spot", in.InstanceLifecycle)
		}
		if !slices.Contains(b.subnets, aws.ToString(in.SubnetId)) {
			t.Errorf("instance in subnet %q, not one of %v", aws.ToString(in.SubnetId), b.subnets)
		}
		if aws.ToString(in.ImageId) != b.image {
			t.Errorf("image %q, want %s", aws.ToString(in.ImageId), b.image)
		}
		if s := in.State.Name; s != ec2types.InstanceStateNamePending && s != ec2types.InstanceStateNameRunning {
			t.Errorf("state %s right after launch", s)
		}
		if in.LaunchTime == nil || in.Placement == nil || aws.ToString(in.Placement.AvailabilityZone) == "" {
			t.Errorf("launch time %v placement %+v", in.LaunchTime, in.Placement)
		}
	})

	t.Run("CreateFleet/on-demand", func(t *testing.T) {
		out, err := e.CreateFleet(ctx, fleetInput(ec2types.DefaultTargetCapacityTypeOnDemand, 2))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, fi := range out.Instances {
			if fi.Lifecycle != ec2types.InstanceLifecycleOnDemand {
				t.Errorf("lifecycle %q, want on-demand", fi.Lifecycle)
			}
			ids = append(ids, fi.InstanceIds...)
		}
		if len(ids) != 2 {
			t.Fatalf("on-demand fleet launched %d instances (errors %+v), want 2", len(ids), out.Errors)
		}
		for _, in := range describe(t, ids) {
			if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
				t.Errorf("%s is spot", aws.ToString(in.InstanceId))
			}
		}
	})

	var pagingIDs []string
	t.Run("DescribeInstances/tags-and-paging", func(t *testing.T) {
		run, err := e.RunInstances(ctx, &ec2.RunInstancesInput{
			ImageId: aws.String(b.image), InstanceType: "m6i.large", MinCount: aws.Int32(7), MaxCount: aws.Int32(7),
			SubnetId: aws.String(b.subnets[0]), SecurityGroupIds: []string{b.sg},
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
				Tags: []ec2types.Tag{{Key: aws.String("joiner-test"), Value: aws.String("paging")}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(run.Instances) != 7 {
			t.Fatalf("RunInstances launched %d, want 7", len(run.Instances))
		}
		b.settle()
		pg := ec2.NewDescribeInstancesPaginator(e, &ec2.DescribeInstancesInput{
			MaxResults: aws.Int32(5),
			Filters: []ec2types.Filter{
				{Name: aws.String("tag:joiner-test"), Values: []string{"paging"}},
				{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
			},
		})
		pages := 0
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, r := range out.Reservations {
				for _, in := range r.Instances {
					pagingIDs = append(pagingIDs, aws.ToString(in.InstanceId))
				}
			}
		}
		if len(pagingIDs) != 7 || b.strictPaging && pages < 2 {
			t.Fatalf("paged tag filter found %d instances in %d pages, want 7 in at least 2: %v\n%s", len(pagingIDs), pages, pagingIDs, b.callLog())
		}
		out, err := e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"karpenter.sh/nodeclaim"}}}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				n++
				if _, ok := tagsOf(in)["karpenter.sh/nodeclaim"]; !ok {
					t.Errorf("tag-key filter returned %s without the key", aws.ToString(in.InstanceId))
				}
			}
		}
		if n != 3 {
			t.Errorf("tag-key karpenter.sh/nodeclaim matched %d instances, want the 3 fleet instances", n)
		}
		_, err = e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
		wantAPIErr(t, err, "InvalidInstanceID.NotFound", 400)
	})

	t.Run("CreateTags", func(t *testing.T) {
		if len(pagingIDs) == 0 {
			t.Skip("needs the instances of DescribeInstances/tags-and-paging")
		}
		_, err := e.CreateTags(ctx, &ec2.CreateTagsInput{Resources: pagingIDs[:2], Tags: []ec2types.Tag{
			{Key: aws.String("karpenter.sh/registered"), Value: aws.String("true")}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range describe(t, pagingIDs[:2]) {
			if tagsOf(in)["karpenter.sh/registered"] != "true" || tagsOf(in)["joiner-test"] != "paging" {
				t.Errorf("%s tags after CreateTags: %v", aws.ToString(in.InstanceId), tagsOf(in))
			}
		}
	})

	t.Run("TerminateInstances", func(t *testing.T) {
		if len(pagingIDs) == 0 {
			t.Skip("needs the instances of DescribeInstances/tags-and-paging")
		}
		out, err := e.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: pagingIDs[:3]})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.TerminatingInstances) != 3 {
			t.Fatalf("%d state changes, want 3", len(out.TerminatingInstances))
		}
		for _, ch := range out.TerminatingInstances {
			if c := ch.CurrentState.Name; c != ec2types.InstanceStateNameShuttingDown && c != ec2types.InstanceStateNameTerminated {
				t.Errorf("%s current state %s", aws.ToString(ch.InstanceId), c)
			}
			if p := ch.PreviousState.Name; p != ec2types.InstanceStateNameRunning && p != ec2types.InstanceStateNamePending {
				t.Errorf("%s previous state %s", aws.ToString(ch.InstanceId), p)
			}
		}
		b.settle()
		for _, in := range describe(t, pagingIDs[:3]) {
			if in.State.Name != ec2types.InstanceStateNameTerminated {
				t.Errorf("%s is %s after termination settled", aws.ToString(in.InstanceId), in.State.Name)
			}
		}
		_, err = e.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
		wantAPIErr(t, err, "InvalidInstanceID.NotFound", 400)
	})

	t.Run("DryRun", func(t *testing.T) {
		in := fleetInput(ec2types.DefaultTargetCapacityTypeSpot, 1)
		in.DryRun = aws.Bool(true)
		_, err := e.CreateFleet(ctx, in)
		wantAPIErr(t, err, "DryRunOperation", 412)
		_, err = e.RunInstances(ctx, &ec2.RunInstancesInput{DryRun: aws.Bool(true), ImageId: aws.String(b.image), InstanceType: "m6i.large",
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(b.subnets[0])})
		wantAPIErr(t, err, "DryRunOperation", 412)
		if spotID != "" {
			_, err = e.TerminateInstances(ctx, &ec2.TerminateInstancesInput{DryRun: aws.Bool(true), InstanceIds: []string{spotID}})
			wantAPIErr(t, err, "DryRunOperation", 412)
			if got := describe(t, []string{spotID}); len(got) != 1 || got[0].State.Name == ec2types.InstanceStateNameShuttingDown || got[0].State.Name == ec2types.InstanceStateNameTerminated {
				t.Errorf("a dry-run termination changed %s", spotID)
			}
		}
	})

	t.Run("ErrorShapes", func(t *testing.T) {
		_, err := e.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-0123456789abcdef0"}})
		wantAPIErr(t, err, "InvalidGroup.NotFound", 400)
		_, err = e.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{"lt-0123456789abcdef0"}})
		if b.sim != nil { // moto 5.2.1 answers an empty list for an unknown template ID; EC2 refuses it
			wantAPIErr(t, err, "InvalidLaunchTemplateId.NotFound", 400)
		}
		_, err = e.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-0123456789abcdef0"}, Tags: []ec2types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
		if b.sim != nil { // moto 5.2.1 tags IDs that do not exist; EC2 refuses them
			wantAPIErr(t, err, "InvalidInstanceID.NotFound", 400)
		}
		_, err = e.CreateFleet(ctx, &ec2.CreateFleetInput{
			Type: ec2types.FleetTypeInstant,
			LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
				LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("no-such-template"), Version: aws.String("$Latest")},
				Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m6i.large", SubnetId: aws.String(b.subnets[0])}},
			}},
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeSpot},
		})
		wantAPIErr(t, err, "InvalidLaunchTemplateName.NotFoundException", 400)
		gp, err := b.c.ssm.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{"/joiner/contract/none-1", "/joiner/contract/none-2"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(gp.Parameters) != 0 || len(gp.InvalidParameters) != 2 {
			t.Errorf("GetParameters of two missing names: %d found, invalid %v", len(gp.Parameters), gp.InvalidParameters)
		}
	})

	t.Run("DescribeInstances/terminated-filter", func(t *testing.T) {
		if len(pagingIDs) < 3 {
			t.Skip("needs the terminated instances of TerminateInstances")
		}
		out, err := e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("instance-state-name"), Values: []string{"terminated"}},
			{Name: aws.String("tag:joiner-test"), Values: []string{"paging"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				got = append(got, aws.ToString(in.InstanceId))
			}
		}
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(pagingIDs[:3])); !slices.Equal(got, want) {
			t.Errorf("terminated filter: %v, want %v", got, want)
		}
	})

	t.Run("SSM/GetParameter", func(t *testing.T) {
		c := b.c.ssm
		name := "/joiner/contract/worker-ami"
		if _, err := c.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(b.image), Type: ssmtypes.ParameterTypeString}); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		p := got.Parameter
		if aws.ToString(p.Value) != b.image || p.Version != 1 || p.Type != ssmtypes.ParameterTypeString || !strings.HasSuffix(aws.ToString(p.ARN), "parameter"+name) {
			t.Errorf("parameter %s = %q v%d %s arn %q", name, aws.ToString(p.Value), p.Version, p.Type, aws.ToString(p.ARN))
		}
		_, err = c.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String("ami-00000000"), Type: ssmtypes.ParameterTypeString})
		wantAPIErr(t, err, "ParameterAlreadyExists", 400)
		put, err := c.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String("ami-00000001"), Overwrite: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if put.Version != 2 {
			t.Errorf("overwrite gave version %d, want 2", put.Version)
		}
		_, err = c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/joiner/contract/missing")})
		wantAPIErr(t, err, "ParameterNotFound", 400)
		_, err = c.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/x/image_id"), Value: aws.String("ami-00000000"), Type: ssmtypes.ParameterTypeString})
		wantAPIErr(t, err, "AccessDeniedException", 400)

		secret := "abcdef.0123456789abcdef"
		if _, err := c.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/joiner/contract/join-token"), Value: aws.String(secret), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
			t.Fatal(err)
		}
		dec, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/joiner/contract/join-token"), WithDecryption: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(dec.Parameter.Value) != secret || dec.Parameter.Type != ssmtypes.ParameterTypeSecureString {
			t.Errorf("decrypted secure string = %q (%s)", aws.ToString(dec.Parameter.Value), dec.Parameter.Type)
		}
		enc, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/joiner/contract/join-token")})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(enc.Parameter.Value) == secret {
			t.Errorf("a SecureString read without WithDecryption returned the plaintext")
		}
	})

	t.Run("SecretsManager/GetSecretValue", func(t *testing.T) {
		c := b.c.sm
		token := "abcdef.0123456789abcdef"
		created, err := c.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("joiner/contract/kubeadm-token"), SecretString: aws.String(token)})
		if err != nil {
			t.Fatal(err)
		}
		arn := aws.ToString(created.ARN)
		if !strings.HasPrefix(arn, "arn:aws:secretsmanager:us-east-1:") || !strings.Contains(arn, ":secret:joiner/contract/kubeadm-token-") {
			t.Errorf("secret ARN %q", arn)
		}
		for _, id := range []string{"joiner/contract/kubeadm-token", arn} {
			got, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
			if err != nil {
				t.Fatalf("GetSecretValue(%s): %v", id, err)
			}
			if aws.ToString(got.SecretString) != token || aws.ToString(got.ARN) != arn || !slices.Contains(got.VersionStages, "AWSCURRENT") {
				t.Errorf("GetSecretValue(%s): %q arn %q stages %v", id, aws.ToString(got.SecretString), aws.ToString(got.ARN), got.VersionStages)
			}
		}
		_, err = c.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("joiner/contract/kubeadm-token"), SecretString: aws.String("x")})
		wantAPIErr(t, err, "ResourceExistsException", 400)
		_, err = c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("joiner/contract/missing")})
		status := 400 // as AWS documents it
		if b.sim == nil {
			status = 0 // moto 5.2.1 answers 404
		}
		wantAPIErr(t, err, "ResourceNotFoundException", status)
	})

	t.Run("EKS/DescribeCluster", func(t *testing.T) {
		c := b.c.eks
		_, err := c.CreateCluster(ctx, &eks.CreateClusterInput{
			Name: aws.String("contract-eks"), Version: aws.String("1.36"), RoleArn: aws.String("arn:aws:iam::123456789012:role/contract"),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: b.subnets, SecurityGroupIds: []string{b.sg}},
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("contract-eks")})
		if err != nil {
			t.Fatal(err)
		}
		cl := out.Cluster
		if aws.ToString(cl.Name) != "contract-eks" || cl.Status != ekstypes.ClusterStatusActive || aws.ToString(cl.Version) != "1.36" {
			t.Errorf("cluster %q status %s version %q", aws.ToString(cl.Name), cl.Status, aws.ToString(cl.Version))
		}
		if !strings.HasPrefix(aws.ToString(cl.Endpoint), "https://") || cl.CertificateAuthority == nil || aws.ToString(cl.CertificateAuthority.Data) == "" {
			t.Errorf("endpoint %q, certificate authority %+v", aws.ToString(cl.Endpoint), cl.CertificateAuthority)
		}
		if !strings.Contains(aws.ToString(cl.Arn), ":cluster/contract-eks") || cl.CreatedAt == nil {
			t.Errorf("arn %q created %v", aws.ToString(cl.Arn), cl.CreatedAt)
		}
		if cl.ResourcesVpcConfig == nil || !slices.Equal(slices.Sorted(slices.Values(cl.ResourcesVpcConfig.SubnetIds)), slices.Sorted(slices.Values(b.subnets))) {
			t.Errorf("vpc config %+v", cl.ResourcesVpcConfig)
		}
		_, err = c.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("no-such-cluster")})
		code, status := apiErr(t, err)
		var nf *ekstypes.ResourceNotFoundException
		if code != "ResourceNotFoundException" || status != 404 || !errors.As(err, &nf) {
			t.Errorf("missing cluster: %s HTTP %d (%T), want ResourceNotFoundException HTTP 404", code, status, err)
		}
	})
}

var _ smithy.APIError = (*smithy.GenericAPIError)(nil)
