//go:build linux

package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary plays both programs: with envPlay=joiner it is `joiner` (a Set
// that forwards the run commands and exits through Main), with envPlay=joiner-run it
// is a joiner-run whose "sim" prints its pid, waits to be stopped and says by what,
// and whose "replay" ends itself with SIGTERM's default action.
const envPlay = "JOINER_CLI_TEST_PLAY"

func TestMain(m *testing.M) {
	switch os.Getenv(envPlay) {
	case "joiner":
		os.Setenv(envPlay, RunProgram) // what the child plays
		s := NewSet("joiner")
		s.Forward()
		s.Main()
	case RunProgram:
		s := NewSet(RunProgram)
		s.Register(Command{Name: "sim", Run: func(ctx context.Context, _ []string, stdout, _ io.Writer) int {
			got := make(chan os.Signal, 1)
			signal.Notify(got, Signals...)
			fmt.Fprintf(stdout, "pid %d\n", os.Getpid())
			<-ctx.Done()
			fmt.Fprintf(stdout, "stopped by %v\n", <-got)
			return 7
		}})
		s.Register(Command{Name: "replay", Run: func(context.Context, []string, io.Writer, io.Writer) int {
			signal.Reset()
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
			time.Sleep(time.Minute)
			return 0
		}})
		s.Main()
	}
	os.Exit(m.Run())
}

// startJoiner runs the test binary as `joiner sim` and returns it, its stdout and the
// child's pid.
func startJoiner(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader, int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), envPlay+"=joiner", EnvRunProgram+"="+self)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(out)
	if args[0] != "sim" {
		return cmd, r, 0
	}
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("no pid line from the child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if err != nil {
		t.Fatalf("pid line %q: %v", line, err)
	}
	t.Cleanup(func() {
		// A failing test must not leave its own child behind either (checked by
		// name: the pid may be reused once the child is gone).
		if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(cmdline), self) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return cmd, r, pid
}

// running reports whether pid is a live process (a zombie, waiting for a reaper
// other than joiner, counts as gone).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !running(pid) {
			return
		}
	}
	t.Fatalf("joiner-run (pid %d) still running after joiner ended", pid)
}

// Each stopping signal sent to joiner alone (not to its process group, as a terminal
// would) reaches joiner-run, which cleans up and exits; joiner exits with its code
// and leaves no process behind.
func TestSignalsReachJoinerRun(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, out, child := startJoiner(t, "sim")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(out)
			err := cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 7 {
				t.Fatalf("joiner ended with %v, want joiner-run's exit code 7", err)
			}
			if want := fmt.Sprintf("stopped by %v\n", sig); string(rest) != want {
				t.Errorf("joiner-run said %q, want %q", rest, want)
			}
			waitGone(t, child)
		})
	}
}

// SIGKILL cannot be passed on; the kernel's parent-death signal stops joiner-run.
func TestJoinerRunDiesWithKilledJoiner(t *testing.T) {
	cmd, _, child := startJoiner(t, "sim")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, child)
}

// A joiner-run killed by a signal makes joiner exit 128+signal, as a shell reports it.
func TestJoinerRunKilledBySignalGives128PlusSignal(t *testing.T) {
	cmd, _, _ := startJoiner(t, "replay")
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("joiner ended with %v, want exit code %d", err, 128+int(syscall.SIGTERM))
	}
}
