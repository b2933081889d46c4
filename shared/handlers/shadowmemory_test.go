package handlers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// TestShadowMemoryEncoding: the memory fits SSM's standard tier (4096 characters):
// plain JSON while it fits, gzipped past that, and past that the oldest entries
// (those nearest their removal) are kept and the newest left out, counted.
func TestShadowMemoryEncoding(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	mem := func(n int) *shadowMemory {
		m := &shadowMemory{}
		for i := 0; i < n; i++ {
			m.setCondition(fmt.Sprintf("default-%05d", i), memCondition{Type: "Empty", Status: metav1.ConditionTrue, Since: t0.Add(time.Duration(i) * time.Second)})
		}
		m.remove("default-gone", memRemoval{At: t0, Reason: "Expired"})
		return m
	}
	for _, tc := range []struct {
		n        int
		gzipped  bool
		dropping bool
	}{{3, false, false}, {200, true, false}, {5000, true, true}} {
		b, dropped, err := encodeMemory(mem(tc.n))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > memoryMaxBytes {
			t.Errorf("%d marks: %d bytes, over %d", tc.n, len(b), memoryMaxBytes)
		}
		if got := strings.HasPrefix(string(b), gzipPrefix); got != tc.gzipped {
			t.Errorf("%d marks: gzipped %v, want %v", tc.n, got, tc.gzipped)
		}
		if (dropped > 0) != tc.dropping {
			t.Errorf("%d marks: %d left out", tc.n, dropped)
		}
		back, err := decodeMemory(b)
		if err != nil {
			t.Fatalf("%d marks: %v", tc.n, err)
		}
		if got := len(back.Conditions) + len(back.Removed); got != tc.n+1-dropped {
			t.Errorf("%d marks: %d entries decoded, want %d", tc.n, got, tc.n+1-dropped)
		}
		if _, ok := back.Removed["default-gone"]; !ok {
			t.Errorf("%d marks: the oldest entry (a removal) was left out", tc.n)
		}
		if c := back.Conditions["default-00000"]; len(c) != 1 || !c[0].Since.Equal(t0) {
			t.Errorf("%d marks: oldest mark decoded as %v", tc.n, c)
		}
		t.Logf("%d marks: %d bytes, %d left out", tc.n, len(b), dropped)
	}
	for _, bad := range []string{"{", "gzip:%%%", "gzip:aGVsbG8="} {
		if _, err := decodeMemory([]byte(bad)); err == nil || !strings.Contains(err.Error(), "shadow memory") {
			t.Errorf("decode %q: %v", bad, err)
		}
	}
}

// The memory makes a state read what the remembered writes would have made it: a
// condition set (with its reason) or removed, and a removed NodeClaim gone with its
// Node and the pods bound there.
func TestShadowMemoryApply(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	m := &shadowMemory{}
	m.setCondition("a", memCondition{Type: "Drifted", Status: metav1.ConditionTrue, Reason: "RequirementsDrifted", Since: t0})
	m.setCondition("b", memCondition{Type: "Drifted", Since: t0}) // removed
	m.remove("c", memRemoval{At: t0, Reason: "Empty"})
	claim := func(name, node string, conds ...metav1.Condition) *karpenter.NodeClaim {
		nc := &karpenter.NodeClaim{}
		nc.Name, nc.Status.NodeName, nc.Status.ProviderID, nc.Status.Conditions = name, node, "aws:///us-east-1a/i-"+name, conds
		return nc
	}
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name[len(name)-1:]}}
	}
	st := &kube.ClusterState{
		NodeClaims: []*karpenter.NodeClaim{claim("a", "node-a"), claim("b", "node-b", metav1.Condition{Type: "Drifted", Status: metav1.ConditionTrue, Reason: "NodePoolDrifted"}), claim("c", "node-c")},
		AllNodes:   []*corev1.Node{node("node-a"), node("node-b"), node("node-c")},
		PodsByNode: map[string][]*corev1.Pod{"node-c": {{ObjectMeta: metav1.ObjectMeta{Name: "p"}}}},
	}
	for _, n := range st.AllNodes {
		st.Snapshot.Nodes = append(st.Snapshot.Nodes, packer.NodeState{Node: n})
	}
	m.apply(st)
	if len(st.NodeClaims) != 2 || len(st.AllNodes) != 2 || len(st.Snapshot.Nodes) != 2 || st.PodsByNode["node-c"] != nil {
		t.Fatalf("removed NodeClaim c still there: %d claims, %d nodes, %d snapshot nodes, pods %v", len(st.NodeClaims), len(st.AllNodes), len(st.Snapshot.Nodes), st.PodsByNode)
	}
	if c := st.NodeClaims[0].Status.Conditions; len(c) != 1 || c[0].Reason != "RequirementsDrifted" || !c[0].LastTransitionTime.Time.Equal(t0) {
		t.Errorf("a's conditions %+v", c)
	}
	if c := st.NodeClaims[1].Status.Conditions; len(c) != 0 {
		t.Errorf("b's Drifted was not removed: %+v", c)
	}
}
