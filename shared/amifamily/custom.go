package amifamily

import (
	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Custom is an AMI Joiner knows nothing about (seed 002's kubeadm images): the
// class's userData does the whole join, with {{ .Placeholder }} values Joiner
// fills (see bootstrap.Placeholders), labels and taints among them.
type Custom struct{}

// Name implements Family.
func (Custom) Name() string { return karpenter.AMIFamilyCustom }

// Supported implements Family.
func (Custom) Supported() error { return nil }

// ImageParameters implements Family: Custom AMIs are selected by id, name,
// tags or ssmParameter, never by alias.
func (Custom) ImageParameters(_, _, _ string) []ImageParameter { return nil }

// DefaultBlockDeviceMappings implements Family: none, so EC2 uses the volumes
// the AMI defines.
func (Custom) DefaultBlockDeviceMappings() []*karpenter.BlockDeviceMapping { return nil }

// EphemeralBlockDevice implements Family: unknown for an AMI Joiner did not build.
func (Custom) EphemeralBlockDevice() string { return "" }

// FeatureFlags implements Family: Karpenter's defaults for capacity; the user
// data is the class's own.
func (Custom) FeatureFlags() FeatureFlags {
	return FeatureFlags{UsesENILimitedMemoryOverhead: true, PodsPerCoreEnabled: true, SupportsENILimitedPodDensity: true, UserDataIsBootstrap: true, ShellUserData: true}
}

// UserData implements Family.
func (Custom) UserData(o bootstrap.Options) (string, error) { return bootstrap.Custom(o) }
