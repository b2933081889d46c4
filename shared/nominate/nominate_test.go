package nominate

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/lifecycle"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/testworld"
)

func pod(name, node, cpu string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

var claim = testworld.SmallClaim

func node(name, providerID, cpu string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Spec:   corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110")}}}
}

func nominated(d Decision) []string {
	var out []string
	for _, nm := range d.Nominations {
		out = append(out, nm.Pod.Name+"@"+nm.Node)
	}
	return out
}

// TestForRegistrationNominatesOnlyWhereThePodFits: the pods a NodeClaim records are
// nominated onto its registering node in plan order while they fit its free room,
// with the NodeClaim's labels and taints as registration will leave them
// (karpenter.sh/unregistered and startup taints are about to go; a GPU the device
// plugin has not advertised yet counts at what the NodeClaim expects); a pod that
// no longer fits (selector, taint, host port, room) is not nominated, and a pod is
// never nominated twice.
func TestForRegistrationNominatesOnlyWhereThePodFits(t *testing.T) {
	nc := claim("c1", "aws:///z/i-1", false)
	nc.Labels["team"] = "a"
	nc.Spec.StartupTaints = []corev1.Taint{{Key: "cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoExecute}}
	nc.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
	n := node("n1", "aws:///z/i-1", "4")
	n.Spec.Taints = []corev1.Taint{{Key: karpenter.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}, nc.Spec.StartupTaints[0]}
	tolerate := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "a", Effect: corev1.TaintEffectNoSchedule}}
	}
	port := func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
	}
	gpu := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[karpenter.ResourceNVIDIAGPU] = resource.MustParse("1")
	}
	nc.Annotations = map[string]string{PlannedPodsAnnotation: PlannedPodsValue([]string{"default/a", "default/wrong-team",
		"default/no-toleration", "default/port-taken", "default/gpu", "default/too-big", "default/last", "default/a", "default/gone"})}
	in := Input{
		Pending: []*corev1.Pod{
			pod("a", "", "1", tolerate, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"team": "a"} }),
			pod("wrong-team", "", "100m", tolerate, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"team": "b"} }),
			pod("no-toleration", "", "100m"),
			pod("port-taken", "", "100m", tolerate, port),
			pod("gpu", "", "1", tolerate, gpu),
			pod("too-big", "", "2", tolerate),
			pod("last", "", "1", tolerate),
		},
		Bound:      map[string][]*corev1.Pod{"n1": {pod("bound", "n1", "1", tolerate, port)}},
		NodeClaims: []*karpenter.NodeClaim{nc},
		Nodes:      []*corev1.Node{n},
	}
	trs := []lifecycle.Transition{{Kind: lifecycle.Register, NodeClaim: nc, Node: n}}
	if got, want := nominated(ForRegistration(in, trs)), []string{"a@n1", "gpu@n1", "last@n1"}; !slices.Equal(got, want) {
		t.Errorf("nominated %v, want %v", got, want)
	}
	// Other transitions nominate nothing.
	trs[0].Kind = lifecycle.Initialize
	if d := ForRegistration(in, trs); !d.Empty() {
		t.Errorf("an Initialize transition nominated %v", nominated(d))
	}
}

// TestForPlan: pods planned onto an initialized node and onto the registered node
// of an in-flight NodeClaim are nominated, pods already nominated or held by other
// pods' room are not; an in-flight NodeClaim records its new list, one the plan
// gave nothing loses its old list, one already up to date and one being deleted
// are left alone.
func TestForPlan(t *testing.T) {
	ready := node("ready", "", "2")
	starting := node("starting", "aws:///z/i-2", "4")
	inflight := claim("c-starting", "aws:///z/i-2", false)
	unlaunched := claim("c-new", "", false)
	stale := claim("c-stale", "", false)
	stale.Annotations = map[string]string{PlannedPodsAnnotation: "default/x"}
	same := claim("c-same", "", false)
	same.Annotations = map[string]string{PlannedPodsAnnotation: "default/y"}
	deleting := claim("c-deleting", "", false)
	deleting.DeletionTimestamp = &metav1.Time{}
	in := Input{
		Pending: []*corev1.Pod{pod("w1", "", "1"), pod("w2", "", "1"), pod("w3", "", "1"),
			pod("already", "", "1", func(p *corev1.Pod) { p.Status.NominatedNodeName = "ready" }), pod("s1", "", "3"), pod("s2", "", "3")},
		Nominated:  map[string][]*corev1.Pod{"ready": {pod("held", "", "1")}},
		NodeClaims: []*karpenter.NodeClaim{inflight, unlaunched, stale, same, deleting},
		Nodes:      []*corev1.Node{ready, starting},
	}
	plan := &packer.Plan{ExistingNodes: []packer.ExistingNode{
		{Name: "ready", Pods: []string{"default/already", "default/w1", "default/w2"}},
		{Name: "c-starting", InFlight: true, Pods: []string{"default/s1", "default/s2"}},
		{Name: "c-new", InFlight: true, Pods: []string{"default/w3"}},
		{Name: "c-same", InFlight: true, Pods: []string{"default/y"}},
	}}
	d := ForPlan(in, plan)
	if got, want := nominated(d), []string{"w1@ready", "s1@starting"}; !slices.Equal(got, want) {
		t.Errorf("nominated %v, want %v (w2 has no room beside held; s2 none beside s1)", got, want)
	}
	want := []Record{{"c-starting", []string{"default/s1", "default/s2"}}, {"c-new", []string{"default/w3"}}, {"c-stale", nil}}
	if !slices.EqualFunc(d.Records, want, func(a, b Record) bool { return a.NodeClaim == b.NodeClaim && slices.Equal(a.Pods, b.Pods) }) {
		t.Errorf("records %v, want %v", d.Records, want)
	}
}

func TestPlannedPodsValueIsBounded(t *testing.T) {
	var keys []string
	for range 10000 {
		keys = append(keys, "some-namespace/some-rather-long-pod-name-0123456789")
	}
	v := PlannedPodsValue(keys)
	if len(v) > maxPlannedPods || len(v) < maxPlannedPods-100 {
		t.Errorf("annotation of %d bytes, want just under %d", len(v), maxPlannedPods)
	}
	nc := &karpenter.NodeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{PlannedPodsAnnotation: PlannedPodsValue(keys[:3])}}}
	if got := PlannedPods(nc); len(got) != 3 || got[0] != keys[0] {
		t.Errorf("PlannedPods = %v", got)
	}
}
