package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

// maxAttempts bounds how many invocations a phase may take to converge under faults
// (EventBridge and the schedules keep invoking; the tests stop here).
const maxAttempts = 10

// untilDone invokes fresh containers with raw(i) until an invocation succeeds
// (and was not skipped for the lease) and done says the phase is over; it returns the
// errors of the failed attempts. Each attempt runs a minute and ten seconds after the
// previous one on the handlers' clock (*skew ahead of the wall clock), as the
// schedules and EventBridge's retries would space them: a lease left by an attempt
// whose answer was lost expires, as do launches that were never recorded.
func (w *world) untilDone(t *testing.T, what, function string, o fnOpts, skew *time.Duration, raw func(i int) []byte, done func(Summary) bool) []string {
	t.Helper()
	var errs []string
	start := time.Now()
	defer func() {
		t.Logf("%s: %d failed attempts, %v", what, len(errs), time.Since(start).Round(time.Millisecond))
	}()
	for i := 0; i < maxAttempts; i++ {
		*skew += 70 * time.Second
		o.now = skewed(*skew)
		s, err := deliver(t, context.Background(), w.fresh(t, function, o), raw(i))
		if err == nil && !strings.HasPrefix(s.Action, "skipped") && done(s) {
			return errs
		}
		if err != nil {
			errs = append(errs, err.Error())
		} else {
			errs = append(errs, "not done: "+s.Action)
		}
	}
	t.Fatalf("%s did not converge in %d invocations:\n  %s", what, maxAttempts, strings.Join(errs, "\n  "))
	return nil
}

func skewed(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

func tick(t *testing.T, file, prefix string) func(i int) []byte {
	return func(i int) []byte {
		return sample(t, file, `"id": "`, fmt.Sprintf(`"id": "%s-%d-`, prefix, i))
	}
}

// lifecycle runs provisioning, a spot interruption and a consolidation with faults
// on, then two clean rounds with faults off, and checks that nothing is orphaned,
// nothing is over-provisioned and no node is left tainted. o carries the API-server
// proxy's clients when the faults are there.
func (w *world) lifecycle(t *testing.T, o fnOpts, on, off func()) []string {
	t.Helper()
	ctx := context.Background()
	var failed []string
	var skew time.Duration
	w.pending(t, "app", 3, "3")
	want := w.planAlone(t)
	on()

	// Provisioning: sweeps until one succeeds and launches nothing more.
	failed = append(failed, w.untilDone(t, "provisioning", Provisioner, o, &skew, tick(t, "scheduled-rule.json", "sweep"),
		func(s Summary) bool { return len(s.NodesLaunched) == 0 })...)
	st := w.state(t)
	// A NodeClaim whose creation answer was lost may linger unlaunched (no
	// instance) until the launch timeout reaps it; what must not happen is a
	// second instance for the same pods.
	if got, alive := launchedClaims(st), w.aliveInstances(t); got != want || alive != want {
		t.Errorf("after provisioning: %d launched NodeClaims and %d instances, one fault-free invocation launches %d", got, alive, want)
	}
	// Before any leak clean-up: every instance already has its NodeClaim.
	claimed := map[string]bool{}
	for _, nc := range st.NodeClaims {
		if nc.DeletionTimestamp == nil && nc.Status.ProviderID != "" {
			claimed[nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:]] = true
		}
	}
	for _, in := range w.ownedInstances(t) {
		if in.State != "shutting-down" && in.State != "terminated" && !claimed[in.ID] {
			t.Errorf("after provisioning: instance %s (NodeClaim tag %s) has no launched NodeClaim", in.ID, in.Tags["karpenter.sh/nodeclaim"])
		}
	}
	nodes := w.registerNew(t)
	if len(nodes) != 3 {
		t.Fatalf("registered %v, want 3 nodes", nodes)
	}
	for i, n := range nodes {
		w.bind(t, n, fmt.Sprintf("app-%d", i))
	}

	// A spot interruption of the first node, retried until handled.
	spot := sample(t, "spot-interruption.json", sampleInstance, nodes[0],
		`"time": "2024-05-01T12:00:00Z"`, `"time": "`+time.Now().UTC().Format(time.RFC3339)+`"`)
	failed = append(failed, w.untilDone(t, "spot interruption", Interruption, o, &skew, func(int) []byte { return spot },
		func(Summary) bool {
			_, err := w.cs.CoreV1().Nodes().Get(ctx, nodes[0], metav1.GetOptions{})
			return err != nil
		})...)
	if pods := w.podsOn(t, nodes[0]); len(pods) != 0 {
		t.Errorf("pods %v left on the interrupted node", pods)
	}

	// Consolidation of the second node, emptied.
	if err := w.cs.CoreV1().Pods(w.ns).Delete(ctx, "app-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	skew += 5 * time.Minute // past consolidateAfter
	failed = append(failed, w.untilDone(t, "consolidation", Consolidator, o, &skew, tick(t, "scheduler.json", "consolidate"),
		func(Summary) bool {
			_, err := w.cs.CoreV1().Nodes().Get(ctx, nodes[1], metav1.GetOptions{})
			return err != nil
		})...)

	off()
	// Clean rounds: the schedules keep running; the timeouts (launch, leak grace)
	// have passed by then. Nodes launched meanwhile have registered.
	w.registerNew(t)
	skew += 20 * time.Minute
	co := o
	co.now = skewed(skew)
	mustDeliver(t, w.fresh(t, Provisioner, co), tick(t, "scheduled-rule.json", "clean")(0))
	for i := 0; i < 2; i++ {
		skew += time.Minute
		co.now = skewed(skew)
		mustDeliver(t, w.fresh(t, Consolidator, co), tick(t, "scheduler.json", "clean")(i))
	}
	w.assertConverged(t)
	// app-2 still runs on the third node, which stays.
	if _, err := w.cs.CoreV1().Nodes().Get(ctx, nodes[2], metav1.GetOptions{}); err != nil {
		t.Errorf("the node still running app-2 is gone: %v", err)
	}
	return failed
}

// TestEC2FaultsConverge injects EC2 throttling (RequestLimitExceeded), 5xx and
// InsufficientInstanceCapacity mid-invocation: the handlers converge over the next
// invocations with no orphan instance, no over-provisioning and no tainted node.
func TestEC2FaultsConverge(t *testing.T) {
	// Exactly as many hits as the SDK's attempts, so each fault fails one operation
	// outright (the retryer absorbs fewer).
	perAction := func(kind awssim.FaultKind, actions ...string) func(w *world) {
		return func(w *world) {
			for _, a := range actions {
				if err := w.sim.AddFault(awssim.Fault{Kind: kind, Action: "ec2:" + a, Count: 3}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cases := []struct {
		name string
		on   func(w *world)
	}{
		{"throttling", perAction(awssim.FaultThrottle, "CreateFleet", "DescribeInstances", "TerminateInstances", "DescribeInstanceTypes")},
		{"5xx", perAction(awssim.FaultInternal, "CreateFleet", "CreateTags", "DescribeInstances", "TerminateInstances", "CreateLaunchTemplate")},
		// Fleets come back empty with InsufficientInstanceCapacity in their errors:
		// the provider marks the offerings unavailable and tries the others, until
		// the launch gives up and the next invocation (its cache expired) succeeds.
		{"ice", func(w *world) {
			if err := w.sim.AddFault(awssim.Fault{Kind: awssim.FaultPartialFleet, Launch: 0, Count: 8}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			w.fastRetries()
			failed := w.lifecycle(t, fnOpts{}, func() { c.on(w) }, func() { w.sim.ClearFaults() })
			if len(failed) == 0 {
				t.Errorf("no invocation failed: the faults were not exercised")
			}
			t.Logf("%d failed invocations before convergence; faults: %+v", len(failed), w.sim.State().Faults)
		})
	}
}

// TestAPIServerFaultsConverge puts a reverse proxy in front of the real API server
// that answers chosen requests with 409 Conflict, 500, or a timeout (some after the
// write reached the API server, so only the answer is lost): the handlers converge
// over the next invocations with no orphan instance and no tainted node.
func TestAPIServerFaultsConverge(t *testing.T) {
	const events = "/apis/events.k8s.io/"
	cases := []struct {
		name  string
		rules []*faultRule
	}{
		// The API server answers 409 Conflict to writes of a stale resourceVersion
		// (updates and patches; a delete's 409 means its UID precondition failed,
		// i.e. the object was replaced, which the handlers rightly take as done).
		{"conflicts", []*faultRule{{Methods: []string{http.MethodPut, http.MethodPatch}, Except: events, Status: 409, Every: 3, Count: 15}}},
		{"500s", []*faultRule{
			{Methods: mutating, Except: events, Status: 500, After: true, Every: 5, Count: 4},
			{Methods: mutating, Except: events, Status: 500, Every: 4, Count: 4},
			{Methods: []string{"GET"}, Except: events, Status: 500, Every: 11, Count: 2},
		}},
		// The NodeClaim's writes fail right after its instance launched: the launch
		// cannot be recorded, so the instance must not be left running unclaimed.
		{"unrecorded-launch", []*faultRule{{Methods: []string{"PATCH"}, Contains: "/nodeclaims/", Status: 500, Count: 4}}},
		{"timeouts", []*faultRule{
			{Methods: mutating, Except: events, Hang: 1500 * time.Millisecond, After: true, Every: 4, Count: 4},
			{Methods: mutating, Except: events, Status: 504, Every: 5, Count: 4},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			w.fastRetries()
			proxy := newAPIProxy(t, kubetest.Shared(t), time.Second)
			failed := w.lifecycle(t, fnOpts{clients: proxy.Clients}, func() { proxy.inject(c.rules...) }, func() { proxy.inject() })
			hit := proxy.injected()
			if len(hit) == 0 || len(failed) == 0 {
				t.Errorf("faults not exercised: %d injected, %d failed invocations", len(hit), len(failed))
			}
			t.Logf("%d injected failures, %d failed invocations before convergence", len(hit), len(failed))
			t.Logf("injected: %v\nfailed: %v", hit, failed)
		})
	}
}

// launchedClaims counts live NodeClaims that recorded an instance.
func launchedClaims(st *kube.ClusterState) int {
	n := 0
	for _, nc := range st.NodeClaims {
		if nc.DeletionTimestamp == nil && nc.Status.ProviderID != "" {
			n++
		}
	}
	return n
}
