package kubetest

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// TestSchedulerAndKWOK: a pod the real scheduler can place lands on the node with
// room (by its filters: the other node is too small), KWOK starts it, Settle
// returns with nothing left to try, and a pod that fits nowhere stays Pending,
// marked Unschedulable by the scheduler itself.
func TestSchedulerAndKWOK(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver, kube-scheduler and KWOK")
	}
	s := SharedScheduling(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(s.Config)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubetest-sched"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := func(name, cpu string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubetest": "sched"},
			Annotations: map[string]string{KWOKAnnotation: "fake"}}}
		out, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		out.Status = corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		}
		out.Status.Capacity = out.Status.Allocatable
		out, err = cs.CoreV1().Nodes().UpdateStatus(ctx, out, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The API server's admission taints a new node not-ready; the node lifecycle
		// controller (not running here) would lift it once Ready.
		out.Spec.Taints = nil
		if _, err := cs.CoreV1().Nodes().Update(ctx, out, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	node("kubetest-small", "1")
	node("kubetest-big", "4")
	pod := func(name, cpu string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubetest": "sched"}, Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
		if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = cs.CoreV1().Pods(ns.Name).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
	}
	pod("fits-big", "2")
	pod("fits-nowhere", "8")
	if err := s.Scheduler.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := s.Scheduler.Queue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.Busy() || q.Attempts < 2 {
		t.Errorf("settled queue %+v: want nothing active and at least two attempts", q)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := cs.CoreV1().Pods(ns.Name).Get(ctx, "fits-big", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "kubetest-big" {
			t.Fatalf("fits-big bound to %q, want kubetest-big", p.Spec.NodeName)
		}
		if p.Status.Phase == corev1.PodRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fits-big not started by KWOK: phase %s; KWOK log:\n%s", p.Status.Phase, s.KWOK.Tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	p, err := cs.CoreV1().Pods(ns.Name).Get(ctx, "fits-nowhere", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unschedulable := false
	for _, c := range p.Status.Conditions {
		unschedulable = unschedulable || c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
	}
	if p.Spec.NodeName != "" || !unschedulable {
		t.Errorf("fits-nowhere: node %q, conditions %+v; want pending, Unschedulable", p.Spec.NodeName, p.Status.Conditions)
	}
}
