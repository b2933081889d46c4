//go:build unix

// Package lambdatest runs Joiner's function bootstraps as Lambda runs them, for the
// tests of functions/rietest and functions/deploytest: built for the provided.al2023
// runtime (for the host architecture), started under the AWS Lambda Runtime Interface
// Emulator (the program inside `sam local invoke`'s container) on loopback ports,
// and invoked over HTTP. It also starts the other processes those tests run beside
// them (the in-cluster forwarder), each in its own process group with its output
// kept for the failure message.
package lambdatest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// InvokePath is the emulator's invoke URL path, the one `sam local start-lambda` serves too.
const InvokePath = "/2015-03-31/functions/function/invocations"

// InstallRIE runs scripts/rie.sh (a no-op once the emulator is cached) and returns
// the path it prints.
func InstallRIE(repoRoot string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, "scripts", "rie.sh"))
	cmd.Dir = repoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/rie.sh: %v\n%s", err, stderr.String())
	}
	lines := strings.Fields(strings.TrimSpace(stdout.String()))
	if len(lines) == 0 {
		return "", fmt.Errorf("scripts/rie.sh printed no path\n%s", stderr.String())
	}
	path := lines[len(lines)-1]
	if st, err := os.Stat(path); err != nil || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("scripts/rie.sh printed %q, which is not an executable", path)
	}
	return path, nil
}

// RequireRIE fails t under `make test` (JOINER_REQUIRE_REAL_PARTS=1) or in CI and skips
// it elsewhere when the emulator could not be installed (err from InstallRIE).
func RequireRIE(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" || os.Getenv("JOINER_REQUIRE_REAL_PARTS") == "1" {
		t.Fatalf("Lambda Runtime Interface Emulator unavailable: %v", err)
	}
	t.Skipf("Lambda Runtime Interface Emulator unavailable (run `bash scripts/rie.sh`): %v", err)
}

// Build compiles each package (import paths relative to repoRoot, such as
// ./functions/provisioner) as the Makefile builds a bootstrap — lambda.norpc, stripped,
// static — but for the host, into dir/<last path element>/bootstrap, and returns
// those paths by that name.
func Build(repoRoot, dir string, pkgs ...string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := filepath.Join(dir, ".build") + string(filepath.Separator)
	args := append([]string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	paths := map[string]string{}
	for _, p := range pkgs {
		name := filepath.Base(p)
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			return nil, err
		}
		dst := filepath.Join(dir, name, "bootstrap")
		if err := os.Rename(filepath.Join(out, name), dst); err != nil {
			return nil, err
		}
		paths[name] = dst
	}
	return paths, os.RemoveAll(out)
}

// Buffer collects a process's output while the test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len is how many bytes were written so far.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// Process is a child process of the test in its own process group, so stopping it
// also stops what it started (the emulator's bootstrap).
type Process struct {
	Name           string
	Stdout, Stderr *Buffer
	cmd            *exec.Cmd
	exited         chan struct{}
	err            error
}

// StartProcess starts bin with args and exactly env (nothing of the test's own
// environment leaks in) in dir, and stops it when the test ends, logging its output
// if the test failed.
func StartProcess(t testing.TB, name, dir string, env []string, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{Name: name, Stdout: &Buffer{}, Stderr: &Buffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = p.Stdout, p.Stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr:\n%s", name, p.Stdout, p.Stderr)
		}
	})
	return p
}

// Exited reports the process's end (nil while it runs).
func (p *Process) Exited() error {
	select {
	case <-p.exited:
		if p.err == nil {
			return fmt.Errorf("%s exited", p.Name)
		}
		return fmt.Errorf("%s exited: %w", p.Name, p.err)
	default:
		return nil
	}
}

// Stop ends the process group: SIGTERM, then SIGKILL after 5 s.
func (p *Process) Stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// WaitListening waits until addr accepts connections, failing t if the process exits
// first or timeout passes.
func (p *Process) WaitListening(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if err := p.Exited(); err != nil {
			t.Fatalf("%v before listening on %s\nstdout:\n%s\nstderr:\n%s", err, addr, p.Stdout, p.Stderr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %s after %v\nstderr:\n%s", p.Name, addr, timeout, p.Stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FreeAddr returns a loopback address no one listens on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Emulator is one function's bootstrap running under aws-lambda-rie.
type Emulator struct {
	*Process
	// URL is the invoke URL.
	URL string
	// ListenAfter is how long the emulator took to listen after it started.
	ListenAfter time.Duration
}

// StartEmulator runs bootstrap under the emulator rie on free loopback ports (its
// invoke API and its internal runtime API, so several run at once) with exactly env,
// in a fresh HOME, and stops both when the test ends.
func StartEmulator(t testing.TB, rie, name, bootstrap string, env []string) *Emulator {
	t.Helper()
	home := t.TempDir()
	api, rapi := FreeAddr(t), FreeAddr(t)
	env = append(append([]string(nil), env...), "HOME="+home)
	start := time.Now()
	p := StartProcess(t, name+" emulator", home, env, rie,
		"--runtime-interface-emulator-address", api, "--runtime-api-address", rapi, bootstrap)
	p.WaitListening(t, api, 15*time.Second)
	return &Emulator{Process: p, URL: "http://" + api + InvokePath, ListenAfter: time.Since(start)}
}

// Response is one invocation as the caller of the emulator sees it.
type Response struct {
	Status  int
	Body    []byte
	Elapsed time.Duration
	// LogFrom is where this invocation's output starts in the emulator's stdout.
	LogFrom int
}

// Post invokes the function with body and returns its answer (bounded by timeout).
func (e *Emulator) Post(t testing.TB, body []byte, timeout time.Duration) Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r := Response{LogFrom: e.Stdout.Len()}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v\nstdout since the invocation:\n%s", e.URL, err, e.Stdout.String()[r.LogFrom:])
	}
	defer resp.Body.Close()
	r.Body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	r.Elapsed = time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	r.Status = resp.StatusCode
	return r
}

// Error is the body the runtime returns for a handler error (with HTTP 200).
type Error struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}
