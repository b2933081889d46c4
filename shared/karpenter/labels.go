package karpenter

import (
	"fmt"
	"strings"
)

// Labels Karpenter restricts or renames, as its v1 CRDs and webhooks do.
const (
	// ProvisionerNameLabelKey is the v1alpha5 Provisioner label, replaced by NodePoolLabelKey.
	ProvisionerNameLabelKey = "karpenter.sh/provisioner-name"
	hostnameLabelKey        = "kubernetes.io/hostname"
)

// WellKnownAWSLabels are the karpenter.k8s.aws labels that describe an instance type;
// only these may appear in requirements or template labels.
var WellKnownAWSLabels = map[string]bool{
	"karpenter.k8s.aws/instance-encryption-in-transit-supported": true,
	LabelInstanceCategory:                                      true,
	"karpenter.k8s.aws/instance-hypervisor":                    true,
	LabelInstanceFamily:                                        true,
	LabelInstanceGeneration:                                    true,
	"karpenter.k8s.aws/instance-local-nvme":                    true,
	LabelInstanceSize:                                          true,
	LabelInstanceCPU:                                           true,
	"karpenter.k8s.aws/instance-cpu-manufacturer":              true,
	"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": true,
	LabelInstanceMemory:                                        true,
	"karpenter.k8s.aws/instance-ebs-bandwidth":                 true,
	"karpenter.k8s.aws/instance-network-bandwidth":             true,
	LabelInstanceGPUName:                                       true,
	LabelInstanceGPUManufacturer:                               true,
	LabelInstanceGPUCount:                                      true,
	LabelInstanceGPUMemory:                                     true,
	"karpenter.k8s.aws/instance-accelerator-name":              true,
	"karpenter.k8s.aws/instance-accelerator-manufacturer":      true,
	"karpenter.k8s.aws/instance-accelerator-count":             true,
	"karpenter.k8s.aws/instance-capability-flex":               true,
}

// awsNodeLabels are the other karpenter.k8s.aws labels Karpenter v1.15's NodePool
// CRD admits in requirements and template labels: they describe the node's class,
// tenancy, capacity reservation or placement group rather than its instance type
// (v1.15's LabelDomain exceptions; see deploy/crds/karpenter.sh_nodepools.yaml).
var awsNodeLabels = map[string]bool{
	NodeClassLabelKey:                 true,
	LabelInstanceTenancy:              true,
	LabelCapacityReservationID:        true,
	LabelCapacityReservationType:      true,
	LabelCapacityReservationInterrupt: true,
	LabelPlacementGroupID:             true,
	LabelPlacementGroupPartition:      true,
}

// DeprecatedLabels maps deprecated label keys to the keys that replaced them.
var DeprecatedLabels = map[string]string{
	"beta.kubernetes.io/arch":                  "kubernetes.io/arch",
	"beta.kubernetes.io/os":                    "kubernetes.io/os",
	"beta.kubernetes.io/instance-type":         "node.kubernetes.io/instance-type",
	"failure-domain.beta.kubernetes.io/zone":   "topology.kubernetes.io/zone",
	"failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}

// SetDeprecatedLabels adds to a node's labels the deprecated keys the kubelet
// (beta.kubernetes.io/arch, beta.kubernetes.io/os) and the cloud node controller
// (beta.kubernetes.io/instance-type, failure-domain.beta.kubernetes.io/zone and
// region) still set beside the stable ones, each with its stable key's value, so a
// pod selecting an old key finds the node as it would in a cluster. A key already
// set is left as it is.
func SetDeprecatedLabels(labels map[string]string) {
	for old, stable := range DeprecatedLabels {
		if v, ok := labels[stable]; ok {
			if _, set := labels[old]; !set {
				labels[old] = v
			}
		}
	}
}

// labelDomain returns the part of a label key before '/', or "" for unprefixed keys.
func labelDomain(k string) string {
	if i := strings.IndexByte(k, '/'); i >= 0 {
		return k[:i]
	}
	return ""
}

// restrictedLabel explains why key may not be used in a NodePool's requirements or
// template labels, or returns "" when it may. allowNodePool admits karpenter.sh/nodepool,
// which NodeClaims carry.
func restrictedLabel(k string, allowNodePool bool) string {
	switch k {
	case ProvisionerNameLabelKey:
		return "karpenter.sh/provisioner-name is the old v1alpha5 Provisioner label and is restricted in karpenter.sh/v1; " +
			"delete it: every node already carries karpenter.sh/nodepool=<pool name>, which Joiner sets itself " +
			"(pods pick a pool with nodeSelector karpenter.sh/nodepool: <pool name>)"
	case NodePoolLabelKey:
		if allowNodePool {
			return ""
		}
		return "karpenter.sh/nodepool is set by Joiner itself to the pool's name; delete it here " +
			"(pods pick a pool with nodeSelector karpenter.sh/nodepool: <pool name>)"
	case hostnameLabelKey:
		return "kubernetes.io/hostname is restricted: a node's hostname is only known once it runs; " +
			"to spread pods over nodes use pod anti-affinity or topologySpreadConstraints on kubernetes.io/hostname"
	case CapacityTypeLabelKey:
		return ""
	}
	if WellKnownAWSLabels[k] || awsNodeLabels[k] {
		return ""
	}
	// Since Karpenter v1.10 the kubernetes.io and k8s.io domains are open to
	// NodePools (node-role.kubernetes.io/worker, example.k8s.io/x): only
	// karpenter.sh, karpenter.k8s.aws and kubernetes.io/hostname stay restricted.
	// The kubelet may not set such labels itself, so registration writes them
	// (bootstrap.KubeletLabels leaves them out of --node-labels).
	d := labelDomain(k)
	switch {
	case strings.HasSuffix(d, "karpenter.sh"):
		return fmt.Sprintf("label domain \"karpenter.sh\" is restricted (only karpenter.sh/capacity-type may be named); "+
			"use a label in your own domain, such as example.com/%s", strings.TrimPrefix(k, d+"/"))
	case strings.HasSuffix(d, "karpenter.k8s.aws"):
		return fmt.Sprintf("label %s is not a karpenter.k8s.aws instance label; use one of instance-category, instance-family, "+
			"instance-generation, instance-size, instance-cpu, instance-memory, instance-gpu-name, instance-gpu-manufacturer, "+
			"instance-gpu-count, instance-gpu-memory, or ec2nodeclass, instance-tenancy, capacity-reservation-id, capacity-reservation-type, "+
			"capacity-reservation-interruptible, placement-group-id, placement-group-partition (prefixed karpenter.k8s.aws/)", k)
	}
	return ""
}
