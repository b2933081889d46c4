// Package packer is Joiner's scheduling engine: given a snapshot of a cluster (pending
// pods, nodes, in-flight NodeClaims, DaemonSets, NodePools, EC2NodeClasses) and the
// instance catalog, it decides which pods go onto existing or in-flight capacity and
// which new nodes to launch, on which instance types. It performs no I/O and is
// deterministic: the same snapshot yields the same plan. README.md draws the
// pipeline (prepare, classes, attempts, fit / grow / open, rebalance, downsize).
package packer

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Snapshot is everything the engine looks at. Nothing in it is modified.
type Snapshot struct {
	// Pods are the pods to place (pending pods).
	Pods []*corev1.Pod
	// Nodes are existing nodes with the pods already bound to them.
	Nodes []NodeState
	// InFlight are NodeClaims launched or about to launch whose Node is not yet
	// initialized: their capacity counts as available for pending pods.
	InFlight []*karpenter.NodeClaim
	// DaemonSets add their pods' requests to every node they would land on.
	DaemonSets []*appsv1.DaemonSet
	NodePools  []*karpenter.NodePool
	// NodeClasses are looked up by a pool's nodeClassRef name.
	NodeClasses []*karpenter.EC2NodeClass
	// Catalog lists the instance types and offerings (with availability) to choose from.
	Catalog *catalog.Catalog
	// Reservations are the capacity reservations the EC2NodeClasses select, with
	// how many more instances each takes now (see reserved.go): each is one more
	// offering for the pools of those classes, and the plan opens no more nodes
	// in one than it has slots for, across all pools.
	Reservations []Reservation
	// Volumes are the cluster's PersistentVolumeClaims, PersistentVolumes and
	// StorageClasses: where a pod's volumes can be attached bounds where it can
	// run (see volumes.go). nil: pods' volumes are not looked at.
	Volumes *Volumes
}

// Reservation is an on-demand capacity reservation as the engine plans it:
// instances of one type in one zone, capacity type reserved.
type Reservation struct {
	ID           string `json:"id"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	// Type is default or capacity-block (the node's
	// karpenter.k8s.aws/capacity-reservation-type label); empty means default.
	Type string `json:"type,omitempty"`
	// Available is how many more instances it can take now.
	Available int `json:"available"`
	// NodeClasses name the EC2NodeClasses whose capacityReservationSelectorTerms
	// select it: only their pools may launch into it.
	NodeClasses []string `json:"nodeClasses"`
}

// Volumes are the storage objects pods' volumes resolve through.
type Volumes struct {
	Claims            []*corev1.PersistentVolumeClaim
	PersistentVolumes []*corev1.PersistentVolume
	StorageClasses    []*storagev1.StorageClass
}

// NodeState is an existing node and the pods bound to it.
type NodeState struct {
	Node *corev1.Node
	Pods []*corev1.Pod
}

// Plan is the engine's answer. Every input pod appears exactly once: on a new node,
// on an existing or in-flight node, or as unschedulable.
type Plan struct {
	Region            string          `json:"region"`
	NewNodes          []NewNode       `json:"newNodes"`
	ExistingNodes     []ExistingNode  `json:"existingNodes"`
	Unschedulable     []Unschedulable `json:"unschedulable"`
	TotalPricePerHour float64         `json:"totalPricePerHour"`
}

// NewNode is a NodeClaim to create.
type NewNode struct {
	Name         string `json:"name"`
	NodePool     string `json:"nodePool"`
	NodeClass    string `json:"nodeClass"`
	InstanceType string `json:"instanceType"`
	CapacityType string `json:"capacityType"`
	// CapacityReservationID is the reservation a reserved node launches into
	// (CapacityType reserved), and only into: its slot was counted by the plan.
	CapacityReservationID string  `json:"capacityReservationID,omitempty"`
	Zone                  string  `json:"zone"`
	PricePerHour          float64 `json:"pricePerHour"`
	// Options are the instance types that fit all Pods, cheapest first; the launch may
	// fall back along them (InstanceType is Options[0]).
	Options []string `json:"options"`
	// Labels is every label the node will carry (well-known and template).
	// Nodes of the same offering may share the map, also across solves given the
	// same Options.Prepared: copy it before changing it.
	Labels map[string]string `json:"labels"`
	Taints []corev1.Taint    `json:"taints,omitempty"`
	// Allocatable may be shared like Labels.
	Allocatable map[string]string `json:"allocatable"`
	Pods        []string          `json:"pods"`
	// Requirements narrow the NodeClaim to what its pods need (pool requirements ∩ pod
	// requirements), for writing the NodeClaim.
	Requirements []karpenter.NodeSelectorRequirementWithMinValues `json:"requirements,omitempty"`
	// Explain says why this type was chosen (set when the caller asks for explanations).
	Explain string `json:"explain,omitempty"`
}

// ExistingNode lists pods placed onto an existing node or in-flight NodeClaim.
type ExistingNode struct {
	Name     string   `json:"name"`
	InFlight bool     `json:"inFlight,omitempty"`
	Pods     []string `json:"pods"`
}

// Unschedulable is a pod nothing can take, with the reason.
type Unschedulable struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}
