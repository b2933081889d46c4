package awssim

import (
	"encoding/json"
	"time"
)

// The types in this file are the simulator's state as it is seeded (Seed, read
// from a JSON state file) and as it is inspected (Snapshot, from (*Sim).State
// or GET /_sim/state). A Snapshot is itself a valid Seed, so a state dumped from
// one run can seed the next.

// Capacity types, as EC2 spells them.
const (
	CapacitySpot     = "spot"
	CapacityOnDemand = "on-demand"
)

// Instance states, as EC2 spells them.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
)

// Seed is the JSON state file format (see README.md in this directory).
// Every field is optional.
type Seed struct {
	AccountID string `json:"accountId,omitempty"`
	Region    string `json:"region,omitempty"`
	// KubernetesVersions lists the versions for which the public EKS-optimized
	// (AL2023, AL2) and Bottlerocket AMI parameters and their images are seeded.
	// Empty means DefaultKubernetesVersions.
	KubernetesVersions []string `json:"kubernetesVersions,omitempty"`
	// NoPublicParameters turns off the seeding of the public /aws/service/... parameters.
	NoPublicParameters bool `json:"noPublicParameters,omitempty"`

	Subnets         []Subnet         `json:"subnets,omitempty"`
	SecurityGroups  []SecurityGroup  `json:"securityGroups,omitempty"`
	Images          []Image          `json:"images,omitempty"`
	LaunchTemplates []LaunchTemplate `json:"launchTemplates,omitempty"`
	Instances       []Instance       `json:"instances,omitempty"`
	Parameters      []Parameter      `json:"parameters,omitempty"`
	Clusters        []Cluster        `json:"clusters,omitempty"`
	Secrets         []Secret         `json:"secrets,omitempty"`
	// Roles and InstanceProfiles are the account's IAM roles and instance
	// profiles: a launch names a profile, which must exist (as in EC2).
	Roles            []Role            `json:"roles,omitempty"`
	InstanceProfiles []InstanceProfile `json:"instanceProfiles,omitempty"`
	// CapacityReservations are on-demand capacity reservations launches can target.
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	// Capacity limits how many more instances of an offering can be launched;
	// offerings not listed are unlimited (unless the catalog marks them unavailable).
	Capacity []Capacity `json:"capacity,omitempty"`
	// ICE lists offerings that answer InsufficientInstanceCapacity until cleared.
	ICE []Offering `json:"ice,omitempty"`
	// SpotPrices override the catalog's spot price of a (type, zone).
	SpotPrices []SpotPrice `json:"spotPrices,omitempty"`
	// Deny is the scripted IAM policy: actions ("ec2:CreateFleet" or "CreateFleet")
	// that answer UnauthorizedOperation / AccessDenied.
	Deny []string `json:"deny,omitempty"`
}

// Snapshot is the inspectable state of a simulator at one instant of simulated time.
type Snapshot struct {
	Time time.Time `json:"time"`
	Seed
	Interruptions []Interruption `json:"interruptions,omitempty"`
	Faults        []Fault        `json:"faults,omitempty"`
	CallCount     int            `json:"callCount"`
}

// Offering identifies one EC2 capacity pool.
type Offering struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
}

// Capacity is the number of further instances an offering can launch.
type Capacity struct {
	Offering
	Count int `json:"count"`
}

// SpotPrice is the current spot price of an instance type in a zone, USD per hour.
type SpotPrice struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	Price        float64 `json:"price"`
}

// Subnet is a VPC subnet.
type Subnet struct {
	ID    string `json:"id"`
	VpcID string `json:"vpcId,omitempty"`
	Zone  string `json:"zone"`
	CIDR  string `json:"cidr,omitempty"`
	// AvailableIPs defaults to the CIDR's usable addresses; each launch takes one.
	AvailableIPs int               `json:"availableIps,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
}

// SecurityGroup is a VPC security group.
type SecurityGroup struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	VpcID       string            `json:"vpcId,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// Image is an AMI.
type Image struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	Architecture string `json:"architecture,omitempty"` // x86_64 (default) or arm64
	OwnerID      string `json:"ownerId,omitempty"`      // defaults to the account
	OwnerAlias   string `json:"ownerAlias,omitempty"`   // "amazon" for public AWS images
	State        string `json:"state,omitempty"`        // available (default), deregistered
	CreationDate string `json:"creationDate,omitempty"` // RFC 3339
	// DeprecationTime, when set and past, hides the image from DescribeImages
	// unless IncludeDeprecated is set, as EC2 does.
	DeprecationTime string            `json:"deprecationTime,omitempty"`
	Public          bool              `json:"public,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
	// RootDeviceName (default /dev/xvda) and BlockDevices (default: the root
	// device, an 8 GiB snapshot) are the image's own volumes: a launch may
	// enlarge them, not shrink them, and a device the image lacks is a new,
	// empty volume that needs a size.
	RootDeviceName string             `json:"rootDeviceName,omitempty"`
	BlockDevices   []ImageBlockDevice `json:"blockDevices,omitempty"`
}

// ImageBlockDevice is one EBS snapshot of an image.
type ImageBlockDevice struct {
	DeviceName    string `json:"deviceName"`
	SnapshotID    string `json:"snapshotId,omitempty"`
	VolumeSizeGiB int    `json:"volumeSizeGiB"`
}

// Parameter is an SSM parameter.
type Parameter struct {
	Name     string    `json:"name"`
	Value    string    `json:"value"`
	Type     string    `json:"type,omitempty"`     // String (default), StringList, SecureString
	DataType string    `json:"dataType,omitempty"` // text (default) or aws:ec2:image
	Version  int64     `json:"version,omitempty"`
	Modified time.Time `json:"modified,omitzero"`
}

// Secret is a Secrets Manager secret (its current version only).
type Secret struct {
	Name        string    `json:"name"`
	Value       string    `json:"value"` // SecretString
	Description string    `json:"description,omitempty"`
	ARN         string    `json:"arn,omitempty"`       // generated when empty
	VersionID   string    `json:"versionId,omitempty"` // generated when empty
	Created     time.Time `json:"created,omitzero"`
}

// Cluster is an EKS cluster as DescribeCluster reports it.
type Cluster struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// Endpoint is the API server URL; CertificateAuthority is base64 PEM data.
	Endpoint             string            `json:"endpoint,omitempty"`
	CertificateAuthority string            `json:"certificateAuthority,omitempty"`
	Status               string            `json:"status,omitempty"` // ACTIVE (default)
	ServiceIPv4CIDR      string            `json:"serviceIpv4Cidr,omitempty"`
	IPFamily             string            `json:"ipFamily,omitempty"`
	RoleARN              string            `json:"roleArn,omitempty"`
	SubnetIDs            []string          `json:"subnetIds,omitempty"`
	SecurityGroupIDs     []string          `json:"securityGroupIds,omitempty"`
	ClusterSGID          string            `json:"clusterSecurityGroupId,omitempty"`
	VpcID                string            `json:"vpcId,omitempty"`
	CreatedAt            time.Time         `json:"createdAt,omitzero"`
	Tags                 map[string]string `json:"tags,omitempty"`
}

// BlockDeviceMapping is an EBS root or data volume of a launch template or instance.
type BlockDeviceMapping struct {
	DeviceName          string `json:"deviceName"`
	VolumeSizeGiB       int    `json:"volumeSizeGiB,omitempty"`
	VolumeType          string `json:"volumeType,omitempty"`
	Encrypted           *bool  `json:"encrypted,omitempty"`
	DeleteOnTermination *bool  `json:"deleteOnTermination,omitempty"`
	IOPS                int    `json:"iops,omitempty"`
	Throughput          int    `json:"throughput,omitempty"`
	KMSKeyID            string `json:"kmsKeyId,omitempty"`
	SnapshotID          string `json:"snapshotId,omitempty"`
}

// MetadataOptions are the instance metadata service (IMDS) settings.
type MetadataOptions struct {
	HTTPTokens              string `json:"httpTokens,omitempty"`   // optional | required
	HTTPEndpoint            string `json:"httpEndpoint,omitempty"` // enabled | disabled
	HTTPPutResponseHopLimit int    `json:"httpPutResponseHopLimit,omitempty"`
	HTTPProtocolIPv6        string `json:"httpProtocolIpv6,omitempty"`
	InstanceMetadataTags    string `json:"instanceMetadataTags,omitempty"`
}

// LaunchTemplateData is what a launch template pins for the instances it launches.
type LaunchTemplateData struct {
	ImageID            string `json:"imageId,omitempty"`
	InstanceType       string `json:"instanceType,omitempty"`
	UserData           string `json:"userData,omitempty"` // base64, as sent
	IAMInstanceProfile string `json:"iamInstanceProfile,omitempty"`
	// CapacityReservationID (CapacityReservationSpecification.CapacityReservationTarget)
	// sends every launch of the template into that reservation.
	CapacityReservationID         string               `json:"capacityReservationId,omitempty"`
	CapacityReservationPreference string               `json:"capacityReservationPreference,omitempty"`
	KeyName                       string               `json:"keyName,omitempty"`
	SecurityGroupIDs              []string             `json:"securityGroupIds,omitempty"`
	BlockDeviceMappings           []BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	MetadataOptions               *MetadataOptions     `json:"metadataOptions,omitempty"`
	// TagSpecifications maps a resource type (instance, volume, ...) to the tags
	// applied to resources of that type at launch.
	TagSpecifications map[string]map[string]string `json:"tagSpecifications,omitempty"`
}

// LaunchTemplate is an EC2 launch template (the simulator keeps one version).
type LaunchTemplate struct {
	ID         string             `json:"id"`
	Name       string             `json:"name"`
	CreateTime time.Time          `json:"createTime,omitzero"`
	Tags       map[string]string  `json:"tags,omitempty"`
	Data       LaunchTemplateData `json:"data"`
}

// Instance is an EC2 instance.
type Instance struct {
	ID                 string    `json:"id"`
	InstanceType       string    `json:"instanceType"`
	Zone               string    `json:"zone"`
	SubnetID           string    `json:"subnetId,omitempty"`
	VpcID              string    `json:"vpcId,omitempty"`
	CapacityType       string    `json:"capacityType"`
	State              string    `json:"state"`
	LaunchTime         time.Time `json:"launchTime"`
	ImageID            string    `json:"imageId,omitempty"`
	Architecture       string    `json:"architecture,omitempty"`
	LaunchTemplateID   string    `json:"launchTemplateId,omitempty"`
	LaunchTemplateName string    `json:"launchTemplateName,omitempty"`
	FleetID            string    `json:"fleetId,omitempty"`
	ReservationID      string    `json:"reservationId,omitempty"`
	SpotRequestID      string    `json:"spotRequestId,omitempty"`
	PrivateIP          string    `json:"privateIp,omitempty"`
	PrivateDNSName     string    `json:"privateDnsName,omitempty"`
	SecurityGroupIDs   []string  `json:"securityGroupIds,omitempty"`
	UserData           string    `json:"userData,omitempty"`
	IAMInstanceProfile string    `json:"iamInstanceProfile,omitempty"`
	// CapacityReservationID is the reservation the instance launched into.
	CapacityReservationID string               `json:"capacityReservationId,omitempty"`
	MetadataOptions       *MetadataOptions     `json:"metadataOptions,omitempty"`
	BlockDeviceMappings   []BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	Tags                  map[string]string    `json:"tags,omitempty"`
	PricePerHour          float64              `json:"pricePerHour,omitempty"`
	StateReason           string               `json:"stateReason,omitempty"`
	StateTransitionReason string               `json:"stateTransitionReason,omitempty"`
	// NextTransition is when the current transitional state (pending, shutting-down,
	// or a running spot instance with an interruption notice) ends.
	NextTransition time.Time `json:"nextTransition,omitzero"`
	// TerminatedAt is when the instance reached terminated; it stays visible to
	// DescribeInstances for Config.TerminatedVisibleFor after that.
	TerminatedAt time.Time `json:"terminatedAt,omitzero"`
}

// Role is an IAM role, as far as instance profiles need one.
type Role struct {
	Name string `json:"name"`
	// Path defaults to "/"; ARN and ID are generated when empty.
	Path    string            `json:"path,omitempty"`
	ARN     string            `json:"arn,omitempty"`
	ID      string            `json:"id,omitempty"`
	Created time.Time         `json:"created,omitzero"`
	Tags    map[string]string `json:"tags,omitempty"`
}

// InstanceProfile is an IAM instance profile: the container through which an
// instance gets its role. It holds at most one role.
type InstanceProfile struct {
	Name    string            `json:"name"`
	Path    string            `json:"path,omitempty"`
	ARN     string            `json:"arn,omitempty"`
	ID      string            `json:"id,omitempty"`
	Roles   []string          `json:"roles,omitempty"` // role names
	Created time.Time         `json:"created,omitzero"`
	Tags    map[string]string `json:"tags,omitempty"`
}

// Interruption records a spot interruption warning the simulator issued.
type Interruption struct {
	InstanceID  string          `json:"instanceId"`
	NoticeTime  time.Time       `json:"noticeTime"`
	TerminateAt time.Time       `json:"terminateAt"`
	Event       json.RawMessage `json:"event"`
}
