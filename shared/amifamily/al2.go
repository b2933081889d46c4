package amifamily

import (
	"fmt"

	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// AL2 is Amazon Linux 2, joined by /etc/eks/bootstrap.sh: labels, taints and
// max-pods go into its --kubelet-extra-args.
type AL2 struct{}

// Name implements Family.
func (AL2) Name() string { return karpenter.AMIFamilyAL2 }

// Supported implements Family.
func (AL2) Supported() error { return nil }

// ImageParameters implements Family: amd64 standard and accelerated images,
// arm64 standard (AL2 has no arm64 accelerated image). The accelerated image
// carries both the NVIDIA and the Neuron drivers, so it serves both variants.
func (AL2) ImageParameters(root, k8s, version string) []ImageParameter {
	var out []ImageParameter
	for _, x := range []struct{ kube, variant, dir, node string }{
		{archAMD64, VariantStandard, "amazon-linux-2", "amazon-eks-node"},
		{archAMD64, VariantNVIDIA, "amazon-linux-2-gpu", "amazon-eks-gpu-node"},
		{archAMD64, VariantNeuron, "amazon-linux-2-gpu", "amazon-eks-gpu-node"},
		{archARM64, VariantStandard, "amazon-linux-2-arm64", "amazon-eks-arm64-node"},
	} {
		leaf := "recommended"
		if version != "latest" {
			leaf = fmt.Sprintf("%s-%s-%s", x.node, k8s, version)
		}
		out = append(out, ImageParameter{x.kube, x.variant, fmt.Sprintf("%s/eks/optimized-ami/%s/%s/%s/image_id", root, k8s, x.dir, leaf)})
	}
	return out
}

// DefaultBlockDeviceMappings implements Family: a 20Gi gp3 root volume.
func (a AL2) DefaultBlockDeviceMappings() []*karpenter.BlockDeviceMapping {
	return []*karpenter.BlockDeviceMapping{ebs(a.EphemeralBlockDevice(), "20Gi")}
}

// EphemeralBlockDevice implements Family: the root volume.
func (AL2) EphemeralBlockDevice() string { return "/dev/xvda" }

// FeatureFlags implements Family: Karpenter's defaults.
func (AL2) FeatureFlags() FeatureFlags {
	return FeatureFlags{UsesENILimitedMemoryOverhead: true, PodsPerCoreEnabled: true, SupportsENILimitedPodDensity: true, ShellUserData: true}
}

// UserData implements Family.
func (AL2) UserData(o bootstrap.Options) (string, error) { return bootstrap.EKS(o) }
