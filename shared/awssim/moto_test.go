package awssim

import (
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
)

// moto is the moto_server process the contract tests share, started on first use.
var moto struct {
	once     sync.Once
	endpoint string
	err      error
	cmd      *exec.Cmd
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopMoto()
	os.Exit(code)
}

// motoEndpoint starts moto_server on a free loopback port (once per test
// binary) and returns its URL. Without moto_server the calling test is
// skipped, except in CI (CI=true), where that is a failure.
func motoEndpoint(t testing.TB) string {
	t.Helper()
	moto.once.Do(func() { moto.endpoint, moto.err = startMoto() })
	if moto.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("contract tests need moto_server in CI: %v", moto.err)
		}
		t.Skipf("skipping the moto_server half of the contract suite: %v", moto.err)
	}
	return moto.endpoint
}

func startMoto() (string, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return "", fmt.Errorf("moto_server is not on PATH (it ships with this machine image: pip install 'moto[server]')")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so its python child goes down with it
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &syncWriter{w: &logs}, &syncWriter{w: &logs}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start moto_server: %w", err)
	}
	moto.cmd = cmd
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(endpoint + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return endpoint, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopMoto()
	return "", fmt.Errorf("moto_server did not answer on %s within 30s; its output:\n%s", endpoint, logs.String())
}

func stopMoto() {
	if moto.cmd == nil || moto.cmd.Process == nil {
		return
	}
	// moto keeps nothing worth flushing, and it is slow to honour SIGTERM under load.
	syscall.Kill(-moto.cmd.Process.Pid, syscall.SIGKILL)
	moto.cmd.Wait()
	moto.cmd = nil
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
