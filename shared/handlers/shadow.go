package handlers

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/lifecycle"
	"github.com/joiner-autoscaler/joiner/shared/nominate"
)

// Modes: what the functions do with their decisions.
const (
	// ModeAct carries decisions out (the default).
	ModeAct = "act"
	// ModeShadow decides as ModeAct does but only records: every write to EC2, IAM
	// and Kubernetes becomes a Decision in the summary, the log and the ShadowDecisions
	// metric, so Joiner can run beside Karpenter and be compared with it.
	ModeShadow = "shadow"
)

// DecisionKind names one kind of write an invocation decided on.
type DecisionKind string

// Decision kinds a Recorder records.
const (
	DecideCreateNodeClaim DecisionKind = "CreateNodeClaim"
	DecideLaunch          DecisionKind = "Launch"
	DecideRecordLaunch    DecisionKind = "RecordLaunch"
	DecideLaunchFailed    DecisionKind = "LaunchFailed"
	DecideDeleteNodeClaim DecisionKind = "DeleteNodeClaim"
	DecideTerminate       DecisionKind = "Terminate"
	DecideTaint           DecisionKind = "TaintDisrupted"
	DecideRebalanceTaint  DecisionKind = "TaintRebalance"
	DecideDrain           DecisionKind = "Drain"
	DecideUntaint         DecisionKind = "Untaint"
	DecideAnnotate        DecisionKind = "Annotate"
	DecideSetEmpty        DecisionKind = "SetEmpty"
	DecideSetDrifted      DecisionKind = "SetDrifted"
	DecideLifecycle       DecisionKind = "Lifecycle"
	DecideNodeClassStatus DecisionKind = "NodeClassStatus"
	// DecideInstanceProfile is an IAM write that readies an EC2NodeClass's
	// instance profile (create it, give it the class's role), and
	// DecideDeleteInstanceProfile the deletion of a deleted class's profile.
	DecideInstanceProfile       DecisionKind = "InstanceProfile"
	DecideDeleteInstanceProfile DecisionKind = "DeleteInstanceProfile"
	DecideNominate              DecisionKind = "Nominate"
	DecideEvent                 DecisionKind = "Event"
)

// Decision is one write to EC2, IAM or Kubernetes that an invocation decided on.
type Decision struct {
	Kind         DecisionKind `json:"kind"`
	At           time.Time    `json:"at"`
	NodeClaim    string       `json:"nodeClaim,omitempty"`
	Node         string       `json:"node,omitempty"`
	Instances    []string     `json:"instances,omitempty"`
	NodePool     string       `json:"nodePool,omitempty"`
	NodeClass    string       `json:"nodeClass,omitempty"`
	InstanceType string       `json:"instanceType,omitempty"`
	Zone         string       `json:"zone,omitempty"`
	CapacityType string       `json:"capacityType,omitempty"`
	PricePerHour float64      `json:"pricePerHour,omitempty"`
	Pods         int          `json:"pods,omitempty"`
	Reason       string       `json:"reason,omitempty"`
	Detail       string       `json:"detail,omitempty"`
}

// Recorder is the executor that carries nothing out: it answers reads from the
// cluster and cloud it wraps and records every write as a Decision, answering as a
// successful write would. It is shadow mode's executor, and the one handler tests
// use to assert decisions in memory (as Nomad's scheduler Harness records plans).
// Every method of kube.Cluster and Cloud that writes is here, so no write of a
// handler can reach the wrapped executors.
type Recorder struct {
	read  kube.Cluster
	cloud Cloud
	now   func() time.Time
	// price is the hourly price of an offering (0 when unknown).
	price func(instanceType, zone, capacityType string) float64

	mu        sync.Mutex
	decisions []Decision
	seq       int
	leases    memLeases

	// Shadow memory (shadowmemory.go): what earlier rounds would have written,
	// applied to every state read, and this invocation's additions to it.
	store    MemoryStore
	memory   *shadowMemory
	ops      []memoryOp
	lastRead *kube.ClusterState
}

var (
	_ kube.Cluster = (*Recorder)(nil)
	_ Cloud        = (*Recorder)(nil)
)

// NewRecorder wraps the executors of reads; now stamps the decisions.
func NewRecorder(read kube.Cluster, c Cloud, now func() time.Time) *Recorder {
	if now == nil {
		now = time.Now
	}
	return &Recorder{read: read, cloud: c, now: now, leases: memLeases{leases: map[string]*coordinationv1.Lease{}}}
}

// pricedBy prices launches by cat (the invocation's catalog, read later than the
// Recorder is made).
func (r *Recorder) pricedBy(cat func() *catalog.Catalog) {
	r.price = func(t, zone, ct string) float64 {
		p, _ := cat().Price(t, zone, ct)
		return p
	}
}

// Decisions returns what was recorded so far, in order.
func (r *Recorder) Decisions() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Decision(nil), r.decisions...)
}

func (r *Recorder) add(d Decision) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	d.At = r.now().UTC()
	r.decisions = append(r.decisions, d)
	r.seq++
	return r.seq
}

// ReadState reads the wrapped cluster, as earlier shadow rounds would have left it
// (the shadow memory).
func (r *Recorder) ReadState(ctx context.Context) (*kube.ClusterState, error) {
	st, err := r.read.ReadState(ctx)
	if err != nil {
		return nil, err
	}
	return r.withMemory(st), nil
}

// CreateNodeClaim records the NodeClaim and names it as the API server would.
func (r *Recorder) CreateNodeClaim(_ context.Context, nc *karpenter.NodeClaim) (*karpenter.NodeClaim, error) {
	cp := *nc
	cp.ObjectMeta = *nc.ObjectMeta.DeepCopy()
	out := &cp
	n := r.add(Decision{Kind: DecideCreateNodeClaim, NodePool: nc.Labels[karpenter.NodePoolLabelKey]})
	if out.Name == "" {
		out.Name = fmt.Sprintf("%sshadow%d", out.GenerateName, n)
	}
	r.mu.Lock()
	r.decisions[len(r.decisions)-1].NodeClaim = out.Name
	r.mu.Unlock()
	return out, nil
}

// MarkLaunched records the status write.
func (r *Recorder) MarkLaunched(_ context.Context, name string, l kube.Launch) (*karpenter.NodeClaim, error) {
	r.add(Decision{Kind: DecideRecordLaunch, NodeClaim: name, InstanceType: l.InstanceType, Zone: l.Zone, CapacityType: l.CapacityType,
		Instances: []string{facts.InstanceID(l.ProviderID)}})
	nc := &karpenter.NodeClaim{}
	nc.Name = name
	nc.Status.ProviderID = l.ProviderID
	return nc, nil
}

// MarkLaunchFailed records the failed launch.
func (r *Recorder) MarkLaunchFailed(_ context.Context, name string, cause error, _ kube.InstanceTerminator) error {
	r.add(Decision{Kind: DecideLaunchFailed, NodeClaim: name, Detail: cause.Error()})
	return nil
}

// DeleteNodeClaim records the deletion; later rounds see the cluster without it.
func (r *Recorder) DeleteNodeClaim(_ context.Context, name string) error {
	r.add(Decision{Kind: DecideDeleteNodeClaim, NodeClaim: name})
	r.remember(func(m *shadowMemory) { m.remove(name, memRemoval{At: r.now().UTC()}) })
	return nil
}

// Annotate records the annotations.
func (r *Recorder) Annotate(_ context.Context, kind, name string, annotations map[string]string) error {
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r.add(Decision{Kind: DecideAnnotate, Detail: fmt.Sprintf("%s/%s %v", kind, name, keys)})
	return nil
}

// SetEmpty records the Empty condition write and remembers it: the condition's
// time is what starts the pool's consolidateAfter.
func (r *Recorder) SetEmpty(_ context.Context, name string, empty bool, at time.Time) error {
	r.add(Decision{Kind: DecideSetEmpty, NodeClaim: name, Detail: fmt.Sprintf("Empty=%v", empty)})
	status := metav1.ConditionFalse
	if empty {
		status = metav1.ConditionTrue
	}
	c := memCondition{Type: karpenter.ConditionEmpty, Status: status, Since: at.UTC()}
	r.remember(func(m *shadowMemory) { m.setCondition(name, c) })
	return nil
}

// SetDrifted records the Drifted condition write and remembers it.
func (r *Recorder) SetDrifted(_ context.Context, name, reason, message string, at time.Time) error {
	detail := "Drifted removed"
	c := memCondition{Type: karpenter.ConditionDrifted, Since: at.UTC()}
	if reason != "" {
		detail = "Drifted=true: " + message
		c.Status, c.Reason = metav1.ConditionTrue, reason
	}
	r.add(Decision{Kind: DecideSetDrifted, NodeClaim: name, Reason: reason, Detail: detail})
	r.remember(func(m *shadowMemory) { m.setCondition(name, c) })
	return nil
}

// Advance records each lifecycle transition and reports that nothing changed, so
// the handler does not read again for writes that did not happen.
func (r *Recorder) Advance(_ context.Context, _ *kube.ClusterState, trs []lifecycle.Transition, _ kube.InstanceTerminator) *kube.ReconcileReport {
	for _, t := range trs {
		d := Decision{Kind: DecideLifecycle, Reason: string(t.Kind), Detail: t.Why}
		if t.NodeClaim != nil {
			d.NodeClaim = t.NodeClaim.Name
		}
		if t.Node != nil {
			d.Node = t.Node.Name
		}
		r.add(d)
	}
	return &kube.ReconcileReport{}
}

// BeginDisruption applies the executor's own refusals (kube.ClusterState.Disruptable),
// then records the taint; the disruption records its drain and deletion.
func (r *Recorder) BeginDisruption(_ context.Context, st *kube.ClusterState, nodeName string, opts kube.DisruptOptions) (kube.NodeDisruption, error) {
	_, nc, _, err := st.Disruptable(nodeName, opts)
	if err != nil {
		return nil, err
	}
	r.add(Decision{Kind: DecideTaint, Node: nodeName, NodeClaim: nc.Name, Reason: opts.Reason})
	return &recordedDisruption{r: r, node: nodeName, claim: nc, reason: opts.Reason}, nil
}

// ClearStaleDisruptions removes nothing: a recorder never tainted a node, and a
// karpenter.sh/disrupted taint in the cluster is another controller's.
func (r *Recorder) ClearStaleDisruptions(context.Context, *kube.ClusterState) ([]string, error) {
	return nil, nil
}

// TaintRebalance records the taint after the executor's refusals.
func (r *Recorder) TaintRebalance(_ context.Context, st *kube.ClusterState, nodeName string) error {
	_, nc, _, err := st.Disruptable(nodeName, kube.DisruptOptions{Involuntary: true})
	if err != nil {
		return err
	}
	r.add(Decision{Kind: DecideRebalanceTaint, Node: nodeName, NodeClaim: nc.Name})
	return nil
}

// Record records an Event; Nominated Events are nominations.
func (r *Recorder) Record(_ context.Context, e kube.Event) {
	kind := DecideEvent
	if e.Reason == kube.ReasonNominated {
		kind = DecideNominate
	}
	r.add(Decision{Kind: kind, Reason: e.Reason, Detail: e.Regarding.Kind + " " + e.Regarding.Namespace + "/" + e.Regarding.Name + ": " + e.Note})
}

// WriteNominations records the NodeClaims' planned pods and the pods'
// nominatedNodeName, and reports the pods as nominated.
func (r *Recorder) WriteNominations(_ context.Context, d nominate.Decision) (int, error) {
	for _, rec := range d.Records {
		r.add(Decision{Kind: DecideNominate, NodeClaim: rec.NodeClaim, Pods: len(rec.Pods), Detail: "planned pods"})
	}
	for _, n := range d.Nominations {
		r.add(Decision{Kind: DecideNominate, Node: n.Node, Pods: 1, Detail: "nominatedNodeName of " + facts.PodKey(n.Pod)})
	}
	return len(d.Nominations), nil
}

// Nominate records where the pods are expected to land.
func (r *Recorder) Nominate(_ context.Context, pods []*corev1.Pod, target string) {
	r.add(Decision{Kind: DecideNominate, Pods: len(pods), Detail: target})
}

// FailedScheduling records the Event.
func (r *Recorder) FailedScheduling(_ context.Context, p *corev1.Pod, reason string) {
	r.add(Decision{Kind: DecideEvent, Reason: kube.ReasonFailedScheduling, Detail: facts.PodKey(p) + ": " + reason})
}

// Lease is a lease on the recorder's own memory: the cluster's Lease object is a
// write too, and a recorder serialises with nothing.
func (r *Recorder) Lease(identity string, duration time.Duration) *kube.Lease {
	return kube.NewLease(&r.leases, "shadow", identity, duration, r.now, nil)
}

// Launch records the launch and answers with the instance the request's first
// choice would be.
func (r *Recorder) Launch(_ context.Context, req cloud.LaunchRequest) (cloud.Instance, error) {
	inst := cloud.Instance{CapacityType: karpenter.CapacityTypeOnDemand}
	if len(req.InstanceTypes) > 0 {
		inst.InstanceType = req.InstanceTypes[0]
	}
	if len(req.Zones) > 0 {
		inst.Zone = req.Zones[0]
	}
	if len(req.CapacityTypes) > 0 {
		inst.CapacityType = req.CapacityTypes[0]
	}
	d := Decision{Kind: DecideLaunch, NodeClaim: req.NodeClaim, NodePool: req.NodePool, InstanceType: inst.InstanceType,
		Zone: inst.Zone, CapacityType: inst.CapacityType, Detail: fmt.Sprintf("%d option(s)", len(req.InstanceTypes))}
	if r.price != nil {
		d.PricePerHour = r.price(inst.InstanceType, inst.Zone, inst.CapacityType)
	}
	n := r.add(d)
	inst.ID = fmt.Sprintf("i-shadow%011d", n)
	inst.ProviderID = "aws:///" + inst.Zone + "/" + inst.ID
	r.mu.Lock()
	r.decisions[len(r.decisions)-1].Instances = []string{inst.ID}
	r.mu.Unlock()
	return inst, nil
}

// profilePlanner is a Cloud that can say, reading only, which IAM writes
// readying and collecting instance profiles would make (*cloud.Provider).
type profilePlanner interface {
	PlanInstanceProfile(ctx context.Context, nc *karpenter.EC2NodeClass) ([]cloud.ProfileChange, error)
	PlanCollectInstanceProfiles(ctx context.Context, live []string) ([]cloud.ProfileChange, error)
}

// ResolveNodeClass answers with the status the class has (beside Karpenter its
// nodeclass controller keeps that status current) and records the IAM writes
// resolving would make for the class's instance profile. A profile that cannot
// be readied is the status write acting would make: InstanceProfileReady false.
func (r *Recorder) ResolveNodeClass(ctx context.Context, nc *karpenter.EC2NodeClass) (cloud.Resolved, error) {
	if p, ok := r.cloud.(profilePlanner); ok {
		changes, err := p.PlanInstanceProfile(ctx, nc)
		for _, c := range changes {
			r.add(Decision{Kind: DecideInstanceProfile, NodeClass: c.NodeClass, Reason: c.Operation, Detail: c.String()})
		}
		if err != nil {
			r.add(Decision{Kind: DecideNodeClassStatus, NodeClass: nc.Name, Detail: "EC2NodeClass/" + nc.Name + ": " +
				cloud.ConditionInstanceProfileReady + "=false: " + err.Error()})
		}
	}
	return cloud.Resolved{Status: nc.Status, AMIsResolved: len(nc.Status.AMIs) > 0}, nil
}

// CapacityReservations reads the wrapped cloud.
func (r *Recorder) CapacityReservations(ctx context.Context, nc *karpenter.EC2NodeClass) ([]cloud.CapacityReservation, error) {
	return r.cloud.CapacityReservations(ctx, nc)
}

// CollectInstanceProfiles records the deletions of the instance profiles of
// deleted classes that acting would make, and answers with them as deleted.
func (r *Recorder) CollectInstanceProfiles(ctx context.Context, live []string) ([]string, error) {
	p, ok := r.cloud.(profilePlanner)
	if !ok {
		return nil, nil
	}
	changes, err := p.PlanCollectInstanceProfiles(ctx, live)
	deleted := make([]string, 0, len(changes))
	for _, c := range changes {
		r.add(Decision{Kind: DecideDeleteInstanceProfile, NodeClass: c.NodeClass, Reason: c.Operation, Detail: c.String()})
		deleted = append(deleted, c.Profile)
	}
	return deleted, err
}

// UpdateNodeClassStatus records a status that differs from the class's.
func (r *Recorder) UpdateNodeClassStatus(_ context.Context, nc *karpenter.EC2NodeClass, resolved karpenter.EC2NodeClassStatus) (bool, error) {
	if equality.Semantic.DeepEqual(nc.Status, resolved) {
		return false, nil
	}
	r.add(Decision{Kind: DecideNodeClassStatus, Detail: "EC2NodeClass/" + nc.Name})
	return true, nil
}

// ConfirmLaunched has nothing to confirm.
func (r *Recorder) ConfirmLaunched(context.Context) error { return nil }

// Terminate records the termination.
func (r *Recorder) Terminate(_ context.Context, ids ...string) (cloud.TerminateResult, error) {
	r.add(Decision{Kind: DecideTerminate, Instances: append([]string(nil), ids...)})
	return cloud.TerminateResult{Terminating: append([]string(nil), ids...)}, nil
}

// ListOwned reads the wrapped cloud, without the instances of NodeClaims earlier
// rounds removed: acting, those would be terminating, and to a state without their
// NodeClaims they would look leaked.
func (r *Recorder) ListOwned(ctx context.Context) ([]cloud.OwnedInstance, error) {
	owned, err := r.cloud.ListOwned(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.memory == nil || len(r.memory.Removed) == 0 {
		return owned, nil
	}
	out := owned[:0:0]
	for _, o := range owned {
		if _, removed := r.memory.Removed[o.NodeClaim]; !removed || o.NodeClaim == "" {
			out = append(out, o)
		}
	}
	return out, nil
}

// LiveCatalog reads the wrapped cloud.
func (r *Recorder) LiveCatalog(ctx context.Context, zones []string) (*catalog.Catalog, error) {
	return r.cloud.LiveCatalog(ctx, zones)
}

// Unavailable is the wrapped cloud's cache of unavailable offerings: memory of the
// container, not a write to EC2.
func (r *Recorder) Unavailable() *cloud.UnavailableOfferings { return r.cloud.Unavailable() }

// recordedDisruption records a drain and the deletion that completes it.
type recordedDisruption struct {
	r         *Recorder
	node      string
	claim     *karpenter.NodeClaim
	reason    string
	committed bool
}

func (d *recordedDisruption) Drain(_ context.Context, opts kube.DrainOptions) (*kube.DrainResult, error) {
	detail := ""
	if !opts.GraceDeadline.IsZero() {
		detail = "pods deleted at " + opts.GraceDeadline.UTC().Format(time.RFC3339)
	}
	d.r.add(Decision{Kind: DecideDrain, Node: d.node, NodeClaim: d.claim.Name, Reason: d.reason, Detail: detail})
	return &kube.DrainResult{}, nil
}

func (d *recordedDisruption) Complete(context.Context, kube.InstanceTerminator) error {
	d.committed = true
	d.r.add(Decision{Kind: DecideDeleteNodeClaim, Node: d.node, NodeClaim: d.claim.Name, Reason: d.reason,
		Instances: []string{facts.InstanceID(d.claim.Status.ProviderID)}})
	name, removal := d.claim.Name, memRemoval{At: d.r.now().UTC(), Reason: d.reason}
	d.r.remember(func(m *shadowMemory) { m.remove(name, removal) })
	return nil
}

func (d *recordedDisruption) Abandon(context.Context) {
	if !d.committed {
		d.committed = true
		d.r.add(Decision{Kind: DecideUntaint, Node: d.node, NodeClaim: d.claim.Name, Reason: d.reason})
	}
}

// memLeases keeps Lease objects in memory (kube.CoordinationAPI).
type memLeases struct {
	mu     sync.Mutex
	leases map[string]*coordinationv1.Lease
}

func (m *memLeases) Leases(string) kube.LeaseAPI { return m }

var leaseResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func (m *memLeases) Get(_ context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.leases[name]; l != nil {
		return l.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(leaseResource, name)
}

func (m *memLeases) Create(_ context.Context, l *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leases[l.Name] != nil {
		return nil, apierrors.NewAlreadyExists(leaseResource, l.Name)
	}
	m.leases[l.Name] = l.DeepCopy()
	return l.DeepCopy(), nil
}

func (m *memLeases) Update(_ context.Context, l *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leases[l.Name] = l.DeepCopy()
	return l.DeepCopy(), nil
}
