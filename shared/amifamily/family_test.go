package amifamily

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func TestAliasParameterPaths(t *testing.T) {
	paths := func(alias string) []string {
		a, err := ParseAlias(alias)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range a.Parameters("/aws/service", "1.31") {
			out = append(out, p.Arch+" "+p.Variant+" "+p.Path)
		}
		return out
	}
	want := map[string][]string{
		"al2023@latest": {
			"amd64 standard /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id",
			"amd64 nvidia /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
			"amd64 neuron /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/neuron/recommended/image_id",
			"arm64 standard /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/recommended/image_id",
			"arm64 nvidia /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/nvidia/recommended/image_id",
		},
		"al2023@v20240807": {
			"amd64 standard /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.31-v20240807/image_id",
			"amd64 nvidia /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.31-v20240807/image_id",
			"amd64 neuron /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/neuron/amazon-eks-node-al2023-x86_64-neuron-1.31-v20240807/image_id",
			"arm64 standard /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.31-v20240807/image_id",
			"arm64 nvidia /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.31-v20240807/image_id",
		},
		"bottlerocket@v1.20.1": {
			"amd64 standard /aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.20.1/image_id",
			"amd64 nvidia /aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/1.20.1/image_id",
			"amd64 neuron /aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.20.1/image_id",
			"arm64 standard /aws/service/bottlerocket/aws-k8s-1.31/arm64/1.20.1/image_id",
			"arm64 nvidia /aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/1.20.1/image_id",
		},
		"al2@latest": {
			"amd64 standard /aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id",
			"amd64 nvidia /aws/service/eks/optimized-ami/1.31/amazon-linux-2-gpu/recommended/image_id",
			"amd64 neuron /aws/service/eks/optimized-ami/1.31/amazon-linux-2-gpu/recommended/image_id",
			"arm64 standard /aws/service/eks/optimized-ami/1.31/amazon-linux-2-arm64/recommended/image_id",
		},
		"al2@v20240807": {
			"amd64 standard /aws/service/eks/optimized-ami/1.31/amazon-linux-2/amazon-eks-node-1.31-v20240807/image_id",
			"amd64 nvidia /aws/service/eks/optimized-ami/1.31/amazon-linux-2-gpu/amazon-eks-gpu-node-1.31-v20240807/image_id",
			"amd64 neuron /aws/service/eks/optimized-ami/1.31/amazon-linux-2-gpu/amazon-eks-gpu-node-1.31-v20240807/image_id",
			"arm64 standard /aws/service/eks/optimized-ami/1.31/amazon-linux-2-arm64/amazon-eks-arm64-node-1.31-v20240807/image_id",
		},
	}
	for alias, w := range want {
		if got := paths(alias); !slices.Equal(got, w) {
			t.Errorf("%s:\n got %q\nwant %q", alias, got, w)
		}
	}
	for bad, msg := range map[string]string{
		"al2023":             "want family@version",
		"al2023@":            "want family@version",
		"windows2022@latest": "Windows nodes are not supported",
		"rhel@1":             `unknown family "rhel"`,
	} {
		if _, err := ParseAlias(bad); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("alias %q: err %v, want it to mention %q", bad, err, msg)
		}
	}
}

func TestGet(t *testing.T) {
	for name, want := range map[string]string{
		"": karpenter.AMIFamilyAL2023, "AL2": "AL2", "Bottlerocket": "Bottlerocket", "Custom": "Custom", "Windows2019": "Windows2019", "Windows2022": "Windows2022",
	} {
		f, err := Get(name)
		if err != nil || f.Name() != want {
			t.Errorf("Get(%q) = %v, %v; want %s", name, f, err, want)
		}
	}
	if _, err := Get("Ubuntu"); err == nil || !strings.Contains(err.Error(), `amiFamily "Ubuntu"`) {
		t.Errorf("Get(Ubuntu): %v", err)
	}
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		spec karpenter.EC2NodeClassSpec
		want string
	}{
		{karpenter.EC2NodeClassSpec{}, karpenter.AMIFamilyAL2023},
		{karpenter.EC2NodeClassSpec{AMISelectorTerms: []karpenter.AMISelectorTerm{{Alias: "bottlerocket@latest"}}}, karpenter.AMIFamilyBottlerocket},
		{karpenter.EC2NodeClassSpec{AMISelectorTerms: []karpenter.AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}}, karpenter.AMIFamilyCustom},
		{karpenter.EC2NodeClassSpec{AMIFamily: ptr("AL2"), AMISelectorTerms: []karpenter.AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}}, karpenter.AMIFamilyAL2},
	} {
		f, err := Of(&karpenter.EC2NodeClass{Spec: tc.spec})
		if err != nil || f.Name() != tc.want {
			t.Errorf("Of(%+v) = %v, %v; want %s", tc.spec, f, err, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestDefaultBlockDeviceMappings checks the volumes Karpenter documents per
// family (docs/concepts/nodeclasses.md, spec.blockDeviceMappings) and the
// ephemeral device the catalog sizes ephemeral-storage from.
func TestDefaultBlockDeviceMappings(t *testing.T) {
	type vol struct{ dev, size string }
	for _, tc := range []struct {
		family    string
		want      []vol
		ephemeral string
		size      string
	}{
		{"AL2023", []vol{{"/dev/xvda", "20Gi"}}, "/dev/xvda", "20Gi"},
		{"AL2", []vol{{"/dev/xvda", "20Gi"}}, "/dev/xvda", "20Gi"},
		{"Bottlerocket", []vol{{"/dev/xvda", "4Gi"}, {"/dev/xvdb", "20Gi"}}, "/dev/xvdb", "20Gi"},
		{"Windows2022", []vol{{"/dev/sda1", "50Gi"}}, "/dev/sda1", "50Gi"},
		{"Custom", nil, "", "20Gi"},
	} {
		f, _ := Get(tc.family)
		var got []vol
		for _, m := range f.DefaultBlockDeviceMappings() {
			if *m.EBS.VolumeType != "gp3" || !*m.EBS.Encrypted {
				t.Errorf("%s: %s is %s encrypted=%v, want gp3 encrypted", tc.family, *m.DeviceName, *m.EBS.VolumeType, *m.EBS.Encrypted)
			}
			// Karpenter's DefaultEBS sets no deleteOnTermination (the AMI's mapping
			// decides); Joiner used to send true, so its templates differed.
			if m.EBS.DeleteOnTermination != nil || m.EBS.IOPS != nil || m.EBS.Throughput != nil || m.EBS.KMSKeyID != nil || m.RootVolume {
				t.Errorf("%s: %s carries settings Karpenter's defaults do not: %+v", tc.family, *m.DeviceName, m.EBS)
			}
			got = append(got, vol{*m.DeviceName, m.EBS.VolumeSize.String()})
		}
		if !slices.Equal(got, tc.want) || f.EphemeralBlockDevice() != tc.ephemeral {
			t.Errorf("%s: volumes %v ephemeral %q, want %v %q", tc.family, got, f.EphemeralBlockDevice(), tc.want, tc.ephemeral)
		}
		if s := DefaultEphemeralVolumeSize(f); s.String() != tc.size {
			t.Errorf("%s: default ephemeral size %s, want %s", tc.family, s.String(), tc.size)
		}
	}
	// Callers may change what they get: each call returns fresh mappings.
	f, _ := Get("AL2023")
	*f.DefaultBlockDeviceMappings()[0].DeviceName = "/dev/changed"
	if d := *f.DefaultBlockDeviceMappings()[0].DeviceName; d != "/dev/xvda" {
		t.Errorf("defaults were shared: %s", d)
	}
}

// TestUserDataFormat checks each family renders with its agent's format.
func TestUserDataFormat(t *testing.T) {
	o := bootstrap.Options{
		ClusterName: "c", ClusterEndpoint: "https://k.example.com:6443", ClusterCIDR: "10.100.0.0/16",
		CABundle: base64.StdEncoding.EncodeToString([]byte("ca")), MaxPods: 29,
		Labels: map[string]string{"team": "a"}, Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		UserData: "#!/bin/bash\necho {{ .ClusterName }}\n",
	}
	for family, format := range map[string]func(bootstrap.Options) (string, error){
		"AL2023": bootstrap.Nodeadm, "AL2": bootstrap.EKS, "Custom": bootstrap.Custom,
	} {
		f, _ := Get(family)
		got, err := f.UserData(o)
		want, werr := format(o)
		if err != nil || werr != nil || got != want {
			t.Errorf("%s: user data %q (%v), want %q (%v)", family, got, err, want, werr)
		}
	}
	br := o
	br.UserData = "[settings.kubernetes]\nallowed-unsafe-sysctls = [\"net.core.somaxconn\"]\n"
	got, err := Bottlerocket{}.UserData(br)
	want, _ := bootstrap.Bottlerocket(br)
	if err != nil || got != want {
		t.Errorf("Bottlerocket: %q (%v), want %q", got, err, want)
	}
	for _, name := range []string{"Windows2019", "Windows2022"} {
		f, _ := Get(name)
		if _, err := f.UserData(o); err == nil || !strings.Contains(err.Error(), "amiFamily "+name+": Windows nodes are not supported") {
			t.Errorf("%s user data: %v", name, err)
		}
		if f.Supported() == nil || f.ImageParameters("/aws/service", "1.31", "latest") != nil {
			t.Errorf("%s must say it is unsupported and resolve no alias", name)
		}
	}
}

// TestFeatureFlags pins Karpenter's flags per family (amifamily's FeatureFlags
// methods), which decide max pods and kube-reserved memory.
func TestFeatureFlags(t *testing.T) {
	def := FeatureFlags{UsesENILimitedMemoryOverhead: true, PodsPerCoreEnabled: true, SupportsENILimitedPodDensity: true, ShellUserData: true}
	custom := def
	custom.UserDataIsBootstrap = true
	for name, want := range map[string]FeatureFlags{
		"AL2023": def, "AL2": def, "Custom": custom,
		"Bottlerocket": {SupportsENILimitedPodDensity: true},
		"Windows2022":  {PodsPerCoreEnabled: true},
	} {
		f, _ := Get(name)
		if got := f.FeatureFlags(); got != want {
			t.Errorf("%s: flags %+v, want %+v", name, got, want)
		}
	}
}
