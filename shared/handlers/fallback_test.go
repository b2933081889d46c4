package handlers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/nominate"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/testworld"
)

// inProcess serves the SDK's requests with the simulator's handler directly:
// nothing listens on a port.
type inProcess struct{ sim *awssim.Sim }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.sim.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// claimRecorder is a Recorder that keeps the NodeClaims it is asked to create.
type claimRecorder struct {
	*Recorder
	mu     sync.Mutex
	claims map[string]*karpenter.NodeClaim
}

func (c *claimRecorder) CreateNodeClaim(ctx context.Context, nc *karpenter.NodeClaim) (*karpenter.NodeClaim, error) {
	out, err := c.Recorder.CreateNodeClaim(ctx, nc)
	if err == nil {
		c.mu.Lock()
		c.claims[out.Name] = out
		c.mu.Unlock()
	}
	return out, err
}

// allowedIn is the In values of a NodeClaim's requirement on key.
func allowedIn(nc *karpenter.NodeClaim, key string) []string {
	for _, r := range nc.Spec.Requirements {
		if r.Key == key && r.Operator == corev1.NodeSelectorOpIn {
			return r.Values
		}
	}
	return nil
}

// TestProvisionerFallsBackToAnotherZoneWithinTheInvocation: EC2 (the
// simulator, through the real SDK and provider) has no spot m6i.large in any
// zone and no on-demand one in the zone the plan picked for a pod free to run
// anywhere. The same invocation launches it on-demand in another zone its
// NodeClaim allows: the NodeClaim's requirements carry every zone and both
// capacity types (as Karpenter's do), its launch record the zone and capacity
// type it got, and the unavailable-offerings cache every ICE it met. A pod
// whose zone spread the plan counted in that zone does not fall back: its
// NodeClaim allows that zone only, and its launch fails there, for the next
// plan to place afresh. The spread pods planned elsewhere fall back from spot
// to on-demand in their own zones.
func TestProvisionerFallsBackToAnotherZoneWithinTheInvocation(t *testing.T) {
	ctx := context.Background()
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	w := newMemWorld(t, inMemoryNow, testworld.Pool("default", karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized, time.Minute,
		[]string{"m6i.large"}, testworld.Zones(zones...), testworld.CapacityTypes(karpenter.CapacityTypeSpot, karpenter.CapacityTypeOnDemand)))
	// One pod per m6i.large (1930m allocatable): each gets a node of its own.
	w.Pending(testworld.PendingPod(w.Now, "free", "1500m", "1Gi"))
	for i := range 3 {
		w.Pending(testworld.PendingPod(w.Now, fmt.Sprintf("web-%d", i), "1500m", "1Gi", testworld.Labels("app", "web"), func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		}))
	}

	sim, err := awssim.New(awssim.Config{Seed: ptrSeed(awssim.DefaultSeed("test")), Clock: awssim.NewFakeClock(w.Now)})
	if err != nil {
		t.Fatal(err)
	}
	awsCfg := awssim.NewAWSConfig("http://awssim.invalid")
	awsCfg.HTTPClient = &http.Client{Transport: inProcess{sim}}
	prov, err := cloud.New(cloud.Config{ClusterName: "test", Region: "us-east-1", Unavailable: w.unavailable, Logger: quietLog(),
		Clock: func() time.Time { return w.Now }}, cloud.NewClients(awsCfg, cloud.RetryOptions{MaxAttempts: 1}, false))
	if err != nil {
		t.Fatal(err)
	}

	// The plan the invocation will make, to know the zones it picks.
	st := w.State()
	cat, err := prov.LiveCatalog(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot
	snap.Catalog = cat
	plan := packer.Solve(&snap, packer.Options{})
	planned := map[string]string{} // pod → zone
	for _, nn := range plan.NewNodes {
		for _, p := range nn.Pods {
			planned[p] = nn.Zone
		}
	}
	short := planned["default/free"]
	pinned := "" // the spread pod the plan put in the free pod's zone
	for i := range 3 {
		if key := fmt.Sprintf("default/web-%d", i); planned[key] == short {
			pinned = key
		}
	}
	if short == "" || pinned == "" || len(plan.NewNodes) != 4 {
		t.Fatalf("plan: want four nodes, free's zone holding a web pod too; got %+v", plan.NewNodes)
	}
	for _, z := range zones {
		sim.SetICE(awssim.Offering{InstanceType: "m6i.large", Zone: z, CapacityType: karpenter.CapacityTypeSpot}, true)
	}
	sim.SetICE(awssim.Offering{InstanceType: "m6i.large", Zone: short, CapacityType: karpenter.CapacityTypeOnDemand}, true)

	rec := &claimRecorder{Recorder: NewRecorder(stateReader{st: st}, nil, func() time.Time { return w.Now }), claims: map[string]*karpenter.NodeClaim{}}
	cfg := w.Config
	cfg.Mode = ModeAct
	fn := NewFunctionFor(ProvisionerHandler(), func(context.Context) (*Deps, error) {
		return &Deps{Config: cfg, Cluster: rec, Cloud: prov, Now: func() time.Time { return w.Now }, Log: quietLog(), Identity: "provisioner/test"}, nil
	})
	fn.MetricsOut = io.Discard
	s, err := deliver(t, ctx, fn, sample(t, "scheduled-rule.json"))
	if err != nil {
		t.Logf("invocation: %v (one launch is expected to fail)", err)
	}

	podsOf := func(nc *karpenter.NodeClaim) string { return strings.Join(nominate.PlannedPods(nc), ",") }
	launched := map[string]kube.Launch{} // NodeClaim → what its launch record says
	failed := map[string]bool{}
	for _, d := range rec.Decisions() {
		switch d.Kind {
		case DecideRecordLaunch:
			launched[d.NodeClaim] = kube.Launch{Zone: d.Zone, CapacityType: d.CapacityType, InstanceType: d.InstanceType}
		case DecideLaunchFailed:
			failed[d.NodeClaim] = true
		}
	}
	if len(rec.claims) != 4 || len(launched) != 3 || len(failed) != 1 {
		t.Fatalf("want 4 NodeClaims, 3 launched and 1 failed; got %d, %v, %v (summary %+v)", len(rec.claims), launched, failed, s)
	}
	for name, nc := range rec.claims {
		pods, l := podsOf(nc), launched[name]
		zs, cts := allowedIn(nc, corev1.LabelTopologyZone), allowedIn(nc, karpenter.CapacityTypeLabelKey)
		switch {
		case pods == "default/free":
			if !slices.Equal(zs, zones) || !slices.Equal(cts, []string{"spot", "on-demand"}) {
				t.Errorf("free's NodeClaim %s allows zones %v and %v, want every zone and spot then on-demand", name, zs, cts)
			}
			if l.Zone == "" || l.Zone == short || !slices.Contains(zs, l.Zone) || l.CapacityType != karpenter.CapacityTypeOnDemand {
				t.Errorf("free's NodeClaim %s launched %+v, want on-demand in an allowed zone other than %s, in this invocation", name, l, short)
			}
		case pods == pinned:
			if !slices.Equal(zs, []string{short}) {
				t.Errorf("%s's NodeClaim %s allows zones %v: its zone spread was counted in %s alone", pinned, name, zs, short)
			}
			if !failed[name] || l.Zone != "" {
				t.Errorf("%s's NodeClaim %s: launched %+v, failed %v; want its launch to fail in %s and not fall back", pinned, name, l, failed[name], short)
			}
		default:
			if len(zs) != 1 || l.Zone != zs[0] || l.CapacityType != karpenter.CapacityTypeOnDemand || !slices.Contains(cts, l.CapacityType) {
				t.Errorf("%s's NodeClaim %s (zones %v, capacity types %v) launched %+v: want on-demand in its own zone", pods, name, zs, cts, l)
			}
		}
	}
	for _, o := range []struct{ zone, ct string }{{short, "spot"}, {short, "on-demand"}} {
		if !w.unavailable.IsUnavailable("m6i.large", o.zone, o.ct) {
			t.Errorf("m6i.large %s in %s is not marked unavailable", o.ct, o.zone)
		}
	}
	var running int
	for _, in := range sim.State().Instances {
		if in.State == "running" || in.State == "pending" {
			running++
		}
	}
	if running != 3 {
		t.Errorf("%d instances in EC2, want the 3 launches", running)
	}
}
