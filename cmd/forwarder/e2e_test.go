package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/mototest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func createPod(t testing.TB, ctx context.Context, core corev1client.CoreV1Interface, ns, name string, unschedulable bool, mutate ...func(*corev1.Pod)) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "e2e"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/arch": "arm64"},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
		}}
	for _, m := range mutate {
		m(p)
	}
	p, err := core.Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !unschedulable {
		return
	}
	// What kube-scheduler writes when no node fits, through the status subresource.
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/0 nodes are available", LastTransitionTime: metav1.Now()}}
	if _, err := core.Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestForwarderEndToEnd runs the forwarder against a real kube-apiserver and moto's
// EventBridge, and reads what the Pending Pods rule delivered to SQS.
func TestForwarderEndToEnd(t *testing.T) {
	env := kubetest.Shared(t)
	ep := mototest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The forwarder's own client goes through the SDK default chain, as in a pod.
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ENDPOINT_URL_EVENTBRIDGE", ep)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	eb, err := newEventBridge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q := sqs.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ep),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	queue := mototest.RulesToQueue(t, ctx, eb, q, "pending-pods", mototest.Rule{Name: "pending-pods", Bus: "joiner-e2e", Pattern: events.PendingPodsPattern()})

	core, err := corev1client.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := "forwarder-e2e"
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pending before the forwarder starts: found by the initial list.
	createPod(t, ctx, core, ns, "early-1", true)
	createPod(t, ctx, core, ns, "early-2", true)
	// Unbound but not (yet) judged unschedulable: not sent.
	createPod(t, ctx, core, ns, "not-judged", false)

	healthPort := freePort(t)
	cfg := Config{Cluster: "e2e", Bus: "joiner-e2e", Idle: 200 * time.Millisecond, MaxWait: 2 * time.Second,
		HealthAddr: fmt.Sprintf("127.0.0.1:%d", healthPort), Attempts: 3, ShutdownFlush: 5 * time.Second}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, cfg, env.Config, eb, slog.New(slog.NewJSONHandler(io.Discard, nil))) }()
	defer func() { stop(); <-done }()

	waitHealth(t, healthPort, func(r healthReport) bool { return r.Synced })
	// Pending after the initial sync: found by the watch.
	createPod(t, ctx, core, ns, "late-1", true)

	want := map[string]bool{ns + "/early-1": true, ns + "/early-2": true, ns + "/late-1": true}
	got := map[string]events.PendingPod{}
	deadline := time.Now().Add(45 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			ev, err := events.Decode([]byte(aws.ToString(m.Body)))
			if err != nil {
				t.Fatalf("SQS message is not a decodable event: %v\n%s", err, aws.ToString(m.Body))
			}
			pp, ok := ev.(*events.PendingPods)
			if !ok {
				t.Fatalf("SQS message is a %T, want *events.PendingPods", ev)
			}
			if pp.Detail.Cluster != "e2e" || len(pp.Rejected) != 0 {
				t.Fatalf("detail cluster %q, rejected %v", pp.Detail.Cluster, pp.Rejected)
			}
			for _, p := range pp.Detail.Pods {
				got[p.Key()] = p
			}
		}
	}
	for k := range want {
		p, ok := got[k]
		if !ok {
			t.Fatalf("pod %s never arrived; got %v", k, keys(got))
		}
		if p.UID == "" || p.NodeSelector["kubernetes.io/arch"] != "arm64" || len(p.Containers) != 1 ||
			p.Containers[0].Requests.Cpu().String() != "250m" || p.UnschedulableReason != "0/0 nodes are available" {
			t.Fatalf("pod %s arrived as %+v", k, p)
		}
	}
	if _, ok := got[ns+"/not-judged"]; ok {
		t.Fatal("a pod the scheduler has not judged unschedulable was forwarded")
	}
	rep := waitHealth(t, healthPort, func(r healthReport) bool { return r.LastSuccessfulPut != nil })
	if rep.LastError != "" {
		t.Fatalf("health reports error %q", rep.LastError)
	}
	stop()
	select {
	case err := <-done:
		done <- err // for the deferred receive
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("forwarder did not stop after cancel")
	}
}

// TestForwarderEndToEndSplitsLargeBatches sends pods whose specs add up to well over
// 256 KB, so one batch becomes several entries, each delivered through the rule.
func TestForwarderEndToEndSplitsLargeBatches(t *testing.T) {
	env := kubetest.Shared(t)
	ep := mototest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	awsCfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ep),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")}
	eb := eventbridge.NewFromConfig(awsCfg)
	q := sqs.NewFromConfig(awsCfg)
	queue := mototest.RulesToQueue(t, ctx, eb, q, "pending-pods", mototest.Rule{Name: "pending-pods", Bus: "joiner-split", Pattern: events.PendingPodsPattern()})
	core, err := corev1client.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := "forwarder-split"
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each pod allows 120 zones by node affinity: about 6 KB of spec apiece.
	var zones []string
	for i := range 120 {
		zones = append(zones, fmt.Sprintf("zone-%03d-%s", i, strings.Repeat("z", 40)))
	}
	affinity := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: zones}}}}}}}
	}
	const n = 100
	for i := range n {
		createPod(t, ctx, core, ns, fmt.Sprintf("big-%03d", i), true, affinity)
	}

	cfg := Config{Cluster: "e2e", Bus: "joiner-split", Idle: 200 * time.Millisecond, MaxWait: 5 * time.Second,
		HealthAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Attempts: 3, ShutdownFlush: 5 * time.Second}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, cfg, env.Config, eb, slog.New(slog.NewJSONHandler(io.Discard, nil))) }()
	defer func() { stop(); <-done }()

	got := map[string]events.PendingPod{}
	batches := map[string]int{} // batch id → parts
	messages := 0
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			messages++
			ev, err := events.Decode([]byte(aws.ToString(m.Body)))
			if err != nil {
				t.Fatalf("SQS message is not a decodable event: %v", err)
			}
			pp := ev.(*events.PendingPods)
			for _, p := range pp.Detail.Pods {
				if p.Namespace != ns {
					continue // the shared API server holds other tests' pending pods too
				}
				batches[pp.Detail.BatchID] = pp.Detail.Parts
				if p.Affinity == nil || len(p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values) != 120 {
					t.Fatalf("pod %s lost its affinity", p.Key())
				}
				got[p.Key()] = p
			}
		}
	}
	if len(got) != n {
		t.Fatalf("%d of %d pods arrived in %d messages", len(got), n, messages)
	}
	if messages < 3 {
		t.Fatalf("%d pods of ~6 KB arrived in %d messages; want a split into several", n, messages)
	}
	for id, parts := range batches {
		if parts < 2 {
			t.Fatalf("batch %s has parts=%d; want a multi-part batch", id, parts)
		}
	}
	t.Logf("%d pods in %d messages, batches %v", n, messages, batches)
}

func keys(m map[string]events.PendingPod) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func waitHealth(t testing.TB, port int, ok func(healthReport) bool) healthReport {
	t.Helper()
	var last healthReport
	var lastStatus int
	for range 300 {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err == nil {
			lastStatus = resp.StatusCode
			last = healthReport{}
			_ = json.NewDecoder(resp.Body).Decode(&last)
			resp.Body.Close()
			if ok(last) {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("/healthz status %d with report %+v", resp.StatusCode, last)
				}
				return last
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("/healthz never satisfied the test: status %d, %+v", lastStatus, last)
	return last
}

// TestDeployKustomizationApplies checks deploy/ (with forwarder.yaml) still applies,
// and that the forwarder's ServiceAccount is defined once and carries the IRSA role.
func TestDeployKustomizationApplies(t *testing.T) {
	env := kubetest.Shared(t)
	if out, err := env.ApplyDeploy(); err != nil {
		t.Fatalf("kubectl apply --server-side -k deploy/: %v\n%s", err, out)
	}
	out, err := env.Kubectl("-n", "joiner", "get", "serviceaccount", "joiner-forwarder", "-o", `jsonpath={.metadata.annotations.eks\.amazonaws\.com/role-arn}`)
	if err != nil || out != "<FORWARDER_ROLE_ARN>" {
		t.Fatalf("forwarder ServiceAccount role annotation = %q (%v)", out, err)
	}
	out, err = env.Kubectl("-n", "joiner", "get", "deployment", "joiner-forwarder", "-o",
		`jsonpath={.spec.template.spec.serviceAccountName} {.spec.template.spec.priorityClassName} {.spec.template.spec.containers[0].readinessProbe.httpGet.path}`)
	if err != nil || strings.TrimSpace(out) != "joiner-forwarder system-cluster-critical /healthz" {
		t.Fatalf("forwarder Deployment = %q (%v)", out, err)
	}
}
