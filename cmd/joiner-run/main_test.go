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
