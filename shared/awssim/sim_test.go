package awssim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

const (
	subnetA = "subnet-0a0000000000000a1"
	subnetB = "subnet-0b0000000000000b1"
	subnetC = "subnet-0c0000000000000c1"
)

// fixture is a simulator with the default seed, a launch template for x86_64
// and one for arm64, and clients with fast retries.
type fixture struct {
	s     *Sim
	clk   *FakeClock
	c     clients
	ltX86 string
	ltArm string
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	t.Helper()
	s, clk := startSim(t, mod)
	f := &fixture{s: s, clk: clk, c: newClients(fastRetries(s.AWSConfig()))}
	ctx := context.Background()
	for _, v := range []struct {
		name, param string
		dst         *string
	}{
		{"x86", "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id", &f.ltX86},
		{"arm", "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/standard/recommended/image_id", &f.ltArm},
	} {
		p, err := f.c.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(v.param)})
		if err != nil {
			t.Fatalf("public AMI parameter %s: %v", v.param, err)
		}
		out, err := f.c.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String("fixture-" + v.name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
				ImageId: p.Parameter.Value, UserData: aws.String(b64("#!/bin/bash\n")), SecurityGroupIds: []string{"sg-0d0000000000000d1"},
			},
		})
		if err != nil {
			t.Fatalf("fixture launch template: %v", err)
		}
		*v.dst = aws.ToString(out.LaunchTemplate.LaunchTemplateId)
	}
	s.ResetCalls()
	return f
}

type ov struct {
	typ, subnet string
	prio        float64
}

func (f *fixture) fleet(lt string, ct ec2types.DefaultTargetCapacityType, strategy string, n int32, ovs ...ov) *ec2.CreateFleetInput {
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	for _, o := range ovs {
		r := ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(o.typ), SubnetId: aws.String(o.subnet)}
		if o.prio > 0 {
			r.Priority = aws.Float64(o.prio)
		}
		overrides = append(overrides, r)
	}
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String(lt), Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(n), DefaultTargetCapacityType: ct},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String("kubernetes.io/cluster/joiner-sim"), Value: aws.String("owned")}}}},
	}
	if ct == ec2types.DefaultTargetCapacityTypeSpot {
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategy(strategy)}
	} else {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategy(strategy)}
	}
	return in
}

// launched flattens a fleet answer to "type@subnet-zone" per instance, looked up in the state.
func (f *fixture) launched(t *testing.T, out *ec2.CreateFleetOutput) []Instance {
	t.Helper()
	var got []Instance
	for _, fi := range out.Instances {
		for _, id := range fi.InstanceIds {
			in, ok := f.s.Instance(id)
			if !ok {
				t.Fatalf("fleet answered %s but the state has no such instance", id)
			}
			if in.InstanceType != string(fi.InstanceType) || in.CapacityType != string(fi.Lifecycle) {
				t.Errorf("%s: answer says %s/%s, state says %s/%s", id, fi.InstanceType, fi.Lifecycle, in.InstanceType, in.CapacityType)
			}
			got = append(got, in)
		}
	}
	return got
}

func errorPools(out *ec2.CreateFleetOutput) []string {
	var got []string
	for _, e := range out.Errors {
		o := e.LaunchTemplateAndOverrides.Overrides
		got = append(got, string(o.InstanceType)+"@"+aws.ToString(o.SubnetId)+"/"+string(e.Lifecycle)+"/"+aws.ToString(e.ErrorCode))
	}
	return got
}

func TestFleetPriceCapacityOptimizedTakesCheapestSpotPool(t *testing.T) {
	f := newFixture(t, nil)
	// Spot prices in the catalog: m6i.large a .027114 b .034101; m7i.large a .041276 b .036875.
	out, err := f.c.ec2.CreateFleet(context.Background(), f.fleet(f.ltX86, "spot", "price-capacity-optimized", 1,
		ov{"m7i.large", subnetA, 0}, ov{"m7i.large", subnetB, 0}, ov{"m6i.large", subnetB, 0}, ov{"m6i.large", subnetA, 0}))
	if err != nil {
		t.Fatal(err)
	}
	got := f.launched(t, out)
	if len(got) != 1 || got[0].InstanceType != "m6i.large" || got[0].Zone != "us-east-1a" || got[0].SubnetID != subnetA {
		t.Fatalf("launched %+v, want one m6i.large in us-east-1a", got)
	}
	if math.Abs(got[0].PricePerHour-0.027114) > 1e-9 {
		t.Errorf("price %v, want the catalog spot price 0.027114", got[0].PricePerHour)
	}
	if len(out.Errors) != 0 {
		t.Errorf("unexpected errors %v", errorPools(out))
	}
	if got[0].Tags["aws:ec2:fleet-id"] != aws.ToString(out.FleetId) || got[0].Tags["aws:ec2launchtemplate:id"] != f.ltX86 {
		t.Errorf("EC2-added tags missing: %v", got[0].Tags)
	}
}

func TestFleetOnDemandLowestPriceAndPrioritized(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	// On-demand: m6i.large .096 < m7i.large .1008.
	out, err := f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "on-demand", "lowest-price", 2, ov{"m7i.large", subnetA, 0}, ov{"m6i.large", subnetB, 0}))
	if err != nil {
		t.Fatal(err)
	}
	got := f.launched(t, out)
	if len(got) != 2 || got[0].InstanceType != "m6i.large" || got[1].InstanceType != "m6i.large" || got[0].CapacityType != CapacityOnDemand {
		t.Fatalf("lowest-price launched %+v, want 2 on-demand m6i.large", got)
	}
	out, err = f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "on-demand", "prioritized", 1, ov{"m6i.large", subnetA, 2}, ov{"m7i.large", subnetB, 1}))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.launched(t, out); len(got) != 1 || got[0].InstanceType != "m7i.large" {
		t.Fatalf("prioritized launched %+v, want the priority-1 m7i.large", got)
	}
}

func TestFleetICEFallsBackWithinTheCallAndReportsErrors(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.s.SetICE(Offering{"m6i.large", "us-east-1a", CapacitySpot}, true)
	out, err := f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "spot", "price-capacity-optimized", 1, ov{"m6i.large", subnetA, 0}, ov{"m6i.large", subnetB, 0}))
	if err != nil {
		t.Fatal(err)
	}
	got := f.launched(t, out)
	if len(got) != 1 || got[0].Zone != "us-east-1b" {
		t.Fatalf("launched %+v, want the next-cheapest pool m6i.large in us-east-1b", got)
	}
	if want := []string{"m6i.large@" + subnetA + "/spot/InsufficientInstanceCapacity"}; !slices.Equal(errorPools(out), want) {
		t.Errorf("errors %v, want %v", errorPools(out), want)
	}

	// Every pool out: nothing launches, one error per pool, and the call still succeeds (HTTP 200).
	f.s.SetICE(Offering{"m6i.large", "us-east-1b", CapacitySpot}, true)
	out, err = f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "spot", "price-capacity-optimized", 1, ov{"m6i.large", subnetA, 0}, ov{"m6i.large", subnetB, 0}))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 0 || len(out.Errors) != 2 {
		t.Fatalf("all pools out: %d instance groups, errors %v", len(out.Instances), errorPools(out))
	}
	// Lifting the mark restores the pool; on-demand in the same zone was never affected.
	f.s.SetICE(Offering{"m6i.large", "us-east-1a", CapacitySpot}, false)
	out, err = f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "spot", "lowest-price", 1, ov{"m6i.large", subnetA, 0}))
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("after clearing ICE: err %v, %d groups", err, len(out.Instances))
	}
	if n := f.s.CountCalls("CreateFleet", CodeOK); n != 3 {
		t.Errorf("call log holds %d successful CreateFleet calls, want 3", n)
	}
}

func TestFleetSpotAndOnDemandSplitInOneCall(t *testing.T) {
	f := newFixture(t, nil)
	in := f.fleet(f.ltX86, "spot", "price-capacity-optimized", 3, ov{"m6i.large", subnetA, 0})
	in.TargetCapacitySpecification.OnDemandTargetCapacity = aws.Int32(1)
	in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	out, err := f.c.ec2.CreateFleet(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, in := range f.launched(t, out) {
		count[in.CapacityType]++
	}
	if count[CapacitySpot] != 2 || count[CapacityOnDemand] != 1 {
		t.Fatalf("launched %v, want 2 spot + 1 on-demand", count)
	}
}

func TestCapacityLimitsAndPartialFulfilment(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	pool := Offering{"g6.xlarge", "us-east-1a", CapacitySpot}
	f.s.SetCapacity(pool, 2)
	out, err := f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "spot", "lowest-price", 3, ov{"g6.xlarge", subnetA, 0}))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.launched(t, out); len(got) != 2 {
		t.Fatalf("capacity 2, target 3: launched %d", len(got))
	}
	if errs := errorPools(out); len(errs) != 1 || !strings.HasSuffix(errs[0], "InsufficientInstanceCapacity") {
		t.Errorf("errors %v, want one InsufficientInstanceCapacity", errs)
	}
	snap := f.s.State()
	if i := slices.IndexFunc(snap.Capacity, func(c Capacity) bool { return c.Offering == pool }); i < 0 || snap.Capacity[i].Count != 0 {
		t.Errorf("capacity after launch: %+v", snap.Capacity)
	}

	// Partial fulfilment fault: the next fleet launches 1 of 4, the rest is reported.
	if err := f.s.AddFault(Fault{Kind: FaultPartialFleet, Action: "CreateFleet", Count: 1, Launch: 1}); err != nil {
		t.Fatal(err)
	}
	out, err = f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "on-demand", "lowest-price", 4, ov{"m6i.large", subnetA, 0}, ov{"m6i.large", subnetB, 0}))
	if err != nil {
		t.Fatal(err)
	}
	got := f.launched(t, out)
	if len(got) != 1 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" {
		t.Fatalf("partial fault: launched %d, errors %v", len(got), errorPools(out))
	}
	for k, v := range map[string]string{"kubernetes.io/cluster/joiner-sim": "owned", "aws:ec2:fleet-id": aws.ToString(out.FleetId)} {
		if got[0].Tags[k] != v {
			t.Errorf("partially launched instance lacks tag %s=%s: %v", k, v, got[0].Tags)
		}
	}
	// The fault was for one call only.
	out, err = f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "on-demand", "lowest-price", 4, ov{"m6i.large", subnetA, 0}))
	if err != nil || len(f.launched(t, out)) != 4 {
		t.Fatalf("after the one-shot fault: err %v, errors %v", err, errorPools(out))
	}
}

func TestCatalogUnavailableOfferingIsICE(t *testing.T) {
	it := catalog.InstanceType{Name: "m6i.large", Arch: "amd64", VCPU: 2, MemoryMiB: 8192, MaxPods: 29, Offerings: []catalog.Offering{
		{Zone: "us-east-1a", CapacityType: "spot", PricePerHour: 0.02, Available: false},
		{Zone: "us-east-1a", CapacityType: "on-demand", PricePerHour: 0.096, Available: true},
	}}
	cat, err := catalog.New("us-east-1", []catalog.InstanceType{it})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) { c.Catalog = cat })
	out, err := f.c.ec2.CreateFleet(context.Background(), f.fleet(f.ltX86, "spot", "lowest-price", 1, ov{"m6i.large", subnetA, 0}))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" {
		t.Fatalf("unavailable offering: groups %d errors %v", len(out.Instances), errorPools(out))
	}
	// A zone the type is not offered in is "Unsupported", not ICE.
	out, err = f.c.ec2.CreateFleet(context.Background(), f.fleet(f.ltX86, "on-demand", "lowest-price", 1, ov{"m6i.large", subnetB, 0}))
	if err != nil {
		t.Fatal(err)
	}
	if errs := errorPools(out); len(out.Instances) != 0 || len(errs) != 1 || !strings.HasSuffix(errs[0], "/Unsupported") {
		t.Fatalf("unoffered zone: groups %d errors %v", len(out.Instances), errs)
	}
}

func TestFleetArchitectureMismatchFailsThePool(t *testing.T) {
	f := newFixture(t, nil)
	out, err := f.c.ec2.CreateFleet(context.Background(), f.fleet(f.ltArm, "on-demand", "lowest-price", 1, ov{"m6i.large", subnetA, 0}, ov{"m7g.large", subnetA, 0}))
	if err != nil {
		t.Fatal(err)
	}
	got := f.launched(t, out)
	if len(got) != 1 || got[0].InstanceType != "m7g.large" || got[0].Architecture != "arm64" {
		t.Fatalf("launched %+v, want the arm64 m7g.large", got)
	}
	if errs := errorPools(out); len(errs) != 1 || !strings.HasPrefix(errs[0], "m6i.large@") || !strings.HasSuffix(errs[0], "InvalidParameterValue") {
		t.Errorf("errors %v, want the x86 pool rejected for its architecture", errs)
	}
}

func TestRunInstancesICEIsHTTP500AndRetried(t *testing.T) {
	f := newFixture(t, nil)
	f.s.SetICE(Offering{"c6i.large", "us-east-1a", CapacityOnDemand}, true)
	_, err := f.c.ec2.RunInstances(context.Background(), &ec2.RunInstancesInput{
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: aws.String(f.ltX86)},
		InstanceType:   "c6i.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String(subnetA),
	})
	wantAPIErr(t, err, "InsufficientInstanceCapacity", 500)
	calls := f.s.Calls()
	if len(calls) != 3 || calls[0].Attempt != 1 || calls[2].Attempt != 3 {
		t.Errorf("SDK attempts logged: %+v, want 3 attempts of the default retryer", calls)
	}
	if len(f.s.State().Instances) != 0 {
		t.Errorf("a failed RunInstances left instances behind")
	}
}

func TestThrottlingIsRetriedBySDKThenSucceeds(t *testing.T) {
	f := newFixture(t, nil)
	f.s.Throttle("DescribeInstances", 2)
	if _, err := f.c.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatalf("DescribeInstances after 2 throttles: %v", err)
	}
	calls := f.s.Calls()
	var codes []string
	for _, c := range calls {
		codes = append(codes, c.Code+"#"+strconv.Itoa(c.Attempt))
	}
	want := []string{"RequestLimitExceeded#1", "RequestLimitExceeded#2", "OK#3"}
	if !slices.Equal(codes, want) {
		t.Fatalf("call log %v, want %v", codes, want)
	}
	if calls[0].Status != http.StatusServiceUnavailable {
		t.Errorf("throttle status %d, want 503", calls[0].Status)
	}
	// Three throttles exhaust the default three attempts.
	f.s.ResetCalls()
	f.s.Throttle("CreateFleet", 3)
	_, err := f.c.ec2.CreateFleet(context.Background(), f.fleet(f.ltX86, "spot", "lowest-price", 1, ov{"m6i.large", subnetA, 0}))
	wantAPIErr(t, err, "RequestLimitExceeded", 503)
	if n := f.s.CountCalls("CreateFleet", "RequestLimitExceeded"); n != 3 {
		t.Errorf("%d throttled CreateFleet calls, want 3", n)
	}
	if len(f.s.State().Instances) != 0 {
		t.Errorf("a throttled CreateFleet launched instances")
	}
}

func TestInternalErrorRetriedAndServiceSpecificFaults(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if err := f.s.AddFault(Fault{Kind: FaultInternal, Action: "ec2:DescribeSubnets", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatal(err)
	}
	if n := f.s.CountCalls("DescribeSubnets", "InternalError"); n != 1 {
		t.Errorf("%d InternalError answers logged, want 1", n)
	}
	// With retries off the SSM throttle and the EKS throttle surface as the services spell them.
	noRetry := noRetry(f.s.AWSConfig())
	f.s.Throttle("GetParameter", 1)
	_, err := ssm.NewFromConfig(noRetry).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/x")})
	wantAPIErr(t, err, "ThrottlingException", 400)
	f.s.Throttle("eks:DescribeCluster", 1)
	_, err = eks.NewFromConfig(noRetry).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("joiner-sim")})
	wantAPIErr(t, err, "ThrottlingException", 429)
}

func noRetry(cfg aws.Config) aws.Config {
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	return cfg
}

func TestFaultRateIsDeterministicPerSeed(t *testing.T) {
	hits := func() int {
		s, _ := startSim(t, func(c *Config) { c.RandSeed = 7 })
		if err := s.AddFault(Fault{Kind: FaultThrottle, Action: "DescribeAvailabilityZones", Rate: 0.25}); err != nil {
			t.Fatal(err)
		}
		c := ec2.NewFromConfig(noRetry(s.AWSConfig()))
		for range 200 {
			c.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{})
		}
		return s.CountCalls("DescribeAvailabilityZones", "RequestLimitExceeded")
	}
	a, b := hits(), hits()
	if a != b {
		t.Errorf("same seed, different hits: %d vs %d", a, b)
	}
	if a < 25 || a > 75 {
		t.Errorf("rate 0.25 hit %d of 200 calls", a)
	}
}

func TestLatencyRealAndSimulated(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.s.AddFault(Fault{Kind: FaultLatency, Action: "DescribeImages", Count: 1, Latency: Duration(80 * time.Millisecond)})
	start := time.Now()
	if _, err := f.c.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-0c0ffee00000000a1"}}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Errorf("real latency fault answered after %v, before 80ms", d)
	}
	before := f.clk.Now()
	f.s.AddFault(Fault{Kind: FaultLatency, Action: "DescribeImages", Count: 1, Latency: Duration(90 * time.Second), SimulatedOnly: true})
	if _, err := f.c.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-0c0ffee00000000a1"}}); err != nil {
		t.Fatal(err)
	}
	if d := f.clk.Now().Sub(before); d != 90*time.Second {
		t.Errorf("simulated latency moved the clock by %v, want 90s", d)
	}
}

func TestDryRunAndScriptedPolicy(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	in := f.fleet(f.ltX86, "spot", "lowest-price", 1, ov{"m6i.large", subnetA, 0})
	in.DryRun = aws.Bool(true)
	_, err := f.c.ec2.CreateFleet(ctx, in)
	wantAPIErr(t, err, "DryRunOperation", 412)
	f.s.Deny("ec2:CreateFleet", "TerminateInstances")
	_, err = f.c.ec2.CreateFleet(ctx, in)
	wantAPIErr(t, err, "UnauthorizedOperation", 403)
	in.DryRun = nil
	_, err = f.c.ec2.CreateFleet(ctx, in)
	wantAPIErr(t, err, "UnauthorizedOperation", 403)
	// Allowed actions still dry-run as allowed.
	_, err = f.c.ec2.RunInstances(ctx, &ec2.RunInstancesInput{DryRun: aws.Bool(true), LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: aws.String(f.ltX86)},
		InstanceType: "m6i.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	wantAPIErr(t, err, "DryRunOperation", 412)
	if n := len(f.s.State().Instances); n != 0 {
		t.Errorf("dry runs and denied calls launched %d instances", n)
	}
	calls := f.s.Calls()
	if !calls[0].DryRun || calls[2].DryRun {
		t.Errorf("call log DryRun flags wrong: %+v", calls)
	}
	f.s.Allow("ec2:CreateFleet")
	if _, err := f.c.ec2.CreateFleet(ctx, in); err != nil {
		t.Errorf("after Allow: %v", err)
	}
}

func TestSimulatedTimeDrivesStates(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.BootTime = 20 * time.Second })
	ctx := context.Background()
	out, err := f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "on-demand", "lowest-price", 1, ov{"m6i.large", subnetA, 0}))
	if err != nil {
		t.Fatal(err)
	}
	id := out.Instances[0].InstanceIds[0]
	state := func() string {
		d, err := f.c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Reservations) == 0 {
			return "gone"
		}
		return string(d.Reservations[0].Instances[0].State.Name)
	}
	steps := []struct {
		advance time.Duration
		want    string
	}{{0, "pending"}, {19 * time.Second, "pending"}, {time.Second, "running"}}
	for _, st := range steps {
		f.clk.Advance(st.advance)
		if got := state(); got != st.want {
			t.Fatalf("after +%v: %s, want %s", st.advance, got, st.want)
		}
	}
	launch, _ := f.s.Instance(id)
	if !launch.LaunchTime.Equal(testEpoch) {
		t.Errorf("launch time %v, want the simulated %v", launch.LaunchTime, testEpoch)
	}
	term, err := f.c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if c := term.TerminatingInstances[0].CurrentState; c.Name != "shutting-down" || aws.ToInt32(c.Code) != 32 {
		t.Fatalf("terminate answered %s/%d", c.Name, aws.ToInt32(c.Code))
	}
	for _, st := range []struct {
		advance time.Duration
		want    string
	}{{29 * time.Second, "shutting-down"}, {time.Second, "terminated"}, {59 * time.Minute, "terminated"}, {time.Minute, "gone"}} {
		f.clk.Advance(st.advance)
		if st.want == "gone" {
			if _, ok := f.s.Instance(id); ok {
				t.Fatalf("terminated instance still listed an hour later")
			}
			continue
		}
		if got := state(); got != st.want {
			t.Fatalf("after +%v: %s, want %s", st.advance, got, st.want)
		}
	}
	var kinds []string
	for _, ev := range f.s.Events() {
		var e struct {
			Detail struct{ State string } `json:"detail"`
		}
		json.Unmarshal(ev, &e)
		kinds = append(kinds, e.Detail.State)
	}
	if want := []string{"pending", "running", "shutting-down", "terminated"}; !slices.Equal(kinds, want) {
		t.Errorf("state-change events %v, want %v", kinds, want)
	}
}

func TestSpotInterruption(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	out, err := f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "spot", "price-capacity-optimized", 1, ov{"g6.xlarge", subnetB, 0}))
	if err != nil {
		t.Fatal(err)
	}
	id := out.Instances[0].InstanceIds[0]
	f.clk.Advance(time.Minute)
	ev, err := f.s.Interrupt(id)
	if err != nil {
		t.Fatal(err)
	}
	// The envelope has the shape of events-reference/ec2-spot-interruption-warning.json.
	var env struct {
		Version    string   `json:"version"`
		ID         string   `json:"id"`
		DetailType string   `json:"detail-type"`
		Source     string   `json:"source"`
		Account    string   `json:"account"`
		Time       string   `json:"time"`
		Region     string   `json:"region"`
		Resources  []string `json:"resources"`
		Detail     struct {
			InstanceID     string `json:"instance-id"`
			InstanceAction string `json:"instance-action"`
		} `json:"detail"`
	}
	dec := json.NewDecoder(bytes.NewReader(ev))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("event %s: %v", ev, err)
	}
	wantRes := "arn:aws:ec2:us-east-1:123456789012:instance/" + id
	if env.Version != "0" || env.DetailType != "EC2 Spot Instance Interruption Warning" || env.Source != "aws.ec2" ||
		env.Account != DefaultAccountID || env.Region != "us-east-1" || env.Time != "2026-12-01T09:01:00Z" ||
		!slices.Equal(env.Resources, []string{wantRes}) || env.Detail.InstanceID != id || env.Detail.InstanceAction != "terminate" || len(env.ID) != 36 {
		t.Fatalf("event %s", ev)
	}
	if _, err := f.s.Interrupt(id); err == nil {
		t.Errorf("a second interruption of %s was accepted", id)
	}
	snap := f.s.State()
	if len(snap.Interruptions) != 1 || !snap.Interruptions[0].TerminateAt.Equal(testEpoch.Add(3*time.Minute)) {
		t.Errorf("interruptions %+v", snap.Interruptions)
	}
	f.clk.Advance(119 * time.Second)
	if in, _ := f.s.Instance(id); in.State != StateRunning {
		t.Errorf("1s before the deadline: %s", in.State)
	}
	f.clk.Advance(time.Second)
	in, _ := f.s.Instance(id)
	if in.State != StateShuttingDown || !strings.HasPrefix(in.StateReason, "Server.SpotInstanceTermination") {
		t.Errorf("at the deadline: %s (%s)", in.State, in.StateReason)
	}
	f.clk.Advance(30 * time.Second)
	if in, _ := f.s.Instance(id); in.State != StateTerminated {
		t.Errorf("after shutdown: %s", in.State)
	}
	// Only running spot instances can be interrupted.
	od, err := f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "on-demand", "lowest-price", 1, ov{"m6i.large", subnetA, 0}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Interrupt(od.Instances[0].InstanceIds[0]); err == nil || !strings.Contains(err.Error(), "on-demand") {
		t.Errorf("interrupting on-demand: %v", err)
	}
	if _, err := f.s.Interrupt("i-0000000000000dead"); err == nil {
		t.Errorf("interrupting a missing instance succeeded")
	}
}

func TestSpotPriceHistory(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.s.SetSpotPrice("m6i.large", "us-east-1b", 0.05)
	out, err := f.c.ec2.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{"m6i.large"}, ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		StartTime: aws.Time(f.clk.Now()),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range out.SpotPriceHistory {
		got[aws.ToString(p.AvailabilityZone)] = aws.ToString(p.SpotPrice)
		if !p.Timestamp.Equal(testEpoch) {
			t.Errorf("timestamp %v, want the top of the simulated hour %v", p.Timestamp, testEpoch)
		}
	}
	want := map[string]string{"us-east-1a": "0.027114", "us-east-1b": "0.050000", "us-east-1c": "0.042145"}
	if len(got) != 3 || got["us-east-1a"] != want["us-east-1a"] || got["us-east-1b"] != want["us-east-1b"] || got["us-east-1c"] != want["us-east-1c"] {
		t.Fatalf("spot prices %v, want %v", got, want)
	}
	// The override also prices launches.
	fl, err := f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "spot", "lowest-price", 1, ov{"m6i.large", subnetB, 0}))
	if err != nil {
		t.Fatal(err)
	}
	if in := f.launched(t, fl); in[0].PricePerHour != 0.05 {
		t.Errorf("launch price %v, want the override 0.05", in[0].PricePerHour)
	}
	pg := ec2.NewDescribeSpotPriceHistoryPaginator(f.c.ec2, &ec2.DescribeSpotPriceHistoryInput{
		MaxResults: aws.Int32(7), Filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-east-1a"}}},
	})
	n, pages := 0, 0
	for pg.HasMorePages() {
		p, err := pg.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		n += len(p.SpotPriceHistory)
	}
	if n != len(testTypes) || pages != 2 {
		t.Errorf("zone filter paged %d prices in %d pages, want %d in 2", n, pages, len(testTypes))
	}
	w, err := f.c.ec2.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{ProductDescriptions: []string{"Windows"}})
	if err != nil || len(w.SpotPriceHistory) != 0 {
		t.Errorf("Windows prices: %v, %d entries", err, len(w.SpotPriceHistory))
	}
}

func TestPublicAMIParametersResolveToMatchingImages(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	cases := map[string]ec2types.ArchitectureValues{
		"/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id": "x86_64",
		"/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/standard/recommended/image_id":  "arm64",
		"/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/nvidia/recommended/image_id":   "x86_64",
		"/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id":                    "x86_64",
		"/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/recommended/image_id":                "x86_64",
		"/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/recommended/image_id":              "arm64",
		"/aws/service/bottlerocket/aws-k8s-1.36/x86_64/latest/image_id":                              "x86_64",
		"/aws/service/bottlerocket/aws-k8s-1.36/arm64/latest/image_id":                               "arm64",
		"/aws/service/bottlerocket/aws-k8s-1.37-nvidia/x86_64/latest/image_id":                       "x86_64",
		"/aws/service/bottlerocket/aws-k8s-1.36/x86_64/" + BottlerocketAMIRelease + "/image_id":      "x86_64",
	}
	seen := map[string]bool{}
	for name, arch := range cases {
		p, err := f.c.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		id := aws.ToString(p.Parameter.Value)
		if aws.ToString(p.Parameter.DataType) != "aws:ec2:image" {
			t.Errorf("%s = %s has data type %s", name, id, aws.ToString(p.Parameter.DataType))
		}
		if !strings.Contains(name, BottlerocketAMIRelease) {
			if seen[id] {
				t.Errorf("%s shares image %s with another family", name, id)
			}
			seen[id] = true
		}
		img, err := f.c.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
		if err != nil || len(img.Images) != 1 || img.Images[0].Architecture != arch || aws.ToString(img.Images[0].ImageOwnerAlias) != "amazon" {
			t.Errorf("%s -> %s: image %+v err %v, want arch %s owned by amazon", name, id, img, err, arch)
		}
	}
	latest, _ := f.c.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/bottlerocket/aws-k8s-1.36/x86_64/latest/image_id")})
	pinned, _ := f.c.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/bottlerocket/aws-k8s-1.36/x86_64/" + BottlerocketAMIRelease + "/image_id")})
	if aws.ToString(latest.Parameter.Value) != aws.ToString(pinned.Parameter.Value) {
		t.Errorf("bottlerocket latest and %s differ", BottlerocketAMIRelease)
	}
	_, err := f.c.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.29/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	wantAPIErr(t, err, "ParameterNotFound", 400)
}

func TestDefaultEKSCluster(t *testing.T) {
	f := newFixture(t, nil)
	out, err := f.c.eks.DescribeCluster(context.Background(), &eks.DescribeClusterInput{Name: aws.String(DefaultClusterName)})
	if err != nil {
		t.Fatal(err)
	}
	cl := out.Cluster
	if aws.ToString(cl.Version) != "1.37" || cl.Status != "ACTIVE" || cl.KubernetesNetworkConfig == nil || aws.ToString(cl.KubernetesNetworkConfig.ServiceIpv4Cidr) != "10.100.0.0/16" ||
		!strings.HasSuffix(aws.ToString(cl.Endpoint), ".eks.amazonaws.com") || aws.ToString(cl.ResourcesVpcConfig.ClusterSecurityGroupId) != "sg-0d0000000000000d2" {
		t.Errorf("cluster %+v", cl)
	}
	if !cl.CreatedAt.Equal(testEpoch) {
		t.Errorf("createdAt %v, want %v", cl.CreatedAt, testEpoch)
	}
}

func TestValidationErrors(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	e := f.c.ec2
	_, err := e.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("bad-ud"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{UserData: aws.String("#!/bin/bash not base64")}})
	wantAPIErr(t, err, "InvalidUserData.Malformed", 400)
	_, err = e.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("a b"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{}})
	wantAPIErr(t, err, "InvalidLaunchTemplateName.MalformedException", 400)
	_, err = e.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("bad-md"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{HttpPutResponseHopLimit: aws.Int32(65)}}})
	wantAPIErr(t, err, "InvalidParameterValue", 400)
	_, err = e.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("no-such-filter"), Values: []string{"x"}}}})
	wantAPIErr(t, err, "InvalidParameterValue", 400)
	_, err = e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}, MaxResults: aws.Int32(5)})
	wantAPIErr(t, err, "InvalidParameterCombination", 400)
	_, err = e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(2)})
	wantAPIErr(t, err, "InvalidParameterValue", 400)
	_, err = e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{NextToken: aws.String("bm9wZQ")})
	wantAPIErr(t, err, "InvalidPaginationToken", 400)
	maintain := f.fleet(f.ltX86, "spot", "lowest-price", 1, ov{"m6i.large", subnetA, 0})
	maintain.Type = ec2types.FleetTypeMaintain
	_, err = e.CreateFleet(ctx, maintain)
	wantAPIErr(t, err, "InvalidParameterValue", 400)
	in := f.fleet("lt-0123456789abcdef0", "spot", "lowest-price", 1, ov{"m6i.large", subnetA, 0})
	_, err = e.CreateFleet(ctx, in)
	wantAPIErr(t, err, "InvalidLaunchTemplateId.NotFound", 400)
	_, err = e.CreateFleet(ctx, f.fleet(f.ltX86, "spot", "lowest-price", 1, ov{"m6i.large", "subnet-0123456789abcdef0", 0}))
	wantAPIErr(t, err, "InvalidSubnetID.NotFound", 400)
	_, err = e.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"i-0123456789abcdef0"}, Tags: []ec2types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
	wantAPIErr(t, err, "InvalidInstanceID.NotFound", 400)
	_, err = e.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{subnetA}, Tags: []ec2types.Tag{{Key: aws.String("aws:reserved"), Value: aws.String("v")}}})
	wantAPIErr(t, err, "InvalidParameterValue", 400)
	if len(f.s.State().Instances) != 0 {
		t.Errorf("failed calls launched instances")
	}
}

func TestDescribeInstanceTypesPagesTheWholeEmbeddedCatalog(t *testing.T) {
	s, _ := startSim(t, func(c *Config) { c.Catalog = catalog.Embedded() })
	pg := ec2.NewDescribeInstanceTypesPaginator(ec2.NewFromConfig(s.AWSConfig()), &ec2.DescribeInstanceTypesInput{})
	n, pages := 0, 0
	for pg.HasMorePages() {
		out, err := pg.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		n += len(out.InstanceTypes)
	}
	want := len(catalog.Embedded().InstanceTypes)
	if n != want || pages != (want+99)/100 {
		t.Errorf("paged %d types in %d pages, want %d in %d", n, pages, want, (want+99)/100)
	}
}

func TestStateSnapshotRoundTripsThroughHTTP(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	out, err := f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "spot", "lowest-price", 2, ov{"m6i.large", subnetC, 0}))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(f.s.Endpoint() + "/_sim/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Instances) != 2 || len(snap.LaunchTemplates) != 2 || snap.CallCount != 1 || !snap.Time.Equal(testEpoch) {
		t.Fatalf("snapshot: %d instances, %d templates, %d calls at %v", len(snap.Instances), len(snap.LaunchTemplates), snap.CallCount, snap.Time)
	}
	// The snapshot seeds an identical simulator.
	s2, err := New(Config{Catalog: testCatalog(t), Seed: &snap.Seed, Clock: NewFakeClock(testEpoch)})
	if err != nil {
		t.Fatal(err)
	}
	again := s2.State()
	again.CallCount, snap.CallCount = 0, 0
	a, _ := json.Marshal(again)
	b, _ := json.Marshal(snap)
	if !bytes.Equal(a, b) {
		t.Errorf("state seeded from a snapshot differs:\n%s\n%s", a, b)
	}
	ids := out.Instances[0].InstanceIds
	if in, ok := s2.Instance(ids[0]); !ok || in.SubnetID != subnetC || in.CapacityType != CapacitySpot {
		t.Errorf("instance %s after reseeding: %+v", ids[0], in)
	}
}

func TestFaultScriptOverHTTP(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	fl, err := f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "spot", "lowest-price", 1, ov{"m6i.large", subnetA, 0}))
	if err != nil {
		t.Fatal(err)
	}
	spot := fl.Instances[0].InstanceIds[0]
	post := func(body string) (int, FaultScriptResult) {
		t.Helper()
		resp, err := http.Post(f.s.Endpoint()+"/_sim/faults", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res FaultScriptResult
		json.NewDecoder(resp.Body).Decode(&res)
		return resp.StatusCode, res
	}
	code, res := post(`{"faults":[{"kind":"throttle","action":"ec2:CreateFleet","count":1}],
		"ice":[{"instanceType":"m6i.large","zone":"us-east-1b","capacityType":"spot"}],
		"interrupt":["` + spot + `"]}`)
	if code != 200 || len(res.Events) != 1 || len(res.Faults) != 1 || res.Faults[0].Kind != FaultThrottle {
		t.Fatalf("fault script: HTTP %d %+v", code, res)
	}
	out, err := f.c.ec2.CreateFleet(ctx, f.fleet(f.ltX86, "spot", "lowest-price", 1, ov{"m6i.large", subnetB, 0}, ov{"m6i.large", subnetC, 0}))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.launched(t, out); len(got) != 1 || got[0].Zone != "us-east-1c" || f.s.CountCalls("CreateFleet", "RequestLimitExceeded") != 1 {
		t.Errorf("after script: launched %+v, %d throttles", got, f.s.CountCalls("CreateFleet", "RequestLimitExceeded"))
	}
	if code, _ := post(`{"faults":[{"kind":"explode"}]}`); code != 400 {
		t.Errorf("unknown fault kind: HTTP %d", code)
	}
	if code, _ := post(`{"nonsense":1}`); code != 400 {
		t.Errorf("unknown field: HTTP %d", code)
	}
	resp, err := http.Post(f.s.Endpoint()+"/_sim/clock", "application/json", strings.NewReader(`{"advance":"2m"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if in, _ := f.s.Instance(spot); in.State != StateShuttingDown {
		t.Errorf("2 simulated minutes after the interruption: %s", in.State)
	}
}

func TestLoadSeedExample(t *testing.T) {
	seed, err := LoadSeed("testdata/seed-example.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), Config{Catalog: testCatalog(t), Seed: seed, Clock: NewFakeClock(testEpoch)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newClients(fastRetries(s.AWSConfig()))
	ctx := context.Background()
	d, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:kubernetes.io/cluster/kubean"), Values: []string{"owned"}}}})
	if err != nil || len(d.Reservations) != 1 || aws.ToString(d.Reservations[0].OwnerId) != "111122223333" {
		t.Fatalf("seeded instance: %v %+v", err, d)
	}
	in := d.Reservations[0].Instances[0]
	if aws.ToString(in.PrivateDnsName) == "" || aws.ToString(in.SubnetId) != "subnet-0a1b2c3d4e5f60001" || aws.ToString(in.VpcId) != "vpc-0abc0abc0abc0abc0" {
		t.Errorf("seeded instance %+v", in)
	}
	tok, err := c.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/kubean/kubeadm/bootstrap-token"), WithDecryption: aws.Bool(true)})
	if err != nil || aws.ToString(tok.Parameter.Value) != "abcdef.0123456789abcdef" {
		t.Errorf("bootstrap token: %v", err)
	}
	for _, c := range s.Calls() {
		if strings.Contains(strings.Join(slices.Collect(mapsValues(c.Params)), " "), "0123456789abcdef") {
			t.Errorf("the call log holds the secret: %+v", c)
		}
	}
	_, err = c.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-0a1b2c3d4e5f60001"), InstanceType: "m6i.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	wantAPIErr(t, err, "UnauthorizedOperation", 403)
	small := Offering{"g6.xlarge", "us-east-1b", CapacitySpot}
	if snap := s.State(); !slices.Contains(snap.ICE, small) || len(snap.Capacity) != 1 || len(snap.Parameters) < 2 {
		t.Errorf("seeded ICE/capacity/parameters: %+v %+v %d", snap.ICE, snap.Capacity, len(snap.Parameters))
	}

	bad := t.TempDir() + "/bad.json"
	os.WriteFile(bad, []byte(`{"subnets":[{"id":"subnet-1","zone":"us-east-1a","cidr":"10.0.0.0/24"}],"subnetz":[]}`), 0o600)
	if _, err := LoadSeed(bad); err == nil || !strings.Contains(err.Error(), "subnetz") {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := New(Config{Catalog: testCatalog(t), Seed: &Seed{Subnets: []Subnet{{ID: "net-1", Zone: "us-east-1a"}}}}); err == nil {
		t.Errorf("a subnet id without the subnet- prefix was accepted")
	}
}

func mapsValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

func TestStartRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.168.1.1:0", ":0"} {
		if _, err := Start(context.Background(), Config{Addr: addr, Catalog: testCatalog(t)}); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Start on %s: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		if err := CheckLoopback(addr); err != nil {
			t.Errorf("CheckLoopback(%s): %v", addr, err)
		}
	}
}

func TestUnknownServiceAndAction(t *testing.T) {
	s, _ := startSim(t, nil)
	_, err := ec2.NewFromConfig(noRetry(s.AWSConfig())).DescribeVpcs(context.Background(), &ec2.DescribeVpcsInput{})
	wantAPIErr(t, err, "InvalidAction", 400)
	if n := s.CountCalls("DescribeVpcs", "InvalidAction"); n != 1 {
		t.Errorf("unknown action logged %d times", n)
	}
}

// TestDefaultRetryerRetriesThrottling uses NewAWSConfig unchanged: the SDK's
// own default retryer (and its real backoff, up to 2 s here) retries a throttle.
func TestDefaultRetryerRetriesThrottling(t *testing.T) {
	s, _ := startSim(t, nil)
	s.Throttle("GetParameter", 1)
	p, err := ssm.NewFromConfig(NewAWSConfig(s.Endpoint())).GetParameter(context.Background(), &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id"),
	})
	if err != nil {
		t.Fatalf("GetParameter after one throttle: %v", err)
	}
	if !strings.HasPrefix(aws.ToString(p.Parameter.Value), "ami-") {
		t.Errorf("value %q", aws.ToString(p.Parameter.Value))
	}
	var codes []string
	for _, c := range s.Calls() {
		codes = append(codes, c.Code+"#"+strconv.Itoa(c.Attempt))
	}
	if want := []string{"ThrottlingException#1", "OK#2"}; !slices.Equal(codes, want) {
		t.Errorf("call log %v, want %v", codes, want)
	}
}

func TestClientTokenMakesLaunchesIdempotent(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	run := func(token string, n int32) (*ec2.RunInstancesOutput, error) {
		return f.c.ec2.RunInstances(ctx, &ec2.RunInstancesInput{
			ClientToken: aws.String(token), LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: aws.String(f.ltX86)},
			InstanceType: "m6i.large", MinCount: aws.Int32(n), MaxCount: aws.Int32(n), SubnetId: aws.String(subnetA),
		})
	}
	first, err := run("token-1", 2)
	if err != nil {
		t.Fatal(err)
	}
	again, err := run("token-1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(first.ReservationId) != aws.ToString(again.ReservationId) || aws.ToString(first.Instances[1].InstanceId) != aws.ToString(again.Instances[1].InstanceId) {
		t.Errorf("replayed token answered a different launch: %s vs %s", aws.ToString(first.ReservationId), aws.ToString(again.ReservationId))
	}
	if n := len(f.s.State().Instances); n != 2 {
		t.Errorf("%d instances after a replayed RunInstances, want 2", n)
	}
	_, err = run("token-1", 3)
	wantAPIErr(t, err, "IdempotentParameterMismatch", 400)

	in := f.fleet(f.ltX86, "spot", "lowest-price", 1, ov{"m6i.large", subnetA, 0})
	in.ClientToken = aws.String("fleet-token")
	a, err := f.c.ec2.CreateFleet(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.c.ec2.CreateFleet(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(a.FleetId) != aws.ToString(b.FleetId) || len(f.s.State().Instances) != 3 {
		t.Errorf("replayed CreateFleet: fleets %s/%s, %d instances", aws.ToString(a.FleetId), aws.ToString(b.FleetId), len(f.s.State().Instances))
	}
}

// TestConcurrentClients drives one simulator from several goroutines: every
// launch is counted once and paged listings stay consistent.
func TestConcurrentClients(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	const workers, launches = 6, 15
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range launches {
				in := f.fleet(f.ltX86, "spot", "price-capacity-optimized", 1, ov{"m6i.large", subnetA, 0}, ov{"m7i.large", subnetB, 0})
				in.TagSpecifications[0].Tags = append(in.TagSpecifications[0].Tags, ec2types.Tag{Key: aws.String("worker"), Value: aws.String(strconv.Itoa(w))})
				if _, err := f.c.ec2.CreateFleet(ctx, in); err != nil {
					errs <- err
					return
				}
				if i%5 == 0 {
					if _, err := f.c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)}); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	pg := ec2.NewDescribeInstancesPaginator(f.c.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(7)})
	seen := map[string]bool{}
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				if seen[aws.ToString(in.InstanceId)] {
					t.Fatalf("%s listed twice", aws.ToString(in.InstanceId))
				}
				seen[aws.ToString(in.InstanceId)] = true
			}
		}
	}
	if len(seen) != workers*launches || f.s.CountCalls("CreateFleet", CodeOK) != workers*launches {
		t.Errorf("%d instances listed, %d CreateFleet calls; want %d of each", len(seen), f.s.CountCalls("CreateFleet", CodeOK), workers*launches)
	}
}
