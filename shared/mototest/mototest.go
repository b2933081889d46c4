// Package mototest runs moto_server, the independent AWS emulator Joiner's tests use as
// the reference for EC2, SSM, Secrets Manager, EKS, EventBridge and SQS, on a free
// loopback port.
//
// Without moto_server on PATH a test is skipped, except in CI (CI=true), where that is
// a failure: CI must never pass by skipping the reference.
package mototest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
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
}

// Start runs a moto_server and waits until it answers.
func Start() (*Server, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server is not on PATH (pip install 'moto[server]'): %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), logs: &syncBuilder{}}
	s.cmd = exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
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
	if os.Getenv("CI") == "true" {
		t.Fatalf("moto_server is required in CI: %v", err)
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
