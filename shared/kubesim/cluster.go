// Package kubesim is an in-memory Kubernetes cluster for replay, local invocation and
// tests: client-go's fake clientset (built-in types) and dynamic fake (Karpenter's
// CRDs) behind the same kube.Clients the functions use against a real API server,
// plus the few controllers Joiner depends on, run on simulated time:
//
//   - a kubelet: an instance launched for a NodeClaim registers as a Ready Node
//     (labels, taints and capacity from the NodeClaim, providerID aws:///zone/i-…)
//     RegisterAfter its launch; a Node whose instance stopped or went away is removed
//     with its pods;
//   - a scheduler: pending pods bind to Ready nodes that fit them, decided by the
//     packing engine (shared/packer) restricted to existing nodes, so affinity,
//     taints and topology follow the one engine; pods left over carry
//     PodScheduled=False/Unschedulable, which is what the provisioner looks for;
//   - workload controllers: a Deployment's, ReplicaSet's, StatefulSet's or Job's pods
//     that were evicted or deleted come back pending, and Scale changes the count;
//   - the disruption controller: PodDisruptionBudget status, and evictions refused
//     (429) when a budget allows none;
//   - the API server's own behaviour the handlers rely on: generateName, UIDs,
//     creation timestamps, and deletion held by finalizers.
//
// NewReal runs the same kubelet, scheduler and controllers against a real API server
// instead, which does finalizers, deletion and eviction itself: the controllers act
// only through kubernetes.Interface and dynamic.Interface, bind pods through the
// pods/binding subresource and write pod, node and PDB status through the status
// subresource; the emulation above stays with the fake.
//
// Nothing runs in the background: Step advances every controller once, at the time
// Config.Now reports. The caller (the replay driver) decides when.
package kubesim

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/typed"
	"github.com/joiner-autoscaler/joiner/shared/nodeboot"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// DefaultRegisterAfter is how long after its launch an instance's node registers
// (boot, kubelet start, TLS bootstrap): typical of EKS AL2023 nodes.
const DefaultRegisterAfter = 40 * time.Second

// Instances looks up EC2 instances; *awssim.Sim implements it.
type Instances interface {
	Instance(id string) (awssim.Instance, bool)
}

// Config configures a Cluster.
type Config struct {
	// Now is the simulated clock (time.Now when nil).
	Now func() time.Time
	// Instances is where launched instances are looked up; nil: no node ever
	// registers (the cluster only holds what is applied to it).
	Instances Instances
	// Catalog is handed to the scheduler's engine (catalog.Embedded() when nil).
	Catalog *catalog.Catalog
	// RegisterAfter is the delay from an instance's launch to its Node
	// (DefaultRegisterAfter when 0).
	RegisterAfter time.Duration
	// Log receives one record per registration, removal and recreation (discarded when nil).
	Log *slog.Logger
	// Boot, when set, says what an instance's node registers as: the join its
	// user data makes when executed (shared/nodeboot), or why it never joins.
	// nil: every instance registers as its NodeClaim says.
	Boot func(ctx context.Context, instanceID string) nodeboot.Result
	// ReadyAfter is how long a registered Node stays NotReady (tainted
	// node.kubernetes.io/not-ready, as the node lifecycle controller taints it)
	// before its kubelet reports Ready: CNI and runtime starting. 0: Ready on
	// registration.
	ReadyAfter time.Duration
	// DevicePluginAfter is how long after Ready a Node advertises its extended
	// resources (nvidia.com/gpu, aws.amazon.com/neuron, ...): the device plugin
	// DaemonSet starts on the node and registers them. 0: at registration.
	DevicePluginAfter time.Duration
	// RealScheduler leaves binding to a kube-scheduler running against the same
	// (real) API server: the cluster binds nothing; each step it waits for the
	// scheduler to settle (Settle), moves the pods it bound to Running as their
	// kubelet would, and reports what it bound and marked unschedulable.
	RealScheduler bool
	// Settle waits until the real scheduler has acted on what changed; nil: until
	// the pods stop changing (see settleByPods).
	Settle func(ctx context.Context) error
	// NodeAnnotations are added to every Node the kubelet registers (for example
	// kwok.x-k8s.io/node=fake, for a KWOK controller to keep their heartbeats).
	NodeAnnotations map[string]string
}

// Cluster is the in-memory cluster. Its methods are meant for one driver goroutine;
// the API clients it hands out are safe for concurrent use, as client-go's are.
type Cluster struct {
	cfg     Config
	cs      kubernetes.Interface
	dyn     dynamic.Interface
	clients *kube.Clients
	// api emulates the API server over the fake clients; nil against a real one.
	api *apiServer
	// real is what NewReal keeps: the objects this cluster created, to clean up.
	real *realServer

	// prep is the scheduler's prepared catalog, made on first use: every
	// scheduling pass solves against the same catalog.
	prep func() *packer.Prepared

	mu        sync.Mutex
	workloads map[workloadKey]*workload
	// nodes are the Nodes this cluster's kubelet registered, by providerID.
	nodes map[string]string
	// bootFailed are the instances whose user data never joins, by providerID.
	bootFailed map[string]bool
	waits      *waits
	// lastSchedule is the signature of the last scheduling attempt that bound nothing.
	lastSchedule string
	// boots are the registered Nodes still coming up, by name (see readiness).
	boots map[string]*boot
	// seen is what the real scheduler's observer knows of each pod, by UID.
	seen map[types.UID]*podSeen
	// stepWrites is the API server's write count when the last step ended.
	stepWrites uint64
}

// withDefaults fills what cfg leaves unset.
func (cfg Config) withDefaults() Config {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Catalog == nil {
		cfg.Catalog = catalog.Embedded()
	}
	if cfg.RegisterAfter <= 0 {
		cfg.RegisterAfter = DefaultRegisterAfter
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// New returns an empty cluster (no objects, Karpenter's CRDs served).
func New(cfg Config) *Cluster {
	cfg = cfg.withDefaults()
	// NewSimpleClientset, not NewClientset: the latter's field-managed tracker builds
	// a REST mapper on every write, which made it the replay's largest cost.
	cs := fake.NewSimpleClientset() //nolint:staticcheck // deliberate, see above
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		kube.NodePoolGVR: "NodePoolList", kube.NodeClaimGVR: "NodeClaimList", kube.NodeClassGVR: "EC2NodeClassList",
	})
	c := &Cluster{cfg: cfg, prep: sync.OnceValue(func() *packer.Prepared { return packer.Prepare(cfg.Catalog) }), cs: cs, dyn: dyn, clients: typed.Clients(cs, dyn),
		workloads: map[workloadKey]*workload{}, nodes: map[string]string{}, bootFailed: map[string]bool{}, waits: newWaits(),
		boots: map[string]*boot{}, seen: map[types.UID]*podSeen{}}
	c.api = newAPIServer(cs, dyn, cfg.Now)
	return c
}

// Clients returns the API clients to build a kube.Client (kube.New) over.
func (c *Cluster) Clients() *kube.Clients { return c.clients }

// Clientset returns the typed clientset behind the cluster, for reading and writing
// objects beyond what kube.Clients offers (tests, replay's bookkeeping).
func (c *Cluster) Clientset() kubernetes.Interface { return c.cs }

// Step runs every controller once at the current time: the kubelet (registrations,
// removals), workload controllers (recreating pods), the scheduler (binding) and the
// disruption controller (PDB status). It reports what changed.
func (c *Cluster) Step(ctx context.Context) (*Report, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &Report{}
	if err := c.kubelet(ctx, r); err != nil {
		return r, err
	}
	if c.real != nil {
		// A real server's writes are not counted here: react every step, and finish
		// what a kubelet and the pod garbage collector would (terminating pods, pods
		// of deleted nodes).
		if err := c.finishTerminating(ctx); err != nil {
			return r, err
		}
	} else {
		writes := c.api.writes.Load()
		if writes == c.stepWrites {
			return r, nil // nothing changed since the last step: nothing to react to
		}
		defer func() { c.stepWrites = c.api.writes.Load() }()
	}
	// One list of the pods serves the other controllers: each keeps it current with
	// what it changes (a list of 5,000 pods is the step's largest cost).
	pods, err := c.listPods(ctx)
	if err != nil {
		return r, err
	}
	bind := c.schedule
	if c.cfg.RealScheduler {
		bind = c.observeScheduler
	}
	steps := []func(context.Context, *Report, *[]*corev1.Pod) error{c.reconcileWorkloads, bind, c.updatePDBs}
	for _, step := range steps {
		if err := step(ctx, r, &pods); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (c *Cluster) listPods(ctx context.Context) ([]*corev1.Pod, error) {
	list, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, errf(err, "list pods")
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Report says what one Step changed.
type Report struct {
	// Registered and Removed are node names.
	Registered []string
	Removed    []string
	// Bound counts pods bound to nodes.
	Bound int
	// Elsewhere counts the pods a real scheduler bound to a node other than the
	// one they were nominated to (status.nominatedNodeName, Joiner's plan).
	Elsewhere int
	// Recreated counts pods a workload controller created to replace lost ones.
	Recreated int
	// Lost are bare pods (no controller) that went with their node.
	Lost []string
	// BootFailed are the instances whose user data, executed, never joins.
	BootFailed []BootFailure
	// Unschedulable are pods newly marked PodScheduled=False/Unschedulable: what the
	// forwarder would batch into a Pending Pods event.
	Unschedulable []PodRef
}

// BootFailure is an instance whose node never registers, and why.
type BootFailure struct {
	NodeClaim, Instance, Cause string
}

// PodRef names a pod.
type PodRef struct {
	Namespace, Name string
}

func (p PodRef) String() string { return p.Namespace + "/" + p.Name }

func (c *Cluster) logf(msg string, args ...any) { c.cfg.Log.Info(msg, args...) }

// errf wraps an API error with what was being done.
func errf(err error, format string, a ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("kubesim: %s: %w", fmt.Sprintf(format, a...), err)
}
