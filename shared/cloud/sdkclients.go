package cloud

// The SDK's clients are wrapped in types with only the methods the provider
// calls. Some package in the binary reflects on methods, so the linker keeps
// every exported method of any type stored in an interface: storing
// *ec2.Client or *iam.Client in EC2API/IAMAPI would link all of their several
// hundred operations (with serializers) into each Lambda binary, which must
// stay under 20 MB (make size). The wrappers link only what is called.

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// ec2Client is EC2API over *ec2.Client.
type ec2Client struct{ c *ec2.Client }

// iamClient is IAMAPI over *iam.Client.
type iamClient struct{ c *iam.Client }

// DescribeInstanceTypes calls EC2's DescribeInstanceTypes.
func (w ec2Client) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return w.c.DescribeInstanceTypes(ctx, in, opts...)
}

// DescribeInstanceTypeOfferings calls EC2's DescribeInstanceTypeOfferings.
func (w ec2Client) DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	return w.c.DescribeInstanceTypeOfferings(ctx, in, opts...)
}

// DescribeSubnets calls EC2's DescribeSubnets.
func (w ec2Client) DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	return w.c.DescribeSubnets(ctx, in, opts...)
}

// DescribeSecurityGroups calls EC2's DescribeSecurityGroups.
func (w ec2Client) DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	return w.c.DescribeSecurityGroups(ctx, in, opts...)
}

// DescribeImages calls EC2's DescribeImages.
func (w ec2Client) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, opts ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	return w.c.DescribeImages(ctx, in, opts...)
}

// DescribeSpotPriceHistory calls EC2's DescribeSpotPriceHistory.
func (w ec2Client) DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, opts ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	return w.c.DescribeSpotPriceHistory(ctx, in, opts...)
}

// DescribeLaunchTemplates calls EC2's DescribeLaunchTemplates.
func (w ec2Client) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, opts ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	return w.c.DescribeLaunchTemplates(ctx, in, opts...)
}

// CreateLaunchTemplate calls EC2's CreateLaunchTemplate.
func (w ec2Client) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	return w.c.CreateLaunchTemplate(ctx, in, opts...)
}

// DeleteLaunchTemplate calls EC2's DeleteLaunchTemplate.
func (w ec2Client) DeleteLaunchTemplate(ctx context.Context, in *ec2.DeleteLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	return w.c.DeleteLaunchTemplate(ctx, in, opts...)
}

// CreateFleet calls EC2's CreateFleet.
func (w ec2Client) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return w.c.CreateFleet(ctx, in, opts...)
}

// DescribeInstances calls EC2's DescribeInstances.
func (w ec2Client) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return w.c.DescribeInstances(ctx, in, opts...)
}

// CreateTags calls EC2's CreateTags.
func (w ec2Client) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, opts ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	return w.c.CreateTags(ctx, in, opts...)
}

// TerminateInstances calls EC2's TerminateInstances.
func (w ec2Client) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return w.c.TerminateInstances(ctx, in, opts...)
}

// DescribeCapacityReservations calls EC2's DescribeCapacityReservations.
func (w ec2Client) DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, opts ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error) {
	return w.c.DescribeCapacityReservations(ctx, in, opts...)
}

// GetInstanceProfile calls IAM's GetInstanceProfile.
func (w iamClient) GetInstanceProfile(ctx context.Context, in *iam.GetInstanceProfileInput, opts ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error) {
	return w.c.GetInstanceProfile(ctx, in, opts...)
}

// CreateInstanceProfile calls IAM's CreateInstanceProfile.
func (w iamClient) CreateInstanceProfile(ctx context.Context, in *iam.CreateInstanceProfileInput, opts ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error) {
	return w.c.CreateInstanceProfile(ctx, in, opts...)
}

// AddRoleToInstanceProfile calls IAM's AddRoleToInstanceProfile.
func (w iamClient) AddRoleToInstanceProfile(ctx context.Context, in *iam.AddRoleToInstanceProfileInput, opts ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error) {
	return w.c.AddRoleToInstanceProfile(ctx, in, opts...)
}

// RemoveRoleFromInstanceProfile calls IAM's RemoveRoleFromInstanceProfile.
func (w iamClient) RemoveRoleFromInstanceProfile(ctx context.Context, in *iam.RemoveRoleFromInstanceProfileInput, opts ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error) {
	return w.c.RemoveRoleFromInstanceProfile(ctx, in, opts...)
}

// DeleteInstanceProfile calls IAM's DeleteInstanceProfile.
func (w iamClient) DeleteInstanceProfile(ctx context.Context, in *iam.DeleteInstanceProfileInput, opts ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error) {
	return w.c.DeleteInstanceProfile(ctx, in, opts...)
}
