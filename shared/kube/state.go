package kube

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// ClusterState is one consistent read of the cluster: the packing engine's snapshot
// plus what the engine does not take but the disruption and lifecycle code needs.
type ClusterState struct {
	// Snapshot is ready for the engine except for Catalog, which the caller sets.
	Snapshot packer.Snapshot
	// PDBs are every PodDisruptionBudget in the cluster.
	PDBs []*policyv1.PodDisruptionBudget
	// NodeClaims are every NodeClaim, including initialized and deleting ones.
	NodeClaims []*karpenter.NodeClaim
	// AllNodes are every Node, including those whose NodeClaim is still initializing
	// (which Snapshot.Nodes leaves out: their capacity is in Snapshot.InFlight).
	AllNodes []*corev1.Node
	// PodsByNode are the non-terminal pods bound to each node, by node name.
	PodsByNode map[string][]*corev1.Pod
	// NominatedByNode are the pending pods nominated to each node
	// (status.nominatedNodeName, by Joiner's plan or a preemption), by node name.
	// kube-scheduler holds their room on that node, so the snapshot counts them
	// there (Snapshot.Nodes, and off an in-flight NodeClaim's capacity) and not as
	// pending.
	NominatedByNode map[string][]*corev1.Pod
	// ResourceVersion is the point the lists were read at ("" when the server would
	// not serve an exact resourceVersion and each list is simply recent).
	ResourceVersion string
	// ReadAt is when the read started.
	ReadAt time.Time
}

// NodeClaimForNode returns the NodeClaim whose providerID matches the node, or nil.
func (s *ClusterState) NodeClaimForNode(n *corev1.Node) *karpenter.NodeClaim {
	if n == nil || n.Spec.ProviderID == "" {
		return nil
	}
	for _, nc := range s.NodeClaims {
		if nc.Status.ProviderID == n.Spec.ProviderID {
			return nc
		}
	}
	return nil
}

// DefaultPageSize is how many objects one list request returns.
const DefaultPageSize = 1000

// NonTerminalPods is the field selector of the pods a snapshot reads: neither
// Succeeded nor Failed (the API server indexes status.phase for pods).
const NonTerminalPods = "status.phase!=Succeeded,status.phase!=Failed"

// ReadState lists pods, nodes, DaemonSets, PDBs, NodePools, EC2NodeClasses and
// NodeClaims in pages and converts them into a ClusterState. The first pod page fixes a
// resourceVersion; every other list is read at exactly that version, so the snapshot
// is one point in time (falling back to the latest state when the server has
// compacted that version away).
func (c *Client) ReadState(ctx context.Context) (*ClusterState, error) {
	st := &ClusterState{ReadAt: c.now()}
	limit := int64(c.PageSize)
	if limit <= 0 {
		limit = DefaultPageSize
	}
	// The first page fixes the snapshot's resourceVersion. A consistent paged list is
	// served from the API server's watch cache since Kubernetes 1.31 (consistent
	// reads from cache) and its later pages since 1.34 (pagination from cache
	// snapshots), so it costs etcd nothing and neither side holds every pod at once.
	// resourceVersion=0 (Options.CachedList) is served from the cache by every
	// version but ignores the limit: one response carries every pod.
	// Finished pods stay on the server: they take no room and block nothing.
	firstOpts := metav1.ListOptions{Limit: limit, FieldSelector: NonTerminalPods}
	if c.opts.CachedList {
		firstOpts.ResourceVersion = "0"
	}
	first, err := c.clients.Core.Pods("").List(ctx, firstOpts)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	// The pod pages are read one after another, so one sharer serves them all.
	share := newSharer()
	rv := first.ResourceVersion
	st.ResourceVersion = rv

	var (
		pods        = podPtrs(first.Items, share)
		nodes       []*corev1.Node
		daemonSets  []*appsv1.DaemonSet
		pdbs        []*policyv1.PodDisruptionBudget
		pools       []*karpenter.NodePool
		classes     []*karpenter.EC2NodeClass
		claims      []*karpenter.NodeClaim
		inexactList atomic.Bool
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		cont := first.Continue
		for cont != "" {
			page, err := c.clients.Core.Pods("").List(gctx, metav1.ListOptions{Limit: limit, Continue: cont, FieldSelector: NonTerminalPods})
			if err != nil {
				return fmt.Errorf("list pods (continue): %w", err)
			}
			pods = append(pods, podPtrs(page.Items, share)...)
			cont = page.Continue
		}
		return nil
	})
	exact := func(list func(metav1.ListOptions) (string, string, error), what string) error {
		inexact, err := listPaged(gctx, rv, limit, list)
		if inexact {
			inexactList.Store(true)
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", what, crdHint(err))
		}
		return nil
	}
	g.Go(func() error {
		return exact(func(o metav1.ListOptions) (string, string, error) {
			l, err := c.clients.Core.Nodes().List(gctx, o)
			if err != nil {
				return "", "", err
			}
			nodes = append(nodes, ptrs(l.Items)...)
			return l.Continue, l.ResourceVersion, nil
		}, "nodes")
	})
	g.Go(func() error {
		return exact(func(o metav1.ListOptions) (string, string, error) {
			l, err := c.clients.Apps.DaemonSets("").List(gctx, o)
			if err != nil {
				return "", "", err
			}
			daemonSets = append(daemonSets, ptrs(l.Items)...)
			return l.Continue, l.ResourceVersion, nil
		}, "daemonsets")
	})
	g.Go(func() error {
		return exact(func(o metav1.ListOptions) (string, string, error) {
			l, err := c.clients.Policy.PodDisruptionBudgets("").List(gctx, o)
			if err != nil {
				return "", "", err
			}
			pdbs = append(pdbs, ptrs(l.Items)...)
			return l.Continue, l.ResourceVersion, nil
		}, "poddisruptionbudgets")
	})
	g.Go(func() error {
		return exact(dynamicPager(gctx, c, NodePoolGVR, &pools, NodePoolFromUnstructured), "nodepools.karpenter.sh")
	})
	g.Go(func() error {
		return exact(dynamicPager(gctx, c, NodeClassGVR, &classes, NodeClassFromUnstructured), "ec2nodeclasses.karpenter.k8s.aws")
	})
	g.Go(func() error {
		return exact(dynamicPager(gctx, c, NodeClaimGVR, &claims, NodeClaimFromUnstructured), "nodeclaims.karpenter.sh")
	})
	var volumes *packer.Volumes
	unreadable := false
	if c.clients.Storage != nil {
		volumes = &packer.Volumes{}
		g.Go(func() error { return c.readVolumes(gctx, exact, volumes, &unreadable) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if unreadable {
		volumes = nil // volumes are not looked at (readVolumes warned)
	}
	if inexactList.Load() {
		st.ResourceVersion = ""
	}
	out := NewState(Objects{Pods: pods, Nodes: nodes, NodeClaims: claims, NodePools: pools, NodeClasses: classes,
		DaemonSets: daemonSets, PDBs: pdbs, Volumes: volumes}, st.ReadAt)
	out.ResourceVersion = st.ResourceVersion
	return out, nil
}

// Objects are the lists ReadState reads: every non-terminal pod, node, NodeClaim,
// NodePool, EC2NodeClass, DaemonSet and PodDisruptionBudget, and the storage
// objects pods' volumes resolve through (nil: not read).
type Objects struct {
	Pods        []*corev1.Pod
	Nodes       []*corev1.Node
	NodeClaims  []*karpenter.NodeClaim
	NodePools   []*karpenter.NodePool
	NodeClasses []*karpenter.EC2NodeClass
	DaemonSets  []*appsv1.DaemonSet
	PDBs        []*policyv1.PodDisruptionBudget
	Volumes     *packer.Volumes
}

// NewState assembles the state ReadState returns from lists read at readAt: the
// one assembly production, replay and the in-memory handler tests share.
func NewState(o Objects, readAt time.Time) *ClusterState {
	st := &ClusterState{ReadAt: readAt, PDBs: o.PDBs, NodeClaims: o.NodeClaims, AllNodes: o.Nodes}
	st.Snapshot.DaemonSets, st.Snapshot.NodePools, st.Snapshot.NodeClasses = o.DaemonSets, o.NodePools, o.NodeClasses
	st.Snapshot.Volumes = o.Volumes
	assemble(st, o.Pods)
	return st
}

// readVolumes lists claims, volumes and classes into v. A snapshot without them
// still plans (a pod's volumes are then not looked at): a cluster whose RBAC
// predates the permission gets a warning, not a failed invocation.
func (c *Client) readVolumes(ctx context.Context, exact func(func(metav1.ListOptions) (string, string, error), string) error, v *packer.Volumes, unreadable *bool) error {
	var claims []*corev1.PersistentVolumeClaim
	var pvs []*corev1.PersistentVolume
	var classes []*storagev1.StorageClass
	err := errors.Join(
		exact(func(o metav1.ListOptions) (string, string, error) {
			l, err := c.clients.Storage.PersistentVolumeClaims("").List(ctx, o)
			if err != nil {
				return "", "", err
			}
			claims = append(claims, ptrs(l.Items)...)
			return l.Continue, l.ResourceVersion, nil
		}, "persistentvolumeclaims"),
		exact(func(o metav1.ListOptions) (string, string, error) {
			l, err := c.clients.Storage.PersistentVolumes().List(ctx, o)
			if err != nil {
				return "", "", err
			}
			pvs = append(pvs, ptrs(l.Items)...)
			return l.Continue, l.ResourceVersion, nil
		}, "persistentvolumes"),
		exact(func(o metav1.ListOptions) (string, string, error) {
			l, err := c.clients.Storage.StorageClasses().List(ctx, o)
			if err != nil {
				return "", "", err
			}
			classes = append(classes, ptrs(l.Items)...)
			return l.Continue, l.ResourceVersion, nil
		}, "storageclasses.storage.k8s.io"))
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		*unreadable = true
		c.log.Warn("volumes are not looked at: the functions may not list persistentvolumeclaims, persistentvolumes or storageclasses (apply deploy/rbac.yaml)", "error", err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	v.Claims, v.PersistentVolumes, v.StorageClasses = claims, pvs, classes
	return nil
}

// listPaged runs list until the last page. The first request asks for exactly rv;
// if the server cannot serve it (compacted, or too new for a lagging cache) the list
// restarts at the latest version and inexact is reported.
func listPaged(ctx context.Context, rv string, limit int64, list func(metav1.ListOptions) (cont, rv string, err error)) (inexact bool, err error) {
	opts := metav1.ListOptions{Limit: limit}
	if rv != "" {
		opts.ResourceVersion, opts.ResourceVersionMatch = rv, metav1.ResourceVersionMatchExact
	}
	cont, _, err := list(opts)
	if err != nil && rv != "" && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apierrors.IsTimeout(err) || apierrors.IsBadRequest(err)) {
		inexact = true
		cont, _, err = list(metav1.ListOptions{Limit: limit})
	}
	for err == nil && cont != "" && ctx.Err() == nil {
		cont, _, err = list(metav1.ListOptions{Limit: limit, Continue: cont})
	}
	if err == nil {
		err = ctx.Err()
	}
	return inexact, err
}

func dynamicPager[T any](ctx context.Context, c *Client, gvr schema.GroupVersionResource, out *[]*T, conv func(*unstructured.Unstructured) (*T, error)) func(metav1.ListOptions) (string, string, error) {
	return func(o metav1.ListOptions) (string, string, error) {
		l, err := c.clients.Dynamic.Resource(gvr).List(ctx, o)
		if err != nil {
			return "", "", err
		}
		for i := range l.Items {
			v, err := conv(&l.Items[i])
			if err != nil {
				return "", "", err
			}
			*out = append(*out, v)
		}
		return l.GetContinue(), l.GetResourceVersion(), nil
	}
}

// crdHint makes a missing Karpenter CRD say how to install it.
func crdHint(err error) error {
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return fmt.Errorf("%w (are the Karpenter CRDs installed? kubectl apply --server-side --field-manager=joiner -k deploy/)", err)
	}
	return err
}

// podPtrs is ptrs for a page of pods, each made to share with the read's others.
func podPtrs(items []corev1.Pod, s *sharer) []*corev1.Pod {
	out := ptrs(items)
	for _, p := range out {
		s.pod(p)
	}
	return out
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
		switch o := any(out[i]).(type) {
		case *corev1.Pod:
			slimPod(o)
		case *corev1.Node:
			slimNode(o)
		case metav1.Object:
			slimMeta(o)
		}
	}
	return out
}

// assemble fills st's snapshot and PodsByNode from its nodes, claims and pods.
func assemble(st *ClusterState, pods []*corev1.Pod) {
	snap, byNode, nominated := packer.Assemble(st.AllNodes, pods, st.NodeClaims, facts.IsPending)
	st.Snapshot.Pods, st.Snapshot.Nodes, st.Snapshot.InFlight = snap.Pods, snap.Nodes, snap.InFlight
	st.PodsByNode, st.NominatedByNode = byNode, nominated
}

// ConditionTrue reports whether conditions hold typ with status True.
func ConditionTrue(conds []metav1.Condition, typ string) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}
