package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

// The reliability tests drive the handlers the way Lambda does: every invocation
// has its own identity (the request id), a redelivered event may land in another
// container (a fresh Function, with no memory of the first delivery), and the SDK
// retries quickly so that faults cost milliseconds, not the production backoff.

// fnOpts tune one test function.
type fnOpts struct {
	rebalance string
	now       func() time.Time
	// clients replaces the world's Kubernetes clients (an API-server proxy).
	clients *kube.Clients
	account string
}

var invocationSeq atomic.Int64

// fresh returns a function as a new container would run it: no dedupe memory, and
// one identity per invocation.
func (w *world) fresh(t testing.TB, name string, o fnOpts) *Function {
	t.Helper()
	rebalance := o.rebalance
	if rebalance == "" {
		rebalance = RebalanceIgnore
	}
	cfg := Config{ClusterName: "e2e", Region: "us-east-1", AccountID: o.account, Rebalance: rebalance,
		LeaseDuration: time.Minute, LeaseWait: time.Second, MinSavingsFraction: 0.1}
	kc := w.clients
	if o.clients != nil {
		kc = o.clients
	}
	fn, err := NewFunction(name, func(ctx context.Context) (*Deps, error) {
		id := fmt.Sprintf("%s/req-%d", name, invocationSeq.Add(1))
		prov, err := cloud.New(cloud.Config{ClusterName: "e2e", Region: "us-east-1", Unavailable: cloud.NewUnavailableOfferings(time.Now), Logger: quietLog()}, w.cloud)
		if err != nil {
			return nil, err
		}
		return &Deps{Config: cfg, Cloud: prov, Identity: id, Now: o.now, Log: quietLog(),
			Cluster: kube.New(kc, kube.Options{ClusterName: "e2e", Identity: id, Now: o.now, Log: quietLog()})}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fn.MetricsOut = io.Discard
	return fn
}

// quietLog keeps test output readable; set JOINER_TEST_LOG=1 to see the handlers' logs.
func quietLog() *slog.Logger {
	if os.Getenv("JOINER_TEST_LOG") != "" {
		return NewLogger(os.Stderr, "DEBUG")
	}
	return NewLogger(io.Discard, "ERROR")
}

// fastRetries makes the SDK retry throttling and 5xx within milliseconds.
func (w *world) fastRetries() {
	w.cloud = cloud.NewClients(w.sim.AWSConfig(), cloud.RetryOptions{MaxAttempts: 3, MaxBackoff: 5 * time.Millisecond}, false)
}

// sample reads events/<name> and applies old→new replacements.
func sample(t testing.TB, name string, oldnew ...string) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../events/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.NewReplacer(oldnew...).Replace(string(raw)))
}

// deliver invokes fn and returns the summary and error without failing the test.
func deliver(t testing.TB, ctx context.Context, fn *Function, raw []byte) (Summary, error) {
	t.Helper()
	out, err := fn.Invoke(ctx, raw)
	var s Summary
	if out != nil {
		if jerr := json.Unmarshal(out, &s); jerr != nil {
			t.Fatalf("summary %s: %v", out, jerr)
		}
	}
	return s, err
}

// mustDeliver is deliver that fails the test on an error.
func mustDeliver(t testing.TB, fn *Function, raw []byte) Summary {
	t.Helper()
	s, err := deliver(t, context.Background(), fn, raw)
	if err != nil {
		t.Fatalf("%s: %v (summary %+v)", fn.Name(), err, s)
	}
	return s
}

func (w *world) state(t testing.TB) *kube.ClusterState {
	t.Helper()
	st, err := kube.New(w.clients, kube.Options{ClusterName: "e2e", Log: quietLog()}).ReadState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// registerNew makes a Ready node appear for every launched NodeClaim that has none
// yet, as the kubelet would, and returns all such node names (sorted).
func (w *world) registerNew(t testing.TB) []string {
	t.Helper()
	ctx := context.Background()
	st := w.state(t)
	have := map[string]bool{}
	for _, n := range st.AllNodes {
		have[n.Spec.ProviderID] = true
	}
	var names []string
	for _, nc := range st.NodeClaims {
		id := facts.InstanceID(nc.Status.ProviderID)
		if id == "" || nc.DeletionTimestamp != nil || have[nc.Status.ProviderID] {
			continue
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{karpenter.NodePoolLabelKey: "default",
			corev1.LabelInstanceTypeStable: nc.Labels[corev1.LabelInstanceTypeStable], corev1.LabelTopologyZone: nc.Labels[corev1.LabelTopologyZone],
			corev1.LabelHostname: id}}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
		created, err := w.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			Capacity:    nc.Status.Capacity,
			Allocatable: nc.Status.Allocatable,
		}
		if _, err := w.cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The API server taints new nodes not-ready; the node lifecycle controller,
		// which does not run here, lifts it once the node is Ready.
		if _, err := w.cs.CoreV1().Nodes().Patch(ctx, id, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, id)
	}
	sort.Strings(names)
	return names
}

// bind binds pods to a node, as the scheduler would.
func (w *world) bind(t testing.TB, node string, pods ...string) {
	t.Helper()
	for _, p := range pods {
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p, Namespace: w.ns}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
		if err := w.cs.CoreV1().Pods(w.ns).Bind(context.Background(), b, metav1.CreateOptions{}); err != nil {
			t.Fatalf("bind %s to %s: %v", p, node, err)
		}
	}
}

// podsOn lists the pods bound to node.
func (w *world) podsOn(t testing.TB, node string) []string {
	t.Helper()
	list, err := w.cs.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.Spec.NodeName == node {
			out = append(out, p.Name)
		}
	}
	return out
}

// fingerprint is what an event may change: NodeClaims (live or deleting), owned
// instances (running or gone), nodes and their disruption taint, and pods.
type fingerprint struct {
	Claims    map[string]string
	Instances map[string]string
	Nodes     map[string]string
	Pods      map[string]string
}

func (w *world) fingerprint(t testing.TB) fingerprint {
	t.Helper()
	st := w.state(t)
	f := fingerprint{Claims: map[string]string{}, Instances: map[string]string{}, Nodes: map[string]string{}, Pods: map[string]string{}}
	for _, nc := range st.NodeClaims {
		v := "live " + nc.Status.ProviderID
		if nc.DeletionTimestamp != nil {
			v = "deleting " + nc.Status.ProviderID
		}
		f.Claims[nc.Name] = v
	}
	for _, in := range w.ownedInstances(t) {
		v := "alive"
		if in.State == "shutting-down" || in.State == "terminated" {
			v = "gone"
		}
		f.Instances[in.ID] = v
	}
	for _, n := range st.AllNodes {
		v := "schedulable"
		if tainted(n) {
			v = "tainted"
		}
		f.Nodes[n.Name] = v
	}
	list, err := w.cs.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		f.Pods[p.Name] = p.Spec.NodeName
	}
	return f
}

func (f fingerprint) diff(g fingerprint) string {
	var out []string
	cmp := func(what string, a, b map[string]string) {
		for k, v := range a {
			if b[k] != v {
				out = append(out, fmt.Sprintf("%s %s: %q → %q", what, k, v, b[k]))
			}
		}
		for k, v := range b {
			if _, ok := a[k]; !ok {
				out = append(out, fmt.Sprintf("%s %s: new %q", what, k, v))
			}
		}
	}
	cmp("NodeClaim", f.Claims, g.Claims)
	cmp("instance", f.Instances, g.Instances)
	cmp("node", f.Nodes, g.Nodes)
	cmp("pod", f.Pods, g.Pods)
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func (f fingerprint) equal(g fingerprint) bool { return reflect.DeepEqual(f, g) }

func tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpenter.DisruptedTaintKey {
			return true
		}
	}
	return false
}

// assertConverged checks the safety invariants: every live instance Joiner owns is
// named by a live NodeClaim, every launched NodeClaim's instance is alive, no
// NodeClaim hangs in deletion, and no node is left tainted karpenter.sh/disrupted.
func (w *world) assertConverged(t testing.TB) {
	t.Helper()
	st := w.state(t)
	byProvider := map[string]*karpenter.NodeClaim{}
	for _, nc := range st.NodeClaims {
		if nc.DeletionTimestamp != nil {
			t.Errorf("NodeClaim %s still deleting (finalizers %v)", nc.Name, nc.Finalizers)
			continue
		}
		if nc.Status.ProviderID == "" {
			t.Errorf("NodeClaim %s never recorded a launch", nc.Name)
			continue
		}
		byProvider[facts.InstanceID(nc.Status.ProviderID)] = nc
	}
	alive := map[string]bool{}
	for _, in := range w.ownedInstances(t) {
		if in.State == "shutting-down" || in.State == "terminated" {
			continue
		}
		alive[in.ID] = true
		if byProvider[in.ID] == nil {
			t.Errorf("orphan instance %s (%s, tags %v): no NodeClaim names it", in.ID, in.State, in.Tags)
		}
	}
	for id, nc := range byProvider {
		if !alive[id] {
			t.Errorf("NodeClaim %s names instance %s, which is not running", nc.Name, id)
		}
	}
	for _, n := range st.AllNodes {
		if tainted(n) {
			t.Errorf("node %s left tainted %s", n.Name, karpenter.DisruptedTaintKey)
		}
	}
}

// liveClaims counts NodeClaims not being deleted.
func liveClaims(st *kube.ClusterState) int {
	n := 0
	for _, nc := range st.NodeClaims {
		if nc.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// aliveInstances counts owned instances that are not going away.
func (w *world) aliveInstances(t testing.TB) int {
	n := 0
	for _, in := range w.ownedInstances(t) {
		if in.State != "shutting-down" && in.State != "terminated" {
			n++
		}
	}
	return n
}

// apiProxy is a loopback reverse proxy in front of the real API server that answers
// chosen requests with a failure: a 409 Conflict, a 500, or a timeout (a 504 after
// the client has given up). A rule may let the request reach the API server first,
// so the write happens but its answer is lost.
type apiProxy struct {
	srv     *httptest.Server
	Config  *rest.Config
	Clients *kube.Clients

	mu    sync.Mutex
	rules []*faultRule
	log   []string
}

// faultRule selects requests by method and path and fails the first Count of them
// (every Every-th match when Every > 1).
type faultRule struct {
	Methods  []string
	Contains string // substring of the path
	Except   string // requests whose path holds this are never failed
	Status   int    // 409, 500, 504
	// Hang delays the answer past the client's timeout.
	Hang time.Duration
	// After forwards the request first: the API server acts, the client sees the failure.
	After bool
	Count int
	Every int

	seen, hits int
}

func (r *faultRule) match(req *http.Request) bool {
	if r.Count > 0 && r.hits >= r.Count {
		return false
	}
	if len(r.Methods) > 0 {
		ok := false
		for _, m := range r.Methods {
			ok = ok || m == req.Method
		}
		if !ok {
			return false
		}
	}
	if r.Contains != "" && !strings.Contains(req.URL.Path, r.Contains) {
		return false
	}
	if r.Except != "" && strings.Contains(req.URL.Path, r.Except) {
		return false
	}
	r.seen++
	if r.Every > 1 && r.seen%r.Every != 0 {
		return false
	}
	r.hits++
	return true
}

var mutating = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

func newAPIProxy(t testing.TB, env *kubetest.Env, clientTimeout time.Duration) *apiProxy {
	t.Helper()
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := &apiProxy{}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, Transport: upstream,
		ErrorLog: log.New(io.Discard, "", 0)}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rule := p.pick(r)
		if rule == nil {
			rp.ServeHTTP(w, r)
			return
		}
		if rule.After {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r.Clone(context.WithoutCancel(r.Context())))
		}
		if rule.Hang > 0 {
			select {
			case <-time.After(rule.Hang):
			case <-r.Context().Done():
				return
			}
		}
		status := rule.Status
		if status == 0 {
			status = http.StatusGatewayTimeout
		}
		writeStatus(w, status, r)
	}))
	t.Cleanup(p.srv.Close)
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = p.srv.URL
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	cfg.Timeout = clientTimeout
	p.Config = cfg
	if p.Clients, err = kube.NewClients(cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *apiProxy) pick(r *http.Request) *faultRule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rule := range p.rules {
		if rule.match(r) {
			p.log = append(p.log, fmt.Sprintf("%d %s %s", rule.Status, r.Method, r.URL.Path))
			return rule
		}
	}
	return nil
}

// inject replaces the rules.
func (p *apiProxy) inject(rules ...*faultRule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = rules
}

// injected returns the failures answered so far.
func (p *apiProxy) injected() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// writeStatus answers a metav1.Status as the API server would.
func writeStatus(w http.ResponseWriter, status int, r *http.Request) {
	var err *apierrors.StatusError
	gr := schema.GroupResource{Resource: "proxied"}
	switch status {
	case http.StatusConflict:
		err = apierrors.NewConflict(gr, r.URL.Path, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	case http.StatusGatewayTimeout:
		err = apierrors.NewTimeoutError("request did not complete within the allowed duration", 0)
	default:
		err = apierrors.NewInternalError(fmt.Errorf("injected %d", status))
	}
	st := err.Status()
	st.APIVersion, st.Kind = "v1", "Status"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(&st)
}
