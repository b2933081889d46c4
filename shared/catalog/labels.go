package catalog

import (
	"maps"
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Labels Karpenter's AWS provider sets that the karpenter package does not name.
const (
	LabelInstanceAcceleratorName         = "karpenter.k8s.aws/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer = "karpenter.k8s.aws/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount        = "karpenter.k8s.aws/instance-accelerator-count"
	// LabelInstanceNetworkBandwidth is the baseline bandwidth in Mbps.
	LabelInstanceNetworkBandwidth = "karpenter.k8s.aws/instance-network-bandwidth"
)

// OS is the only operating system Joiner launches.
const OS = "linux"

// InstanceLabels returns the labels every node of the type carries whatever the
// offering: node.kubernetes.io/instance-type, kubernetes.io/arch,
// kubernetes.io/os and the karpenter.k8s.aws/instance-* labels (category,
// family, generation, size, cpu, memory in MiB as advertised; gpu-name,
// gpu-manufacturer, gpu-count, gpu-memory when the type has a GPU entry;
// accelerator-name, -manufacturer, -count when it has an accelerator;
// network-bandwidth when known). Labels whose value cannot be derived (the
// generation of fake-it-12) are left out. The map is new on every call.
func InstanceLabels(it *InstanceType) map[string]string {
	l := make(map[string]string, 20)
	l[corev1.LabelInstanceTypeStable] = it.Name
	l[corev1.LabelArchStable] = it.Arch
	l[corev1.LabelOSStable] = OS
	// Joiner launches shared-tenancy instances only (validate says so of a pool
	// asking for dedicated), and labels every node with it as Karpenter does.
	l[karpenter.LabelInstanceTenancy] = karpenter.TenancyDefault
	family, size := familySize(it.Name)
	setIf(l, karpenter.LabelInstanceCategory, Category(it.Name))
	setIf(l, karpenter.LabelInstanceFamily, family)
	setIf(l, karpenter.LabelInstanceGeneration, Generation(it.Name))
	setIf(l, karpenter.LabelInstanceSize, size)
	l[karpenter.LabelInstanceCPU] = strconv.Itoa(it.VCPU)
	l[karpenter.LabelInstanceMemory] = strconv.FormatInt(it.MemoryMiB, 10)
	// Karpenter labels GPUs whenever EC2 reports one GPU kind, even with count 0
	// (fractional GPUs such as g6f), so the presence of the entry decides.
	if g := it.GPU; g != nil {
		setIf(l, karpenter.LabelInstanceGPUName, g.Name)
		setIf(l, karpenter.LabelInstanceGPUManufacturer, g.Manufacturer)
		l[karpenter.LabelInstanceGPUCount] = strconv.Itoa(g.Count)
		l[karpenter.LabelInstanceGPUMemory] = strconv.FormatInt(g.MemoryMiB, 10)
	}
	if a := it.Accelerator; a != nil {
		setIf(l, LabelInstanceAcceleratorName, a.Name)
		setIf(l, LabelInstanceAcceleratorManufacturer, a.Manufacturer)
		l[LabelInstanceAcceleratorCount] = strconv.Itoa(a.Count)
	}
	if mbps := NetworkMbps(it); mbps > 0 {
		l[LabelInstanceNetworkBandwidth] = strconv.FormatInt(mbps, 10)
	}
	return l
}

// Labels returns InstanceLabels plus the offering's topology.kubernetes.io/zone,
// karpenter.sh/capacity-type and, when the zone name shows it,
// topology.kubernetes.io/region.
func Labels(it *InstanceType, o Offering) map[string]string {
	l := InstanceLabels(it)
	addOfferingLabels(l, o)
	return l
}

// WithOffering returns a copy of instance labels (from InstanceLabels) with the
// offering's labels added: for callers that computed InstanceLabels once per
// type and need the per-offering variant.
func WithOffering(instanceLabels map[string]string, o Offering) map[string]string {
	l := make(map[string]string, len(instanceLabels)+3)
	maps.Copy(l, instanceLabels)
	addOfferingLabels(l, o)
	return l
}

func addOfferingLabels(l map[string]string, o Offering) {
	setIf(l, corev1.LabelTopologyZone, o.Zone)
	setIf(l, karpenter.CapacityTypeLabelKey, o.CapacityType)
	setIf(l, corev1.LabelTopologyRegion, RegionOfZone(o.Zone))
}

// NetworkMbps returns the baseline bandwidth in Mbps as Karpenter's label
// writes it, 0 when unknown.
func NetworkMbps(it *InstanceType) int64 {
	return int64(math.Round(it.NetworkGbps * 1000))
}

// RegionOfZone returns the region of an AWS availability-zone name
// ("us-east-1a" → "us-east-1"), or "" for names that are not of that form
// (Local Zones such as us-east-1-bos-1a, zone IDs such as use1-az1).
func RegionOfZone(zone string) string {
	n := len(zone)
	if n < 2 || !isLower(zone[n-1]) || !isDigit(zone[n-2]) {
		return ""
	}
	region := zone[:n-1]
	// A region is <2 letters>(-<letters>)+-<digits>: us-east-1, us-gov-west-1, ap-southeast-2.
	parts := 0
	start := 0
	for i := 0; i <= len(region); i++ {
		if i < len(region) && region[i] != '-' {
			continue
		}
		part := region[start:i]
		last := i == len(region)
		switch {
		case parts == 0 && (len(part) != 2 || !allLower(part)):
			return ""
		case last && !allDigits(part):
			return ""
		case parts > 0 && !last && !allLower(part):
			return ""
		}
		parts++
		start = i + 1
	}
	if parts < 3 {
		return ""
	}
	return region
}

func allLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLower(s[i]) {
			return false
		}
	}
	return s != ""
}

func setIf(l map[string]string, key, value string) {
	if value != "" {
		l[key] = value
	}
}
