package cloud

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func gpuRequest(nc *karpenter.EC2NodeClass, claim string) LaunchRequest {
	return LaunchRequest{
		NodeClaim: claim, NodePool: "workload-gpu-l4", NodeClass: nc,
		InstanceTypes: []string{"g6.xlarge", "g6.2xlarge"},
		CapacityTypes: []string{karpenter.CapacityTypeSpot, karpenter.CapacityTypeOnDemand},
		Labels: map[string]string{
			"node.lifecycle": "karpenter", "node.accelerator": "nvidia-gpu", karpenter.NodePoolLabelKey: "workload-gpu-l4",
			corev1.LabelInstanceTypeStable: "g6.xlarge", karpenter.CapacityTypeLabelKey: "spot", karpenter.LabelInstanceGPUCount: "1",
		},
		Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
	}
}

func cpuRequest(nc *karpenter.EC2NodeClass, claim string, types []string, zones []string, cts ...string) LaunchRequest {
	return LaunchRequest{
		NodeClaim: claim, NodePool: "workload-general", NodeClass: nc, InstanceTypes: types, Zones: zones, CapacityTypes: cts,
		Labels: map[string]string{karpenter.NodePoolLabelKey: "workload-general"},
	}
}

func (e *env) templateData(name string) ec2types.ResponseLaunchTemplateData {
	e.t.Helper()
	if e.sim != nil {
		// awssim has no DescribeLaunchTemplateVersions; its state holds the data.
		return simTemplateData(e.t, e.sim, name)
	}
	out, err := e.ec2.DescribeLaunchTemplateVersions(context.Background(), &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String(name)})
	e.must(err)
	if len(out.LaunchTemplateVersions) != 1 {
		e.t.Fatalf("launch template %s has %d versions, want 1", name, len(out.LaunchTemplateVersions))
	}
	return *out.LaunchTemplateVersions[0].LaunchTemplateData
}

func (e *env) templates() []ec2types.LaunchTemplate {
	e.t.Helper()
	out, err := e.ec2.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{})
	e.must(err)
	return out.LaunchTemplates
}

func TestLaunchSeed002GPU(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("seed002-gpu.yaml")
		inst, err := e.provider().Launch(ctx, gpuRequest(nc, "workload-gpu-l4-abcde"))
		if err != nil {
			t.Fatal(err)
		}
		if inst.ID == "" || inst.InstanceType != "g6.xlarge" || inst.CapacityType != "spot" || inst.FleetCalls != 1 {
			t.Fatalf("launched %+v: want g6.xlarge spot after one CreateFleet", inst)
		}
		if inst.ProviderID != "aws:///"+inst.Zone+"/"+inst.ID || inst.ImageID != e.amiGPU {
			t.Errorf("providerID %q image %q", inst.ProviderID, inst.ImageID)
		}

		// Instance tags, as EC2 reports them.
		got := e.instance(inst.ID)
		tags := tagMap(got.Tags)
		want := map[string]string{
			"kubernetes.io/cluster/" + testCluster: "owned",
			"karpenter.sh/nodepool":                "workload-gpu-l4", // Joiner's value beats the class's tag
			"karpenter.sh/nodeclaim":               "workload-gpu-l4-abcde",
			"karpenter.k8s.aws/ec2nodeclass":       "kubean-aws-gpu",
			"Name":                                 "workload-gpu-l4-abcde",
			"team":                                 "ml",
		}
		for k, v := range want {
			if tags[k] != v {
				t.Errorf("instance tag %s = %q, want %q (all: %v)", k, tags[k], v, tags)
			}
		}
		if got.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot || aws.ToString(got.ImageId) != e.amiGPU {
			t.Errorf("instance lifecycle %q image %q", got.InstanceLifecycle, aws.ToString(got.ImageId))
		}

		// The CreateFleet request, as it went over the wire.
		forms := e.proxy.formsOf("CreateFleet")
		if len(forms) != 1 {
			t.Fatalf("%d CreateFleet calls", len(forms))
		}
		f := forms[0]
		for k, v := range map[string]string{
			"Type": "instant", "TargetCapacitySpecification.TotalTargetCapacity": "1",
			"TargetCapacitySpecification.DefaultTargetCapacityType": "spot",
			"SpotOptions.AllocationStrategy":                        "price-capacity-optimized",
			"TagSpecification.1.ResourceType":                       "instance",
			"TagSpecification.2.ResourceType":                       "volume",
		} {
			if f.Get(k) != v {
				t.Errorf("CreateFleet %s = %q, want %q", k, f.Get(k), v)
			}
		}
		if !strings.HasPrefix(f.Get("ClientToken"), "joiner-") {
			t.Errorf("no idempotency token: %q", f.Get("ClientToken"))
		}
		volumeTags := map[string]string{}
		for i := 1; f.Get("TagSpecification.2.Tag."+itoa(i)+".Key") != ""; i++ {
			volumeTags[f.Get("TagSpecification.2.Tag."+itoa(i)+".Key")] = f.Get("TagSpecification.2.Tag." + itoa(i) + ".Value")
		}
		for k, v := range want {
			if volumeTags[k] != v {
				t.Errorf("volume tag %s = %q, want %q", k, volumeTags[k], v)
			}
		}
		overrides := 0
		for k := range f {
			if strings.HasSuffix(k, ".InstanceType") && strings.HasPrefix(k, "LaunchTemplateConfigs.1.Overrides.") {
				overrides++
			}
		}
		if overrides != 6 {
			t.Errorf("%d overrides, want 2 types × 3 zones", overrides)
		}

		// The launch template: IMDSv2, block devices, profile, groups, user data.
		lts := e.templates()
		if len(lts) != 1 || aws.ToString(lts[0].LaunchTemplateName) != inst.LaunchTemplate || !strings.HasPrefix(inst.LaunchTemplate, "joiner/"+testCluster+"/") {
			t.Fatalf("launch templates %+v, instance used %q", lts, inst.LaunchTemplate)
		}
		if lt := tagMap(lts[0].Tags); lt["kubernetes.io/cluster/"+testCluster] != "owned" || lt[TagNodeClass] != "kubean-aws-gpu" {
			t.Errorf("launch template tags %v", lt)
		}
		d := e.templateData(inst.LaunchTemplate)
		if m := d.MetadataOptions; m == nil || m.HttpTokens != ec2types.LaunchTemplateHttpTokensStateRequired || aws.ToInt32(m.HttpPutResponseHopLimit) != 1 || m.HttpEndpoint != "enabled" {
			t.Errorf("metadata options %+v: want IMDSv2 required, hop limit 1", d.MetadataOptions)
		}
		if len(d.BlockDeviceMappings) != 1 {
			t.Fatalf("block devices %+v", d.BlockDeviceMappings)
		}
		b := d.BlockDeviceMappings[0]
		if aws.ToString(b.DeviceName) != "/dev/xvda" || b.Ebs == nil || aws.ToInt32(b.Ebs.VolumeSize) != 200 || b.Ebs.VolumeType != "gp3" || !aws.ToBool(b.Ebs.Encrypted) || !aws.ToBool(b.Ebs.DeleteOnTermination) {
			t.Errorf("block device %+v ebs %+v: want /dev/xvda 200 GiB gp3 encrypted deleteOnTermination", b, b.Ebs)
		}
		// spec.role names a role; the profile is the one Joiner made for the class.
		wantProfile := InstanceProfileName(testCluster, testRegion, "kubean-aws-gpu")
		if d.IamInstanceProfile == nil || aws.ToString(d.IamInstanceProfile.Name) != wantProfile {
			t.Errorf("instance profile %+v, want %s", d.IamInstanceProfile, wantProfile)
		}
		e.wantProfile(wantProfile, testRole, "kubean-aws-gpu")
		if !slices.Equal(d.SecurityGroupIds, []string{e.sgNodes}) || aws.ToString(d.ImageId) != e.amiGPU {
			t.Errorf("groups %v image %s", d.SecurityGroupIds, aws.ToString(d.ImageId))
		}
		ud, err := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
		if err != nil {
			t.Fatal(err)
		}
		wantUD, err := bootstrap.Custom(bootstrap.Options{
			ClusterName: testCluster, ClusterEndpoint: testEndpoint, CABundle: testCA, ClusterCIDR: testCIDR,
			Labels: map[string]string{"node.lifecycle": "karpenter", "node.accelerator": "nvidia-gpu", karpenter.NodePoolLabelKey: "workload-gpu-l4"},
			Taints: gpuRequest(nc, "x").Taints, UserData: *nc.Spec.UserData,
			Custom: bootstrap.CustomValues{Token: bootstrap.TokenSource{SSMParameter: "/kubean/bootstrap-token"}, Region: testRegion, CACertHash: e.config().CACertHash},
		})
		if err != nil {
			t.Fatal(err)
		}
		if string(ud) != wantUD {
			t.Errorf("launch template user data:\n%s\nwant:\n%s", ud, wantUD)
		}
		if strings.Contains(string(ud), testToken) || !strings.Contains(string(ud), "aws ssm get-parameter --region 'us-east-1' --name '/kubean/bootstrap-token' --with-decryption") {
			t.Errorf("on-instance fetch expected, token must not be in user data:\n%s", ud)
		}
		if n := e.proxy.count("GetParameter"); n != 0 {
			t.Errorf("the token is fetched on the instance, yet Joiner read SSM %d times", n)
		}
	})
}

func itoa(i int) string { return string(rune('0' + i%10)) }

func TestLaunchOnDemandLowestPriceAndIMDSOverride(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		nc := e.loadClass("al2023.yaml")
		inst, err := e.provider().Launch(context.Background(), cpuRequest(nc, "general-1", []string{"m6i.large", "m6g.large"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		// lowest-price: awssim knows m6g.large is the cheaper; moto takes the first override.
		want := map[string]string{"moto": "m6i.large", "awssim": "m6g.large"}[e.kind]
		if inst.CapacityType != "on-demand" || inst.InstanceType != want {
			t.Fatalf("launched %+v, want on-demand %s", inst, want)
		}
		f := e.proxy.formsOf("CreateFleet")[0]
		if f.Get("OnDemandOptions.AllocationStrategy") != "lowest-price" || f.Get("TargetCapacitySpecification.DefaultTargetCapacityType") != "on-demand" || f.Get("SpotOptions.AllocationStrategy") != "" {
			t.Errorf("on-demand fleet options: %v", f)
		}
		// amd64 and arm64 options need two images, hence two launch templates in one fleet.
		if f.Get("LaunchTemplateConfigs.2.LaunchTemplateSpecification.LaunchTemplateName") == "" {
			t.Errorf("want a second launch template config for the arm64 option: %v", f)
		}
		if n := len(e.templates()); n != 2 {
			t.Errorf("%d launch templates, want one per image", n)
		}
		d := e.templateData(inst.LaunchTemplate)
		if aws.ToInt32(d.MetadataOptions.HttpPutResponseHopLimit) != 2 || d.MetadataOptions.HttpTokens != "required" {
			t.Errorf("class metadataOptions not applied: %+v", d.MetadataOptions)
		}
		if len(d.BlockDeviceMappings) != 1 || aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize) != 20 {
			t.Errorf("AL2023 default root volume: %+v", d.BlockDeviceMappings)
		}
		// Karpenter's default volume, as sent: /dev/xvda 20 GiB gp3 encrypted and
		// nothing else (deleteOnTermination comes from the AMI's own mapping).
		sent := e.proxy.formsOf("CreateLaunchTemplate")[0]
		bdm := map[string]string{}
		for k := range sent {
			if rest, ok := strings.CutPrefix(k, "LaunchTemplateData.BlockDeviceMapping.1."); ok {
				bdm[rest] = sent.Get(k)
			}
		}
		if want := map[string]string{"DeviceName": "/dev/xvda", "Ebs.VolumeSize": "20", "Ebs.VolumeType": "gp3", "Ebs.Encrypted": "true"}; !maps.Equal(bdm, want) {
			t.Errorf("default block device sent as %v, want %v", bdm, want)
		}
		ud, _ := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
		for _, want := range []string{"apiVersion: node.eks.aws/v1alpha1", "maxPods: 29", "--node-labels=karpenter.sh/nodepool=workload-general", "name: " + testCluster} {
			if !strings.Contains(string(ud), want) {
				t.Errorf("AL2023 user data lacks %q:\n%s", want, ud)
			}
		}
	})
}

func TestLaunchReusesTemplateAcrossInvocations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("seed004-bottlerocket.yaml")
		req := cpuRequest(nc, "default-1", []string{"m6i.large"}, nil, "spot", "on-demand")
		req.NodePool = "default"
		first, err := e.provider().Launch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		req.NodeClaim = "default-2"
		second, err := e.provider().Launch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if first.LaunchTemplate != second.LaunchTemplate {
			t.Errorf("equal content must reuse the template: %s vs %s", first.LaunchTemplate, second.LaunchTemplate)
		}
		if n := e.proxy.count("CreateLaunchTemplate"); n != 1 {
			t.Errorf("CreateLaunchTemplate called %d times, want 1", n)
		}
		if n := e.proxy.count("DescribeLaunchTemplates"); n != 2 {
			t.Errorf("DescribeLaunchTemplates called %d times, want once per invocation", n)
		}
		if tags := tagMap(e.instance(second.ID).Tags); tags["Name"] != "joiner-test-karpenter-node" || tags["karpenter.sh/discovery"] != testCluster {
			t.Errorf("seed 004's class tags (Name included) must be applied: %v", tags)
		}
		d := e.templateData(first.LaunchTemplate)
		if len(d.BlockDeviceMappings) != 2 {
			t.Errorf("Bottlerocket default volumes: %+v", d.BlockDeviceMappings)
		}
		ud, _ := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
		if !strings.Contains(string(ud), "cluster-name = 'joiner-test'") || !strings.Contains(string(ud), "'karpenter.sh/unregistered' = [':NoExecute']") {
			t.Errorf("Bottlerocket user data:\n%s", ud)
		}
	})
}

func TestLaunchTemplateAlreadyExistsRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.proxy.ltExistsRace = true
		nc := e.loadClass("al2023.yaml")
		inst, err := e.provider().Launch(context.Background(), cpuRequest(nc, "race-1", []string{"m6i.large"}, nil))
		if err != nil {
			t.Fatalf("a template created concurrently must be used, got %v", err)
		}
		if lts := e.templates(); len(lts) != 1 || aws.ToString(lts[0].LaunchTemplateName) != inst.LaunchTemplate {
			t.Errorf("templates %+v, used %s", lts, inst.LaunchTemplate)
		}
		if n := e.proxy.count("DescribeLaunchTemplates"); n != 2 {
			t.Errorf("want a second DescribeLaunchTemplates after AlreadyExists, got %d", n)
		}
	})
}

// TestLaunchCustomTokenReadOnInstance: the kubeadm token stays where the class's
// annotations say (SSM SecureString or Secrets Manager). Joiner never reads it:
// the launch template carries the command the node runs to read it with its own
// role, and neither the template nor the logs hold the token.
func TestLaunchCustomTokenReadOnInstance(t *testing.T) {
	for _, tc := range []struct {
		name       string
		annotation map[string]string
		call, cmd  string
	}{
		{"ssm", map[string]string{bootstrap.AnnotationTokenParameter: "/kubean/bootstrap-token"}, "GetParameter",
			"aws ssm get-parameter --region 'us-east-1' --name '/kubean/bootstrap-token' --with-decryption"},
		{"secretsmanager", map[string]string{bootstrap.AnnotationTokenSecret: "kubean/bootstrap-token"}, "GetSecretValue",
			"aws secretsmanager get-secret-value --region 'us-east-1' --secret-id 'kubean/bootstrap-token'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, e *env) {
				var logs bytes.Buffer
				p := e.provider(func(c *Config) {
					c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				})
				nc := e.loadClass("seed002-cpu.yaml")
				nc.Annotations = tc.annotation
				inst, err := p.Launch(context.Background(), cpuRequest(nc, "general-0", []string{"m6i.large"}, nil))
				if err != nil {
					t.Fatal(err)
				}
				d := e.templateData(inst.LaunchTemplate)
				if len(d.BlockDeviceMappings) != 0 {
					t.Errorf("a Custom class without blockDeviceMappings keeps the AMI's volumes; got %+v", d.BlockDeviceMappings)
				}
				ud, _ := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
				if strings.Contains(string(ud), testToken) || !strings.Contains(string(ud), tc.cmd) ||
					!strings.Contains(string(ud), "--token ${JOINER_BOOTSTRAP_TOKEN} --discovery-token-ca-cert-hash sha256:"+strings.Repeat("0123456789abcdef", 4)) {
					t.Errorf("user data must read the token on the node and never hold it:\n%s", ud)
				}
				if n := e.proxy.count(tc.call); n != 0 {
					t.Errorf("Joiner called %s %d times; the node reads the token, not Joiner", tc.call, n)
				}
				if strings.Contains(logs.String(), testToken) {
					t.Errorf("the bootstrap token appeared in the logs")
				}
				if !strings.Contains(logs.String(), `"level":"INFO"`) {
					t.Errorf("expected JSON logs with a level field, got %q", logs.String())
				}
			})
		})
	}
}

func TestLaunchRejectsBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		cases := []struct {
			name string
			req  LaunchRequest
			want string
		}{
			{"no claim", LaunchRequest{NodePool: "p", NodeClass: nc, InstanceTypes: []string{"m6i.large"}}, "NodeClaim name is required"},
			{"no options", cpuRequest(nc, "c", nil, nil), "no instance type options"},
			{"unknown type", cpuRequest(nc, "c", []string{"m99.huge"}, nil), "m99.huge"},
			{"zone without subnet", cpuRequest(nc, "c", []string{"m6i.large"}, []string{"us-east-1f"}), "no usable subnet in the allowed zones [us-east-1f]"},
			{"reserved only", cpuRequest(nc, "c", []string{"m6i.large"}, nil, "reserved"), "has no capacityReservationSelectorTerms"},
		}
		for _, tc := range cases {
			_, err := e.provider().Launch(ctx, tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
			}
		}
		custom := e.loadClass("seed002-cpu.yaml")
		custom.Spec.AMISelectorTerms = []karpenter.AMISelectorTerm{{ID: e.amiARM}}
		_, err := e.provider().Launch(ctx, cpuRequest(custom, "c", []string{"m6i.large"}, nil))
		if err == nil || !strings.Contains(err.Error(), "m6i.large (no amd64 image)") {
			t.Errorf("no fitting image: %v", err)
		}
		bad := e.loadClass("seed002-cpu.yaml")
		bad.Spec.UserData = aws.String("kubeadm join {{ .ClusterEndpont }}")
		_, err = e.provider().Launch(ctx, cpuRequest(bad, "c", []string{"m6i.large"}, nil))
		if err == nil || !strings.Contains(err.Error(), "unknown placeholder {{ .ClusterEndpont }}") {
			t.Errorf("unknown placeholder: %v", err)
		}
		if n := e.proxy.count("CreateFleet"); n != 0 {
			t.Errorf("bad input reached CreateFleet %d times", n)
		}
		if got := e.runningInstances(); len(got) != 0 {
			t.Errorf("bad input launched %d instances", len(got))
		}
	})
}

func TestICEFallbackAcrossTypes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.setICE("m6i.large", "us-east-1a", "on-demand")
		nc := e.loadClass("al2023.yaml")
		inst, err := e.provider().Launch(context.Background(), cpuRequest(nc, "t-1", []string{"m6i.large", "m7i.large"}, []string{"us-east-1a"}))
		if err != nil {
			t.Fatal(err)
		}
		if inst.InstanceType != "m7i.large" || inst.Zone != "us-east-1a" || inst.FleetCalls != 1 {
			t.Errorf("launched %+v: want m7i.large in us-east-1a from one fleet", inst)
		}
		if !e.cache.IsUnavailable("m6i.large", "us-east-1a", "on-demand") {
			t.Error("the ICE'd offering is not marked unavailable")
		}
	})
}

func TestICEFallbackAcrossZones(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.setICE("m6i.large", "us-east-1a", "on-demand")
		nc := e.loadClass("al2023.yaml")
		inst, err := e.provider().Launch(context.Background(), cpuRequest(nc, "z-1", []string{"m6i.large"}, []string{"us-east-1a", "us-east-1b"}))
		if err != nil {
			t.Fatal(err)
		}
		if inst.InstanceType != "m6i.large" || inst.Zone != "us-east-1b" || inst.SubnetID != e.subnets["us-east-1b"] {
			t.Errorf("launched %+v: want m6i.large in us-east-1b", inst)
		}
	})
}

func TestICEFallbackAcrossCapacityTypes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.setICE("m6i.large", "us-east-1a", "spot")
		nc := e.loadClass("al2023.yaml")
		req := cpuRequest(nc, "ct-1", []string{"m6i.large"}, []string{"us-east-1a"}, "spot", "on-demand")
		inst, err := e.provider().Launch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if inst.CapacityType != "on-demand" || inst.FleetCalls != 2 {
			t.Fatalf("launched %+v: want on-demand after a failed spot fleet (2 calls)", inst)
		}
		forms := e.proxy.formsOf("CreateFleet")
		if len(forms) != 2 || forms[0].Get("TargetCapacitySpecification.DefaultTargetCapacityType") != "spot" || forms[1].Get("TargetCapacitySpecification.DefaultTargetCapacityType") != "on-demand" {
			t.Errorf("fleet sequence wrong: %d calls", len(forms))
		}
		if e.instance(inst.ID).InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
			t.Error("the instance is spot")
		}

		// A warm container's next invocation skips the known-short spot pool.
		req.NodeClaim = "ct-2"
		inst, err = e.provider().Launch(ctx, req)
		if err != nil || inst.CapacityType != "on-demand" || inst.FleetCalls != 1 {
			t.Fatalf("second launch %+v %v: want straight to on-demand", inst, err)
		}

		// After the TTL spot is tried again (and now it has capacity).
		e.clearICE([3]string{"m6i.large", "us-east-1a", "spot"})
		e.clock.Advance(UnavailableTTL + time.Second)
		req.NodeClaim = "ct-3"
		inst, err = e.provider().Launch(ctx, req)
		if err != nil || inst.CapacityType != "spot" {
			t.Fatalf("after the TTL: %+v %v, want spot", inst, err)
		}
	})
}

// A spot shortage in the engine's zone goes to spot in the NodeClaim's other
// zones before on-demand anywhere (Karpenter launches spot wherever the
// NodeClaim allows it), and on-demand, when spot is short everywhere, starts
// in the engine's zone again.
func TestICESpotElsewhereBeforeOnDemand(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.setICE("m6i.large", "us-east-1a", "spot")
		nc := e.loadClass("al2023.yaml")
		req := cpuRequest(nc, "sp-1", []string{"m6i.large"}, []string{"us-east-1a"}, "spot", "on-demand")
		req.FallbackZones = []string{"us-east-1b"}
		inst, err := e.provider().Launch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if inst.CapacityType != "spot" || inst.Zone != "us-east-1b" || inst.FleetCalls != 2 {
			t.Fatalf("launched %+v: want spot in us-east-1b after the spot fleet in us-east-1a (2 calls)", inst)
		}
		e.setICE("m6i.large", "us-east-1b", "spot")
		req.NodeClaim = "sp-2"
		inst, err = e.provider().Launch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if inst.CapacityType != "on-demand" || inst.Zone != "us-east-1a" {
			t.Fatalf("launched %+v: want on-demand in the engine's zone us-east-1a with spot short in both", inst)
		}
		for i, f := range e.proxy.formsOf("CreateFleet") {
			if strings.Contains(f.Encode(), "us-east-1b") && f.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "on-demand" {
				t.Errorf("fleet %d asked for on-demand in us-east-1b before the engine's zone had none", i)
			}
		}
	})
}

func TestICEEverywhereIsInsufficientCapacity(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, z := range []string{"us-east-1a", "us-east-1b"} {
			for _, ct := range []string{"spot", "on-demand"} {
				e.setICE("m6i.large", z, ct)
			}
		}
		nc := e.loadClass("al2023.yaml")
		inst, err := e.provider().Launch(context.Background(), cpuRequest(nc, "none-1", []string{"m6i.large"}, []string{"us-east-1a", "us-east-1b"}, "spot", "on-demand"))
		if !errors.Is(err, ErrInsufficientCapacity) {
			t.Fatalf("err = %v, want ErrInsufficientCapacity", err)
		}
		if inst.FleetCalls != 2 || !strings.Contains(err.Error(), "InsufficientInstanceCapacity×2") {
			t.Errorf("calls %d, err %v: want one spot and one on-demand fleet", inst.FleetCalls, err)
		}
		if got := e.runningInstances(); len(got) != 0 {
			t.Errorf("%d instances exist after a failed launch", len(got))
		}
	})
}

func TestThrottlingIsRetried(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		e.throttle("CreateFleet", 2)
		e.throttle("DescribeSubnets", 2)
		inst, err := e.provider().Launch(ctx, cpuRequest(nc, "th-1", []string{"m6i.large"}, nil))
		if err != nil {
			t.Fatalf("two RequestLimitExceeded answers must be retried: %v", err)
		}
		if n := e.proxy.count("CreateFleet"); n != 3 {
			t.Errorf("CreateFleet reached the wire %d times, want 2 throttled + 1", n)
		}
		if n := e.proxy.count("DescribeSubnets"); n != 3 {
			t.Errorf("DescribeSubnets reached the wire %d times, want 3", n)
		}
		forms := e.proxy.formsOf("CreateFleet")
		if forms[0].Get("ClientToken") != forms[2].Get("ClientToken") {
			t.Error("a retried CreateFleet must carry the same idempotency token")
		}
		if got := e.runningInstances(); len(got) != 1 || aws.ToString(got[0].InstanceId) != inst.ID {
			t.Errorf("want exactly the one instance, got %d", len(got))
		}

		// Beyond the retryer's bound the error surfaces, with its code.
		e.throttle("CreateFleet", 100)
		_, err = e.provider().Launch(ctx, cpuRequest(nc, "th-2", []string{"m6i.large"}, nil))
		if ErrorCode(err) != "RequestLimitExceeded" {
			t.Fatalf("err = %v, want RequestLimitExceeded after the retries", err)
		}
		if n := e.proxy.count("CreateFleet"); n != 3+4 {
			t.Errorf("CreateFleet attempts %d, want 4 more (MaxAttempts)", n-3)
		}
	})
}

func TestPartialFulfilmentKeepsOneInstance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		e.proxy.extraInstances = 2
		p := e.provider()
		inst, err := p.Launch(ctx, cpuRequest(nc, "pf-1", []string{"m6i.large"}, []string{"us-east-1a"}))
		if err != nil {
			t.Fatal(err)
		}
		if len(inst.ExcessTerminated) != 2 || len(inst.ExcessLeft) != 0 {
			t.Fatalf("want 2 extra instances terminated, got %+v", inst)
		}
		running := e.runningInstances()
		if len(running) != 1 || aws.ToString(running[0].InstanceId) != inst.ID {
			t.Fatalf("running instances %d, want only the kept one", len(running))
		}
		for _, id := range inst.ExcessTerminated {
			i := e.instance(id)
			if i.State.Name != ec2types.InstanceStateNameTerminated && i.State.Name != ec2types.InstanceStateNameShuttingDown {
				t.Errorf("extra %s is %s", id, i.State.Name)
			}
			tags := tagMap(i.Tags)
			if tags["kubernetes.io/cluster/"+testCluster] != "owned" || tags[TagNodeClaim] != "pf-1" {
				t.Errorf("extra %s is not tagged: %v", id, tags)
			}
		}
		owned, err := p.ListOwned(ctx)
		if err != nil || len(owned) != 1 || owned[0].ID != inst.ID || owned[0].NodeClaim != "pf-1" {
			t.Errorf("ListOwned = %+v, %v", owned, err)
		}
	})
}

func TestFleetInstancePlusErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		nc := e.loadClass("al2023.yaml")
		e.proxy.extraErrors = []fleetErr{{"InsufficientInstanceCapacity", "m7i.large", "us-east-1b", e.subnets["us-east-1b"], "on-demand"}}
		inst, err := e.provider().Launch(context.Background(), cpuRequest(nc, "pe-1", []string{"m6i.large", "m7i.large"}, []string{"us-east-1a", "us-east-1b"}))
		if err != nil {
			t.Fatal(err)
		}
		if inst.ID == "" || len(e.runningInstances()) != 1 {
			t.Fatalf("want one instance: %+v", inst)
		}
		if !e.cache.IsUnavailable("m7i.large", "us-east-1b", "on-demand") {
			t.Error("the error reported beside the instance must still mark its offering")
		}
		if tags := tagMap(e.instance(inst.ID).Tags); tags[TagNodePool] != "workload-general" {
			t.Errorf("kept instance tags %v", tags)
		}
	})
}

func TestUserDataLabelsDropOfferingLabels(t *testing.T) {
	got := UserDataLabels(map[string]string{
		"team": "a", corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "z", karpenter.CapacityTypeLabelKey: "spot",
		karpenter.LabelInstanceCPU: "2", karpenter.NodePoolLabelKey: "p", karpenter.NodeClaimLabelKey: "c", karpenter.LabelTopologyZoneID: "use1-az1",
	})
	if len(got) != 2 || got["team"] != "a" || got[karpenter.NodePoolLabelKey] != "p" {
		t.Errorf("got %v", got)
	}
}

// TestConfirmLaunchedChecksTagsInOneRead: a launch makes no read of its own; one
// DescribeInstances afterwards checks every launch's tags and puts back any that
// are missing, and a second call has nothing left to check.
func TestConfirmLaunchedChecksTagsInOneRead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		p := e.provider()
		var ids []string
		for _, claim := range []string{"general-a", "general-b"} {
			inst, err := p.Launch(ctx, cpuRequest(nc, claim, []string{"m6i.large"}, nil))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, inst.ID)
		}
		if n := e.proxy.count("DescribeInstances"); n != 0 {
			t.Errorf("%d DescribeInstances during the launches, want none", n)
		}
		owner := "kubernetes.io/cluster/" + testCluster
		_, err := e.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{ids[0]},
			Tags: []ec2types.Tag{{Key: aws.String(owner)}, {Key: aws.String(TagNodeClaim)}}})
		e.must(err)
		if err := p.ConfirmLaunched(ctx); err != nil {
			t.Fatal(err)
		}
		if n := e.proxy.count("DescribeInstances"); n != 1 {
			t.Errorf("%d DescribeInstances to confirm two launches, want 1", n)
		}
		for i, id := range ids {
			tags := tagMap(e.instance(id).Tags)
			if tags[owner] != "owned" || tags[TagNodeClaim] != []string{"general-a", "general-b"}[i] {
				t.Errorf("instance %s tags after ConfirmLaunched: %v", id, tags)
			}
		}
		if n := e.proxy.count("CreateTags"); n != 1 {
			t.Errorf("%d CreateTags, want 1 (for the instance that lost its tags)", n)
		}
		if err := p.ConfirmLaunched(ctx); err != nil || e.proxy.count("DescribeInstances") != 1 {
			t.Errorf("second ConfirmLaunched: error %v, %d DescribeInstances in all; want nothing more to check", err, e.proxy.count("DescribeInstances"))
		}
	})
}

// The engine picked us-east-1a; every option is short there. The same Launch
// tries the NodeClaim's other zones before giving up, and the cache learns the
// ICE'd offerings, so the next invocation does not ask for them again.
func TestICEFallsBackToTheNodeClaimsOtherZones(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, it := range []string{"m6i.large", "m7i.large"} {
			e.setICE(it, "us-east-1a", "on-demand")
		}
		nc := e.loadClass("al2023.yaml")
		req := cpuRequest(nc, "z-1", []string{"m6i.large", "m7i.large"}, []string{"us-east-1a"})
		req.FallbackZones = []string{"us-east-1a", "us-east-1c"}
		inst, err := e.provider().Launch(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Zone != "us-east-1c" {
			t.Errorf("launched in %s, want the NodeClaim's other allowed zone us-east-1c (1b is not allowed)", inst.Zone)
		}
		for _, it := range []string{"m6i.large", "m7i.large"} {
			if !e.cache.IsUnavailable(it, "us-east-1a", "on-demand") {
				t.Errorf("%s in us-east-1a is not marked unavailable", it)
			}
		}
		// Without fallback zones the same shortage is an insufficient-capacity error.
		req.NodeClaim, req.FallbackZones = "z-2", nil
		if _, err := e.provider().Launch(context.Background(), req); !errors.Is(err, ErrInsufficientCapacity) {
			t.Errorf("without fallback zones: %v, want ErrInsufficientCapacity", err)
		}
	})
}

// TestReservedFirstThenOnDemand: a p5-style training pool allowing reserved and
// on-demand capacity, its class selecting a targeted reservation by tags. The
// first launch goes into the reservation (in a zone other than the engine's
// pick, which the NodeClaim allows), its launch template targeting it; once the
// reservation is full the next launch falls back to on-demand in the same
// invocation. awssim only: moto's CreateFleet ignores reservations.
func TestReservedFirstThenOnDemand(t *testing.T) {
	e := newEnvFor(t, "awssim")
	ctx := context.Background()
	nc := e.trainingClass(
		awssim.CapacityReservation{ID: "cr-0a1b2c3d4e5f60718", InstanceType: "p5.48xlarge", Zone: "us-east-1b", TotalCount: 1, Tags: map[string]string{"purpose": "training"}},
		awssim.CapacityReservation{ID: "cr-0b1b2c3d4e5f60718", InstanceType: "p5.48xlarge", Zone: "us-east-1b", TotalCount: 4, Tags: map[string]string{"purpose": "inference"}})
	req := func(claim string) LaunchRequest {
		return LaunchRequest{NodeClaim: claim, NodePool: "training", NodeClass: nc, InstanceTypes: []string{"p5.48xlarge"},
			Zones: []string{"us-east-1a"}, FallbackAnyZone: true,
			CapacityTypes: []string{karpenter.CapacityTypeReserved, karpenter.CapacityTypeOnDemand},
			Labels:        map[string]string{karpenter.NodePoolLabelKey: "training"}}
	}
	p := e.provider()
	first, err := p.Launch(ctx, req("training-1"))
	if err != nil {
		t.Fatal(err)
	}
	if first.CapacityType != karpenter.CapacityTypeReserved || first.CapacityReservationID != "cr-0a1b2c3d4e5f60718" ||
		first.CapacityReservationType != "default" || first.Zone != "us-east-1b" || first.InstanceType != "p5.48xlarge" {
		t.Fatalf("first launch %+v: want p5.48xlarge reserved in cr-0a1b2c3d4e5f60718 (us-east-1b)", first)
	}
	in, _ := e.sim.Instance(first.ID)
	if in.CapacityReservationID != "cr-0a1b2c3d4e5f60718" {
		t.Errorf("instance %s: reservation %q, want it in the training reservation", first.ID, in.CapacityReservationID)
	}
	if lt := e.templateData(first.LaunchTemplate); lt.CapacityReservationSpecification == nil || lt.CapacityReservationSpecification.CapacityReservationTarget == nil ||
		aws.ToString(lt.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId) != "cr-0a1b2c3d4e5f60718" {
		t.Errorf("launch template %s does not target the reservation: %+v", first.LaunchTemplate, lt.CapacityReservationSpecification)
	}
	second, err := p.Launch(ctx, req("training-2"))
	if err != nil {
		t.Fatal(err)
	}
	if second.CapacityType != karpenter.CapacityTypeOnDemand || second.CapacityReservationID != "" || second.Zone != "us-east-1a" {
		t.Errorf("second launch %+v: want on-demand in us-east-1a, the reservation being full (and the inference one not selected)", second)
	}
	// Reserved only, with the reservation full: insufficient capacity, nothing launched.
	only := req("training-3")
	only.CapacityTypes = []string{karpenter.CapacityTypeReserved}
	if inst, err := e.provider().Launch(ctx, only); !errors.Is(err, ErrInsufficientCapacity) || inst.ID != "" {
		t.Errorf("reserved only, reservation full: %+v, %v; want ErrInsufficientCapacity", inst, err)
	}
}

// trainingClass seeds the simulator with reservations and returns seed 002's GPU
// class selecting those tagged purpose=training.
func (e *env) trainingClass(crs ...awssim.CapacityReservation) *karpenter.EC2NodeClass {
	e.t.Helper()
	if err := e.sim.Apply(awssim.Seed{CapacityReservations: crs}); err != nil {
		e.t.Fatal(err)
	}
	nc := e.loadClass("seed002-gpu.yaml")
	nc.Spec.CapacityReservationSelectorTerms = []karpenter.CapacityReservationSelectorTerm{{Tags: map[string]string{"purpose": "training"}}}
	return nc
}

// TestLaunchIntoPlannedReservation: a node the engine planned in a reservation
// (LaunchRequest.CapacityReservationID) goes into that reservation, not another
// of the same type the class also selects; once it is full the launch fails with
// ErrInsufficientCapacity, launches nothing on-demand, and the unavailable
// cache remembers that reservation (the next plan leaves it out).
func TestLaunchIntoPlannedReservation(t *testing.T) {
	e := newEnvFor(t, "awssim")
	ctx := context.Background()
	const planned, other = "cr-0b1b2c3d4e5f60718", "cr-0a1b2c3d4e5f60718"
	nc := e.trainingClass(
		awssim.CapacityReservation{ID: other, InstanceType: "p5.48xlarge", Zone: "us-east-1b", TotalCount: 4, Tags: map[string]string{"purpose": "training"}},
		awssim.CapacityReservation{ID: planned, InstanceType: "p5.48xlarge", Zone: "us-east-1b", TotalCount: 1, Tags: map[string]string{"purpose": "training"}})
	req := func(claim string) LaunchRequest {
		return LaunchRequest{NodeClaim: claim, NodePool: "training", NodeClass: nc, InstanceTypes: []string{"p5.48xlarge"},
			Zones: []string{"us-east-1b"}, CapacityTypes: []string{karpenter.CapacityTypeReserved}, CapacityReservationID: planned,
			Labels: map[string]string{karpenter.NodePoolLabelKey: "training"}}
	}
	p := e.provider()
	first, err := p.Launch(ctx, req("training-1"))
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := e.sim.Instance(first.ID); first.CapacityReservationID != planned || in.CapacityReservationID != planned {
		t.Fatalf("launch %+v (instance in %q): want it in the planned reservation %s", first, in.CapacityReservationID, planned)
	}
	before := len(e.sim.State().Instances)
	second, err := p.Launch(ctx, req("training-2"))
	if !errors.Is(err, ErrInsufficientCapacity) || second.ID != "" || len(e.sim.State().Instances) != before {
		t.Fatalf("planned reservation full: %+v, %v; want ErrInsufficientCapacity and nothing launched (not the other reservation, not on-demand)", second, err)
	}
	if !strings.Contains(err.Error(), planned) {
		t.Errorf("error %q does not name the reservation", err)
	}
	if !p.Unavailable().IsUnavailable("p5.48xlarge", "us-east-1b", ReservedCapacityType(planned)) ||
		p.Unavailable().IsUnavailable("p5.48xlarge", "us-east-1b", ReservedCapacityType(other)) {
		t.Error("want the full reservation, and only it, marked unavailable")
	}
}
