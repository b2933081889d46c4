// Package cli is the subcommand plumbing the joiner programs share.
//
// Joiner's command line is two programs so that the engine's commands start
// fast: `joiner` holds plan, validate and catalog (the packing engine, manifests
// and catalog: about 15 MB, ready in a few milliseconds), and `joiner-run` holds
// replay, invoke, record and sim, which link the Lambda handlers, the AWS SDK
// clients and client-go (whose package initialisers alone took 25–30 ms of every
// `joiner plan` when they shared a binary). Users only type `joiner`: it runs
// `joiner-run` for the commands it does not hold itself.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string
	// Run returns the process exit code: 0 success, 1 failure, 2 usage error.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// Set is a program's subcommands.
type Set struct {
	prog string
	cmds map[string]Command

	mu    sync.Mutex
	child *os.Process // the RunProgram running, for signals after the first
}

// NewSet returns an empty set for the program named prog in messages.
func NewSet(prog string) *Set { return &Set{prog: prog, cmds: map[string]Command{}} }

// Register adds c, replacing a command of the same name.
func (s *Set) Register(c Command) { s.cmds[c.Name] = c }

// Lookup returns the command called name.
func (s *Set) Lookup(name string) (Command, bool) {
	c, ok := s.cmds[name]
	return c, ok
}

// Dispatch runs the command args[0] names with the remaining arguments.
func (s *Set) Dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		s.Usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := s.cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", s.prog, args[0])
		s.Usage(stderr)
		return 2
	}
	return c.Run(ctx, args[1:], stdout, stderr)
}

// Usage lists the commands.
func (s *Set) Usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", s.prog)
	names := make([]string, 0, len(s.cmds))
	for n := range s.cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, s.cmds[n].Summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags.\n", s.prog)
}

// Main dispatches os.Args and exits. SIGINT, SIGTERM and SIGHUP cancel the
// command's context (a service manager, timeout(1) and a closed terminal all
// stop a command this way, not only Ctrl-C), so it cleans up before it exits;
// a forwarded command's RunProgram receives every such signal (see Forward).
func (s *Set) Main() {
	ctx, stop := s.notify(context.Background())
	code := s.Dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// RunProgram is the program that holds the RunCommands.
const RunProgram = "joiner-run"

// RunCommands are the commands `joiner` hands to RunProgram, with their summaries.
var RunCommands = []Command{
	{Name: "replay", Summary: "replay scenarios on simulated AWS and an in-memory (or scratch) cluster, with costs"},
	{Name: "invoke", Summary: "run one function's Lambda handler on an event, locally (simulated AWS and cluster, or --live)"},
	{Name: "record", Summary: "record real events (an SQS queue or a JSON-lines file) as a replayable scenario"},
	{Name: "shadow", Summary: "compare Joiner's shadow decisions with what Karpenter did (joiner shadow report)"},
	{Name: "sim", Summary: "serve the wire-level AWS simulator (EC2, SSM, EKS, Secrets Manager) on loopback"},
	{Name: "cleanup", Summary: "after cdk destroy: terminate the instances and delete the launch templates Joiner launched for a cluster"},
}

// RunSummary is the summary of the RunCommands entry called name.
func RunSummary(name string) string {
	for _, c := range RunCommands {
		if c.Name == name {
			return c.Summary
		}
	}
	panic("cli: no run command " + name)
}

// EnvRunProgram names an explicit path to RunProgram.
const EnvRunProgram = "JOINER_RUN"

// Forward registers the RunCommands on s, each running RunProgram with the
// same arguments.
func (s *Set) Forward() {
	for _, c := range RunCommands {
		name := c.Name
		s.Register(Command{Name: name, Summary: c.Summary, Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			return s.forward(ctx, name, args, stdout, stderr)
		}})
	}
}

func (s *Set) forward(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	path, err := findRunProgram()
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v, or run it directly: go run ./cmd/%s %s ...\n", s.prog, name, err, RunProgram, name)
		return 1
	}
	cmd := exec.Command(path, append([]string{name}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", s.prog, name, err)
		return 1
	}
	stopForwarding := s.forwardSignals(ctx, cmd.Process)
	err = cmd.Wait()
	stopForwarding()
	return exitCode(err, func(err error) {
		fmt.Fprintf(stderr, "%s %s: %s: %v\n", s.prog, name, path, err)
	})
}

// findRunProgram looks for RunProgram at $JOINER_RUN, then beside this
// program, then on PATH.
func findRunProgram() (string, error) {
	if p := os.Getenv(EnvRunProgram); p != "" {
		if st, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s: %w", EnvRunProgram, err)
		} else if st.IsDir() {
			return "", fmt.Errorf("$%s: %s is a folder, not the %s program", EnvRunProgram, p, RunProgram)
		}
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), RunProgram)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(RunProgram); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("this command lives in %s (with the functions, the AWS SDK and the Kubernetes clients, which "+
		"would slow every `joiner plan` down), and no %s was found beside joiner, on PATH or at $%s; "+
		"`make joiner` builds both into bin/, `go install ./cmd/joiner ./cmd/joiner-run` installs both",
		RunProgram, RunProgram, EnvRunProgram)
}

// ParseInterspersed parses args with fs, letting flags follow positional
// arguments (`joiner replay 001-heavy-app --chart x.svg`, `joiner invoke
// provisioner -e event.json`), and returns the positional arguments in order.
// Everything after "--" is positional.
func ParseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// PathList is a repeatable flag of paths (-f).
type PathList []string

// String joins the paths with commas (flag.Value).
func (p *PathList) String() string { return strings.Join(*p, ",") }

// Set appends v (flag.Value).
func (p *PathList) Set(v string) error { *p = append(*p, v); return nil }
