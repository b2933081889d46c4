package amifamily

import (
	"fmt"

	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// AL2023 is Amazon Linux 2023, joined by nodeadm: labels, taints and max-pods
// go into the kubelet flags of a NodeConfig (node.eks.aws/v1alpha1).
type AL2023 struct{}

// Name implements Family.
func (AL2023) Name() string { return karpenter.AMIFamilyAL2023 }

// Supported implements Family.
func (AL2023) Supported() error { return nil }

// ImageParameters implements Family: standard and nvidia images for both
// architectures, neuron for x86_64 only.
func (AL2023) ImageParameters(root, k8s, version string) []ImageParameter {
	var out []ImageParameter
	for _, arch := range []struct{ ec2, kube string }{{"x86_64", archAMD64}, {"arm64", archARM64}} {
		variants := []string{VariantStandard, VariantNVIDIA}
		if arch.ec2 == "x86_64" {
			variants = append(variants, VariantNeuron)
		}
		for _, v := range variants {
			base := fmt.Sprintf("%s/eks/optimized-ami/%s/amazon-linux-2023/%s/%s", root, k8s, arch.ec2, v)
			leaf := "recommended"
			if version != "latest" {
				leaf = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", arch.ec2, v, k8s, version)
			}
			out = append(out, ImageParameter{arch.kube, v, base + "/" + leaf + "/image_id"})
		}
	}
	return out
}

// DefaultBlockDeviceMappings implements Family: a 20Gi gp3 root volume.
func (a AL2023) DefaultBlockDeviceMappings() []*karpenter.BlockDeviceMapping {
	return []*karpenter.BlockDeviceMapping{ebs(a.EphemeralBlockDevice(), "20Gi")}
}

// EphemeralBlockDevice implements Family: the root volume.
func (AL2023) EphemeralBlockDevice() string { return "/dev/xvda" }

// FeatureFlags implements Family: Karpenter's defaults.
func (AL2023) FeatureFlags() FeatureFlags {
	return FeatureFlags{UsesENILimitedMemoryOverhead: true, PodsPerCoreEnabled: true, SupportsENILimitedPodDensity: true, ShellUserData: true}
}

// UserData implements Family.
func (AL2023) UserData(o bootstrap.Options) (string, error) { return bootstrap.Nodeadm(o) }
