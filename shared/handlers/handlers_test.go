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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }

// world is one cluster (a real API server) and one AWS (the wire-level simulator,
// driven through the real SDK), shared by the handlers under test.
type world struct {
	sim     *awssim.Sim
	clients *kube.Clients
	cloud   cloud.Clients
	ns      string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	kubetest.Need(t, env)
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
	if out, err := env.Kubectl("apply", "-f", "testdata/pool.yaml"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	// The Lease lives in Joiner's namespace, which deploy/ creates.
	_, _ = kc.Core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.Namespace}}, metav1.CreateOptions{})
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if _, err := kc.Core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &world{sim: sim, clients: kc, cloud: cloud.NewClients(sim.AWSConfig(), cloud.RetryOptions{}, false), ns: ns}
}

func (w *world) function(t *testing.T, name string) *Function {
	t.Helper()
	cfg := Config{ClusterName: "e2e", Region: "us-east-1", Rebalance: RebalanceIgnore, LeaseDuration: time.Minute, LeaseWait: time.Second, MinSavingsFraction: 0.1}
	fn, err := NewFunction(name, func(ctx context.Context) (*Deps, error) {
		prov, err := cloud.New(cloud.Config{ClusterName: "e2e", Region: "us-east-1", Unavailable: cloud.NewUnavailableOfferings(time.Now)}, w.cloud)
		if err != nil {
			return nil, err
		}
		return &Deps{Config: cfg, Cloud: prov, Identity: name + "/test",
			Cluster: kube.New(w.clients, kube.Options{ClusterName: "e2e", Identity: name + "/test"})}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fn.MetricsOut = &strings.Builder{}
	return fn
}

// pending creates n pods that the scheduler has found no room for.
func (w *world) pending(t *testing.T, prefix string, n int, cpu string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: w.ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
		if _, err := w.clients.Core.Pods(w.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable"}]}}`)
		if _, err := w.clients.Core.Pods(w.ns).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
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

func (w *world) ownedInstances(t *testing.T) []awssim.Instance {
	t.Helper()
	var out []awssim.Instance
	for _, in := range w.sim.State().Instances {
		if in.Tags["kubernetes.io/cluster/e2e"] == "owned" {
			out = append(out, in)
		}
	}
	return out
}

// TestProvisionerSweepLaunchesOnceForPendingPods: the scheduled sweep lists the
// pending pods itself, creates NodeClaims, launches tagged instances; the same
// trigger again launches nothing, since in-flight capacity covers the pods.
func TestProvisionerSweepLaunchesOnceForPendingPods(t *testing.T) {
	w := newWorld(t)
	w.pending(t, "heavy-app", 5, "1")
	fn := w.function(t, Provisioner)
	s := invoke(t, fn, "../../events/scheduled-rule.json")
	if len(s.NodesLaunched) == 0 || len(s.Errors) != 0 {
		t.Fatalf("first sweep: %+v", s)
	}
	owned := w.ownedInstances(t)
	if len(owned) != len(s.NodesLaunched) {
		t.Fatalf("%d owned instances for %d launched NodeClaims", len(owned), len(s.NodesLaunched))
	}
	for _, in := range owned {
		if in.Tags["karpenter.sh/nodepool"] != "default" || in.Tags["karpenter.sh/nodeclaim"] == "" {
			t.Errorf("instance %s tags %v", in.ID, in.Tags)
		}
	}
	st, err := kube.New(w.clients, kube.Options{ClusterName: "e2e"}).ReadState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	launched := 0
	for _, nc := range st.NodeClaims {
		if kube.ConditionTrue(nc.Status.Conditions, "Launched") && nc.Status.ProviderID != "" {
			launched++
		}
	}
	if launched < len(s.NodesLaunched) {
		t.Errorf("%d NodeClaims Launched, want %d", launched, len(s.NodesLaunched))
	}
	// A second sweep (a new event id) sees the in-flight NodeClaims and launches nothing.
	raw, _ := os.ReadFile("../../events/scheduled-rule.json")
	raw = []byte(strings.Replace(string(raw), `"id": "`, `"id": "again-`, 1))
	out, err := fn.Invoke(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	var s2 Summary
	_ = json.Unmarshal(out, &s2)
	if len(s2.NodesLaunched) != 0 || len(w.ownedInstances(t)) != len(owned) {
		t.Fatalf("second sweep launched again: %+v", s2)
	}
}

// TestInterruptionIgnoresForeignInstances: an event about an instance Joiner did not
// launch is logged and ignored; nothing is mutated.
func TestInterruptionIgnoresForeignInstances(t *testing.T) {
	w := newWorld(t)
	fn := w.function(t, Interruption)
	before := len(w.sim.Calls())
	s := invoke(t, fn, "../../events/spot-interruption.json")
	if s.Action != "ignored" || s.Interruptions != 0 {
		t.Fatalf("summary %+v", s)
	}
	for _, c := range w.sim.Calls()[before:] {
		if c.Action == "TerminateInstances" || c.Action == "CreateFleet" || c.Action == "CreateTags" {
			t.Errorf("mutating call %s for a foreign instance", c.Action)
		}
	}
}

func ptrSeed(s awssim.Seed) *awssim.Seed { return &s }
