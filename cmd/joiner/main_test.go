package main

import (
	"os/exec"
	"strings"
	"testing"
)

// joiner plan's throughput target counts process start-up, and the package
// initialisers of the AWS SDK and client-go cost 25–30 ms of it: those belong in
// joiner-run (see cmd/internal/cli).
func TestJoinerLinksNoClients(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, heavy := range []string{"github.com/aws/", "k8s.io/client-go/", "github.com/joiner-autoscaler/joiner/shared/handlers"} {
			if strings.HasPrefix(dep, heavy) {
				t.Errorf("joiner links %s: move the command that needs it to joiner-run", dep)
			}
		}
	}
}

func TestRunCommandsAreForwarded(t *testing.T) {
	commands.Forward()
	for _, name := range []string{"replay", "invoke", "record", "sim", "plan", "validate", "catalog"} {
		if _, ok := commands.Lookup(name); !ok {
			t.Errorf("joiner has no %s command", name)
		}
	}
}
