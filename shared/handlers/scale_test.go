package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/access"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// The scale benchmark's cluster. scaleGenVersion names the generator: change it with
// anything that changes what populateScale writes, so a cached etcd of the old shape
// is not reused.
const (
	scaleGenVersion = "4"
	scaleDSPerNode  = 2     // DaemonSet pods on every node (20,000)
	scaleCluster    = "e2e" // the simulator's default seed discovers subnets by it
	scaleRuns       = 3
	scaleChildEnv   = "JOINER_SCALE_CHILD"
)

// The cluster's size: 10,000 nodes unless JOINER_SCALE_NODES says otherwise (100
// gives the small cluster of the requests-per-minute comparison); the rest is in
// proportion.
var (
	scaleNodes     = scaleSize()
	scaleBoundApp  = 7 * scaleNodes         // Deployment pods bound to nodes (70,000)
	scalePending   = scaleNodes             // pending pods of 20 Deployments (10,000)
	scaleEmpty     = max(1, scaleNodes/100) // nodes holding DaemonSet pods only (100)
	scaleUnderused = max(1, scaleNodes/50)  // nodes holding one small pod (200)
)

func scaleSize() int {
	n := 10000
	if v := os.Getenv("JOINER_SCALE_NODES"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 10 || n > 100000 {
			panic(fmt.Sprintf("JOINER_SCALE_NODES=%q: want a node count from 10 to 100000", v))
		}
	}
	return n
}

// scaleMemoryMB are the functions' memory sizes as infra/stack.go deploys them.
var scaleMemoryMB = map[string]int{Provisioner: 1024, Consolidator: 1024}

// scalePool is one NodePool of the benchmark cluster and the instance types its
// nodes run.
type scalePool struct {
	name  string
	types []scaleType
}

type scaleType struct {
	name     string
	cpu, mem int64 // allocatable millicores and MiB
}

var scalePools = []scalePool{
	{"general", []scaleType{{"m6i.xlarge", 3920, 14800}, {"m6i.2xlarge", 7910, 29800}, {"m7i.2xlarge", 7910, 29800}}},
	{"compute", []scaleType{{"c6i.2xlarge", 7910, 14300}, {"c6i.4xlarge", 15890, 28600}}},
	{"memory", []scaleType{{"r6i.xlarge", 3920, 29600}, {"r6i.2xlarge", 7910, 60400}}},
}

var scaleZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// BenchmarkInvocationsAtScale runs one provisioner and one consolidator invocation,
// each in a fresh process (this test binary re-executed), against a real
// kube-apiserver + etcd holding 10,000 Nodes (three NodePools, three zones, seven
// instance types), 10,000 NodeClaims, two DaemonSets, and 100,000 Pods (70,000 of
// Deployments and 20,000 of the DaemonSets bound to nodes, 10,000 pending in 20
// Deployments), and the wire-level EC2 simulator in this process. It prints a table of
// wall time, the child's peak RSS (getrusage), API requests by verb and resource,
// response bytes read, and the decision, and reports the median of scaleRuns runs.
// `make bench-scale` runs it (not part of `make test`):
//
//	go test ./shared/handlers -run XXX -bench BenchmarkInvocationsAtScale -benchtime 1x
//
// The populated etcd is cached under $XDG_CACHE_HOME/joiner/scale-etcd, keyed by
// scaleGenVersion; each run starts from a copy of it, so runs do not see each other's
// writes. The consolidator runs dry (JOINER_DRY_RUN): its decision is the measured
// work, and with no kubelet behind the nodes an executed drain would only wait.
func BenchmarkInvocationsAtScale(b *testing.B) {
	if _, err := kubetest.AssetsDir(); err != nil {
		kubetest.Need(b, nil)
	}
	cached := scaleCacheDir(b)
	if _, err := os.Stat(filepath.Join(cached, "populated")); err != nil {
		buildScaleCache(b, cached)
	}
	runs := scaleRuns
	if v := os.Getenv("JOINER_SCALE_RUNS"); v != "" { // fewer while developing; the target is judged on three
		if _, err := fmt.Sscan(v, &runs); err != nil || runs < 1 {
			b.Fatalf("JOINER_SCALE_RUNS=%q: want a positive count", v)
		}
	}
	var provs, conss []scaleResult
	for i := 0; i < b.N*runs; i++ {
		p, c := scaleRun(b, cached)
		provs, conss = append(provs, p), append(conss, c)
	}
	printScaleTable(os.Stdout, provs, conss)
	mp, mc := medianRun(provs), medianRun(conss)
	b.ReportMetric(mp.Wall.Seconds(), "provisioner-s")
	b.ReportMetric(float64(mp.MaxRSS)/(1<<20), "provisioner-MB")
	b.ReportMetric(mc.Wall.Seconds(), "consolidator-s")
	b.ReportMetric(float64(mc.MaxRSS)/(1<<20), "consolidator-MB")
	var fails []string
	if mp.Wall >= 10*time.Second || mp.MaxRSS >= 1<<30 {
		fails = append(fails, fmt.Sprintf("provisioner median %v / %d MB, target < 10 s and < 1 GB", mp.Wall.Round(time.Millisecond), mp.MaxRSS>>20))
	}
	if mc.Wall >= 60*time.Second || mc.MaxRSS >= 1<<30 {
		fails = append(fails, fmt.Sprintf("consolidator median %v / %d MB, target < 60 s and < 1 GB", mc.Wall.Round(time.Millisecond), mc.MaxRSS>>20))
	}
	for _, r := range append(provs, conss...) {
		if len(r.Summary.Errors) > 0 {
			fails = append(fails, fmt.Sprintf("%s: errors %v", r.Function, r.Summary.Errors))
		}
	}
	if len(fails) > 0 {
		b.Errorf("targets missed:\n%s", strings.Join(fails, "\n"))
	}
}

// scaleCacheDir is where the populated etcd data lives.
func scaleCacheDir(b *testing.B) string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			b.Fatal(err)
		}
		base = filepath.Join(home, ".cache")
	}
	dir := "v" + scaleGenVersion
	if scaleNodes != 10000 {
		dir += fmt.Sprintf("-%dnodes", scaleNodes)
	}
	return filepath.Join(base, "joiner", "scale-etcd", dir)
}

// buildScaleCache populates a fresh control plane and keeps its etcd data in dir.
func buildScaleCache(b *testing.B, dir string) {
	_ = os.RemoveAll(dir)
	data := filepath.Join(dir, "etcd")
	if err := os.MkdirAll(data, 0o755); err != nil {
		b.Fatal(err)
	}
	env, err := kubetest.StartWith(kubetest.Options{EtcdDataDir: data})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	err = populateScale(env)
	if stopErr := env.Stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		b.Fatalf("populate the scale cluster: %v", err)
	}
	b.Logf("populated %d nodes, %d NodeClaims and %d pods in %v (cached in %s)", scaleNodes, scaleNodes,
		scaleBoundApp+scaleNodes*scaleDSPerNode+scalePending, time.Since(start).Round(time.Second), dir)
	if err := os.WriteFile(filepath.Join(dir, "populated"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
}

// scaleResult is one invocation measured from outside its process.
type scaleResult struct {
	Function string
	// Wall is the child's whole life: process start, connecting, the invocation.
	Wall time.Duration
	// Invoke is the handler's own time, measured inside the child.
	Invoke    time.Duration
	MaxRSS    int64
	Requests  map[string]int
	BytesRead int64
	Summary   Summary
	// CacheWarm is how long the API server took to make its caches ready before
	// the run's invocations (waitCachesReady), set on the provisioner's result.
	CacheWarm time.Duration
	// Load is the load average when the child ended.
	Load string
}

// scaleRun starts a control plane on a copy of the cached etcd and the simulator,
// and runs the two invocations.
func scaleRun(b *testing.B, cached string) (prov, cons scaleResult) {
	work := b.TempDir()
	data := filepath.Join(work, "etcd")
	if out, err := exec.Command("cp", "-a", filepath.Join(cached, "etcd"), data).CombinedOutput(); err != nil {
		b.Fatalf("copy the cached etcd: %v\n%s", err, out)
	}
	env, err := kubetest.StartWith(kubetest.Options{EtcdDataDir: data})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	if out, err := env.ApplyDeploy(); err != nil {
		b.Fatalf("apply deploy/: %v\n%s", err, out)
	}
	warm, err := waitCachesReady(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("the API server's caches were ready %v after it started (load %s)", warm.Round(time.Second), workload.LoadAverage())
	sim, err := awssim.Start(context.Background(), awssim.Config{Seed: ptrSeed(awssim.DefaultSeed(scaleCluster))})
	if err != nil {
		b.Fatal(err)
	}
	defer sim.Close()
	stopAPIProfile := profileAPIServer(b, env.Config, Provisioner)
	prov = runScaleChild(b, env, sim, Provisioner)
	stopAPIProfile()
	prov.CacheWarm = warm
	cons = runScaleChild(b, env, sim, Consolidator)
	return prov, cons
}

// waitCachesReady waits until the API server's watch cache of every resource
// the invocations list is initialized, and returns how long that took. A cache
// is built by listing etcd when the API server starts; until it is ready, a LIST
// with a field selector (as the snapshot's pod list has) is refused with 429 and
// one without is delegated to etcd (KEP-4568, resilient watch cache
// initialization), so timing an invocation against a cold server measures the
// server's start-up, not Joiner. Each probe is such a refused list (a field
// selector matching nothing), without client-go's retries.
func waitCachesReady(cfg *rest.Config) (time.Duration, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	paths := []string{"/api/v1/pods", "/api/v1/nodes", "/apis/apps/v1/daemonsets", "/apis/policy/v1/poddisruptionbudgets",
		"/apis/karpenter.sh/v1/nodepools", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses", "/apis/karpenter.sh/v1/nodeclaims"}
	start := time.Now()
	deadline := start.Add(15 * time.Minute)
	for _, path := range paths {
		for {
			err := cs.CoreV1().RESTClient().Get().AbsPath(path).Param("fieldSelector", "metadata.name=joiner-cache-probe").
				Param("limit", "1").MaxRetries(0).Do(context.Background()).Error()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return time.Since(start), fmt.Errorf("the API server's cache of %s is not ready after %v: %w", path, time.Since(start).Round(time.Second), err)
			}
			time.Sleep(time.Second)
		}
	}
	return time.Since(start), nil
}

// profileAPIServer keeps, with JOINER_SCALE_PROFILE=DIR, the API server's CPU
// profile while fn runs in DIR/apiserver-<fn>.cpu.pprof: at 10,000 nodes the API
// server's own work bounds how fast a burst's writes go. The returned func stops it.
func profileAPIServer(b *testing.B, cfg *rest.Config, fn string) func() {
	dir := os.Getenv("JOINER_SCALE_PROFILE")
	if dir == "" {
		return func() {}
	}
	c := rest.CopyConfig(cfg)
	c.Timeout = 0
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The profile runs for at most this long; stopping earlier cancels it, and
		// the API server then answers nothing, so it is taken in one-minute pieces.
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "60").DoRaw(ctx)
		if err != nil && ctx.Err() == nil {
			b.Logf("API server profile: %v", err)
			return
		}
		if len(raw) > 0 {
			_ = os.WriteFile(filepath.Join(dir, "apiserver-"+fn+".cpu.pprof"), raw, 0o644)
		}
	}()
	return func() {
		// Let the sixty seconds end rather than losing the profile: the invocation
		// took at most about that long.
		select {
		case <-done:
		case <-time.After(65 * time.Second):
			cancel()
			<-done
		}
	}
}

func runScaleChild(b *testing.B, env *kubetest.Env, sim *awssim.Sim, fn string) scaleResult {
	out := filepath.Join(b.TempDir(), fn+".json")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), scaleChildEnv+"="+fn, "JOINER_SCALE_KUBECONFIG="+env.Kubeconfig,
		"JOINER_SCALE_SIM="+sim.Endpoint(), "JOINER_SCALE_OUT="+out)
	cmd.Stderr = os.Stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		b.Fatalf("%s child: %v", fn, err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	var r scaleResult
	if err := json.Unmarshal(raw, &r); err != nil {
		b.Fatal(err)
	}
	r.Wall, r.Load = wall, workload.LoadAverage()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.MaxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return r
}

// scaleChild is the child's side: when the environment names a function, TestMain
// runs one invocation of it and exits.
func scaleChild() bool {
	fn := os.Getenv(scaleChildEnv)
	if fn == "" {
		return false
	}
	if err := runScaleInvocation(fn); err != nil {
		fmt.Fprintf(os.Stderr, "scale child %s: %v\n", fn, err)
		os.Exit(2)
	}
	return true
}

// runScaleInvocation is one cold container: cluster access as the functions have it
// (their RBAC identity, the same QPS), the catalog read from EC2, one scheduled
// invocation.
func runScaleInvocation(fn string) error {
	// The memory limit the deployed function sets itself (FromEnvFor).
	limitMemory(func(k string) string {
		if k == "AWS_LAMBDA_FUNCTION_MEMORY_SIZE" {
			return strconv.Itoa(scaleMemoryMB[fn])
		}
		return os.Getenv(k)
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("JOINER_SCALE_KUBECONFIG"))
	if err != nil {
		return err
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "arn:aws:sts::123456789012:assumed-role/joiner-functions/" + fn, Groups: []string{"joiner:functions"}}
	cfg.QPS, cfg.Burst, cfg.Timeout = access.DefaultQPS, access.DefaultBurst, access.DefaultTimeout
	if v := os.Getenv("JOINER_SCALE_QPS"); v != "" { // what a faster client limit would give
		if _, err := fmt.Sscan(v, &cfg.QPS); err != nil || cfg.QPS <= 0 {
			return fmt.Errorf("JOINER_SCALE_QPS=%q: want a positive number", v)
		}
		cfg.Burst = int(cfg.QPS * 1.5)
	}
	meter := kube.NewMeter()
	cfg.WrapTransport = meter.Wrap
	clients, err := kube.NewClients(cfg)
	if err != nil {
		return err
	}
	log := NewLogger(os.Stderr, "ERROR")
	c := Config{ClusterName: scaleCluster, Region: "us-east-1", Rebalance: RebalanceIgnore, LeaseDuration: time.Minute, LeaseWait: 3 * time.Second,
		MinSavingsFraction: 0.1, DryRun: fn == Consolidator}
	f, err := NewFunction(fn, func(ctx context.Context) (*Deps, error) {
		id := fn + "/scale"
		prov, err := cloud.New(cloud.Config{ClusterName: scaleCluster, Region: "us-east-1", Unavailable: cloud.NewUnavailableOfferings(time.Now), Logger: log,
			CatalogCache: cloud.NewCatalogCache(TypesTTL, PricesTTL), DryRun: c.DryRun},
			cloud.NewClients(awssim.NewAWSConfig(os.Getenv("JOINER_SCALE_SIM")), cloud.RetryOptions{}, false))
		if err != nil {
			return nil, err
		}
		return &Deps{Config: c, Cloud: prov, Identity: id, Log: log,
			Cluster: kube.New(clients, kube.Options{ClusterName: scaleCluster, Identity: id, Log: log})}, nil
	})
	if err != nil {
		return err
	}
	f.MetricsOut = io.Discard
	ev := fmt.Sprintf(`{"version":"0","id":"scale-%d","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012",`+
		`"time":%q,"region":"us-east-1","resources":[],"detail":{}}`, time.Now().UnixNano(), time.Now().UTC().Format(time.RFC3339))
	// JOINER_SCALE_PROFILE=DIR keeps a CPU profile and a heap profile (allocations
	// and what is live at the end) of each invocation in DIR/<function>.*.pprof.
	stopProfile := func() {}
	if dir := os.Getenv("JOINER_SCALE_PROFILE"); dir != "" {
		cpu, err := os.Create(filepath.Join(dir, fn+".cpu.pprof"))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			return err
		}
		stopProfile = func() {
			pprof.StopCPUProfile()
			_ = cpu.Close()
			if heap, err := os.Create(filepath.Join(dir, fn+".heap.pprof")); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(heap, 0)
				_ = heap.Close()
			}
		}
	}
	start := time.Now()
	out, err := f.Invoke(context.Background(), []byte(ev))
	invoke := time.Since(start)
	stopProfile()
	if err != nil {
		return fmt.Errorf("invoke: %w (%s)", err, out)
	}
	r := scaleResult{Function: fn, Invoke: invoke, Requests: meter.Counts(), BytesRead: meter.BytesRead()}
	if err := json.Unmarshal(out, &r.Summary); err != nil {
		return err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(os.Getenv("JOINER_SCALE_OUT"), raw, 0o644)
}

func medianRun(rs []scaleResult) scaleResult {
	s := slices.Clone(rs)
	sort.Slice(s, func(i, j int) bool { return s[i].Wall < s[j].Wall })
	m := s[len(s)/2]
	rss := make([]int64, len(rs))
	for i, r := range rs {
		rss[i] = r.MaxRSS
	}
	slices.Sort(rss)
	m.MaxRSS = rss[len(rss)/2]
	return m
}

func printScaleTable(w io.Writer, provs, conss []scaleResult) {
	fmt.Fprintf(w, "\nInvocations on %d nodes, %d NodeClaims, %d pods (%d pending); load average %s\n", scaleNodes, scaleNodes,
		scaleBoundApp+scaleNodes*scaleDSPerNode+scalePending, scalePending, workload.LoadAverage())
	fmt.Fprintf(w, "| function | run | wall s | handler s | read / decide / act s | peak RSS MB | API requests | MB read | load after | decision |\n|---|---|---|---|---|---|---|---|---|---|\n")
	phases := func(r scaleResult) string {
		p := r.Summary.PhaseMillis
		return fmt.Sprintf("%.1f / %.1f / %.1f", p[PhaseRead]/1000, p[PhaseDecide]/1000, p[PhaseAct]/1000)
	}
	for _, rs := range [][]scaleResult{provs, conss} {
		for i, r := range rs {
			fmt.Fprintf(w, "| %s | %d | %.2f | %.2f | %s | %d | %d | %.1f | %s | %s |\n", r.Function, i+1, r.Wall.Seconds(), r.Invoke.Seconds(),
				phases(r), r.MaxRSS>>20, total(r.Requests), float64(r.BytesRead)/(1<<20), r.Load, decisionText(r.Summary))
		}
		m := medianRun(rs)
		fmt.Fprintf(w, "| %s | median | %.2f | %.2f | %s | %d | %d | %.1f | | |\n", m.Function, m.Wall.Seconds(), m.Invoke.Seconds(), phases(m),
			m.MaxRSS>>20, total(m.Requests), float64(m.BytesRead)/(1<<20))
	}
	for i, r := range provs {
		fmt.Fprintf(w, "run %d: the API server's caches were ready %v after start, before the invocations\n", i+1, r.CacheWarm.Round(time.Second))
	}
	for _, rs := range [][]scaleResult{provs, conss} {
		m := medianRun(rs)
		keys := make([]string, 0, len(m.Requests))
		for k := range m.Requests {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, m.Requests[k]))
		}
		fmt.Fprintf(w, "%s requests (median run): %s\n", m.Function, strings.Join(parts, ", "))
	}
}

// decisionText is the decision in a table cell: the action, and for the
// consolidator how many nodes it would remove for each reason and what stopped its
// search, counted from the summary's action (one "(Reason" per command).
func decisionText(s Summary) string {
	if s.Function != Consolidator {
		return truncate(s.Action, 160)
	}
	var parts []string
	for _, r := range []string{"Empty", "Underutilized", "Drifted", "Expired"} {
		if n := strings.Count(s.Action, "("+r); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, n))
		}
	}
	out := "commands by reason: " + strings.Join(parts, ", ")
	if len(parts) == 0 {
		out = truncate(s.Action, 160)
	}
	if s.SearchStopped != "" {
		out += "; search stopped by the " + s.SearchStopped
	}
	return out + "; first: " + truncate(s.Action, 100)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// populateScale writes the benchmark cluster with parallel writers.
func populateScale(env *kubetest.Env) error {
	ctx := context.Background()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	jcfg := rest.CopyConfig(env.Config)
	jcfg.QPS, jcfg.Burst = 1e6, 1e6
	dyn, err := dynamic.NewForConfig(jcfg)
	if err != nil {
		return err
	}
	if out, err := env.ApplyDeploy(); err != nil {
		return fmt.Errorf("apply deploy/: %v\n%s", err, out)
	}
	if err := createScalePools(ctx, dyn); err != nil {
		return err
	}
	for _, ns := range []string{"apps", "batch", "kube-system"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
			return err
		}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	dsNames := []string{"aws-node", "kube-proxy"}
	for _, name := range dsNames {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": name}},
					Spec: scalePodSpec(name, "50m", "64Mi")}}}
		if _, err := cs.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	// The bulk goes straight into etcd (etcdStore says why).
	store, err := newEtcdStore(env.EtcdURL)
	if err != nil {
		return err
	}
	if n, err := store.count(ctx, "/registry/namespaces/"); err != nil || n < 3 {
		return fmt.Errorf("etcd at %s does not hold the API server's namespaces under /registry (%d found, %v): is --etcd-prefix set?", env.EtcdURL, n, err)
	}
	b := newEtcdBatcher(ctx, store, 4)
	created := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	for i := 0; i < scaleNodes; i++ {
		n, nc := scaleNode(i)
		stored(&n.ObjectMeta, "Node", i, created)
		b.add(store.nodeKV(n))
		nc.SetUID(types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", kindNumber("NodeClaim"), i)))
		nc.SetCreationTimestamp(metav1.NewTime(created))
		nc.SetGeneration(1)
		b.add(nodeClaimKV(nc))
		for j, ds := range dsNames {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", ds, i), Namespace: "kube-system",
				Labels:          map[string]string{"k8s-app": ds, "controller-revision-hash": "6d4b8f7c9"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds, UID: types.UID(fmt.Sprintf("ds-%d", j)), Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}},
				Spec: scalePodSpec(ds, "50m", "64Mi")}
			p.Spec.NodeName = n.Name
			defaultPodSpec(&p.Spec)
			runningStatus(p, i, created)
			stored(&p.ObjectMeta, "DaemonSetPod", i*len(dsNames)+j, created)
			b.add(store.podKV(p))
		}
	}
	// Which app pods go to which node: the empty nodes get none, the underused one
	// small pod each, the rest are full: their pods' requests leave 150m of CPU
	// and 256Mi free (less than any pending pod asks), as in a busy cluster whose
	// pending pods are the ones no node has room for.
	i := 0
	addApp := func(node int, cpu, mem int64) {
		app := fmt.Sprintf("svc-%03d", i%700)
		p := scaleAppPod(fmt.Sprintf("%s-%06d", app, i), app, fmt.Sprintf("%dm", cpu), fmt.Sprintf("%dMi", mem))
		p.Spec.NodeName = scaleNodeName(node)
		defaultPodSpec(&p.Spec)
		runningStatus(p, node, created)
		stored(&p.ObjectMeta, "AppPod", i, created)
		b.add(store.podKV(p))
		i++
	}
	for u := 0; u < scaleUnderused; u++ {
		addApp(scaleEmpty+u, 100, 128)
	}
	full := scaleNodes - scaleEmpty - scaleUnderused
	perNode, extra := (scaleBoundApp-scaleUnderused)/full, (scaleBoundApp-scaleUnderused)%full
	for f := 0; f < full; f++ {
		node := scaleEmpty + scaleUnderused + f
		_, t := scaleNodeType(node)
		n := perNode
		if f < extra {
			n++
		}
		cpu := (t.cpu - scaleDSPerNode*50 - 150) / int64(n)
		mem := (t.mem - scaleDSPerNode*64 - 256) / int64(n)
		for k := 0; k < n; k++ {
			addApp(node, cpu, mem)
		}
	}
	const pendingApps = 20
	for i := 0; i < scalePending; i++ {
		app := fmt.Sprintf("batch-%02d", i%pendingApps)
		pool := scalePools[1+i%pendingApps%2].name // compute or memory: general's nodes are the consolidator's
		p := scaleAppPod(fmt.Sprintf("%s-%05d", app, i), app, []string{"500m", "1", "250m", "2"}[i%pendingApps%4], []string{"1Gi", "2Gi", "512Mi", "4Gi"}[i%pendingApps%4])
		p.Namespace = "batch"
		p.Spec.NodeSelector = map[string]string{karpenter.NodePoolLabelKey: pool}
		if i%pendingApps%5 == 0 { // a quarter of the Deployments spread over zones
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
		}
		defaultPodSpec(&p.Spec)
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu.", scaleNodes, scaleNodes), LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))}}}
		stored(&p.ObjectMeta, "PendingPod", i, time.Now().Add(-time.Minute).Truncate(time.Second))
		b.add(store.podKV(p))
	}
	written, err := b.close()
	if err != nil {
		return err
	}
	want := scaleNodes*2 + scaleNodes*scaleDSPerNode + scaleBoundApp + scalePending
	if written != want {
		return fmt.Errorf("wrote %d objects into etcd, want %d", written, want)
	}
	for prefix, n := range map[string]int{"/registry/minions/": scaleNodes, "/registry/karpenter.sh/nodeclaims/": scaleNodes,
		"/registry/pods/": scaleNodes*scaleDSPerNode + scaleBoundApp + scalePending} {
		if got, err := store.count(ctx, prefix); err != nil || got != n {
			return fmt.Errorf("etcd holds %d keys under %s, want %d (%v)", got, prefix, n, err)
		}
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

func scaleNodeName(i int) string {
	return fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", i/65536, (i/256)%256, i%256)
}

// scaleImageID is the image al2023@latest resolves to on the simulator for the
// nodes' architecture, so the nodes are current, not drifted.
func scaleImageID() string {
	return awssim.PublicImageID(fmt.Sprintf("amazon-eks-node-al2023-x86_64-standard-%s-%s",
		awssim.DefaultKubernetesVersions[len(awssim.DefaultKubernetesVersions)-1], awssim.EKSAMIRelease))
}

// scaleNodeType is node i's pool and type. The empty and underused nodes (the
// first scaleEmpty+scaleUnderused) are the general pool's, which no pending pod
// selects: pods pending in a real cluster are those that fit no node, and
// kube-scheduler would have bound any that fitted the empty ones.
func scaleNodeType(i int) (scalePool, scaleType) {
	pool := scalePools[i%len(scalePools)]
	if i < scaleEmpty+scaleUnderused {
		pool = scalePools[0]
	}
	return pool, pool.types[(i/len(scalePools))%len(pool.types)]
}

// scaleNode is node i and its NodeClaim: a registered, initialized Joiner node.
func scaleNode(i int) (*corev1.Node, *unstructured.Unstructured) {
	pool, t := scaleNodeType(i)
	zone := scaleZones[(i/7)%len(scaleZones)]
	ct := karpenter.CapacityTypeOnDemand
	if i%3 == 0 {
		ct = karpenter.CapacityTypeSpot
	}
	name := scaleNodeName(i)
	pid := fmt.Sprintf("aws:///%s/i-0scale%010d", zone, i)
	alloc := corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(t.cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(t.mem<<20, resource.BinarySI), corev1.ResourcePods: resource.MustParse("58"),
		corev1.ResourceEphemeralStorage: resource.MustParse("17Gi")}
	labels := map[string]string{
		karpenter.NodePoolLabelKey: pool.name, corev1.LabelInstanceTypeStable: t.name, corev1.LabelTopologyZone: zone,
		corev1.LabelTopologyRegion: "us-east-1", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
		karpenter.CapacityTypeLabelKey: ct, corev1.LabelHostname: name, "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true",
		"karpenter.k8s.aws/instance-family": strings.Split(t.name, ".")[0], "karpenter.k8s.aws/ec2nodeclass": "default",
	}
	hour := metav1.NewTime(time.Now().Add(-2 * time.Hour).Truncate(time.Second))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Finalizers: []string{karpenter.TerminationFinalizer}},
		Spec: corev1.NodeSpec{ProviderID: pid},
		Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: hour, LastTransitionTime: hour}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", i/65536, (i/256)%256, i%256)}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Amazon Linux 2023", ContainerRuntimeVersion: "containerd://2.1.0", Architecture: "amd64", OperatingSystem: "linux"},
			Images: []corev1.ContainerImage{{Names: []string{"602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni:v1.19.0"}, SizeBytes: 50 << 20},
				{Names: []string{"602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/kube-proxy:v1.37.2"}, SizeBytes: 30 << 20}}}}
	cond := func(typ string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": typ, "message": "", "lastTransitionTime": hour.UTC().Format(time.RFC3339)}
	}
	ncLabels := map[string]any{}
	for k, v := range labels {
		if k != corev1.LabelHostname && k != "karpenter.sh/registered" && k != "karpenter.sh/initialized" {
			ncLabels[k] = v
		}
	}
	conds := []any{cond("Launched"), cond("Registered"), cond("Initialized"), cond("Ready")}
	if i < scaleEmpty { // a round has seen it empty already: its consolidateAfter runs
		conds = append(conds, cond(karpenter.ConditionEmpty))
	}
	res := map[string]any{"cpu": alloc.Cpu().String(), "memory": alloc.Memory().String(), "pods": "58", "ephemeral-storage": "17Gi"}
	nc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": karpenter.APIVersion, "kind": karpenter.NodeClaimKind,
		"metadata": map[string]any{"name": fmt.Sprintf("%s-scale%05d", pool.name, i), "labels": ncLabels, "finalizers": []any{karpenter.TerminationFinalizer},
			"ownerReferences": []any{map[string]any{"apiVersion": karpenter.APIVersion, "kind": "NodePool", "name": pool.name, "uid": "00000000-0000-0000-0000-00000000000" + fmt.Sprint(i%len(scalePools)), "blockOwnerDeletion": true}}},
		"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": karpenter.AWSGroup, "kind": "EC2NodeClass", "name": "default"},
			"requirements": []any{
				map[string]any{"key": corev1.LabelInstanceTypeStable, "operator": "In", "values": []any{t.name}},
				map[string]any{"key": karpenter.NodePoolLabelKey, "operator": "In", "values": []any{pool.name}},
				map[string]any{"key": karpenter.CapacityTypeLabelKey, "operator": "In", "values": []any{ct}},
				map[string]any{"key": corev1.LabelTopologyZone, "operator": "In", "values": []any{zone}}},
			"resources": map[string]any{"requests": map[string]any{"cpu": "1", "pods": "8"}}},
		"status": map[string]any{"providerID": pid, "nodeName": name, "imageID": scaleImageID(), "capacity": res, "allocatable": res,
			"conditions": conds},
	}}
	return n, nc
}

// scalePodSpec is a container as Deployments write them: image, ports, environment,
// probes, the projected service-account token volume admission adds.
func scalePodSpec(app, cpu, mem string) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:            "app",
		AutomountServiceAccountToken:  ptrTo(false),
		TerminationGracePeriodSeconds: ptrTo(int64(30)),
		Containers: []corev1.Container{{Name: "app", Image: "123456789012.dkr.ecr.us-east-1.amazonaws.com/" + app + ":1.42.0",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{{Name: "APP", Value: app}, {Name: "LOG_LEVEL", Value: "info"}, {Name: "REGION", Value: "us-east-1"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}, PeriodSeconds: 10},
			VolumeMounts:   []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}}},
		Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptrTo(int64(3607))}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}}}}}},
	}
}

// scaleAppPod is one replica of Deployment app (owned by its ReplicaSet).
func scaleAppPod(name, app, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps",
		Labels:      map[string]string{"app": app, "pod-template-hash": "7d9f8c6b5"},
		Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-7d9f8c6b5",
			UID: types.UID("rs-" + app), Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}},
		Spec: scalePodSpec(app, cpu, mem)}
}

// createScalePools writes the EC2NodeClass and the three NodePools (no CPU limit
// that 10,000 nodes would hit; consolidation of empty and underused nodes after 1m).
func createScalePools(ctx context.Context, dyn dynamic.Interface) error {
	docs := []string{`apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiFamily: AL2023
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-e2e
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: e2e}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: e2e}}]`}
	for _, p := range scalePools {
		var types []string
		for _, t := range p.types {
			types = append(types, `"`+t.name+`"`)
		}
		docs = append(docs, fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: %s}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["spot", "on-demand"]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [%s]}
  limits: {cpu: "1000000"}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m}`, p.name, strings.Join(types, ", ")))
	}
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			return err
		}
		gvr := kube.NodePoolGVR
		if u.GetKind() == "EC2NodeClass" {
			gvr = kube.NodeClassGVR
		}
		if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}
