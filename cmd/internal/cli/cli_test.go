package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeRun writes a stand-in for joiner-run that prints its arguments and exits
// with the code in its last argument.
func fakeRun(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), RunProgram)
	script := "#!/bin/sh\necho \"args: $*\"\necho oops >&2\nfor a; do last=$a; done\nexit $last\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestForwardRunsJoinerRun(t *testing.T) {
	t.Setenv(EnvRunProgram, fakeRun(t))
	s := NewSet("joiner")
	s.Forward()
	for _, c := range RunCommands {
		if got, ok := s.Lookup(c.Name); !ok || got.Summary != c.Summary {
			t.Errorf("%s: not forwarded with its summary", c.Name)
		}
	}
	var out, errb bytes.Buffer
	if code := s.Dispatch(context.Background(), []string{"replay", "001-heavy-app", "-q", "0"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	if got := out.String(); got != "args: replay 001-heavy-app -q 0\n" || errb.String() != "oops\n" {
		t.Errorf("stdout %q, stderr %q: want the arguments passed on and both streams kept", got, errb.String())
	}
	out.Reset()
	if code := s.Dispatch(context.Background(), []string{"invoke", "provisioner", "3"}, &out, &errb); code != 3 {
		t.Errorf("exit %d, want joiner-run's 3", code)
	}
}

func TestForwardWithoutJoinerRunSaysHowToGetIt(t *testing.T) {
	t.Setenv(EnvRunProgram, "")
	t.Setenv("PATH", t.TempDir())
	s := NewSet("joiner")
	s.Forward()
	var out, errb bytes.Buffer
	if code := s.Dispatch(context.Background(), []string{"replay"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{"joiner replay:", "no joiner-run was found", "make joiner", "go run ./cmd/joiner-run replay"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("message %q does not contain %q", errb.String(), want)
		}
	}
	t.Setenv(EnvRunProgram, "/no/such/joiner-run")
	errb.Reset()
	if code := s.Dispatch(context.Background(), []string{"record"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "$JOINER_RUN") {
		t.Errorf("exit %d, %q: a bad $JOINER_RUN must be named", code, errb.String())
	}
}

func TestDispatchUsage(t *testing.T) {
	s := NewSet("joiner")
	s.Register(Command{Name: "plan", Summary: "plan things", Run: func(context.Context, []string, io.Writer, io.Writer) int { return 0 }})
	var out, errb bytes.Buffer
	if code := s.Dispatch(context.Background(), nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "  plan       plan things\n") {
		t.Errorf("no arguments: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := s.Dispatch(context.Background(), []string{"nope"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "nope"`) {
		t.Errorf("unknown command: exit %d, %q", code, errb.String())
	}
}

func TestParseInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	chart := fs.String("chart", "", "")
	q := fs.Bool("q", false, "")
	pos, err := ParseInterspersed(fs, []string{"a", "--chart", "c.svg", "b", "-q", "--", "-notaflag"})
	if err != nil || *chart != "c.svg" || !*q || strings.Join(pos, " ") != "a b -notaflag" {
		t.Errorf("positional %q, chart %q, q %v, err %v", pos, *chart, *q, err)
	}
	if _, err := ParseInterspersed(fs, []string{"a", "--bogus"}); err == nil {
		t.Error("an unknown flag after a positional argument must be an error")
	}
}
