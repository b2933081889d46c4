package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/mototest"
)

// BenchmarkForwarderRSS1000Pods runs the stripped forwarder binary against the real
// API server with 1,000 pending pods and reports its resident memory once it has
// published them (target: ≤ 30 MiB) and the binary size (target: ≤ 20 MB).
func BenchmarkForwarderRSS1000Pods(b *testing.B) {
	env := kubetest.Shared(b)
	ep := mototest.New(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	awsCfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ep),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")}
	eb := eventbridge.NewFromConfig(awsCfg)
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String("joiner-rss")}); err != nil {
		b.Fatal(err)
	}

	bin := filepath.Join(b.TempDir(), "forwarder")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	st, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}

	core, err := corev1client.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	ns := "forwarder-rss"
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	const n = 1000
	for i := range n {
		createPod(b, ctx, core, ns, fmt.Sprintf("rss-%04d", i), true)
	}

	port := freePort(b)
	cmd := exec.Command(bin, "-health-addr", fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "JOINER_CLUSTER_NAME=rss", "JOINER_EVENT_BUS=joiner-rss",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "AWS_ENDPOINT_URL_EVENTBRIDGE="+ep,
		"LOG_LEVEL=warn", "KUBERNETES_SERVICE_HOST=")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()

	rep := waitHealth(b, port, func(r healthReport) bool { return r.LastSuccessfulPut != nil && r.Queued == 0 })
	if rep.LastError != "" {
		b.Fatalf("health: %+v", rep)
	}
	time.Sleep(time.Second)
	rss := procStatus(b, cmd.Process.Pid, "VmRSS:")
	anon := procStatus(b, cmd.Process.Pid, "RssAnon:")
	for b.Loop() {
		// The measurement is of a long-running process, taken once above.
	}
	b.ReportMetric(float64(rss)/(1<<20), "RSS-MiB")
	b.ReportMetric(float64(anon)/(1<<20), "RssAnon-MiB")
	b.ReportMetric(float64(st.Size())/1e6, "binary-MB")
}

// procStatus reads one kB field of /proc/<pid>/status, in bytes.
func procStatus(b *testing.B, pid int, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
