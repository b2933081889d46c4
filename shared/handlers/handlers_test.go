package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

func TestMain(m *testing.M) {
	if scaleChild() { // BenchmarkInvocationsAtScale's fresh process for one invocation
		os.Exit(0)
	}
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// world is one cluster (a real API server) and one AWS (the wire-level simulator,
// driven through the real SDK), shared by the handlers under test. The tests of
// decisions alone run in memory (inmemory_test.go); the ones on a world show what
// only a server does (evictions, finalizers, conflicts, faults, concurrency).
type world struct {
	sim     *awssim.Sim
	clients *kube.Clients
	// cs is a full clientset for the tests' own setup (creating pods, nodes,
	// namespaces), which the handlers' narrow clients do not offer.
	cs    kubernetes.Interface
	cloud cloud.Clients
	ns    string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	env := kubetest.Shared(t)
	ctx := context.Background()
	sim, err := awssim.Start(ctx, awssim.Config{Seed: ptrSeed(awssim.DefaultSeed("e2e"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	kc, err := kube.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl("apply", "-f", "testdata/pool.yaml"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	// The Lease lives in Joiner's namespace, which deploy/ creates.
	_, _ = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.Namespace}}, metav1.CreateOptions{})
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	// A benchmark runs its body once per round, in the same namespace.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	w := &world{sim: sim, clients: kc, cs: cs, cloud: cloud.NewClients(sim.AWSConfig(), cloud.RetryOptions{}, false), ns: ns}
	t.Cleanup(func() { w.clear(t) })
	return w
}

// clear removes what a test left in the shared API server (pods, nodes and
// NodeClaims with their finalizers), so the next test starts from an empty cluster.
func (w *world) clear(t testing.TB) {
	ctx := context.Background()
	zero := int64(0)
	_ = w.cs.CoreV1().Pods(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	// Nodes Joiner registered carry Karpenter's termination finalizer, which only a
	// consolidation round would lift.
	if nodes, err := w.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			if len(n.Finalizers) > 0 {
				_, _ = w.cs.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
		}
	}
	_ = w.cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	list, err := w.clients.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("clean-up: %v", err)
		return
	}
	for _, nc := range list.Items {
		_, _ = w.clients.Dynamic.Resource(kube.NodeClaimGVR).Patch(ctx, nc.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = w.clients.Dynamic.Resource(kube.NodeClaimGVR).Delete(ctx, nc.GetName(), metav1.DeleteOptions{})
	}
}

// function is the named function over the world, on real time.
func (w *world) function(t *testing.T, name string) *Function {
	t.Helper()
	var now func() time.Time
	cfg := Config{ClusterName: "e2e", Region: "us-east-1", Rebalance: RebalanceIgnore, LeaseDuration: time.Minute, LeaseWait: time.Second, MinSavingsFraction: 0.1}
	fn, err := NewFunction(name, func(ctx context.Context) (*Deps, error) {
		prov, err := cloud.New(cloud.Config{ClusterName: "e2e", Region: "us-east-1", Unavailable: cloud.NewUnavailableOfferings(time.Now)}, w.cloud)
		if err != nil {
			return nil, err
		}
		return &Deps{Config: cfg, Cloud: prov, Identity: name + "/test", Now: now,
			Cluster: kube.New(w.clients, kube.Options{ClusterName: "e2e", Identity: name + "/test", Now: now})}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fn.MetricsOut = &strings.Builder{}
	return fn
}

// pending creates n pods that the scheduler has found no room for.
func (w *world) pending(t testing.TB, prefix string, n int, cpu string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: w.ns},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
		if _, err := w.cs.CoreV1().Pods(w.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable"}]}}`)
		if _, err := w.cs.CoreV1().Pods(w.ns).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
}

func invoke(t *testing.T, fn *Function, file string) Summary {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out, err := fn.Invoke(context.Background(), raw)
	var s Summary
	if out != nil {
		if jerr := json.Unmarshal(out, &s); jerr != nil {
			t.Fatalf("summary: %v", jerr)
		}
	}
	if err != nil {
		t.Fatalf("%s(%s): %v (summary %+v)", fn.Name(), file, err, s)
	}
	return s
}

func (w *world) ownedInstances(t testing.TB) []awssim.Instance {
	t.Helper()
	var out []awssim.Instance
	for _, in := range w.sim.State().Instances {
		if in.Tags["kubernetes.io/cluster/e2e"] == "owned" {
			out = append(out, in)
		}
	}
	return out
}

func ptrSeed(s awssim.Seed) *awssim.Seed { return &s }

// register makes the launched NodeClaims' nodes appear and become Ready, as the
// kubelet would, and returns the node names.
func (w *world) register(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	st, err := kube.New(w.clients, kube.Options{ClusterName: "e2e"}).ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nc := range st.NodeClaims {
		id := facts.InstanceID(nc.Status.ProviderID)
		if id == "" || nc.DeletionTimestamp != nil {
			continue
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{"karpenter.sh/nodepool": "default",
			corev1.LabelInstanceTypeStable: nc.Labels[corev1.LabelInstanceTypeStable]}}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
		created, err := w.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			Capacity:    nc.Status.Capacity,
			Allocatable: nc.Status.Allocatable,
		}
		if _, err := w.cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, id)
	}
	return names
}

// TestInterruptionSpotWarningReplacesThenDrains: a spot warning for a node Joiner
// launched marks the offering unavailable, launches replacement capacity for the
// node's pods first, evicts them, and removes the NodeClaim, Node and instance.
func TestInterruptionSpotWarningReplacesThenDrains(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.pending(t, "api", 2, "500m")
	if s := invoke(t, w.function(t, Provisioner), "../../events/scheduled-rule.json"); len(s.NodesLaunched) != 1 {
		t.Fatalf("provisioner: %+v", s)
	}
	nodes := w.register(t)
	if len(nodes) != 1 {
		t.Fatalf("registered %v", nodes)
	}
	// The scheduler binds the pods; they run (grace 0, so an eviction removes them at once).
	for i := 0; i < 2; i++ {
		name := fmt.Sprintf("api-%d", i)
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns}, Target: corev1.ObjectReference{Kind: "Node", Name: nodes[0]}}
		if err := w.cs.CoreV1().Pods(w.ns).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k := kube.New(w.clients, kube.Options{ClusterName: "e2e"})
	st, err := k.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var claim string
	for _, nc := range st.NodeClaims {
		if facts.InstanceID(nc.Status.ProviderID) == nodes[0] {
			claim = nc.Name
		}
	}
	raw, err := os.ReadFile("../../events/spot-interruption.json")
	if err != nil {
		t.Fatal(err)
	}
	ev := strings.ReplaceAll(string(raw), "i-1234567890abcdef0", nodes[0])
	ev = strings.Replace(ev, `"time": "2024-05-01T12:00:00Z"`, `"time": "`+time.Now().UTC().Format(time.RFC3339)+`"`, 1)
	out, err := w.function(t, Interruption).Invoke(ctx, []byte(ev))
	if err != nil {
		t.Fatalf("interruption: %v (%s)", err, out)
	}
	var s Summary
	_ = json.Unmarshal(out, &s)
	if s.Interruptions != 1 || len(s.NodesLaunched) != 1 || len(s.NodesTerminated) != 1 || s.NodesTerminated[0] != claim {
		t.Fatalf("summary %+v: want one replacement launched and NodeClaim %s removed", s, claim)
	}
	if _, err := w.cs.CoreV1().Nodes().Get(ctx, nodes[0], metav1.GetOptions{}); err == nil {
		t.Errorf("node %s still exists", nodes[0])
	}
	pods, err := w.cs.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left on the interrupted node, want them evicted", len(pods.Items))
	}
	// The replacement is a different instance; the interrupted one is terminating.
	if in, ok := w.sim.Instance(nodes[0]); !ok || (in.State != "shutting-down" && in.State != "terminated") {
		t.Errorf("instance %s state %q, want terminating", nodes[0], in.State)
	}
	if n := len(w.ownedInstances(t)); n != 2 {
		t.Errorf("%d owned instances, want the interrupted one and its replacement", n)
	}
}
