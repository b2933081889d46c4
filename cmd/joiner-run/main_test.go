package main

import (
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
