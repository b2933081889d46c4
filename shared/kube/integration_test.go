package kube_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/lifecycle"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// functionsConfig acts as Joiner's functions do on EKS: a user in group joiner:functions.
func functionsConfig(env *kubetest.Env) *rest.Config {
	return env.Impersonate("arn:aws:sts::123456789012:assumed-role/joiner-functions/provisioner", "joiner:functions")
}

// joinerClient is a Client with only the permissions deploy/ grants the functions.
func joinerClient(t testing.TB, env *kubetest.Env, cluster string, now func() time.Time) *kube.Client {
	t.Helper()
	clients, err := kube.NewClients(functionsConfig(env))
	if err != nil {
		t.Fatal(err)
	}
	return kube.New(clients, kube.Options{ClusterName: cluster, Identity: "test/" + t.Name(), Now: now})
}

func admin(t testing.TB, env *kubetest.Env) (*kubernetes.Clientset, dynamic.Interface) {
	t.Helper()
	return kubernetes.NewForConfigOrDie(env.Config), dynamic.NewForConfigOrDie(env.Config)
}

// terminator records the instances it was asked to terminate, as the EC2 side would.
type terminator struct {
	mu   sync.Mutex
	done []string
}

func (f *terminator) Terminate(_ context.Context, nc *karpenter.NodeClaim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = append(f.done, nc.Name)
	return nil
}

func (f *terminator) terminated() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.done...)
}

func mustCreate(t testing.TB, dyn dynamic.Interface, yml string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(yml), 4096).Decode(&u.Object); err != nil {
		t.Fatal(err)
	}
	var err error
	switch u.GetKind() {
	case "NodePool":
		_, err = dyn.Resource(kube.NodePoolGVR).Create(context.Background(), u, metav1.CreateOptions{})
	case "EC2NodeClass":
		_, err = dyn.Resource(kube.NodeClassGVR).Create(context.Background(), u, metav1.CreateOptions{})
	default:
		t.Fatalf("mustCreate: kind %s", u.GetKind())
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func pool(name, class string) string {
	return fmt.Sprintf(`{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":%q},
"spec":{"template":{"metadata":{"labels":{"team":"ml"}},"spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":%q},
"taints":[{"key":"gpu","value":"true","effect":"NoSchedule"}],
"requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]}]}},
"disruption":{"consolidationPolicy":"WhenEmpty","consolidateAfter":"10m"},"limits":{"nvidia.com/gpu":"20"}}}`, name, class)
}

func nodeClass(name string) string {
	return fmt.Sprintf(`{"apiVersion":"karpenter.k8s.aws/v1","kind":"EC2NodeClass","metadata":{"name":%q},
"spec":{"amiSelectorTerms":[{"alias":"al2023@latest"}],"role":"KarpenterNodeRole-test",
"subnetSelectorTerms":[{"tags":{"karpenter.sh/discovery":"test"}}],"securityGroupSelectorTerms":[{"tags":{"karpenter.sh/discovery":"test"}}]}}`, name)
}

func newClaim(poolName string) *karpenter.NodeClaim {
	return &karpenter.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{karpenter.NodePoolLabelKey: poolName, "team": "ml"}},
		Spec: karpenter.NodeClaimSpec{
			NodeClassRef: &karpenter.NodeClassReference{Group: karpenter.AWSGroup, Kind: karpenter.NodeClassKind, Name: "gpu"},
			Taints:       []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			Requirements: []karpenter.NodeSelectorRequirementWithMinValues{{Key: karpenter.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			Resources:    karpenter.ResourceRequirements{Requests: corev1.ResourceList{karpenter.ResourceNVIDIAGPU: resource.MustParse("1")}},
		},
	}
}

func gpuLaunch(id string) kube.Launch {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods: resource.MustParse("58"), karpenter.ResourceNVIDIAGPU: resource.MustParse("1")}
	return kube.Launch{ProviderID: "aws:///us-east-1a/" + id, InstanceType: "g6.xlarge", Zone: "us-east-1a", CapacityType: "on-demand",
		ImageID: "ami-0123456789abcdef0", Capacity: rl, Allocatable: rl, Labels: map[string]string{"kubernetes.io/arch": "amd64"}}
}

// createNode plays the kubelet registering: a Node with the providerID and the
// karpenter.sh/unregistered taint, status written afterwards.
func createNode(t testing.TB, cs kubernetes.Interface, name, providerID string, labels map[string]string, ready bool, alloc corev1.ResourceList) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID,
		Taints: []corev1.Taint{{Key: karpenter.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}}}}
	n, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return setNodeStatus(t, cs, n, ready, alloc)
}

func setNodeStatus(t testing.TB, cs kubernetes.Interface, n *corev1.Node, ready bool, alloc corev1.ResourceList) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	n.Status.Capacity, n.Status.Allocatable = alloc, alloc
	n, err = cs.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func condition(nc *karpenter.NodeClaim, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(nc.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func getClaim(t testing.TB, dyn dynamic.Interface, name string) (*karpenter.NodeClaim, error) {
	t.Helper()
	u, err := dyn.Resource(kube.NodeClaimGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return kube.NodeClaimFromUnstructured(u)
}

func reconcile(t testing.TB, c *kube.Client, term kube.InstanceTerminator) (*kube.ClusterState, *kube.ReconcileReport) {
	t.Helper()
	ctx := context.Background()
	st, err := c.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep := kube.Reconcile(ctx, c, st, c.Now(), term)
	if err := errors.Join(rep.Errors...); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return st, rep
}

func inFlight(st *kube.ClusterState, name string) bool {
	for _, nc := range st.Snapshot.InFlight {
		if nc.Name == name {
			return true
		}
	}
	return false
}

func inNodes(st *kube.ClusterState, name string) bool {
	for _, ns := range st.Snapshot.Nodes {
		if ns.Node.Name == name {
			return true
		}
	}
	return false
}

// TestNodeClaimLifecycle runs a GPU NodeClaim through Karpenter's lifecycle against the
// real API server, as the functions' RBAC allows: created before launch, launched,
// registered when "its" Node appears, initialized only once the GPU is advertised
// (in-flight until then), timed out when no node comes, finalized on deletion.
func TestNodeClaimLifecycle(t *testing.T) {
	env := kubetest.Shared(t)
	cs, dyn := admin(t, env)
	ctx := context.Background()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	c := joinerClient(t, env, "lifecycle", now)
	term := &terminator{}
	mustCreate(t, dyn, nodeClass("gpu"))
	mustCreate(t, dyn, pool("gpu", "gpu"))

	nc, err := c.CreateNodeClaim(ctx, newClaim("gpu"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(nc.Name, "gpu-") || !reflect.DeepEqual(nc.Finalizers, []string{karpenter.TerminationFinalizer}) {
		t.Fatalf("created %s with finalizers %v", nc.Name, nc.Finalizers)
	}
	// No conditions until the launch is recorded, as Karpenter writes them.
	if len(nc.Status.Conditions) != 0 {
		t.Errorf("conditions before launch: %+v", nc.Status.Conditions)
	}
	if nc.Spec.ExpireAfter.String() != "720h0m0s" {
		t.Errorf("expireAfter %q, want the CRD default 720h", nc.Spec.ExpireAfter.String())
	}
	st, err := c.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !inFlight(st, nc.Name) {
		t.Error("a NodeClaim created before launch must already count as in-flight")
	}

	id := "i-0a00000000000001"
	if nc, err = c.MarkLaunched(ctx, nc.Name, gpuLaunch(id)); err != nil {
		t.Fatal(err)
	}
	if nc.Labels[kube.LabelInstanceType] != "g6.xlarge" || nc.Status.ProviderID != "aws:///us-east-1a/"+id || condition(nc, karpenter.ConditionLaunched).Status != metav1.ConditionTrue {
		t.Fatalf("after launch: labels %v status %+v", nc.Labels, nc.Status)
	}
	out, err := env.Kubectl("get", "nodeclaims", nc.Name)
	if err != nil {
		t.Fatal(err, out)
	}
	// NODE is still empty, so the row has six fields.
	if fields := strings.Fields(strings.Split(out, "\n")[1]); len(fields) != 6 || fields[1] != "g6.xlarge" || fields[2] != "on-demand" || fields[3] != "us-east-1a" || fields[4] != "Unknown" {
		t.Errorf("kubectl get nodeclaims:\n%s", out)
	}

	// The kubelet registers, not Ready yet.
	node := createNode(t, cs, id, "aws:///us-east-1a/"+id, map[string]string{"node.lifecycle": "karpenter"}, false, nil)
	_, rep := reconcile(t, c, term)
	if !reflect.DeepEqual(rep.Registered, []string{nc.Name}) {
		t.Fatalf("registered %v", rep.Registered)
	}
	node, _ = cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	for k, v := range map[string]string{karpenter.NodePoolLabelKey: "gpu", karpenter.NodeClaimLabelKey: nc.Name, karpenter.NodeRegisteredLabelKey: "true",
		"team": "ml", kube.LabelInstanceType: "g6.xlarge", "node.lifecycle": "karpenter"} {
		if node.Labels[k] != v {
			t.Errorf("node label %s=%q, want %q", k, node.Labels[k], v)
		}
	}
	var taintKeys []string
	for _, tn := range node.Spec.Taints {
		taintKeys = append(taintKeys, tn.Key)
	}
	if !contains(taintKeys, "gpu") || contains(taintKeys, karpenter.UnregisteredTaintKey) {
		t.Errorf("node taints %v: want gpu synced and %s removed", taintKeys, karpenter.UnregisteredTaintKey)
	}
	nc, _ = getClaim(t, dyn, nc.Name)
	if nc.Status.NodeName != node.Name || condition(nc, karpenter.ConditionRegistered).Status != metav1.ConditionTrue {
		t.Errorf("claim after registration: nodeName %q, Registered %+v", nc.Status.NodeName, condition(nc, karpenter.ConditionRegistered))
	}

	// Ready, but the device plugin has not advertised the GPU: still in-flight.
	setNodeStatus(t, cs, node, true, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("58")})
	st, rep = reconcile(t, c, term)
	if len(rep.Initialized) != 0 {
		t.Fatalf("initialized without its GPU: %v", rep.Initialized)
	}
	nc, _ = getClaim(t, dyn, nc.Name)
	if cd := condition(nc, karpenter.ConditionInitialized); cd.Reason != lifecycle.ReasonResourceNotRegistered || !strings.Contains(cd.Message, "nvidia.com/gpu") {
		t.Errorf("Initialized while the GPU is missing: %+v", cd)
	}
	if st, _ = reconcile(t, c, term); !inFlight(st, nc.Name) || inNodes(st, node.Name) {
		t.Error("until initialized, the claim's capacity must be in-flight and its node out of Snapshot.Nodes")
	}

	// The device plugin starts.
	setNodeStatus(t, cs, node, true, gpuLaunch(id).Allocatable)
	_, rep = reconcile(t, c, term)
	if !reflect.DeepEqual(rep.Initialized, []string{nc.Name}) {
		t.Fatalf("initialized %v", rep.Initialized)
	}
	st, _ = reconcile(t, c, term)
	if inFlight(st, nc.Name) || !inNodes(st, node.Name) {
		t.Error("an initialized claim's node must be a snapshot node, not in-flight")
	}
	nc, _ = getClaim(t, dyn, nc.Name)
	if condition(nc, karpenter.ConditionReady).Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", condition(nc, karpenter.ConditionReady))
	}
	u, _ := dyn.Resource(kube.NodePoolGVR).Get(ctx, "gpu", metav1.GetOptions{})
	np, _ := kube.NodePoolFromUnstructured(u)
	if q := np.Status.Resources[karpenter.ResourceNVIDIAGPU]; q.Value() != 1 || np.Status.NodeCount != 1 {
		t.Errorf("NodePool status %+v, want nvidia.com/gpu 1 and 1 node", np.Status)
	}
	if out, err := env.Kubectl("get", "nodepools", "gpu"); err != nil || !strings.Contains(strings.Split(out, "\n")[1], " 1 ") {
		t.Errorf("kubectl get nodepools (NODES column):\n%s %v", out, err)
	}
	assertEvents(t, cs, nc.Name, kube.ReasonLaunched, kube.ReasonRegistered, kube.ReasonInitialized)

	// A second claim whose instance never registers.
	lost, err := c.CreateNodeClaim(ctx, newClaim("gpu"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.MarkLaunched(ctx, lost.Name, gpuLaunch("i-0a00000000000002")); err != nil {
		t.Fatal(err)
	}
	if _, rep = reconcile(t, c, term); len(rep.TimedOut) != 0 {
		t.Fatalf("timed out too early: %v", rep.TimedOut)
	}
	offset.Store(int64(16 * time.Minute))
	_, rep = reconcile(t, c, term)
	if !reflect.DeepEqual(rep.TimedOut, []string{lost.Name}) || !contains(term.terminated(), lost.Name) {
		t.Fatalf("after 16 minutes: timed out %v, terminated %v", rep.TimedOut, term.terminated())
	}
	if _, err := getClaim(t, dyn, lost.Name); !apierrors.IsNotFound(err) {
		t.Errorf("timed-out claim still there: %v", err)
	}
	assertEvents(t, cs, lost.Name, kube.ReasonRegistrationTimeout)

	// Deleting a NodeClaim: the finalizer holds it until the instance is terminated.
	if err := c.DeleteNodeClaim(ctx, nc.Name); err != nil {
		t.Fatal(err)
	}
	if held, err := getClaim(t, dyn, nc.Name); err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("finalizer did not hold the claim: %v", err)
	}
	_, rep = reconcile(t, c, term)
	if !reflect.DeepEqual(rep.Finalized, []string{nc.Name}) || !contains(term.terminated(), nc.Name) {
		t.Fatalf("finalized %v, terminated %v", rep.Finalized, term.terminated())
	}
	if _, err := getClaim(t, dyn, nc.Name); !apierrors.IsNotFound(err) {
		t.Errorf("claim still there after finalization: %v", err)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node still there after its instance was terminated: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// assertEvents checks that Joiner recorded Events with these reasons about name.
func assertEvents(t testing.TB, cs kubernetes.Interface, name string, reasons ...string) {
	t.Helper()
	evs, err := cs.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range evs.Items {
		if e.Regarding.Name == name && e.ReportingController == kube.ReportingController && e.Note != "" {
			seen[e.Reason] = true
		}
	}
	for _, r := range reasons {
		if !seen[r] {
			t.Errorf("no %s Event on %s (saw %v)", r, name, seen)
		}
	}
}

// kubelet plays the part of the missing kubelet: pods being deleted on its nodes go
// away at once (an evicted pod bound to a node otherwise stays Terminating forever).
func kubelet(ctx context.Context, cs kubernetes.Interface, ns string) {
	for ctx.Err() == nil {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil {
					_ = cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func runningPod(name, ns, node string, labels map[string]string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To(int64(5)),
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
	for _, m := range mut {
		m(p)
	}
	return p
}

// TestDrainBlockedByPDBThenAllowed disrupts a node whose pod a PDB protects: the drain
// evicts what it may, stops at its deadline with the pod still there, and the abandoned
// disruption removes its taint; once the PDB allows it, the drain finishes and the node,
// its NodeClaim and its instance go.
func TestDrainBlockedByPDBThenAllowed(t *testing.T) {
	env := kubetest.Shared(t)
	cs, dyn := admin(t, env)
	ctx := context.Background()
	c := joinerClient(t, env, "drain", nil)
	term := &terminator{}
	mustCreate(t, dyn, nodeClass("gpu"))
	mustCreate(t, dyn, pool("gpu", "gpu"))
	ns := "drain"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kctx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	go kubelet(kctx, cs, ns)

	nc, err := c.CreateNodeClaim(ctx, newClaim("gpu"))
	if err != nil {
		t.Fatal(err)
	}
	id := "i-0d00000000000001"
	if _, err = c.MarkLaunched(ctx, nc.Name, gpuLaunch(id)); err != nil {
		t.Fatal(err)
	}
	node := createNode(t, cs, id, "aws:///us-east-1a/"+id, nil, true, gpuLaunch(id).Allocatable)
	reconcile(t, c, term) // registers: the node gets the nodepool label

	for _, p := range []*corev1.Pod{
		runningPod("web-1", ns, node.Name, map[string]string{"app": "web"}),
		runningPod("free-1", ns, node.Name, nil),
		runningPod("agent", ns, node.Name, nil, func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: ptr.To(true)}}
		}),
	} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		markReady(t, cs, ns, p.Name)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if pdb, err = cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	writePDBStatus := func(allowed int32) {
		t.Helper()
		cur, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: cur.Generation, DisruptionsAllowed: allowed,
			CurrentHealthy: 1, DesiredHealthy: 1 - allowed, ExpectedPods: 1}
		if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	writePDBStatus(0)

	st, err := c.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.PDBs) == 0 {
		t.Error("snapshot has no PDBs")
	}
	d, err := c.BeginDisruption(ctx, st, node.Name, kube.DisruptOptions{Reason: "Underutilized"})
	if err != nil {
		t.Fatal(err)
	}
	if !hasTaint(t, cs, node.Name, karpenter.DisruptedTaintKey) {
		t.Fatal("node not tainted karpenter.sh/disrupted")
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	start := time.Now()
	res, err := d.Drain(dctx, kube.DrainOptions{RetryInitial: 200 * time.Millisecond, RetryMax: 500 * time.Millisecond})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 6*time.Second {
		t.Fatalf("blocked drain: err %v after %v, want the context deadline (no hidden client-go retries)", err, time.Since(start))
	}
	if !reflect.DeepEqual(res.Remaining, []string{ns + "/web-1"}) || !contains(res.Evicted, ns+"/free-1") || !contains(res.Skipped, ns+"/agent") {
		t.Fatalf("blocked drain result %+v", res)
	}
	d.Abandon(ctx)
	if hasTaint(t, cs, node.Name, karpenter.DisruptedTaintKey) {
		t.Fatal("abandoned disruption left the node tainted")
	}
	assertEvents(t, cs, "web-1", kube.ReasonDisruptionBlocked)
	assertEvents(t, cs, "free-1", kube.ReasonEvicted)
	assertEvents(t, cs, node.Name, kube.ReasonDisrupting, kube.ReasonFailedDraining, kube.ReasonDisruptionAbandoned)

	writePDBStatus(1)
	if st, err = c.ReadState(ctx); err != nil {
		t.Fatal(err)
	}
	d, err = c.BeginDisruption(ctx, st, node.Name, kube.DisruptOptions{Reason: "Underutilized"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Abandon(ctx)
	dctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	res, err = d.Drain(dctx, kube.DrainOptions{RetryInitial: 200 * time.Millisecond})
	cancel()
	if err != nil || len(res.Remaining) != 0 || !contains(res.Evicted, ns+"/web-1") {
		t.Fatalf("allowed drain: %v %+v", err, res)
	}
	if err := d.Complete(ctx, term); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node not deleted: %v", err)
	}
	if _, err := getClaim(t, dyn, nc.Name); !apierrors.IsNotFound(err) || !contains(term.terminated(), nc.Name) {
		t.Errorf("claim %v, terminated %v", err, term.terminated())
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "agent", metav1.GetOptions{}); err != nil {
		t.Errorf("the DaemonSet pod must not be evicted: %v", err)
	}
}

// markReady plays the kubelet reporting a running, ready pod: the eviction API lets an
// unready pod go even when its PDB allows no disruption.
func markReady(t testing.TB, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	patch := []byte(`{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"},{"type":"PodScheduled","status":"True"}]}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(context.Background(), name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

func hasTaint(t testing.TB, cs kubernetes.Interface, node, key string) bool {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range n.Spec.Taints {
		if tn.Key == key {
			return true
		}
	}
	return false
}

// TestLeaseContention: goroutines contending for the cluster's Lease never hold it at
// the same time; a holder that stops renewing (crashed) loses it after its duration;
// a renewing holder keeps it; TryAcquire gives up after its wait.
func TestLeaseContention(t *testing.T) {
	env := kubetest.Shared(t)
	clients, err := kube.NewClients(functionsConfig(env))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var inside, maxInside, turns atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l := kube.NewLease(clients.Coordination, "race", fmt.Sprintf("worker-%d", i), 5*time.Second, nil, nil)
			for round := 0; round < 3; round++ {
				if err := l.TryAcquire(ctx, 30*time.Second); err != nil {
					t.Errorf("worker %d: %v", i, err)
					return
				}
				n := inside.Add(1)
				if n > maxInside.Load() {
					maxInside.Store(n)
				}
				time.Sleep(30 * time.Millisecond)
				inside.Add(-1)
				turns.Add(1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("worker %d release: %v", i, err)
				}
			}
		}(i)
	}
	wg.Wait()
	if maxInside.Load() != 1 || turns.Load() != 12 {
		t.Fatalf("max holders at once %d (want 1), turns %d (want 12)", maxInside.Load(), turns.Load())
	}

	crashed := kube.NewLease(clients.Coordination, "crash", "provisioner/crashed", 2*time.Second, nil, nil)
	if err := crashed.TryAcquire(ctx, 0); err != nil {
		t.Fatal(err)
	}
	next := kube.NewLease(clients.Coordination, "crash", "interruption/next", 2*time.Second, nil, nil)
	start := time.Now()
	err = next.TryAcquire(ctx, 300*time.Millisecond)
	var held *kube.HeldError
	if !errors.As(err, &held) || held.Holder != "provisioner/crashed" || !errors.Is(err, kube.ErrLeaseHeld) {
		t.Fatalf("want HeldError naming the holder, got %v", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("TryAcquire waited %v for a 300ms wait", waited)
	}
	if err := next.TryAcquire(ctx, 5*time.Second); err != nil {
		t.Fatalf("crashed holder's lease did not expire: %v", err)
	}
	if err := crashed.Renew(ctx); !errors.Is(err, kube.ErrLeaseLost) {
		t.Errorf("renewing a lost lease: %v, want ErrLeaseLost", err)
	}

	keeper := kube.NewLease(clients.Coordination, "keep", "consolidator/keeper", 2*time.Second, nil, nil)
	if err := keeper.TryAcquire(ctx, 0); err != nil {
		t.Fatal(err)
	}
	keeper.KeepAlive(ctx, nil)
	other := kube.NewLease(clients.Coordination, "keep", "provisioner/other", 2*time.Second, nil, nil)
	if err := other.TryAcquire(ctx, 3*time.Second); !errors.Is(err, kube.ErrLeaseHeld) {
		t.Fatalf("a renewed lease was taken: %v", err)
	}
	if err := keeper.Release(ctx); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := other.TryAcquire(ctx, 3*time.Second); err != nil || time.Since(start) > time.Second {
		t.Fatalf("after release: %v in %v", err, time.Since(start))
	}
}

// TestRBAC: the functions' ClusterRole covers what the Client does (the lifecycle and
// drain tests run as group joiner:functions) and nothing broad; the forwarder's
// ServiceAccount may only read pods.
func TestRBAC(t *testing.T) {
	env := kubetest.Shared(t)
	ctx := context.Background()
	fwd := kubernetes.NewForConfigOrDie(env.Impersonate("system:serviceaccount:joiner:joiner-forwarder", "system:serviceaccounts", "system:serviceaccounts:joiner", "system:authenticated"))
	if _, err := fwd.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("forwarder list pods: %v", err)
	}
	w, err := fwd.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("forwarder watch pods: %v", err)
	} else {
		w.Stop()
	}
	denied := map[string]error{}
	_, denied["patch node"] = fwd.CoreV1().Nodes().Patch(ctx, "any", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	_, denied["list nodes"] = fwd.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	denied["evict"] = fwd.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}})
	_, denied["list nodeclaims"] = dynamic.NewForConfigOrDie(env.Impersonate("system:serviceaccount:joiner:joiner-forwarder", "system:serviceaccounts")).Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})

	fn := kubernetes.NewForConfigOrDie(functionsConfig(env))
	_, denied["functions get secrets"] = fn.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	denied["functions delete namespace"] = fn.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{})
	_, denied["functions leases outside joiner"] = fn.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
	_, denied["functions update pods"] = fn.CoreV1().Pods("default").Update(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}, metav1.UpdateOptions{})
	for what, err := range denied {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	if _, err := fn.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("functions list nodes: %v", err)
	}
}

// TestKubectlApplyKustomize: installing deploy/ as the README says works (again: the
// harness already installed it) and kubectl shows Karpenter's columns and short names.
func TestKubectlApplyKustomize(t *testing.T) {
	env := kubetest.Shared(t)
	out, err := env.ApplyDeploy()
	if err != nil {
		t.Fatalf("kubectl apply --server-side -k deploy/: %v\n%s", err, out)
	}
	for _, want := range []string{"customresourcedefinition.apiextensions.k8s.io/nodeclaims.karpenter.sh", "namespace/joiner",
		"clusterrole.rbac.authorization.k8s.io/joiner ", "clusterrole.rbac.authorization.k8s.io/joiner-forwarder", "role.rbac.authorization.k8s.io/joiner-lease"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	headers := map[string]string{
		"nodeclaims":     "NAME TYPE CAPACITY ZONE NODE READY AGE",
		"nodepools":      "NAME NODECLASS NODES READY AGE",
		"ec2nodeclasses": "NAME READY AGE",
	}
	for res, want := range headers {
		mustCreateForHeader(t, env)
		out, err := env.Kubectl("get", res)
		if err != nil {
			t.Fatalf("kubectl get %s: %v\n%s", res, err, out)
		}
		if got := strings.Join(strings.Fields(strings.Split(out, "\n")[0]), " "); got != want {
			t.Errorf("kubectl get %s columns %q, want %q", res, got, want)
		}
	}
	for _, short := range []string{"ec2nc", "nodepool", "nodeclaim", "karpenter"} {
		if out, err := env.Kubectl("get", short); err != nil {
			t.Errorf("kubectl get %s: %v\n%s", short, err, out)
		}
	}
}

func mustCreateForHeader(t *testing.T, env *kubetest.Env) {
	_, dyn := admin(t, env)
	mustCreate(t, dyn, nodeClass("header"))
	mustCreate(t, dyn, pool("header", "header"))
	c := joinerClient(t, env, "header", nil)
	st, err := c.ReadState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range st.NodeClaims {
		if nc.Labels[karpenter.NodePoolLabelKey] == "header" {
			return
		}
	}
	if _, err := c.CreateNodeClaim(context.Background(), newClaim("header")); err != nil {
		t.Fatal(err)
	}
}

// TestCRDsAcceptSeedManifests applies every Karpenter object of the seed guides: the v1
// ones are accepted and read back unchanged (and decode into Joiner's types); the
// retired v1beta1 ones are refused.
func TestCRDsAcceptSeedManifests(t *testing.T) {
	env := kubetest.Shared(t)
	_, dyn := admin(t, env)
	ctx := context.Background()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.Config)))
	files, _ := filepath.Glob("testdata/seeds/*.yaml")
	filled, _ := filepath.Glob(filepath.Join(env.RepoRoot, "testdata", "seeds", "*-filled", "*.yaml"))
	files = append(files, filled...)
	accepted, refused := 0, 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		var created []func()
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			gvk := u.GroupVersionKind()
			if gvk.Group != karpenter.Group && gvk.Group != karpenter.AWSGroup {
				continue
			}
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if gvk.Version != "v1" {
				if err == nil || !meta.IsNoMatchError(err) {
					t.Errorf("%s: %s %s: want no match for the retired version, got %v", f, gvk, u.GetName(), err)
				}
				refused++
				continue
			}
			if err != nil {
				t.Fatalf("%s: %s: %v", f, gvk, err)
			}
			res := dyn.Resource(m.Resource)
			_ = res.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			waitGone(t, res, u.GetName())
			got, err := res.Create(ctx, u.DeepCopy(), metav1.CreateOptions{})
			if err != nil {
				t.Errorf("%s: %s %s refused: %v", f, gvk.Kind, u.GetName(), err)
				continue
			}
			name := u.GetName()
			created = append(created, func() { _ = res.Delete(ctx, name, metav1.DeleteOptions{}) })
			if path, ok := subset(u.Object["spec"], got.Object["spec"], "spec"); !ok {
				t.Errorf("%s: %s %s not read back unchanged at %s", f, gvk.Kind, u.GetName(), path)
			}
			switch gvk.Kind {
			case karpenter.NodePoolKind:
				_, err = kube.NodePoolFromUnstructured(got)
			case karpenter.NodeClassKind:
				_, err = kube.NodeClassFromUnstructured(got)
			case karpenter.NodeClaimKind:
				_, err = kube.NodeClaimFromUnstructured(got)
			}
			if err != nil {
				t.Errorf("%s: decode %s: %v", f, gvk.Kind, err)
			}
			accepted++
		}
		for _, del := range created {
			del()
		}
	}
	if accepted < 6 || refused < 2 {
		t.Errorf("accepted %d v1 objects and refused %d v1beta1 ones; want at least 6 and 2", accepted, refused)
	}
}

func waitGone(t *testing.T, res dynamic.NamespaceableResourceInterface, name string) {
	for i := 0; i < 100; i++ {
		if _, err := res.Get(context.Background(), name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not deleted", name)
}

// subset reports whether every value in want appears in got (defaults may add more).
func subset(want, got any, path string) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for k, v := range w {
			if p, ok := subset(v, g[k], path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := subset(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	default:
		return path, fmt.Sprint(want) == fmt.Sprint(got)
	}
}

// TestNodeClassStatusAsFunctions: with only the permissions deploy/ grants the
// functions, the EC2NodeClass status is written through the status subresource,
// replacing every field another controller left (its capacity reservations, its
// conditions), kubectl shows READY, and an unchanged status is not written again.
func TestNodeClassStatusAsFunctions(t *testing.T) {
	env := kubetest.Shared(t)
	ctx := context.Background()
	_, dyn := admin(t, env)
	mustCreate(t, dyn, nodeClass("status-test"))
	t.Cleanup(func() { _ = dyn.Resource(kube.NodeClassGVR).Delete(ctx, "status-test", metav1.DeleteOptions{}) })
	karpenters := `{"status":{"amis":[{"id":"ami-0old","requirements":[]}],"capacityReservations":[{"availabilityZone":"us-east-1a","id":"cr-0old","instanceMatchCriteria":"open","instanceType":"p5.48xlarge","ownerID":"123456789012"}],` +
		`"conditions":[{"type":"Ready","status":"False","reason":"UnhealthyDependents","message":"x","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	if _, err := dyn.Resource(kube.NodeClassGVR).Patch(ctx, "status-test", types.MergePatchType, []byte(karpenters), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	read := func() *karpenter.EC2NodeClass {
		u, err := dyn.Resource(kube.NodeClassGVR).Get(ctx, "status-test", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := kube.NodeClassFromUnstructured(u)
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}
	resolved := karpenter.EC2NodeClassStatus{
		Subnets:         []karpenter.Subnet{{ID: "subnet-0a", Zone: "us-east-1a", ZoneID: "use1-az1"}},
		SecurityGroups:  []karpenter.SecurityGroup{{ID: "sg-0a", Name: "nodes"}},
		AMIs:            []karpenter.AMI{{ID: "ami-0new", Name: "al2023", Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}},
		InstanceProfile: "test_123",
		Conditions: []metav1.Condition{{Type: "AMIsReady", Status: metav1.ConditionTrue, Reason: "AMIsReady"},
			{Type: karpenter.ConditionReady, Status: metav1.ConditionTrue, Reason: karpenter.ConditionReady}},
	}
	c := joinerClient(t, env, "status", nil)
	wrote, err := c.UpdateNodeClassStatus(ctx, read(), resolved)
	if err != nil || !wrote {
		t.Fatalf("UpdateNodeClassStatus as joiner:functions: wrote %v, %v", wrote, err)
	}
	got := read()
	if len(got.Status.CapacityReservations) != 0 || len(got.Status.AMIs) != 1 || got.Status.AMIs[0].ID != "ami-0new" || got.Status.InstanceProfile != "test_123" ||
		len(got.Status.Subnets) != 1 || len(got.Status.SecurityGroups) != 1 || len(got.Status.Conditions) != 2 {
		t.Fatalf("status after the write: %+v", got.Status)
	}
	for _, cd := range got.Status.Conditions {
		if cd.LastTransitionTime.Year() == 2026 && cd.LastTransitionTime.Month() == time.January {
			t.Errorf("condition %s changed status but kept lastTransitionTime %v", cd.Type, cd.LastTransitionTime)
		}
		if cd.ObservedGeneration != got.Generation {
			t.Errorf("condition %s observedGeneration %d, generation %d", cd.Type, cd.ObservedGeneration, got.Generation)
		}
	}
	if wrote, err := c.UpdateNodeClassStatus(ctx, got, resolved); err != nil || wrote {
		t.Errorf("unchanged status: wrote %v, %v; want no write", wrote, err)
	}
	out, err := env.Kubectl("get", "ec2nodeclass", "status-test")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "status-test True ") {
		t.Errorf("kubectl get ec2nodeclass:\n%s", out)
	}
	t.Logf("kubectl get ec2nodeclass status-test:\n%s", out)
	// The functions may patch the status, not replace the class.
	u, err := dyn.Resource(kube.NodeClassGVR).Get(ctx, "status-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dynamic.NewForConfigOrDie(functionsConfig(env)).Resource(kube.NodeClassGVR).Update(ctx, u, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("functions update ec2nodeclasses: %v, want Forbidden", err)
	}
}
