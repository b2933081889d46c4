// Package catalog is Joiner's instance-type catalog: facts per EC2 instance type
// (vCPU, memory, architecture, GPUs, max pods) and its offerings (zone, capacity
// type, price, availability). An embedded catalog works offline; `--catalog FILE`
// replaces it with a file in the same JSON format.
package catalog

// Catalog is the JSON document `joiner catalog -o json` writes and `--catalog` reads.
type Catalog struct {
	Region        string         `json:"region"`
	Notes         string         `json:"notes,omitempty"`
	InstanceTypes []InstanceType `json:"instanceTypes"`
}

// InstanceType holds the facts of one EC2 instance type. Family, category,
// generation and size are not stored: they derive from Name.
type InstanceType struct {
	Name      string `json:"name"`
	Arch      string `json:"arch"` // amd64 or arm64
	VCPU      int    `json:"vcpu"`
	MemoryMiB int64  `json:"memoryMiB"`
	// MaxPods follows the ENI formula (ENIs × (IPv4 per ENI − 1) + 2), as Karpenter computes it.
	MaxPods int `json:"maxPods"`
	// GPU is nil when the type has none.
	GPU *GPU `json:"gpu,omitempty"`
	// Accelerator is a non-GPU accelerator such as AWS Inferentia (inf2), nil when absent.
	Accelerator *Accelerator `json:"accelerator,omitempty"`
	// NetworkGbps is the baseline network bandwidth, when known.
	NetworkGbps float64    `json:"networkGbps,omitempty"`
	Offerings   []Offering `json:"offerings"`
}

// GPU describes the GPUs of an instance type.
type GPU struct {
	Count        int    `json:"count"`
	Name         string `json:"name"`
	Manufacturer string `json:"manufacturer"`
	MemoryMiB    int64  `json:"memoryMiB"`
}

// Accelerator describes non-GPU accelerators (e.g. Inferentia: resource aws.amazon.com/neuron).
type Accelerator struct {
	Count        int    `json:"count"`
	Name         string `json:"name"`
	Manufacturer string `json:"manufacturer"`
	MemoryMiB    int64  `json:"memoryMiB,omitempty"`
}

// Offering is one (zone, capacity type) in which the type can be bought.
type Offering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"` // spot or on-demand
	PricePerHour float64 `json:"pricePerHour"`
	Available    bool    `json:"available"`
	// Estimate marks a price that is not a live market price (the embedded spot prices).
	Estimate bool `json:"estimate,omitempty"`
}
