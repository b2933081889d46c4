package kubesim

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
)

// instances is a fake EC2 for the kubelet: instances by ID.
type instances map[string]awssim.Instance

func (m instances) Instance(id string) (awssim.Instance, bool) { in, ok := m[id]; return in, ok }

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func pod(name string, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}}
}

// TestLifecycle walks one node through the simulation: pending pods are marked
// Unschedulable; a NodeClaim's instance registers after RegisterAfter with the
// unregistered taint; once Joiner lifts it the pods bind; an eviction a PDB forbids
// is refused with 429; an evicted pod comes back pending; the NodeClaim's deletion
// waits for its finalizer; the instance's end removes the node and its pods return.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	ec2 := instances{}
	c := New(Config{Now: clk.now, Instances: ec2, RegisterAfter: 30 * time.Second})
	minAvail := intstr.FromInt32(2)
	b := &manifest.Bundle{Pods: []*corev1.Pod{pod("web-0", "500m"), pod("web-1", "500m")},
		PDBs: []*policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvail, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
	if err := c.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	rep := step(t, c)
	if len(rep.Unschedulable) != 2 {
		t.Fatalf("want both pods marked unschedulable, got %+v", rep)
	}
	p, _ := c.Clientset().CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
	if !facts.IsPending(p) {
		t.Fatalf("pod not pending as the provisioner reads it: %+v", p.Status)
	}

	// Joiner writes a NodeClaim and launches its instance.
	kc := kube.New(c.Clients(), kube.Options{ClusterName: "test", Now: clk.now})
	nc, err := kc.CreateNodeClaim(ctx, &karpenter.NodeClaim{ObjectMeta: metav1.ObjectMeta{GenerateName: "default-",
		Labels: map[string]string{karpenter.NodePoolLabelKey: "default"}},
		Spec: karpenter.NodeClaimSpec{NodeClassRef: &karpenter.NodeClassReference{Name: "default"}}})
	if err != nil || nc.Name == "" || nc.CreationTimestamp.IsZero() {
		t.Fatalf("create NodeClaim: %v (%+v)", err, nc)
	}
	ec2["i-0123456789abcdef0"] = awssim.Instance{ID: "i-0123456789abcdef0", InstanceType: "m6i.large", Zone: "us-east-1a",
		CapacityType: "spot", State: awssim.StateRunning, LaunchTime: clk.t}
	if _, err := kc.MarkLaunched(ctx, nc.Name, kube.Launch{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0", InstanceType: "m6i.large",
		Zone: "us-east-1a", CapacityType: "spot", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("29")}}); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(10 * time.Second)
	if rep := step(t, c); len(rep.Registered) != 0 {
		t.Fatalf("registered before RegisterAfter: %+v", rep)
	}
	clk.t = clk.t.Add(30 * time.Second)
	if rep := step(t, c); len(rep.Registered) != 1 || rep.Bound != 0 {
		t.Fatalf("want the node registered, nothing bound under the unregistered taint: %+v", rep)
	}
	// The kubelet's and the cloud node controller's labels, stable and deprecated.
	node, err := c.Clientset().CoreV1().Nodes().Get(ctx, "i-0123456789abcdef0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"kubernetes.io/arch": "amd64", "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
		"beta.kubernetes.io/instance-type": "m6i.large", "failure-domain.beta.kubernetes.io/zone": "us-east-1a",
		"failure-domain.beta.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/region": "us-east-1"} {
		if got := node.Labels[k]; got != want {
			t.Errorf("node label %s=%q, want %q", k, got, want)
		}
	}
	// Joiner's reconcile registers the node (lifting the taint); the pods bind.
	st, err := kc.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep := kube.Reconcile(ctx, kc, st, kc.Now(), nil); len(rep.Errors) > 0 {
		t.Fatal(rep.Errors)
	}
	if rep := step(t, c); rep.Bound != 2 {
		t.Fatalf("want 2 pods bound, got %+v", rep)
	}
	step(t, c) // the disruption controller sees them healthy
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}}
	if err := c.Clientset().CoreV1().Pods("default").EvictV1(ctx, ev); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction under minAvailable 2 of 2: want 429, got %v", err)
	}
	if err := c.Delete(ctx, "PodDisruptionBudget", "default/web"); err != nil {
		t.Fatal(err)
	}
	if err := c.Clientset().CoreV1().Pods("default").EvictV1(ctx, ev); err != nil {
		t.Fatalf("eviction without a PDB: %v", err)
	}
	if rep := step(t, c); rep.Recreated != 1 || rep.Bound != 1 {
		t.Fatalf("want the evicted pod recreated and bound again, got %+v", rep)
	}

	// Deleting the NodeClaim waits for its finalizer.
	if err := kc.DeleteNodeClaim(ctx, nc.Name); err != nil {
		t.Fatal(err)
	}
	got, err := c.Clients().Dynamic.Resource(kube.NodeClaimGVR).Get(ctx, nc.Name, metav1.GetOptions{})
	if err != nil || got.GetDeletionTimestamp() == nil {
		t.Fatalf("want the NodeClaim kept with a deletionTimestamp, got %v, %v", err, got)
	}

	// The instance ends: its node goes, and its pods come back pending.
	in := ec2["i-0123456789abcdef0"]
	in.State = awssim.StateShuttingDown
	ec2[in.ID] = in
	rep = step(t, c)
	if len(rep.Removed) != 1 || rep.Recreated != 2 || len(rep.Unschedulable) != 2 {
		t.Fatalf("want the node removed and both pods pending again, got %+v", rep)
	}
	ran, waiting := c.Waits()
	if len(ran) != 3 || len(waiting) != 2 || ran[0].Wait != 40*time.Second {
		t.Fatalf("waits: ran %+v, waiting %+v", ran, waiting)
	}
}

func step(t *testing.T, c *Cluster) *Report {
	t.Helper()
	rep, err := c.Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestScale: a workload scales down newest first and back up from its template.
func TestScale(t *testing.T) {
	ctx := context.Background()
	c := New(Config{})
	if err := c.Apply(ctx, &manifest.Bundle{Pods: []*corev1.Pod{pod("web-0", "1"), pod("web-1", "1"), pod("web-2", "1")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Scale(ctx, "default", "web", 1); err != nil {
		t.Fatal(err)
	}
	pods, _ := c.Clientset().CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 1 {
		t.Fatalf("%d pods after scaling to 1", len(pods.Items))
	}
	if err := c.Scale(ctx, "default", "web", 4); err != nil {
		t.Fatal(err)
	}
	pods, _ = c.Clientset().CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 4 {
		t.Fatalf("%d pods after scaling to 4", len(pods.Items))
	}
	if err := c.Scale(ctx, "default", "nope", 1); err == nil {
		t.Fatal("scaling an unknown workload: want an error")
	}
}
