package amifamily

import (
	"fmt"
	"strings"

	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Bottlerocket is joined by its own TOML settings: labels, taints and max-pods
// are settings.kubernetes keys (node-labels, node-taints, max-pods).
type Bottlerocket struct{}

// Name implements Family.
func (Bottlerocket) Name() string { return karpenter.AMIFamilyBottlerocket }

// Supported implements Family.
func (Bottlerocket) Supported() error { return nil }

// ImageParameters implements Family: standard and nvidia images for both
// architectures; the x86_64 standard image also runs Neuron (Inferentia,
// Trainium) instances. The SSM path has no "v" where release names have one, so
// both spellings of a pinned version are accepted.
func (Bottlerocket) ImageParameters(root, k8s, version string) []ImageParameter {
	ver := strings.TrimPrefix(version, "v")
	var out []ImageParameter
	for _, arch := range []struct{ ec2, kube string }{{"x86_64", archAMD64}, {"arm64", archARM64}} {
		variants := []string{VariantStandard, VariantNVIDIA}
		if arch.ec2 == "x86_64" {
			variants = append(variants, VariantNeuron)
		}
		for _, v := range variants {
			flavour := ""
			if v == VariantNVIDIA {
				flavour = "-nvidia"
			}
			out = append(out, ImageParameter{arch.kube, v, fmt.Sprintf("%s/bottlerocket/aws-k8s-%s%s/%s/%s/image_id", root, k8s, flavour, arch.ec2, ver)})
		}
	}
	return out
}

// DefaultBlockDeviceMappings implements Family: a 4Gi OS volume and a 20Gi
// data volume for images, logs and the pods' ephemeral storage.
func (b Bottlerocket) DefaultBlockDeviceMappings() []*karpenter.BlockDeviceMapping {
	return []*karpenter.BlockDeviceMapping{ebs("/dev/xvda", "4Gi"), ebs(b.EphemeralBlockDevice(), "20Gi")}
}

// EphemeralBlockDevice implements Family: the data volume.
func (Bottlerocket) EphemeralBlockDevice() string { return "/dev/xvdb" }

// FeatureFlags implements Family. Bottlerocket's settings have no pods-per-core
// (bottlerocket-os/bottlerocket#1721), so kubelet.podsPerCore is ignored, and
// kube-reserved memory follows the pod count actually configured.
func (Bottlerocket) FeatureFlags() FeatureFlags {
	return FeatureFlags{SupportsENILimitedPodDensity: true}
}

// UserData implements Family.
func (Bottlerocket) UserData(o bootstrap.Options) (string, error) { return bootstrap.Bottlerocket(o) }
