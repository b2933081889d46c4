package packertest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// TestSchedulerAgreement holds the engine to what kube-scheduler does with its
// plans where the two once disagreed (TestPlansAgreeWithKubeScheduler found each:
// the scheduler bound pods the plan called unschedulable). Spread counts the
// domains kube-scheduler will see: a zone no pool can launch into any more (its
// limits are used up) has no node there, so it is no domain; at hostname level
// the emptiest node is taken over the nodes the pod's node affinity selects
// (nodeAffinityPolicy Honor), not every node; a label a pool chooses a value for
// does not make a planned node's eligibility uncertain for a pod that does not
// select on it. And the first replica of a group bound to itself by hostname
// pod affinity is seated where the whole group fits.
func TestSchedulerAgreement(t *testing.T) {
	cat := mustCatalog(t, smallTypes())
	xl, _ := cat.Lookup("m5.xlarge")
	large, _ := cat.Lookup("m5.large")
	graviton, _ := cat.Lookup("m6g.large")
	node := func(name string, pool *karpenter.NodePool, it *catalog.InstanceType, zone string) *corev1.Node {
		return workload.ExistingNode(name, pool, it, catalog.Offering{Zone: zone, CapacityType: "on-demand"})
	}
	limited := func(cpu string) *karpenter.NodePool {
		p := poolOf("default", 0, bothCapacityTypes())
		p.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		return p
	}
	running := func(name, app string) *corev1.Pod { return pod(name, "100m", "128Mi", withLabel("app", app)) }

	t.Run("a zone its pool's limits keep empty is no spread domain", func(t *testing.T) {
		pool := limited("8") // the two existing m5.xlarge use it up
		snap := snapshot(t, pods("web", 4, "500m", "512Mi", withLabel("app", "web"), spreadOn(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, "web")), pool)
		snap.Catalog = cat
		snap.Nodes = []packer.NodeState{{Node: node("a", pool, xl, "us-east-1a")}, {Node: node("b", pool, xl, "us-east-1b")}}
		s := solve(t, snap)
		if len(s.plan.Unschedulable) != 0 {
			t.Fatalf("want all 4 over us-east-1a and 1b (1c cannot get a node), got:%s", s.dump())
		}
		zones := map[string]int{}
		for i := 0; i < 4; i++ {
			zones[s.where["default/web-"+string(rune('0'+i))]]++
		}
		if zones["a"] != 2 || zones["b"] != 2 {
			t.Errorf("want 2 on each node, got %v", zones)
		}
	})
	t.Run("hostname spread counts the nodes the pod selects", func(t *testing.T) {
		pool := limited("6") // 4 + 2 existing CPUs: no new node
		// The amd64 node has no matching pod; the arm64 node the pods select has one.
		snap := snapshot(t, pods("arm", 2, "500m", "512Mi", withLabel("app", "e"), withSelector(corev1.LabelArchStable, "arm64"),
			spreadOn(corev1.LabelHostname, 1, corev1.DoNotSchedule, "e")), pool)
		snap.Catalog = cat
		snap.Nodes = []packer.NodeState{{Node: node("x86", pool, xl, "us-east-1a")},
			{Node: node("arm", pool, graviton, "us-east-1a"), Pods: []*corev1.Pod{running("e-running", "e")}}}
		s := solve(t, snap)
		if s.where["default/arm-0"] != "arm" || s.where["default/arm-1"] != "arm" {
			t.Errorf("want both on the only arm64 node (the amd64 node is no domain for them):%s", s.dump())
		}
	})
	t.Run("a label the pool chooses leaves eligibility certain for pods not selecting it", func(t *testing.T) {
		pool := poolOf("default", 0, bothCapacityTypes(), workload.Req("rack", corev1.NodeSelectorOpIn, "r1", "r2"))
		ps := pods("web", 3, "500m", "512Mi", withLabel("app", "web"), withSelector(corev1.LabelTopologyZone, "us-east-1a"),
			spreadOn(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, "web"))
		snap := snapshot(t, ps, pool)
		snap.Catalog = cat
		// A matching pod in 1b: no domain for pods that select 1a (Honor).
		snap.Nodes = []packer.NodeState{{Node: node("b", pool, large, "us-east-1b"), Pods: []*corev1.Pod{running("web-running", "web")}}}
		s := solve(t, snap)
		if len(s.plan.Unschedulable) != 0 {
			t.Fatalf("want all 3 in us-east-1a (its only domain):%s", s.dump())
		}
	})
	t.Run("a self-affinity group is seated whole", func(t *testing.T) {
		pool := poolOf("default", 0, bothCapacityTypes())
		small := node("small", pool, large, "us-east-1a")
		// Room for two replicas on the existing node, not four.
		snap := snapshot(t, pods("db", 4, "100m", "1536Mi", withLabel("app", "db"), podAffinity(corev1.LabelHostname, "db"),
			withSelector(corev1.LabelTopologyZone, "us-east-1a")), pool)
		snap.Catalog = cat
		snap.Nodes = []packer.NodeState{{Node: small, Pods: []*corev1.Pod{pod("other", "100m", "3Gi")}}}
		s := solve(t, snap)
		if len(s.plan.Unschedulable) != 0 {
			t.Fatalf("want the 4 replicas together on a node that holds them:%s", s.dump())
		}
		first := s.where["default/db-0"]
		for i := 1; i < 4; i++ {
			if w := s.where["default/db-"+string(rune('0'+i))]; w != first {
				t.Errorf("db-%d on %s, db-0 on %s", i, w, first)
			}
		}
		if first == "small" {
			t.Errorf("the group was seated on the node that holds two of them:%s", s.dump())
		}
	})
}
