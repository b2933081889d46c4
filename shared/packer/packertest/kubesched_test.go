package packertest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	jfacts "github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

var (
	agreeRun      = flag.Bool("agree", false, "run TestPlansAgreeWithKubeScheduler (opt-in: 17 of 200 random clusters still disagree, issue 19 item 4)")
	agreeSeeds    = flag.Int("agree.seeds", 200, "number of random clusters TestPlansAgreeWithKubeScheduler hands to kube-scheduler")
	agreeFirst    = flag.Int64("agree.first", 1, "first seed of TestPlansAgreeWithKubeScheduler")
	agreeMaxPods  = flag.Int("agree.maxpods", 80, "largest pending-pod count of a cluster in TestPlansAgreeWithKubeScheduler")
	agreeBatch    = flag.Int("agree.batch", 20, "clusters TestPlansAgreeWithKubeScheduler materialises at once")
	agreeDump     = flag.Bool("agree.dump", false, "with each disagreeing cluster, log every pending pod's planned and bound node")
	agreeNominate = flag.Bool("agree.nominate", true, "set status.nominatedNodeName to each pod's planned node before its node turns schedulable, as Joiner does")
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// agreeLabel keeps each cluster's nodes apart: every pod of a cluster selects its
// value, and topology spread counts only the nodes a pod selects (nodeAffinityPolicy
// Honor, the default), so clusters share one scheduler without seeing each other.
// Pods are kept apart by namespace, which inter-pod affinity and spreading respect.
const agreeLabel = "packertest.joiner.sh/cluster"

// TestPlansAgreeWithKubeScheduler hands plans to the real kube-scheduler: for each
// random cluster of the property generator, the plan's nodes (existing, in-flight
// and new, with the labels, taints and allocatable it planned, and the DaemonSet
// pods it reserved room for) are created in a real API server, the new and
// in-flight ones still carrying karpenter.sh/unregistered as a registering node
// does; the pending pods are created; Joiner's nominations are written; the nodes
// turn schedulable; kube-scheduler (default profile) binds. Every pod the plan
// placed must be bound, and every pod it called unschedulable must stay pending.
// Run one cluster with
//
//	go test ./shared/packer/packertest -run TestPlansAgreeWithKubeScheduler -agree -agree.first 17 -agree.seeds 1 -v
func TestPlansAgreeWithKubeScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver, kube-scheduler and KWOK")
	}
	if !*agreeRun {
		// Not yet part of make test: 0 disagreements on the first 20 clusters, 55 pods in
		// 17 of 200 (binding-order effects of spread constraints, README "Scheduling
		// fidelity"; issue 19 item 4). make agree runs 200.
		t.Skip("opt-in with -agree (make agree): 17 of 200 random clusters still disagree with kube-scheduler (issue 19 item 4)")
	}
	s := kubetest.SharedScheduling(t)
	cfg := rest.CopyConfig(s.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	var all []*agreeCluster
	for seed := *agreeFirst; seed < *agreeFirst+int64(*agreeSeeds); seed++ {
		snap := workload.Random(seed, *agreeMaxPods)
		admissible(snap)
		all = append(all, &agreeCluster{seed: seed, snap: snap, plan: packer.Solve(snap, packer.Options{})})
	}
	var tally agreeTally
	start := time.Now()
	for i := 0; i < len(all); i += *agreeBatch {
		batch := all[i:min(i+*agreeBatch, len(all))]
		if err := runAgreeBatch(ctx, s, cs, batch, *agreeNominate); err != nil {
			t.Fatal(err)
		}
		for _, c := range batch {
			tally.add(c)
			for _, d := range c.disagreements {
				t.Errorf("seed %d: %s", c.seed, d)
			}
		}
	}
	t.Logf("%d clusters, %d pods planned onto nodes (%d onto new nodes), %d planned unschedulable; nominations %v: %d disagreement(s) (%d planned pod(s) left pending, %d unschedulable pod(s) bound); %d pod(s) bound to a node other than planned; %s",
		len(all), tally.placed, tally.onNew, tally.unschedulable, *agreeNominate, tally.pending+tally.wronglyBound, tally.pending, tally.wronglyBound, tally.elsewhere, time.Since(start).Round(time.Second))
}

// admissible drops what the API server would refuse from the generator's pods
// before the engine plans them, so the plan and the cluster hold the same pods: a
// second topology spread constraint with the topology key and whenUnsatisfiable of
// an earlier one (the pod validation rejects the pair as a duplicate).
func admissible(snap *packer.Snapshot) {
	for _, p := range snap.Pods {
		type key struct {
			topo string
			when corev1.UnsatisfiableConstraintAction
		}
		seen := map[key]bool{}
		var keep []corev1.TopologySpreadConstraint
		for _, c := range p.Spec.TopologySpreadConstraints {
			k := key{c.TopologyKey, c.WhenUnsatisfiable}
			if !seen[k] {
				seen[k] = true
				keep = append(keep, c)
			}
		}
		p.Spec.TopologySpreadConstraints = keep
	}
}

type agreeTally struct {
	placed, onNew, unschedulable, pending, wronglyBound, elsewhere int
}

func (t *agreeTally) add(c *agreeCluster) {
	t.placed += c.placed
	t.onNew += c.onNew
	t.unschedulable += len(c.plan.Unschedulable)
	t.pending += c.pending
	t.wronglyBound += c.wronglyBound
	t.elsewhere += c.elsewhere
}

// agreeCluster is one random cluster, its plan, and what the scheduler did with it.
type agreeCluster struct {
	seed int64
	snap *packer.Snapshot
	plan *packer.Plan

	// planned is each pending pod's planned node (real names), "" when unschedulable.
	planned map[types.NamespacedName]string
	nodes   []*corev1.Node
	// registering are the nodes that turn schedulable after the nominations.
	registering []string
	pods        []*corev1.Pod
	bound       []*corev1.Pod

	placed, onNew                    int
	pending, wronglyBound, elsewhere int
	disagreements                    []string
}

func (c *agreeCluster) nodeName(name string) string { return fmt.Sprintf("s%d-%s", c.seed, name) }
func (c *agreeCluster) namespace(ns string) string  { return fmt.Sprintf("agree-s%d-%s", c.seed, ns) }

// unregistered is the taint a Joiner node registers with.
var unregistered = corev1.Taint{Key: karpenter.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}

// build turns the snapshot and plan into the objects to create.
func (c *agreeCluster) build() error {
	part := fmt.Sprint(c.seed)
	c.planned = map[types.NamespacedName]string{}
	addNode := func(name string, labels map[string]string, taints []corev1.Taint, alloc corev1.ResourceList, registering bool) *corev1.Node {
		real := c.nodeName(name)
		lbl := make(map[string]string, len(labels)+2)
		for k, v := range labels {
			lbl[k] = v
		}
		lbl[corev1.LabelHostname] = real
		lbl[agreeLabel] = part
		karpenter.SetDeprecatedLabels(lbl) // as the kubelet and cloud node controller label it
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: real, Labels: lbl, Annotations: map[string]string{kubetest.KWOKAnnotation: "fake"}},
			Spec:   corev1.NodeSpec{Taints: append([]corev1.Taint(nil), taints...)},
			Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
		if registering {
			n.Spec.Taints = append([]corev1.Taint{unregistered}, n.Spec.Taints...)
			c.registering = append(c.registering, real)
		}
		c.nodes = append(c.nodes, n)
		return n
	}
	for _, ns := range c.snap.Nodes {
		n := addNode(ns.Node.Name, ns.Node.Labels, ns.Node.Spec.Taints, ns.Node.Status.Allocatable, false)
		for _, p := range ns.Pods {
			b := c.pod(p, part)
			b.Spec.NodeName = n.Name
			c.bound = append(c.bound, b)
		}
	}
	for _, nc := range c.snap.InFlight {
		labels, alloc, ok := inFlightNode(c.snap, nc)
		if !ok {
			continue
		}
		addNode(nc.Name, labels, nc.Spec.Taints, alloc, true)
	}
	for _, nn := range c.plan.NewNodes {
		alloc := corev1.ResourceList{}
		for k, v := range nn.Allocatable {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return fmt.Errorf("new node %s: allocatable %s=%q: %w", nn.Name, k, v, err)
			}
			alloc[corev1.ResourceName(k)] = q
		}
		addNode(nn.Name, nn.Labels, nn.Taints, alloc, true)
		for _, key := range nn.Pods {
			c.planned[c.podKey(key)] = c.nodeName(nn.Name)
			c.onNew++
		}
	}
	for _, en := range c.plan.ExistingNodes {
		for _, key := range en.Pods {
			c.planned[c.podKey(key)] = c.nodeName(en.Name)
		}
	}
	for _, u := range c.plan.Unschedulable {
		c.planned[c.podKey(u.Pod)] = ""
	}
	c.placed = len(c.planned) - len(c.plan.Unschedulable)
	// DaemonSet pods wherever the plan reserved room for them.
	for _, n := range c.nodes {
		for _, ds := range c.snap.DaemonSets {
			if !daemonLands(ds.Spec.Template.Spec, n) {
				continue
			}
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + n.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
				Spec: *ds.Spec.Template.Spec.DeepCopy()}
			b := c.pod(p, part)
			b.Spec.NodeName = n.Name
			b.Spec.NodeSelector = nil
			c.bound = append(c.bound, b)
		}
	}
	for _, p := range c.snap.Pods {
		q := c.pod(p, part)
		q.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: agreeGate}}
		c.pods = append(c.pods, q)
	}
	return nil
}

// pod copies a snapshot pod into the cluster's namespace, selecting its nodes.
func (c *agreeCluster) pod(p *corev1.Pod, part string) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: c.namespace(p.Namespace), Labels: p.Labels}, Spec: *p.Spec.DeepCopy()}
	out.Spec.NodeName = ""
	sel := map[string]string{agreeLabel: part}
	for k, v := range p.Spec.NodeSelector {
		sel[k] = v
	}
	out.Spec.NodeSelector = sel
	for i := range out.Spec.Containers {
		if out.Spec.Containers[i].Image == "" {
			out.Spec.Containers[i].Image = "registry.k8s.io/pause:3.10"
		}
	}
	for i := range out.Spec.InitContainers {
		if out.Spec.InitContainers[i].Image == "" {
			out.Spec.InitContainers[i].Image = "registry.k8s.io/pause:3.10"
		}
	}
	zero := int64(0)
	out.Spec.TerminationGracePeriodSeconds = &zero
	if len(out.Spec.Overhead) > 0 {
		// The API server takes a pod's overhead only from its RuntimeClass.
		out.Spec.RuntimeClassName = ptrTo(runtimeClassFor(out.Spec.Overhead))
		out.Spec.Overhead = nil
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// runtimeClassFor names the RuntimeClass carrying overhead (created by ensureRuntimeClasses).
func runtimeClassFor(overhead corev1.ResourceList) string {
	keys := make([]string, 0, len(overhead))
	for k, v := range overhead {
		keys = append(keys, string(k)+"-"+v.String())
	}
	sort.Strings(keys)
	return strings.ToLower(strings.NewReplacer(".", "-", "/", "-").Replace("overhead-" + strings.Join(keys, "-")))
}

// ensureRuntimeClasses creates the RuntimeClasses the batch's pods name.
func ensureRuntimeClasses(ctx context.Context, cs kubernetes.Interface, batch []*agreeCluster) error {
	seen := map[string]bool{}
	for _, c := range batch {
		for _, p := range c.snap.Pods {
			if len(p.Spec.Overhead) == 0 {
				continue
			}
			name := runtimeClassFor(p.Spec.Overhead)
			if seen[name] {
				continue
			}
			seen[name] = true
			rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: "runc", Overhead: &nodev1.Overhead{PodFixed: p.Spec.Overhead}}
			if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	return nil
}

func (c *agreeCluster) podKey(key string) types.NamespacedName {
	ns, name, _ := strings.Cut(key, "/")
	return types.NamespacedName{Namespace: c.namespace(ns), Name: name}
}

// inFlightNode is the node an in-flight NodeClaim becomes, as the engine counts it:
// its labels, the single-valued requirements they leave unset, its pool's labels and its type's
// labels; the type's allocatable with its class's overhead.
func inFlightNode(snap *packer.Snapshot, nc *karpenter.NodeClaim) (map[string]string, corev1.ResourceList, bool) {
	labels := map[string]string{}
	for k, v := range nc.Labels {
		labels[k] = v
	}
	for _, r := range nc.Spec.Requirements {
		if _, set := labels[r.Key]; !set && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	var class *karpenter.EC2NodeClass
	for _, p := range snap.NodePools {
		if p.Name != labels[karpenter.NodePoolLabelKey] {
			continue
		}
		for k, v := range p.Spec.Template.ObjectMeta.Labels {
			if _, ok := labels[k]; !ok {
				labels[k] = v
			}
		}
		for _, c := range snap.NodeClasses {
			if c.Name == p.Spec.Template.Spec.NodeClassRef.Name {
				class = c
			}
		}
	}
	it, ok := snap.Catalog.Lookup(labels[corev1.LabelInstanceTypeStable])
	if !ok {
		return nil, nil, false
	}
	for k, v := range catalog.InstanceLabels(it) {
		if _, ok := labels[k]; !ok {
			labels[k] = v
		}
	}
	return labels, catalog.Allocatable(it, catalog.OverheadFor(class)), true
}

// daemonLands reports whether a DaemonSet's pod runs on n: its required node
// affinity matches and it tolerates n's NoSchedule and NoExecute taints (the
// unregistered taint aside: the DaemonSet controller places pods on registering
// nodes, which is why the engine reserves room for them).
func daemonLands(spec corev1.PodSpec, n *corev1.Node) bool {
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: spec}).Match(n); err != nil || !ok {
		return false
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule || t.Key == karpenter.UnregisteredTaintKey {
			continue
		}
		tolerated := false
		for _, tol := range spec.Tolerations {
			if tol.ToleratesTaint(klog.Background(), t, true) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// runAgreeBatch materialises a batch of clusters, lets the scheduler bind, judges
// each cluster and removes what it created.
func runAgreeBatch(ctx context.Context, s *kubetest.Scheduling, cs kubernetes.Interface, batch []*agreeCluster, nominate bool) error {
	t0 := time.Now()
	phase := func(what string) {
		if testing.Verbose() {
			fmt.Printf("  batch at seed %d: %s after %s\n", batch[0].seed, what, time.Since(t0).Round(time.Millisecond))
		}
	}
	var nodes []*corev1.Node
	var bound, pending []*corev1.Pod
	namespaces := map[string]bool{}
	for _, c := range batch {
		if err := c.build(); err != nil {
			return fmt.Errorf("seed %d: %w", c.seed, err)
		}
		nodes = append(nodes, c.nodes...)
		bound = append(bound, c.bound...)
		pending = append(pending, c.pods...)
		for _, p := range append(append([]*corev1.Pod(nil), c.bound...), c.pods...) {
			namespaces[p.Namespace] = true
		}
	}
	defer cleanupAgree(cs, nodes, namespaces)
	if err := ensureRuntimeClasses(ctx, cs, batch); err != nil {
		return err
	}
	for ns := range namespaces {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	// Nodes first, Ready (a registering node's kubelet is up; karpenter.sh/unregistered
	// alone keeps pods off), then the pods already running and the DaemonSet pods.
	if err := parallel(ctx, nodes, func(ctx context.Context, n *corev1.Node) error { return createNode(ctx, cs, n) }); err != nil {
		return err
	}
	create := func(ctx context.Context, p *corev1.Pod) error {
		_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	}
	if err := parallel(ctx, bound, create); err != nil {
		return err
	}
	// The pending pods, held by a scheduling gate: the snapshot calls them pending,
	// so the scheduler must not bind them before the plan is known (in a cluster it
	// would have tried them, and those fitting an existing node would not be
	// pending at all; the generator does not know that).
	if err := parallel(ctx, pending, create); err != nil {
		return err
	}
	phase(fmt.Sprintf("%d nodes, %d running and %d pending pods created", len(nodes), len(bound), len(pending)))
	if nominate {
		var nominations []*corev1.Pod
		for _, c := range batch {
			for _, p := range c.pods {
				if node := c.planned[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]; node != "" {
					q := p.DeepCopy()
					q.Status.NominatedNodeName = node
					nominations = append(nominations, q)
				}
			}
		}
		if err := parallel(ctx, nominations, func(ctx context.Context, p *corev1.Pod) error { return nominatePod(ctx, cs, p) }); err != nil {
			return err
		}
	}
	var registering []string
	for _, c := range batch {
		registering = append(registering, c.registering...)
	}
	if err := parallel(ctx, registering, func(ctx context.Context, name string) error { return liftUnregistered(ctx, cs, name) }); err != nil {
		return err
	}
	if err := parallel(ctx, pending, func(ctx context.Context, p *corev1.Pod) error { return ungate(ctx, cs, p) }); err != nil {
		return err
	}
	phase("nominated, nodes schedulable, pods released")
	if err := s.Scheduler.Settle(ctx); err != nil {
		return err
	}
	phase("scheduler settled")
	for _, c := range batch {
		if err := c.judge(ctx, cs); err != nil {
			return fmt.Errorf("seed %d: %w", c.seed, err)
		}
	}
	return nil
}

// judge compares where the scheduler put each pending pod with the plan. Replicas
// of one group (same namespace, labels and spec) are interchangeable: the plan
// cannot say which replica the scheduler takes first, and two replicas trading
// places change nothing a user sees. So per group, as many pods must be bound as
// the plan placed, no more and no fewer; a planned pod left pending while another
// replica of its group took its place is counted as bound elsewhere.
func (c *agreeCluster) judge(ctx context.Context, cs kubernetes.Interface) error {
	live, err := c.list(ctx, cs)
	if err != nil {
		return err
	}
	keys := make([]types.NamespacedName, 0, len(c.planned))
	for k := range c.planned {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	type group struct {
		placed, bound      int
		pending, unplanned []string
	}
	groups := map[string]*group{}
	var order []string
	// Grouped as created: the API server adds per-pod fields (the service account
	// token volume's random name).
	groupOf := make(map[types.NamespacedName]string, len(c.pods))
	for _, p := range c.pods {
		groupOf[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = replicaGroup(p)
	}
	for _, k := range keys {
		want := c.planned[k]
		got := live[k]
		if got == nil {
			return fmt.Errorf("pod %s is gone", k)
		}
		gk := groupOf[k]
		g := groups[gk]
		if g == nil {
			g = &group{}
			groups[gk] = g
			order = append(order, gk)
		}
		if want != "" {
			g.placed++
		}
		if got.Spec.NodeName != "" {
			g.bound++
		}
		switch {
		case want != "" && got.Spec.NodeName == "":
			g.pending = append(g.pending, fmt.Sprintf("%s planned onto %s stayed pending: %s", k, want, schedulingMessage(got)))
		case want == "" && got.Spec.NodeName != "":
			g.unplanned = append(g.unplanned, fmt.Sprintf("%s planned unschedulable was bound to %s", k, got.Spec.NodeName))
		case want != "" && got.Spec.NodeName != want:
			c.elsewhere++
		}
	}
	defer func() {
		if !*agreeDump || len(c.disagreements) == 0 {
			return
		}
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "\n  %s: planned %q, bound %q", k, c.planned[k], live[k].Spec.NodeName)
		}
		for _, n := range c.nodes {
			on, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
			if err != nil {
				continue
			}
			var cpu resource.Quantity
			var names []string
			for i := range on.Items {
				q := jfacts.PodRequests(&on.Items[i])[corev1.ResourceCPU]
				cpu.Add(q)
				names = append(names, fmt.Sprintf("%s/%s=%s", on.Items[i].Namespace, on.Items[i].Name, q.String()))
			}
			fmt.Fprintf(&b, "\n  node %s allocatable cpu %s, pods request %s: %s", n.Name, n.Status.Allocatable.Cpu(), cpu.String(), strings.Join(names, " "))
		}
		c.disagreements = append(c.disagreements, "placements:"+b.String())
	}()
	for _, gk := range order {
		g := groups[gk]
		switch {
		case g.bound < g.placed:
			c.pending += g.placed - g.bound
			c.disagreements = append(c.disagreements, fmt.Sprintf("%d of %d planned pod(s) of a group left pending: %s", g.placed-g.bound, g.placed, strings.Join(g.pending, "; ")))
		case g.bound > g.placed:
			c.wronglyBound += g.bound - g.placed
			c.disagreements = append(c.disagreements, fmt.Sprintf("%d pod(s) of a group planned unschedulable were bound: %s", g.bound-g.placed, strings.Join(g.unplanned, "; ")))
		default:
			c.elsewhere += len(g.pending)
		}
	}
	return nil
}

// replicaGroup is the key of p's replica group: namespace, labels and spec.
func replicaGroup(p *corev1.Pod) string {
	b, err := json.Marshal(struct {
		NS     string
		Labels map[string]string
		Spec   *corev1.PodSpec
	}{p.Namespace, p.Labels, &p.Spec})
	if err != nil {
		return p.Namespace + "/" + p.Name
	}
	return string(b)
}

// list reads the cluster's pods.
func (c *agreeCluster) list(ctx context.Context, cs kubernetes.Interface) (map[types.NamespacedName]*corev1.Pod, error) {
	out := map[types.NamespacedName]*corev1.Pod{}
	done := map[string]bool{}
	for _, p := range c.pods {
		if done[p.Namespace] {
			continue
		}
		done[p.Namespace] = true
		list, err := cs.CoreV1().Pods(p.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			out[types.NamespacedName{Namespace: p.Namespace, Name: list.Items[i].Name}] = &list.Items[i]
		}
	}
	return out, nil
}

func schedulingMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return "not tried"
}

func createNode(ctx context.Context, cs kubernetes.Interface, n *corev1.Node) error {
	out, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	now := metav1.Now()
	out.Status = n.Status
	out.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
	if out, err = cs.CoreV1().Nodes().UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", n.Name, err)
	}
	// Admission tainted it not-ready on create; the node lifecycle controller (not
	// running here) lifts that once the node is Ready.
	out.Spec.Taints = n.Spec.Taints
	if _, err := cs.CoreV1().Nodes().Update(ctx, out, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s taints: %w", n.Name, err)
	}
	return nil
}

func nominatePod(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) error {
	patch := fmt.Appendf(nil, `{"status":{"nominatedNodeName":%q}}`, p.Status.NominatedNodeName)
	_, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("nominate %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// agreeGate holds a pending pod until its cluster's plan is in place.
const agreeGate = "packertest.joiner.sh/planned"

func ungate(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) error {
	patch := []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`)
	if _, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("release %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func liftUnregistered(ctx context.Context, cs kubernetes.Interface, name string) error {
	// KWOK's heartbeats write the node's status meanwhile.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keep []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != karpenter.UnregisteredTaintKey {
				keep = append(keep, t)
			}
		}
		n.Spec.Taints = keep
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// cleanupAgree deletes a batch's pods and nodes (namespaces stay: nothing here
// finalizes namespace deletion).
func cleanupAgree(cs kubernetes.Interface, nodes []*corev1.Node, namespaces map[string]bool) {
	ctx := context.Background()
	zero := int64(0)
	var errs []error
	var mu sync.Mutex
	nsList := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		nsList = append(nsList, ns)
	}
	note := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	_ = parallel(ctx, nsList, func(ctx context.Context, ns string) error {
		note(cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}))
		return nil
	})
	_ = parallel(ctx, nodes, func(ctx context.Context, n *corev1.Node) error {
		note(cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}))
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		klog.Background().Error(err, "clean up")
	}
}

// parallel runs fn over items with a bounded number of concurrent requests.
func parallel[T any](ctx context.Context, items []T, fn func(context.Context, T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, it := range items {
		g.Go(func() error { return fn(gctx, it) })
	}
	return g.Wait()
}
