package cloud

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/awsjson"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

func TestUnavailableOfferingsTTL(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	u := NewUnavailableOfferings(clock.Now)
	u.MarkUnavailable("m5.large", "us-east-1a", "spot")
	if !u.IsUnavailable("m5.large", "us-east-1a", "spot") || u.IsUnavailable("m5.large", "us-east-1a", "on-demand") || u.IsUnavailable("m5.large", "us-east-1b", "spot") {
		t.Fatal("a mark must cover exactly its (type, zone, capacity type)")
	}
	clock.Advance(UnavailableTTL - time.Second)
	if !u.IsUnavailable("m5.large", "us-east-1a", "spot") || u.Len() != 1 {
		t.Fatal("mark expired early")
	}
	clock.Advance(time.Second)
	if u.IsUnavailable("m5.large", "us-east-1a", "spot") || u.Len() != 0 {
		t.Fatal("mark outlived the TTL")
	}
	u.MarkCapacityTypeUnavailable("spot")
	if !u.IsUnavailable("c5.large", "us-east-1c", "spot") || u.IsUnavailable("c5.large", "us-east-1c", "on-demand") {
		t.Fatal("a capacity-type mark must cover every spot offering and no on-demand one")
	}
	u.MarkSubnetUnavailable("subnet-1")
	if !u.IsSubnetUnavailable("subnet-1") || u.IsSubnetUnavailable("subnet-2") {
		t.Fatal("subnet marks")
	}
	u.Flush()
	if u.IsUnavailable("c5.large", "us-east-1c", "spot") || u.IsSubnetUnavailable("subnet-1") {
		t.Fatal("Flush left marks")
	}
}

func TestUnfulfillableCodesMatchKarpenter(t *testing.T) {
	for _, c := range []string{"InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded", "UnfulfillableCapacity", "Unsupported", "ReservationCapacityExceeded"} {
		if !IsUnfulfillableCapacity(c) {
			t.Errorf("%s is an unavailable-offering code in Karpenter", c)
		}
	}
	for _, c := range []string{"InsufficientFreeAddressesInSubnet", "InvalidParameterValue", "UnauthorizedOperation"} {
		if IsUnfulfillableCapacity(c) {
			t.Errorf("%s must not mark the offering", c)
		}
	}
}

func TestRequestForPlan(t *testing.T) {
	nc := &karpenter.EC2NodeClass{}
	nc.Name = "default"
	n := packer.NewNode{
		Name: "default-x1", NodePool: "default", NodeClass: "default", InstanceType: "m6i.large", CapacityType: "spot",
		Options: []string{"m6i.large", "m7i.large"}, Labels: map[string]string{"team": "a"},
		Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}},
		Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
			{Key: karpenter.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a", "us-east-1b", "us-east-1c"}},
			{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"us-east-1b"}},
		},
	}
	r := RequestFor(n, nc)
	if r.NodeClaim != "default-x1" || r.NodePool != "default" || r.NodeClass != nc || !slices.Equal(r.InstanceTypes, n.Options) {
		t.Errorf("request %+v", r)
	}
	if !slices.Equal(r.Zones, []string{"us-east-1a", "us-east-1c"}) || !slices.Equal(r.CapacityTypes, []string{"spot", "on-demand"}) {
		t.Errorf("zones %v capacity types %v", r.Zones, r.CapacityTypes)
	}
	// With the engine's zone: that first, the requirements' other zones as the fallback.
	n.Zone = "us-east-1c"
	r = RequestFor(n, nc)
	if !slices.Equal(r.Zones, []string{"us-east-1c"}) || !slices.Equal(r.FallbackZones, []string{"us-east-1a"}) || r.FallbackAnyZone {
		t.Errorf("planned in us-east-1c: zones %v, fallback %v (any %v); want us-east-1c, then us-east-1a", r.Zones, r.FallbackZones, r.FallbackAnyZone)
	}
	// The engine's capacity type first, whatever the requirement's order.
	n.CapacityType, n.Requirements[0].Values = "on-demand", []string{"spot", "on-demand"}
	if r = RequestFor(n, nc); !slices.Equal(r.CapacityTypes, []string{"on-demand", "spot"}) {
		t.Errorf("planned on-demand: capacity types %v, want on-demand first", r.CapacityTypes)
	}
	n.Requirements, n.CapacityType = nil, "spot"
	r = RequestFor(n, nc)
	if !slices.Equal(r.Zones, []string{"us-east-1c"}) || !r.FallbackAnyZone || !slices.Equal(r.CapacityTypes, []string{"spot"}) {
		t.Errorf("without requirements: zones %v (any %v) capacity types %v (want its zone, then any, the engine's pick)", r.Zones, r.FallbackAnyZone, r.CapacityTypes)
	}
	// A node planned in a reservation launches there only.
	n.CapacityType, n.CapacityReservationID = "reserved", "cr-0a1b2c3d4e5f60718"
	if r = RequestFor(n, nc); !slices.Equal(r.Zones, []string{"us-east-1c"}) || len(r.FallbackZones) > 0 || r.FallbackAnyZone ||
		!slices.Equal(r.CapacityTypes, []string{"reserved"}) {
		t.Errorf("reserved: zones %v, fallback %v (any %v), capacity types %v", r.Zones, r.FallbackZones, r.FallbackAnyZone, r.CapacityTypes)
	}
}

func TestClusterFromEKS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.sim == nil {
			_, err := eks.NewFromConfig(e.direct).CreateCluster(context.Background(), &eks.CreateClusterInput{
				Name: aws.String(testCluster), Version: aws.String(testK8s), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
				ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{e.subnets["us-east-1a"]}},
			})
			e.must(err)
		}
		p := e.provider(func(c *Config) {
			c.ClusterEndpoint, c.ClusterCABundle, c.ClusterCIDR, c.KubernetesVersion = "", "", "", ""
		})
		c, err := p.Cluster(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c.Name != testCluster || c.Version != testK8s || !strings.HasPrefix(c.Endpoint, "https://") || c.CABundle == "" {
			t.Errorf("cluster %+v", c)
		}
		if _, err := p.Cluster(context.Background()); err != nil || e.proxy.count("DescribeCluster") != 1 {
			t.Errorf("DescribeCluster must be read once per invocation (%d calls)", e.proxy.count("DescribeCluster"))
		}
		// An alias AMI then resolves with EKS's version.
		nc := e.loadClass("al2023.yaml")
		if amis, err := p.AMIs(context.Background(), nc); err != nil || len(amis) != 3 {
			t.Errorf("alias with the EKS version: %+v %v", amis, err)
		}
	})
}

func TestSubnetOutOfAddressesMovesToAnotherZone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		nc := e.loadClass("al2023.yaml")
		e.proxy.mu.Lock()
		e.proxy.iceCode = map[string]string{"m6i.large/us-east-1a/on-demand": "InsufficientFreeAddressesInSubnet"}
		e.proxy.mu.Unlock()
		inst, err := e.provider().Launch(context.Background(), cpuRequest(nc, "ip-1", []string{"m6i.large"}, []string{"us-east-1a", "us-east-1b"}))
		if err != nil {
			t.Fatal(err)
		}
		if inst.Zone == "us-east-1a" {
			t.Errorf("launched in the exhausted subnet's zone: %+v", inst)
		}
		if !e.cache.IsSubnetUnavailable(e.subnets["us-east-1a"]) || e.cache.IsUnavailable("m6i.large", "us-east-1a", "on-demand") {
			t.Error("the subnet, not the offering, must be marked")
		}
	})
}

func TestDeleteLaunchTemplates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		p := e.provider()
		a, err := p.Launch(ctx, cpuRequest(nc, "lt-1", []string{"m6i.large"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.Launch(ctx, cpuRequest(nc, "lt-2", []string{"m6g.large"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if a.LaunchTemplate == b.LaunchTemplate {
			t.Fatal("want two templates (two architectures)")
		}
		dry := e.provider(func(c *Config) { c.DryRun = true })
		names, err := dry.DeleteLaunchTemplates(ctx, nc.Name, a.LaunchTemplate)
		if err != nil || !slices.Equal(names, []string{b.LaunchTemplate}) || len(dry.DryRuns()) != 1 || !dry.DryRuns()[0].Allowed {
			t.Fatalf("dry run: %v %v %+v", names, err, dry.DryRuns())
		}
		if n := len(e.templates()); n != 2 {
			t.Fatalf("dry run deleted templates: %d left", n)
		}
		names, err = p.DeleteLaunchTemplates(ctx, nc.Name, a.LaunchTemplate)
		if err != nil || !slices.Equal(names, []string{b.LaunchTemplate}) {
			t.Fatalf("deleted %v %v", names, err)
		}
		lts := e.templates()
		if len(lts) != 1 || aws.ToString(lts[0].LaunchTemplateName) != a.LaunchTemplate {
			t.Errorf("left %+v", lts)
		}
		if names, _ := p.DeleteLaunchTemplates(ctx, "another-class"); len(names) != 0 {
			t.Errorf("another class's deletion took %v", names)
		}
	})
}

// failingEKS fails the test on any call: a self-managed cluster has no EKS cluster.
type failingEKS struct{ t *testing.T }

func (f failingEKS) DescribeCluster(context.Context, string) (awsjson.Cluster, error) {
	f.t.Helper()
	f.t.Error("a self-managed cluster was described through EKS")
	return awsjson.Cluster{}, errors.New("no EKS")
}

// TestSelfManagedClusterNeverDescribedThroughEKS: a self-managed cluster's endpoint,
// CA and version come from configuration only; a missing endpoint or version is an
// error naming it, and EKS is never asked (issue 17: the deployed provisioner got 403
// on eks:DescribeCluster, which a self-managed stack does not grant).
func TestSelfManagedClusterNeverDescribedThroughEKS(t *testing.T) {
	api := Clients{EC2: ec2.NewFromConfig(aws.Config{Region: "us-east-1"}), EKS: failingEKS{t}}
	for _, c := range []struct {
		name, endpoint, version string
		want                    []string
	}{
		{"no endpoint", "", "1.37", []string{"the API server endpoint", "never described through EKS"}},
		{"no version", "https://10.0.0.1:6443", "", []string{"the Kubernetes version", "/version"}},
		{"neither", "", "", []string{"endpoint", "and the Kubernetes version"}},
	} {
		p, err := New(Config{ClusterName: "kubean", Region: "us-east-1", SelfManaged: true,
			ClusterEndpoint: c.endpoint, KubernetesVersion: c.version, ClusterCABundle: "Q0E="}, api)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Cluster(context.Background())
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want it to name %q", c.name, err, w)
			}
		}
	}
	p, err := New(Config{ClusterName: "kubean", Region: "us-east-1", SelfManaged: true, ClusterEndpoint: "https://10.0.0.1:6443",
		ClusterCABundle: "Q0E=", ClusterCIDR: "10.96.0.0/12", KubernetesVersion: "1.37"}, api)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Cluster(context.Background())
	if err != nil || got != (ClusterInfo{Name: "kubean", Endpoint: "https://10.0.0.1:6443", CABundle: "Q0E=", CIDR: "10.96.0.0/12", Version: "1.37"}) {
		t.Errorf("configured self-managed cluster: %+v, %v", got, err)
	}
}
