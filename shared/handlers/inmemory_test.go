package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/testworld"
)

// The in-memory handler tests run a handler as Invoke runs it, over a Recorder:
// the cluster is a testworld (assembled by kube.NewState, as ReadState assembles
// what it lists), EC2 answers from the embedded catalog and the world's
// NodeClaims, and every write is a Decision the test asserts. Nothing listens on a
// port. Between invocations the Recorder's shadow memory carries what a round
// would have written that the next reads (Empty marks, removed NodeClaims), as in
// shadow mode. The real-API-server tests (handlers_test.go, reliability_test.go)
// are kept for what only a server shows: finalizers, evictions, conflicts, faults.

// stateReader answers ReadState with a fixed state; a Recorder over it never
// reaches the other methods, so they stay nil and would panic if it did.
type stateReader struct {
	kube.Cluster
	st *kube.ClusterState
}

func (s stateReader) ReadState(context.Context) (*kube.ClusterState, error) { return s.st, nil }

// catalogReader answers the Cloud's reads from the embedded catalog; owned are
// the instances EC2 would list as Joiner's.
type catalogReader struct {
	Cloud
	unavailable *cloud.UnavailableOfferings
	owned       []cloud.OwnedInstance
}

func (c catalogReader) LiveCatalog(context.Context, []string) (*catalog.Catalog, error) {
	return catalog.Embedded(), nil
}
func (c catalogReader) ListOwned(context.Context) ([]cloud.OwnedInstance, error) { return c.owned, nil }
func (c catalogReader) Unavailable() *cloud.UnavailableOfferings                 { return c.unavailable }

// memoryStore is shadow memory kept in the test.
type memoryStore struct{ b []byte }

func (m *memoryStore) Load(context.Context) ([]byte, error)   { return m.b, nil }
func (m *memoryStore) Save(_ context.Context, b []byte) error { m.b = b; return nil }

// memWorld is a testworld the handlers run on in memory.
type memWorld struct {
	*testworld.World
	t           *testing.T
	unavailable *cloud.UnavailableOfferings
	memory      memoryStore
	// Config of every invocation (ClusterName "test", spot interruptions handled,
	// rebalance recommendations ignored).
	Config Config
}

func newMemWorld(t *testing.T, now time.Time, pools ...*karpenter.NodePool) *memWorld {
	w := &memWorld{World: testworld.New(t, now, pools...), t: t,
		Config: Config{ClusterName: "test", Region: "us-east-1", Rebalance: RebalanceIgnore, MinSavingsFraction: 0.1}}
	w.unavailable = cloud.NewUnavailableOfferings(func() time.Time { return w.Now })
	return w
}

// State is what ReadState would return for the world.
func (w *memWorld) State() *kube.ClusterState {
	return kube.NewState(kube.Objects{Pods: w.Pods(), Nodes: w.Nodes(), NodeClaims: w.NodeClaims, NodePools: w.Snapshot.NodePools,
		NodeClasses: w.Snapshot.NodeClasses, DaemonSets: w.Snapshot.DaemonSets, PDBs: w.PDBs}, w.Now)
}

// owned lists an instance for every NodeClaim with a providerID, as EC2 would.
func (w *memWorld) owned() []cloud.OwnedInstance {
	var out []cloud.OwnedInstance
	for _, nc := range w.NodeClaims {
		if id := facts.InstanceID(nc.Status.ProviderID); id != "" {
			out = append(out, cloud.OwnedInstance{ID: id, State: "running", InstanceType: nc.Labels["node.kubernetes.io/instance-type"],
				NodePool: nc.Labels[karpenter.NodePoolLabelKey], NodeClaim: nc.Name, NodeClass: testworld.ClassName, LaunchTime: nc.CreationTimestamp.Time})
		}
	}
	return out
}

// invoke runs the handler once on the world as it is, at w.Now, in a fresh
// container (no dedupe memory), and returns the summary with its decisions; an
// error fails the test.
func (w *memWorld) invoke(h Handler, raw []byte) Summary {
	w.t.Helper()
	s, err := w.deliver(h, raw)
	if err != nil {
		w.t.Fatalf("%s: %v (summary %+v)", h.name, err, s)
	}
	return s
}

// deliver is invoke that returns the error.
func (w *memWorld) deliver(h Handler, raw []byte) (Summary, error) {
	w.t.Helper()
	cfg := w.Config
	cfg.Mode = ModeShadow
	st, owned, now := w.State(), w.owned(), w.Now
	clock := func() time.Time { return now }
	fn := NewFunctionFor(h, func(context.Context) (*Deps, error) {
		return &Deps{Config: cfg, Cluster: stateReader{st: st}, Cloud: catalogReader{unavailable: w.unavailable, owned: owned},
			Now: clock, Log: quietLog(), Identity: h.name + "/test", ShadowMemory: &w.memory}, nil
	})
	fn.MetricsOut = io.Discard
	out, err := fn.Invoke(context.Background(), raw)
	var s Summary
	if out != nil {
		if jerr := json.Unmarshal(out, &s); jerr != nil {
			w.t.Fatalf("summary %s: %v", out, jerr)
		}
	}
	return s, err
}

// writes are the decisions that change the cluster or EC2, as
// "Kind NodeClaim Node InstanceType Detail" (Events, nominations and lifecycle
// bookkeeping left out).
func writes(s Summary) []string {
	var out []string
	for _, d := range s.Shadow {
		if d.Kind == DecideEvent || d.Kind == DecideNominate || d.Kind == DecideLifecycle {
			continue
		}
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s %s %s %s %s", d.Kind, d.NodeClaim, d.Node, d.InstanceType,
			strings.Join(d.Instances, ","), d.Detail)))
	}
	return out
}

func kindsOf(s Summary, k DecisionKind) []Decision {
	var out []Decision
	for _, d := range s.Shadow {
		if d.Kind == k {
			out = append(out, d)
		}
	}
	return out
}

// inMemoryPool is testdata/pool.yaml's pool: m6i/m7i large and xlarge, spot or
// on-demand, consolidateAfter 1m.
func inMemoryPool() *karpenter.NodePool {
	return testworld.Pool("default", karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized, time.Minute,
		[]string{"m6i.large", "m6i.xlarge", "m7i.large", "m7i.xlarge"},
		testworld.CapacityTypes(karpenter.CapacityTypeSpot, karpenter.CapacityTypeOnDemand))
}

var inMemoryNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// TestProvisionerSweepLaunchesOnceForPendingPods: the scheduled sweep plans the
// pending pods onto new NodeClaims of the pool, launches each (CreateNodeClaim,
// then Launch and RecordLaunch of the same NodeClaim); the next sweep, with those
// NodeClaims in flight, launches nothing.
func TestProvisionerSweepLaunchesOnceForPendingPods(t *testing.T) {
	w := newMemWorld(t, inMemoryNow, inMemoryPool())
	for i := 0; i < 5; i++ {
		w.Pending(testworld.PendingPod(w.Now, fmt.Sprintf("heavy-app-%d", i), "1", "1Gi"))
	}
	s := w.invoke(ProvisionerHandler(), sample(t, "scheduled-rule.json"))
	created, launches, recorded := kindsOf(s, DecideCreateNodeClaim), kindsOf(s, DecideLaunch), kindsOf(s, DecideRecordLaunch)
	if len(s.NodesLaunched) == 0 || len(s.Errors) != 0 || len(launches) != len(s.NodesLaunched) ||
		len(created) != len(launches) || len(recorded) != len(launches) {
		t.Fatalf("first sweep: launched %v, errors %v\n  %s", s.NodesLaunched, s.Errors, strings.Join(writes(s), "\n  "))
	}
	// Launches run concurrently: match them by NodeClaim, not by order.
	names := func(ds []Decision) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.NodeClaim)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(names(created), names(launches)) || !slices.Equal(names(recorded), names(launches)) {
		t.Errorf("created %v, launched %v, recorded %v: want the same NodeClaims", names(created), names(launches), names(recorded))
	}
	for _, l := range launches {
		if l.NodePool != "default" || len(l.Instances) != 1 {
			t.Errorf("launch %+v", l)
		}
		w.InFlight(l.NodeClaim, "default", l.InstanceType, l.Zone, l.CapacityType, l.Instances[0], 0)
	}
	again := sample(t, "scheduled-rule.json", `"id": "`, `"id": "again-`)
	if s2 := w.invoke(ProvisionerHandler(), again); len(s2.NodesLaunched) != 0 || len(kindsOf(s2, DecideLaunch)) != 0 {
		t.Fatalf("second sweep launched again over the in-flight NodeClaims: %v\n  %s", s2.NodesLaunched, strings.Join(writes(s2), "\n  "))
	}
}

// TestInterruptionIgnoresForeignInstances: an event about an instance Joiner did
// not launch is ignored; nothing is written.
func TestInterruptionIgnoresForeignInstances(t *testing.T) {
	w := newMemWorld(t, inMemoryNow, inMemoryPool())
	w.Node("theirs", "", "m6i.large", time.Hour) // someone else's node; no NodeClaim names it
	s := w.invoke(InterruptionHandler(), sample(t, "spot-interruption.json"))
	if s.Action != "ignored" || s.Interruptions != 0 || len(writes(s)) != 0 {
		t.Fatalf("action %q, %d interruptions, writes %v", s.Action, s.Interruptions, writes(s))
	}
}

// TestInterruptionStateChangeRemovesNodeAndClaim: an instance Joiner launched was
// terminated behind its back; the state-change event deletes its NodeClaim (whose
// finalizer takes the Node) and terminates nothing else; the same occurrence again,
// in another container, finds nothing left to do.
func TestInterruptionStateChangeRemovesNodeAndClaim(t *testing.T) {
	w := newMemWorld(t, inMemoryNow, inMemoryPool())
	n, nc := w.Managed("web-node", "default", "m6i.large", time.Hour, testworld.AppPod(w.Now, "web", "500m", "512Mi"))
	n.Spec.ProviderID = "aws:///" + testworld.Zone + "/" + sampleInstance
	nc.Status.ProviderID = n.Spec.ProviderID
	ev := sample(t, "state-change-terminated.json")
	s := w.invoke(InterruptionHandler(), ev)
	if s.Interruptions != 1 || len(s.NodesTerminated) != 1 || s.NodesTerminated[0] != nc.Name {
		t.Fatalf("summary %+v, want NodeClaim %s terminated", s, nc.Name)
	}
	if got := kindsOf(s, DecideDeleteNodeClaim); len(got) != 1 || got[0].NodeClaim != nc.Name {
		t.Errorf("writes %v, want NodeClaim %s deleted", writes(s), nc.Name)
	}
	for _, d := range kindsOf(s, DecideTerminate) {
		for _, id := range d.Instances {
			if id != sampleInstance {
				t.Errorf("terminated %s, not the instance of the event", id)
			}
		}
	}
	if got := kindsOf(s, DecideLaunch); len(got) != 0 {
		t.Errorf("launched %v for an instance already gone", got)
	}
	if s2 := w.invoke(InterruptionHandler(), ev); s2.Interruptions != 0 || len(s2.NodesTerminated) != 0 || len(writes(s2)) != 0 {
		t.Fatalf("repeat did something: %+v\n  %s", s2, strings.Join(writes(s2), "\n  "))
	}
}

// TestConsolidatorRemovesEmptyNode: a node whose pods are gone is marked Empty in
// the first round and deleted, its instance terminated, in a round after the
// pool's consolidateAfter (1m), not before.
func TestConsolidatorRemovesEmptyNode(t *testing.T) {
	w := newMemWorld(t, inMemoryNow, inMemoryPool())
	_, nc := w.Managed("batch-node", "default", "m6i.large", time.Hour, testworld.DaemonSetPod(w.Now, "batch-node"))
	s := w.invoke(ConsolidatorHandler(), sample(t, "scheduler.json"))
	if len(s.NodesTerminated) != 0 || len(kindsOf(s, DecideDeleteNodeClaim)) != 0 {
		t.Fatalf("deleted before consolidateAfter: %v\n  %s", s.NodesTerminated, strings.Join(writes(s), "\n  "))
	}
	if got := kindsOf(s, DecideSetEmpty); len(got) != 1 || got[0].NodeClaim != nc.Name {
		t.Fatalf("writes %v, want NodeClaim %s marked Empty", writes(s), nc.Name)
	}
	w.Now = w.Now.Add(5 * time.Minute)
	s = w.invoke(ConsolidatorHandler(), sample(t, "scheduler.json", `"id": "`, `"id": "later-`))
	if len(s.NodesTerminated) != 1 || s.NodesTerminated[0] != nc.Name {
		t.Fatalf("summary %+v, want the empty node's NodeClaim %s deleted\n  %s", s, nc.Name, strings.Join(writes(s), "\n  "))
	}
	if got := kindsOf(s, DecideDeleteNodeClaim); len(got) != 1 || got[0].NodeClaim != nc.Name {
		t.Errorf("writes %v, want NodeClaim %s deleted", writes(s), nc.Name)
	}
}

// TestInterruptionRebalanceModes: a rebalance recommendation is ignored, taints the
// node (no replacement, no drain), or replaces it, per JOINER_REBALANCE_MODE; the
// recommendation again, on the tainted node, decides no more; after the taint, the
// spot warning that follows still replaces and drains the node.
func TestInterruptionRebalanceModes(t *testing.T) {
	for _, mode := range []string{RebalanceIgnore, RebalanceTaint, RebalanceReplace} {
		t.Run(mode, func(t *testing.T) {
			w := newMemWorld(t, inMemoryNow, inMemoryPool())
			w.Config.Rebalance = mode
			w.CapacityType = karpenter.CapacityTypeSpot
			n, nc := w.Managed("api-node", "default", "m6i.xlarge", time.Hour, testworld.AppPod(w.Now, "api", "3", "1Gi"))
			n.Spec.ProviderID = "aws:///" + testworld.Zone + "/" + sampleInstance
			nc.Status.ProviderID = n.Spec.ProviderID
			replaced := func(s Summary) bool {
				return s.Interruptions == 1 && len(kindsOf(s, DecideLaunch)) == 1 && len(kindsOf(s, DecideDrain)) == 1 &&
					len(s.NodesTerminated) == 1 && s.NodesTerminated[0] == nc.Name
			}
			s := w.invoke(InterruptionHandler(), sample(t, "rebalance.json"))
			switch mode {
			case RebalanceIgnore:
				if s.Action != "ignored" || len(writes(s)) != 0 {
					t.Errorf("action %q, writes %v: want ignored, nothing written", s.Action, writes(s))
				}
			case RebalanceTaint:
				// Its own PreferNoSchedule taint, not karpenter.sh/disrupted: the node is
				// not being disrupted.
				if got := writes(s); s.Interruptions != 1 || len(got) != 1 || got[0] != string(DecideRebalanceTaint)+" "+nc.Name+" api-node" {
					t.Fatalf("%d interruptions, writes %v: want the node tainted only", s.Interruptions, got)
				}
				// Delivered again, on the tainted node, it decides the same taint and
				// nothing more (the executor finds it there and patches nothing:
				// kube's TestTaintRebalanceOnce).
				n.Spec.Taints = append(n.Spec.Taints, kube.RebalanceTaint)
				if again := w.invoke(InterruptionHandler(), sample(t, "rebalance.json", `"id": "`, `"id": "again-`)); !slices.Equal(writes(again), writes(s)) {
					t.Errorf("the recommendation again, on the tainted node, wrote %v", writes(again))
				}
				if s := w.invoke(InterruptionHandler(), spotFor(t, sampleInstance, w.Now)); !replaced(s) {
					t.Errorf("spot warning after the taint: %+v\n  %s\nwant a replacement and the node drained", s, strings.Join(writes(s), "\n  "))
				}
			case RebalanceReplace:
				if !replaced(s) {
					t.Errorf("summary %+v\n  %s\nwant a replacement and NodeClaim %s drained and deleted", s, strings.Join(writes(s), "\n  "), nc.Name)
				}
			}
		})
	}
}

// TestInterruptionHealthScheduledChangeDrainsBeforeTheWindow: an AWS Health
// scheduled change for an instance Joiner launched, two hours ahead, launches
// replacement capacity, drains the node and deletes its NodeClaim now, before the
// window opens; the pod, recreated by its controller, fits the replacement.
func TestInterruptionHealthScheduledChangeDrainsBeforeTheWindow(t *testing.T) {
	w := newMemWorld(t, inMemoryNow, inMemoryPool())
	n, nc := w.Managed("web-node", "default", "m6i.xlarge", time.Hour, testworld.AppPod(w.Now, "web", "3", "1Gi"))
	n.Spec.ProviderID = "aws:///" + testworld.Zone + "/" + sampleInstance
	nc.Status.ProviderID = n.Spec.ProviderID
	start := w.Now.Add(2 * time.Hour)
	s := w.invoke(InterruptionHandler(), sample(t, "health-scheduled-change.json",
		"Wed, 15 May 2024 00:00:00 GMT", start.Format(time.RFC1123), "Wed, 15 May 2024 06:00:00 GMT", start.Add(6*time.Hour).Format(time.RFC1123)))
	launches, drains := kindsOf(s, DecideLaunch), kindsOf(s, DecideDrain)
	if s.Interruptions != 1 || len(launches) != 1 || len(drains) != 1 || drains[0].Node != n.Name ||
		len(s.NodesTerminated) != 1 || s.NodesTerminated[0] != nc.Name {
		t.Fatalf("summary %+v\n  %s\nwant a replacement launched, the node drained and NodeClaim %s removed", s, strings.Join(writes(s), "\n  "), nc.Name)
	}
	for _, d := range s.Shadow {
		if d.At.After(start) {
			t.Errorf("%s decided at %v, after the window opens at %v", d.Kind, d.At, start)
		}
	}
	// The next round sees the node gone (shadow memory) and the replacement in
	// flight; the pod, recreated, fits the replacement.
	l := launches[0]
	w.InFlight(l.NodeClaim, "default", l.InstanceType, l.Zone, l.CapacityType, l.Instances[0], 0)
	w.Pending(testworld.PendingPod(w.Now, "web-again", "3", "1Gi"))
	if s := w.invoke(ProvisionerHandler(), sample(t, "scheduled-rule.json", `"id": "`, `"id": "after-`)); len(kindsOf(s, DecideLaunch)) != 0 {
		t.Errorf("the recreated pod needed another node:\n  %s", strings.Join(writes(s), "\n  "))
	}
}

// TestMalformedUnknownForeignAndOtherClusterEventsMutateNothing: bad input is an
// error that names the problem; events Joiner has no business with are ignored,
// saying why; in neither case is anything decided.
func TestMalformedUnknownForeignAndOtherClusterEventsMutateNothing(t *testing.T) {
	w := newMemWorld(t, inMemoryNow, inMemoryPool())
	const ours = "i-0a1b2c3d4e5f60718"
	n, nc := w.Managed("web-node", "default", "m6i.large", time.Hour, testworld.AppPod(w.Now, "web", "500m", "512Mi"))
	n.Spec.ProviderID = "aws:///" + testworld.Zone + "/" + ours
	nc.Status.ProviderID = n.Spec.ProviderID
	w.Pending(testworld.PendingPod(w.Now, "more", "3", "1Gi"))

	malformed := []struct {
		name, raw, want string
	}{
		{"empty", "", "empty input"},
		{"not JSON", "hello", "not a JSON object"},
		{"truncated", string(sample(t, "spot-interruption.json"))[:80], "invalid JSON"},
		{"no source", `{"detail-type":"EC2 Spot Instance Interruption Warning","detail":{}}`, `"source" is missing`},
		{"spot without instance", strings.Replace(string(sample(t, "spot-interruption.json")), `"instance-id": "i-1234567890abcdef0",`, "", 1), "instance-id"},
		{"detail not an object", `{"version":"0","id":"x","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":"running"}`, "not an object"},
		{"bad time", strings.Replace(string(sample(t, "spot-interruption.json")), "2024-05-01T12:00:00Z", "yesterday", 1), "RFC 3339"},
	}
	for _, h := range []Handler{ProvisionerHandler(), InterruptionHandler(), ConsolidatorHandler()} {
		for _, m := range malformed {
			s, err := w.deliver(h, []byte(m.raw))
			if err == nil || !errors.Is(err, events.ErrMalformed) || !strings.Contains(err.Error(), m.want) || len(writes(s)) != 0 {
				t.Errorf("%s(%s): error %v, writes %v; want a malformed-event error mentioning %q and nothing written", h.name, m.name, err, writes(s), m.want)
			}
		}
	}

	spot := func(account, id string) []byte {
		return sample(t, "spot-interruption.json", sampleInstance, id, `"account": "123456789012"`, `"account": "`+account+`"`)
	}
	ignored := []struct {
		name      string
		h         Handler
		account   string
		rebalance string
		raw       []byte
		want      string
	}{
		{"unknown source", InterruptionHandler(), "", "", []byte(`{"version":"0","id":"u1","source":"aws.s3","detail-type":"Object Created","account":"123456789012","time":"2024-05-01T12:00:00Z","region":"us-east-1","resources":[],"detail":{}}`), "no Joiner handler"},
		{"unknown detail-type", InterruptionHandler(), "", "", []byte(`{"version":"0","id":"u2","source":"aws.ec2","detail-type":"EBS Snapshot Notification","account":"123456789012","time":"2024-05-01T12:00:00Z","region":"us-east-1","resources":[],"detail":{}}`), "no Joiner handler"},
		{"foreign account spot", InterruptionHandler(), "123456789012", "", spot("999999999999", ours), "account 999999999999"},
		{"foreign account pending pods", ProvisionerHandler(), "123456789012", "", sample(t, "pending-pods.json", `"cluster": "technews-karpenter-eks"`, `"cluster": "test"`, `"account": "123456789012"`, `"account": "999999999999"`), "account 999999999999"},
		{"other cluster pending pods", ProvisionerHandler(), "", "", sample(t, "pending-pods.json"), `cluster "technews-karpenter-eks"`},
		{"instance of another cluster", InterruptionHandler(), "", "", spot("123456789012", "i-0ffffffffffffffff"), "no instance of this event"},
		{"spot warning to the provisioner", ProvisionerHandler(), "", "", spot("123456789012", ours), "not a provisioner trigger"},
		{"spot warning to the consolidator", ConsolidatorHandler(), "", "", spot("123456789012", ours), "not a consolidation trigger"},
		{"pending pods to the interruption function", InterruptionHandler(), "", "", sample(t, "pending-pods.json", `"cluster": "technews-karpenter-eks"`, `"cluster": "test"`), "not an interruption"},
		{"running state", InterruptionHandler(), "", "", sample(t, "state-change-terminated.json", sampleInstance, ours, `"state": "terminated"`, `"state": "running"`), "needs nothing"},
		{"rebalance while ignoring them", InterruptionHandler(), "", RebalanceIgnore, sample(t, "rebalance.json", sampleInstance, ours), "ignored"},
	}
	for _, c := range ignored {
		w.Config.AccountID, w.Config.Rebalance = c.account, cmp.Or(c.rebalance, RebalanceIgnore)
		s, err := w.deliver(c.h, c.raw)
		if err != nil || s.Action != "ignored" || !strings.Contains(s.Ignored, c.want) || len(writes(s)) != 0 {
			t.Errorf("%s: summary %+v, error %v, writes %v; want ignored because %q, nothing written", c.name, s, err, writes(s), c.want)
		}
	}
}
