package kubetest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Scheduler is a kube-scheduler process running against an Env's API server with
// its default profile and leader election off: the scheduler a cluster runs, so
// tests judge where pods land by the real filters and scores, not Joiner's own.
type Scheduler struct {
	proc
	metricsURL string
	http       *http.Client
}

// proc is a child process of the test binary with its log in a file.
type proc struct {
	name string
	cmd  *exec.Cmd
	dir  string
	log  string
	done chan struct{}
	err  error // the process's exit, once done is closed
}

// startProc starts bin with args, its output going to dir/name.log.
func startProc(name, dir, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, dir: dir, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = childAttr()
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s) and removes its folder.
func (p *proc) stop() error {
	if p == nil || p.cmd == nil {
		return nil
	}
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(terminate)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	return os.RemoveAll(p.dir)
}

// exited reports the process's end, if it has ended.
func (p *proc) exited() error {
	select {
	case <-p.done:
		if p.err == nil {
			return fmt.Errorf("%s exited", p.name)
		}
		return fmt.Errorf("%s exited: %w", p.name, p.err)
	default:
		return nil
	}
}

// Tail returns the last lines of the process's log, for a failure message.
func (p *proc) Tail(lines int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// waitHTTP polls url until it answers 200, the process exits or timeout passes.
func (p *proc) waitHTTP(c *http.Client, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := p.exited(); err != nil {
			return fmt.Errorf("%w; log:\n%s", err, p.Tail(20))
		}
		resp, err := c.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s within %s; log:\n%s", p.name, url, timeout, p.Tail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// binary returns the path of name in the assets directory.
func binary(name string) (string, error) {
	dir, err := AssetsDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if !isExec(p) {
		return "", fmt.Errorf("%s not found in %s: run `make kube-assets` (scripts/kube-assets.sh builds it)", name, dir)
	}
	return p, nil
}

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// schedulerConfig is the KubeSchedulerConfiguration the tests run: no profile is
// given, so the default one (NodeResourcesFit LeastAllocated, spreading, preemption)
// applies. Only the client's rate limit is raised (binding thousands of pods at the
// default 50 requests/s would measure the limiter, not the scheduler), leader
// election is off (one scheduler, no lease to wait for) and a failed pod's
// backoff is capped at 2 s instead of 10 s: it decides when a pod is tried
// again, never where it goes, and tests wait for it (Settle).
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 2000
  burst: 4000
leaderElection:
  leaderElect: false
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 2
`

// StartScheduler starts kube-scheduler against the control plane and waits until
// it is ready (its informers synced). Stop it with Stop.
func (e *Env) StartScheduler() (*Scheduler, error) {
	bin, err := binary("kube-scheduler")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kube-scheduler-")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, schedulerConfig, e.Kubeconfig), 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// /metrics is read without credentials: the test reads the queue from it.
	p, err := startProc("kube-scheduler", dir, bin, "--config", cfg,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port), "--cert-dir", filepath.Join(dir, "certs"),
		"--authorization-always-allow-paths", "/healthz,/readyz,/livez,/metrics", "-v", "1")
	if err != nil {
		return nil, err
	}
	s := &Scheduler{proc: *p, metricsURL: fmt.Sprintf("https://127.0.0.1:%d/metrics", port),
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			// Its serving certificate is self-signed, made at start.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}} //nolint:gosec // loopback test process
	if err := s.waitHTTP(s.http, fmt.Sprintf("https://127.0.0.1:%d/readyz", port), time.Minute); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// Stop stops the scheduler.
func (s *Scheduler) Stop() error {
	if s == nil {
		return nil
	}
	return s.stop()
}

// Queue is the scheduler's work in progress, read from its metrics.
type Queue struct {
	// Active, Backoff, Unschedulable and Gated count pending pods by queue.
	Active, Backoff, Unschedulable, Gated int
	// Binding counts binding cycles in progress; AsyncCalls, status updates waiting
	// to be sent.
	Binding, AsyncCalls int
	// Attempts counts scheduling attempts so far, of any result; Incoming, pods
	// ever added or moved into a queue.
	Attempts, Incoming int
}

// Busy reports whether the scheduler has pods to try or writes to finish.
func (q Queue) Busy() bool { return q.Active+q.Backoff+q.Binding+q.AsyncCalls > 0 }

// Queue reads the scheduler's queue from its metrics.
func (s *Scheduler) Queue(ctx context.Context) (Queue, error) {
	var q Queue
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metricsURL, nil)
	if err != nil {
		return q, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		if perr := s.exited(); perr != nil {
			return q, fmt.Errorf("%w; log:\n%s", perr, s.Tail(20))
		}
		return q, fmt.Errorf("read kube-scheduler metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return q, fmt.Errorf("read kube-scheduler metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "scheduler_") {
			continue
		}
		name, labels, value, ok := metricLine(line)
		if !ok {
			continue
		}
		switch name {
		case "scheduler_pending_pods":
			switch labels {
			case `queue="active"`:
				q.Active = value
			case `queue="backoff"`:
				q.Backoff = value
			case `queue="unschedulable"`:
				q.Unschedulable = value
			case `queue="gated"`:
				q.Gated = value
			}
		case "scheduler_goroutines":
			if labels == `operation="binding"` {
				q.Binding = value
			}
		case "scheduler_pending_async_api_calls":
			q.AsyncCalls += value
		case "scheduler_schedule_attempts_total":
			q.Attempts += value
		case "scheduler_queue_incoming_pods_total":
			q.Incoming += value
		}
	}
	return q, sc.Err()
}

// metricLine splits one Prometheus text line into name, labels and integer value.
func metricLine(line string) (name, labels string, value int, ok bool) {
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", "", 0, false
	}
	f, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", "", 0, false
	}
	name = line[:sp]
	if i := strings.IndexByte(name, '{'); i >= 0 {
		labels = strings.TrimSuffix(name[i+1:], "}")
		name = name[:i]
	}
	return name, labels, int(f), true
}

// settleGap is how long the scheduler must stay idle (no attempt, nothing queued)
// for Settle to call it settled. It also covers the watch's delivery of a write
// made just before Settle: on loopback that takes a few milliseconds.
const settleGap = 40 * time.Millisecond

// Settle waits until the scheduler has tried every pod it can make progress on:
// nothing active or backing off, no binding or status write in flight, and no new
// attempt over settleGap. Pods it found unschedulable wait for a cluster event, as
// they would in a cluster.
func (s *Scheduler) Settle(ctx context.Context) error { return s.settle(ctx, backoffDrained) }

// How settle treats the pods in kube-scheduler's backoff queue.
const (
	backoffDrained = iota // wait until the queue is empty (Settle)
	backoffRetried        // wait until each was tried once more, for at most backoffWait
	backoffIgnored        // do not wait for them
)

// settle is Settle with a choice of how to treat pods backing off.
func (s *Scheduler) settle(ctx context.Context, backoff int) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var last Queue
	idle := false
	// With backoff, the pods backing off when the wait began must each be tried
	// again (attempts grow by as many), for at most backoffWait.
	var first *Queue
	backoffUntil := time.Now().Add(backoffWait)
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-scheduler did not settle: last queue %+v: %w", last, ctx.Err())
		case <-time.After(settleGap):
		}
		q, err := s.Queue(ctx)
		if err != nil {
			if perr := s.exited(); perr != nil || ctx.Err() != nil {
				return err
			}
			// A scheduler busy with thousands of pods may answer its metrics late:
			// ask again.
			idle = false
			continue
		}
		if first == nil {
			first = &q
		}
		busy := q.Active+q.Binding+q.AsyncCalls > 0
		switch backoff {
		case backoffDrained:
			busy = q.Busy()
		case backoffRetried:
			busy = busy || q.Backoff > 0 && q.Attempts < first.Attempts+first.Backoff && time.Now().Before(backoffUntil)
		}
		if !busy && idle && q.Attempts == last.Attempts && q.Incoming == last.Incoming {
			return nil
		}
		idle = !busy
		last = q
	}
}

// backoffWait bounds settle's wait for the pods in backoff (podMaxBackoffSeconds
// is 2 s, see schedulerConfig).
const backoffWait = 5 * time.Second

// SettleOnChange returns a Settle for a driver that steps a cluster many times
// (a replay): pods kube-scheduler rejected with no plugin to wake them (no node
// at all, say) cycle through its backoff queue for ever, so waiting for the
// queue to empty would never end. It waits for the pods in backoff only when
// the Nodes changed since the last call (any Node's resourceVersion), until each
// has been tried once more (or 5 s); otherwise only for the active queue,
// bindings and status writes.
func (s *Scheduling) SettleOnChange(cs kubernetes.Interface) func(context.Context) error {
	last := ""
	return func(ctx context.Context) error {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		h := fnv.New64a()
		for _, n := range nodes.Items {
			h.Write([]byte(n.Name + "/" + n.ResourceVersion + ";"))
		}
		sig := fmt.Sprintf("%d/%x", len(nodes.Items), h.Sum64())
		mode := backoffIgnored
		if sig != last {
			mode = backoffRetried
		}
		last = sig
		return s.Scheduler.settle(ctx, mode)
	}
}

// KWOK is a KWOK controller process: it keeps the nodes it manages alive (status
// heartbeats and node leases) and plays their pods' lifecycle as kubelets would
// (bound pods become Running and Ready; pods being deleted go).
type KWOK struct {
	proc
}

// KWOKAnnotation marks the nodes the KWOK controllers of this package manage
// (kwok.x-k8s.io/node=fake, KWOK's own convention); an annotation, so it changes
// nothing the scheduler or the packer look at.
const KWOKAnnotation = "kwok.x-k8s.io/node"

// KWOKOptions configure StartKWOK.
type KWOKOptions struct {
	// InitializeNodes makes KWOK report a managed node Ready as soon as it sees it.
	// Leave it off when the test decides when a node turns Ready (a kubelet's
	// registration takes seconds; GPU device plugins later still).
	InitializeNodes bool
}

// kwokStages are the lifecycle KWOK plays. Written for these tests: heartbeats keep
// Ready nodes Ready; a pod bound to a managed node starts at once; a pod being
// deleted goes at once. Jobs' pods keep running (a scenario says when they end).
const kwokStages = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-heartbeat}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: In, values: ['True']}
  delay: {durationMilliseconds: 20000, jitterDurationMilliseconds: 5000}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range .status.conditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ .lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
  immediateNextStage: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: [Pending]}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - {name: {{ .name | Quote }}, image: {{ .image | Quote }}, ready: true, restartCount: 0, state: {running: {startedAt: {{ $now | Quote }}}}}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-delete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: Exists}
  next:
    delete: true
`

// kwokInitialize reports a managed node Ready on sight.
const kwokInitialize = `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-initialize}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: NotIn, values: ['True']}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: Ready, status: "True", reason: KubeletReady, message: kubelet is posting ready status, lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
      phase: Running
`

// StartKWOK starts the KWOK controller for the nodes annotated KWOKAnnotation=fake
// and waits until it serves its health check. Stop it with Stop.
func (e *Env) StartKWOK(opts KWOKOptions) (*KWOK, error) {
	bin, err := binary("kwok")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kwok-")
	if err != nil {
		return nil, err
	}
	stages := kwokStages
	if opts.InitializeNodes {
		stages += kwokInitialize
	}
	cfg := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(cfg, []byte(stages), 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := startProc("kwok", dir, bin, "--kubeconfig", e.Kubeconfig, "--config", cfg,
		"--manage-nodes-with-annotation-selector", KWOKAnnotation+"=fake",
		"--node-lease-duration-seconds", "40", "--server-address", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, err
	}
	k := &KWOK{proc: *p}
	if err := k.waitHTTP(http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/healthz", port), time.Minute); err != nil {
		_ = k.Stop()
		return nil, err
	}
	return k, nil
}

// Stop stops KWOK.
func (k *KWOK) Stop() error {
	if k == nil {
		return nil
	}
	return k.stop()
}

// Scheduling is a control plane with kube-scheduler and KWOK beside it.
type Scheduling struct {
	*Env
	Scheduler *Scheduler
	KWOK      *KWOK
}

var sharedScheduling struct {
	once sync.Once
	s    *Scheduling
	err  error
}

// SharedScheduling returns the package's control plane (Shared) with one
// kube-scheduler and one KWOK controller (KWOKOptions{}) beside it, started on
// first use. Tests sharing it keep their pods apart by namespace and their nodes by
// label, and clean up what they create. StopShared stops all three.
func SharedScheduling(t testing.TB) *Scheduling {
	t.Helper()
	for _, b := range []string{"kube-scheduler", "kwok"} {
		if _, err := binary(b); err != nil {
			missing(t, err)
		}
	}
	env := Shared(t)
	sharedScheduling.once.Do(func() {
		s := &Scheduling{Env: env}
		if s.Scheduler, sharedScheduling.err = env.StartScheduler(); sharedScheduling.err != nil {
			return
		}
		if s.KWOK, sharedScheduling.err = env.StartKWOK(KWOKOptions{}); sharedScheduling.err != nil {
			_ = s.Scheduler.Stop()
			return
		}
		sharedScheduling.s = s
	})
	if sharedScheduling.err != nil {
		t.Fatal(sharedScheduling.err)
	}
	return sharedScheduling.s
}

func stopSharedScheduling() error {
	s := sharedScheduling.s
	if s == nil {
		return nil
	}
	return errors.Join(s.KWOK.Stop(), s.Scheduler.Stop())
}

// StartScheduling starts a kube-scheduler and a KWOK controller (opts) beside
// the package's shared control plane (Shared) for one test, and stops them when
// it ends: other tests of the package that bind pods themselves then never share
// the API server with a scheduler binding them too.
func StartScheduling(t testing.TB, opts KWOKOptions) *Scheduling {
	t.Helper()
	for _, b := range []string{"kube-scheduler", "kwok"} {
		if _, err := binary(b); err != nil {
			missing(t, err)
		}
	}
	env := Shared(t)
	s := &Scheduling{Env: env}
	var err error
	if s.Scheduler, err = env.StartScheduler(); err != nil {
		t.Fatal(err)
	}
	if s.KWOK, err = env.StartKWOK(opts); err != nil {
		_ = s.Scheduler.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := errors.Join(s.KWOK.Stop(), s.Scheduler.Stop()); err != nil {
			t.Errorf("stop kube-scheduler and KWOK: %v", err)
		}
	})
	return s
}
