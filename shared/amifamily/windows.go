package amifamily

import (
	"errors"
	"fmt"

	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Windows is Windows Server 2019 or 2022. Joiner launches no Windows nodes (it
// renders no PowerShell bootstrap and resolves no Windows alias), but a class
// naming the family still gets Karpenter's capacity model, so validation and
// plans can explain it.
type Windows struct {
	// Version is the amiFamily value, Windows2019 or Windows2022.
	Version string
}

var errWindows = errors.New("Windows nodes are not supported by Joiner")

// Name implements Family.
func (w Windows) Name() string { return w.Version }

// Supported implements Family.
func (Windows) Supported() error { return errWindows }

// ImageParameters implements Family: none, Windows aliases are not resolved.
func (Windows) ImageParameters(_, _, _ string) []ImageParameter { return nil }

// DefaultBlockDeviceMappings implements Family: a 50Gi gp3 root volume.
func (w Windows) DefaultBlockDeviceMappings() []*karpenter.BlockDeviceMapping {
	return []*karpenter.BlockDeviceMapping{ebs(w.EphemeralBlockDevice(), "50Gi")}
}

// EphemeralBlockDevice implements Family: the root volume.
func (Windows) EphemeralBlockDevice() string { return "/dev/sda1" }

// FeatureFlags implements Family: pod density is not ENI-limited on Windows
// (DefaultMaxPods), and kube-reserved memory follows the configured pod count.
func (Windows) FeatureFlags() FeatureFlags { return FeatureFlags{PodsPerCoreEnabled: true} }

// UserData implements Family: always an error.
func (w Windows) UserData(bootstrap.Options) (string, error) {
	return "", fmt.Errorf("amiFamily %s: %w", w.Version, errWindows)
}
