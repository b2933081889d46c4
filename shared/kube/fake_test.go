package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func fakeClient(objs ...runtime.Object) (*Client, *fake.Clientset) {
	cs := fake.NewClientset(objs...)
	// What kube/typed.Clients does; that package imports this one, so this test cannot.
	clients := ClientsOf(cs.CoreV1().Pods, cs.CoreV1().Nodes, cs.AppsV1().DaemonSets, cs.PolicyV1().PodDisruptionBudgets,
		cs.CoordinationV1().Leases, cs.EventsV1().Events, nil)
	c := New(clients, Options{ClusterName: "test", Identity: "unit"})
	return c, cs
}

// TestDrainRetriesPDBRefusals checks the drain loop with client-go's fake clientset: a
// 429 (PDB) is retried until the eviction is allowed, DaemonSet and mirror pods are left
// alone (a mirror pod known only by its Node owner too: that is how Karpenter tells
// them, and the eviction API cannot remove them), and Events are written for the
// evicted pod.
func TestDrainRetriesPDBRefusals(t *testing.T) {
	web := pod("web", "n1", "1")
	ds := pod("ds", "n1", "100m", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "x", Controller: ptr.To(true)}}
	})
	mirror := pod("mirror", "n1", "100m", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} })
	static := pod("static", "n1", "100m", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", Controller: ptr.To(true)}}
	})
	c, cs := fakeClient(web, ds, mirror, static)
	var mu sync.Mutex
	refusals := 2
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if refusals > 0 {
			refusals--
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		name := a.(k8stesting.CreateAction).GetObject().(interface{ GetName() string }).GetName()
		return true, nil, cs.Tracker().Delete(a.GetResource(), a.GetNamespace(), name)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Drain(ctx, "n1", DrainOptions{Reason: "Underutilized", RetryInitial: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Evicted) != 1 || res.Evicted[0] != "default/web" || len(res.Skipped) != 3 || len(res.Remaining) != 0 {
		t.Fatalf("drain result %+v", res)
	}
	if refusals != 0 {
		t.Errorf("%d refusals left: the drain did not retry through the 429s", refusals)
	}
	evs, _ := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
	var reasons []string
	for _, e := range evs.Items {
		if e.ReportingController != ReportingController || e.Regarding.Name != "web" {
			continue
		}
		reasons = append(reasons, e.Reason)
	}
	if strings.Join(reasons, ",") != "DisruptionBlocked,Evicted" && strings.Join(reasons, ",") != "Evicted,DisruptionBlocked" {
		t.Errorf("events on pod web: %v, want DisruptionBlocked and Evicted", reasons)
	}
}

func TestDrainRefusesDoNotDisruptUnlessInvoluntary(t *testing.T) {
	keep := pod("keep", "n1", "1", func(p *corev1.Pod) { p.Annotations = map[string]string{karpenter.DoNotDisruptAnnotation: "true"} })
	c, cs := fakeClient(keep)
	evictions := 0
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		evictions++
		return true, nil, cs.Tracker().Delete(a.GetResource(), a.GetNamespace(), "keep")
	})
	ctx := context.Background()
	_, err := c.Drain(ctx, "n1", DrainOptions{Reason: "Underutilized", RetryInitial: time.Millisecond})
	if !errors.Is(err, ErrDoNotDisrupt) || evictions != 0 {
		t.Fatalf("voluntary drain: err %v, %d evictions; want ErrDoNotDisrupt and none", err, evictions)
	}
	res, err := c.Drain(ctx, "n1", DrainOptions{Reason: "SpotInterrupted", Involuntary: true, RetryInitial: time.Millisecond})
	if err != nil || len(res.Evicted) != 1 {
		t.Fatalf("involuntary drain: %v %+v", err, res)
	}
}

// TestDrainDeletesPastGraceDeadline: once the NodeClaim's terminationGracePeriod has
// run out, a PDB no longer holds the pod: it is deleted with what time is left.
func TestDrainDeletesPastGraceDeadline(t *testing.T) {
	p := pod("stuck", "n1", "1", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(30)) })
	c, cs := fakeClient(p)
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" {
			return true, nil, apierrors.NewTooManyRequests("pdb", 0)
		}
		return false, nil, nil
	})
	var grace int64 = -1
	cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if g := a.(k8stesting.DeleteActionImpl).DeleteOptions.GracePeriodSeconds; g != nil {
			grace = *g
		}
		return false, nil, nil
	})
	res, err := c.Drain(context.Background(), "n1", DrainOptions{GraceDeadline: time.Now().Add(20 * time.Second), RetryInitial: time.Millisecond})
	if err != nil || len(res.Deleted) != 1 {
		t.Fatalf("drain: %v %+v", err, res)
	}
	if grace < 18 || grace > 20 {
		t.Errorf("deleted with grace %ds, want the ~20s left before the deadline", grace)
	}
}

func TestBeginDisruptionRefusesNodesJoinerDidNotLaunch(t *testing.T) {
	cp := node("cp", "aws:///z/i-cp")
	cp.Labels = map[string]string{"node-role.kubernetes.io/control-plane": "", karpenter.NodePoolLabelKey: "x"}
	static := node("static", "aws:///z/i-s")
	c, _ := fakeClient(cp, static)
	st := &ClusterState{AllNodes: []*corev1.Node{cp, static}, NodeClaims: []*karpenter.NodeClaim{claim("c", "aws:///z/i-cp", true)}}
	for _, n := range []string{"cp", "static"} {
		if _, err := c.BeginDisruption(context.Background(), st, n, DisruptOptions{Reason: "Empty", Involuntary: true}); !errors.Is(err, ErrNotOwned) {
			t.Errorf("%s: err %v, want ErrNotOwned", n, err)
		}
	}
}

// TestProtectedNodesAreNeverTouched: the executor refuses the same nodes the
// disruption decision never picks (facts.IsProtectedNode), even when a NodeClaim
// and the nodepool label make one look like Joiner's. kube used to know only the
// control-plane and master labels, so an infra node, or a control plane marked only
// by its taint, could be disrupted, tainted or deleted if a decision named it.
func TestProtectedNodesAreNeverTouched(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		taints []corev1.Taint
	}{
		{"infra-label", map[string]string{"node-role.kubernetes.io/infra": ""}, nil},
		{"control-plane-taint", nil, []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}},
		{"master-taint", nil, []corev1.Taint{{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node(tc.name, "aws:///z/i-"+tc.name)
			n.Labels = map[string]string{karpenter.NodePoolLabelKey: "default"}
			for k, v := range tc.labels {
				n.Labels[k] = v
			}
			n.Spec.Taints = append(n.Spec.Taints, tc.taints...)
			n.Spec.Taints = append(n.Spec.Taints, DisruptedTaint) // a stale disruption taint, for ClearStaleDisruptions
			c, cs := fakeClient(n)
			st := &ClusterState{AllNodes: []*corev1.Node{n}, NodeClaims: []*karpenter.NodeClaim{claim("c-"+tc.name, n.Spec.ProviderID, true)}}
			ctx := context.Background()
			if _, err := c.BeginDisruption(ctx, st, n.Name, DisruptOptions{Reason: "Empty"}); !errors.Is(err, ErrNotOwned) {
				t.Errorf("BeginDisruption: %v, want ErrNotOwned", err)
			}
			if err := c.TaintRebalance(ctx, st, n.Name); !errors.Is(err, ErrNotOwned) {
				t.Errorf("TaintRebalance: %v, want ErrNotOwned", err)
			}
			if err := c.DeleteNode(ctx, n); !errors.Is(err, ErrNotOwned) {
				t.Errorf("DeleteNode: %v, want ErrNotOwned", err)
			}
			if cleared, err := c.ClearStaleDisruptions(ctx, st); err != nil || len(cleared) != 0 {
				t.Errorf("ClearStaleDisruptions: cleared %v, err %v; want the node left alone", cleared, err)
			}
			got, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the node is gone: %v", err)
			}
			if len(got.Spec.Taints) != len(n.Spec.Taints) {
				t.Errorf("taints changed: %v, want %v", got.Spec.Taints, n.Spec.Taints)
			}
		})
	}
}

func TestEventSeriesInsteadOfDuplicates(t *testing.T) {
	c, cs := fakeClient()
	n := node("n1", "")
	for i := 0; i < 3; i++ {
		c.Record(context.Background(), Event{Regarding: NodeRef(n), Reason: ReasonDisruptionBlocked, Note: "same"})
	}
	evs, _ := cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if len(evs.Items) != 1 {
		t.Fatalf("%d events, want 1 with a series", len(evs.Items))
	}
	if s := evs.Items[0].Series; s == nil || s.Count != 3 {
		t.Errorf("series %+v, want count 3", s)
	}
}

// TestAbandonUntaintsAfterDeadline: the deferred Abandon still removes the taint when
// the caller's context has already ended (a function running out of time).
func TestAbandonUntaintsAfterDeadline(t *testing.T) {
	n := node("n1", "aws:///z/i-1")
	n.Labels = map[string]string{karpenter.NodePoolLabelKey: "default"}
	c, cs := fakeClient(n)
	st := &ClusterState{AllNodes: []*corev1.Node{n}, NodeClaims: []*karpenter.NodeClaim{claim("c1", "aws:///z/i-1", true)}}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := c.BeginDisruption(ctx, st, "n1", DisruptOptions{Reason: "Underutilized"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != karpenter.DisruptedTaintKey {
		t.Fatalf("taints after BeginDisruption: %v", got.Spec.Taints)
	}
	cancel()
	d.Abandon(ctx)
	got, _ = cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if len(got.Spec.Taints) != 0 {
		t.Fatalf("taints after Abandon on an ended context: %v", got.Spec.Taints)
	}
}

func TestLeaseDurationFor(t *testing.T) {
	for timeout, want := range map[time.Duration]time.Duration{
		15 * time.Minute: DefaultLeaseDuration, 60 * time.Second: 20 * time.Second, 3 * time.Second: time.Second,
	} {
		if got := LeaseDurationFor(timeout); got != want {
			t.Errorf("LeaseDurationFor(%v) = %v, want %v", timeout, got, want)
		}
	}
}

func TestNominateEvents(t *testing.T) {
	c, cs := fakeClient()
	p := pod("web", "", "1")
	c.Nominate(context.Background(), []*corev1.Pod{p}, "nodeclaim/default-abcde")
	evs, _ := cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if len(evs.Items) != 1 || evs.Items[0].Reason != ReasonNominated || evs.Items[0].Note != "Pod should schedule on: nodeclaim/default-abcde" ||
		evs.Items[0].Regarding.Name != "web" || evs.Items[0].ReportingController != "joiner" {
		t.Fatalf("events %+v", evs.Items)
	}
}

// TestFailedSchedulingAtMostOncePerInterval: a pod unschedulable on every run gets one
// FailedScheduling write per reason per DedupeInterval, however often the provisioner
// runs; a new reason is its own Event; after the interval the series counts again.
func TestFailedSchedulingAtMostOncePerInterval(t *testing.T) {
	cs := fake.NewClientset()
	clients := ClientsOf(cs.CoreV1().Pods, cs.CoreV1().Nodes, cs.AppsV1().DaemonSets, cs.PolicyV1().PodDisruptionBudgets,
		cs.CoordinationV1().Leases, cs.EventsV1().Events, nil)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "apps", UID: "u1"}}
	ctx := context.Background()
	run := func() { // each provisioner invocation builds its own Client
		New(clients, Options{ClusterName: "test", Identity: "unit", Now: func() time.Time { return now }}).FailedScheduling(ctx, p, "no NodePool allows gpu")
	}
	for i := 0; i < 30; i++ { // every 10 s for 5 minutes
		run()
		now = now.Add(10 * time.Second)
	}
	New(clients, Options{ClusterName: "test", Identity: "unit", Now: func() time.Time { return now }}).FailedScheduling(ctx, p, "exceeds the NodePool's cpu limit")
	evs, _ := cs.EventsV1().Events("apps").List(ctx, metav1.ListOptions{})
	if len(evs.Items) != 2 {
		t.Fatalf("%d events, want one per reason", len(evs.Items))
	}
	for _, e := range evs.Items {
		if e.Series != nil {
			t.Errorf("event %q repeated within the interval: series %+v", e.Note, e.Series)
		}
	}
	run() // 5 minutes after the first: said again
	evs, _ = cs.EventsV1().Events("apps").List(ctx, metav1.ListOptions{})
	for _, e := range evs.Items {
		if strings.Contains(e.Note, "gpu") && (e.Series == nil || e.Series.Count != 2) {
			t.Errorf("after the interval: series %+v, want count 2", e.Series)
		}
	}
}

// TestTaintRebalanceOnce: the rebalance taint is written once; a recommendation
// delivered again finds it there and patches nothing.
func TestTaintRebalanceOnce(t *testing.T) {
	n := node("n1", "aws:///z/i-1")
	n.Labels = map[string]string{karpenter.NodePoolLabelKey: "default"}
	c, cs := fakeClient(n)
	st := &ClusterState{AllNodes: []*corev1.Node{n}, NodeClaims: []*karpenter.NodeClaim{claim("c1", "aws:///z/i-1", true)}}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := c.TaintRebalance(ctx, st, "n1"); err != nil {
			t.Fatal(err)
		}
		got, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st.AllNodes[0] = got
	}
	patches := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" {
			patches++
		}
	}
	if taints := st.AllNodes[0].Spec.Taints; len(taints) != 1 || !taints[0].MatchTaint(&RebalanceTaint) || patches != 1 {
		t.Errorf("taints %v after %d patches; want %s once, one patch", taints, patches, RebalanceTaint.ToString())
	}
}

// TestNoteNamingPodsFitsAnEvent: the note names as many pods as fit in 1 kB and
// counts the rest.
func TestNoteNamingPodsFitsAnEvent(t *testing.T) {
	var pods []string
	for i := 0; i < 200; i++ {
		pods = append(pods, fmt.Sprintf("default/web-%03d", i))
	}
	note := NoteNamingPods("Launched instance i-0abc (m6g.large, us-east-1a, spot); ", pods)
	if len(note) > 1000 || !strings.HasPrefix(note, "Launched instance i-0abc (m6g.large, us-east-1a, spot); 200 pod(s) should schedule on it: default/web-000 ") {
		t.Fatalf("note (%d bytes): %s", len(note), note)
	}
	named := strings.Count(note, "default/web-")
	if !strings.HasSuffix(note, fmt.Sprintf(" and %d more", 200-named)) {
		t.Errorf("note names %d pods but ends %q", named, note[len(note)-20:])
	}
	if short := NoteNamingPods("x: ", pods[:2]); short != "x: 2 pod(s) should schedule on it: default/web-000 default/web-001" {
		t.Errorf("short note %q", short)
	}
}
