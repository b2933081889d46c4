package disruption

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func TestBudgetActiveWindow(t *testing.T) {
	at := func(hh, mm int) time.Time { return time.Date(2025, 6, 11, hh, mm, 0, 0, time.UTC) } // a Wednesday
	budget := func(sched string, d time.Duration) karpenter.Budget {
		return karpenter.Budget{Nodes: "0", Schedule: &sched, Duration: &metav1.Duration{Duration: d}}
	}
	cases := []struct {
		name string
		b    karpenter.Budget
		now  time.Time
		want bool
	}{
		{"no schedule: always", karpenter.Budget{Nodes: "1"}, at(3, 0), true},
		{"@daily at the start", budget("@daily", time.Hour), at(0, 0), true},
		{"@daily inside", budget("@daily", time.Hour), at(0, 59), true},
		{"@daily at the end (exclusive)", budget("@daily", time.Hour), at(1, 0), false},
		{"09:00 for 8h at 16:59", budget("0 9 * * *", 8*time.Hour), at(16, 59), true},
		{"09:00 for 8h at 17:00", budget("0 9 * * *", 8*time.Hour), at(17, 0), false},
		{"09:00 for 8h at 08:59", budget("0 9 * * *", 8*time.Hour), at(8, 59), false},
		{"window crossing midnight", budget("0 22 * * *", 4*time.Hour), at(1, 30), true},
		{"weekdays on Wednesday", budget("0 0 * * mon-fri", 24*time.Hour), at(12, 0), true},
		{"weekends on Wednesday", budget("0 0 * * sat,sun", 24*time.Hour), at(12, 0), false},
		{"hourly window of 10m", budget("@hourly", 10*time.Minute), at(12, 5), true},
		{"hourly window of 10m, later", budget("@hourly", 10*time.Minute), at(12, 15), false},
		{"schedule read in UTC", budget("0 12 * * *", time.Minute), at(12, 0).In(time.FixedZone("X", 5*3600)), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BudgetActive(tc.b, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("active = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBudgetAllows(t *testing.T) {
	cases := []struct {
		nodes string
		of    int
		want  int
		err   bool
	}{
		{"0", 10, 0, false},
		{"3", 10, 3, false},
		{"10%", 10, 1, false},
		{"10%", 5, 1, false}, // rounded up
		{"10%", 0, 0, false},
		{"25%", 9, 3, false},
		{"100%", 7, 7, false},
		{"ten", 10, 0, true},
		{"-1", 10, 0, true},
	}
	for _, tc := range cases {
		got, err := BudgetAllows(karpenter.Budget{Nodes: tc.nodes}, tc.of, now)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%q of %d: got %d, %v; want %d (error %v)", tc.nodes, tc.of, got, err, tc.want, tc.err)
		}
	}
	sched := "* * * *"
	if _, err := BudgetAllows(karpenter.Budget{Nodes: "1", Schedule: &sched, Duration: &metav1.Duration{Duration: time.Hour}}, 3, now); err == nil {
		t.Error("a four-field schedule was accepted")
	}
	if _, err := BudgetAllows(karpenter.Budget{Nodes: "1", Schedule: &sched}, 3, now); err == nil {
		t.Error("a schedule without duration was accepted")
	}
}

func TestAllowedDisruptionsByReason(t *testing.T) {
	np := &karpenter.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	np.Spec.Disruption.Budgets = []karpenter.Budget{
		{Nodes: "50%"},
		{Nodes: "1", Reasons: []karpenter.DisruptionReason{karpenter.DisruptionReasonDrifted}},
		{Nodes: "0", Reasons: []karpenter.DisruptionReason{karpenter.DisruptionReasonUnderutilized}},
	}
	for r, want := range map[karpenter.DisruptionReason]int{
		karpenter.DisruptionReasonEmpty: 5, karpenter.DisruptionReasonDrifted: 1, karpenter.DisruptionReasonUnderutilized: 0,
	} {
		got, errs := AllowedDisruptions(np, 10, r, now)
		if len(errs) != 0 || got != want {
			t.Errorf("%s: got %d %v, want %d", r, got, errs, want)
		}
	}
}
