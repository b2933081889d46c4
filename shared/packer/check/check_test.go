package check_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
)

func TestValidFixturePlanPasses(t *testing.T) {
	f := newFixture(t)
	if errs := check.Plan(f.snap, f.plan, f.cat); len(errs) != 0 {
		for _, e := range errs {
			t.Error(e)
		}
	}
}

func moveTo(f *fixture, pod, node string) {
	for i := range f.plan.NewNodes {
		n := &f.plan.NewNodes[i]
		n.Pods = remove(n.Pods, pod)
	}
	for i := range f.plan.ExistingNodes {
		f.plan.ExistingNodes[i].Pods = remove(f.plan.ExistingNodes[i].Pods, pod)
	}
	if n := f.newNode(node); n != nil {
		n.Pods = append(n.Pods, pod)
		return
	}
	for i := range f.plan.ExistingNodes {
		if f.plan.ExistingNodes[i].Name == node {
			f.plan.ExistingNodes[i].Pods = append(f.plan.ExistingNodes[i].Pods, pod)
			return
		}
	}
	f.plan.ExistingNodes = append(f.plan.ExistingNodes, packer.ExistingNode{Name: node, Pods: []string{pod}})
}

func remove(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// onlyDBOnOneNode reduces the fixture to db-0 and db-1 spread over hostnames, both
// on the one new node n-b.
func onlyDBOnOneNode(t *testing.T, f *fixture) {
	var keep []*corev1.Pod
	for _, n := range []string{"db-0", "db-1"} {
		p := f.pod(n)
		p.Spec.Affinity = nil
		spread(corev1.LabelHostname, 1, "db")(p)
		keep = append(keep, p)
	}
	f.snap.Pods = keep
	f.snap.Nodes = nil
	f.plan.ExistingNodes = nil
	f.plan.NewNodes = []packer.NewNode{f.place(t, "n-b", "default", "m5.large", "us-east-1b", "spot", nil, "default/db-0", "default/db-1")}
	f.total()
}

// Every case breaks one rule of the valid fixture plan; the checker must name it.
func TestBrokenPlansAreCaught(t *testing.T) {
	cases := []struct {
		name    string
		breakIt func(t *testing.T, f *fixture)
		want    string
	}{
		{"pod missing", func(t *testing.T, f *fixture) {
			f.newNode("n-c").Pods = []string{"default/web-1"}
		}, "pod default/db-1 is missing"},
		{"pod twice", func(t *testing.T, f *fixture) {
			f.plan.ExistingNodes[0].Pods = append(f.plan.ExistingNodes[0].Pods, "default/web-0")
		}, "appears more than once"},
		{"unknown pod", func(t *testing.T, f *fixture) {
			f.plan.Unschedulable = append(f.plan.Unschedulable, packer.Unschedulable{Pod: "default/ghost", Reason: "x"})
		}, "default/ghost is not a pending input pod"},
		{"running pod listed as placed", func(t *testing.T, f *fixture) {
			f.plan.ExistingNodes[0].Pods = append(f.plan.ExistingNodes[0].Pods, "default/running-web")
		}, "running-web is not a pending input pod"},
		{"unschedulable without reason", func(t *testing.T, f *fixture) {
			moveTo(f, "default/db-1", "")
			f.plan.ExistingNodes = f.plan.ExistingNodes[:1]
			f.plan.Unschedulable = []packer.Unschedulable{{Pod: "default/db-1"}}
		}, "has no reason"},
		{"volume in another zone", func(t *testing.T, f *fixture) {
			// web-0 (on n-b, us-east-1b) mounts a claim whose volume lives in us-east-1a.
			f.pod("web-0").Spec.Volumes = []corev1.Volume{{Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
			f.snap.Volumes = &packer.Volumes{
				Claims: []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
					Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-a"}}},
				PersistentVolumes: []*corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv-a",
					Labels: map[string]string{corev1.LabelTopologyZone: "us-east-1a"}}}}}
		}, "volume pv-a of claim data is in topology.kubernetes.io/zone us-east-1a"},
		{"a spread pod's node may fall back to another zone", func(t *testing.T, f *fixture) {
			// The plan counted web-0 in us-east-1b; launched in us-east-1c it would break the spread.
			f.newNode("n-b").Requirements = []karpenter.NodeSelectorRequirementWithMinValues{
				req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b", "us-east-1c"),
				req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot")}
		}, "new node n-b: may launch in zones [us-east-1b us-east-1c], but pod default/web-0 carries a required topology spread on topology.kubernetes.io/zone"},
		{"fallback to a capacity type a pod refuses", func(t *testing.T, f *fixture) {
			f.pod("cuda-0").Spec.NodeSelector[karpenter.CapacityTypeLabelKey] = "spot"
			f.newNode("n-gpu").Requirements = []karpenter.NodeSelectorRequirementWithMinValues{
				req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a"),
				req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand")}
		}, "new node n-gpu: option g6.xlarge on-demand in us-east-1a breaks the node affinity of pod default/cuda-0"},
		{"a fallback zone none of the options is offered in", func(t *testing.T, f *fixture) {
			f.newNode("n-c").Requirements = []karpenter.NodeSelectorRequirementWithMinValues{
				req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1c", "eu-west-1a"),
				req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot")}
			f.pod("web-1").Spec.TopologySpreadConstraints = nil
		}, "new node n-c: its requirements allow zone eu-west-1a, where none of its options is offered"},
		{"cpu overflow", func(t *testing.T, f *fixture) {
			f.pod("web-0").Spec.Containers[0].Resources.Requests = quantities("cpu", "1500m", "memory", "512Mi")
		}, "new node n-b: pods do not fit: cpu"},
		{"init container counted", func(t *testing.T, f *fixture) {
			// 1 + 0.5 + 0.1 (logger) < 1.93, but the init container of 1.5 CPU
			// raises web-0 to 1.5: 1.5 + 0.5 + 0.1 > 1.93.
			f.pod("web-0").Spec.InitContainers = []corev1.Container{{Name: "migrate", Resources: corev1.ResourceRequirements{Requests: quantities("cpu", "1500m")}}}
		}, "new node n-b: pods do not fit: cpu"},
		{"sidecar counted", func(t *testing.T, f *fixture) {
			always := corev1.ContainerRestartPolicyAlways
			f.pod("web-0").Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: quantities("cpu", "900m")}}}
		}, "new node n-b: pods do not fit: cpu"},
		{"pod overhead counted", func(t *testing.T, f *fixture) {
			f.pod("web-0").Spec.Overhead = quantities("cpu", "900m")
		}, "new node n-b: pods do not fit: cpu"},
		{"limits-only container requests its limits", func(t *testing.T, f *fixture) {
			f.pod("db-0").Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: quantities("cpu", "1500m", "memory", "1Gi")}
		}, "new node n-b: pods do not fit: cpu"},
		{"memory overflow", func(t *testing.T, f *fixture) {
			f.pod("db-0").Spec.Containers[0].Resources.Requests = quantities("cpu", "100m", "memory", "7Gi")
		}, "pods do not fit: memory"},
		{"matching DaemonSet counted", func(t *testing.T, f *fixture) {
			// 0.5 + 1.34 = 1.84 fits 1.93 alone, not with the logger's 0.1.
			f.pod("db-0").Spec.Containers[0].Resources.Requests = quantities("cpu", "1340m", "memory", "1Gi")
		}, "new node n-b: pods do not fit: cpu"},
		{"gpu on a node without gpus", func(t *testing.T, f *fixture) {
			f.pod("db-0").Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = quantities("x", "1")["x"]
		}, "nvidia.com/gpu"},
		{"pods per node", func(t *testing.T, f *fixture) {
			for i := 0; i < 28; i++ {
				p := mkPod("tiny-"+string(rune('a'+i)), "1m", "1Mi")
				f.snap.Pods = append(f.snap.Pods, p)
				f.newNode("n-c").Pods = append(f.newNode("n-c").Pods, "default/"+p.Name)
			}
		}, "pods > allocatable 29"},
		{"nodeSelector", func(t *testing.T, f *fixture) {
			nodeSelector("team", "data")(f.pod("web-0"))
		}, "pod default/web-0 on new node n-b: nodeSelector"},
		{"required node affinity (no term matches)", func(t *testing.T, f *fixture) {
			nodeAffinityTerms(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}}}},
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}}},
			)(f.pod("db-1"))
		}, "pod default/db-1 on new node n-c: nodeSelector/required node affinity"},
		{"untolerated pool taint", func(t *testing.T, f *fixture) {
			f.pod("cuda-0").Spec.Tolerations = nil
		}, "taint nvidia.com/gpu=true:NoSchedule not tolerated"},
		{"untolerated NoExecute taint on existing node", func(t *testing.T, f *fixture) {
			f.snap.Nodes[0].Node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoExecute}}
		}, "pod default/web-2 on existing node node-a: taint dedicated=batch:NoExecute"},
		{"zone spread skew", func(t *testing.T, f *fixture) {
			// zone a: running + web-2 + web-1 = 3, b 1, c 0.
			moveTo(f, "default/web-1", "node-a")
		}, "topology spread (topology.kubernetes.io/zone"},
		{"zone spread counts empty launchable zones", func(t *testing.T, f *fixture) {
			// No node in us-east-1c: a has 2 web pods, b 2, c (launchable, empty) 0.
			moveTo(f, "default/web-1", "n-b")
			moveTo(f, "default/db-1", "node-a")
			f.plan.NewNodes = []packer.NewNode{*f.newNode("n-b"), *f.newNode("n-gpu")}
			f.total()
		}, "minimum 0 over 3 domains (in us-east-1c (no node yet, launchable)), skew 2 > maxSkew 1"},
		{"hostname spread", func(t *testing.T, f *fixture) {
			for _, n := range []string{"db-0", "db-1"} {
				f.pod(n).Spec.Affinity = nil
				spread(corev1.LabelHostname, 1, "db")(f.pod(n))
			}
			moveTo(f, "default/db-1", "n-b")
		}, "topology spread (kubernetes.io/hostname"},
		{"hostname spread counts a node a pool could launch", onlyDBOnOneNode,
			"minimum 0 over 2 domains (in a node a pool could launch), skew 2 > maxSkew 1"},
		{"hostname anti-affinity", func(t *testing.T, f *fixture) {
			moveTo(f, "default/db-1", "n-b")
		}, "required anti-affinity (kubernetes.io/hostname"},
		{"anti-affinity of a running pod", func(t *testing.T, f *fixture) {
			antiAffinity(corev1.LabelHostname, "small")(f.snap.Nodes[0].Pods[0])
			label("app", "small")(f.pod("small-0"))
		}, "pod default/running-web on existing node node-a: required anti-affinity"},
		{"zone pod affinity", func(t *testing.T, f *fixture) {
			podAffinity(corev1.LabelTopologyZone, "web")(f.pod("db-0"))
			f.pod("web-0").Labels["app"] = "frontend"
			f.pod("web-0").Spec.TopologySpreadConstraints = nil
		}, "required pod affinity (topology.kubernetes.io/zone"},
		{"self affinity started in two zones", func(t *testing.T, f *fixture) {
			for _, n := range []string{"db-0", "db-1"} {
				f.pod(n).Spec.Affinity = nil
				podAffinity(corev1.LabelTopologyZone, "db")(f.pod(n))
			}
		}, "starts itself in 2 domains"},
		{"host port twice on a node", func(t *testing.T, f *fixture) {
			hostPortOpt(8080)(f.pod("web-2"))
			hostPortOpt(8080)(f.pod("small-0"))
		}, "host port TCP/8080"},
		{"pool cpu limit counts running nodes", func(t *testing.T, f *fixture) {
			// node-a (4) + n-b (2) + n-c (2) = 8.
			f.pool("default").Spec.Limits = quantities("cpu", "7")
		}, "pool default: cpu limit 7 exceeded: already running 4"},
		{"pool gpu limit", func(t *testing.T, f *fixture) {
			f.pool("gpu").Spec.Limits = quantities("nvidia.com/gpu", "0")
		}, "pool gpu: nvidia.com/gpu limit 0 exceeded"},
		{"pool node limit", func(t *testing.T, f *fixture) {
			f.pool("default").Spec.Limits = quantities("nodes", "2")
		}, "pool default: nodes limit 2 exceeded"},
		{"offering unavailable", func(t *testing.T, f *fixture) {
			it, _ := f.cat.Lookup("m5.large")
			for i := range it.Offerings {
				if it.Offerings[i].Zone == "us-east-1b" && it.Offerings[i].CapacityType == "spot" {
					it.Offerings[i].Available = false
				}
			}
		}, "spot offering in us-east-1b is not available"},
		{"type outside the pool", func(t *testing.T, f *fixture) {
			*f.newNode("n-c") = f.place(t, "n-c", "default", "m6g.large", "us-east-1c", "spot", nil, "default/web-1", "default/db-1")
			f.total()
		}, "pool default does not allow this node: kubernetes.io/arch"},
		{"price", func(t *testing.T, f *fixture) {
			f.newNode("n-c").PricePerHour = 0.039
			f.total()
		}, "pricePerHour 0.039, catalog says 0.04"},
		{"total", func(t *testing.T, f *fixture) {
			f.plan.TotalPricePerHour += 0.01
		}, "totalPricePerHour"},
		{"well-known label missing", func(t *testing.T, f *fixture) {
			delete(f.newNode("n-c").Labels, "karpenter.k8s.aws/instance-family")
		}, "label karpenter.k8s.aws/instance-family missing"},
		{"template label missing", func(t *testing.T, f *fixture) {
			delete(f.newNode("n-c").Labels, "team")
		}, "label team missing"},
		{"wrong zone label", func(t *testing.T, f *fixture) {
			f.newNode("n-c").Labels["topology.kubernetes.io/zone"] = "us-east-1a"
		}, "label topology.kubernetes.io/zone=\"us-east-1a\", want \"us-east-1c\""},
		{"label without source", func(t *testing.T, f *fixture) {
			f.newNode("n-c").Labels["team"] = "web"
			f.newNode("n-c").Labels["tier"] = "gold"
		}, "label tier=\"gold\" has no source"},
		{"allocatable disagrees with the catalog", func(t *testing.T, f *fixture) {
			f.newNode("n-c").Allocatable["memory"] = "7001Mi"
		}, "allocatable memory=7001Mi, catalog says"},
		{"pool taint missing from the node", func(t *testing.T, f *fixture) {
			f.newNode("n-gpu").Taints = nil
		}, "pool taint nvidia.com/gpu=true:NoSchedule missing"},
		{"options[0] is not the type", func(t *testing.T, f *fixture) {
			f.newNode("n-b").Options = []string{"m5.xlarge", "m5.large"}
		}, "options[0]=m5.xlarge"},
		{"options not sorted", func(t *testing.T, f *fixture) {
			*f.newNode("n-b") = f.place(t, "n-b", "default", "m5.xlarge", "us-east-1b", "spot", []string{"m5.xlarge", "m5.large"}, "default/web-0", "default/db-0")
			f.total()
		}, "options not sorted cheapest first"},
		{"option outside the pool", func(t *testing.T, f *fixture) {
			f.pod("db-0").Spec.Containers[0].Resources.Requests = quantities("cpu", "1", "memory", "1Gi")
			*f.newNode("n-b") = f.place(t, "n-b", "default", "m5.xlarge", "us-east-1b", "spot", []string{"m5.xlarge", "m5.large"}, "default/web-0", "default/db-0")
			f.newNode("n-b").Options = []string{"m5.xlarge", "g6.xlarge"}
			f.total()
		}, "option g6.xlarge is not allowed by pool default"},
		{"option that does not fit", func(t *testing.T, f *fixture) {
			// m5n.large costs more than m5.xlarge but has 2 CPUs: sorted, yet too small.
			f.pod("db-0").Spec.Containers[0].Resources.Requests = quantities("cpu", "1500m", "memory", "1Gi")
			*f.newNode("n-b") = f.place(t, "n-b", "default", "m5.xlarge", "us-east-1b", "spot", []string{"m5.xlarge", "m5n.large"}, "default/web-0", "default/db-0")
			f.total()
		}, "option m5n.large does not fit the node's pods: cpu 2100m > allocatable 1930m"},
		{"suspicious unschedulable", func(t *testing.T, f *fixture) {
			f.plan.ExistingNodes[0].Pods = []string{"default/web-2"}
			f.plan.Unschedulable = []packer.Unschedulable{{Pod: "default/small-0", Reason: "no capacity"}}
		}, "suspicious unschedulable: pod default/small-0"},
		{"unknown existing node", func(t *testing.T, f *fixture) {
			f.plan.ExistingNodes[0].Name = "node-z"
		}, "existing node node-z: no such node"},
		{"cordoned node", func(t *testing.T, f *fixture) {
			f.snap.Nodes[0].Node.Spec.Unschedulable = true
		}, "existing node node-a is cordoned"},
		{"existing node overflow counts running pods", func(t *testing.T, f *fixture) {
			// node-a: 3.92 CPU; running 0.5 + logger 0.1 + web-2 0.5 + small-0 1 = 2.1; add 2 to running.
			f.snap.Nodes[0].Pods[0].Spec.Containers[0].Resources.Requests = quantities("cpu", "2500m", "memory", "512Mi")
		}, "existing node node-a: pods do not fit: cpu"},
		{"empty new node", func(t *testing.T, f *fixture) {
			f.plan.NewNodes = append(f.plan.NewNodes, f.place(t, "n-empty", "default", "m5.large", "us-east-1a", "spot", nil))
			f.total()
		}, "new node n-empty has no pods"},
		{"unknown pool", func(t *testing.T, f *fixture) {
			f.newNode("n-c").NodePool = "ghost"
		}, "node pool \"ghost\" is not in the snapshot"},
		{"duplicate node name", func(t *testing.T, f *fixture) {
			f.newNode("n-c").Name = "n-b"
		}, "node name n-b is used twice"},
		{"minValues", func(t *testing.T, f *fixture) {
			two := 2
			f.pool("default").Spec.Template.Spec.Requirements = append(f.pool("default").Spec.Template.Spec.Requirements,
				karpenter.NodeSelectorRequirementWithMinValues{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpExists, MinValues: &two})
		}, "wants minValues 2 for node.kubernetes.io/instance-type, options span 1"},
		{"an option that would break the pool's limit", func(t *testing.T, f *fixture) {
			// 4 (node-a) + 2 + 2 = 8 as planned, but n-b may launch as m5.xlarge.
			f.pool("default").Spec.Limits = quantities("cpu", "8")
		}, "cpu limit 8 can be broken"},
		{"mismatchLabelKeys: other tenants share a node", func(t *testing.T, f *fixture) {
			tenants(f, "a", "b")
			moveTo(f, "default/db-1", "n-b")
		}, "required anti-affinity"},
		{"in-flight claim overflow", func(t *testing.T, f *fixture) {
			f.snap.InFlight = []*karpenter.NodeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "claim-1", Labels: map[string]string{karpenter.NodePoolLabelKey: "default"}},
				Spec: karpenter.NodeClaimSpec{Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
					req("node.kubernetes.io/instance-type", corev1.NodeSelectorOpIn, "m5.large"),
					req("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, "us-east-1a"),
				}},
			}}
			big := mkPod("big-0", "1900m", "1Gi")
			f.snap.Pods = append(f.snap.Pods, big)
			f.plan.ExistingNodes = append(f.plan.ExistingNodes, packer.ExistingNode{Name: "claim-1", InFlight: true, Pods: []string{"default/big-0"}})
		}, "in-flight node claim-1: pods do not fit: cpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.breakIt(t, f)
			errs := check.Plan(f.snap, f.plan, f.cat)
			var msgs []string
			found := false
			for _, e := range errs {
				msgs = append(msgs, e.Error())
				if strings.Contains(e.Error(), tc.want) {
					found = true
				}
			}
			if testing.Verbose() {
				t.Logf("errors:\n  %s", strings.Join(msgs, "\n  "))
			}
			if !found {
				t.Fatalf("want an error containing %q, got:\n  %s", tc.want, strings.Join(msgs, "\n  "))
			}
		})
	}
}

// tenants labels db-0 and db-1 with tenants and makes their hostname
// anti-affinity apply only to other tenants' pods (mismatchLabelKeys).
func tenants(f *fixture, a, b string) {
	for i, tenant := range []string{a, b} {
		p := f.pod([]string{"db-0", "db-1"}[i])
		p.Labels["tenant"] = tenant
		p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].MismatchLabelKeys = []string{"tenant"}
	}
}

// Rules whose subtle side a correct plan may rely on: the checker must not report these.
func TestValidVariantsPass(t *testing.T) {
	cases := []struct {
		name   string
		modify func(t *testing.T, f *fixture)
	}{
		{"non-matching DaemonSet not counted", func(t *testing.T, f *fixture) {
			// web-0 0.5 + db-0 1.33 + logger 0.1 = 1.93 fills m5.large exactly;
			// gpu-plugin's 0.05 (nodeSelector gpu=true) must not be counted.
			f.pod("db-0").Spec.Containers[0].Resources.Requests = quantities("cpu", "1330m", "memory", "1Gi")
		}},
		{"required node affinity second term", func(t *testing.T, f *fixture) {
			nodeAffinityTerms(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}}}},
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}},
			)(f.pod("db-1"))
		}},
		{"self affinity in one zone", func(t *testing.T, f *fixture) {
			for _, n := range []string{"db-0", "db-1"} {
				f.pod(n).Spec.Affinity = nil
				podAffinity(corev1.LabelTopologyZone, "db")(f.pod(n))
			}
			moveTo(f, "default/db-1", "n-b")
		}},
		{"unschedulable when nothing fits", func(t *testing.T, f *fixture) {
			f.pod("small-0").Spec.Containers[0].Resources.Requests = quantities("cpu", "64", "memory", "1Gi")
			f.pod("small-0").Spec.InitContainers = nil
			f.plan.ExistingNodes[0].Pods = []string{"default/web-2"}
			f.plan.Unschedulable = []packer.Unschedulable{{Pod: "default/small-0", Reason: "no instance type has 64 CPUs"}}
		}},
		{"unschedulable when the pool limit is spent", func(t *testing.T, f *fixture) {
			f.pool("default").Spec.Limits = quantities("cpu", "8")
			f.newNode("n-b").Options = []string{"m5.large"} // m5.xlarge would break the limit
			f.plan.ExistingNodes[0].Pods = []string{"default/web-2"}
			f.pod("small-0").Spec.InitContainers = nil
			f.pod("small-0").Spec.Containers[0].Resources.Requests = quantities("cpu", "3800m", "memory", "1Gi")
			f.plan.Unschedulable = []packer.Unschedulable{{Pod: "default/small-0", Reason: "pool default cpu limit"}}
		}},
		{"hostname spread one per node", func(t *testing.T, f *fixture) {
			for _, n := range []string{"db-0", "db-1"} {
				f.pod(n).Spec.Affinity = nil
				spread(corev1.LabelHostname, 1, "db")(f.pod(n))
			}
		}},
		{"hostname spread when no pool may launch another node", func(t *testing.T, f *fixture) {
			onlyDBOnOneNode(t, f)
			f.pool("default").Spec.Limits = quantities("nodes", "1")
			f.pool("gpu").Spec.Limits = quantities("nodes", "0")
		}},
		{"host ports on different nodes", func(t *testing.T, f *fixture) {
			hostPortOpt(8080)(f.pod("web-0"))
			hostPortOpt(8080)(f.pod("web-1"))
		}},
		{"mismatchLabelKeys: one tenant's pods share a node", func(t *testing.T, f *fixture) {
			tenants(f, "a", "a")
			moveTo(f, "default/db-1", "n-b")
		}},
		{"in-flight claim takes a pod", func(t *testing.T, f *fixture) {
			f.snap.InFlight = []*karpenter.NodeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "claim-1", Labels: map[string]string{karpenter.NodePoolLabelKey: "default"}},
				Spec: karpenter.NodeClaimSpec{Requirements: []karpenter.NodeSelectorRequirementWithMinValues{
					req("node.kubernetes.io/instance-type", corev1.NodeSelectorOpIn, "m5.large"),
					req("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, "us-east-1a"),
				}},
			}}
			f.snap.Pods = append(f.snap.Pods, mkPod("mid-0", "1500m", "1Gi"))
			f.plan.ExistingNodes = append(f.plan.ExistingNodes, packer.ExistingNode{Name: "claim-1", InFlight: true, Pods: []string{"default/mid-0"}})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.modify(t, f)
			for _, e := range check.Plan(f.snap, f.plan, f.cat) {
				t.Error(e)
			}
		})
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	c := func(cpu string, sidecar bool) corev1.Container {
		ct := corev1.Container{Resources: corev1.ResourceRequirements{Requests: quantities("cpu", cpu)}}
		if sidecar {
			ct.RestartPolicy = &always
		}
		return ct
	}
	cases := []struct {
		name string
		pod  corev1.PodSpec
		want string
	}{
		{"containers add", corev1.PodSpec{Containers: []corev1.Container{c("100m", false), c("200m", false)}}, "300m"},
		{"big init wins", corev1.PodSpec{InitContainers: []corev1.Container{c("1", false)}, Containers: []corev1.Container{c("100m", false)}}, "1"},
		{"sidecar adds to app", corev1.PodSpec{InitContainers: []corev1.Container{c("200m", true)}, Containers: []corev1.Container{c("100m", false)}}, "300m"},
		// init after a sidecar runs next to it: 200m + 1 = 1.2 > app phase 300m.
		{"init after sidecar", corev1.PodSpec{InitContainers: []corev1.Container{c("200m", true), c("1", false)}, Containers: []corev1.Container{c("100m", false)}}, "1200m"},
		// init before the sidecar does not see it: max(1, 300m) = 1.
		{"init before sidecar", corev1.PodSpec{InitContainers: []corev1.Container{c("1", false), c("200m", true)}, Containers: []corev1.Container{c("100m", false)}}, "1"},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{c("100m", false)}, Overhead: quantities("cpu", "250m")}, "350m"},
		{"limits only", corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: quantities("cpu", "2")}}}}, "2"},
		{"request below limit", corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: quantities("cpu", "1"), Limits: quantities("cpu", "2")}}}}, "1"},
	}
	for _, tc := range cases {
		got := check.PodRequests(&corev1.Pod{Spec: tc.pod})
		q := got[corev1.ResourceCPU]
		want := quantities("cpu", tc.want)["cpu"]
		if q.Cmp(want) != 0 {
			t.Errorf("%s: cpu %s, want %s", tc.name, q.String(), tc.want)
		}
	}
}
