package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
)

// joiner forwards exactly cli.RunCommands here: each must exist.
func TestHoldsEveryForwardedCommand(t *testing.T) {
	for _, c := range cli.RunCommands {
		if got, ok := commands.Lookup(c.Name); !ok || got.Run == nil {
			t.Errorf("joiner forwards %s, but joiner-run has no such command", c.Name)
		}
	}
}

// Flags may follow positional arguments, and are checked there too.
func TestFlagsAfterArgumentsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{"invoke", "provisioner", "-e", "../../events/pending-pods.json", "--bogus"},
		{"replay", "001-heavy-app", "--bogus"},
	} {
		var out, errb bytes.Buffer
		if code := dispatch(context.Background(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "bogus") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming the flag", args, code, errb.String())
		}
	}
}

// TestReplaySchedulerFlags: --scheduler needs --kubeconfig (kube-scheduler runs
// against a real API server), takes joiner or real, and --kwok needs real.
func TestReplaySchedulerFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "001-heavy-app", "--dir", "../../testdata/scenarios", "--scheduler", "real"}, "--scheduler need --kubeconfig"},
		{[]string{"replay", "001-heavy-app", "--dir", "../../testdata/scenarios", "--kubeconfig", "x", "--scheduler", "kube"}, `unknown --scheduler "kube"`},
		{[]string{"replay", "001-heavy-app", "--dir", "../../testdata/scenarios", "--kubeconfig", "x", "--kwok"}, "--kwok needs --scheduler real"},
	} {
		var out, errb bytes.Buffer
		if code := dispatch(context.Background(), tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
