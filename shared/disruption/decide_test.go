package disruption

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/testworld"
)

var (
	whenEmpty     = karpenter.ConsolidationPolicyWhenEmpty
	whenUnderused = karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized
	m5            = []string{"m5.large", "m5.xlarge", "m5.2xlarge"}
)

func TestEmptyNodeWaitsForConsolidateAfter(t *testing.T) {
	emptyCond := func(since time.Duration) metav1.Condition {
		return metav1.Condition{Type: karpenter.ConditionEmpty, Status: metav1.ConditionTrue, LastTransitionTime: ago(since)}
	}
	cases := []struct {
		name      string
		nodeAge   time.Duration
		cond      *metav1.Condition
		after     karpenter.NillableDuration
		policy    karpenter.ConsolidationPolicy
		wantGone  bool
		wantMark  bool
		markSince time.Duration
	}{
		{name: "empty for 5m of 10m (condition)", nodeAge: time.Hour, cond: ptr(emptyCond(5 * time.Minute)), after: karpenter.NewDuration(10 * time.Minute), policy: whenEmpty},
		{name: "empty for 11m of 10m (condition)", nodeAge: time.Hour, cond: ptr(emptyCond(11 * time.Minute)), after: karpenter.NewDuration(10 * time.Minute), policy: whenEmpty, wantGone: true},
		{name: "same under WhenEmptyOrUnderutilized", nodeAge: time.Hour, cond: ptr(emptyCond(11 * time.Minute)), after: karpenter.NewDuration(10 * time.Minute), policy: whenUnderused, wantGone: true},
		{name: "new node, no condition: marked, kept", nodeAge: 2 * time.Minute, after: karpenter.NewDuration(10 * time.Minute), policy: whenEmpty, wantMark: true, markSince: 2 * time.Minute},
		// The snapshot cannot tell when its last pod left: the emptiness is
		// observed (marked) first, and the timer runs from that round.
		{name: "old node, no condition: marked, kept", nodeAge: 3 * time.Hour, after: karpenter.NewDuration(10 * time.Minute), policy: whenEmpty, wantMark: true, markSince: 3 * time.Hour},
		{name: "consolidateAfter 0s: no condition needed", nodeAge: 3 * time.Hour, after: karpenter.NewDuration(0), policy: whenEmpty, wantGone: true},
		{name: "consolidateAfter Never", nodeAge: 3 * time.Hour, cond: ptr(emptyCond(2 * time.Hour)), after: karpenter.NeverDuration(), policy: whenEmpty},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := testPool("default", tc.policy, 0, m5)
			np.Spec.Disruption.ConsolidateAfter = tc.after
			c := newCluster(t, np)
			_, nc := c.managed("idle", "default", "m5.large", tc.nodeAge, dsPod("idle"))
			if tc.cond != nil {
				nc.Status.Conditions = append(nc.Status.Conditions, *tc.cond)
			}
			d := c.decide()
			got := disruptions(d)
			if tc.wantGone && !equalStrings(got, []string{"Delete/Empty/idle"}) {
				t.Fatalf("want the node deleted as Empty, got %v\n%s", got, dump(d))
			}
			if !tc.wantGone && len(got) != 0 {
				t.Fatalf("want the node kept, got %v\n%s", got, dump(d))
			}
			marks := kinds(d, MarkEmpty)
			if tc.wantMark {
				if len(marks) != 1 || marks[0].NodeClaim != "idle-claim" || !marks[0].EmptySince.Equal(now.Add(-tc.markSince)) {
					t.Fatalf("want MarkEmpty for idle-claim since %v, got %+v\n%s", now.Add(-tc.markSince), marks, dump(d))
				}
			} else if len(marks) != 0 {
				t.Fatalf("want no MarkEmpty, got %+v", marks)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestStaleEmptyConditionIsCleared(t *testing.T) {
	c := newCluster(t, testPool("default", whenEmpty, time.Minute, m5))
	_, nc := c.managed("busy", "default", "m5.large", time.Hour, appPod("web", "500m", "512Mi"))
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpenter.ConditionEmpty, Status: metav1.ConditionTrue, LastTransitionTime: ago(time.Hour)})
	d := c.decide()
	if got := kinds(d, ClearEmpty); len(got) != 1 || got[0].Node != "busy" {
		t.Fatalf("want ClearEmpty for busy, got\n%s", dump(d))
	}
	if len(disruptions(d)) != 0 {
		t.Fatalf("a busy node must not be deleted as empty:\n%s", dump(d))
	}
}

// Two nodes each 1/8 used: together they would fit on one, but a WhenEmpty pool
// only ever removes empty nodes.
func TestWhenEmptyNeverConsolidatesUnderutilized(t *testing.T) {
	c := newCluster(t, testPool("default", whenEmpty, 0, m5, budgets(karpenter.Budget{Nodes: "100%"})))
	c.managed("a", "default", "m5.xlarge", time.Hour, appPod("a1", "500m", "1Gi"))
	c.managed("b", "default", "m5.xlarge", time.Hour, appPod("b1", "500m", "1Gi"))
	d := c.decide()
	if got := disruptions(d); len(got) != 0 {
		t.Fatalf("WhenEmpty pool consolidated underutilized nodes: %v\n%s", got, dump(d))
	}
	// The same cluster under WhenEmptyOrUnderutilized does consolidate: the test
	// above is not passing for want of an opportunity.
	c.pool("default").Spec.Disruption.ConsolidationPolicy = whenUnderused
	if got := disruptions(c.decide()); len(got) == 0 {
		t.Fatalf("control: WhenEmptyOrUnderutilized should consolidate this cluster")
	}
}

func TestHalfEmptyNodeWhosePodsFitElsewhereIsDeleted(t *testing.T) {
	c := newCluster(t, testPool("default", whenUnderused, 0, m5))
	c.managed("full", "default", "m5.xlarge", time.Hour, appPod("f1", "1", "2Gi"), appPod("f2", "1", "2Gi"))
	c.managed("half", "default", "m5.xlarge", time.Hour, appPod("h1", "500m", "1Gi"), dsPod("half"))
	d := c.decide()
	if got := disruptions(d); !equalStrings(got, []string{"Delete/Underutilized/half"}) {
		t.Fatalf("want half deleted, got %v\n%s", got, dump(d))
	}
	a := kinds(d, Delete)[0]
	if a.Replacement != nil || a.SavingsPerHour != 0.192 || !strings.Contains(a.Explanation, "full: 1") {
		t.Fatalf("want a plain delete saving $0.192/h with h1 going to full, got %+v", a)
	}
	if d.Summary.Deletes != 1 || d.Summary.Underutilized != 1 {
		t.Fatalf("summary: %s", d.Summary)
	}
}

func TestReplaceWithCheaperType(t *testing.T) {
	cases := []struct {
		name      string
		pool      []string
		node      string
		opts      Options
		wantType  string // "" for no replacement
		wantSaved float64
	}{
		{name: "2xlarge to large", pool: m5, node: "m5.2xlarge", wantType: "m5.large", wantSaved: 0.384 - 0.096},
		{name: "saving below 10%", pool: []string{"m5.large", "m7i.large"}, node: "m7i.large"},
		{name: "same saving, threshold off", pool: []string{"m5.large", "m7i.large"}, node: "m7i.large", opts: Options{MinSavingsFraction: -1},
			wantType: "m5.large", wantSaved: 0.1008 - 0.096},
		{name: "saving below absolute floor", pool: m5, node: "m5.2xlarge", opts: Options{MinSavingsPerHour: 0.3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testPool("default", whenUnderused, 0, tc.pool))
			c.opts = tc.opts
			c.managed("big", "default", tc.node, time.Hour, appPod("web", "500m", "1Gi"))
			d := c.decide()
			reps := kinds(d, Replace)
			if tc.wantType == "" {
				if len(disruptions(d)) != 0 {
					t.Fatalf("want no replacement, got\n%s", dump(d))
				}
				if b := blockedFor(d, "big"); b == nil || b.Code != BlockUnconsolidable || !strings.Contains(b.Reason, "no cheaper replacement") {
					t.Fatalf("want big reported as having no cheaper replacement, got\n%s", dump(d))
				}
				return
			}
			if len(reps) != 1 || reps[0].Replacement == nil {
				t.Fatalf("want one Replace, got\n%s", dump(d))
			}
			r := reps[0]
			if r.Replacement.InstanceType != tc.wantType || r.Reason != ReasonUnderutilized || !near(r.SavingsPerHour, tc.wantSaved) {
				t.Fatalf("want %s saving %.4f, got %s saving %.4f\n%s", tc.wantType, tc.wantSaved, r.Replacement.InstanceType, r.SavingsPerHour, dump(d))
			}
			// Every option the launch may fall back to keeps the promised saving.
			limit := c.input().Options.withDefaults()
			cur, _ := (&state{snap: c.Snapshot}).offeringPrice(tc.node, zone, "on-demand")
			for _, o := range r.Replacement.Options {
				p, _ := (&state{snap: c.Snapshot}).offeringPrice(o, zone, "on-demand")
				if p > cur-max(limit.MinSavingsFraction*cur, limit.MinSavingsPerHour)+1e-9 {
					t.Errorf("option %s at $%.4f/h breaks the saving floor for $%.4f/h", o, p, cur)
				}
			}
			if !strings.Contains(strings.Join(r.Replacement.Pods, ","), "default/web") {
				t.Errorf("replacement does not hold the pod: %v", r.Replacement.Pods)
			}
		})
	}
}

// A consolidation replacement saves only at the offering it was priced at: its
// requirements allow that zone and capacity type alone, though its pool (and
// a provisioning node of the same pods) would allow every zone and on-demand
// beside spot.
func TestReplacementLaunchesWhereItWasPriced(t *testing.T) {
	np := testPool("default", whenUnderused, 0, m5,
		testworld.Zones("us-east-1a", "us-east-1b", "us-east-1c"),
		testworld.CapacityTypes(karpenter.CapacityTypeSpot, karpenter.CapacityTypeOnDemand))
	c := newCluster(t, np)
	c.managed("big", "default", "m5.2xlarge", time.Hour, appPod("web", "500m", "1Gi"))
	reps := kinds(c.decide(), Replace)
	if len(reps) != 1 || reps[0].Replacement == nil {
		t.Fatalf("want one Replace, got %d", len(reps))
	}
	r := reps[0].Replacement
	for _, want := range []struct{ key, value string }{{corev1.LabelTopologyZone, r.Zone}, {karpenter.CapacityTypeLabelKey, r.CapacityType}} {
		for _, q := range r.Requirements {
			if q.Key == want.key && q.Operator == corev1.NodeSelectorOpIn && !slices.Equal(q.Values, []string{want.value}) {
				t.Errorf("replacement %s requirement %s In %v, want only its priced %s", r.Name, q.Key, q.Values, want.value)
			}
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// Three m5.large nodes each hold a 4Gi pod; no node has room for another's pod,
// and no single node can be replaced more cheaply, but one r5.large holds all three.
func TestMultiNodeThreeSmallNodesToOne(t *testing.T) {
	c := newCluster(t, testPool("default", whenUnderused, 0, []string{"m5.large", "m5.xlarge", "r5.large"},
		budgets(karpenter.Budget{Nodes: "100%"})))
	for _, n := range []string{"s1", "s2", "s3"} {
		c.managed(n, "default", "m5.large", time.Hour, appPod(n+"-app", "250m", "4Gi"))
	}
	d := c.decide()
	cmds := d.Commands()
	if len(cmds) != 1 || len(cmds[0]) != 3 {
		t.Fatalf("want one command over three nodes, got %v\n%s", disruptions(d), dump(d))
	}
	var repl int
	total := 0.0
	for _, a := range cmds[0] {
		if a.Kind != Replace || a.Reason != ReasonUnderutilized {
			t.Fatalf("want Replace/Underutilized, got %s/%s", a.Kind, a.Reason)
		}
		if a.Replacement != nil {
			repl++
			if a.Replacement.InstanceType != "r5.large" || len(a.Replacement.Pods) != 3 {
				t.Fatalf("want one r5.large with the three pods, got %+v", a.Replacement)
			}
		}
		total += a.SavingsPerHour
	}
	if repl != 1 || !near(total, 3*0.096-0.126) {
		t.Fatalf("want exactly one replacement and $%.4f/h saved, got %d and %.4f\n%s", 3*0.096-0.126, repl, total, dump(d))
	}
}

func TestDoNotDisruptBlocks(t *testing.T) {
	for _, where := range []string{"node", "pod", "nodeclaim"} {
		t.Run(where, func(t *testing.T) {
			c := newCluster(t, testPool("default", whenUnderused, 0, m5))
			c.managed("full", "default", "m5.xlarge", time.Hour, appPod("f1", "1", "2Gi"))
			var opts []podOpt
			if where == "pod" {
				opts = append(opts, annotated(karpenter.DoNotDisruptAnnotation, "true"))
			}
			n, nc := c.managed("half", "default", "m5.xlarge", time.Hour, appPod("h1", "500m", "1Gi", opts...))
			switch where {
			case "node":
				n.Annotations = map[string]string{karpenter.DoNotDisruptAnnotation: "true"}
			case "nodeclaim":
				nc.Annotations = map[string]string{karpenter.DoNotDisruptAnnotation: "true"}
			}
			// full is busier, so without the annotation half would go first; with it,
			// half stays and full is tried instead.
			d := c.decide()
			for _, a := range d.Actions {
				if a.Node == "half" {
					t.Fatalf("do-not-disrupt on the %s did not protect half:\n%s", where, dump(d))
				}
			}
			if b := blockedFor(d, "half"); b == nil || b.Code != BlockDoNotDisrupt {
				t.Fatalf("want half blocked by do-not-disrupt, got\n%s", dump(d))
			}
		})
	}
}

func TestControlPlaneNeverCandidate(t *testing.T) {
	for _, how := range []string{"label", "taint", "infra"} {
		t.Run(how, func(t *testing.T) {
			c := newCluster(t, testPool("default", whenUnderused, 0, m5))
			n, _ := c.managed("cp", "default", "m5.2xlarge", 30*24*time.Hour+time.Hour, dsPod("cp"))
			switch how {
			case "label":
				n.Labels["node-role.kubernetes.io/control-plane"] = ""
			case "taint":
				n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
			case "infra":
				n.Labels["node-role.kubernetes.io/infra"] = "true"
			}
			d := c.decide()
			if len(d.Actions) != 0 {
				t.Fatalf("control-plane node (empty, expired) got actions:\n%s", dump(d))
			}
			if b := blockedFor(d, "cp"); b == nil || b.Code != BlockNotCandidate {
				t.Fatalf("want cp reported as not a candidate:\n%s", dump(d))
			}
			if d.Summary.Managed != 0 || d.Summary.Candidates != 0 {
				t.Fatalf("control-plane node counted as managed: %s", d.Summary)
			}
		})
	}
}

func TestNodeWithoutNodeClaimNeverCandidate(t *testing.T) {
	c := newCluster(t, testPool("default", whenUnderused, 0, m5))
	c.node("stray", "default", "m5.2xlarge", 40*24*time.Hour, dsPod("stray")) // empty, old, nodepool label, no NodeClaim
	c.managed("ours", "default", "m5.2xlarge", time.Hour, dsPod("ours"))
	d := c.decide()
	if got := disruptions(d); !equalStrings(got, []string{"Delete/Empty/ours"}) {
		t.Fatalf("want only ours deleted, got %v\n%s", got, dump(d))
	}
	for _, a := range d.Actions {
		if a.Node == "stray" {
			t.Fatalf("acted on a node without NodeClaim:\n%s", dump(d))
		}
	}
}

func TestPDBWithNoDisruptionsAllowedBlocks(t *testing.T) {
	c := newCluster(t, testPool("default", whenUnderused, 0, m5))
	c.managed("full", "default", "m5.xlarge", time.Hour, appPod("f1", "1", "2Gi"), appPod("f2", "1", "2Gi"))
	c.managed("half", "default", "m5.xlarge", time.Hour, appPod("h1", "500m", "1Gi", withLabels("tier", "db")))
	c.pdb("db-pdb", 0, map[string]string{"tier": "db"})
	d := c.decide()
	for _, a := range d.Actions {
		if a.Node == "half" {
			t.Fatalf("PDB with 0 allowed did not protect half:\n%s", dump(d))
		}
	}
	b := blockedFor(d, "half")
	if b == nil || b.Code != BlockPDB || !strings.Contains(b.Reason, "default/db-pdb") {
		t.Fatalf("want half blocked naming default/db-pdb, got\n%s", dump(d))
	}
	// With one disruption allowed it goes.
	c.PDBs[0].Status.DisruptionsAllowed = 1
	if got := disruptions(c.decide()); !equalStrings(got, []string{"Delete/Underutilized/half"}) {
		t.Fatalf("with the PDB allowing 1, want half deleted, got %v", got)
	}
}

func TestBudgets(t *testing.T) {
	daily := func(s string, d time.Duration) karpenter.Budget {
		return karpenter.Budget{Nodes: "0", Schedule: &s, Duration: &metav1.Duration{Duration: d}}
	}
	cases := []struct {
		name       string
		budgets    []karpenter.Budget
		empty      int
		disrupting int
		want       int
	}{
		{name: "0 nodes", budgets: []karpenter.Budget{{Nodes: "0"}}, empty: 3},
		{name: "1 node", budgets: []karpenter.Budget{{Nodes: "1"}}, empty: 3, want: 1},
		{name: "10% of 5 rounds up to 1", budgets: []karpenter.Budget{{Nodes: "10%"}}, empty: 5, want: 1},
		{name: "default is 10%", empty: 5, want: 1},
		{name: "50% of 5 rounds up to 3", budgets: []karpenter.Budget{{Nodes: "50%"}}, empty: 5, want: 3},
		{name: "disrupting nodes count", budgets: []karpenter.Budget{{Nodes: "2"}}, empty: 3, disrupting: 1, want: 1},
		{name: "most restrictive wins", budgets: []karpenter.Budget{{Nodes: "100%"}, {Nodes: "2"}}, empty: 4, want: 2},
		{name: "reason scoped to Drifted leaves Empty free", budgets: []karpenter.Budget{{Nodes: "0", Reasons: []karpenter.DisruptionReason{karpenter.DisruptionReasonDrifted}}}, empty: 3, want: 3},
		{name: "reason scoped to Empty", budgets: []karpenter.Budget{{Nodes: "100%"}, {Nodes: "0", Reasons: []karpenter.DisruptionReason{karpenter.DisruptionReasonEmpty}}}, empty: 3},
		{name: "inside window 09:00+8h", budgets: []karpenter.Budget{{Nodes: "100%"}, daily("0 9 * * *", 8*time.Hour)}, empty: 3},
		{name: "outside window 13:00+8h", budgets: []karpenter.Budget{{Nodes: "100%"}, daily("0 13 * * *", 8*time.Hour)}, empty: 3, want: 3},
		{name: "window on weekdays (Wednesday)", budgets: []karpenter.Budget{{Nodes: "100%"}, daily("0 0 * * mon-fri", 24*time.Hour)}, empty: 3},
		{name: "window on weekends", budgets: []karpenter.Budget{{Nodes: "100%"}, daily("0 0 * * sat,sun", 24*time.Hour)}, empty: 3, want: 3},
		{name: "bad schedule fails closed", budgets: []karpenter.Budget{{Nodes: "100%"}, daily("61 * * * *", time.Hour)}, empty: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testPool("default", whenEmpty, 0, m5, budgets(tc.budgets...)))
			for i := 0; i < tc.empty; i++ {
				name := string(rune('a'+i)) + "-empty"
				c.managed(name, "default", "m5.large", time.Hour)
			}
			for i := 0; i < tc.disrupting; i++ {
				n, _ := c.managed(string(rune('p'+i))+"-going", "default", "m5.large", time.Hour)
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: karpenter.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule})
			}
			d := c.decide()
			if got := len(disruptions(d)); got != tc.want {
				t.Fatalf("want %d deletions, got %d\n%s", tc.want, got, dump(d))
			}
			if tc.want < tc.empty {
				blocked := 0
				for _, b := range d.Blocked {
					if b.Code == BlockBudget {
						blocked++
					}
				}
				if blocked != tc.empty-tc.want {
					t.Fatalf("want %d nodes reported as held by the budget, got %d\n%s", tc.empty-tc.want, blocked, dump(d))
				}
			}
		})
	}
}

func TestDrift(t *testing.T) {
	class := testClass()
	current := NodeClassHash(class)
	cases := []struct {
		name   string
		setup  func(c *cluster, nc *karpenter.NodeClaim)
		want   []string
		reason string
	}{
		{name: "class hash matches", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			nc.Annotations = map[string]string{NodeClassHashAnnotation: current}
		}},
		{name: "class hash differs", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			nc.Annotations = map[string]string{NodeClassHashAnnotation: "0123456789abcdef"}
		}, want: []string{"Replace/Drifted/old"}, reason: "EC2NodeClass default changed"},
		{name: "hash written by Karpenter is not compared", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			nc.Annotations = map[string]string{NodeClassHashAnnotation: "4207328913470289", NodeClassHashVersionAnnotation: "v4"}
		}},
		{name: "pool hash differs", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			nc.Annotations = map[string]string{NodePoolHashAnnotation: NodePoolHash(c.pool("default")), NodePoolHashVersionAnnotation: HashVersion}
			c.pool("default").Spec.Template.ObjectMeta.Labels = map[string]string{"example.com/team": "payments"}
		}, want: []string{"Replace/Drifted/old"}, reason: "NodePool default template changed"},
		{name: "image no longer selected", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			c.Snapshot.NodeClasses[0].Status.AMIs = []karpenter.AMI{{ID: "ami-new"}}
		}, want: []string{"Replace/Drifted/old"}, reason: "image ami-current"},
		{name: "image still selected", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			c.Snapshot.NodeClasses[0].Status.AMIs = []karpenter.AMI{{ID: "ami-new"}, {ID: "ami-current"}}
		}},
		{name: "requirement no longer satisfied", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			c.pool("default").Spec.Template.Spec.Requirements[0].Values = []string{"m5.large", "m5.2xlarge"}
		}, want: []string{"Replace/Drifted/old"}, reason: "no longer satisfies"},
		{name: "drift budget 0", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			nc.Annotations = map[string]string{NodeClassHashAnnotation: "0123456789abcdef"}
			c.pool("default").Spec.Disruption.Budgets = []karpenter.Budget{{Nodes: "0", Reasons: []karpenter.DisruptionReason{karpenter.DisruptionReasonDrifted}}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// WhenEmpty keeps consolidation out of the way: only drift can act.
			c := newCluster(t, testPool("default", whenEmpty, 0, m5))
			// busy is a current node (newer image, a type every variant allows) with
			// too little room left for old's pod, so old needs a replacement.
			_, busy := c.managed("busy", "default", "m5.2xlarge", time.Hour, appPod("b1", "6", "24Gi"))
			busy.Status.ImageID = "ami-new"
			busy.Annotations = map[string]string{NodeClassHashAnnotation: current}
			_, nc := c.managed("old", "default", "m5.xlarge", time.Hour, appPod("o1", "2", "4Gi"))
			tc.setup(c, nc)
			d := c.decide()
			if got := disruptions(d); !equalStrings(got, tc.want) {
				t.Fatalf("want %v, got %v\n%s", tc.want, got, dump(d))
			}
			if len(tc.want) == 0 {
				return
			}
			a := kinds(d, Replace)[0]
			if !strings.Contains(a.Explanation, tc.reason) || a.Replacement == nil || len(a.Replacement.Pods) != 1 {
				t.Fatalf("want a replacement holding o1 and an explanation naming %q, got %+v", tc.reason, a)
			}
		})
	}
}

// A drifted node whose pods fit elsewhere is deleted, not replaced.
func TestDriftedNodeWithRoomElsewhereIsDeleted(t *testing.T) {
	c := newCluster(t, testPool("default", whenEmpty, 0, m5))
	c.managed("roomy", "default", "m5.2xlarge", time.Hour, appPod("r1", "1", "2Gi"))
	_, nc := c.managed("old", "default", "m5.xlarge", time.Hour, appPod("o1", "1", "2Gi"))
	nc.Status.ImageID = "ami-old"
	c.Snapshot.NodeClasses[0].Status.AMIs = []karpenter.AMI{{ID: "ami-current"}}
	d := c.decide()
	if got := disruptions(d); !equalStrings(got, []string{"Delete/Drifted/old"}) {
		t.Fatalf("want old deleted as drifted, got %v\n%s", got, dump(d))
	}
}

func TestExpiry(t *testing.T) {
	cases := []struct {
		name     string
		age      time.Duration
		expire   karpenter.NillableDuration
		tgp      time.Duration
		pin      bool // do-not-disrupt pod
		want     []string
		forceful bool
		block    BlockCode
	}{
		{name: "young", age: 24 * time.Hour},
		{name: "past default 720h", age: 721 * time.Hour, want: []string{"Replace/Expired/old"}},
		{name: "past 24h", age: 25 * time.Hour, expire: karpenter.NewDuration(24 * time.Hour), want: []string{"Replace/Expired/old"}},
		{name: "Never", age: 5000 * time.Hour, expire: karpenter.NeverDuration()},
		{name: "do-not-disrupt holds without grace period", age: 721 * time.Hour, pin: true, block: BlockDoNotDisrupt},
		{name: "do-not-disrupt holds inside grace period", age: 721 * time.Hour, tgp: 2 * time.Hour, pin: true, block: BlockDoNotDisrupt},
		{name: "grace period over: forceful", age: 723 * time.Hour, tgp: 2 * time.Hour, pin: true, want: []string{"Replace/Expired/old"}, forceful: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Expiry ignores budgets: a zero budget must not hold it.
			np := testPool("default", whenEmpty, 0, m5, budgets(karpenter.Budget{Nodes: "0"}))
			np.Spec.Template.Spec.ExpireAfter = tc.expire
			if tc.tgp > 0 {
				np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: tc.tgp}
			}
			c := newCluster(t, np)
			c.managed("busy", "default", "m5.xlarge", time.Hour, appPod("b1", "3", "8Gi"))
			var opts []podOpt
			if tc.pin {
				opts = append(opts, annotated(karpenter.DoNotDisruptAnnotation, "true"))
			}
			c.managed("old", "default", "m5.xlarge", tc.age, appPod("o1", "2", "4Gi", opts...))
			d := c.decide()
			if got := disruptions(d); !equalStrings(got, tc.want) {
				t.Fatalf("want %v, got %v\n%s", tc.want, got, dump(d))
			}
			if len(tc.want) > 0 {
				a := kinds(d, Replace)[0]
				if a.Forceful != tc.forceful || a.Replacement == nil {
					t.Fatalf("want forceful=%v with a replacement, got %+v", tc.forceful, a)
				}
			}
			if tc.block != "" {
				if b := blockedFor(d, "old"); b == nil || b.Code != tc.block || !strings.Contains(b.Reason, "expired") {
					t.Fatalf("want old blocked by %s, got\n%s", tc.block, dump(d))
				}
			}
		})
	}
}

// The last home of a pod: removing the node would leave the pod pending, so it
// stays whatever else argues for its removal.
func TestPodThatWouldBeUnschedulableBlocksDelete(t *testing.T) {
	c := newCluster(t, testPool("default", whenUnderused, 0, m5))
	n, _ := c.managed("special", "default", "m5.xlarge", 721*time.Hour, appPod("local", "100m", "128Mi", selecting("example.com/disk", "local-nvme")))
	n.Labels["example.com/disk"] = "local-nvme" // only this node has it; the pool cannot make another
	c.managed("other", "default", "m5.xlarge", time.Hour, appPod("x", "1", "1Gi"))
	d := c.decide()
	for _, a := range d.Actions {
		if a.Node == "special" {
			t.Fatalf("special would strand default/local, yet:\n%s", dump(d))
		}
	}
	b := blockedFor(d, "special")
	if b == nil || b.Code != BlockUnschedulable || !strings.Contains(b.Reason, "default/local") {
		t.Fatalf("want special blocked naming default/local, got\n%s", dump(d))
	}
}

// An empty node whose room a pending pod is counting on stays: deleting it would
// make the pending pod need a new node.
func TestPendingPodsDoNotGetWorse(t *testing.T) {
	c := newCluster(t, testPool("default", whenEmpty, 0, []string{"m5.xlarge"}))
	c.managed("spare", "default", "m5.xlarge", time.Hour)
	c.Snapshot.Pods = []*corev1.Pod{pendingPod("waiting", "2", "4Gi")}
	d := c.decide()
	if got := disruptions(d); len(got) != 0 {
		t.Fatalf("deleted the node the pending pod fits on: %v\n%s", got, dump(d))
	}
	if b := blockedFor(d, "spare"); b == nil || !strings.Contains(b.Reason, "default/waiting") {
		t.Fatalf("want spare held for default/waiting, got\n%s", dump(d))
	}
	// Without the pending pod it goes.
	c.Snapshot.Pods = nil
	if got := disruptions(c.decide()); !equalStrings(got, []string{"Delete/Empty/spare"}) {
		t.Fatalf("control: want spare deleted, got %v", got)
	}
}

func TestNotInitializedAndDeletingNodesAreNotCandidates(t *testing.T) {
	c := newCluster(t, testPool("default", whenEmpty, 0, m5, budgets(karpenter.Budget{Nodes: "100%"})))
	_, nc := c.managed("booting", "default", "m5.large", time.Hour)
	nc.Status.Conditions = nc.Status.Conditions[:2] // Launched, Registered
	_, gone := c.managed("going", "default", "m5.large", time.Hour)
	gone.DeletionTimestamp = ptr(ago(time.Minute))
	c.managed("idle", "default", "m5.large", time.Hour)
	d := c.decide()
	if got := disruptions(d); !equalStrings(got, []string{"Delete/Empty/idle"}) {
		t.Fatalf("want only idle deleted, got %v\n%s", got, dump(d))
	}
}

// Commands decided later build on earlier ones: two half-empty nodes can each move
// to the third, but not both, so only one goes.
func TestSequentialDecisionsDoNotDoubleBook(t *testing.T) {
	c := newCluster(t, testPool("default", whenUnderused, 0, []string{"m5.xlarge"}, budgets(karpenter.Budget{Nodes: "100%"})))
	c.managed("a", "default", "m5.xlarge", time.Hour, appPod("a1", "2", "2Gi"))
	c.managed("b", "default", "m5.xlarge", time.Hour, appPod("b1", "2", "2Gi"))
	c.managed("c", "default", "m5.xlarge", time.Hour, appPod("c1", "1500m", "2Gi"))
	d := c.decide()
	if got := disruptions(d); len(got) != 1 {
		t.Fatalf("want exactly one node removed (3 x ~2 CPU fit on 2 nodes of 3.92, not 1), got %v\n%s", got, dump(d))
	}
}

func TestDeterministic(t *testing.T) {
	build := func() Input {
		c := newCluster(t, testPool("default", whenUnderused, 0, []string{"m5.large", "m5.xlarge", "m5.2xlarge", "r5.large"},
			budgets(karpenter.Budget{Nodes: "50%"})))
		for i := 0; i < 12; i++ {
			name := "n" + string(rune('a'+i))
			types := []string{"m5.large", "m5.xlarge", "m5.2xlarge"}
			var pods []*corev1.Pod
			for j := 0; j < i%4; j++ {
				pods = append(pods, appPod(name+"-p"+string(rune('0'+j)), "300m", "1Gi"))
			}
			_, nc := c.managed(name, "default", types[i%3], time.Duration(i+1)*time.Hour, pods...)
			if i%5 == 0 {
				nc.Annotations = map[string]string{NodeClassHashAnnotation: "stale"}
			}
		}
		c.Snapshot.Pods = []*corev1.Pod{pendingPod("pending-1", "500m", "1Gi")}
		return c.input()
	}
	first := Decide(build())
	second := Decide(build())
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("two decisions on the same input differ:\n%s\nvs\n%s", dump(first), dump(second))
	}
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(second)
	if string(a) != string(b) {
		t.Fatalf("JSON differs")
	}
	if len(disruptions(first)) == 0 {
		t.Fatalf("the determinism check is vacuous: nothing was decided\n%s", dump(first))
	}
}

func TestBadInputIsExplained(t *testing.T) {
	for name, in := range map[string]Input{
		"no snapshot": {Now: now},
		"no catalog":  {Now: now, Snapshot: newCluster(t).Snapshot},
		"no time":     {Snapshot: newCluster(t).Snapshot},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "no catalog" {
				in.Snapshot.Catalog = nil
			}
			d := Decide(in)
			if len(d.Actions) != 0 || len(d.Warnings) == 0 {
				t.Fatalf("want no actions and a warning, got %+v", d)
			}
		})
	}
	// A budget that cannot be read allows nothing and says why.
	c := newCluster(t, testPool("default", whenEmpty, 0, m5, budgets(karpenter.Budget{Nodes: "many"})))
	c.managed("idle", "default", "m5.large", time.Hour)
	d := c.decide()
	if len(disruptions(d)) != 0 || len(d.Warnings) == 0 || !strings.Contains(d.Warnings[0], "many") {
		t.Fatalf("want a bad budget to fail closed with a warning, got\n%s", dump(d))
	}
}

// Replacing spot with cheaper spot is off unless asked for, and then needs 15
// cheaper options so the node is not walked down to the scarcest spot pools.
func TestSpotToSpot(t *testing.T) {
	build := func(spotToSpot bool) *cluster {
		np := testPool("spot", whenUnderused, 0, nil)
		np.Spec.Template.Spec.Requirements = []karpenter.NodeSelectorRequirementWithMinValues{
			req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpenter.CapacityTypeSpot),
			req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zone),
			req(karpenter.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
		}
		c := newCluster(t, np)
		c.opts.SpotToSpot = spotToSpot
		n, nc := c.managed("spotty", "spot", "m5.4xlarge", time.Hour, appPod("web", "500m", "1Gi"))
		n.Labels[karpenter.CapacityTypeLabelKey] = karpenter.CapacityTypeSpot
		nc.Labels[karpenter.CapacityTypeLabelKey] = karpenter.CapacityTypeSpot
		return c
	}
	d := build(false).decide()
	if len(disruptions(d)) != 0 {
		t.Fatalf("spot-to-spot off, yet:\n%s", dump(d))
	}
	if b := blockedFor(d, "spotty"); b == nil || !strings.Contains(b.Reason, "SpotToSpot") {
		t.Fatalf("want spotty reported as held by the spot-to-spot setting:\n%s", dump(d))
	}
	d = build(true).decide()
	reps := kinds(d, Replace)
	if len(reps) != 1 || reps[0].Replacement.CapacityType != karpenter.CapacityTypeSpot || len(reps[0].Replacement.Options) != spotToSpotMinOptions {
		t.Fatalf("want one spot replacement with exactly %d options, got\n%s", spotToSpotMinOptions, dump(d))
	}
}

// Two nodes each hold a pod of a PDB that allows one disruption: only one of them
// goes this round, so no drain is left waiting on the PDB.
func TestPDBAllowanceIsSharedWithinARound(t *testing.T) {
	c := newCluster(t, testPool("default", whenUnderused, 0, []string{"m5.xlarge"}, budgets(karpenter.Budget{Nodes: "100%"})))
	c.managed("big", "default", "m5.xlarge", time.Hour, appPod("b1", "500m", "1Gi"))
	c.managed("x", "default", "m5.xlarge", time.Hour, appPod("x1", "200m", "256Mi", withLabels("tier", "web")))
	c.managed("y", "default", "m5.xlarge", time.Hour, appPod("y1", "200m", "256Mi", withLabels("tier", "web")))
	c.pdb("web-pdb", 1, map[string]string{"tier": "web"})
	d := c.decide()
	gone := map[string]bool{}
	for _, a := range d.Actions {
		if a.Kind == Delete || a.Kind == Replace {
			gone[a.Node] = true
		}
	}
	if gone["x"] && gone["y"] {
		t.Fatalf("both nodes of a PDB allowing one disruption were disrupted:\n%s", dump(d))
	}
	if !gone["x"] && !gone["y"] {
		t.Fatalf("want one of x, y disrupted:\n%s", dump(d))
	}
	// Control: without the PDB, both can go at once.
	c.PDBs = nil
	d = c.decide()
	if len(disruptions(d)) < 2 {
		t.Fatalf("control: want x and y both consolidated without the PDB, got\n%s", dump(d))
	}
}

// The Drifted condition is kept as Karpenter's drift controller keeps it: True with
// Karpenter's reason on a drifted node that stays (here the drift budget is 0),
// removed once a reason Joiner judges no longer holds, left alone when its reason
// is one Joiner cannot judge (Karpenter's SubnetDrift, an AMI drift while the
// class's AMIs are unresolved), which still counts as drift.
func TestDriftedCondition(t *testing.T) {
	drifted := func(reason string) metav1.Condition {
		return metav1.Condition{Type: karpenter.ConditionDrifted, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: ago(time.Hour)}
	}
	noDriftBudget := func(c *cluster) {
		c.pool("default").Spec.Disruption.Budgets = []karpenter.Budget{{Nodes: "0", Reasons: []karpenter.DisruptionReason{karpenter.DisruptionReasonDrifted}}}
	}
	cases := []struct {
		name      string
		setup     func(c *cluster, nc *karpenter.NodeClaim)
		mark      string // MarkDrifted's reason, "" for none
		clear     bool
		disrupted bool
	}{
		{name: "requirement no longer satisfied, held by the budget", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			c.pool("default").Spec.Template.Spec.Requirements[0].Values = []string{"m5.large", "m5.2xlarge"}
			noDriftBudget(c)
		}, mark: DriftRequirements},
		{name: "already marked", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			c.pool("default").Spec.Template.Spec.Requirements[0].Values = []string{"m5.large", "m5.2xlarge"}
			nc.Status.Conditions = append(nc.Status.Conditions, drifted(DriftRequirements))
			noDriftBudget(c)
		}},
		{name: "marked for another reason, still drifted", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			c.pool("default").Spec.Template.Spec.Requirements[0].Values = []string{"m5.large", "m5.2xlarge"}
			nc.Status.Conditions = append(nc.Status.Conditions, drifted("SubnetDrift"))
			noDriftBudget(c)
		}},
		{name: "marked, no longer drifted", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			nc.Status.Conditions = append(nc.Status.Conditions, drifted(DriftRequirements))
		}, clear: true},
		{name: "Karpenter's SubnetDrift stays and counts", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			nc.Status.Conditions = append(nc.Status.Conditions, drifted("SubnetDrift"))
		}, disrupted: true},
		{name: "AMI drift with the class's AMIs unresolved stays and counts", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			nc.Status.Conditions = append(nc.Status.Conditions, drifted(DriftAMI))
			c.Snapshot.NodeClasses[0].Status.AMIs = nil
		}, disrupted: true},
		{name: "AMI drift the class's AMIs disprove", setup: func(c *cluster, nc *karpenter.NodeClaim) {
			nc.Status.Conditions = append(nc.Status.Conditions, drifted(DriftAMI))
			c.Snapshot.NodeClasses[0].Status.AMIs = []karpenter.AMI{{ID: "ami-current"}, {ID: "ami-new"}}
		}, clear: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, testPool("default", whenEmpty, 0, m5))
			_, busy := c.managed("busy", "default", "m5.2xlarge", time.Hour, appPod("b1", "6", "24Gi"))
			busy.Status.ImageID = "ami-new"
			_, nc := c.managed("old", "default", "m5.xlarge", time.Hour, appPod("o1", "2", "4Gi"))
			tc.setup(c, nc)
			d := c.decide()
			marks, clears := kinds(d, MarkDrifted), kinds(d, ClearDrifted)
			switch {
			case tc.mark != "" && (len(marks) != 1 || marks[0].NodeClaim != "old-claim" || marks[0].DriftedReason != tc.mark):
				t.Fatalf("want MarkDrifted %s on old-claim, got %+v\n%s", tc.mark, marks, dump(d))
			case tc.mark == "" && len(marks) != 0:
				t.Fatalf("want no MarkDrifted, got %+v", marks)
			case tc.clear != (len(clears) == 1 && clears[0].NodeClaim == "old-claim") || len(clears) > 1:
				t.Fatalf("ClearDrifted: want %v, got %+v\n%s", tc.clear, clears, dump(d))
			}
			if got := disruptions(d); tc.disrupted != (len(got) == 1 && got[0] == "Replace/Drifted/old") || (!tc.disrupted && len(got) != 0) {
				t.Fatalf("disrupted %v, want %v\n%s", got, tc.disrupted, dump(d))
			}
			if len(d.Commands()) != len(disruptions(d)) {
				t.Fatalf("condition actions among the commands: %v", d.Commands())
			}
		})
	}
}
