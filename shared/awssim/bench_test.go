package awssim

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

// BenchmarkCreateFleet60Overrides measures one instant CreateFleet with 60
// overrides (20 types x 3 zones, Joiner's upper bound) through the real SDK,
// against the whole embedded catalog.
func BenchmarkCreateFleet60Overrides(b *testing.B) {
	s, err := Start(context.Background(), Config{Catalog: catalog.Embedded(), Clock: NewFakeClock(testEpoch)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := ec2.NewFromConfig(s.AWSConfig())
	ctx := context.Background()
	lt, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("bench"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-0c0ffee00000000a1"), UserData: aws.String(b64("#!/bin/bash\n"))},
	})
	if err != nil {
		b.Fatal(err)
	}
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	for _, it := range catalog.Embedded().InstanceTypes {
		if it.Arch != "amd64" || len(overrides) == 60 {
			continue
		}
		for _, sn := range []string{"subnet-0a0000000000000a1", "subnet-0b0000000000000b1", "subnet-0c0000000000000c1"} {
			overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(it.Name), SubnetId: aws.String(sn)})
		}
	}
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeSpot},
		SpotOptions:                 &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
	}
	b.ResetTimer()
	for b.Loop() {
		in.ClientToken = nil // a new request each time, not an idempotent replay
		out, err := c.CreateFleet(ctx, in)
		if err != nil || len(out.Instances) != 1 {
			b.Fatalf("CreateFleet: %v (%d groups)", err, len(out.Instances))
		}
	}
}
