package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/kubesim"
	"github.com/joiner-autoscaler/joiner/shared/replay"
	"github.com/joiner-autoscaler/joiner/shared/shadow"
)

// simCreated is a pod's or NodeClaim's creation time on the simulated clock
// (kept in kubesim's annotation: a real API server stamps its own creationTimestamp).
func simCreated(o metav1.Object) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, o.GetAnnotations()[kubesim.SimCreatedAnnotation]); err == nil {
		return t
	}
	return o.GetCreationTimestamp().Time
}

// karpenterActor plays Karpenter v1's controllers on the cluster, writing what they
// write through the API server: a launch (an instance tagged as Karpenter tags
// it, a NodeClaim with its labels, finalizer and Launched status), registration
// and initialization once the node is up, a disruption (the DisruptionReason
// condition, the deletion, the drained pods recreated by their controller) and
// the termination that lifts the finalizer.
type karpenterActor struct {
	t   *testing.T
	ctx context.Context
	w   *simWorld
	n   int
}

func (k *karpenterActor) claims() dynamic.ResourceInterface {
	return k.w.kc.Clients().Dynamic.Resource(kube.NodeClaimGVR)
}

func (k *karpenterActor) get(name string) *unstructured.Unstructured {
	k.t.Helper()
	u, err := k.claims().Get(k.ctx, name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatalf("karpenter: get NodeClaim %s: %v", name, err)
	}
	return u
}

func (k *karpenterActor) setConditions(name string, conds ...metav1.Condition) {
	k.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := k.get(name)
		nc, err := kube.NodeClaimFromUnstructured(u)
		if err != nil {
			return err
		}
		for _, c := range conds {
			c.LastTransitionTime = metav1.NewTime(k.w.clock.Now())
			c.ObservedGeneration = nc.Generation
			nc.Status.Conditions = slices.DeleteFunc(nc.Status.Conditions, func(x metav1.Condition) bool { return x.Type == c.Type })
			nc.Status.Conditions = append(nc.Status.Conditions, c)
		}
		return k.writeStatus(u, nc.Status)
	})
	if err != nil {
		k.t.Fatalf("karpenter: status of %s: %v", name, err)
	}
}

func (k *karpenterActor) writeStatus(u *unstructured.Unstructured, st karpenter.NodeClaimStatus) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	// A merge patch, as Joiner's own status writes are (the dynamic client here
	// speaks JSON patches, not typed updates).
	patch := append(append([]byte(`{"status":`), b...), '}')
	_, err = k.claims().Patch(k.ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// launch creates an instance and its NodeClaim as Karpenter does, from the
// cluster's NodeClaim default-a8kq2 as the template.
func (k *karpenterActor) launch(name, instanceType, zone, subnet, capacityType string) {
	k.t.Helper()
	k.n++
	id := fmt.Sprintf("i-0e%02df00dcafe0%04d", k.n, k.n)
	tmpl, err := kube.NodeClaimFromUnstructured(k.get("default-a8kq2"))
	if err != nil {
		k.t.Fatal(err)
	}
	nc := &karpenter.NodeClaim{TypeMeta: tmpl.TypeMeta, Spec: tmpl.Spec}
	nc.Name, nc.Annotations, nc.Finalizers = name, tmpl.Annotations, []string{"karpenter.sh/termination"}
	nc.Annotations[kubesim.SimCreatedAnnotation] = k.w.clock.Now().UTC().Format(time.RFC3339Nano)
	nc.Labels = tmpl.Labels
	nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Labels[karpenter.CapacityTypeLabelKey] = instanceType, zone, capacityType
	delete(nc.Labels, "topology.k8s.aws/zone-id")
	u, err := kube.NodeClaimToUnstructured(nc)
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := k.claims().Create(k.ctx, u, metav1.CreateOptions{}); err != nil {
		k.t.Fatalf("karpenter: create NodeClaim %s: %v", name, err)
	}
	in := awssim.Instance{ID: id, InstanceType: instanceType, Zone: zone, SubnetID: subnet, CapacityType: capacityType, State: awssim.StateRunning,
		LaunchTime: k.w.clock.Now(), ImageID: "ami-04e4f2a30286c08a1", Architecture: "x86_64", SecurityGroupIDs: []string{"sg-0d0000000000000d1"},
		Tags: map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": name, "karpenter.k8s.aws/ec2nodeclass": "default",
			"kubernetes.io/cluster/" + k.w.cluster: "owned", "eks:eks-cluster-name": k.w.cluster}}
	if err := k.w.sim.Apply(awssim.Seed{Instances: []awssim.Instance{in}}); err != nil {
		k.t.Fatalf("karpenter: instance for %s: %v", name, err)
	}
	st := karpenter.NodeClaimStatus{ProviderID: "aws:///" + zone + "/" + id, ImageID: "ami-04e4f2a30286c08a1",
		Capacity: tmpl.Status.Capacity, Allocatable: tmpl.Status.Allocatable,
		Conditions: []metav1.Condition{{Type: karpenter.ConditionLaunched, Status: metav1.ConditionTrue, Reason: karpenter.ConditionLaunched,
			LastTransitionTime: metav1.NewTime(k.w.clock.Now())}}}
	if err := k.writeStatus(k.get(name), st); err != nil {
		k.t.Fatalf("karpenter: launched status of %s: %v", name, err)
	}
}

// initialize registers and initializes the NodeClaim's node (which kubesim's
// kubelet registered): its nodeName and conditions, the unregistered taint lifted.
func (k *karpenterActor) initialize(name string) {
	k.t.Helper()
	nc, err := kube.NodeClaimFromUnstructured(k.get(name))
	if err != nil {
		k.t.Fatal(err)
	}
	nodes := k.w.kc.Clientset().CoreV1().Nodes()
	list, err := nodes.List(k.ctx, metav1.ListOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	var node *corev1.Node
	for i := range list.Items {
		if list.Items[i].Spec.ProviderID == nc.Status.ProviderID {
			node = &list.Items[i]
		}
	}
	if node == nil {
		k.t.Fatalf("karpenter: NodeClaim %s's node has not registered", name)
	}
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == bootstrap.UnregisteredTaint.Key })
	node.Labels["karpenter.sh/registered"], node.Labels["karpenter.sh/initialized"] = "true", "true"
	if _, err := nodes.Update(k.ctx, node, metav1.UpdateOptions{}); err != nil {
		k.t.Fatalf("karpenter: node of %s: %v", name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := k.get(name)
		nc, err := kube.NodeClaimFromUnstructured(u)
		if err != nil {
			return err
		}
		nc.Status.NodeName = node.Name
		now := metav1.NewTime(k.w.clock.Now())
		for _, t := range []string{karpenter.ConditionRegistered, karpenter.ConditionInitialized, karpenter.ConditionReady} {
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, LastTransitionTime: now})
		}
		return k.writeStatus(u, nc.Status)
	})
	if err != nil {
		k.t.Fatalf("karpenter: initialize %s: %v", name, err)
	}
}

// disrupt marks the NodeClaim with the reason, deletes it (its finalizer keeps
// it until terminated) and drains its node: the pods go, and their controller
// makes them again, pending.
func (k *karpenterActor) disrupt(name, reason string) {
	k.t.Helper()
	k.setConditions(name, metav1.Condition{Type: shadow.ConditionDisruptionReason, Status: metav1.ConditionTrue, Reason: reason, Message: "disrupting: " + reason})
	nc, err := kube.NodeClaimFromUnstructured(k.get(name))
	if err != nil {
		k.t.Fatal(err)
	}
	if err := k.claims().Delete(k.ctx, name, metav1.DeleteOptions{}); err != nil {
		k.t.Fatalf("karpenter: delete %s: %v", name, err)
	}
	pods := k.w.kc.Clientset().CoreV1().Pods("")
	list, err := pods.List(k.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nc.Status.NodeName})
	if err != nil {
		k.t.Fatal(err)
	}
	for _, p := range list.Items {
		if err := k.w.kc.Clientset().CoreV1().Pods(p.Namespace).Delete(k.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			k.t.Fatalf("karpenter: drain %s: %v", p.Name, err)
		}
		k.pending(p.Namespace, p.Name+"-r", p.Spec.Containers[0].Resources.Requests)
	}
}

// finalize terminates the NodeClaim's instance and lifts its finalizer.
func (k *karpenterActor) finalize(name string) {
	k.t.Helper()
	nc, err := kube.NodeClaimFromUnstructured(k.get(name))
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := k.w.cloud.EC2.TerminateInstances(k.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{facts.InstanceID(nc.Status.ProviderID)}}); err != nil {
		k.t.Fatalf("karpenter: terminate %s: %v", name, err)
	}
	// Karpenter's termination controller deletes the Node (its finalizer is
	// Karpenter's too), then lifts the NodeClaim's finalizer.
	nodes := k.w.kc.Clientset().CoreV1().Nodes()
	if nc.Status.NodeName != "" {
		if _, err := nodes.Patch(k.ctx, nc.Status.NodeName, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			k.t.Fatalf("karpenter: node of %s: %v", name, err)
		}
		if err := nodes.Delete(k.ctx, nc.Status.NodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			k.t.Fatalf("karpenter: delete node of %s: %v", name, err)
		}
	}
	if _, err := k.claims().Patch(k.ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		k.t.Fatalf("karpenter: finalize %s: %v", name, err)
	}
}

// pending creates a pod that waits for a node, created now on the simulated clock.
func (k *karpenterActor) pending(namespace, name string, requests corev1.ResourceList) {
	k.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "batch"},
		Annotations: map[string]string{kubesim.SimCreatedAnnotation: k.w.clock.Now().UTC().Format(time.RFC3339Nano)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "public.ecr.aws/nginx/nginx:1.27",
			Resources: corev1.ResourceRequirements{Requests: requests}}}}}
	if _, err := k.w.kc.Clientset().CoreV1().Pods(namespace).Create(k.ctx, p, metav1.CreateOptions{}); err != nil {
		k.t.Fatalf("create pod %s: %v", name, err)
	}
}

// TestShadowReportOn020 runs Joiner's provisioner and consolidator in shadow mode
// once a minute for 15 minutes on the adoption scenario's cluster (Karpenter's
// NodeClaims, Nodes and instances) on a real kube-apiserver, while Karpenter's
// work is written through the API: it removes the empty node, replaces the
// drifted one, launches a node for two pods that pend at minute 6, and replaces
// the expired one. `joiner record`'s snapshotter snapshots the cluster each
// minute; `joiner shadow report` compares the snapshots with the decisions.
func TestShadowReportOn020(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	env := kubetest.Shared(t)
	t.Setenv(handlers.EnvMode, handlers.ModeShadow)
	ctx := context.Background()
	w, err := newSimWorld(ctx, invokeFlags{scenario: "../../testdata/scenarios/020-adopt-from-karpenter", server: env.Config}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer w.sim.Close()
	defer func() {
		if err := w.kc.Cleanup(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}()
	// JOINER_SHADOW_DEMO_OUT keeps the two files (the README's report is
	// `joiner shadow report` run on them).
	dir := t.TempDir()
	if d := os.Getenv("JOINER_SHADOW_DEMO_OUT"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	snapFile, err := os.Create(filepath.Join(dir, snapshotsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer snapFile.Close()
	snaps := &snapshotter{cluster: kube.New(w.kc.Clients(), kube.Options{ClusterName: w.cluster, Identity: "joiner-record", Now: w.clock.Now}),
		out: snapFile, every: time.Minute, created: simCreated}
	var decisions bytes.Buffer
	fns := map[string]*handlers.Function{}
	for _, name := range []string{handlers.Provisioner, handlers.Consolidator} {
		if fns[name], err = handlers.NewFunction(name, w.newDeps(name)); err != nil {
			t.Fatal(err)
		}
		fns[name].MetricsOut = io.Discard
	}
	scheduled, err := os.ReadFile("../../events/scheduled-rule.json")
	if err != nil {
		t.Fatal(err)
	}
	start := w.clock.Now()
	tick := 0
	invoke := func(name string) {
		tick++
		ev := strings.ReplaceAll(string(scheduled), "123456789012", w.cfg.AccountID)
		ev = strings.Replace(ev, `"id": "`, fmt.Sprintf(`"id": "tick-%d-`, tick), 1)
		out, err := fns[name].Invoke(ctx, []byte(ev))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		decisions.Write(append(out, '\n'))
		var sum handlers.Summary
		_ = json.Unmarshal(out, &sum)
		t.Logf("%s +%s: %s (%d decision(s))", name, w.clock.Now().Sub(start).Round(time.Second), sum.Action, len(sum.Shadow))
		if name == handlers.Provisioner {
			for _, d := range sum.Shadow {
				t.Logf("   %+v", d)
			}
		}
	}
	k := &karpenterActor{t: t, ctx: ctx, w: w}
	sleepTo := func(d time.Duration) {
		if at := start.Add(d); w.clock.Now().Before(at) {
			if err := w.sleep(ctx, at.Sub(w.clock.Now())); err != nil {
				t.Fatal(err)
			}
		}
	}
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m"), corev1.ResourceMemory: resource.MustParse("3Gi")}
	for m := 0; m <= 15; m++ {
		sleepTo(time.Duration(m) * time.Minute)
		if err := snaps.take(ctx, w.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if m == 15 {
			break
		}
		// Joiner's consolidator tick, in shadow.
		invoke(handlers.Consolidator)
		// Karpenter, at the minute (its own controllers react within seconds).
		switch m {
		case 0:
			k.disrupt("default-b7mnc", "Empty") // consolidateAfter 0s
		case 1:
			k.finalize("default-b7mnc")
		case 2:
			k.launch("default-k1drf", "t3a.large", "us-east-1a", "subnet-0a0000000000000a1", "spot") // the drifted node's replacement
		case 3:
			k.initialize("default-k1drf")
			k.disrupt("default-c2rtv", "Drifted")
		case 4:
			k.finalize("default-c2rtv")
		case 6:
			k.pending("default", "batch-1", requests)
			k.pending("default", "batch-2", requests)
		case 9:
			k.launch("default-k3exp", "t3a.large", "us-east-1b", "subnet-0b0000000000000b1", "spot") // the expired node's replacement
		case 10:
			k.initialize("default-k3exp")
			k.disrupt("default-d9hjl", "Expired")
		case 11:
			k.finalize("default-d9hjl")
		}
		if _, err := w.kc.Step(ctx); err != nil {
			t.Fatal(err)
		}
		// Joiner's provisioner in shadow (pending pods reach it within seconds
		// through the forwarder), then Karpenter's provisioning 20 s later.
		invoke(handlers.Provisioner)
		sleepTo(time.Duration(m)*time.Minute + 20*time.Second)
		switch m {
		case 6:
			k.launch("default-k2pnd", "t3a.large", "us-east-1b", "subnet-0b0000000000000b1", "spot") // for the two pods
		case 7:
			k.initialize("default-k2pnd")
		}
	}
	decPath := filepath.Join(dir, "decisions.jsonl")
	if err := os.WriteFile(decPath, decisions.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := runShadow(ctx, []string{"report", "--snapshots", snapFile.Name(), "--decisions", decPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("joiner shadow report: exit %d\n%s", code, stderr.String())
	}
	t.Logf("joiner shadow report --snapshots snapshots.jsonl --decisions decisions.jsonl\n%s", stdout.String())

	rep, err := shadowReport(snapFile.Name(), decPath, "", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var kLaunched, kRemoved []string
	for _, n := range rep.Karpenter.Launched {
		kLaunched = append(kLaunched, n.NodeClaim)
	}
	for _, r := range rep.Karpenter.Removed {
		kRemoved = append(kRemoved, r.NodeClaim+" "+r.Reason)
	}
	if want := []string{"default-k1drf", "default-k2pnd", "default-k3exp"}; !slices.Equal(kLaunched, want) {
		t.Errorf("Karpenter launched %v, want %v", kLaunched, want)
	}
	if want := []string{"default-b7mnc Empty", "default-c2rtv Drifted", "default-d9hjl Expired"}; !slices.Equal(kRemoved, want) {
		t.Errorf("Karpenter removed %v, want %v", kRemoved, want)
	}
	if rep.Karpenter.Pods.Placed < 2 || rep.Karpenter.Pods.WaitMax <= 0 {
		t.Errorf("Karpenter's side: pods %+v; the two batch pods waited for a node", rep.Karpenter.Pods)
	}
	// Joiner's provisioner saw the two pods pending at 6:00, Karpenter launched at
	// 6:20: the launches are matched and Joiner's pods wait 20 s less.
	var pair *shadow.Pair
	for i, p := range rep.Matched {
		if p.Karpenter.NodeClaim == "default-k2pnd" {
			pair = &rep.Matched[i]
		}
	}
	if pair == nil {
		t.Fatalf("no Joiner launch matched with Karpenter's launch for the pending pods: matched %+v, Joiner only %+v", rep.Matched, rep.UnmatchedJoiner)
	}
	// Joiner decided at 6:00, Karpenter launched at 6:20.
	gap := pair.Karpenter.At.Sub(pair.Joiner.At)
	if !pair.Joiner.At.Equal(start.Add(6*time.Minute)) || gap != 20*time.Second {
		t.Errorf("Joiner's launch at %s, Karpenter's %s later; want 6m and 20s", pair.Joiner.At.Sub(start), gap)
	}
	// The two pods waited for Karpenter's node; on Joiner's side as long, less the gap.
	k2, j2 := rep.Karpenter.Pods, rep.Joiner.Pods
	if k2.Placed != 2 || j2.Placed != 2 || k2.WaitMax <= gap || j2.WaitMax != k2.WaitMax-gap || j2.WaitP50 != k2.WaitP50-gap {
		t.Errorf("pod waits: Karpenter %+v, Joiner %+v, gap %s", k2, j2, gap)
	}
	if len(rep.Joiner.Removed) == 0 || rep.Joiner.Cost <= 0 || rep.Karpenter.Cost <= 0 {
		t.Errorf("Joiner removed %v; cost Karpenter $%.4f, Joiner $%.4f", rep.Joiner.Removed, rep.Karpenter.Cost, rep.Joiner.Cost)
	}
	for _, want := range []string{"nodes launched", "nodes removed", "nodes over time", "$/hour over time", "total cost", "pod wait", "launches (offsets"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// --snapshot-every needs a cluster, and records beside a queue or alone, never
// from a file; `joiner shadow report` names a missing or malformed file.
func TestShadowReportAndSnapshotFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		f    recordFlags
		want string
	}{
		{recordFlags{out: dir, snapshotEvery: time.Minute}, "--snapshot-every needs --kubeconfig"},
		{recordFlags{out: dir, snapshotEvery: time.Minute, kubeconfig: "k", from: "f"}, "not from a file"},
		{recordFlags{out: dir, snapshotEvery: -time.Minute, kubeconfig: "k"}, "must not be negative"},
		{recordFlags{out: dir, snapshotEvery: time.Minute, kubeconfig: "k", max: 3}, "--max is for --queue"},
		{recordFlags{out: dir, kubeconfig: "k"}, "give exactly one of --queue URL and --from FILE"},
		{recordFlags{out: dir, snapshotEvery: time.Minute, kubeconfig: "k", duration: time.Hour}, ""},
		{recordFlags{out: dir, snapshotEvery: time.Minute, kubeconfig: "k", queue: "https://sqs"}, ""},
	} {
		err := tc.f.check(0)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.want)
		}
	}
	snaps := filepath.Join(dir, "snapshots.jsonl")
	if err := os.WriteFile(snaps, []byte(`{"at":"2026-12-04T03:00:00Z","nodeClaims":[]}`+"\n"+`{"at": "soon"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	decs := filepath.Join(dir, "decisions.jsonl")
	if err := os.WriteFile(decs, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"report", "--snapshots", snaps}, 2, "--snapshots FILE and --decisions FILE are required"},
		{[]string{"report", "--snapshots", filepath.Join(dir, "none"), "--decisions", decs}, 1, "none: no such file"},
		{[]string{"report", "--snapshots", snaps, "--decisions", decs}, 1, "snapshots.jsonl:2: not a snapshot"},
		{[]string{"compare"}, 2, "usage: joiner shadow report"},
	} {
		var stdout, stderr bytes.Buffer
		code := runShadow(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("joiner shadow %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

// joiner record --snapshot-every without a queue snapshots the cluster of a
// kubeconfig (a real API server) for --duration, one JSON line each, into
// DIR/snapshots.jsonl, which joiner shadow report reads back.
func TestRecordSnapshotsOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	env := kubetest.Shared(t)
	out := filepath.Join(t.TempDir(), "day")
	var stdout, stderr bytes.Buffer
	code := runRecord(context.Background(), []string{"--out", out, "--kubeconfig", env.Kubeconfig, "--snapshot-every", "1s", "--duration", "2500ms"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("joiner record: exit %d\n%s", code, stderr.String())
	}
	f, err := os.Open(filepath.Join(out, snapshotsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	snaps, err := shadow.ReadSnapshots(f, snapshotsFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) < 2 || !strings.Contains(stdout.String(), fmt.Sprintf("%d snapshot(s) of the cluster", len(snaps))) {
		t.Errorf("%d snapshot(s); stdout %q", len(snaps), stdout.String())
	}
	if _, err := os.Stat(filepath.Join(out, replay.ScenarioFile)); err == nil {
		t.Error("a snapshots-only recording wrote a scenario")
	}
	// Recording into the same folder again is refused: the snapshots stay.
	if code := runRecord(context.Background(), []string{"--out", out, "--kubeconfig", env.Kubeconfig, "--snapshot-every", "1s", "--duration", "1s"}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "already holds a snapshots.jsonl") {
		t.Errorf("second recording: exit %d, %s", code, stderr.String())
	}
}
