// Package karpenter holds the Karpenter v1 API types Joiner reads and writes:
// karpenter.sh/v1 NodePool and NodeClaim, and karpenter.k8s.aws/v1 EC2NodeClass.
// The JSON shapes follow Karpenter's CRDs so objects written by an existing
// Karpenter installation decode unchanged.
package karpenter

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API groups and versions.
const (
	Group         = "karpenter.sh"
	Version       = "v1"
	AWSGroup      = "karpenter.k8s.aws"
	AWSVersion    = "v1"
	NodePoolKind  = "NodePool"
	NodeClaimKind = "NodeClaim"
	NodeClassKind = "EC2NodeClass"
	APIVersion    = Group + "/" + Version
	AWSAPIVersion = AWSGroup + "/" + AWSVersion
)

// Well-known labels, taints and annotations (Karpenter's and Kubernetes').
const (
	NodePoolLabelKey        = "karpenter.sh/nodepool"
	NodeClaimLabelKey       = "karpenter.sh/nodeclaim"
	CapacityTypeLabelKey    = "karpenter.sh/capacity-type"
	NodeRegisteredLabelKey  = "karpenter.sh/registered"
	NodeInitializedLabelKey = "karpenter.sh/initialized"
	NodeClassLabelKey       = "karpenter.k8s.aws/ec2nodeclass"
	DoNotDisruptAnnotation  = "karpenter.sh/do-not-disrupt"
	UnregisteredTaintKey    = "karpenter.sh/unregistered"
	DisruptedTaintKey       = "karpenter.sh/disrupted"
	TerminationFinalizer    = "karpenter.sh/termination"

	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"

	LabelInstanceCategory         = "karpenter.k8s.aws/instance-category"
	LabelInstanceFamily           = "karpenter.k8s.aws/instance-family"
	LabelInstanceGeneration       = "karpenter.k8s.aws/instance-generation"
	LabelInstanceSize             = "karpenter.k8s.aws/instance-size"
	LabelInstanceCPU              = "karpenter.k8s.aws/instance-cpu"
	LabelInstanceMemory           = "karpenter.k8s.aws/instance-memory"
	LabelInstanceGPUName          = "karpenter.k8s.aws/instance-gpu-name"
	LabelInstanceGPUManufacturer  = "karpenter.k8s.aws/instance-gpu-manufacturer"
	LabelInstanceGPUCount         = "karpenter.k8s.aws/instance-gpu-count"
	LabelInstanceGPUMemory        = "karpenter.k8s.aws/instance-gpu-memory"
	LabelInstanceAcceleratorCount = "karpenter.k8s.aws/instance-accelerator-count"

	// Labels of a node launched into a capacity reservation (Karpenter v1.3+).
	LabelCapacityReservationID   = "karpenter.k8s.aws/capacity-reservation-id"
	LabelCapacityReservationType = "karpenter.k8s.aws/capacity-reservation-type"
	// LabelCapacityReservationInterrupt is "true" on a node in an interruptible reservation.
	LabelCapacityReservationInterrupt = "karpenter.k8s.aws/capacity-reservation-interruptible"
	// LabelInstanceTenancy is the instance's tenancy (default or dedicated).
	LabelInstanceTenancy = "karpenter.k8s.aws/instance-tenancy"
	// TenancyDefault is the only tenancy Joiner launches (shared hardware).
	TenancyDefault = "default"
	// LabelTopologyZoneID is the zone's account-independent ID (use1-az1), a
	// well-known label of Karpenter's AWS provider taken from the EC2NodeClass's
	// status.subnets.
	LabelTopologyZoneID = "topology.k8s.aws/zone-id"
	// Placement group labels of a node launched into one.
	LabelPlacementGroupID        = "karpenter.k8s.aws/placement-group-id"
	LabelPlacementGroupPartition = "karpenter.k8s.aws/placement-group-partition"

	// ResourceNVIDIAGPU and friends are the extended resources device plugins advertise.
	ResourceNVIDIAGPU   corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU      corev1.ResourceName = "amd.com/gpu"
	ResourceAWSNeuron   corev1.ResourceName = "aws.amazon.com/neuron"
	ResourceLimitsNodes corev1.ResourceName = "nodes"
)

// Condition types on a NodeClaim, as Karpenter sets them.
const (
	ConditionLaunched    = "Launched"
	ConditionRegistered  = "Registered"
	ConditionInitialized = "Initialized"
	ConditionDrifted     = "Drifted"
	ConditionEmpty       = "Empty"
	ConditionReady       = "Ready"
)

// NodePool is karpenter.sh/v1 NodePool.
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodePoolSpec   `json:"spec"`
	Status            NodePoolStatus `json:"status,omitempty"`
}

// NodePoolSpec is the desired state of a NodePool.
type NodePoolSpec struct {
	Template   NodeClaimTemplate `json:"template"`
	Disruption Disruption        `json:"disruption"`
	// Limits caps the resources (cpu, memory, nvidia.com/gpu, nodes, ...) the pool may run in total.
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// Weight orders pools: higher first. Nil means 0.
	Weight *int32 `json:"weight,omitempty"`
}

// NodePoolStatus is what Joiner reports back on the pool.
type NodePoolStatus struct {
	Resources  corev1.ResourceList `json:"resources,omitempty"`
	NodeCount  int64               `json:"nodes,omitempty"`
	Conditions []metav1.Condition  `json:"conditions,omitempty"`
}

// ConsolidationPolicy says which nodes consolidation may remove.
type ConsolidationPolicy string

// Consolidation policies.
const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
)

// DisruptionReason names why a node is disrupted; budgets may be scoped to reasons.
type DisruptionReason string

// Disruption reasons.
const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Disruption configures consolidation and its budgets.
type Disruption struct {
	// ConsolidateAfter is a duration or "Never".
	ConsolidateAfter    NillableDuration    `json:"consolidateAfter"`
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	Budgets             []Budget            `json:"budgets,omitempty"`
}

// Budget limits how many nodes may be disrupted at once.
type Budget struct {
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is a count ("5") or a percentage ("10%").
	Nodes    string           `json:"nodes"`
	Schedule *string          `json:"schedule,omitempty"`
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// NodeClaimTemplate is the template a NodePool stamps NodeClaims from.
type NodeClaimTemplate struct {
	ObjectMeta TemplateMeta          `json:"metadata,omitempty"`
	Spec       NodeClaimTemplateSpec `json:"spec"`
}

// TemplateMeta carries the labels and annotations every node of the pool gets.
type TemplateMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is NodeClaimSpec without resources.
type NodeClaimTemplateSpec struct {
	Taints                 []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                         `json:"startupTaints,omitempty"`
	Requirements           []NodeSelectorRequirementWithMinValues `json:"requirements"`
	NodeClassRef           *NodeClassReference                    `json:"nodeClassRef"`
	TerminationGracePeriod *metav1.Duration                       `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is a duration or "Never"; Karpenter's default is 720h.
	ExpireAfter NillableDuration `json:"expireAfter,omitempty"`
}

// NodeSelectorRequirementWithMinValues is a node selector requirement that may also ask
// for a minimum number of distinct values among the instance-type options.
type NodeSelectorRequirementWithMinValues struct {
	Key      string                      `json:"key"`
	Operator corev1.NodeSelectorOperator `json:"operator"`
	Values   []string                    `json:"values,omitempty"`
	// MinValues is the minimum number of distinct values the launch options must span.
	MinValues *int `json:"minValues,omitempty"`
}

// Additional operators Karpenter accepts beyond Kubernetes' node selector operators.
const (
	NodeSelectorOpGte corev1.NodeSelectorOperator = "Gte"
	NodeSelectorOpLte corev1.NodeSelectorOperator = "Lte"
)

// NodeClassReference points a NodePool or NodeClaim at its EC2NodeClass.
type NodeClassReference struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// NodeClaim is karpenter.sh/v1 NodeClaim: one requested node.
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeClaimSpec   `json:"spec"`
	Status            NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimSpec describes the node wanted.
type NodeClaimSpec struct {
	Taints                 []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                         `json:"startupTaints,omitempty"`
	Requirements           []NodeSelectorRequirementWithMinValues `json:"requirements"`
	Resources              ResourceRequirements                   `json:"resources,omitempty"`
	NodeClassRef           *NodeClassReference                    `json:"nodeClassRef"`
	TerminationGracePeriod *metav1.Duration                       `json:"terminationGracePeriod,omitempty"`
	ExpireAfter            NillableDuration                       `json:"expireAfter,omitempty"`
}

// ResourceRequirements holds the resources the NodeClaim's pods request.
type ResourceRequirements struct {
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaimStatus is the observed state of a NodeClaim.
type NodeClaimStatus struct {
	NodeName         string              `json:"nodeName,omitempty"`
	ProviderID       string              `json:"providerID,omitempty"`
	ImageID          string              `json:"imageID,omitempty"`
	Capacity         corev1.ResourceList `json:"capacity,omitempty"`
	Allocatable      corev1.ResourceList `json:"allocatable,omitempty"`
	Conditions       []metav1.Condition  `json:"conditions,omitempty"`
	LastPodEventTime metav1.Time         `json:"lastPodEventTime,omitempty"`
}

// EC2NodeClass is karpenter.k8s.aws/v1 EC2NodeClass: how instances are launched.
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              EC2NodeClassSpec   `json:"spec"`
	Status            EC2NodeClassStatus `json:"status,omitempty"`
}

// AMI families.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyCustom       = "Custom"
)

// EC2NodeClassSpec is the launch configuration.
type EC2NodeClassSpec struct {
	SubnetSelectorTerms        []SubnetSelectorTerm        `json:"subnetSelectorTerms"`
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	// CapacityReservationSelectorTerms selects on-demand capacity reservations to launch into.
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	AssociatePublicIPAddress         *bool                             `json:"associatePublicIPAddress,omitempty"`
	AMISelectorTerms                 []AMISelectorTerm                 `json:"amiSelectorTerms,omitempty"`
	AMIFamily                        *string                           `json:"amiFamily,omitempty"`
	UserData                         *string                           `json:"userData,omitempty"`
	Role                             string                            `json:"role,omitempty"`
	InstanceProfile                  *string                           `json:"instanceProfile,omitempty"`
	Tags                             map[string]string                 `json:"tags,omitempty"`
	Kubelet                          *KubeletConfiguration             `json:"kubelet,omitempty"`
	BlockDeviceMappings              []*BlockDeviceMapping             `json:"blockDeviceMappings,omitempty"`
	InstanceStorePolicy              *string                           `json:"instanceStorePolicy,omitempty"`
	DetailedMonitoring               *bool                             `json:"detailedMonitoring,omitempty"`
	MetadataOptions                  *MetadataOptions                  `json:"metadataOptions,omitempty"`
	Context                          *string                           `json:"context,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags or id.
type SubnetSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, id or name.
type SecurityGroupSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
	Name string            `json:"name,omitempty"`
}

// CapacityReservationSelectorTerm selects capacity reservations by tags or id, optionally
// owned by another account.
type CapacityReservationSelectorTerm struct {
	Tags    map[string]string `json:"tags,omitempty"`
	ID      string            `json:"id,omitempty"`
	OwnerID string            `json:"ownerID,omitempty"`
}

// AMISelectorTerm selects AMIs by alias (family@version), tags, id, name, owner or SSM parameter.
type AMISelectorTerm struct {
	Alias        string            `json:"alias,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
	ID           string            `json:"id,omitempty"`
	Name         string            `json:"name,omitempty"`
	Owner        string            `json:"owner,omitempty"`
	SSMParameter string            `json:"ssmParameter,omitempty"`
}

// KubeletConfiguration is the subset of kubelet settings Karpenter exposes.
type KubeletConfiguration struct {
	ClusterDNS                  []string                   `json:"clusterDNS,omitempty"`
	MaxPods                     *int32                     `json:"maxPods,omitempty"`
	PodsPerCore                 *int32                     `json:"podsPerCore,omitempty"`
	SystemReserved              map[string]string          `json:"systemReserved,omitempty"`
	KubeReserved                map[string]string          `json:"kubeReserved,omitempty"`
	EvictionHard                map[string]string          `json:"evictionHard,omitempty"`
	EvictionSoft                map[string]string          `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod     map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMaxPodGracePeriod   *int32                     `json:"evictionMaxPodGracePeriod,omitempty"`
	ImageGCHighThresholdPercent *int32                     `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent  *int32                     `json:"imageGCLowThresholdPercent,omitempty"`
	CPUCFSQuota                 *bool                      `json:"cpuCFSQuota,omitempty"`
}

// BlockDeviceMapping is one EBS volume of the instance.
type BlockDeviceMapping struct {
	DeviceName *string      `json:"deviceName,omitempty"`
	EBS        *BlockDevice `json:"ebs,omitempty"`
	RootVolume bool         `json:"rootVolume,omitempty"`
}

// BlockDevice is an EBS volume's settings.
type BlockDevice struct {
	DeleteOnTermination *bool              `json:"deleteOnTermination,omitempty"`
	Encrypted           *bool              `json:"encrypted,omitempty"`
	IOPS                *int64             `json:"iops,omitempty"`
	KMSKeyID            *string            `json:"kmsKeyID,omitempty"`
	SnapshotID          *string            `json:"snapshotID,omitempty"`
	Throughput          *int64             `json:"throughput,omitempty"`
	VolumeSize          *resource.Quantity `json:"volumeSize,omitempty"`
	VolumeType          *string            `json:"volumeType,omitempty"`
}

// MetadataOptions are the instance metadata service settings (IMDSv2 required by default).
type MetadataOptions struct {
	HTTPEndpoint            *string `json:"httpEndpoint,omitempty"`
	HTTPProtocolIPv6        *string `json:"httpProtocolIPv6,omitempty"`
	HTTPPutResponseHopLimit *int64  `json:"httpPutResponseHopLimit,omitempty"`
	HTTPTokens              *string `json:"httpTokens,omitempty"`
}

// EC2NodeClassStatus is what discovery resolved for the class.
type EC2NodeClassStatus struct {
	Subnets              []Subnet              `json:"subnets,omitempty"`
	SecurityGroups       []SecurityGroup       `json:"securityGroups,omitempty"`
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	AMIs                 []AMI                 `json:"amis,omitempty"`
	InstanceProfile      string                `json:"instanceProfile,omitempty"`
	Conditions           []metav1.Condition    `json:"conditions,omitempty"`
}

// CapacityReservation is a resolved capacity reservation, as Karpenter v1.3+
// writes it into status.capacityReservations.
type CapacityReservation struct {
	AvailabilityZone      string       `json:"availabilityZone"`
	EndTime               *metav1.Time `json:"endTime,omitempty"`
	ID                    string       `json:"id"`
	InstanceMatchCriteria string       `json:"instanceMatchCriteria"`
	InstanceType          string       `json:"instanceType"`
	OwnerID               string       `json:"ownerID"`
	ReservationType       string       `json:"reservationType,omitempty"`
	State                 string       `json:"state,omitempty"`
}

// ZoneIDs maps each zone of the class's resolved subnets to its zone ID (nil
// when the status names none: the class is not resolved yet, or was resolved
// by a Karpenter without zone IDs).
func (nc *EC2NodeClass) ZoneIDs() map[string]string {
	var m map[string]string
	for _, s := range nc.Status.Subnets {
		if s.Zone != "" && s.ZoneID != "" {
			if m == nil {
				m = map[string]string{}
			}
			m[s.Zone] = s.ZoneID
		}
	}
	return m
}

// Subnet is a resolved subnet.
type Subnet struct {
	ID     string `json:"id"`
	Zone   string `json:"zone"`
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// AMI is a resolved image with the requirements it serves (e.g. arch, GPU).
type AMI struct {
	ID           string                           `json:"id"`
	Name         string                           `json:"name,omitempty"`
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}
