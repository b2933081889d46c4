package handlers

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/testworld"
)

var shadowName = regexp.MustCompile(`shadow[0-9]+`)

// TestInterruptionDecisionsInMemory drives the interruption handler, acting, over
// a Recorder, as Nomad's scheduler tests drive a Harness: no API server, no EC2;
// the test asserts what the handler decided to write, in order.
func TestInterruptionDecisionsInMemory(t *testing.T) {
	pool := testworld.Pool("default", karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized, 0, []string{"m5.large"},
		testworld.CapacityTypes(karpenter.CapacityTypeSpot, karpenter.CapacityTypeOnDemand))
	w := newMemWorld(t, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), pool)
	w.CapacityType = karpenter.CapacityTypeSpot
	node, claim := w.Managed("spot-node", "default", "m5.large", time.Hour, testworld.AppPod(w.Now, "web", "1", "1Gi"))
	node.Spec.ProviderID = "aws:///us-east-1a/" + sampleInstance
	claim.Status.ProviderID = node.Spec.ProviderID
	claim.Name = "default-abcde"
	claim.Labels[corev1.LabelTopologyZone] = testworld.Zone
	st := w.State()
	clock := func() time.Time { return w.Now }
	var rec *Recorder
	fn := NewFunctionFor(InterruptionHandler(), func(context.Context) (*Deps, error) {
		rec = NewRecorder(stateReader{st: st}, catalogReader{unavailable: w.unavailable}, clock)
		return &Deps{Config: Config{ClusterName: "c", Rebalance: RebalanceIgnore}, Cluster: rec, Cloud: rec, Now: clock, Log: quietLog(),
			Identity: "interruption/test"}, nil
	})
	fn.MetricsOut = io.Discard
	raw := sample(t, "spot-interruption.json", `"time": "2024-05-01T12:00:00Z"`, `"time": "2026-12-01T12:00:00Z"`)
	if _, err := fn.Invoke(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range rec.Decisions() {
		if d.Kind == DecideEvent || d.Kind == DecideNominate || d.Kind == DecideLifecycle {
			continue
		}
		// The Recorder numbers the NodeClaims it names by its count of decisions.
		got = append(got, shadowName.ReplaceAllString(fmt.Sprintf("%s %s%s %s%s", d.Kind, d.NodeClaim, d.Node, d.InstanceType, d.Detail), "shadowN"))
	}
	want := []string{
		"TaintDisrupted default-abcdespot-node ",
		"CreateNodeClaim default-shadowN ",
		"Launch default-shadowN m5.large", // prefix: the option count follows
		"RecordLaunch default-shadowN m5.large",
		"Drain default-abcdespot-node pods deleted at 2026-12-01T12:01:45Z",
		"DeleteNodeClaim default-abcdespot-node ",
	}
	if len(got) != len(want) {
		t.Fatalf("decisions:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("decision %d: %q, want %q", i, got[i], want[i])
		}
	}
	// The spot offering is marked unavailable before the replacement is planned:
	// the replacement must not be the interrupted spot pool.
	if !w.unavailable.IsUnavailable("m5.large", "us-east-1a", karpenter.CapacityTypeSpot) {
		t.Error("interrupted spot offering not marked unavailable")
	}
}
