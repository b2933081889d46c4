package kube

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/lifecycle"
	"github.com/joiner-autoscaler/joiner/shared/nominate"
)

// Cluster is what Joiner's handlers call on Kubernetes. *Client implements it; handler
// tests may substitute their own.
type Cluster interface {
	// ReadState reads one consistent snapshot.
	ReadState(ctx context.Context) (*ClusterState, error)
	// CreateNodeClaim writes a NodeClaim before its instance is launched.
	CreateNodeClaim(ctx context.Context, nc *karpenter.NodeClaim) (*karpenter.NodeClaim, error)
	// MarkLaunched records the launched instance on the NodeClaim.
	MarkLaunched(ctx context.Context, name string, l Launch) (*karpenter.NodeClaim, error)
	// MarkLaunchFailed records a failed launch and deletes the NodeClaim.
	MarkLaunchFailed(ctx context.Context, name string, cause error, term InstanceTerminator) error
	// DeleteNodeClaim starts deleting a NodeClaim; Finalize completes it.
	DeleteNodeClaim(ctx context.Context, name string) error
	// Annotate merges annotations into a NodePool, EC2NodeClass or NodeClaim.
	Annotate(ctx context.Context, kind, name string, annotations map[string]string) error
	// UpdateNodeClassStatus writes an EC2NodeClass's resolved status when it changed.
	UpdateNodeClassStatus(ctx context.Context, nc *karpenter.EC2NodeClass, resolved karpenter.EC2NodeClassStatus) (bool, error)
	// SetEmpty records whether a NodeClaim's node is empty (the Empty condition).
	SetEmpty(ctx context.Context, name string, empty bool, at time.Time) error
	// SetDrifted sets the NodeClaim's Drifted condition True with reason (Karpenter's
	// reason names) and message, or removes it when reason is "".
	SetDrifted(ctx context.Context, name, reason, message string, at time.Time) error
	// Advance writes lifecycle transitions decided on st (registration,
	// initialization, timeouts, finalization) and the NodePools' status.
	Advance(ctx context.Context, st *ClusterState, trs []lifecycle.Transition, term InstanceTerminator) *ReconcileReport
	// BeginDisruption taints a Joiner-launched node karpenter.sh/disrupted:NoSchedule.
	BeginDisruption(ctx context.Context, st *ClusterState, nodeName string, opts DisruptOptions) (NodeDisruption, error)
	// ClearStaleDisruptions removes disruption taints no running disruption owns.
	ClearStaleDisruptions(ctx context.Context, st *ClusterState) ([]string, error)
	// TaintRebalance taints a Joiner-launched node RebalanceTaint.
	TaintRebalance(ctx context.Context, st *ClusterState, nodeName string) error
	// Record writes an Event (best effort).
	Record(ctx context.Context, e Event)
	// WriteNominations writes a nomination decision (nominate.ForPlan,
	// nominate.ForRegistration): NodeClaims' planned pods and pods'
	// status.nominatedNodeName. It returns how many pods it nominated.
	WriteNominations(ctx context.Context, d nominate.Decision) (int, error)
	// Nominate records on pods where they are expected to land (Nominated Events).
	Nominate(ctx context.Context, pods []*corev1.Pod, target string)
	// FailedScheduling records why no NodePool can take a pod.
	FailedScheduling(ctx context.Context, p *corev1.Pod, reason string)
	// Lease returns the cluster's lease for identity.
	Lease(identity string, duration time.Duration) *Lease
}

// Options configure a Client.
type Options struct {
	// ClusterName names the Lease (joiner-<cluster>).
	ClusterName string
	// Identity is the function name and invocation id: the Lease holder and the
	// Events' reportingInstance.
	Identity string
	// PageSize is the list page size (DefaultPageSize when 0).
	PageSize int
	// CachedList reads pods with resourceVersion=0: from the watch cache on API
	// servers older than 1.31 too, but in one unpaged response (see ReadState).
	CachedList bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives structured logs (slog.Default() when nil).
	Log *slog.Logger
	// Sleep waits between drain rounds; nil sleeps for real. Replay passes its
	// simulated clock's, so a drain held by a PodDisruptionBudget spends simulated
	// time, not wall time.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client is the real Cluster, on top of Clients.
type Client struct {
	clients  *Clients
	opts     Options
	PageSize int
	events   *Recorder
	log      *slog.Logger
	nowFn    func() time.Time
}

var _ Cluster = (*Client)(nil)

// New returns a Client over clients.
func New(clients *Clients, opts Options) *Client {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	return &Client{
		clients:  clients,
		opts:     opts,
		PageSize: opts.PageSize,
		events:   NewRecorder(clients.Events, opts.Identity, opts.Now, opts.Log),
		log:      opts.Log,
		nowFn:    opts.Now,
	}
}

func (c *Client) now() time.Time { return c.nowFn() }

// Now is the client's clock (Options.Now, or time.Now).
func (c *Client) Now() time.Time { return c.nowFn() }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Clients returns the underlying API clients.
func (c *Client) Clients() *Clients { return c.clients }

// Record writes an Event (best effort).
func (c *Client) Record(ctx context.Context, e Event) { c.events.Record(ctx, e) }

// Lease returns the cluster's lease for identity ("" = the client's identity).
func (c *Client) Lease(identity string, duration time.Duration) *Lease {
	if identity == "" {
		identity = c.opts.Identity
	}
	return NewLease(c.clients.Coordination, c.opts.ClusterName, identity, duration, c.nowFn, c.log)
}

func (c *Client) warn(ctx context.Context, ref corev1.ObjectReference, reason, action, note string) {
	c.Record(ctx, Event{Regarding: ref, Type: corev1.EventTypeWarning, Reason: reason, Action: action, Note: note})
}

func (c *Client) normal(ctx context.Context, ref corev1.ObjectReference, reason, action, note string) {
	c.Record(ctx, Event{Regarding: ref, Type: corev1.EventTypeNormal, Reason: reason, Action: action, Note: note})
}
