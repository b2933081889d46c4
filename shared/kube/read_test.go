package kube_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

func TestRequestKey(t *testing.T) {
	for _, c := range []struct {
		method, path string
		watch        bool
		want         string
	}{
		{"GET", "/api/v1/pods", false, "LIST pods"},
		{"GET", "/api/v1/pods", true, "WATCH pods"},
		{"GET", "/api/v1/namespaces/ns/pods", false, "LIST pods"},
		{"GET", "/api/v1/namespaces/ns/pods/p", false, "GET pods"},
		{"POST", "/api/v1/namespaces/ns/pods/p/eviction", false, "POST pods/eviction"},
		{"GET", "/api/v1/nodes", false, "LIST nodes"},
		{"PATCH", "/api/v1/nodes/n1", false, "PATCH nodes"},
		{"GET", "/api/v1/namespaces/kube-system", false, "GET namespaces"},
		{"GET", "/api/v1/namespaces", false, "LIST namespaces"},
		{"GET", "/apis/karpenter.sh/v1/nodeclaims", false, "LIST nodeclaims"},
		{"PATCH", "/apis/karpenter.sh/v1/nodeclaims/x/status", false, "PATCH nodeclaims/status"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/joiner-c", false, "PUT leases"},
		{"GET", "/version", false, "GET /version"},
	} {
		if got := kube.RequestKey(c.method, c.path, c.watch); got != c.want {
			t.Errorf("RequestKey(%s %s) = %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

// TestReadStateCheaply reads a small cluster from the real API server through a
// Meter: finished pods are not transferred (the field selector), the snapshot's
// objects are slimmed, every list is paged, and the requests are what the Meter counts.
func TestReadStateCheaply(t *testing.T) {
	env := kubetest.Shared(t)
	cs, _ := admin(t, env)
	ctx := context.Background()
	ns := "readcheap"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := createNode(t, cs, "readcheap-node", "aws:///us-east-1a/i-readcheap", nil, true,
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")})
	node.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example/big:1"}, SizeBytes: 1 << 30}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const pods = 7
	for i := 0; i < pods; i++ {
		p := runningPod(fmt.Sprintf("p%d", i), ns, node.Name, map[string]string{"app": "a"}, func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "keep": "me"}
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
			p.Spec.Volumes = []corev1.Volume{
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "d"}}}}
		})
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 { // one finished pod: nothing of it should be read
			created.Status.Phase = corev1.PodSucceeded
			if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The claim the pods mount, its class: read with the functions' RBAC.
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "readcheap-gp3"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	})
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		StorageClassName: &sc.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	meter := kube.NewMeter()
	cfg := rest.CopyConfig(functionsConfig(env))
	cfg.WrapTransport = meter.Wrap
	clients, err := kube.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := kube.New(clients, kube.Options{ClusterName: "readcheap", Identity: "test/" + t.Name(), PageSize: 2})
	st, err := c.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mine []*corev1.Pod
	for _, p := range st.PodsByNode[node.Name] {
		if p.Namespace == ns {
			mine = append(mine, p)
		}
	}
	if len(mine) != pods-1 {
		t.Fatalf("read %d pods of %s on the node, want %d (the Succeeded one left out)", len(mine), ns, pods-1)
	}
	for _, p := range mine {
		if p.Name == "p0" {
			t.Errorf("the Succeeded pod p0 was read")
		}
		if _, ok := p.Annotations[corev1.LastAppliedConfigAnnotation]; ok || p.Annotations["keep"] != "me" || p.ManagedFields != nil {
			t.Errorf("pod %s metadata not slimmed as intended: annotations %v, %d managedFields", p.Name, p.Annotations, len(p.ManagedFields))
		}
		if p.Spec.Containers[0].Env != nil || p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 100 {
			t.Errorf("pod %s container: env %v, requests %v", p.Name, p.Spec.Containers[0].Env, p.Spec.Containers[0].Resources.Requests)
		}
		if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].PersistentVolumeClaim == nil {
			t.Errorf("pod %s volumes %+v, want only the claim", p.Name, p.Spec.Volumes)
		}
	}
	for _, n := range st.AllNodes {
		if n.Name == node.Name && (n.Status.Images != nil || n.Status.Allocatable.Cpu().Value() != 4) {
			t.Errorf("node: images %v, allocatable %v", n.Status.Images, n.Status.Allocatable)
		}
	}
	if v := st.Snapshot.Volumes; v == nil {
		t.Error("no volumes read")
	} else {
		found := false
		for _, c := range v.Claims {
			found = found || c.Namespace == ns && c.Name == "d"
		}
		classes := false
		for _, c := range v.StorageClasses {
			classes = classes || c.Name == sc.Name
		}
		if !found || !classes {
			t.Errorf("claim d read: %v, class %s read: %v", found, sc.Name, classes)
		}
	}
	counts := meter.Counts()
	// Six pods at two a page are at least three pod pages (other tests' pods add more).
	if counts["LIST pods"] < 3 || counts["LIST nodes"] < 1 || counts["LIST nodeclaims"] < 1 || counts["LIST nodepools"] < 1 ||
		counts["LIST ec2nodeclasses"] < 1 || counts["LIST daemonsets"] < 1 || counts["LIST poddisruptionbudgets"] < 1 ||
		counts["LIST persistentvolumeclaims"] < 1 || counts["LIST persistentvolumes"] < 1 || counts["LIST storageclasses"] < 1 {
		t.Errorf("requests %s: want every list, pods paged", meter)
	}
	for k := range counts {
		if k[:4] != "LIST" {
			t.Errorf("a read made a %s request", k)
		}
	}
	if meter.BytesRead() <= 0 {
		t.Errorf("bytes read %d", meter.BytesRead())
	}
}

// TestMeterCountsFailedRequests: a request the server refuses still costs it.
func TestMeterCountsFailedRequests(t *testing.T) {
	m := kube.NewMeter()
	rt := m.Wrap(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, fmt.Errorf("refused")
	}))
	req, _ := http.NewRequest(http.MethodDelete, "https://x/api/v1/nodes/n", nil)
	if _, err := rt.RoundTrip(req); err == nil {
		t.Fatal("want the transport's error")
	}
	if got := m.Counts()["DELETE nodes"]; got != 1 || m.Total() != 1 {
		t.Errorf("counts %v", m.Counts())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
