package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/kube"
)

// fingerprint is every object of the in-memory cluster (NodeClaims, NodePools,
// EC2NodeClasses with status, Nodes, Pods, Events, Leases) and the simulated
// account's state, serialised: shadow mode must leave every byte of it alone.
func (w *simWorld) fingerprint(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	put := func(key string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[key] = string(b)
	}
	for _, gvr := range []struct {
		name string
		list func() (any, error)
	}{
		{"nodeclaims", func() (any, error) {
			return w.kc.Clients().Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
		}},
		{"nodepools", func() (any, error) {
			return w.kc.Clients().Dynamic.Resource(kube.NodePoolGVR).List(ctx, metav1.ListOptions{})
		}},
		{"nodeclasses", func() (any, error) {
			return w.kc.Clients().Dynamic.Resource(kube.NodeClassGVR).List(ctx, metav1.ListOptions{})
		}},
		{"nodes", func() (any, error) { return w.kc.Clientset().CoreV1().Nodes().List(ctx, metav1.ListOptions{}) }},
		{"pods", func() (any, error) { return w.kc.Clientset().CoreV1().Pods("").List(ctx, metav1.ListOptions{}) }},
		{"events", func() (any, error) { return w.kc.Clientset().EventsV1().Events("").List(ctx, metav1.ListOptions{}) }},
		{"leases", func() (any, error) {
			return w.kc.Clientset().CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
		}},
	} {
		v, err := gvr.list()
		if err != nil {
			t.Fatalf("list %s: %v", gvr.name, err)
		}
		put(gvr.name, v)
	}
	st := w.sim.State()
	st.CallCount = 0 // reads count too
	// Shadow mode's own memory is its one write, to its own parameter.
	st.Parameters = slices.DeleteFunc(st.Parameters, func(p awssim.Parameter) bool {
		if p.Name == handlers.ShadowMemoryParameter(w.cluster) {
			out["shadow memory"] = p.Value
			return true
		}
		return false
	})
	put("aws", st)
	return out
}

// TestShadowModeMutatesNothing runs the three functions with JOINER_MODE=shadow on
// the adoption scenario's cluster (Karpenter's NodeClaims, Nodes and instances:
// one empty, one drifted, one expired, one spot; the EC2NodeClass's instance
// profile missing, and that of a deleted class left in IAM) and an interruption of
// its spot instance: each decides what it would do, and neither the in-memory
// cluster nor the simulated account changes by a byte. Every decision is one
// `shadow decision` log line and counts in the ShadowDecisions and Shadow<Kind>
// metrics.
func TestShadowModeMutatesNothing(t *testing.T) {
	t.Setenv(handlers.EnvMode, handlers.ModeShadow)
	ctx := context.Background()
	var logs bytes.Buffer
	w, err := newSimWorld(ctx, invokeFlags{scenario: "../../testdata/scenarios/020-adopt-from-karpenter"}, &logs)
	if err != nil {
		t.Fatal(err)
	}
	defer w.sim.Close()
	if w.cfg.Mode != handlers.ModeShadow {
		t.Fatalf("config mode %q from %s=shadow", w.cfg.Mode, handlers.EnvMode)
	}
	retired := w.retiredClassProfile(t)
	spot, err := os.ReadFile("../../events/spot-interruption.json")
	if err != nil {
		t.Fatal(err)
	}
	spot = []byte(strings.NewReplacer("i-1234567890abcdef0", "i-0a66f00dcafe00064", "123456789012", w.cfg.AccountID).Replace(string(spot)))
	scheduled, err := os.ReadFile("../../events/scheduled-rule.json")
	if err != nil {
		t.Fatal(err)
	}
	scheduled = []byte(strings.ReplaceAll(string(scheduled), "123456789012", w.cfg.AccountID))

	before := w.fingerprint(t)
	kinds := map[string][]string{}
	for _, step := range []struct {
		fn    string
		event []byte
	}{{handlers.Consolidator, scheduled}, {handlers.Interruption, spot}, {handlers.Provisioner, scheduled}} {
		fn, err := handlers.NewFunction(step.fn, w.newDeps(step.fn))
		if err != nil {
			t.Fatal(err)
		}
		var metrics bytes.Buffer
		fn.MetricsOut = &metrics
		logs.Reset()
		out, err := fn.Invoke(ctx, step.event)
		if err != nil {
			t.Fatalf("%s: %v\n%s", step.fn, err, out)
		}
		var sum handlers.Summary
		if err := json.Unmarshal(out, &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Mode != handlers.ModeShadow {
			t.Errorf("%s: summary mode %q", step.fn, sum.Mode)
		}
		for _, d := range sum.Shadow {
			kinds[step.fn] = append(kinds[step.fn], string(d.Kind)+" "+d.Node+d.NodeClaim+d.NodeClass)
		}
		checkShadowOutputs(t, step.fn, sum.Shadow, logs.Bytes(), metrics.Bytes())
		t.Logf("%s: %s; %d decision(s)", step.fn, sum.Action, len(sum.Shadow))
	}
	after := w.fingerprint(t)
	if after["shadow memory"] == "" {
		t.Error("shadow mode saved no memory (the empty node's mark, the expired node's removal)")
	}
	delete(after, "shadow memory")
	for k := range before {
		if before[k] != after[k] {
			t.Errorf("shadow mode changed the %s", k)
		}
	}
	has := func(fn, prefix string) bool {
		return slices.ContainsFunc(kinds[fn], func(s string) bool { return strings.HasPrefix(s, prefix) })
	}
	// What the same functions do acting (scenario 020 in make replay): the empty
	// node is marked empty (its pool's consolidateAfter runs from there), the expired
	// one is replaced (the drifted one waits for the budget), the spot one is drained.
	for _, want := range []struct{ fn, prefix string }{
		{handlers.Consolidator, "SetEmpty "},
		{handlers.Consolidator, "Launch "},
		{handlers.Consolidator, "Drain ip-10-0-19-88.ec2.internal"},
		{handlers.Interruption, "TaintDisrupted ip-10-0-3-64.ec2.internal"},
		{handlers.Interruption, "Drain ip-10-0-3-64.ec2.internal"},
		{handlers.Interruption, "DeleteNodeClaim ip-10-0-3-64.ec2.internal"},
		// The class's profile is missing in the simulated account (Karpenter made
		// it in the real one), and the deleted class's profile is held by nothing.
		{handlers.Consolidator, "InstanceProfile default"},
		{handlers.Consolidator, "DeleteInstanceProfile " + retired},
	} {
		if !has(want.fn, want.prefix) {
			t.Errorf("%s decided no %q; decisions: %v", want.fn, want.prefix, kinds[want.fn])
		}
	}
}

// retiredClassProfile puts in the simulated account the instance profile Joiner
// made for an EC2NodeClass that has since been deleted (named and tagged as it
// names and tags one), and returns the class's name.
func (w *simWorld) retiredClassProfile(t *testing.T) string {
	t.Helper()
	const class = "retired"
	tags := []iamtypes.Tag{
		{Key: aws.String("kubernetes.io/cluster/" + w.cluster), Value: aws.String("owned")},
		{Key: aws.String(cloud.TagEKSClusterName), Value: aws.String(w.cluster)},
		{Key: aws.String(cloud.TagNodeClass), Value: aws.String(class)},
		{Key: aws.String(cloud.TagRegion), Value: aws.String(w.sim.Region())},
	}
	_, err := iam.NewFromConfig(w.sim.AWSConfig()).CreateInstanceProfile(context.Background(), &iam.CreateInstanceProfileInput{
		InstanceProfileName: aws.String(cloud.InstanceProfileName(w.cluster, w.sim.Region(), class)), Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	return class
}

// checkShadowOutputs checks that an invocation's decisions each went to the log
// as one `shadow decision` line, in order, and to its metrics: ShadowDecisions
// their number, Shadow<Kind> the number of each kind, and no other Shadow metric.
func checkShadowOutputs(t *testing.T, fn string, decisions []handlers.Decision, logs, metrics []byte) {
	t.Helper()
	var logged []handlers.Decision
	var flushed []map[string]any
	for line := range bytes.Lines(logs) {
		var l struct {
			Msg      string             `json:"msg"`
			Function string             `json:"function"`
			Decision *handlers.Decision `json:"decision"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("%s: log line is not JSON: %v: %s", fn, err, line)
		}
		if l.Msg == "shadow decision" {
			if l.Function != fn || l.Decision == nil {
				t.Errorf("%s: shadow decision line of function %q with decision %v", fn, l.Function, l.Decision)
				continue
			}
			logged = append(logged, *l.Decision)
		}
	}
	for line := range bytes.Lines(metrics) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: metrics line is not JSON: %v: %s", fn, err, line)
		}
		if m["msg"] == handlers.MetricsMessage {
			flushed = append(flushed, m)
		}
	}
	if len(logged) != len(decisions) {
		t.Errorf("%s: %d shadow decision log line(s) for %d decision(s)", fn, len(logged), len(decisions))
	} else {
		for i := range decisions {
			if !reflect.DeepEqual(logged[i], decisions[i]) {
				t.Errorf("%s: log line %d is %+v, decision %+v", fn, i, logged[i], decisions[i])
			}
		}
	}
	if len(flushed) != 1 {
		t.Fatalf("%s: %d metrics line(s), want 1:\n%s", fn, len(flushed), metrics)
	}
	want := map[string]float64{"ShadowDecisions": float64(len(decisions))}
	for _, d := range decisions {
		want["Shadow"+string(d.Kind)]++
	}
	got := map[string]float64{}
	for k, v := range flushed[0] {
		if strings.HasPrefix(k, "Shadow") {
			f, _ := v.(float64)
			got[k] = f
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: shadow metrics %v, want %v", fn, got, want)
	}
}

// emptyDeletedAfter runs the consolidator once a minute for rounds minutes on the
// adoption scenario's cluster with its pool's consolidateAfter set to 5m, in mode,
// and returns how long after the first round the empty node's NodeClaim
// (default-b7mnc) was deleted, or -1.
func emptyDeletedAfter(t *testing.T, mode string, memory bool, rounds int) time.Duration {
	t.Helper()
	t.Setenv(handlers.EnvMode, mode)
	ctx := context.Background()
	w, err := newSimWorld(ctx, invokeFlags{scenario: "../../testdata/scenarios/020-adopt-from-karpenter"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer w.sim.Close()
	pools := w.kc.Clients().Dynamic.Resource(kube.NodePoolGVR)
	np, err := pools.Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(np.Object, "5m", "spec", "disruption", "consolidateAfter"); err != nil {
		t.Fatal(err)
	}
	if _, err := pools.Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	scheduled, err := os.ReadFile("../../events/scheduled-rule.json")
	if err != nil {
		t.Fatal(err)
	}
	newDeps := w.newDeps(handlers.Consolidator)
	fn := handlers.NewFunctionFor(handlers.ConsolidatorHandler(), func(ctx context.Context) (*handlers.Deps, error) {
		d, err := newDeps(ctx)
		if err == nil && !memory {
			d.ShadowMemory = nil
		}
		return d, err
	})
	fn.MetricsOut = io.Discard
	start := w.clock.Now()
	for i := 0; i < rounds; i++ {
		if at := start.Add(time.Duration(i) * time.Minute); w.clock.Now().Before(at) {
			if err := w.sleep(ctx, at.Sub(w.clock.Now())); err != nil {
				t.Fatal(err)
			}
		}
		now := w.clock.Now()
		// Each tick is a new event (EventBridge gives each its own id).
		ev := strings.ReplaceAll(string(scheduled), "123456789012", w.cfg.AccountID)
		ev = strings.Replace(ev, `"id": "`, fmt.Sprintf(`"id": "round-%d-`, i), 1)
		out, err := fn.Invoke(ctx, []byte(ev))
		if err != nil {
			t.Fatalf("%s round %d: %v\n%s", mode, i, err, out)
		}
		var sum handlers.Summary
		if err := json.Unmarshal(out, &sum); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s round %d at +%s: %s", mode, i, now.Sub(start), sum.Action)
		if slices.Contains(sum.NodesTerminated, "default-b7mnc") {
			return now.Sub(start)
		}
	}
	return -1
}

// TestShadowMemoryBetweenRounds: in shadow mode nothing is written to the cluster,
// so the Empty mark that starts a pool's consolidateAfter is remembered in shadow
// mode's own SSM parameter. With it, a node empty for longer than consolidateAfter
// is reported deleted in the same round acting deletes it; without it, the node
// is marked again every round and never reported.
func TestShadowMemoryBetweenRounds(t *testing.T) {
	const rounds = 10
	acting := emptyDeletedAfter(t, handlers.ModeAct, true, rounds)
	shadow := emptyDeletedAfter(t, handlers.ModeShadow, true, rounds)
	forgetful := emptyDeletedAfter(t, handlers.ModeShadow, false, rounds)
	t.Logf("empty node deleted after: acting %s, shadow %s, shadow without memory %s", acting, shadow, forgetful)
	if acting < 5*time.Minute {
		t.Fatalf("acting deleted the empty node after %s; want it deleted once consolidateAfter (5m) ran out", acting)
	}
	if shadow != acting {
		t.Errorf("shadow mode reported the empty node deleted after %s, acting deleted it after %s", shadow, acting)
	}
	if forgetful != -1 {
		t.Errorf("without memory, shadow mode reported the empty node deleted after %s; a round that forgets the mark cannot", forgetful)
	}
}
