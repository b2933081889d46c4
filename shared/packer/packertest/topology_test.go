package packertest

import (
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// Topology spread and pod (anti-)affinity as Karpenter's scheduling tests
// (kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/topology_test.go)
// assert them: node inclusion policies, minDomains, matchLabelKeys, and topology
// keys other than hostname and zone.

func policy(p corev1.NodeInclusionPolicy) *corev1.NodeInclusionPolicy { return &p }

// spreadWith is spreadOn with the rest of the constraint's fields set by f.
func spreadWith(key string, maxSkew int32, app string, f func(*corev1.TopologySpreadConstraint)) podOpt {
	return func(p *corev1.Pod) {
		spreadOn(key, maxSkew, corev1.DoNotSchedule, app)(p)
		f(&p.Spec.TopologySpreadConstraints[len(p.Spec.TopologySpreadConstraints)-1])
	}
}

// node returns an existing node of the small catalog's type in zone, labelled
// and tainted as given.
func existingNode(t *testing.T, cat *catalog.Catalog, name, typ, zone, capacityType string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	it, ok := cat.Lookup(typ)
	if !ok {
		t.Fatalf("no type %s", typ)
	}
	n := workload.ExistingNode(name, nil, it, catalog.Offering{Zone: zone, CapacityType: capacityType})
	for k, v := range labels {
		n.Labels[k] = v
	}
	n.Spec.Taints = taints
	return n
}

// placedBy counts the placed pods of the plan per value of a node label (new
// and existing nodes; the existing nodes' labels come from the snapshot).
func placedBy(s *solved, snap *packer.Snapshot, key string) map[string]int {
	out := map[string]int{}
	for _, n := range s.plan.NewNodes {
		out[n.Labels[key]] += len(n.Pods)
	}
	for _, e := range s.plan.ExistingNodes {
		for _, ns := range snap.Nodes {
			if ns.Node.Name == e.Name {
				out[ns.Node.Labels[key]] += len(e.Pods)
			}
		}
	}
	return out
}

func sortedCounts(m map[string]int) []int {
	var out []int
	for _, c := range m {
		out = append(out, c)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(out)))
	return out
}

func TestSpreadNodeInclusionPolicies(t *testing.T) {
	critical := corev1.Taint{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	ignore, honor := policy(corev1.NodeInclusionPolicyIgnore), policy(corev1.NodeInclusionPolicyHonor)
	cases := []struct {
		name             string
		affinity, taints *corev1.NodeInclusionPolicy
		selectPool       bool // the pods select the zonal pool's label
		placed           int
	}{
		// The case: a zonal pool beside system nodes in the other zones.
		{"nodeAffinityPolicy Honor (default): nodes the pods cannot select are no domains", nil, nil, true, 5},
		{"nodeAffinityPolicy Ignore: every node's zone is a domain", ignore, nil, true, 1},
		{"nodeTaintsPolicy Ignore (default): tainted nodes are domains", nil, nil, false, 1},
		{"nodeTaintsPolicy Honor: nodes whose taints the pods do not tolerate are no domains", nil, honor, false, 5},
		{"explicit Honor for both", honor, honor, true, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			zonal := poolOf("zonal", 0, bothCapacityTypes(), workload.Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a"))
			zonal.Spec.Template.ObjectMeta.Labels = map[string]string{"tier": "zonal"}
			opts := []podOpt{withLabel("app", "web"), spreadWith(corev1.LabelTopologyZone, 1, "web", func(c *corev1.TopologySpreadConstraint) {
				c.NodeAffinityPolicy, c.NodeTaintsPolicy = tc.affinity, tc.taints
			})}
			if tc.selectPool {
				opts = append(opts, withSelector("tier", "zonal"))
			}
			snap := snapshot(t, pods("web", 5, "1", "1Gi", opts...), zonal)
			for i, z := range []string{"us-east-1b", "us-east-1c"} {
				snap.Nodes = append(snap.Nodes, packer.NodeState{Node: existingNode(t, snap.Catalog, fmt.Sprintf("system-%d", i), "m5.large", z, "on-demand",
					map[string]string{"tier": "system"}, critical)})
			}
			s := solve(t, snap)
			if got := 5 - len(s.plan.Unschedulable); got != tc.placed {
				t.Errorf("placed %d of 5, want %d:%s", got, tc.placed, s.dump())
			}
		})
	}
}

func TestSpreadMinDomains(t *testing.T) {
	cases := []struct {
		name       string
		zones      []string
		minDomains int32
		pods       int
		want       []int // placed pods per zone, largest first
	}{
		{"fewer zones than minDomains: the minimum counts as zero", []string{"us-east-1a", "us-east-1b"}, 3, 3, []int{1, 1}},
		{"as many zones as minDomains", zones, 3, 11, []int{4, 4, 3}},
		{"more zones than minDomains", zones, 2, 11, []int{4, 4, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := poolOf("default", 0, bothCapacityTypes(), workload.Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, tc.zones...))
			ps := pods("web", tc.pods, "1", "1Gi", withLabel("app", "web"), spreadWith(corev1.LabelTopologyZone, 1, "web",
				func(c *corev1.TopologySpreadConstraint) { c.MinDomains = &tc.minDomains }))
			snap := snapshot(t, ps, pool)
			s := solve(t, snap)
			if got := sortedCounts(placedBy(s, snap, corev1.LabelTopologyZone)); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("pods per zone %v, want %v:%s", got, tc.want, s.dump())
			}
		})
	}
}

func TestMatchLabelKeys(t *testing.T) {
	revision := func(r string) podOpt { return withLabel("revision", r) }
	t.Run("spread: each revision spreads on its own", func(t *testing.T) {
		spread := spreadWith(corev1.LabelHostname, 1, "web", func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"revision"} })
		ps := append(pods("a", 2, "100m", "128Mi", withLabel("app", "web"), revision("a"), spread),
			pods("b", 2, "100m", "128Mi", withLabel("app", "web"), revision("b"), spread)...)
		s := solve(t, snapshot(t, ps))
		if len(s.plan.NewNodes) != 2 {
			t.Errorf("want 2 nodes, each with one pod of each revision:%s", s.dump())
		}
	})
	t.Run("spread: a key the pod does not carry is ignored", func(t *testing.T) {
		spread := spreadWith(corev1.LabelHostname, 1, "web", func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"revision"} })
		s := solve(t, snapshot(t, pods("a", 4, "100m", "128Mi", withLabel("app", "web"), spread)))
		if len(s.plan.NewNodes) != 4 {
			t.Errorf("want 4 nodes:%s", s.dump())
		}
	})
	// antiWith is hostname anti-affinity to app=web whose term t changes.
	antiWith := func(change func(t *corev1.PodAffinityTerm)) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			podAntiAffinity(corev1.LabelHostname, "web")(p)
			change(&p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0])
		}
	}
	t.Run("anti-affinity: matchLabelKeys repels only the same revision", func(t *testing.T) {
		anti := antiWith(func(tm *corev1.PodAffinityTerm) { tm.MatchLabelKeys = []string{"revision"} })
		ps := append(pods("a", 2, "100m", "128Mi", withLabel("app", "web"), revision("a"), anti),
			pods("b", 2, "100m", "128Mi", withLabel("app", "web"), revision("b"), anti)...)
		s := solve(t, snapshot(t, ps))
		if len(s.plan.NewNodes) != 2 {
			t.Errorf("want 2 nodes:%s", s.dump())
		}
	})
	t.Run("anti-affinity: mismatchLabelKeys keeps tenants apart", func(t *testing.T) {
		anti := antiWith(func(tm *corev1.PodAffinityTerm) { tm.MismatchLabelKeys = []string{"tenant"} })
		ps := append(pods("a", 3, "100m", "128Mi", withLabel("app", "web"), withLabel("tenant", "a"), anti),
			pods("b", 3, "100m", "128Mi", withLabel("app", "web"), withLabel("tenant", "b"), anti)...)
		s := solve(t, snapshot(t, ps))
		if len(s.plan.NewNodes) != 2 || s.where["default/a-0"] != s.where["default/a-2"] || s.where["default/a-0"] == s.where["default/b-0"] {
			t.Errorf("want one node per tenant:%s", s.dump())
		}
	})
}

func TestTopologyKeysBeyondHostnameAndZone(t *testing.T) {
	ct := karpenter.CapacityTypeLabelKey
	t.Run("spread over capacity types", func(t *testing.T) {
		snap := snapshot(t, pods("web", 4, "1", "1Gi", withLabel("app", "web"), spreadOn(ct, 1, corev1.DoNotSchedule, "web")))
		s := solve(t, snap)
		if got := placedBy(s, snap, ct); got["spot"] != 2 || got["on-demand"] != 2 {
			t.Errorf("pods per capacity type %v, want 2 and 2:%s", got, s.dump())
		}
	})
	t.Run("a running on-demand pod limits a spot-only pool", func(t *testing.T) {
		pool := poolOf("default", 0, workload.Req(ct, corev1.NodeSelectorOpIn, "spot"))
		snap := snapshot(t, pods("web", 5, "1500m", "1Gi", withLabel("app", "web"), spreadOn(ct, 1, corev1.DoNotSchedule, "web")), pool)
		running := pod("running", "1", "128Mi", withLabel("app", "web"))
		snap.Nodes = []packer.NodeState{{Node: existingNode(t, snap.Catalog, "od-1", "m5.large", "us-east-1a", "on-demand", nil), Pods: []*corev1.Pod{running}}}
		s := solve(t, snap)
		if got := placedBy(s, snap, ct); got["spot"] != 2 || len(s.plan.Unschedulable) != 3 {
			t.Errorf("want 2 on spot (on-demand holds 1, maxSkew 1) and 3 unschedulable, got %v:%s", got, s.dump())
		}
	})
	t.Run("node affinity on the key limits the domains", func(t *testing.T) {
		snap := snapshot(t, pods("web", 3, "1", "1Gi", withLabel("app", "web"), spreadOn(ct, 1, corev1.DoNotSchedule, "web"),
			requiredNodeAffinity(nodeTerm(ct, corev1.NodeSelectorOpIn, "spot"))))
		s := solve(t, snap)
		if got := placedBy(s, snap, ct); got["spot"] != 3 {
			t.Errorf("want all 3 on spot, got %v:%s", got, s.dump())
		}
	})
	t.Run("capacity type and zone together", func(t *testing.T) {
		ps := pods("web", 13, "1", "1Gi", withLabel("app", "web"), spreadOn(ct, 1, corev1.DoNotSchedule, "web"),
			spreadOn(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, "web"))
		snap := snapshot(t, ps)
		s := solve(t, snap) // the checker judges both skews
		if len(s.plan.Unschedulable) != 0 {
			t.Errorf("want all placed:%s", s.dump())
		}
		if got := placedBy(s, snap, ct); got["spot"]-got["on-demand"] > 1 || got["on-demand"]-got["spot"] > 1 {
			t.Errorf("capacity types %v", got)
		}
	})
	t.Run("a pool label with tainted nodes of other values", func(t *testing.T) {
		taint := corev1.Taint{Key: "taintname", Value: "taintvalue", Effect: corev1.TaintEffectNoSchedule}
		for _, tc := range []struct {
			taints *corev1.NodeInclusionPolicy
			placed int
		}{{nil, 1}, {policy(corev1.NodeInclusionPolicyHonor), 5}} {
			pool := poolOf("default", 0, bothCapacityTypes())
			pool.Spec.Template.ObjectMeta.Labels = map[string]string{"fake-label": "baz"}
			snap := snapshot(t, pods("web", 5, "1", "1Gi", withLabel("app", "web"), spreadWith("fake-label", 1, "web",
				func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = tc.taints })), pool)
			for _, v := range []string{"foo", "bar"} {
				snap.Nodes = append(snap.Nodes, packer.NodeState{Node: existingNode(t, snap.Catalog, v, "m5.large", "us-east-1a", "on-demand",
					map[string]string{"fake-label": v}, taint)})
			}
			s := solve(t, snap)
			if got := 5 - len(s.plan.Unschedulable); got != tc.placed {
				t.Errorf("nodeTaintsPolicy %v: placed %d, want %d:%s", tc.taints, got, tc.placed, s.dump())
			}
		}
	})
	t.Run("pools sharing a chosen label's values, split by taints", func(t *testing.T) {
		var pools []*karpenter.NodePool
		var ps []*corev1.Pod
		for i, values := range [][]string{{"foo", "bar"}, {"foo", "baz"}} {
			np := poolOf(fmt.Sprintf("pool-%d", i), 0, bothCapacityTypes(), workload.Req("fake-label", corev1.NodeSelectorOpIn, values...))
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "taint-key", Value: np.Name, Effect: corev1.TaintEffectNoSchedule}}
			pools = append(pools, np)
			ps = append(ps, pods(fmt.Sprintf("deploy-%d", i), 2*(i+1), "100m", "128Mi", withLabel("app", "web"),
				spreadWith("fake-label", 1, "web", func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = policy(corev1.NodeInclusionPolicyHonor) }),
				func(p *corev1.Pod) {
					p.Spec.Tolerations = []corev1.Toleration{{Key: "taint-key", Value: np.Name, Effect: corev1.TaintEffectNoSchedule}}
				})...)
		}
		snap := snapshot(t, ps, pools...)
		s := solve(t, snap)
		if got := sortedCounts(placedBy(s, snap, "fake-label")); fmt.Sprint(got) != "[3 2 1]" {
			t.Errorf("pods per value %v, want [3 2 1] (foo both pools, bar and baz one each):%s", got, s.dump())
		}
		for _, n := range s.plan.NewNodes {
			if n.Labels["fake-label"] == "" || !hasRequirement(n, "fake-label", n.Labels["fake-label"]) {
				t.Errorf("node %s: label fake-label=%q not written to its requirements %v", n.Name, n.Labels["fake-label"], n.Requirements)
			}
		}
	})
	t.Run("pod affinity and anti-affinity on arch", func(t *testing.T) {
		spread := spreadOn(corev1.LabelHostname, 1, corev1.DoNotSchedule, "s2")
		first := pod("first", "1", "1Gi", withLabel("app", "s2"), spread, withSelector(corev1.LabelArchStable, "arm64"))
		with := pod("with", "500m", "1Gi", withLabel("app", "s2"), spread, podAffinity(corev1.LabelArchStable, "s2"))
		s := solve(t, snapshot(t, []*corev1.Pod{first, with}))
		if a, b := s.node("first"), s.node("with"); a.Labels[corev1.LabelArchStable] != b.Labels[corev1.LabelArchStable] || a.Name == b.Name {
			t.Errorf("want the same arch on two nodes:%s", s.dump())
		}
		away := pod("away", "500m", "1Gi", withLabel("app", "s2"), spread, podAntiAffinity(corev1.LabelArchStable, "s2"))
		s = solve(t, snapshot(t, []*corev1.Pod{first, away}))
		if a, b := s.node("first"), s.node("away"); a.Labels[corev1.LabelArchStable] == b.Labels[corev1.LabelArchStable] {
			t.Errorf("want different archs:%s", s.dump())
		}
	})
	t.Run("a key no node carries cannot be spread over", func(t *testing.T) {
		ps := []*corev1.Pod{pod("spread", "1", "1Gi", withLabel("app", "web"), spreadOn("unknown", 1, corev1.DoNotSchedule, "web")), pod("plain", "1", "1Gi")}
		s := solve(t, snapshot(t, ps))
		if s.unschedulable("spread") == "" || s.unschedulable("plain") != "" {
			t.Errorf("want spread unschedulable and plain placed:%s", s.dump())
		}
	})
}

func hasRequirement(n packer.NewNode, key, value string) bool {
	for _, r := range n.Requirements {
		if r.Key == key && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 && r.Values[0] == value {
			return true
		}
	}
	return false
}
