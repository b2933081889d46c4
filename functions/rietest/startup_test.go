//go:build unix

package rietest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/functions/internal/lambdatest"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
)

// runtimeAPI is a loopback stand-in for the Lambda Runtime API that reports the
// moment a bootstrap asks for its first invocation: from then on the function is
// ready, its configuration read and validated and its clients built.
type runtimeAPI struct {
	addr  string
	ready chan struct{}
}

func startRuntimeAPI(tb testing.TB) *runtimeAPI {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &runtimeAPI{addr: l.Addr().String(), ready: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, req *http.Request) {
		select {
		case r.ready <- struct{}{}:
		default:
		}
		// Never hand out an invocation: the bootstrap waits here until it is killed.
		<-req.Context().Done()
	})
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, req *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return r
}

// startupEnv is what the CDK stack gives an EKS function, pointed at loopback: eks
// access with the endpoint and CA configured (so no DescribeCluster at start), static
// credentials, and the AWS endpoint of a local simulator. Nothing listens there; the
// functions make no call before their first invocation.
func startupEnv(tb testing.TB, name, runtimeAPI string) []string {
	tb.Helper()
	home := tb.TempDir()
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"AWS_LAMBDA_RUNTIME_API=" + runtimeAPI,
		handlers.EnvClusterName + "=" + clusterName,
		handlers.EnvRegion + "=us-east-1",
		"JOINER_CLUSTER_ACCESS=eks",
		"JOINER_CLUSTER_ENDPOINT=https://127.0.0.1:6443",
		"JOINER_CLUSTER_CA_DATA=" + base64.StdEncoding.EncodeToString(selfSignedCA(tb)),
		handlers.EnvAWSEndpointURL + "=http://127.0.0.1:4566",
		"AWS_ACCESS_KEY_ID=AKIDSTARTUP",
		"AWS_SECRET_ACCESS_KEY=startup-secret",
		"AWS_SESSION_TOKEN=startup-token",
		"AWS_CONFIG_FILE=" + filepath.Join(home, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "no-aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_LAMBDA_FUNCTION_NAME=joiner-" + name,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512",
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_LOG_LEVEL=WARN",
	}
}

func selfSignedCA(tb testing.TB) []byte {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "startup-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// startOnce execs boot and returns how long it took to ask for its first invocation;
// stop (nil for none) is called once it has, before the process is killed and reaped.
func startOnce(tb testing.TB, boot string, env []string, api *runtimeAPI, stop func()) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, boot)
	cmd.Env = env
	var stderr lambdatest.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var ready time.Duration
	select {
	case <-api.ready:
		ready = time.Since(start)
	case err := <-exited:
		tb.Fatalf("%s exited before asking for an invocation: %v\n%s", boot, err, stderr.String())
	case <-ctx.Done():
		tb.Fatalf("%s not ready after 10s\n%s", boot, stderr.String())
	}
	if stop != nil {
		stop()
	}
	_ = cmd.Process.Kill()
	<-exited
	return ready
}

// BenchmarkStartToReady measures each function's process start to ready: exec of
// its stripped bootstrap (built as `make functions` builds it, for the host
// architecture) to its first GET /2018-06-01/runtime/invocation/next. Target ≤ 50 ms.
func BenchmarkStartToReady(b *testing.B) {
	for _, name := range []string{handlers.Provisioner, handlers.Interruption, handlers.Consolidator} {
		b.Run(name, func(b *testing.B) {
			boot := bootstrap(b, name)
			api := startRuntimeAPI(b)
			env := startupEnv(b, name, api.addr)
			startOnce(b, boot, env, api, nil) // page the binary in, as a warm Lambda host has it
			var worst time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StartTimer()
				// The timer stops at ready: killing and reaping the process is not start-up.
				worst = max(worst, startOnce(b, boot, env, api, b.StopTimer))
			}
			b.ReportMetric(float64(worst)/float64(time.Millisecond), "worst-ms")
		})
	}
}

// TestStartToReady checks, once per function, that the bootstrap validates its
// configuration and reaches the Runtime API with the loopback environment the
// benchmark uses (so the benchmark measures a successful start, not a failure).
func TestStartToReady(t *testing.T) {
	for _, name := range []string{handlers.Provisioner, handlers.Interruption, handlers.Consolidator} {
		t.Run(name, func(t *testing.T) {
			api := startRuntimeAPI(t)
			d := startOnce(t, bootstrap(t, name), startupEnv(t, name, api.addr), api, nil)
			t.Logf("%s: exec to first /runtime/invocation/next in %v", name, d.Round(100*time.Microsecond))
		})
	}
}
