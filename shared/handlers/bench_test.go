package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/typed"
)

// benchPods are n pending pods of ten Deployments, small enough that the test
// NodePool's 100-CPU limit holds them all (about 18 nodes of 4 vCPUs).
func benchPods(ns string, n int) []*corev1.Pod {
	cpu := []string{"25m", "50m", "75m", "100m"}
	mem := []string{"64Mi", "128Mi", "192Mi", "256Mi"}
	out := make([]*corev1.Pod, 0, n)
	for i := 0; i < n; i++ {
		app := fmt.Sprintf("app-%d", i%10)
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", app, i), Namespace: ns, Labels: map[string]string{"app": app},
				UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpu[i%4]), corev1.ResourceMemory: resource.MustParse(mem[(i/4)%4])}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
				Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
		})
	}
	return out
}

// pendingPodsEvent is the forwarder's batch naming the pods.
func pendingPodsEvent(b testing.TB, pods []*corev1.Pod) []byte {
	type ref struct {
		Namespace  string                       `json:"namespace"`
		Name       string                       `json:"name"`
		UID        string                       `json:"uid"`
		Labels     map[string]string            `json:"labels"`
		Containers []map[string]json.RawMessage `json:"containers"`
	}
	refs := make([]ref, 0, len(pods))
	for _, p := range pods {
		req, _ := json.Marshal(p.Spec.Containers[0].Resources.Requests)
		refs = append(refs, ref{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Labels: p.Labels,
			Containers: []map[string]json.RawMessage{{"name": json.RawMessage(`"c"`), "requests": req}}})
	}
	detail, _ := json.Marshal(map[string]any{"schemaVersion": "1", "cluster": "e2e", "batchId": "e2e/bench/1",
		"observedAt": "2024-05-01T12:00:04Z", "truncated": false, "pods": refs})
	ev := fmt.Sprintf(`{"version":"0","id":"bench-%%d","detail-type":"Pending Pods","source":"joiner.forwarder","account":"123456789012",`+
		`"time":"2024-05-01T12:00:05Z","region":"us-east-1","resources":[],"detail":%s}`, detail)
	if len(ev) > 256*1024 {
		b.Fatalf("event is %d bytes, over EventBridge's 256 KB", len(ev))
	}
	return []byte(ev)
}

var benchSeq atomic.Int64

// benchFunction is a provisioner over kc and the simulator, with a fresh identity
// and event id per invocation (no dedupe, no lease reuse). Like FromEnv it keeps
// the catalog's EC2 reads across invocations, as a warm container does; cold
// builds every invocation as a fresh container's first.
func benchFunction(b testing.TB, sim cloud.Clients, kc func() *kube.Clients, cold bool) *Function {
	cfg := Config{ClusterName: "e2e", Region: "us-east-1", Rebalance: RebalanceIgnore, LeaseDuration: time.Minute, LeaseWait: time.Second, MinSavingsFraction: 0.1}
	log := NewLogger(io.Discard, "ERROR")
	warm := cloud.NewCatalogCache(TypesTTL, PricesTTL)
	fn, err := NewFunction(Provisioner, func(ctx context.Context) (*Deps, error) {
		id := fmt.Sprintf("provisioner/bench-%d", benchSeq.Add(1))
		cache := warm
		if cold {
			cache = cloud.NewCatalogCache(TypesTTL, PricesTTL)
		}
		prov, err := cloud.New(cloud.Config{ClusterName: "e2e", Region: "us-east-1", Unavailable: cloud.NewUnavailableOfferings(time.Now), Logger: log,
			CatalogCache: cache}, sim)
		if err != nil {
			return nil, err
		}
		return &Deps{Config: cfg, Cloud: prov, Identity: id, Log: log,
			Cluster: kube.New(kc(), kube.Options{ClusterName: "e2e", Identity: id, Log: log})}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	fn.MetricsOut = io.Discard
	return fn
}

func benchInvoke(b *testing.B, fn *Function, ev []byte) Summary {
	n := benchSeq.Add(1)
	raw := []byte(strings.NewReplacer("bench-%d", fmt.Sprintf("bench-%d", n), "e2e/bench/1", fmt.Sprintf("e2e/bench/%d", n)).Replace(string(ev)))
	out, err := fn.Invoke(context.Background(), raw)
	if err != nil {
		b.Fatalf("invoke: %v (%s)", err, out)
	}
	var s Summary
	_ = json.Unmarshal(out, &s)
	return s
}

func startSim(b testing.TB) cloud.Clients {
	sim, err := awssim.Start(context.Background(), awssim.Config{Seed: ptrSeed(awssim.DefaultSeed("e2e"))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sim.Close() })
	return cloud.NewClients(sim.AWSConfig(), cloud.RetryOptions{}, false)
}

// BenchmarkProvisioner1000Pods: the provisioner handling a 1,000-pod Pending Pods
// event end to end — decode, lease, cluster read and reconcile, live catalog, plan,
// NodeClaims, launches (CreateFleet through the SDK against the simulator, which
// adds no latency), launch records and Events — against the real API server, in a
// warm container (an untimed first invocation read the instance types). Each
// iteration starts from the same 1,000 uncovered pods (the previous iteration's
// NodeClaims are removed with the timer stopped). cpu-ms/op is this process's CPU
// time (not the API server's).
func BenchmarkProvisioner1000Pods(b *testing.B) {
	w := newWorld(b)
	ctx := context.Background()
	pods := benchPods(w.ns, 1000)
	for _, p := range pods {
		status := p.Status
		p = p.DeepCopy()
		p.UID = ""
		created, err := w.cs.CoreV1().Pods(w.ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		created.Status = status
		if _, err := w.cs.CoreV1().Pods(w.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	ev := pendingPodsEvent(b, pods)
	fn := benchFunction(b, w.cloud, func() *kube.Clients { return w.clients }, false)
	// The first invocation fills the warm container's caches.
	benchInvoke(b, fn, ev)
	nodes := 0
	var cpu cpuMeter
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		w.clearClaims(b)
		b.StartTimer()
		cpu.start()
		s := benchInvoke(b, fn, ev)
		cpu.stop()
		nodes = len(s.NodesLaunched)
		if nodes == 0 || len(s.Errors) > 0 || s.PodsPending != 1000 {
			b.Fatalf("summary %+v", s)
		}
	}
	b.ReportMetric(float64(nodes), "nodes/op")
	cpu.report(b)
}

// cpuMeter adds up the process's CPU time (user and system, every goroutine: the
// handler, the in-process simulator and fake clientset) over the timed invocations.
// On a shared machine wall time says as much about the neighbours as about the
// handler; CPU time does not.
type cpuMeter struct {
	at    time.Duration
	total time.Duration
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (m *cpuMeter) start() { m.at = processCPU() }
func (m *cpuMeter) stop()  { m.total += processCPU() - m.at }
func (m *cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(m.total.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// clearClaims removes every NodeClaim (finalizers first), so the pods are
// uncovered again.
func (w *world) clearClaims(b testing.TB) {
	ctx := context.Background()
	list, err := w.clients.Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, nc := range list.Items {
		_, _ = w.clients.Dynamic.Resource(kube.NodeClaimGVR).Patch(ctx, nc.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = w.clients.Dynamic.Resource(kube.NodeClaimGVR).Delete(ctx, nc.GetName(), metav1.DeleteOptions{})
	}
}

// BenchmarkProvisioner1000PodsFakeCluster is the same invocation over client-go's
// fake clientset (kube.Clients via typed.Clients), so the number is the handler's
// own time plus the simulator's wire round trips, without the API server's. The
// container is warm (instance types and prices read by an earlier invocation).
func BenchmarkProvisioner1000PodsFakeCluster(b *testing.B) { benchFake(b, false) }

// BenchmarkProvisioner1000PodsFakeClusterCold is the same with every invocation a
// fresh container's first: it reads instance types, offerings and spot prices too.
func BenchmarkProvisioner1000PodsFakeClusterCold(b *testing.B) { benchFake(b, true) }

func benchFake(b *testing.B, cold bool) {
	sim := startSim(b)
	pods := benchPods("bench", 1000)
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p)
	}
	crs := poolObjects(b)
	ev := pendingPodsEvent(b, pods)
	var clients *kube.Clients
	fn := benchFunction(b, sim, func() *kube.Clients { return clients }, cold)
	// The first invocation fills the warm container's caches.
	clients = fakeClients(objs, crs)
	benchInvoke(b, fn, ev)
	nodes := 0
	var cpu cpuMeter
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		clients = fakeClients(objs, crs)
		b.StartTimer()
		cpu.start()
		s := benchInvoke(b, fn, ev)
		cpu.stop()
		nodes = len(s.NodesLaunched)
		if nodes == 0 || len(s.Errors) > 0 || s.PodsPending != 1000 {
			b.Fatalf("summary %+v", s)
		}
	}
	b.ReportMetric(float64(nodes), "nodes/op")
	cpu.report(b)
}

// poolObjects reads testdata/pool.yaml as unstructured objects.
func poolObjects(b testing.TB) []runtime.Object {
	raw, err := os.ReadFile("testdata/pool.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var out []runtime.Object
	for i, doc := range strings.Split(string(raw), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			b.Fatal(err)
		}
		u.SetUID(types.UID(fmt.Sprintf("pool-%d", i)))
		out = append(out, u)
	}
	return out
}

// fakeClients is a fresh fake cluster holding objs and the CRs. The fake dynamic
// client does not implement generateName; a reactor does, as the API server would.
func fakeClients(objs, crs []runtime.Object) *kube.Clients {
	_, kc := fakeCluster(objs, crs)
	return kc
}

// fakeCluster is fakeClients with the typed fake clientset under them.
func fakeCluster(objs, crs []runtime.Object) (*fake.Clientset, *kube.Clients) {
	cs := fake.NewSimpleClientset(objs...) //nolint:staticcheck // NewClientset's field-managed tracker costs more than the handler
	copies := make([]runtime.Object, 0, len(crs))
	for _, o := range crs {
		copies = append(copies, o.DeepCopyObject())
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		kube.NodePoolGVR: "NodePoolList", kube.NodeClaimGVR: "NodeClaimList", kube.NodeClassGVR: "EC2NodeClassList",
	}, copies...)
	var n atomic.Int64
	dyn.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured); ok && u.GetName() == "" && u.GetGenerateName() != "" {
			u.SetName(fmt.Sprintf("%s%05d", u.GetGenerateName(), n.Add(1)))
		}
		return false, nil, nil
	})
	return cs, typed.Clients(cs, dyn)
}
