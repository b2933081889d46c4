package kube_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

const (
	benchNodes       = 5000
	benchPodsPerNode = 10
	benchNS          = "bench"
)

// populate creates benchNodes nodes and benchNodes*benchPodsPerNode pods bound to them
// (once per control plane).
func populate(b *testing.B, env *kubetest.Env) {
	b.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		return
	} else if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Value
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	for w := 0; w < 24; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := fmt.Sprintf("bench-node-%05d", i)
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
					"node.kubernetes.io/instance-type": "m6i.2xlarge", "topology.kubernetes.io/zone": "us-east-1a", "kubernetes.io/arch": "amd64"}},
					Spec:   corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-bench" + name[len(name)-5:]},
					Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc}}
				if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					failed.Store(err)
					continue
				}
				for j := 0; j < benchPodsPerNode; j++ {
					p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d-%d", i, j), Namespace: benchNS,
						Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%50), "tier": "web"}},
						Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.2.3",
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
					if _, err := cs.CoreV1().Pods(benchNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
						failed.Store(err)
					}
				}
			}
		}()
	}
	for i := 0; i < benchNodes; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("populate: %v", err)
	}
	b.Logf("created %d nodes and %d pods in %v", benchNodes, benchNodes*benchPodsPerNode, time.Since(start).Round(time.Second))
}

// BenchmarkReadState5kNodes50kPods reads the whole snapshot of a 5,000-node,
// 50,000-pod cluster from the real API server; it reports the peak heap in use during
// a read (sampled) and what the ClusterState retains afterwards.
func BenchmarkReadState5kNodes50kPods(b *testing.B) {
	env := kubetest.Shared(b)
	populate(b, env)
	c := joinerClient(b, env, "bench", nil)
	ctx := context.Background()
	var peak, retained uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		stop := make(chan struct{})
		done := make(chan uint64)
		go func() {
			var max uint64
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > max {
					max = m.HeapInuse
				}
				select {
				case <-stop:
					done <- max
					return
				case <-t.C:
				}
			}
		}()
		b.StartTimer()
		st, err := c.ReadState(ctx)
		b.StopTimer()
		close(stop)
		p := <-done
		if err != nil {
			b.Fatal(err)
		}
		pods := len(st.Snapshot.Pods)
		for _, n := range st.Snapshot.Nodes {
			pods += len(n.Pods)
		}
		if len(st.AllNodes) < benchNodes || pods < benchNodes*benchPodsPerNode {
			b.Fatalf("read %d nodes and %d pods", len(st.AllNodes), pods)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if p-base > peak {
			peak = p - base
		}
		retained = ms.HeapInuse - base
		runtime.KeepAlive(st)
		b.StartTimer()
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(retained)/(1<<20), "retained-MB")
}
