// Package kube is Joiner's Kubernetes side: it reads a consistent cluster snapshot for
// the packing engine, writes NodeClaims with Karpenter's lifecycle, taints, drains and
// deletes nodes, records Events, and serialises decisions with a Lease.
//
// Functions run in AWS Lambda, so binary size and start-up time matter: this package
// talks to the API server through REST clients over a scheme of the five API groups it
// uses (restclients.go) and the dynamic client for Karpenter's CRDs. It never imports
// client-go's typed clients: each of them imports k8s.io/client-go/kubernetes/scheme,
// whose init registers every API group and so links all of them (33 MB instead of
// under 20). Client-go's typed clientset (the fake one in tests) plugs in through
// ClientsOf, from package kube/typed.
package kube

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Resources of Karpenter's CRDs.
var (
	NodePoolGVR  = schema.GroupVersionResource{Group: karpenter.Group, Version: karpenter.Version, Resource: "nodepools"}
	NodeClaimGVR = schema.GroupVersionResource{Group: karpenter.Group, Version: karpenter.Version, Resource: "nodeclaims"}
	NodeClassGVR = schema.GroupVersionResource{Group: karpenter.AWSGroup, Version: karpenter.AWSVersion, Resource: "ec2nodeclasses"}
)

// Clients are the API clients Joiner uses, one per API group, each no wider than what
// Joiner calls. NewClients builds them over the API server; ClientsOf over client-go's
// typed clientset (package kube/typed does that for a kubernetes.Interface).
type Clients struct {
	Core         CoreAPI
	Apps         AppsAPI
	Policy       PolicyAPI
	Coordination CoordinationAPI
	Events       EventsAPI
	Dynamic      dynamic.Interface
	// Storage lists what pods' volumes resolve through; nil: volumes are not read.
	Storage StorageAPI
}

// StorageAPI is what a snapshot reads of storage: claims, volumes (core/v1) and
// classes (storage.k8s.io/v1).
type StorageAPI interface {
	PersistentVolumeClaims(namespace string) PersistentVolumeClaimAPI
	PersistentVolumes() PersistentVolumeAPI
	StorageClasses() StorageClassAPI
}

// PersistentVolumeClaimAPI lists claims.
type PersistentVolumeClaimAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error)
}

// PersistentVolumeAPI lists volumes.
type PersistentVolumeAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PersistentVolumeList, error)
}

// StorageClassAPI lists classes.
type StorageClassAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*storagev1.StorageClassList, error)
}

// The method sets below are those of client-go's typed clients, so each typed resource
// client (corev1client.PodInterface, ...) satisfies its interface as it is.

// CoreAPI is the core/v1 group.
type CoreAPI interface {
	// Pods of namespace ("" = all namespaces).
	Pods(namespace string) PodAPI
	Nodes() NodeAPI
}

// PodAPI is what Joiner calls on pods.
type PodAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	// Patch writes nominations (status.nominatedNodeName) through the status subresource.
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
	// EvictV1 posts an Eviction once. It must not retry a 429 itself: the drain loop
	// does, within the function's time (client-go's REST client would otherwise retry
	// a 429 carrying Retry-After up to 10 times, silently spending 100 s).
	EvictV1(ctx context.Context, eviction *policyv1.Eviction) error
}

// NodeAPI is what Joiner calls on nodes.
type NodeAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// AppsAPI is the apps/v1 group.
type AppsAPI interface {
	DaemonSets(namespace string) DaemonSetAPI
}

// DaemonSetAPI lists DaemonSets (their pods take room on every new node).
type DaemonSetAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*appsv1.DaemonSetList, error)
}

// PolicyAPI is the policy/v1 group.
type PolicyAPI interface {
	PodDisruptionBudgets(namespace string) PodDisruptionBudgetAPI
}

// PodDisruptionBudgetAPI lists PodDisruptionBudgets.
type PodDisruptionBudgetAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*policyv1.PodDisruptionBudgetList, error)
}

// CoordinationAPI is the coordination.k8s.io/v1 group.
type CoordinationAPI interface {
	Leases(namespace string) LeaseAPI
}

// LeaseAPI is what the Lease calls.
type LeaseAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// EventsAPI is the events.k8s.io/v1 group.
type EventsAPI interface {
	Events(namespace string) EventAPI
}

// EventAPI is what the Recorder calls.
type EventAPI interface {
	Create(ctx context.Context, event *eventsv1.Event, opts metav1.CreateOptions) (*eventsv1.Event, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*eventsv1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*eventsv1.Event, error)
}

// ClientsOf builds Clients from per-resource accessors shaped like client-go's typed
// clients (cs.CoreV1().Pods, cs.CoreV1().Nodes, cs.AppsV1().DaemonSets, ...), so a
// typed clientset serves without this package importing client-go's typed packages.
func ClientsOf[P PodAPI, N NodeAPI, D DaemonSetAPI, B PodDisruptionBudgetAPI, L LeaseAPI, E EventAPI](
	pods func(string) P, nodes func() N, daemonSets func(string) D, pdbs func(string) B,
	leases func(string) L, events func(string) E, dyn dynamic.Interface) *Clients {
	return &Clients{
		Core:         coreOf[P, N]{pods, nodes},
		Apps:         appsOf[D]{daemonSets},
		Policy:       policyOf[B]{pdbs},
		Coordination: coordinationOf[L]{leases},
		Events:       eventsOf[E]{events},
		Dynamic:      dyn,
	}
}

type coreOf[P PodAPI, N NodeAPI] struct {
	pods  func(string) P
	nodes func() N
}

func (c coreOf[P, N]) Pods(ns string) PodAPI { return c.pods(ns) }
func (c coreOf[P, N]) Nodes() NodeAPI        { return c.nodes() }

type appsOf[D DaemonSetAPI] struct{ daemonSets func(string) D }

func (a appsOf[D]) DaemonSets(ns string) DaemonSetAPI { return a.daemonSets(ns) }

type policyOf[B PodDisruptionBudgetAPI] struct{ pdbs func(string) B }

func (p policyOf[B]) PodDisruptionBudgets(ns string) PodDisruptionBudgetAPI { return p.pdbs(ns) }

type coordinationOf[L LeaseAPI] struct{ leases func(string) L }

func (c coordinationOf[L]) Leases(ns string) LeaseAPI { return c.leases(ns) }

type eventsOf[E EventAPI] struct{ events func(string) E }

func (e eventsOf[E]) Events(ns string) EventAPI { return e.events(ns) }
