package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
)

// TestConsolidatorWritesDriftedCondition: as Karpenter's drift controller does, the
// consolidator marks a drifted NodeClaim Drifted=True with Karpenter's reason while
// its pool's budget holds it back, so `kubectl get nodeclaims` and a Karpenter taking
// the cluster back see it, and removes the condition once the drift is gone. On
// scenario 020's cluster the pool stops allowing spot: the spot nodes drift, one a
// round is replaced (a 10% budget), the rest are marked; allowing spot again clears
// the marks (the node in a zone the pool dropped keeps Karpenter's own until it is
// replaced).
func TestConsolidatorWritesDriftedCondition(t *testing.T) {
	ctx := context.Background()
	w, err := newSimWorld(ctx, invokeFlags{scenario: "../../testdata/scenarios/020-adopt-from-karpenter"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer w.sim.Close()
	fn, err := handlers.NewFunction(handlers.Consolidator, w.newDeps(handlers.Consolidator))
	if err != nil {
		t.Fatal(err)
	}
	fn.MetricsOut = io.Discard
	scheduled, err := os.ReadFile("../../events/scheduled-rule.json")
	if err != nil {
		t.Fatal(err)
	}
	round := 0
	tick := func() {
		round++
		ev := strings.ReplaceAll(string(scheduled), "123456789012", w.cfg.AccountID)
		ev = strings.Replace(ev, `"id": "`, fmt.Sprintf(`"id": "drift-%d-`, round), 1)
		out, err := fn.Invoke(ctx, []byte(ev))
		if err != nil {
			t.Fatalf("round %d: %v\n%s", round, err, out)
		}
		var sum handlers.Summary
		_ = json.Unmarshal(out, &sum)
		t.Logf("round %d: %s", round, sum.Action)
	}
	capacityTypes := func(values ...any) {
		pools := w.kc.Clients().Dynamic.Resource(kube.NodePoolGVR)
		np, err := pools.Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reqs, _, _ := unstructured.NestedSlice(np.Object, "spec", "template", "spec", "requirements")
		for _, r := range reqs {
			if m := r.(map[string]any); m["key"] == karpenter.CapacityTypeLabelKey {
				m["values"] = values
			}
		}
		if err := unstructured.SetNestedSlice(np.Object, reqs, "spec", "template", "spec", "requirements"); err != nil {
			t.Fatal(err)
		}
		if _, err := pools.Update(ctx, np, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// drifted lists the live NodeClaims' Drifted conditions as "name reason".
	drifted := func() []string {
		list, err := w.kc.Clients().Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i := range list.Items {
			nc, err := kube.NodeClaimFromUnstructured(&list.Items[i])
			if err != nil {
				t.Fatal(err)
			}
			if c := meta.FindStatusCondition(nc.Status.Conditions, karpenter.ConditionDrifted); c != nil && nc.DeletionTimestamp == nil {
				out = append(out, nc.Name+" "+c.Reason)
			}
		}
		sort.Strings(out)
		return out
	}
	tick() // adoption: Joiner's hashes; the expired node is replaced
	t.Logf("after adoption: %v", drifted())
	capacityTypes("on-demand")
	tick()
	marked := drifted()
	t.Logf("spot no longer allowed: %v", marked)
	n := 0
	for _, m := range marked {
		if strings.HasSuffix(m, " RequirementsDrifted") && !strings.HasPrefix(m, "default-c2rtv ") {
			n++
		}
	}
	if n < 2 {
		t.Fatalf("want the spot NodeClaims the budget holds back marked Drifted (RequirementsDrifted), got %v", marked)
	}
	if !slices.Contains(marked, "default-c2rtv RequirementsDrifted") {
		t.Errorf("Karpenter's Drifted (RequirementsDrifted) on default-c2rtv was not kept: %v", marked)
	}
	capacityTypes("on-demand", "spot")
	tick()
	got := drifted()
	t.Logf("spot allowed again: %v", got)
	for _, m := range got {
		if !strings.HasPrefix(m, "default-c2rtv ") {
			t.Errorf("spot allowed again, %s is still marked Drifted", m)
		}
	}
}
