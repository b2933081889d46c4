package typed_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/typed"
)

// TestClientsServeJoiner drives kube.Client over client-go's fake clientset through
// typed.Clients: the snapshot lists every kind, and the Lease and Events (which go
// through the narrow interfaces' Create/Get/Update/Patch) land in the fake.
func TestClientsServeJoiner(t *testing.T) {
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cs := fake.NewClientset(pending, node)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		kube.NodePoolGVR: "NodePoolList", kube.NodeClaimGVR: "NodeClaimList", kube.NodeClassGVR: "EC2NodeClassList",
	})
	c := kube.New(typed.Clients(cs, dyn), kube.Options{ClusterName: "fake", Identity: "test"})
	ctx := context.Background()

	st, err := c.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.AllNodes) != 1 || st.AllNodes[0].Name != "n1" || len(st.Snapshot.Pods) != 1 || st.Snapshot.Pods[0].Name != "web" {
		t.Fatalf("snapshot: %d nodes, pending %v; want node n1 and pending pod web", len(st.AllNodes), st.Snapshot.Pods)
	}

	l := c.Lease("", time.Minute)
	if err := l.TryAcquire(ctx, 0); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoordinationV1().Leases(kube.Namespace).Get(ctx, l.Name(), metav1.GetOptions{})
	if err != nil || got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != "test" {
		t.Fatalf("lease %+v, %v; want held by test", got, err)
	}

	// The repeat within FailedScheduling's interval is not written at all: at most
	// one Event per pod per reason per interval.
	c.FailedScheduling(ctx, pending, "no NodePool fits")
	c.FailedScheduling(ctx, pending, "no NodePool fits")
	evs, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(evs.Items) != 1 || evs.Items[0].Reason != kube.ReasonFailedScheduling || evs.Items[0].Series != nil {
		t.Fatalf("events %+v, %v; want one FailedScheduling Event, the repeat suppressed", evs, err)
	}
}
