package workload

import (
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
)

// The ordinary shapes on the embedded catalog: the plan is valid by the
// independent checker, and the improvement phase brings it near the bound (the
// first fill alone, m types for everything, was 1.13x on the real catalog; the
// column-generation repack measured 1.003-1.014 here, 1.046 with zone spread
// over both architectures).
func TestOrdinaryShapesNearBound(t *testing.T) {
	cat := catalog.Embedded()
	for _, tc := range []struct {
		name   string
		shapes []shape
		spread bool
	}{
		{"ordinary", ordinaryShapes, false},
		{"ordinary-spread", ordinaryShapes, true},
		{"cpu-heavy", cpuHeavyShapes, false},
		{"mem-heavy-spread", memHeavyShapes, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := ShapesSnapshot(cat, tc.shapes, tc.spread, "amd64", "arm64")
			plan := packer.Solve(snap, packer.Options{})
			if len(plan.Unschedulable) > 0 {
				t.Fatalf("unschedulable: %+v", plan.Unschedulable[0])
			}
			for _, err := range check.Plan(snap, plan, cat) {
				t.Error(err)
			}
			bound, why := LowerBound(snap)
			ratio := plan.TotalPricePerHour / bound
			t.Logf("%d nodes, $%.4f/h, bound $%.4f/h (%s): %.3f", len(plan.NewNodes), plan.TotalPricePerHour, bound, why, ratio)
			if ratio > 1.05 {
				t.Errorf("cost / bound %.3f > 1.05", ratio)
			}
		})
	}
}

// --explain says per new node which resource its pods are bound by, what the type
// charges per unit of it, and, for nodes the improvement phase chose, what it
// replaced.
func TestExplainSaysWhyType(t *testing.T) {
	snap := ShapesSnapshot(catalog.Embedded(), ordinaryShapes, false, "amd64")
	plan := packer.Solve(snap, packer.Options{Explain: true})
	improved := 0
	for _, n := range plan.NewNodes {
		if !strings.Contains(n.Explain, "-bound (") || !strings.Contains(n.Explain, "per allocatable") {
			t.Errorf("%s: explanation names no dominant resource or unit price: %s", n.Name, n.Explain)
		}
		if strings.Contains(n.Explain, "repacked into") && strings.Contains(n.Explain, "first fill (") {
			improved++
		}
	}
	if improved == 0 {
		t.Errorf("no node says what the improvement phase replaced: %s", plan.NewNodes[0].Explain)
	}
}
