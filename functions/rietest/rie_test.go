//go:build unix

package rietest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-autoscaler/joiner/functions/internal/lambdatest"
	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

const (
	clusterName = "rie"
	// invokePath is the emulator's invoke URL, the one `sam local start-lambda` serves too.
	invokePath = "/2015-03-31/functions/function/invocations"
	// malformed is a truncated event: the function must answer with an error body
	// naming the problem, and keep running.
	malformed = `{"detail-type":`
	ownedTag  = "kubernetes.io/cluster/" + clusterName
)

var (
	repoRoot string
	riePath  string
	rieErr   error
	binDir   string

	buildOnce  sync.Once
	buildErr   error
	bootstraps map[string]string

	worldOnce sync.Once
	theWorld  *world
	worldErr  error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if repoRoot, err = kubetest.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "rietest:", err)
		return 1
	}
	riePath, rieErr = lambdatest.InstallRIE(repoRoot)
	if binDir, err = os.MkdirTemp("", "rietest-"); err != nil {
		fmt.Fprintln(os.Stderr, "rietest:", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	defer kubetest.StopShared()
	defer func() {
		if theWorld != nil {
			theWorld.sim.Close()
		}
	}()
	return m.Run()
}

// needRIE fails the test in CI and skips it elsewhere when the emulator could not
// be installed (no module proxy, no Go toolchain).
func needRIE(t *testing.T) {
	t.Helper()
	lambdatest.RequireRIE(t, rieErr)
}

// bootstrap builds the three functions once, as `make functions` does but for the
// host architecture, and returns name's bootstrap.
func bootstrap(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		start := time.Now()
		pkgs := []string{"./functions/" + handlers.Provisioner, "./functions/" + handlers.Interruption, "./functions/" + handlers.Consolidator}
		if bootstraps, buildErr = lambdatest.Build(repoRoot, binDir, pkgs...); buildErr == nil {
			t.Logf("built 3 bootstraps (%s/%s, lambda.norpc, stripped, CGO_ENABLED=0) in %v", runtime.GOOS, runtime.GOARCH, time.Since(start).Round(time.Millisecond))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bootstraps[name]
}

// world is the cluster (a real API server) and the AWS account (the wire-level
// simulator) the functions see, shared by the tests of the package.
type world struct {
	env *kubetest.Env
	sim *awssim.Sim
	// cs arranges the cluster for the tests (namespaces, pending pods).
	cs kubernetes.Interface
	ns string
}

func theSharedWorld(t *testing.T) *world {
	t.Helper()
	env := kubetest.Shared(t) // skips or fails the test when the binaries are missing
	worldOnce.Do(func() { theWorld, worldErr = newWorld(env) })
	if worldErr != nil {
		t.Fatal(worldErr)
	}
	return theWorld
}

func newWorld(env *kubetest.Env) (*world, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seed := awssim.DefaultSeed(clusterName)
	sim, err := awssim.Start(context.Background(), awssim.Config{Seed: &seed})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		sim.Close()
		return nil, err
	}
	w := &world{env: env, sim: sim, cs: cs, ns: "rietest"}
	if out, err := env.Kubectl("apply", "-f", filepath.Join(repoRoot, "functions", "rietest", "testdata", "pool.yaml")); err != nil {
		sim.Close()
		return nil, fmt.Errorf("kubectl apply testdata/pool.yaml: %v\n%s", err, out)
	}
	// The Lease lives in Joiner's namespace (deploy/ creates it; be sure).
	for _, ns := range []string{kube.Namespace, w.ns} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			sim.Close()
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	// Two pods the scheduler found no room for: the provisioner's sweep must launch
	// capacity for them.
	for i := range 2 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pending-%d", i), Namespace: w.ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
		if _, err := cs.CoreV1().Pods(w.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			sim.Close()
			return nil, fmt.Errorf("create pod %s: %w", p.Name, err)
		}
		patch := []byte(`{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/0 nodes are available"}]}}`)
		if _, err := cs.CoreV1().Pods(w.ns).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			sim.Close()
			return nil, fmt.Errorf("mark pod %s unschedulable: %w", p.Name, err)
		}
	}
	return w, nil
}

// ownedInstances are the simulator's instances tagged as this cluster's.
func (w *world) ownedInstances() []awssim.Instance {
	var out []awssim.Instance
	for _, in := range w.sim.State().Instances {
		if in.Tags[ownedTag] == "owned" {
			out = append(out, in)
		}
	}
	return out
}

// mutatingCalls counts EC2 calls from index from on that change something.
func (w *world) mutatingCalls(from int) []string {
	var out []string
	for _, c := range w.sim.Calls()[from:] {
		switch c.Action {
		case "RunInstances", "CreateFleet", "TerminateInstances", "StopInstances", "CreateTags", "DeleteTags", "ModifyInstanceAttribute":
			out = append(out, c.Action)
		}
	}
	return out
}

// emulator is one function's bootstrap running under aws-lambda-rie.
type emulator struct {
	*lambdatest.Emulator
	name string
	// logLines counts the function's log lines checked so far.
	logLines int
}

// response is one invocation as the caller of the emulator sees it.
type response = lambdatest.Response

// startEmulator runs name's bootstrap under the emulator with the environment the
// CDK stack gives the function, pointed at the test cluster and the simulator, less
// the variables named in unset.
func startEmulator(t *testing.T, w *world, name string, unset ...string) *emulator {
	t.Helper()
	needRIE(t)
	boot := bootstrap(t, name)
	dir := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		handlers.EnvClusterName + "=" + clusterName,
		handlers.EnvRegion + "=" + awssim.DefaultRegion,
		"JOINER_CLUSTER_ACCESS=kubeconfig",
		"KUBECONFIG=" + w.env.Kubeconfig,
		handlers.EnvAWSEndpointURL + "=" + w.sim.Endpoint(),
		"AWS_ACCESS_KEY_ID=AKIDRIETEST",
		"AWS_SECRET_ACCESS_KEY=rietest-secret",
		// Nothing from the developer's AWS setup may leak in.
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "no-aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60",
		"AWS_LAMBDA_FUNCTION_NAME=joiner-" + name,
	}
	env = slices.DeleteFunc(env, func(kv string) bool {
		return slices.Contains(unset, kv[:strings.IndexByte(kv, '=')])
	})
	return &emulator{Emulator: lambdatest.StartEmulator(t, riePath, name, boot, env), name: name}
}

func (e *emulator) post(t *testing.T, body []byte) response {
	t.Helper()
	return e.Post(t, body, 90*time.Second)
}

// lambdaError is the body the runtime returns for a handler error.
type lambdaError = lambdatest.Error

// invokeEvent posts events/<file> and checks the answer is a decision summary of
// this function for the event's kind, with no errors, logged as a "decision" line.
func (e *emulator) invokeEvent(t *testing.T, file, wantKind string) (handlers.Summary, response) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "events", file))
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	r := e.post(t, raw)
	if r.Status != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", file, r.Status, r.Body)
	}
	var le lambdaError
	if err := json.Unmarshal(r.Body, &le); err != nil {
		t.Fatalf("%s: response is not JSON (%v): %s", file, err, r.Body)
	}
	if le.ErrorMessage != "" || le.ErrorType != "" {
		t.Fatalf("%s: handler error %s: %s", file, le.ErrorType, le.ErrorMessage)
	}
	var s handlers.Summary
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("%s: response is not a decision summary (%v): %s", file, err, r.Body)
	}
	if s.Function != e.name || s.Event != wantKind || s.EventID != env.ID || s.Action == "" || len(s.Errors) != 0 {
		t.Fatalf("%s: summary %s, want function %q, event %q, id %q, an action and no errors", file, r.Body, e.name, wantKind, env.ID)
	}
	e.checkLogs(t, r, env.ID)
	return s, r
}

// checkLogs waits (bounded) for the invocation's "decision" line on stdout and checks
// every line the function wrote there: JSON with a "level" field, or the metrics
// (EMF) record.
func (e *emulator) checkLogs(t *testing.T, r response, eventID string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := e.Stdout.String()[r.LogFrom:]
		decision := false
		lines := 0
		var bad []string
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || emulatorLine(line) {
				continue
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				bad = append(bad, "not JSON: "+line)
				continue
			}
			if _, emf := rec["_aws"]; emf {
				continue
			}
			lines++
			if lv, ok := rec["level"].(string); !ok || lv == "" {
				bad = append(bad, "no level: "+line)
			}
			if rec["msg"] == "decision" && rec["function"] == e.name && rec["eventId"] == eventID {
				decision = true
			}
		}
		if len(bad) > 0 {
			t.Fatalf("log lines of %s:\n%s", e.name, strings.Join(bad, "\n"))
		}
		if decision {
			e.logLines += lines
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no \"decision\" log line for event %s within 5s; stdout since the invocation:\n%s", eventID, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkMalformed posts a truncated event: the answer is HTTP 200 with an error body
// naming the problem (what EventBridge's retry and dead-letter queue record), and
// the same warm process goes on serving — repeatFile, handled before, comes back as
// a duplicate, which only the process that handled it can know.
func (e *emulator) checkMalformed(t *testing.T, repeatFile, wantKind string) {
	t.Helper()
	r := e.post(t, []byte(malformed))
	if r.Status != http.StatusOK {
		t.Fatalf("malformed event: HTTP %d: %s", r.Status, r.Body)
	}
	var le lambdaError
	if err := json.Unmarshal(r.Body, &le); err != nil {
		t.Fatalf("malformed event: response is not JSON (%v): %s", err, r.Body)
	}
	if !strings.HasPrefix(le.ErrorMessage, e.name+": ") || !strings.Contains(le.ErrorMessage, "invalid JSON") ||
		le.ErrorType == "" || strings.HasPrefix(le.ErrorType, "Runtime.") {
		t.Fatalf("malformed event: want an error body from the handler naming the invalid JSON, got %s", r.Body)
	}
	t.Logf("malformed event -> %s: %s", le.ErrorType, le.ErrorMessage)
	s, _ := e.invokeEvent(t, repeatFile, wantKind)
	if s.Action != "duplicate" {
		t.Fatalf("%s after the malformed event: action %q, want duplicate (the warm process remembers it)", repeatFile, s.Action)
	}
}

// emulatorLine reports whether line is one the emulator itself writes around each
// invocation (Lambda writes the same to CloudWatch); everything else on stdout is the
// function's.
func emulatorLine(line string) bool {
	for _, p := range []string{"START RequestId: ", "END RequestId: ", "REPORT RequestId: "} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

func (e *emulator) logTiming(t *testing.T, cold, warm response) {
	t.Helper()
	t.Logf("%s: listening %v after start; cold invoke %.1f ms, warm invoke %.1f ms", e.name,
		e.ListenAfter.Round(time.Millisecond), ms(cold.Elapsed), ms(warm.Elapsed))
	if m := initReport.FindStringSubmatch(e.Stderr.String()); m != nil {
		t.Logf("%s: emulator INIT REPORT %s ms (bootstrap start to its first /next)", e.name, strings.TrimRight(strings.TrimRight(m[1], "0"), "."))
	}
	t.Logf("%s: %d JSON log lines checked, each with a level", e.name, e.logLines)
	if rep := reportLine(e.Stdout.String()); rep != "" {
		t.Logf("%s: emulator %s", e.name, rep)
	}
}

// initReport matches the emulator's report of the cold start's init phase.
var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// reportLine returns the emulator's first REPORT line (the cold one, with its Init
// Duration), if it printed one.
func reportLine(out string) string {
	for line := range strings.Lines(out) {
		if i := strings.Index(line, "REPORT RequestId"); i >= 0 {
			return strings.TrimSpace(line[i:])
		}
	}
	return ""
}

// TestProvisionerUnderRIE: the scheduled sweep launches capacity for the pending
// pods; the scheduler tick sees it in flight and launches nothing more; a batch from
// another cluster's forwarder is ignored; a malformed event is an error body.
func TestProvisionerUnderRIE(t *testing.T) {
	w := theSharedWorld(t)
	e := startEmulator(t, w, handlers.Provisioner)

	s, cold := e.invokeEvent(t, "scheduled-rule.json", "ScheduledRule")
	owned := w.ownedInstances()
	if len(s.NodesLaunched) == 0 || s.PodsPending != 2 {
		t.Fatalf("sweep: %+v, want the 2 pending pods seen and a node launched", s)
	}
	if len(owned) != len(s.NodesLaunched) {
		t.Fatalf("%d instances tagged %s=owned for %d NodeClaims launched", len(owned), ownedTag, len(s.NodesLaunched))
	}
	for _, in := range owned {
		if in.Tags["karpenter.sh/nodepool"] != "default" || in.Tags["karpenter.sh/nodeclaim"] == "" {
			t.Errorf("instance %s tags %v lack the nodepool/nodeclaim tags", in.ID, in.Tags)
		}
	}
	t.Logf("sweep: %s (%d instance(s): %s %s)", s.Action, len(owned), owned[0].InstanceType, owned[0].CapacityType)

	s, warm := e.invokeEvent(t, "scheduler.json", "SchedulerTick")
	if len(s.NodesLaunched) != 0 || len(w.ownedInstances()) != len(owned) {
		t.Fatalf("second trigger launched again: %+v", s)
	}
	s, _ = e.invokeEvent(t, "pending-pods.json", "PendingPods")
	if s.Action != "ignored" || !strings.Contains(s.Ignored, "technews-karpenter-eks") {
		t.Fatalf("another cluster's batch: %+v, want ignored naming the cluster", s)
	}
	e.checkMalformed(t, "scheduled-rule.json", "ScheduledRule")
	e.logTiming(t, cold, warm)
}

// TestInterruptionUnderRIE: every interruption sample is about an instance Joiner did
// not launch, so each is ignored and nothing in EC2 is changed.
func TestInterruptionUnderRIE(t *testing.T) {
	w := theSharedWorld(t)
	e := startEmulator(t, w, handlers.Interruption)
	before := len(w.sim.Calls())
	var cold, warm response
	for i, c := range []struct{ file, kind string }{
		{"spot-interruption.json", "SpotInterruption"},
		{"rebalance.json", "RebalanceRecommendation"},
		{"state-change-terminated.json", "StateChange"},
		{"health-scheduled-change.json", "HealthScheduledChange"},
	} {
		s, r := e.invokeEvent(t, c.file, c.kind)
		if s.Action != "ignored" || s.Ignored == "" || s.Interruptions != 0 {
			t.Errorf("%s: %+v, want ignored with a reason (a foreign instance)", c.file, s)
		}
		switch i {
		case 0:
			cold = r
		case 1:
			warm = r
		}
	}
	if m := w.mutatingCalls(before); len(m) > 0 {
		t.Errorf("EC2 mutations for foreign instances: %v", m)
	}
	e.checkMalformed(t, "spot-interruption.json", "SpotInterruption")
	e.logTiming(t, cold, warm)
}

// TestConsolidatorUnderRIE: both schedule triggers run a consolidation pass; with no
// registered node there is nothing to remove, so no instance is terminated.
func TestConsolidatorUnderRIE(t *testing.T) {
	w := theSharedWorld(t)
	e := startEmulator(t, w, handlers.Consolidator)
	before := len(w.sim.Calls())
	s, cold := e.invokeEvent(t, "scheduler.json", "SchedulerTick")
	if s.Action == "ignored" || len(s.NodesTerminated) != 0 {
		t.Fatalf("tick: %+v, want a consolidation pass that removes nothing", s)
	}
	t.Logf("tick: %s", s.Action)
	s, warm := e.invokeEvent(t, "scheduled-rule.json", "ScheduledRule")
	if s.Action == "ignored" || len(s.NodesTerminated) != 0 {
		t.Fatalf("scheduled rule: %+v, want a consolidation pass that removes nothing", s)
	}
	for _, c := range w.sim.Calls()[before:] {
		if c.Action == "TerminateInstances" {
			t.Errorf("consolidator terminated instances with no node registered: %v", c.Params)
		}
	}
	e.checkMalformed(t, "scheduler.json", "SchedulerTick")
	e.logTiming(t, cold, warm)
}

// TestMisconfiguredFunctionUnderRIE: a function started without its cluster name
// never serves an invocation, and its output names the missing variable (in Lambda
// this is the init error in CloudWatch).
func TestMisconfiguredFunctionUnderRIE(t *testing.T) {
	w := theSharedWorld(t)
	e := startEmulator(t, w, handlers.Provisioner, handlers.EnvClusterName)
	raw, err := os.ReadFile(filepath.Join(repoRoot, "events", "scheduled-rule.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := e.post(t, raw)
	if r.Status == http.StatusOK && !bytes.Contains(r.Body, []byte("errorMessage")) {
		t.Fatalf("misconfigured function answered HTTP 200 without an error: %s", r.Body)
	}
	want := "invalid configuration: " + handlers.EnvClusterName + " is not set"
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(e.Stdout.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output does not name the missing variable (want %q):\n%s", want, e.Stdout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("misconfigured: HTTP %d %q; logged %q", r.Status, r.Body, want)
}
