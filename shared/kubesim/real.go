package kubesim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// SimCreatedAnnotation holds the simulated time a pod of this cluster was created at.
// A real API server stamps creationTimestamp with its own clock, which says nothing on
// simulated time; pod waits are measured from this annotation when it is there.
const SimCreatedAnnotation = "kubesim.joiner.sh/created"

var (
	daemonSetsGVR = appsv1.SchemeGroupVersion.WithResource("daemonsets")
	leasesGVR     = coordinationv1.SchemeGroupVersion.WithResource("leases")
)

// realServer is what a Cluster over a real API server keeps: the objects it created,
// in order, and what existed before, so Cleanup removes exactly what the replay made.
type realServer struct {
	mu      sync.Mutex
	created []objRef
	seen    map[objRef]bool
	// claimsBefore and leasesBefore existed when the cluster was opened (only with
	// force): Cleanup leaves them.
	claimsBefore map[string]bool
	leasesBefore map[string]bool
	// uids are the UIDs the server gave the Karpenter objects Apply created, by
	// kind/name (all cluster-scoped).
	uids map[string]types.UID
}

type objRef struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

// track records an object the cluster created; a nil realServer (the in-memory
// cluster) tracks nothing.
func (s *realServer) track(gvr schema.GroupVersionResource, ns, name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := objRef{gvr, ns, name}
	if !s.seen[ref] {
		s.seen[ref] = true
		s.created = append(s.created, ref)
	}
}

// gotUID records the UID the server gave a Karpenter object Apply created.
func (s *realServer) gotUID(kind, name string, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uids[kind+"/"+name] = uid
}

// owners points owner references to objects Apply created at the UIDs the server
// gave them. A manifest (a cluster dump, scenario 020's) names its owners by the
// UIDs of another server; left so, they would name objects that do not exist,
// which a garbage collector takes as owners deleted.
func (s *realServer) owners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []metav1.OwnerReference
	for i, o := range refs {
		if uid, ok := s.uids[o.Kind+"/"+o.Name]; ok && o.UID != uid {
			if out == nil {
				out = slices.Clone(refs)
			}
			out[i].UID = uid
		}
	}
	if out == nil {
		return refs
	}
	return out
}

func (s *realServer) tracked(gvr schema.GroupVersionResource, ns, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[objRef{gvr, ns, name}]
}

// ErrNotScratch is returned by NewReal for a cluster that already has Nodes,
// NodeClaims or NodePools, unless forced.
var ErrNotScratch = errors.New("kubesim: the cluster is not empty")

// NewReal returns a cluster whose kubelet, scheduler and controllers act on the real
// API server of rc. The replay creates and deletes Nodes, Pods and Karpenter objects
// there, so it refuses a cluster that already has Nodes, NodeClaims or NodePools
// unless force is set: it is meant for an empty scratch cluster (kind, envtest),
// never a production one. Karpenter's CRDs (deploy/crds) must be installed; Joiner's
// namespace is created when missing. Call Cleanup when done.
func NewReal(ctx context.Context, cfg Config, rc *rest.Config, force bool) (*Cluster, error) {
	cfg = cfg.withDefaults()
	// Built-in types as protobuf: a step lists every pod (5,000 in a burst)
	// several times, and JSON decoding was most of a real-scheduler replay's time.
	pb := rest.CopyConfig(rc)
	pb.ContentType = "application/vnd.kubernetes.protobuf"
	pb.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(pb)
	if err != nil {
		return nil, fmt.Errorf("kubesim: kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubesim: dynamic client: %w", err)
	}
	// The functions get the clients production builds, over the same server.
	clients, err := kube.NewClients(rc)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, prep: sync.OnceValue(func() *packer.Prepared { return packer.Prepare(cfg.Catalog) }), cs: cs, dyn: dyn, clients: clients,
		workloads: map[workloadKey]*workload{}, nodes: map[string]string{}, bootFailed: map[string]bool{}, waits: newWaits(),
		boots: map[string]*boot{}, seen: map[types.UID]*podSeen{},
		real: &realServer{seen: map[objRef]bool{}, claimsBefore: map[string]bool{}, leasesBefore: map[string]bool{}, uids: map[string]types.UID{}}}
	if err := c.checkScratch(ctx, force); err != nil {
		return nil, err
	}
	if err := c.ensureNamespace(ctx, kube.Namespace); err != nil {
		return nil, err
	}
	leases, err := cs.CoordinationV1().Leases(kube.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, errf(err, "list leases in %s", kube.Namespace)
	}
	for _, l := range leases.Items {
		c.real.leasesBefore[l.Name] = true
	}
	return c, nil
}

// checkScratch refuses a cluster with Nodes, NodeClaims or NodePools (unless force),
// and one without Karpenter's CRDs.
func (c *Cluster) checkScratch(ctx context.Context, force bool) error {
	var found []string
	for _, gvr := range []schema.GroupVersionResource{kube.NodePoolGVR, kube.NodeClaimGVR, kube.NodeClassGVR} {
		list, err := c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("kubesim: the API server does not serve %s: install Karpenter's CRDs first (kubectl apply --server-side --field-manager=joiner -k deploy/)", gvr.GroupResource())
		}
		if err != nil {
			return errf(err, "list %s", gvr.GroupResource())
		}
		if len(list.Items) > 0 && gvr != kube.NodeClassGVR {
			found = append(found, fmt.Sprintf("%d %s", len(list.Items), gvr.Resource))
		}
		if gvr == kube.NodeClaimGVR {
			for _, u := range list.Items {
				c.real.claimsBefore[u.GetName()] = true
			}
		}
	}
	nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return errf(err, "list nodes")
	}
	if len(nodes.Items) > 0 {
		found = append(found, fmt.Sprintf("%d nodes", len(nodes.Items)))
	}
	if len(found) > 0 && !force {
		return fmt.Errorf("%w: it has %s; a replay creates and deletes Nodes, Pods and Karpenter objects, so it runs only on an empty scratch cluster (--force to run anyway; never a production cluster)",
			ErrNotScratch, strings.Join(found, ", "))
	}
	return nil
}

func (c *Cluster) ensureNamespace(ctx context.Context, ns string) error {
	_, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return errf(err, "create namespace %s", ns)
	}
	return nil
}

// deletePod deletes a pod at once (grace period 0): the simulated kubelet stops its
// containers instantly, and a real API server would otherwise keep a bound pod
// terminating until a kubelet confirmed it.
func (c *Cluster) deletePod(ctx context.Context, ns, name string) error {
	zero := int64(0)
	return c.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// finishTerminating does, on a real API server, what its kubelets and the pod
// garbage collector would: pods being deleted (evicted by a drain) go at once, and
// pods bound to a node of this cluster's that no longer exists are removed.
func (c *Cluster) finishTerminating(ctx context.Context) error {
	pods, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return errf(err, "list pods")
	}
	var nodes map[string]bool
	for i := range pods.Items {
		p := &pods.Items[i]
		gone := p.DeletionTimestamp != nil
		if !gone && p.Spec.NodeName != "" && c.real.tracked(nodesGVR, "", p.Spec.NodeName) {
			if nodes == nil {
				if nodes, err = c.nodeNames(ctx); err != nil {
					return err
				}
			}
			gone = !nodes[p.Spec.NodeName]
		}
		if gone {
			if err := c.deletePod(ctx, p.Namespace, p.Name); err != nil && !apierrors.IsNotFound(err) {
				return errf(err, "delete pod %s/%s", p.Namespace, p.Name)
			}
		}
	}
	return nil
}

func (c *Cluster) nodeNames(ctx context.Context) (map[string]bool, error) {
	list, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, errf(err, "list nodes")
	}
	out := make(map[string]bool, len(list.Items))
	for _, n := range list.Items {
		out[n.Name] = true
	}
	return out, nil
}

// writeNodeStatus sets a created node's status through the status subresource (a
// real API server keeps no status given on create).
func (c *Cluster) writeNodeStatus(ctx context.Context, n *corev1.Node, st corev1.NodeStatus) error {
	n = n.DeepCopy()
	n.Status = st
	out, err := c.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return errf(err, "write status of node %s", n.Name)
	}
	// The API server's TaintNodesByCondition admission taints a new node not-ready;
	// the node lifecycle controller lifts that once the node reports Ready.
	if !facts.NodeReady(out) || !slices.ContainsFunc(out.Spec.Taints, isNotReady) {
		return nil
	}
	out.Spec.Taints = slices.DeleteFunc(out.Spec.Taints, isNotReady)
	_, err = c.cs.CoreV1().Nodes().Update(ctx, out, metav1.UpdateOptions{})
	return errf(err, "lift the not-ready taint of node %s", n.Name)
}

func isNotReady(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }

// bindReal binds through the pods/binding subresource, as the scheduler does, then
// reports the pod running and ready through the status subresource, as its kubelet
// would.
func (c *Cluster) bindReal(ctx context.Context, p *corev1.Pod, node string, now time.Time) (*corev1.Pod, error) {
	pods := c.cs.CoreV1().Pods(p.Namespace)
	err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil, nil // deleted, or bound meanwhile: the next step sees it
	}
	if err != nil {
		return nil, errf(err, "bind pod %s/%s to %s", p.Namespace, p.Name, node)
	}
	t := metav1.NewTime(now)
	var out *corev1.Pod
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.StartTime = &t
		cur.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
		}
		out, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errf(err, "start pod %s/%s on %s", p.Namespace, p.Name, node)
	}
	c.waits.bound(p, now)
	return out, nil
}

// stamp records the simulated creation time on a pod this cluster creates on a real
// API server.
func (c *Cluster) stamp(p *corev1.Pod) {
	if c.real == nil {
		return
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[SimCreatedAnnotation] = c.cfg.Now().UTC().Format(time.RFC3339Nano)
}

// createdAt is when a pod was created in simulated time.
func createdAt(p *corev1.Pod) time.Time {
	if v, ok := p.Annotations[SimCreatedAnnotation]; ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return p.CreationTimestamp.Time
}

// ownerUIDs gives owner references without a UID (a manifest's workload expanded
// into pods has none) a stable one: a real API server rejects an empty UID, and no
// garbage collector there knows these owners.
func ownerUIDs(p *corev1.Pod) {
	for i := range p.OwnerReferences {
		o := &p.OwnerReferences[i]
		if o.UID == "" {
			o.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012x", fnv32(o.Kind+"/"+p.Namespace+"/"+o.Name)))
		}
	}
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// Cleanup deletes, on a real API server, what the replay created: the NodeClaims
// (finalizers removed: their instances were simulated), the pods, Nodes, DaemonSets,
// PodDisruptionBudgets, NodePools and EC2NodeClasses, and the functions' Leases.
// Namespaces stay (a server without a namespace controller never finishes deleting
// one), as do the Events, which expire on their own. In memory it does nothing.
func (c *Cluster) Cleanup(ctx context.Context) error {
	if c.real == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	claims, err := c.dyn.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, errf(err, "list NodeClaims"))
	} else {
		for _, u := range claims.Items {
			if !c.real.claimsBefore[u.GetName()] {
				c.real.track(kube.NodeClaimGVR, "", u.GetName())
			}
		}
	}
	leases, err := c.cs.CoordinationV1().Leases(kube.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, errf(err, "list leases"))
	} else {
		for _, l := range leases.Items {
			if !c.real.leasesBefore[l.Name] {
				c.real.track(leasesGVR, kube.Namespace, l.Name)
			}
		}
	}
	// NodeClaims first (nothing else may hold them), then pods before their nodes.
	order := map[schema.GroupVersionResource]int{kube.NodeClaimGVR: 0, podsGVR: 1, nodesGVR: 2}
	refs := append([]objRef(nil), c.real.created...)
	sort.SliceStable(refs, func(i, j int) bool { return rank(order, refs[i].gvr) < rank(order, refs[j].gvr) })
	zero := int64(0)
	for _, ref := range refs {
		var err error
		switch ref.gvr {
		case podsGVR:
			err = c.cs.CoreV1().Pods(ref.namespace).Delete(ctx, ref.name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		case nodesGVR:
			// Nodes taken over from Karpenter carry its karpenter.sh/termination finalizer.
			_, err = c.cs.CoreV1().Nodes().Patch(ctx, ref.name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err == nil {
				err = c.cs.CoreV1().Nodes().Delete(ctx, ref.name, metav1.DeleteOptions{})
			}
		case daemonSetsGVR:
			err = c.cs.AppsV1().DaemonSets(ref.namespace).Delete(ctx, ref.name, metav1.DeleteOptions{})
		case pdbsGVR:
			err = c.cs.PolicyV1().PodDisruptionBudgets(ref.namespace).Delete(ctx, ref.name, metav1.DeleteOptions{})
		case claimsGVR:
			// Admission adds the protection finalizers; no controller here removes them.
			claims := c.cs.CoreV1().PersistentVolumeClaims(ref.namespace)
			if _, err = claims.Patch(ctx, ref.name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err == nil {
				err = claims.Delete(ctx, ref.name, metav1.DeleteOptions{})
			}
		case volumesGVR:
			pvs := c.cs.CoreV1().PersistentVolumes()
			if _, err = pvs.Patch(ctx, ref.name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err == nil {
				err = pvs.Delete(ctx, ref.name, metav1.DeleteOptions{})
			}
		case storageClassesGVR:
			err = c.cs.StorageV1().StorageClasses().Delete(ctx, ref.name, metav1.DeleteOptions{})
		case leasesGVR:
			err = c.cs.CoordinationV1().Leases(ref.namespace).Delete(ctx, ref.name, metav1.DeleteOptions{})
		default:
			res := c.dyn.Resource(ref.gvr)
			_, err = res.Patch(ctx, ref.name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err == nil {
				err = res.Delete(ctx, ref.name, metav1.DeleteOptions{})
			}
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, errf(err, "clean up %s %s", ref.gvr.Resource, strings.TrimPrefix(ref.namespace+"/"+ref.name, "/")))
		}
	}
	c.real.created, c.real.seen = nil, map[objRef]bool{}
	return errors.Join(errs...)
}

func rank(order map[schema.GroupVersionResource]int, gvr schema.GroupVersionResource) int {
	if r, ok := order[gvr]; ok {
		return r
	}
	return len(order)
}
