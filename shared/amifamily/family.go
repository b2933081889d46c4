// Package amifamily is the one home of what an EC2NodeClass's amiFamily means,
// one file per family, as aws/karpenter-provider-aws's pkg/providers/amifamily
// has it. A family says where its images are published (the public SSM
// parameters an alias reads), which volumes an instance gets when the class
// lists none and which of them holds the pods' ephemeral storage, how the
// kubelet's pod density and kube-reserved memory are computed (Karpenter's
// feature flags, behind max pods and allocatable), and which user data format
// joins the node, and so how labels, taints and max-pods reach the kubelet.
// The rest of Joiner asks a [Family]; nothing else branches on a family's name.
//
// The package is pure (no I/O, no AWS SDK), so the catalog and the packer can
// ask it for max pods and overhead while the cloud adapter asks it for SSM
// paths, volumes and user data.
package amifamily

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Family is one amiFamily's behaviour.
type Family interface {
	// Name is the amiFamily value, e.g. AL2023.
	Name() string
	// Supported is nil when Joiner launches nodes of the family; otherwise it
	// says why not. Unsupported families still model capacity, so a plan that
	// names them can be explained.
	Supported() error
	// ImageParameters are the public SSM parameters an alias of the family reads
	// for a Kubernetes version and an alias version ("latest" or a pinned one),
	// one per architecture and variant, under root (normally "/aws/service").
	ImageParameters(root, k8sVersion, amiVersion string) []ImageParameter
	// DefaultBlockDeviceMappings are the volumes an instance gets when the class
	// lists none; nil keeps the AMI's own.
	DefaultBlockDeviceMappings() []*karpenter.BlockDeviceMapping
	// EphemeralBlockDevice is the device that holds the pods' ephemeral storage,
	// "" when the family cannot know it (Custom).
	EphemeralBlockDevice() string
	// FeatureFlags shape max pods, kube-reserved memory and user data.
	FeatureFlags() FeatureFlags
	// UserData renders the user data that joins a node of the family.
	UserData(o bootstrap.Options) (string, error)
}

// FeatureFlags are the family differences that capacity and launch depend on.
// The first three are Karpenter's (amifamily.FeatureFlags).
type FeatureFlags struct {
	// UsesENILimitedMemoryOverhead sizes kube-reserved memory from the ENI-limited
	// pod count even when maxPods is overridden.
	UsesENILimitedMemoryOverhead bool
	// PodsPerCoreEnabled caps max pods at kubelet.podsPerCore × vCPUs.
	PodsPerCoreEnabled bool
	// SupportsENILimitedPodDensity takes max pods from the instance type's ENI
	// limit; otherwise it is [DefaultMaxPods].
	SupportsENILimitedPodDensity bool
	// UserDataIsBootstrap means the class's userData is the whole bootstrap
	// (Custom): Joiner fills its placeholders, which may need the kubeadm
	// bootstrap token, and passes no max-pods of its own.
	UserDataIsBootstrap bool
	// ShellUserData means cloud-init runs the class's userData as shell
	// scripts (its text/x-shellscript parts when MIME), which may read the
	// instance metadata service; Bottlerocket's is TOML settings instead.
	ShellUserData bool
}

// DefaultMaxPods is the pod count of families without ENI-limited pod density.
const DefaultMaxPods = 110

// Image variants of the EKS-optimized and Bottlerocket images.
const (
	VariantStandard = "standard"
	VariantNVIDIA   = "nvidia"
	VariantNeuron   = "neuron"
)

// Kubernetes architecture names of the images (kubernetes.io/arch).
const (
	archAMD64 = "amd64"
	archARM64 = "arm64"
)

// ImageParameter is one public SSM parameter an alias reads: the image for one
// architecture (amd64, arm64) and variant (standard, nvidia, neuron).
type ImageParameter struct {
	Arch, Variant, Path string
}

// Default is the family of a class that names none and has no alias (the zero
// catalog.Overhead): AL2023, Karpenter's recommended family.
var Default Family = AL2023{}

// families holds every amiFamily Joiner knows, by name.
var families = map[string]Family{}

// defaultEphemeral is each family's default ephemeral volume size, computed
// once: the catalog asks for it per instance type.
var defaultEphemeral = map[string]resource.Quantity{}

func init() {
	for _, f := range []Family{Default, AL2{}, Bottlerocket{}, Custom{},
		Windows{Version: karpenter.AMIFamilyWindows2019}, Windows{Version: karpenter.AMIFamilyWindows2022}} {
		families[f.Name()] = f
		// Karpenter's ephemeralStorage: the default mapping of the ephemeral
		// device, else its default EBS size.
		size := resource.MustParse("20Gi")
		for _, m := range f.DefaultBlockDeviceMappings() {
			if *m.DeviceName == f.EphemeralBlockDevice() {
				size = *m.EBS.VolumeSize
			}
		}
		defaultEphemeral[f.Name()] = size
	}
}

// Get returns the family named by an amiFamily value; "" is [Default].
func Get(name string) (Family, error) {
	if name == "" {
		return Default, nil
	}
	if f, ok := families[name]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("amiFamily %q is not one of AL2023, AL2, Bottlerocket, Custom", name)
}

// Of returns the family of an EC2NodeClass (see EffectiveAMIFamily).
func Of(nc *karpenter.EC2NodeClass) (Family, error) {
	return Get(nc.Spec.EffectiveAMIFamily())
}

// Alias is a parsed amiSelectorTerms alias, family@version.
type Alias struct {
	Family Family
	// Version is "latest" or a pinned version such as v20240807 or 1.20.1.
	Version string
}

// ParseAlias parses "al2023@latest", "bottlerocket@v1.20.1", "al2@v20240807".
func ParseAlias(s string) (Alias, error) {
	fam, ver, ok := strings.Cut(s, "@")
	if !ok || ver == "" {
		return Alias{}, fmt.Errorf("alias %q: want family@version, e.g. al2023@latest", s)
	}
	f, known := families[karpenter.AliasFamily(s)]
	if !known {
		return Alias{}, fmt.Errorf("alias %q: unknown family %q (want al2023, al2 or bottlerocket)", s, fam)
	}
	if err := f.Supported(); err != nil {
		return Alias{}, fmt.Errorf("alias %q: %w", s, err)
	}
	return Alias{f, ver}, nil
}

// Parameters returns the public SSM parameters the alias reads for a
// Kubernetes version.
func (a Alias) Parameters(root, k8sVersion string) []ImageParameter {
	return a.Family.ImageParameters(root, k8sVersion, a.Version)
}

// ebs is a volume of Karpenter's default kind (DefaultEBS: gp3, encrypted) and
// size. Like Karpenter's, it leaves deleteOnTermination unset: the volume then
// takes the AMI's mapping of the device, which deletes it with the instance in
// every EKS-optimized and Bottlerocket AMI.
func ebs(device, size string) *karpenter.BlockDeviceMapping {
	q := resource.MustParse(size)
	t, yes := "gp3", true
	return &karpenter.BlockDeviceMapping{DeviceName: &device, EBS: &karpenter.BlockDevice{
		VolumeSize: &q, VolumeType: &t, Encrypted: &yes,
	}}
}

// DefaultEphemeralVolumeSize is the size of the family's default ephemeral
// volume; 20Gi (Karpenter's default EBS size) when it has none.
func DefaultEphemeralVolumeSize(f Family) resource.Quantity {
	return defaultEphemeral[f.Name()].DeepCopy()
}
