package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/joiner-autoscaler/joiner/shared/awsjson"
	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kubesim"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
	"github.com/joiner-autoscaler/joiner/shared/replay"
)

// simWorld is one simulated AWS account (awssim, through the real SDK) and one
// in-memory cluster (kubesim), on a clock that only the handler's sleeps move: a
// drain that waits two minutes for evictions takes no wall time.
type simWorld struct {
	cluster string
	clock   *awssim.FakeClock
	sim     *awssim.Sim
	kc      *kubesim.Cluster
	cloud   cloud.Clients
	cfg     handlers.Config
	log     *slog.Logger
}

// simTick is how often the cluster's controllers run while a handler sleeps.
const simTick = 5 * time.Second

// invokeSimulated runs the function once on the simulated world and reports what
// the invocation changed in it.
func invokeSimulated(ctx context.Context, name string, raw []byte, f invokeFlags, stdout, stderr io.Writer) int {
	w, err := newSimWorld(ctx, f, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "joiner invoke: %v\n", err)
		return 2
	}
	defer w.sim.Close()
	fn, err := handlers.NewFunction(name, w.newDeps(name))
	if err != nil {
		fmt.Fprintf(stderr, "joiner invoke: %v\n", err)
		return 2
	}
	fn.MetricsOut = stderr
	before, err := w.observe(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "joiner invoke: %v\n", err)
		return 1
	}
	out, ierr := fn.Invoke(ctx, raw)
	after, err := w.observe(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "joiner invoke: %v\n", err)
		return 1
	}
	return report(out, ierr, diff(before, after), true, f.output, stdout, stderr)
}

// newSimWorld loads the manifests (-f, a scenario's, or seed 001), starts the
// simulator seeded for the cluster and applies the manifests to a fresh cluster.
func newSimWorld(ctx context.Context, f invokeFlags, logOut io.Writer) (*simWorld, error) {
	var (
		bundle   *manifest.Bundle
		err      error
		awsExtra string
		cluster  = cmp.Or(f.cluster, os.Getenv(handlers.EnvClusterName))
		// env is what the functions read from their environment: the scenario's
		// settings, then the process environment over them, then the flags.
		env           = map[string]string{}
		registerAfter time.Duration
	)
	switch {
	case f.scenario != "":
		sc, err := loadScenario(f.scenarioDir, f.scenario)
		if err != nil {
			return nil, err
		}
		paths := make([]string, len(sc.Manifests))
		for i, p := range sc.Manifests {
			paths[i] = sc.Path(p)
		}
		if bundle, err = replay.LoadManifests(paths...); err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		if sc.AWS != "" {
			awsExtra = sc.Path(sc.AWS)
		}
		if cluster == "" {
			cluster = sc.Cluster
		}
		env[handlers.EnvRebalanceMode] = sc.Settings.Rebalance
		env[handlers.EnvMinSavings] = strconv.FormatFloat(*sc.Settings.MinSavingsFraction, 'g', -1, 64)
		registerAfter = sc.Settings.RegisterAfter.D()
	default:
		paths := []string(f.paths)
		if len(paths) == 0 {
			seed, err := findUp(defaultInvokeSeed)
			if err != nil {
				return nil, fmt.Errorf("no -f or --scenario given and %s not found from here: %w", defaultInvokeSeed, err)
			}
			paths = []string{seed}
		}
		if bundle, err = replay.LoadManifests(paths...); err != nil {
			return nil, err
		}
	}
	if cluster == "" {
		cluster = clusterOf(bundle)
	}
	w := &simWorld{cluster: cluster, clock: awssim.NewFakeClock(time.Now().UTC().Truncate(time.Second)),
		log: handlers.NewLogger(logOut, os.Getenv(handlers.EnvLogLevel))}
	seed := awssim.DefaultSeed(cluster)
	seed.Roles = replay.NodeRoles(seed.Roles, bundle.NodeClasses)
	if w.sim, err = awssim.Start(ctx, awssim.Config{Seed: &seed, Clock: w.clock, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		return nil, err
	}
	// The functions' own configuration, from the same variables (handlers.ConfigFromEnv):
	// the cluster and region are the simulated world's, and the account is the
	// simulator's unless JOINER_ACCOUNT_ID names another, as the stack sets it to the
	// deployed account.
	for _, k := range []string{handlers.EnvRebalanceMode, handlers.EnvMinSavings} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	env[handlers.EnvClusterName], env[handlers.EnvRegion] = cluster, w.sim.Region()
	env[handlers.EnvAccountID] = cmp.Or(os.Getenv(handlers.EnvAccountID), w.sim.State().AccountID)
	if f.dryRun {
		env[handlers.EnvDryRun] = "true"
	}
	if w.cfg, err = handlers.ConfigFromEnv(func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}); err != nil {
		w.sim.Close()
		return nil, err
	}
	if awsExtra != "" {
		extra, err := awssim.LoadSeed(awsExtra)
		if err == nil {
			err = w.sim.Apply(*extra)
		}
		if err != nil {
			w.sim.Close()
			return nil, fmt.Errorf("%s: %w", awsExtra, err)
		}
	}
	w.cloud = cloud.NewClients(w.sim.AWSConfig(), cloud.RetryOptions{}, false)
	kcfg := kubesim.Config{Now: w.clock.Now, Instances: w.sim, RegisterAfter: registerAfter, Log: w.log}
	if f.server != nil {
		if w.kc, err = kubesim.NewReal(ctx, kcfg, f.server, false); err != nil {
			w.sim.Close()
			return nil, err
		}
	} else {
		w.kc = kubesim.New(kcfg)
	}
	if err := w.kc.Apply(ctx, bundle); err != nil {
		w.sim.Close()
		return nil, err
	}
	// One scheduler pass marks the pods no node fits Unschedulable, the state a
	// real cluster is in when the forwarder or the sweep sees them.
	if _, err := w.kc.Step(ctx); err != nil {
		w.sim.Close()
		return nil, err
	}
	return w, nil
}

func loadScenario(root, name string) (*replay.Scenario, error) {
	if _, err := os.Stat(filepath.Join(name, replay.ScenarioFile)); err != nil {
		if r, ferr := findUp(root); ferr == nil {
			root = r
		}
	}
	scs, err := replay.LoadAll(root, name)
	if err != nil {
		return nil, err
	}
	return scs[0], nil
}

// findUp finds a repository-relative path from the working directory or one of its
// parents, so `joiner invoke` works from anywhere in a checkout (and from tests).
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// clusterOf reads the cluster name from the EC2NodeClasses' discovery tags
// (karpenter.sh/discovery: NAME or kubernetes.io/cluster/NAME), which is what ties
// the manifests to one cluster.
func clusterOf(b *manifest.Bundle) string {
	for _, nc := range b.NodeClasses {
		var tags []map[string]string
		for _, t := range nc.Spec.SubnetSelectorTerms {
			tags = append(tags, t.Tags)
		}
		for _, t := range nc.Spec.SecurityGroupSelectorTerms {
			tags = append(tags, t.Tags)
		}
		for _, m := range tags {
			if v := m["karpenter.sh/discovery"]; v != "" && !strings.ContainsAny(v, "*<{") {
				return v
			}
			for k := range m {
				if n, ok := strings.CutPrefix(k, "kubernetes.io/cluster/"); ok && n != "" {
					return n
				}
			}
		}
	}
	return awssim.DefaultClusterName
}

// newDeps builds an invocation's dependencies over the simulated world, as
// handlers.FromEnv builds them over the real one.
func (w *simWorld) newDeps(name string) func(context.Context) (*handlers.Deps, error) {
	unavailable := cloud.NewUnavailableOfferings(w.clock.Now)
	profiles := cloud.NewInstanceProfileCache(w.clock.Now)
	identity := name + "/joiner-invoke"
	return func(ctx context.Context) (*handlers.Deps, error) {
		prov, err := cloud.New(cloud.Config{ClusterName: w.cluster, Region: w.sim.Region(), DryRun: w.cfg.DryRun, Clock: w.clock.Now,
			Unavailable: unavailable, InstanceProfiles: profiles, Logger: w.log}, w.cloud)
		if err != nil {
			return nil, err
		}
		cluster := kube.New(w.kc.Clients(), kube.Options{ClusterName: w.cluster, Identity: identity, Now: w.clock.Now, Log: w.log, Sleep: w.sleep})
		return &handlers.Deps{Config: w.cfg, Cluster: cluster, Cloud: prov, Log: w.log, Now: w.clock.Now, Identity: identity, Sleep: w.sleep, LaunchConcurrency: 1,
			ShadowMemory: handlers.NewSSMMemory(awsjson.NewSSM(w.sim.AWSConfig()), w.cluster)}, nil
	}
}

// sleep moves simulated time on, running the cluster's controllers (kubelet,
// scheduler, workload controllers) every simTick meanwhile, as they would run
// while a real function waits.
func (w *simWorld) sleep(ctx context.Context, d time.Duration) error {
	target := w.clock.Now().Add(d)
	for t := w.clock.Now().Add(simTick); !t.After(target); t = t.Add(simTick) {
		if err := ctx.Err(); err != nil {
			return err
		}
		w.clock.Set(t)
		if _, err := w.kc.Step(ctx); err != nil {
			return err
		}
	}
	w.clock.Set(target)
	return ctx.Err()
}

// worldState is what an invocation can change: NodeClaims, instances, nodes, pods.
type worldState struct {
	claims    map[string]string // name -> detail
	instances map[string]awssim.Instance
	nodes     map[string]corev1.Node
	pods      map[string]bool
}

func (w *simWorld) observe(ctx context.Context) (*worldState, error) {
	s := &worldState{claims: map[string]string{}, instances: map[string]awssim.Instance{}, nodes: map[string]corev1.Node{}, pods: map[string]bool{}}
	ncs, err := w.kc.Clients().Dynamic.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, u := range ncs.Items {
		pid, _, _ := unstructured.NestedString(u.Object, "status", "providerID")
		detail := "nodepool " + u.GetLabels()[karpenter.NodePoolLabelKey]
		if id := facts.InstanceID(pid); id != "" {
			detail += ", instance " + id
		}
		if u.GetDeletionTimestamp() != nil {
			detail += ", deleting"
		}
		s.claims[u.GetName()] = detail
	}
	for _, in := range w.sim.State().Instances {
		s.instances[in.ID] = in
	}
	cs := w.kc.Clientset()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, n := range nodes.Items {
		s.nodes[n.Name] = n
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		s.pods[facts.PodKey(&p)] = true
	}
	return s, nil
}

// change is one row of the "what changed" table.
type change struct {
	What   string `json:"change"`
	Object string `json:"object"`
	Detail string `json:"detail,omitempty"`
}

// diff lists what changed between two observations, grouped by kind of change.
func diff(a, b *worldState) []change {
	out := []change{}
	for _, name := range sortedNames(b.claims) {
		if _, ok := a.claims[name]; !ok {
			out = append(out, change{"NodeClaim created", name, b.claims[name]})
		} else if a.claims[name] != b.claims[name] {
			out = append(out, change{"NodeClaim updated", name, b.claims[name]})
		}
	}
	for _, name := range sortedNames(a.claims) {
		if _, ok := b.claims[name]; !ok {
			out = append(out, change{"NodeClaim deleted", name, a.claims[name]})
		}
	}
	for _, id := range sortedNames(b.instances) {
		in, was := b.instances[id], a.instances[id]
		detail := fmt.Sprintf("%s %s %s $%.4f/h, NodeClaim %s", in.InstanceType, in.CapacityType, in.Zone, in.PricePerHour, in.Tags[karpenter.NodeClaimLabelKey])
		switch {
		case was.ID == "":
			out = append(out, change{"instance launched", id, detail})
		case was.State != in.State && (in.State == awssim.StateShuttingDown || in.State == awssim.StateTerminated):
			out = append(out, change{"instance terminated", id, detail})
		}
	}
	for _, name := range sortedNames(b.nodes) {
		n, old := b.nodes[name], a.nodes[name]
		if old.Name == "" {
			out = append(out, change{"node registered", name, n.Labels[corev1.LabelInstanceTypeStable]})
			continue
		}
		for _, t := range n.Spec.Taints {
			if !hasTaint(old.Spec.Taints, t) {
				out = append(out, change{"node tainted", name, t.ToString()})
			}
		}
		for _, t := range old.Spec.Taints {
			if !hasTaint(n.Spec.Taints, t) {
				out = append(out, change{"node untainted", name, t.ToString()})
			}
		}
		if n.Spec.Unschedulable != old.Spec.Unschedulable {
			out = append(out, change{"node cordoned", name, fmt.Sprint(n.Spec.Unschedulable)})
		}
	}
	for _, name := range sortedNames(a.nodes) {
		if _, ok := b.nodes[name]; !ok {
			out = append(out, change{"node deleted", name, ""})
		}
	}
	for _, name := range sortedNames(a.pods) {
		if !b.pods[name] {
			out = append(out, change{"pod evicted or deleted", name, ""})
		}
	}
	return out
}

func hasTaint(ts []corev1.Taint, t corev1.Taint) bool {
	for _, x := range ts {
		if x.Key == t.Key && x.Value == t.Value && x.Effect == t.Effect {
			return true
		}
	}
	return false
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
