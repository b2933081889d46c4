package packertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// Prices of the small catalog (spot, on-demand).
const (
	m5LargeSpot   = 0.04
	m5XLargeSpot  = 0.08
	m5XLargeOD    = 0.192
	m5LargeOD     = 0.096
	m6gLargeSpot  = 0.03
	g6XLargeSpot  = 0.35
	m52XLargeSpot = 0.16
)

func always() *corev1.ContainerRestartPolicy {
	a := corev1.ContainerRestartPolicyAlways
	return &a
}

func TestRequests(t *testing.T) {
	cases := []struct {
		name string
		pod  *corev1.Pod
		typ  string
		cost float64
	}{
		{"app container alone fits the small type", pod("p", "1800m", "1Gi"), "m5.large", m5LargeSpot},
		{"init container larger than the app needs the big type", pod("p", "100m", "1Gi", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "3")}}}
		}), "m5.xlarge", m5XLargeSpot},
		{"sidecar adds to the app", pod("p", "1200m", "1Gi", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: always(), Resources: corev1.ResourceRequirements{Requests: rl("cpu", "800m")}}}
		}), "m5.xlarge", m5XLargeSpot},
		{"init container after a sidecar runs beside it", pod("p", "100m", "1Gi", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{
				{Name: "proxy", RestartPolicy: always(), Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}},
				{Name: "migrate", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1500m")}},
			}
		}), "m5.xlarge", m5XLargeSpot},
		{"init container before a sidecar does not see it", pod("p", "100m", "1Gi", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{
				{Name: "migrate", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1800m")}},
				{Name: "proxy", RestartPolicy: always(), Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}},
			}
		}), "m5.large", m5LargeSpot},
		{"pod overhead", pod("p", "1800m", "1Gi", func(p *corev1.Pod) { p.Spec.Overhead = rl("cpu", "250m") }), "m5.xlarge", m5XLargeSpot},
		{"limits without requests request the limits", pod("p", "0", "0", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: rl("cpu", "3", "memory", "1Gi")}
		}), "m5.xlarge", m5XLargeSpot},
		{"memory decides", pod("p", "100m", "7Gi"), "m5.xlarge", m5XLargeSpot},
	}
	// amd64 only: m6g.large (arm64) would undercut m5.large.
	amd := poolOf("default", 0, bothCapacityTypes(), workload.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := solve(t, snapshot(t, []*corev1.Pod{tc.pod}, amd))
			s.expectNode("p", "default", tc.typ, "spot", tc.cost)
			if len(s.plan.NewNodes) != 1 || s.plan.TotalPricePerHour != tc.cost {
				t.Errorf("want one node costing %v:%s", tc.cost, s.dump())
			}
		})
	}
}

func TestExtendedResources(t *testing.T) {
	gpu := poolOf("gpu", 0, workload.Req(karpenter.LabelInstanceFamily, corev1.NodeSelectorOpIn, "g6"), bothCapacityTypes())
	gpu.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	cuda := pod("cuda", "0", "0", tolerating("nvidia.com/gpu", corev1.TaintEffectNoSchedule), func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "1", "cpu", "1", "memory", "2Gi")}
	})
	web := pod("web", "1", "1Gi", withSelector(corev1.LabelArchStable, "amd64"))
	s := solve(t, snapshot(t, []*corev1.Pod{cuda, web}, poolOf("default", 0, bothCapacityTypes(),
		workload.Req(karpenter.LabelInstanceFamily, corev1.NodeSelectorOpNotIn, "g6")), gpu))
	n := s.expectNode("cuda", "gpu", "g6.xlarge", "spot", g6XLargeSpot)
	if n.Allocatable["nvidia.com/gpu"] != "1" {
		t.Errorf("g6.xlarge allocatable %v should list nvidia.com/gpu 1", n.Allocatable)
	}
	if len(n.Taints) != 1 || n.Taints[0].Key != "nvidia.com/gpu" {
		t.Errorf("gpu node taints %v", n.Taints)
	}
	s.expectNode("web", "default", "m5.large", "spot", m5LargeSpot)

	t.Run("two gpus fit no type", func(t *testing.T) {
		two := cuda.DeepCopy()
		two.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"] = qty("2")
		s := solve(t, snapshot(t, []*corev1.Pod{two}, gpu))
		if s.unschedulable("cuda") == "" {
			t.Errorf("a pod asking for 2 GPUs fits no type:%s", s.dump())
		}
	})
}

func TestNodeSelection(t *testing.T) {
	pool := poolOf("default", 0, bothCapacityTypes())
	cases := []struct {
		name string
		pod  *corev1.Pod
		typ  string
		zone string
		cost float64
	}{
		{"nodeSelector arch", pod("p", "1", "1Gi", withSelector(corev1.LabelArchStable, "arm64")), "m6g.large", "", m6gLargeSpot},
		{"nodeSelector instance type", pod("p", "1", "1Gi", withSelector(corev1.LabelInstanceTypeStable, "m5.2xlarge")), "m5.2xlarge", "", m52XLargeSpot},
		{"nodeSelector zone", pod("p", "1", "1Gi", withSelector(corev1.LabelTopologyZone, "us-east-1c")), "", "us-east-1c", 0},
		{"required affinity, OR of terms: cheapest term wins", pod("p", "1", "1Gi", requiredNodeAffinity(
			nodeTerm(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge"),
			nodeTerm(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64"))), "m6g.large", "", m6gLargeSpot},
		{"required affinity NotIn", pod("p", "1", "1Gi", requiredNodeAffinity(
			nodeTerm(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpNotIn, "m6g.large", "m5.large"))), "m5.xlarge", "", m5XLargeSpot},
		{"required affinity Gt on a catalog label", pod("p", "1", "1Gi", requiredNodeAffinity(
			nodeTerm(karpenter.LabelInstanceCPU, corev1.NodeSelectorOpGt, "4"))), "m5.2xlarge", "", m52XLargeSpot},
		{"preferred zone kept", pod("p", "1", "1Gi", preferredNodeAffinity(10, nodeTerm(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b"))), "m6g.large", "us-east-1b", m6gLargeSpot},
		{"unsatisfiable preference relaxed", pod("p", "1", "1Gi", preferredNodeAffinity(10, nodeTerm("example.com/tier", corev1.NodeSelectorOpIn, "gold"))), "m6g.large", "", m6gLargeSpot},
		{"preferred on-demand kept although dearer", pod("p", "1", "1Gi", withSelector(corev1.LabelArchStable, "amd64"),
			preferredNodeAffinity(10, nodeTerm(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"))), "m5.large", "", m5LargeOD},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := solve(t, snapshot(t, []*corev1.Pod{tc.pod}, pool))
			n := s.node("p")
			if tc.typ != "" && n.InstanceType != tc.typ {
				t.Errorf("type %s, want %s:%s", n.InstanceType, tc.typ, s.dump())
			}
			if tc.zone != "" && n.Zone != tc.zone {
				t.Errorf("zone %s, want %s:%s", n.Zone, tc.zone, s.dump())
			}
			if tc.cost != 0 && n.PricePerHour != tc.cost {
				t.Errorf("price %v, want %v:%s", n.PricePerHour, tc.cost, s.dump())
			}
		})
	}
	t.Run("selector no pool can meet", func(t *testing.T) {
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", withSelector("team", "data"))}, pool))
		if r := s.unschedulable("p"); r == "" {
			t.Errorf("want unschedulable:%s", s.dump())
		}
	})
	t.Run("selector on a template label", func(t *testing.T) {
		data := poolOf("data", 0, bothCapacityTypes())
		data.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "data"}
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", withSelector("team", "data"))}, pool, data))
		if n := s.node("p"); n.NodePool != "data" || n.Labels["team"] != "data" {
			t.Errorf("want pool data with label team=data:%s", s.dump())
		}
	})
}

func TestTaints(t *testing.T) {
	tainted := func(name string, weight int32, effect corev1.TaintEffect) *karpenter.NodePool {
		np := poolOf(name, weight, bothCapacityTypes())
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: name, Effect: effect}}
		return np
	}
	plain := poolOf("plain", 0, bothCapacityTypes(), workload.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	t.Run("NoSchedule keeps intolerant pods off", func(t *testing.T) {
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, tainted("special", 100, corev1.TaintEffectNoSchedule), plain))
		s.expectNode("p", "plain", "m5.large", "spot", m5LargeSpot)
	})
	t.Run("NoExecute keeps intolerant pods off", func(t *testing.T) {
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", tolerating("dedicated", corev1.TaintEffectNoSchedule))},
			tainted("special", 100, corev1.TaintEffectNoExecute), plain))
		s.expectNode("p", "plain", "m5.large", "spot", m5LargeSpot)
	})
	t.Run("tolerated taint, higher weight wins", func(t *testing.T) {
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", tolerating("dedicated", ""))}, tainted("special", 100, corev1.TaintEffectNoSchedule), plain))
		n := s.expectNode("p", "special", "m6g.large", "spot", m6gLargeSpot)
		if len(n.Taints) != 1 || n.Taints[0].Key != "dedicated" {
			t.Errorf("taints %v", n.Taints)
		}
	})
	t.Run("no pool tolerated", func(t *testing.T) {
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, tainted("special", 0, corev1.TaintEffectNoSchedule)))
		if s.unschedulable("p") == "" {
			t.Errorf("want unschedulable:%s", s.dump())
		}
	})
	t.Run("PreferNoSchedule avoided when possible", func(t *testing.T) {
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, tainted("soft", 100, corev1.TaintEffectPreferNoSchedule), plain))
		s.expectNode("p", "plain", "m5.large", "spot", m5LargeSpot)
	})
	t.Run("PreferNoSchedule used when nothing else", func(t *testing.T) {
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, tainted("soft", 0, corev1.TaintEffectPreferNoSchedule)))
		s.expectNode("p", "soft", "m6g.large", "spot", m6gLargeSpot)
	})
}

func TestTopologySpread(t *testing.T) {
	t.Run("zone, DoNotSchedule", func(t *testing.T) {
		ps := pods("web", 3, "1", "1Gi", withLabel("app", "web"), spreadOn(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, "web"))
		s := solve(t, snapshot(t, ps))
		if got := strings.Join(s.zonesOf("web-0", "web-1", "web-2"), ","); got != strings.Join(zones, ",") {
			t.Errorf("zones %s, want one per zone:%s", got, s.dump())
		}
	})
	t.Run("zone, six pods two per zone", func(t *testing.T) {
		ps := pods("web", 6, "1", "1Gi", withLabel("app", "web"), spreadOn(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, "web"))
		s := solve(t, snapshot(t, ps))
		count := map[string]int{}
		for i := 0; i < 6; i++ {
			count[s.node(fmt.Sprintf("web-%d", i)).Zone]++
		}
		for _, z := range zones {
			if count[z] != 2 {
				t.Errorf("zone counts %v, want 2 each:%s", count, s.dump())
				break
			}
		}
	})
	t.Run("zone spread counts empty launchable zones and running pods", func(t *testing.T) {
		cat := mustCatalog(t, smallTypes())
		it, _ := cat.Lookup("m5.xlarge")
		pool := poolOf("default", 0, bothCapacityTypes())
		node := workload.ExistingNode("node-a", pool, it, catalog.Offering{Zone: "us-east-1a", CapacityType: "on-demand"})
		running := pods("running", 2, "100m", "128Mi", withLabel("app", "web"))
		for _, p := range running {
			p.Spec.NodeName = "node-a"
		}
		ps := pods("web", 2, "1", "1Gi", withLabel("app", "web"), spreadOn(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, "web"))
		snap := snapshot(t, ps, pool)
		snap.Catalog = cat
		snap.Nodes = []packer.NodeState{{Node: node, Pods: running}}
		s := solve(t, snap)
		// zone a already has 2: the new ones go to b and c, not onto node-a's free room.
		if got := strings.Join(s.zonesOf("web-0", "web-1"), ","); got != "us-east-1b,us-east-1c" {
			t.Errorf("zones %s, want us-east-1b,us-east-1c:%s", got, s.dump())
		}
	})
	t.Run("hostname, DoNotSchedule", func(t *testing.T) {
		ps := pods("db", 3, "100m", "128Mi", withLabel("app", "db"), spreadOn(corev1.LabelHostname, 1, corev1.DoNotSchedule, "db"))
		s := solve(t, snapshot(t, ps))
		if len(s.plan.NewNodes) != 3 {
			t.Errorf("want 3 nodes, one pod each:%s", s.dump())
		}
	})
	t.Run("zone, ScheduleAnyway kept when possible", func(t *testing.T) {
		ps := pods("web", 3, "1", "1Gi", withLabel("app", "web"), spreadOn(corev1.LabelTopologyZone, 1, corev1.ScheduleAnyway, "web"))
		s := solve(t, snapshot(t, ps))
		if got := strings.Join(s.zonesOf("web-0", "web-1", "web-2"), ","); got != strings.Join(zones, ",") {
			t.Errorf("zones %s, want one per zone:%s", got, s.dump())
		}
	})
	t.Run("zone, ScheduleAnyway relaxed when a zone is ruled out", func(t *testing.T) {
		ps := pods("web", 3, "1", "1Gi", withLabel("app", "web"), withSelector(corev1.LabelTopologyZone, "us-east-1a"),
			spreadOn(corev1.LabelTopologyZone, 1, corev1.ScheduleAnyway, "web"))
		s := solve(t, snapshot(t, ps))
		for _, p := range []string{"web-0", "web-1", "web-2"} {
			if s.node(p).Zone != "us-east-1a" {
				t.Errorf("%s not in us-east-1a:%s", p, s.dump())
			}
		}
	})
}

func TestPodAffinity(t *testing.T) {
	t.Run("zone affinity follows its target", func(t *testing.T) {
		ps := []*corev1.Pod{
			pod("db", "1", "1Gi", withLabel("app", "db"), withSelector(corev1.LabelTopologyZone, "us-east-1b")),
			pod("api", "1", "1Gi", podAffinity(corev1.LabelTopologyZone, "db")),
		}
		s := solve(t, snapshot(t, ps))
		if z := s.node("api").Zone; z != "us-east-1b" {
			t.Errorf("api in %s, want us-east-1b with db:%s", z, s.dump())
		}
	})
	t.Run("hostname affinity shares the node", func(t *testing.T) {
		ps := []*corev1.Pod{
			pod("db", "500m", "1Gi", withLabel("app", "db")),
			pod("sidecar", "500m", "1Gi", podAffinity(corev1.LabelHostname, "db")),
		}
		s := solve(t, snapshot(t, ps))
		if s.where["default/db"] != s.where["default/sidecar"] || len(s.plan.NewNodes) != 1 {
			t.Errorf("want db and sidecar on one node:%s", s.dump())
		}
	})
	t.Run("self affinity on zone keeps the group together", func(t *testing.T) {
		ps := pods("cache", 6, "1500m", "1Gi", withLabel("app", "cache"), podAffinity(corev1.LabelTopologyZone, "cache"))
		s := solve(t, snapshot(t, ps))
		z := s.node("cache-0").Zone
		for i := 1; i < 6; i++ {
			if s.node(fmt.Sprintf("cache-%d", i)).Zone != z {
				t.Errorf("cache group split over zones:%s", s.dump())
				break
			}
		}
	})
	t.Run("affinity to a pod running on an existing node", func(t *testing.T) {
		cat := mustCatalog(t, smallTypes())
		it, _ := cat.Lookup("m5.xlarge")
		pool := poolOf("default", 0, bothCapacityTypes())
		node := workload.ExistingNode("node-c", pool, it, catalog.Offering{Zone: "us-east-1c", CapacityType: "on-demand"})
		db := pod("db", "3500m", "1Gi", withLabel("app", "db"))
		db.Spec.NodeName = "node-c"
		snap := snapshot(t, []*corev1.Pod{pod("api", "1", "1Gi", podAffinity(corev1.LabelTopologyZone, "db"))}, pool)
		snap.Catalog = cat
		snap.Nodes = []packer.NodeState{{Node: node, Pods: []*corev1.Pod{db}}}
		s := solve(t, snap)
		if z := s.node("api").Zone; z != "us-east-1c" {
			t.Errorf("api in %s, want us-east-1c:%s", z, s.dump())
		}
	})
	t.Run("hostname anti-affinity, one per node", func(t *testing.T) {
		ps := pods("db", 3, "100m", "128Mi", withLabel("app", "db"), podAntiAffinity(corev1.LabelHostname, "db"))
		s := solve(t, snapshot(t, ps))
		if len(s.plan.NewNodes) != 3 {
			t.Errorf("want 3 nodes:%s", s.dump())
		}
		for _, n := range s.plan.NewNodes {
			if n.InstanceType != "m6g.large" || n.CapacityType != "spot" {
				t.Errorf("want the cheapest type for each:%s", s.dump())
				break
			}
		}
	})
	t.Run("zone anti-affinity: three zones, fourth pod unschedulable", func(t *testing.T) {
		ps := pods("db", 4, "100m", "128Mi", withLabel("app", "db"), podAntiAffinity(corev1.LabelTopologyZone, "db"))
		s := solve(t, snapshot(t, ps))
		if len(s.plan.Unschedulable) != 1 || len(s.plan.NewNodes) != 3 {
			t.Errorf("want 3 nodes in 3 zones and 1 unschedulable:%s", s.dump())
		}
	})
	t.Run("anti-affinity of a running pod keeps newcomers away", func(t *testing.T) {
		cat := mustCatalog(t, smallTypes())
		it, _ := cat.Lookup("m5.2xlarge")
		pool := poolOf("default", 0, bothCapacityTypes())
		node := workload.ExistingNode("node-a", pool, it, catalog.Offering{Zone: "us-east-1a", CapacityType: "on-demand"})
		loner := pod("loner", "100m", "128Mi", withLabel("app", "loner"), podAntiAffinity(corev1.LabelHostname, "web"))
		loner.Spec.NodeName = "node-a"
		snap := snapshot(t, []*corev1.Pod{pod("web", "100m", "128Mi", withLabel("app", "web"))}, pool)
		snap.Catalog = cat
		snap.Nodes = []packer.NodeState{{Node: node, Pods: []*corev1.Pod{loner}}}
		s := solve(t, snap)
		if s.where["default/web"] == "node-a" {
			t.Errorf("web placed next to a pod that repels it:%s", s.dump())
		}
	})
}

func TestHostPorts(t *testing.T) {
	ps := pods("agent", 2, "100m", "128Mi", hostPort(9100))
	ps = append(ps, pod("other", "100m", "128Mi", hostPort(9200)))
	s := solve(t, snapshot(t, ps))
	if s.where["default/agent-0"] == s.where["default/agent-1"] {
		t.Errorf("two pods with host port 9100 share a node:%s", s.dump())
	}
	if len(s.plan.NewNodes) != 2 {
		t.Errorf("want 2 nodes (the 9200 pod shares one):%s", s.dump())
	}
}

func TestDaemonSetOverhead(t *testing.T) {
	gpuOnly := daemonSet("gpu-plugin", "1", "1Gi", withSelector("gpu", "true"))
	everywhere := daemonSet("logger", "200m", "128Mi", tolerating("", ""))
	t.Run("a DaemonSet that does not land is not counted", func(t *testing.T) {
		snap := snapshot(t, []*corev1.Pod{pod("p", "1800m", "1Gi", withSelector(corev1.LabelArchStable, "amd64"))})
		snap.DaemonSets = append(snap.DaemonSets, gpuOnly)
		solve(t, snap).expectNode("p", "default", "m5.large", "spot", m5LargeSpot)
	})
	t.Run("a DaemonSet that lands is counted", func(t *testing.T) {
		snap := snapshot(t, []*corev1.Pod{pod("p", "1800m", "1Gi", withSelector(corev1.LabelArchStable, "amd64"))})
		snap.DaemonSets = append(snap.DaemonSets, gpuOnly, everywhere)
		solve(t, snap).expectNode("p", "default", "m5.xlarge", "spot", m5XLargeSpot)
	})
	t.Run("a DaemonSet kept off by a taint is not counted", func(t *testing.T) {
		np := poolOf("default", 0, bothCapacityTypes(), workload.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "team", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
		snap := snapshot(t, []*corev1.Pod{pod("p", "1800m", "1Gi", tolerating("team", corev1.TaintEffectNoSchedule))}, np)
		snap.DaemonSets = append(snap.DaemonSets, daemonSet("picky", "200m", "128Mi"))
		solve(t, snap).expectNode("p", "default", "m5.large", "spot", m5LargeSpot)
	})
}

func TestPoolLimits(t *testing.T) {
	t.Run("a smaller type that fits is tried before giving up", func(t *testing.T) {
		// c5.xlarge is cheaper than m5.large but has 4 vCPUs: over the 2-CPU limit.
		types := append(smallTypes(), catalog.InstanceType{Name: "c5.xlarge", Arch: "amd64", VCPU: 4, MemoryMiB: 8192, MaxPods: 58, Offerings: offers(0.17, 0.035)})
		np := poolOf("default", 0, bothCapacityTypes(), workload.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
		np.Spec.Limits = rl("cpu", "2")
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, np)
		snap.Catalog = mustCatalog(t, types)
		solve(t, snap).expectNode("p", "default", "m5.large", "spot", m5LargeSpot)
		// Without the limit the cheaper c5.xlarge wins: the limit is what changed the choice.
		np.Spec.Limits = nil
		solve(t, snap).expectNode("p", "default", "c5.xlarge", "spot", 0.035)
	})
	t.Run("what the pool already runs counts", func(t *testing.T) {
		cat := mustCatalog(t, smallTypes())
		it, _ := cat.Lookup("m5.xlarge")
		np := poolOf("default", 0, bothCapacityTypes(), workload.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
		np.Spec.Limits = rl("cpu", "6")
		other := poolOf("overflow", 0, bothCapacityTypes(), workload.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
		full := workload.ExistingNode("node-a", np, it, catalog.Offering{Zone: "us-east-1a", CapacityType: "on-demand"})
		busy := pod("busy", "3800m", "1Gi")
		busy.Spec.NodeName = "node-a"
		snap := snapshot(t, pods("p", 2, "1500m", "1Gi"), np, other)
		snap.Catalog = cat
		snap.Nodes = []packer.NodeState{{Node: full, Pods: []*corev1.Pod{busy}}}
		s := solve(t, snap)
		// 4 running + 2 left: one m5.large (2 CPU) in default, the other pod elsewhere.
		inDefault := 0
		for _, n := range s.plan.NewNodes {
			if n.NodePool == "default" {
				inDefault++
			}
		}
		if inDefault != 1 || len(s.plan.Unschedulable) != 0 {
			t.Errorf("want one node in default and the rest in overflow:%s", s.dump())
		}
	})
	t.Run("node-count limit", func(t *testing.T) {
		np := poolOf("default", 0, bothCapacityTypes())
		np.Spec.Limits = rl("nodes", "2")
		s := solve(t, snapshot(t, pods("db", 3, "100m", "128Mi", withLabel("app", "db"), podAntiAffinity(corev1.LabelHostname, "db")), np))
		if len(s.plan.NewNodes) != 2 || len(s.plan.Unschedulable) != 1 {
			t.Errorf("want 2 nodes and 1 unschedulable:%s", s.dump())
		}
	})
	t.Run("options are cut to what the limit leaves", func(t *testing.T) {
		np := poolOf("default", 0, bothCapacityTypes(), workload.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
		np.Spec.Limits = rl("cpu", "6")
		n := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1800m", "1Gi")}, np)).expectNode("p", "default", "m5.large", "spot", m5LargeSpot)
		// m5.large (2) + the largest fallback must stay within 6: m5.xlarge and
		// g6.xlarge (4) may stay, m5.2xlarge (8) may not.
		if slices.Contains(n.Options, "m5.2xlarge") || !slices.Contains(n.Options, "m5.xlarge") {
			t.Errorf("options %v, want m5.xlarge kept and m5.2xlarge cut", n.Options)
		}
	})
	t.Run("nodes share what the limit leaves for fallbacks", func(t *testing.T) {
		np := poolOf("default", 0, workload.Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"),
			workload.Req(karpenter.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5"))
		np.Spec.Limits = rl("cpu", "7")
		s := solve(t, snapshot(t, pods("db", 2, "1800m", "1Gi", withLabel("app", "db"), podAntiAffinity(corev1.LabelHostname, "db")), np))
		var got [][]string
		for _, n := range s.plan.NewNodes {
			got = append(got, n.Options)
		}
		// 2 + 2 planned; the first may fall back to 4 (2 more), the second no further.
		if fmt.Sprint(got) != "[[m5.large m5.xlarge] [m5.large]]" {
			t.Errorf("options %v, want [[m5.large m5.xlarge] [m5.large]]:%s", got, s.dump())
		}
	})
	t.Run("an in-flight claim of known capacity counts", func(t *testing.T) {
		np := poolOf("default", 0, bothCapacityTypes())
		np.Spec.Limits = rl("cpu", "20")
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, np)
		claim := &karpenter.NodeClaim{}
		claim.Name, claim.Labels = "big", map[string]string{karpenter.NodePoolLabelKey: "default"}
		claim.Status.Capacity = rl("cpu", "100")
		snap.InFlight = []*karpenter.NodeClaim{claim}
		if s := solve(t, snap); s.unschedulable("p") == "" {
			t.Errorf("want p unschedulable: the claim's 100 CPUs exceed the limit:%s", s.dump())
		}
	})
	t.Run("a pods limit below every type's pod capacity", func(t *testing.T) {
		np := poolOf("default", 0, bothCapacityTypes())
		np.Spec.Limits = rl("pods", "1")
		if s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, np)); s.unschedulable("p") == "" {
			t.Errorf("want p unschedulable:%s", s.dump())
		}
	})
	t.Run("gpu limit", func(t *testing.T) {
		np := poolOf("gpu", 0, bothCapacityTypes(), workload.Req(karpenter.LabelInstanceFamily, corev1.NodeSelectorOpIn, "g6"))
		np.Spec.Limits = rl("nvidia.com/gpu", "1")
		ps := pods("cuda", 2, "1", "1Gi", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("nvidia.com/gpu", "1") })
		s := solve(t, snapshot(t, ps, np))
		if len(s.plan.NewNodes) != 1 || len(s.plan.Unschedulable) != 1 {
			t.Errorf("want 1 gpu node and 1 unschedulable:%s", s.dump())
		}
	})
}

func TestWeightsCapacityTypesZones(t *testing.T) {
	t.Run("higher weight first, even when dearer", func(t *testing.T) {
		high := poolOf("high", 100, workload.Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"),
			workload.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
		low := poolOf("low", 10, bothCapacityTypes())
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, low, high))
		s.expectNode("p", "high", "m5.large", "on-demand", m5LargeOD)
	})
	t.Run("spot before on-demand", func(t *testing.T) {
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", withSelector(corev1.LabelArchStable, "amd64"))}))
		s.expectNode("p", "default", "m5.large", "spot", m5LargeSpot)
	})
	t.Run("on-demand when spot is unavailable", func(t *testing.T) {
		types := smallTypes()
		for i := range types {
			for j := range types[i].Offerings {
				if types[i].Offerings[j].CapacityType == "spot" {
					types[i].Offerings[j].Available = false
				}
			}
		}
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", withSelector(corev1.LabelArchStable, "amd64"))})
		snap.Catalog = mustCatalog(t, types)
		solve(t, snap).expectNode("p", "default", "m5.large", "on-demand", m5LargeOD)
	})
	t.Run("pool allows on-demand only", func(t *testing.T) {
		np := poolOf("od", 0, workload.Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"),
			workload.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
		solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, np)).expectNode("p", "od", "m5.large", "on-demand", m5LargeOD)
	})
	t.Run("zone where spot is unavailable is skipped for spot", func(t *testing.T) {
		types := smallTypes()
		for j := range types[0].Offerings {
			if o := &types[0].Offerings[j]; o.CapacityType == "spot" && o.Zone != "us-east-1c" {
				o.Available = false
			}
		}
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", withSelector(corev1.LabelInstanceTypeStable, "m5.large"))})
		snap.Catalog = mustCatalog(t, types)
		n := solve(t, snap).expectNode("p", "default", "m5.large", "spot", m5LargeSpot)
		if n.Zone != "us-east-1c" {
			t.Errorf("zone %s, want the only zone with spot, us-east-1c", n.Zone)
		}
	})
	t.Run("pool zone requirement", func(t *testing.T) {
		np := poolOf("default", 0, bothCapacityTypes(), workload.Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b"))
		n := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, np)).node("p")
		if n.Zone != "us-east-1b" || n.Labels[corev1.LabelTopologyZone] != "us-east-1b" {
			t.Errorf("zone %s / label %s, want us-east-1b", n.Zone, n.Labels[corev1.LabelTopologyZone])
		}
	})
	t.Run("options cheapest first and all fitting", func(t *testing.T) {
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1800m", "1Gi", withSelector(corev1.LabelArchStable, "amd64"))}))
		n := s.node("p")
		if len(n.Options) < 2 || n.Options[0] != "m5.large" || n.Options[1] != "m5.xlarge" {
			t.Errorf("options %v, want m5.large, m5.xlarge, ...", n.Options)
		}
	})
}

func TestExistingCapacityFirst(t *testing.T) {
	cat := mustCatalog(t, smallTypes())
	it, _ := cat.Lookup("m5.xlarge")
	pool := poolOf("default", 0, bothCapacityTypes())
	node := workload.ExistingNode("node-a", pool, it, catalog.Offering{Zone: "us-east-1a", CapacityType: "on-demand"})
	small, _ := cat.Lookup("m5.large")
	claim := &karpenter.NodeClaim{}
	claim.Name = "default-claim"
	claim.Labels = map[string]string{karpenter.NodePoolLabelKey: "default"}
	claim.Spec.Requirements = []karpenter.NodeSelectorRequirementWithMinValues{
		workload.Req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, small.Name),
		workload.Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b"),
		workload.Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"),
	}
	snap := snapshot(t, []*corev1.Pod{pod("a", "3", "1Gi"), pod("b", "1500m", "1Gi")}, pool)
	snap.Catalog = cat
	snap.Nodes = []packer.NodeState{{Node: node}}
	snap.InFlight = []*karpenter.NodeClaim{claim}
	s := solve(t, snap)
	if len(s.plan.NewNodes) != 0 || s.where["default/a"] != "node-a" || s.where["default/b"] != "default-claim" {
		t.Errorf("want a on node-a and b on the in-flight claim, no new node:%s", s.dump())
	}
	if s.plan.TotalPricePerHour != 0 {
		t.Errorf("total %v, want 0", s.plan.TotalPricePerHour)
	}
}

// TestInFlightClaimLabelsWinOverRequirements: a launched NodeClaim is seen
// with the offering its labels record. One whose requirements still say spot
// (written before the fallback set went into them) but which fell back to
// on-demand takes a pod that asks for on-demand, and one launched in another
// of its allowed zones counts there for a zone spread.
func TestInFlightClaimLabelsWinOverRequirements(t *testing.T) {
	cat := mustCatalog(t, smallTypes())
	claim := func(name, zone, ct string, reqZones ...string) *karpenter.NodeClaim {
		c := &karpenter.NodeClaim{}
		c.Name = name
		c.Labels = map[string]string{karpenter.NodePoolLabelKey: "default", corev1.LabelInstanceTypeStable: "m5.xlarge",
			corev1.LabelTopologyZone: zone, karpenter.CapacityTypeLabelKey: ct}
		c.Spec.Requirements = []karpenter.NodeSelectorRequirementWithMinValues{
			workload.Req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge"),
			workload.Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, reqZones...),
			workload.Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"),
		}
		return c
	}
	snap := snapshot(t, []*corev1.Pod{pod("od", "1", "1Gi", withSelector(karpenter.CapacityTypeLabelKey, "on-demand")),
		pod("in-b", "1", "1Gi", withSelector(corev1.LabelTopologyZone, "us-east-1b"))})
	snap.Catalog = cat
	snap.InFlight = []*karpenter.NodeClaim{claim("fell-back", "us-east-1a", "on-demand", "us-east-1a"),
		claim("moved", "us-east-1b", "spot", "us-east-1a", "us-east-1b")}
	s := solve(t, snap)
	if s.where["default/od"] != "fell-back" || s.where["default/in-b"] != "moved" || len(s.plan.NewNodes) != 0 {
		t.Errorf("want od on fell-back (launched on-demand) and in-b on moved (launched in us-east-1b), no new node:%s", s.dump())
	}
}

func TestUnschedulableHasReason(t *testing.T) {
	s := solve(t, snapshot(t, []*corev1.Pod{pod("huge", "1000", "1Gi"), pod("ok", "1", "1Gi")}))
	if r := s.unschedulable("huge"); r == "" {
		t.Errorf("want huge unschedulable with a reason:%s", s.dump())
	}
	s.node("ok")
}

// The reason names what actually turned the pod away, recorded where the check
// failed: not the first required term the pod owns when another one blocked.
func TestUnschedulableNamesTheBlockingTerm(t *testing.T) {
	zone := corev1.LabelTopologyZone
	t.Run("second term", func(t *testing.T) {
		// Spreading one pod never blocks; affinity to pods that do not exist does.
		s := solve(t, snapshot(t, []*corev1.Pod{pod("lonely", "1", "1Gi",
			withLabel("app", "lonely"), spreadOn(zone, 1, corev1.DoNotSchedule, "lonely"), podAffinity(zone, "ghost"))}))
		r := s.unschedulable("lonely")
		if !strings.Contains(r, `cannot satisfy pod affinity on zone for pods matching "app=ghost"`) || strings.Contains(r, "spread") {
			t.Errorf("reason %q, want the affinity to app=ghost named, not the spread:%s", r, s.dump())
		}
	})
	t.Run("second term, on a key no node carries", func(t *testing.T) {
		s := solve(t, snapshot(t, []*corev1.Pod{pod("spread", "1", "1Gi",
			withLabel("app", "web"), spreadOn(zone, 1, corev1.DoNotSchedule, "web"), spreadOn("unknown", 1, corev1.DoNotSchedule, "web"))}))
		if r := s.unschedulable("spread"); !strings.Contains(r, "cannot satisfy topology spread on unknown") {
			t.Errorf("reason %q, want the spread on unknown named:%s", r, s.dump())
		}
	})
	t.Run("second term, on a value the pool may take", func(t *testing.T) {
		// On-demand holds one pod and the pool launches only spot: past two on
		// spot, the capacity-type spread blocks, the zone spread never does.
		ct := karpenter.CapacityTypeLabelKey
		snap := snapshot(t, pods("web", 5, "1500m", "1Gi", withLabel("app", "web"),
			spreadOn(zone, 1, corev1.DoNotSchedule, "web"), spreadOn(ct, 1, corev1.DoNotSchedule, "web")),
			poolOf("default", 0, workload.Req(ct, corev1.NodeSelectorOpIn, "spot")))
		snap.Nodes = []packer.NodeState{{Node: existingNode(t, snap.Catalog, "od-1", "m5.large", "us-east-1a", "on-demand", nil),
			Pods: []*corev1.Pod{pod("running", "1", "128Mi", withLabel("app", "web"))}}}
		s := solve(t, snap)
		if len(s.plan.Unschedulable) == 0 {
			t.Fatalf("want pods left unschedulable:%s", s.dump())
		}
		for _, u := range s.plan.Unschedulable {
			if !strings.Contains(u.Reason, "cannot satisfy topology spread on "+ct) {
				t.Errorf("%s: reason %q, want the capacity-type spread named:%s", u.Pod, u.Reason, s.dump())
			}
		}
	})
	t.Run("host port", func(t *testing.T) {
		snap := snapshot(t, []*corev1.Pod{pod("web", "1", "1Gi",
			withLabel("app", "web"), spreadOn(zone, 1, corev1.DoNotSchedule, "web"), hostPort(8080))})
		snap.DaemonSets = append(snap.DaemonSets, daemonSet("proxy", "100m", "64Mi", hostPort(8080)))
		s := solve(t, snap)
		if r := s.unschedulable("web"); !strings.Contains(r, "its host ports are taken") {
			t.Errorf("reason %q, want its host ports named:%s", r, s.dump())
		}
	})
}

func TestDeterminism(t *testing.T) {
	cat, _, err := workload.BenchCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		snap func() *packer.Snapshot
	}{
		{"karpenter 1000", func() *packer.Snapshot { return workload.KarpenterSnapshot(1000, cat) }},
		{"preferences 400", func() *packer.Snapshot { return workload.PreferenceSnapshot(400, cat) }},
		{"random 11", func() *packer.Snapshot { return workload.Random(11, 300) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := tc.snap()
			before, _ := json.Marshal(snap.Pods)
			a := planJSON(t, packer.Solve(snap, packer.Options{}))
			b := planJSON(t, packer.Solve(snap, packer.Options{}))
			c := planJSON(t, packer.Solve(tc.snap(), packer.Options{}))
			if !bytes.Equal(a, b) || !bytes.Equal(a, c) {
				t.Errorf("same input, different plans (%d, %d, %d bytes)", len(a), len(b), len(c))
			}
			after, _ := json.Marshal(snap.Pods)
			if !bytes.Equal(before, after) {
				t.Errorf("Solve modified the snapshot's pods")
			}
		})
	}
}

// The preferences workload: what can be kept is kept, what cannot is relaxed, and
// nothing is left unscheduled.
func TestPreferenceWorkload(t *testing.T) {
	cat, _, err := workload.BenchCatalog()
	if err != nil {
		t.Fatal(err)
	}
	snap := workload.PreferenceSnapshot(400, cat)
	s := solve(t, snap)
	if len(s.plan.Unschedulable) != 0 {
		t.Fatalf("preferences must never leave a pod unschedulable:%s", s.dump())
	}
	zoneOf := map[string]string{}
	for _, n := range s.plan.NewNodes {
		for _, p := range n.Pods {
			zoneOf[p] = n.Zone
		}
	}
	count := map[string]map[string]int{}
	for _, p := range snap.Pods {
		app := p.Labels["app"]
		if count[app] == nil {
			count[app] = map[string]int{}
		}
		count[app][zoneOf["default/"+p.Name]]++
	}
	if c := count[workload.PrefZone]; c["us-east-1a"] != 100 {
		t.Errorf("%s pods by zone %v: all 100 should keep their us-east-1a preference", workload.PrefZone, c)
	}
	if c := count[workload.PrefImpossible]; c["us-east-1b"] != 100 {
		t.Errorf("%s pods by zone %v: the impossible preference relaxed, the us-east-1b one kept", workload.PrefImpossible, c)
	}
	c := count[workload.PrefSpread]
	lo, hi := 1<<30, 0
	for _, z := range zones {
		lo, hi = min(lo, c[z]), max(hi, c[z])
	}
	if hi-lo > 1 {
		t.Errorf("%s pods by zone %v: the ScheduleAnyway spread (maxSkew 1) can be kept", workload.PrefSpread, c)
	}
}

// DaemonSet host ports, as Karpenter's provisioning tests ("should account for
// daemonset hostports") assert them: a type a DaemonSet binding the pod's host
// port lands on cannot take the pod.
func TestDaemonSetHostPorts(t *testing.T) {
	amd := poolOf("default", 0, bothCapacityTypes(), workload.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
	agent := func(sel podOpt) *appsv1.DaemonSet {
		return daemonSet("agent", "100m", "128Mi", hostPort(8080), tolerating("", ""), sel)
	}
	t.Run("a DaemonSet on every node holds the port: unschedulable, no node", func(t *testing.T) {
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", hostPort(8080))}, amd)
		snap.DaemonSets = []*appsv1.DaemonSet{agent(func(*corev1.Pod) {})}
		s := solve(t, snap)
		if s.unschedulable("p") == "" || len(s.plan.NewNodes) != 0 {
			t.Errorf("want p unschedulable and no node:%s", s.dump())
		}
	})
	t.Run("a DaemonSet on some types only: the pod takes another, and the options leave those out", func(t *testing.T) {
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", hostPort(8080))}, amd)
		snap.DaemonSets = []*appsv1.DaemonSet{agent(withSelector(corev1.LabelInstanceTypeStable, "m5.large"))}
		s := solve(t, snap)
		n := s.expectNode("p", "default", "m5.xlarge", "spot", m5XLargeSpot)
		if slices.Contains(n.Options, "m5.large") {
			t.Errorf("options %v include m5.large, where the agent binds 8080", n.Options)
		}
	})
	t.Run("an existing node the DaemonSet will reach is no place for the pod", func(t *testing.T) {
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", hostPort(8080))}, amd)
		it, _ := snap.Catalog.Lookup("m5.2xlarge")
		snap.Nodes = []packer.NodeState{{Node: workload.ExistingNode("node-a", amd, it, catalog.Offering{Zone: "us-east-1a", CapacityType: "on-demand"})}}
		snap.DaemonSets = []*appsv1.DaemonSet{agent(withSelector(corev1.LabelInstanceTypeStable, "m5.2xlarge"))}
		s := solve(t, snap)
		if s.where["default/p"] == "node-a" {
			t.Errorf("p placed where the agent will bind its port:%s", s.dump())
		}
	})
	t.Run("other ports do not clash", func(t *testing.T) {
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", hostPort(9090))}, amd)
		snap.DaemonSets = []*appsv1.DaemonSet{agent(func(*corev1.Pod) {})}
		solve(t, snap).expectNode("p", "default", "m5.large", "spot", m5LargeSpot)
	})
}

// minValues as Karpenter's instance_selection_test.go ("MinValues") and its
// Strict policy (the default) assert it.
func TestMinValuesStrict(t *testing.T) {
	minValues := func(n int, r karpenter.NodeSelectorRequirementWithMinValues) karpenter.NodeSelectorRequirementWithMinValues {
		r.MinValues = &n
		return r
	}
	spot := workload.Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot")
	t.Run("pods split over more nodes to keep two types among each node's options", func(t *testing.T) {
		np := poolOf("default", 0, spot, minValues(2, workload.Req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large", "m5.xlarge")))
		// Together they fit only m5.xlarge, one type: apart, each node may be either.
		s := solve(t, snapshot(t, pods("p", 2, "1", "1Gi"), np))
		if len(s.plan.NewNodes) != 2 || len(s.plan.Unschedulable) != 0 {
			t.Fatalf("want 2 nodes:%s", s.dump())
		}
		for _, n := range s.plan.NewNodes {
			if len(n.Options) < 2 {
				t.Errorf("node %s options %v: want 2 types", n.Name, n.Options)
			}
		}
	})
	t.Run("more values than the pool has: unschedulable", func(t *testing.T) {
		np := poolOf("default", 0, spot, minValues(6, workload.Req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpExists)))
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, np))
		if r := s.unschedulable("p"); !strings.Contains(r, "minValues") {
			t.Errorf("want p unschedulable naming minValues, got %q:%s", r, s.dump())
		}
	})
	t.Run("met before truncation, not after: unschedulable", func(t *testing.T) {
		np := poolOf("default", 0, spot, minValues(2, workload.Req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large", "m5.xlarge")))
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, np)
		plan := packer.Solve(snap, packer.Options{MaxOptions: 1})
		if len(plan.NewNodes) != 0 || len(plan.Unschedulable) != 1 {
			t.Errorf("with one option kept, minValues 2 cannot hold: want p unschedulable, got %+v", plan)
		}
	})
	t.Run("every requirement with minValues holds", func(t *testing.T) {
		np := poolOf("default", 0, spot, minValues(2, workload.Req(karpenter.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5", "m6g")),
			minValues(3, workload.Req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpExists)))
		n := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, np)).node("p")
		if len(n.Options) < 3 || !slices.Contains(n.Options, "m6g.large") {
			t.Errorf("options %v: want 3 types of 2 families", n.Options)
		}
	})
	t.Run("a pool's limits count: options that would break them do not help", func(t *testing.T) {
		np := poolOf("default", 0, spot, minValues(2, workload.Req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large", "m5.xlarge")))
		np.Spec.Limits = rl("cpu", "2")
		if s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, np)); s.unschedulable("p") == "" {
			t.Errorf("want p unschedulable: within 2 CPUs only m5.large remains:%s", s.dump())
		}
	})
	t.Run("zone minValues is not enforced (one zone per node), and --explain says so", func(t *testing.T) {
		np := poolOf("default", 0, spot, minValues(3, workload.Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...)))
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi")}, np)
		plan := packer.Solve(snap, packer.Options{Explain: true})
		if len(plan.NewNodes) != 1 || !strings.Contains(plan.NewNodes[0].Explain, "not enforced") {
			t.Errorf("want one node whose explanation says zone minValues is not enforced, got %+v", plan)
		}
	})
}
