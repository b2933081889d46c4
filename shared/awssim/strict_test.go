package awssim

// EC2 refuses these launches; so must the simulator, or the first real launch is
// the first test. Each case runs on the simulator and, where moto_server checks
// the same thing, on moto too; where moto does not, the test names the error EC2
// documents (EC2 API Reference, "Error codes for the Amazon EC2 API").

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

// strictSim is a simulator whose account has a second VPC with a security
// group, m6i.large offered in us-east-1a only, a role with a profile, and an
// image with a 20 GiB root snapshot and a deregistered one.
func strictSim(t *testing.T) (*Sim, clients) {
	t.Helper()
	cat := testCatalog(t)
	for i := range cat.InstanceTypes {
		it := &cat.InstanceTypes[i]
		if it.Name != "m6i.large" {
			continue
		}
		var keep []catalog.Offering
		for _, o := range it.Offerings {
			if o.Zone == "us-east-1a" {
				keep = append(keep, o)
			}
		}
		it.Offerings = keep
	}
	s, _ := startSim(t, func(c *Config) {
		c.Catalog = cat
		c.Seed = &Seed{
			NoPublicParameters: true,
			Subnets: []Subnet{
				{ID: "subnet-0aaaaaaaaaaaaaaa1", Zone: "us-east-1a", VpcID: "vpc-0aaaaaaaaaaaaaaa1", CIDR: "10.42.1.0/24"},
				{ID: "subnet-0bbbbbbbbbbbbbbb1", Zone: "us-east-1b", VpcID: "vpc-0aaaaaaaaaaaaaaa1", CIDR: "10.42.2.0/24"},
			},
			SecurityGroups: []SecurityGroup{
				{ID: "sg-0c0000000000000c1", Name: "nodes", VpcID: "vpc-0aaaaaaaaaaaaaaa1"},
				{ID: "sg-0e0000000000000e1", Name: "elsewhere", VpcID: "vpc-0fffffffffffffff1"},
			},
			Images: []Image{
				{ID: "ami-0000000000000b001", Name: "worker", BlockDevices: []ImageBlockDevice{{DeviceName: "/dev/xvda", VolumeSizeGiB: 20}}},
				{ID: "ami-0000000000000b002", Name: "old-worker"},
			},
			Roles:            []Role{{Name: "nodes"}},
			InstanceProfiles: []InstanceProfile{{Name: "nodes", Roles: []string{"nodes"}}},
		}
	})
	return s, newClients(fastRetries(s.AWSConfig()))
}

func runInput(mod func(*ec2.RunInstancesInput)) *ec2.RunInstancesInput {
	in := &ec2.RunInstancesInput{
		ImageId: aws.String("ami-0000000000000b001"), InstanceType: "m6i.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: aws.String("subnet-0aaaaaaaaaaaaaaa1"), SecurityGroupIds: []string{"sg-0c0000000000000c1"},
		IamInstanceProfile: &ec2types.IamInstanceProfileSpecification{Name: aws.String("nodes")},
	}
	if mod != nil {
		mod(in)
	}
	return in
}

func manyTags(n int) []ec2types.TagSpecification {
	var tags []ec2types.Tag
	for i := range n {
		tags = append(tags, ec2types.Tag{Key: aws.String(fmt.Sprintf("k%d", i)), Value: aws.String("v")})
	}
	return []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}}
}

func TestStrictRunInstances(t *testing.T) {
	ctx := context.Background()
	s, c := strictSim(t)
	if _, err := c.ec2.RunInstances(ctx, runInput(nil)); err != nil {
		t.Fatalf("the valid launch every case changes one thing of: %v", err)
	}
	for _, tc := range []struct {
		name, code, msg string
		mod             func(*ec2.RunInstancesInput)
	}{
		{"unknown instance profile", "InvalidParameterValue", "Value (nope) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name",
			func(in *ec2.RunInstancesInput) { in.IamInstanceProfile.Name = aws.String("nope") }},
		{"unknown instance profile ARN", "InvalidParameterValue", "Invalid IAM Instance Profile ARN",
			func(in *ec2.RunInstancesInput) {
				in.IamInstanceProfile = &ec2types.IamInstanceProfileSpecification{Arn: aws.String("arn:aws:iam::123456789012:instance-profile/nope")}
			}},
		{"type not offered in the subnet's zone", "Unsupported", "is not supported in your requested Availability Zone (us-east-1b). Please retry your request by not specifying an Availability Zone or choosing us-east-1a",
			func(in *ec2.RunInstancesInput) { in.SubnetId = aws.String("subnet-0bbbbbbbbbbbbbbb1") }},
		{"security group of another VPC", "InvalidParameter", "Security group sg-0e0000000000000e1 and subnet subnet-0aaaaaaaaaaaaaaa1 belong to different networks.",
			func(in *ec2.RunInstancesInput) { in.SecurityGroupIds = []string{"sg-0e0000000000000e1"} }},
		{"51 tags", "TagLimitExceeded", "You've reached the limit on the number of tags that you can assign to the specified resource.",
			func(in *ec2.RunInstancesInput) { in.TagSpecifications = manyTags(51) }},
		{"tag key over 128 characters", "InvalidParameterValue", "Tag key exceeds the maximum length of 128 characters",
			func(in *ec2.RunInstancesInput) {
				in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String(strings.Repeat("k", 129)), Value: aws.String("v")}}}}
			}},
		{"tag value over 256 characters", "InvalidParameterValue", "Tag value exceeds the maximum length of 256 characters",
			func(in *ec2.RunInstancesInput) {
				in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String("k"), Value: aws.String(strings.Repeat("v", 257))}}}}
			}},
		{"user data over 16 KB", "InvalidParameterValue", "User data is limited to 16384 bytes",
			func(in *ec2.RunInstancesInput) { in.UserData = aws.String(b64(strings.Repeat("x", 16*1024+1))) }},
		{"a new device without a size", "InvalidBlockDeviceMapping", "/dev/xvdb is not in the block device mapping of image ami-0000000000000b001",
			func(in *ec2.RunInstancesInput) {
				in.BlockDeviceMappings = []ec2types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvdb"), Ebs: &ec2types.EbsBlockDevice{VolumeType: ec2types.VolumeTypeGp3}}}
			}},
		{"a root volume smaller than the image's snapshot", "InvalidBlockDeviceMapping", "Volume of size 8GB is smaller than snapshot",
			func(in *ec2.RunInstancesInput) {
				in.BlockDeviceMappings = []ec2types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), Ebs: &ec2types.EbsBlockDevice{VolumeSize: aws.Int32(8)}}}
			}},
		{"a device name EC2 does not know", "InvalidBlockDeviceMapping", "Invalid device name /dev/nvme0n1",
			func(in *ec2.RunInstancesInput) {
				in.BlockDeviceMappings = []ec2types.BlockDeviceMapping{{DeviceName: aws.String("/dev/nvme0n1"), Ebs: &ec2types.EbsBlockDevice{VolumeSize: aws.Int32(20)}}}
			}},
		{"invalid httpTokens", "InvalidParameterValue", "HttpTokens",
			func(in *ec2.RunInstancesInput) {
				in.MetadataOptions = &ec2types.InstanceMetadataOptionsRequest{HttpTokens: "sometimes"}
			}},
		{"hop limit over 64", "InvalidParameterValue", "HttpPutResponseHopLimit",
			func(in *ec2.RunInstancesInput) {
				in.MetadataOptions = &ec2types.InstanceMetadataOptionsRequest{HttpPutResponseHopLimit: aws.Int32(65)}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ec2.RunInstances(ctx, runInput(tc.mod))
			wantAPIErr(t, err, tc.code, 400)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q lacks %q", err, tc.msg)
			}
		})
	}
	if n := len(s.State().Instances); n != 1 {
		t.Errorf("%d instances, want only the valid launch's", n)
	}
}

// More than 50 tags is one refusal wherever the tags come from: a launch's own
// TagSpecifications, a launch template's tags with the fleet's (reported in the
// fleet's Errors), and CreateTags on a resource that has tags already.
func TestStrictTagLimitOneAnswer(t *testing.T) {
	ctx := context.Background()
	_, c := strictSim(t)
	want := "TagLimitExceeded: You've reached the limit on the number of tags that you can assign to the specified resource."
	check := func(what, got string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	_, err := c.ec2.RunInstances(ctx, runInput(func(in *ec2.RunInstancesInput) { in.TagSpecifications = manyTags(51) }))
	wantAPIErr(t, err, "TagLimitExceeded", 400)
	var ae smithy.APIError
	errors.As(err, &ae) // wantAPIErr made sure it is one
	check("RunInstances", ae.ErrorCode()+": "+ae.ErrorMessage())

	half := func(prefix string) []ec2types.Tag {
		var tags []ec2types.Tag
		for i := range 30 {
			tags = append(tags, ec2types.Tag{Key: aws.String(fmt.Sprintf("%s%d", prefix, i)), Value: aws.String("v")})
		}
		return tags
	}
	var ltTags []ec2types.LaunchTemplateTagSpecificationRequest
	ltTags = append(ltTags, ec2types.LaunchTemplateTagSpecificationRequest{ResourceType: ec2types.ResourceTypeInstance, Tags: half("lt")})
	if _, err := c.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("tagged"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-0000000000000b001"), SecurityGroupIds: []string{"sg-0c0000000000000c1"},
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("nodes")}, TagSpecifications: ltTags}}); err != nil {
		t.Fatal(err)
	}
	out, err := c.ec2.CreateFleet(ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("tagged"), Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m6i.large", SubnetId: aws.String("subnet-0aaaaaaaaaaaaaaa1")}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications:           []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: half("fleet")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 1 || len(out.Instances) != 0 {
		t.Fatalf("fleet: %d errors, %d instance groups; want the one override refused", len(out.Errors), len(out.Instances))
	}
	check("CreateFleet", aws.ToString(out.Errors[0].ErrorCode)+": "+aws.ToString(out.Errors[0].ErrorMessage))

	run, err := c.ec2.RunInstances(ctx, runInput(func(in *ec2.RunInstancesInput) {
		in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: half("run")}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{aws.ToString(run.Instances[0].InstanceId)}, Tags: half("more")})
	wantAPIErr(t, err, "TagLimitExceeded", 400)
	errors.As(err, &ae)
	check("CreateTags", ae.ErrorCode()+": "+ae.ErrorMessage())
}

// CreateFleet (instant) reports a bad launch option in its Errors, per override,
// with EC2's code, and launches from the good ones; a deregistered image in a
// launch template fails its overrides the same way.
func TestStrictCreateFleetErrors(t *testing.T) {
	ctx := context.Background()
	_, c := strictSim(t)
	lt := func(name, image, profile string) {
		t.Helper()
		_, err := c.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image), SecurityGroupIds: []string{"sg-0c0000000000000c1"},
				IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	lt("good", "ami-0000000000000b001", "nodes")
	lt("missing-profile", "ami-0000000000000b001", "nope")
	lt("old-image", "ami-0000000000000b002", "nodes")
	if _, err := c.ec2.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String("ami-0000000000000b002")}); err != nil {
		t.Fatal(err)
	}
	_, err := c.ec2.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String("ami-0000000000000b002")})
	wantAPIErr(t, err, "InvalidAMIID.Unavailable", 400)
	cfg := func(name string) ec2types.FleetLaunchTemplateConfigRequest {
		return ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m6i.large", SubnetId: aws.String("subnet-0aaaaaaaaaaaaaaa1")}},
		}
	}
	out, err := c.ec2.CreateFleet(ctx, &ec2.CreateFleetInput{
		Type:                        ec2types.FleetTypeInstant,
		LaunchTemplateConfigs:       []ec2types.FleetLaunchTemplateConfigRequest{cfg("missing-profile"), cfg("old-image"), cfg("good")},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
	})
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, e := range out.Errors {
		codes[aws.ToString(e.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateId)] = aws.ToString(e.ErrorCode) + ": " + aws.ToString(e.ErrorMessage)
	}
	if len(out.Errors) != 2 || len(out.Instances) != 1 {
		t.Fatalf("errors %v, %d instance groups; want the two bad overrides refused and one launch", codes, len(out.Instances))
	}
	joined := fmt.Sprint(codes)
	for _, want := range []string{"InvalidParameterValue: Value (nope) for parameter iamInstanceProfile.name is invalid", "InvalidAMIID.NotFound: The image id '[ami-0000000000000b002]' does not exist"} {
		if !strings.Contains(joined, want) {
			t.Errorf("fleet errors %s lack %q", joined, want)
		}
	}
}

// IAM's answers for instance profiles, on the simulator and on moto.
func TestContractIAMInstanceProfiles(t *testing.T) {
	for _, bk := range []struct {
		name string
		cfg  func(*testing.T) aws.Config
	}{
		{"sim", func(t *testing.T) aws.Config {
			s, _ := startSim(t, func(c *Config) { c.Seed = &Seed{NoPublicParameters: true} })
			return fastRetries(s.AWSConfig())
		}},
		{"moto", func(t *testing.T) aws.Config { return fastRetries(NewAWSConfig(motoEndpoint(t))) }},
	} {
		t.Run(bk.name, func(t *testing.T) {
			ctx := context.Background()
			c := iam.NewFromConfig(bk.cfg(t))
			name := "contract-profile-" + bk.name
			_, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
			wantAPIErr(t, err, "NoSuchEntity", 404)
			if _, err := c.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name + "-role"), AssumeRolePolicyDocument: aws.String("{}")}); err != nil {
				t.Fatal(err)
			}
			created, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name),
				Tags: []iamtypes.Tag{{Key: aws.String("kubernetes.io/cluster/contract"), Value: aws.String("owned")}}})
			if err != nil {
				t.Fatal(err)
			}
			if arn := aws.ToString(created.InstanceProfile.Arn); !strings.HasSuffix(arn, ":instance-profile/"+name) {
				t.Errorf("arn %q", arn)
			}
			_, err = c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name)})
			wantAPIErr(t, err, "EntityAlreadyExists", 409)
			_, err = c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String("no-such-role")})
			wantAPIErr(t, err, "NoSuchEntity", 404)
			if _, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name + "-role")}); err != nil {
				t.Fatal(err)
			}
			_, err = c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name + "-role")})
			wantAPIErr(t, err, "LimitExceeded", 409)
			got, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			ip := got.InstanceProfile
			if len(ip.Roles) != 1 || aws.ToString(ip.Roles[0].RoleName) != name+"-role" || len(ip.Tags) != 1 {
				t.Errorf("profile roles %+v tags %+v", ip.Roles, ip.Tags)
			}
			_, err = c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)})
			wantAPIErr(t, err, "DeleteConflict", 409)
			if _, err := c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name + "-role")}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil {
				t.Fatal(err)
			}
			_, err = c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)})
			wantAPIErr(t, err, "NoSuchEntity", 404)
		})
	}
}

// moto checks the tag limit and instance profiles on RunInstances as EC2 does
// (its code for a missing profile is its own: NoSuchEntity, where EC2 answers
// InvalidParameterValue).
func TestContractStrictOnMoto(t *testing.T) {
	ctx := context.Background()
	b := motoBackend(t)
	in := func(mod func(*ec2.RunInstancesInput)) *ec2.RunInstancesInput {
		x := &ec2.RunInstancesInput{ImageId: aws.String(b.image), InstanceType: "m6i.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
			SubnetId: aws.String(b.subnets[0])}
		mod(x)
		return x
	}
	_, err := b.c.ec2.RunInstances(ctx, in(func(x *ec2.RunInstancesInput) { x.TagSpecifications = manyTags(51) }))
	wantAPIErr(t, err, "TagLimitExceeded", 400)
	_, err = b.c.ec2.RunInstances(ctx, in(func(x *ec2.RunInstancesInput) {
		x.IamInstanceProfile = &ec2types.IamInstanceProfileSpecification{Name: aws.String("nope")}
	}))
	wantAPIErr(t, err, "NoSuchEntity", 404)
}
