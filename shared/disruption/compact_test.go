package disruption

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// TestCompactViewAgreesWithFullView runs the same decisions with the engine
// reading every bound pod and reading the compact view: they must agree.
func TestCompactViewAgreesWithFullView(t *testing.T) {
	in := bigCluster(t, 60, 700, karpenter.Budget{Nodes: "100%"})
	// The DaemonSet the bound kube-proxy pods belong to: the compact view must keep
	// the engine from adding it to their nodes a second time.
	in.Snapshot.DaemonSets = []*appsv1.DaemonSet{{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
		Spec:       appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: dsPod("x").Spec}},
	}}
	// A pod with a host port and one with anti-affinity stay themselves.
	ns := &in.Snapshot.Nodes[3]
	hp := appPod("hostport", "100m", "64Mi")
	hp.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 9100, ContainerPort: 9100}}
	hp.Spec.NodeName = ns.Node.Name
	ns.Pods = append(ns.Pods, hp)
	full := in
	full.Options.fullView = true
	a, b := Decide(in), Decide(full)
	if !equalStrings(disruptions(a), disruptions(b)) {
		t.Fatalf("compact view decided\n%s\nfull view decided\n%s", dump(a), dump(b))
	}
	if len(disruptions(a)) == 0 {
		t.Fatalf("vacuous: nothing decided")
	}
	for i := range a.Actions {
		ra, rb := a.Actions[i].Replacement, b.Actions[i].Replacement
		if (ra == nil) != (rb == nil) || (ra != nil && (ra.InstanceType != rb.InstanceType || !equalStrings(ra.Pods, rb.Pods))) {
			t.Fatalf("action %d: replacements differ: %+v vs %+v", i, ra, rb)
		}
	}
	t.Logf("%d disruptions agree; compact %d simulations, full %d", len(disruptions(a)), a.Summary.Simulations, b.Summary.Simulations)
}

// The compact view's two bookkeeping duties, each in a cluster where getting it
// wrong changes the answer: DaemonSets already running are not added again, and
// folded pods still count against the node's pod limit.
func TestCompactViewBookkeeping(t *testing.T) {
	build := func(targetPods int, dsCPU string) Input {
		c := newCluster(t, testPool("default", whenUnderused, 0, []string{"m5.xlarge"}, budgets(karpenter.Budget{Nodes: "100%"})))
		ds := dsPod("target")
		ds.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(dsCPU)
		pods := []*corev1.Pod{ds}
		for i := 0; i < targetPods; i++ {
			pods = append(pods, appPod(fmt.Sprintf("t%02d", i), "10m", "16Mi"))
		}
		// m5.xlarge allocatable: 3920m cpu, 58 pods. The DaemonSet pod takes dsCPU.
		pods = append(pods, appPod("filler", "1500m", "1Gi"))
		c.managed("target", "default", "m5.xlarge", time.Hour, pods...)
		c.managed("victim", "default", "m5.xlarge", time.Hour, appPod("mover", "1", "1Gi"))
		c.Snapshot.DaemonSets = []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: ds.Spec}}}}
		return c.input()
	}
	cases := []struct {
		name       string
		targetPods int
		dsCPU      string
		wantMove   bool
	}{
		// 3920 - 1200 (DS) - 1500 - 10*10 = 1120m left: mover fits once, not if the DS counted twice.
		{"DaemonSet counted once", 10, "1200m", true},
		// 58 pods allowed: DS + 55 + filler = 57 leaves room for mover.
		{"one pod slot left", 55, "100m", true},
		// DS + 56 + filler = 58: no slot, though cpu and memory would fit.
		{"no pod slot left", 56, "100m", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, fullView := range []bool{false, true} {
				in := build(tc.targetPods, tc.dsCPU)
				in.Options.fullView = fullView
				d := Decide(in)
				moved := false
				for _, a := range d.Actions {
					if a.Node == "victim" && a.Kind == Delete {
						moved = true
					}
				}
				if moved != tc.wantMove {
					t.Fatalf("fullView=%v: victim deleted=%v, want %v\n%s", fullView, moved, tc.wantMove, dump(d))
				}
			}
		})
	}
}
