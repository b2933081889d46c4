package packertest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// Deprecated label keys mean their stable keys wherever node selection is read, as
// Karpenter's requirements normalise them (sigs.k8s.io/karpenter pkg/scheduling:
// "should normalize labels", "should normalize aliased labels"). Nodes carry both
// spellings, so the plan must match what the scheduler does with either.
func TestDeprecatedLabelKeys(t *testing.T) {
	const (
		betaZone = corev1.LabelFailureDomainBetaZone
		betaArch = "beta.kubernetes.io/arch"
		betaType = corev1.LabelInstanceType
	)
	cases := []struct {
		name string
		pod  *corev1.Pod
		pool *karpenter.NodePool
		typ  string
		zone string
	}{
		{"nodeSelector failure-domain zone", pod("p", "1", "1Gi", withSelector(betaZone, "us-east-1c")), nil, "", "us-east-1c"},
		{"nodeSelector beta arch", pod("p", "1", "1Gi", withSelector(betaArch, "amd64")), nil, "m5.large", ""},
		{"required affinity beta instance type", pod("p", "1", "1Gi",
			requiredNodeAffinity(nodeTerm(betaType, corev1.NodeSelectorOpIn, "m5.2xlarge"))), nil, "m5.2xlarge", ""},
		{"required affinity NotIn beta arch", pod("p", "1", "1Gi",
			requiredNodeAffinity(nodeTerm(betaArch, corev1.NodeSelectorOpNotIn, "arm64"))), nil, "m5.large", ""},
		{"preferred failure-domain zone kept", pod("p", "1", "1Gi",
			preferredNodeAffinity(10, nodeTerm(betaZone, corev1.NodeSelectorOpIn, "us-east-1b"))), nil, "", "us-east-1b"},
		{"pool requirement on beta arch", pod("p", "1", "1Gi"),
			poolOf("default", 0, bothCapacityTypes(), workload.Req(betaArch, corev1.NodeSelectorOpIn, "amd64")), "m5.large", ""},
		{"pool requirement on failure-domain zone meets a stable selector", pod("p", "1", "1Gi", withSelector(corev1.LabelTopologyZone, "us-east-1b")),
			poolOf("default", 0, bothCapacityTypes(), workload.Req(betaZone, corev1.NodeSelectorOpIn, "us-east-1b")), "", "us-east-1b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pools []*karpenter.NodePool
			if tc.pool != nil {
				pools = append(pools, tc.pool)
			}
			s := solve(t, snapshot(t, []*corev1.Pod{tc.pod}, pools...))
			n := s.node("p")
			if tc.typ != "" && n.InstanceType != tc.typ {
				t.Errorf("type %s, want %s:%s", n.InstanceType, tc.typ, s.dump())
			}
			if tc.zone != "" && n.Zone != tc.zone {
				t.Errorf("zone %s, want %s:%s", n.Zone, tc.zone, s.dump())
			}
			for _, r := range n.Requirements {
				if _, deprecated := karpenter.DeprecatedLabels[r.Key]; deprecated {
					t.Errorf("NodeClaim requirement %s keeps the deprecated key", r.Key)
				}
			}
		})
	}
	t.Run("a pool forbidding the zone leaves the pod unschedulable", func(t *testing.T) {
		pool := poolOf("default", 0, bothCapacityTypes(), workload.Req(betaZone, corev1.NodeSelectorOpIn, "us-east-1a"))
		s := solve(t, snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", withSelector(corev1.LabelTopologyZone, "us-east-1b"))}, pool))
		if s.unschedulable("p") == "" {
			t.Errorf("want unschedulable:%s", s.dump())
		}
	})
	t.Run("an existing node labelled the stable way takes a beta selector", func(t *testing.T) {
		snap := snapshot(t, []*corev1.Pod{pod("p", "500m", "512Mi", withSelector(betaZone, "us-east-1b"))})
		snap.Nodes = []packer.NodeState{{Node: existingNode(t, snap.Catalog, "n-b", "m5.large", "us-east-1b", "on-demand", nil)}}
		s := solve(t, snap)
		if s.where["default/p"] != "n-b" {
			t.Errorf("want the pod on the existing node n-b:%s", s.dump())
		}
	})
	t.Run("spread over failure-domain zone", func(t *testing.T) {
		snap := snapshot(t, pods("web", 3, "1", "1Gi", withLabel("app", "web"), spreadOn(betaZone, 1, corev1.DoNotSchedule, "web")))
		s := solve(t, snap)
		if got := placedBy(s, snap, corev1.LabelTopologyZone); len(got) != 3 {
			t.Errorf("pods per zone %v, want one in each of 3 zones:%s", got, s.dump())
		}
	})
	t.Run("anti-affinity on failure-domain zone sees a running pod", func(t *testing.T) {
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", withLabel("app", "db"), podAntiAffinity(betaZone, "db"))})
		snap.Nodes = []packer.NodeState{{Node: existingNode(t, snap.Catalog, "n-a", "m5.large", "us-east-1a", "on-demand", nil),
			Pods: []*corev1.Pod{pod("running", "1", "1Gi", withLabel("app", "db"))}}}
		s := solve(t, snap)
		if n := s.node("p"); n.Zone == "us-east-1a" {
			t.Errorf("want a zone other than us-east-1a:%s", s.dump())
		}
	})
	t.Run("DaemonSet selecting beta arch", func(t *testing.T) {
		snap := snapshot(t, []*corev1.Pod{pod("p", "1", "1Gi", withSelector(corev1.LabelArchStable, "amd64"))})
		snap.DaemonSets = append(snap.DaemonSets, daemonSet("agent", "1", "128Mi", withSelector(betaArch, "amd64")))
		s := solve(t, snap) // the checker counts the DaemonSet on every amd64 node
		if n := s.node("p"); n.InstanceType != "m5.xlarge" {
			t.Errorf("type %s, want m5.xlarge (1 CPU pod + 1 CPU DaemonSet do not fit m5.large):%s", n.InstanceType, s.dump())
		}
	})
}

// Karpenter v1.10+ lets a NodePool require labels in the kubernetes.io and k8s.io
// domains, and labels its nodes with the value (scheduling suite_test.go: "should
// schedule pods that have node selectors with label in the kubernetes domains",
// "... in subdomain from kubernetes domains").
func TestKubernetesDomainPoolLabels(t *testing.T) {
	for _, key := range []string{"kubernetes.io/test", "k8s.io/test", "subdomain.kubernetes.io/test", "subdomain.k8s.io/test", "node-role.kubernetes.io/worker"} {
		t.Run(key, func(t *testing.T) {
			pool := poolOf("default", 0, bothCapacityTypes(), workload.Req(key, corev1.NodeSelectorOpIn, "test-value"))
			s := solve(t, snapshot(t, []*corev1.Pod{pod("plain", "1", "1Gi"), pod("selecting", "1", "1Gi", withSelector(key, "test-value"))}, pool))
			for _, p := range []string{"plain", "selecting"} {
				if n := s.node(p); n.Labels[key] != "test-value" {
					t.Errorf("pod %s: node label %s=%q, want test-value:%s", p, key, n.Labels[key], s.dump())
				}
			}
		})
	}
}
