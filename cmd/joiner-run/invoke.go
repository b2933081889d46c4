package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
	"k8s.io/client-go/rest"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/kube/access"
)

func init() {
	register(cli.Command{Name: "invoke", Summary: cli.RunSummary("invoke"), Run: runInvoke})
}

const invokeUsage = `usage: joiner invoke FUNCTION -e EVENT.json [-f PATH]... [--scenario NAME|DIR] [--cluster NAME] [-o table|json] [--dry-run]
       joiner invoke FUNCTION -e EVENT.json --live [--kubeconfig FILE] [--context NAME] [--cluster NAME] [--region R] [--dry-run]
FUNCTION is provisioner, interruption or consolidator. Without --live the handler runs on the
embedded AWS simulator and an in-memory cluster loaded from -f manifests, a scenario's initial
state, or (with neither) seed 001. With --live it uses your AWS credentials (SDK default chain)
and kubeconfig; DRY_RUN=1 or --dry-run mutates nothing and reports whether EC2 would allow it.
Logs go to stderr; the decision summary to stdout. Exit 1 when the handler returned an error.`

// defaultInvokeSeed is what `joiner invoke` runs on when given no manifests: seed
// 001's pending heavy-app pods make the provisioner's decision visible.
const defaultInvokeSeed = "testdata/seeds/001-heavy-app-fixed"

// invokeOutput is `joiner invoke -o json`.
type invokeOutput struct {
	Summary *handlers.Summary `json:"summary"`
	Error   string            `json:"error,omitempty"`
	// Changes is what the invocation changed in the simulated world (absent with --live).
	Changes []change `json:"changes,omitempty"`
}

type invokeFlags struct {
	event, scenario, scenarioDir, cluster, output string
	paths                                         cli.PathList
	live, dryRun                                  bool
	kubeconfig, kubeContext, region               string
	// server, in tests, puts the simulated cluster on a real (scratch) API server.
	server *rest.Config
}

func runInvoke(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f invokeFlags
	fs.StringVar(&f.event, "e", "", "the event: an EventBridge JSON file (events/*.json), or - for stdin")
	fs.Var(&f.paths, "f", "simulated cluster: a manifest file or folder (repeatable)")
	fs.StringVar(&f.scenario, "scenario", "", "simulated cluster: a scenario's initial state (name under --dir, or its folder)")
	fs.StringVar(&f.scenarioDir, "dir", "testdata/scenarios", "folder holding the scenario folders")
	fs.StringVar(&f.cluster, "cluster", "", "cluster name (default: the scenario's, the manifests' discovery tags; with --live $"+handlers.EnvClusterName+")")
	fs.StringVar(&f.output, "o", "table", "output: table (summary JSON, then what changed) or json")
	fs.BoolVar(&f.live, "live", false, "use your AWS credentials and kubeconfig instead of the simulator")
	fs.BoolVar(&f.dryRun, "dry-run", false, "mutate nothing: EC2 calls go out with DryRun=true, nothing is written to Kubernetes (also DRY_RUN=1)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "with --live: kubeconfig file (default $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&f.kubeContext, "context", "", "with --live: kubeconfig context (default: its current-context)")
	fs.StringVar(&f.region, "region", "", "with --live: AWS region (default $AWS_REGION)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, invokeUsage)
		fs.PrintDefaults()
	}
	// The function name may come first (as typed) or after the flags.
	pos, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var name string
	if len(pos) > 0 {
		name, pos = pos[0], pos[1:]
	}
	if err := f.check(name, len(pos)); err != nil {
		fmt.Fprintf(stderr, "joiner invoke: %v\n", err)
		fs.Usage()
		return 2
	}
	raw, err := readEvent(f.event)
	if err != nil {
		fmt.Fprintf(stderr, "joiner invoke: %v\n", err)
		return 2
	}
	if f.live {
		return invokeLive(ctx, name, raw, f, stdout, stderr)
	}
	return invokeSimulated(ctx, name, raw, f, stdout, stderr)
}

func (f *invokeFlags) check(name string, extra int) error {
	switch {
	case name == "":
		return errors.New("name the function: provisioner, interruption or consolidator")
	case name != handlers.Provisioner && name != handlers.Interruption && name != handlers.Consolidator:
		return fmt.Errorf("unknown function %q (want provisioner, interruption or consolidator)", name)
	case extra > 0:
		return errors.New("one function at a time")
	case f.event == "":
		return errors.New("-e EVENT.json is required (samples: events/*.json)")
	case f.output != "table" && f.output != "json":
		return fmt.Errorf("unknown output format %q (want table or json)", f.output)
	case f.live && (len(f.paths) > 0 || f.scenario != ""):
		return errors.New("--live reads your cluster: -f and --scenario are for the simulated one")
	case !f.live && (f.kubeconfig != "" || f.kubeContext != ""):
		return errors.New("--kubeconfig and --context need --live")
	case len(f.paths) > 0 && f.scenario != "":
		return errors.New("use -f or --scenario, not both")
	}
	return nil
}

func readEvent(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-e: %w", err)
	}
	return raw, nil
}

// invokeLive builds the function exactly as the Lambda runtime does (handlers.FromEnvWith),
// over the environment with the flags laid on top: kubeconfig access to the caller's
// cluster, the SDK's default credential chain for AWS.
func invokeLive(ctx context.Context, name string, raw []byte, f invokeFlags, stdout, stderr io.Writer) int {
	kubeconfig, err := liveKubeconfig(f.kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "joiner invoke: %v\n", err)
		return 2
	}
	over := map[string]string{access.EnvMode: string(access.ModeKubeconfig), access.EnvKubeconfig: kubeconfig}
	set := func(key, v string) {
		if v != "" {
			over[key] = v
		}
	}
	set(handlers.EnvClusterName, f.cluster)
	set(handlers.EnvRegion, f.region)
	set(access.EnvContext, f.kubeContext)
	if f.dryRun {
		over[handlers.EnvDryRun] = "true"
	}
	getenv := func(k string) string {
		if v, ok := over[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	fn, err := handlers.FromEnvWith(ctx, name, handlers.Env{Getenv: getenv, Log: stderr,
		// A person's shell has profiles and SSO, which the Lambda runtime never has.
		AWSConfig: func(ctx context.Context, region string, l logging.Logger) (aws.Config, error) {
			return awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region), awsconfig.WithLogger(l))
		}})
	if err != nil {
		fmt.Fprintf(stderr, "joiner invoke: %v\n", err)
		return 1
	}
	out, ierr := fn.Invoke(ctx, raw)
	return report(out, ierr, nil, false, f.output, stdout, stderr)
}

// liveKubeconfig is --kubeconfig, else the first of $KUBECONFIG, else ~/.kube/config.
func liveKubeconfig(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		return strings.Split(kc, string(os.PathListSeparator))[0], nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no --kubeconfig, no $KUBECONFIG and no home directory: %w", err)
	}
	return filepath.Join(home, ".kube", "config"), nil
}

// report prints the summary (stdout) and, for the simulated world (sim), what changed;
// the exit code is 1 when the handler returned an error.
func report(out []byte, ierr error, changes []change, sim bool, output string, stdout, stderr io.Writer) int {
	var sum *handlers.Summary
	if len(out) > 0 {
		sum = &handlers.Summary{}
		if err := json.Unmarshal(out, sum); err != nil {
			fmt.Fprintf(stderr, "joiner invoke: the handler's response is not a summary: %v\n", err)
			return 1
		}
	}
	code := 0
	if ierr != nil {
		code = 1
	}
	if output == "json" {
		o := invokeOutput{Summary: sum, Changes: changes}
		if ierr != nil {
			o.Error = ierr.Error()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(o); err != nil {
			return 1
		}
		return code
	}
	if sum != nil {
		b, _ := json.MarshalIndent(sum, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	}
	if ierr != nil {
		fmt.Fprintf(stderr, "joiner invoke: %v\n", ierr)
	}
	if sim {
		writeChanges(stdout, changes)
	}
	return code
}

func writeChanges(w io.Writer, changes []change) {
	fmt.Fprintln(w)
	if len(changes) == 0 {
		fmt.Fprintln(w, "nothing changed in the simulated cluster or AWS account")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANGE\tOBJECT\tDETAIL")
	for _, c := range changes {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.What, c.Object, c.Detail)
	}
	tw.Flush()
}
