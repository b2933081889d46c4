package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
	"github.com/joiner-autoscaler/joiner/shared/kube/access"
	"github.com/joiner-autoscaler/joiner/shared/replay"
)

func init() {
	register(cli.Command{Name: "replay", Summary: cli.RunSummary("replay"), Run: runReplay})
}

// replayRun is one scenario's result, with the what-if run when asked for.
type replayRun struct {
	Result *replay.Result `json:"result"`
	WhatIf *replay.Result `json:"whatIf,omitempty"`
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "testdata/scenarios", "folder holding the scenario folders")
	output := fs.String("o", "table", "output format: table (steps as they happen, then a summary per scenario) or json")
	chart := fs.String("chart", "", "write an SVG chart of node count and $/hour over time to this file")
	nodePools := fs.String("nodepools", "", "what-if: replay again with the NodePools and EC2NodeClasses of this folder and compare costs")
	logFile := fs.String("log", "", "write the functions' JSON logs to this file")
	quiet := fs.Bool("q", false, "no step lines, only the summaries")
	kubeconfig := fs.String("kubeconfig", "", "replay against the API server of this kubeconfig instead of the in-memory cluster: an EMPTY SCRATCH cluster only (kind, envtest), never production")
	kubeContext := fs.String("context", "", "with --kubeconfig: the context to use (default: its current-context)")
	force := fs.Bool("force", false, "with --kubeconfig: run even though the cluster has Nodes, NodeClaims or NodePools")
	scheduler := fs.String("scheduler", "joiner", "with --kubeconfig: who binds pods: joiner (the simulation, with Joiner's engine) or real (the cluster's kube-scheduler; the simulation only registers Nodes as kubelets would and starts the pods bound)")
	kwok := fs.Bool("kwok", false, "with --scheduler real: annotate registered Nodes kwok.x-k8s.io/node=fake, for a KWOK controller (--manage-nodes-with-annotation-selector) to keep their heartbeats")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: joiner replay [SCENARIO...] [--dir DIR] [-o table|json] [--chart FILE.svg] [--nodepools DIR] [--log FILE] [-q]")
		fmt.Fprintln(stderr, "                     [--kubeconfig FILE [--context NAME] [--force] [--scheduler joiner|real [--kwok]]]")
		fmt.Fprintln(stderr, "Replays every scenario of --dir by default; exits 1 when an expectation is not met.")
		fmt.Fprintln(stderr, "")
		fmt.Fprintln(stderr, "--kubeconfig uses a real API server instead of the in-memory cluster (AWS stays simulated):")
		fmt.Fprintln(stderr, "the replay REGISTERS AND DELETES NODES, creates, binds and deletes pods, and writes NodePools,")
		fmt.Fprintln(stderr, "EC2NodeClasses and NodeClaims there. NEVER POINT IT AT A PRODUCTION CLUSTER. It refuses a cluster")
		fmt.Fprintln(stderr, "that has any Node, NodeClaim or NodePool unless --force, needs Karpenter's CRDs installed")
		fmt.Fprintln(stderr, "(kubectl apply --server-side --field-manager=joiner -k deploy/), and deletes what it created when each scenario ends.")
		fmt.Fprintln(stderr, "--scheduler real leaves binding to the cluster's own kube-scheduler: Nodes register NotReady with")
		fmt.Fprintln(stderr, "karpenter.sh/unregistered and their startup taints, turn Ready after settings.readyAfter (default 5s) and")
		fmt.Fprintln(stderr, "advertise GPUs settings.devicePluginAfter later (default 20s); each step waits until the pods stop changing.")
		fs.PrintDefaults()
	}
	names, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "joiner replay: unknown output format %q (want table or json)\n", *output)
		return 2
	}
	scenarios, err := replay.LoadAll(*dir, names...)
	if err != nil {
		fmt.Fprintf(stderr, "joiner replay: %v\n", err)
		return 2
	}
	// Flags are checked before replayOptions creates the --log file, so a usage
	// error leaves no empty file behind.
	if *kubeconfig == "" && (*kubeContext != "" || *force || *scheduler != "joiner") {
		fmt.Fprintln(stderr, "joiner replay: --context, --force and --scheduler need --kubeconfig")
		return 2
	}
	if *scheduler != "joiner" && *scheduler != "real" {
		fmt.Fprintf(stderr, "joiner replay: unknown --scheduler %q (want joiner or real)\n", *scheduler)
		return 2
	}
	if *kwok && *scheduler != "real" {
		fmt.Fprintln(stderr, "joiner replay: --kwok needs --scheduler real")
		return 2
	}
	opts, closeLog, err := replayOptions(*logFile, *nodePools)
	if err != nil {
		fmt.Fprintf(stderr, "joiner replay: %v\n", err)
		return 2
	}
	if *kubeconfig != "" {
		if opts.Server, err = replayServer(ctx, *kubeconfig, *kubeContext); err != nil {
			closeLog()
			fmt.Fprintf(stderr, "joiner replay: %v\n", err)
			return 2
		}
		opts.Force = *force
		opts.RealScheduler = *scheduler == "real"
		if *kwok {
			opts.NodeAnnotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
		}
		fmt.Fprintf(stderr, "joiner replay: replaying against the API server %s (Nodes and pods are created and deleted there)\n", opts.Server.Host)
	}
	defer closeLog()
	table := *output == "table"
	if table && !*quiet {
		opts.Steps, opts.Progress = stdout, stdout
	}
	var runs []replayRun
	failed := false
	for _, sc := range scenarios {
		run, err := replayOne(ctx, sc, opts, *nodePools, table, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "joiner replay: %v\n", err)
			return 1
		}
		failed = failed || !run.Result.OK()
		runs = append(runs, run)
	}
	if *chart != "" {
		if err := writeChart(*chart, runs); err != nil {
			fmt.Fprintf(stderr, "joiner replay: %v\n", err)
			return 1
		}
	}
	if !table {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(runs); err != nil {
			fmt.Fprintf(stderr, "joiner replay: %v\n", err)
			return 1
		}
	}
	if failed {
		return 1
	}
	return 0
}

func replayOne(ctx context.Context, sc *replay.Scenario, opts replay.Options, nodePools string, table bool, stdout io.Writer) (replayRun, error) {
	if table {
		fmt.Fprintf(stdout, "== %s: %s\n", sc.Name, sc.Description)
	}
	base := opts
	base.NodePools = nil
	res, err := replay.Run(ctx, sc, base)
	if err != nil {
		return replayRun{}, err
	}
	run := replayRun{Result: res}
	if table {
		fmt.Fprintf(stdout, "-- %s: %s simulated in %s\n", sc.Name, res.Simulated, res.Wall.Round(time.Millisecond))
		replay.WriteSummary(stdout, res)
	}
	if opts.NodePools != nil {
		alt := opts
		alt.Steps, alt.Progress = nil, nil
		if run.WhatIf, err = replay.Run(ctx, sc, alt); err != nil {
			return run, fmt.Errorf("what-if with %s: %w", nodePools, err)
		}
		if table {
			replay.WriteComparison(stdout, res, run.WhatIf)
		}
	}
	if table {
		fmt.Fprintln(stdout)
	}
	return run, nil
}

func replayOptions(logFile, nodePools string) (replay.Options, func(), error) {
	opts := replay.Options{}
	closeLog := func() {}
	if nodePools != "" {
		b, err := replay.LoadManifests(nodePools)
		if err != nil {
			return opts, closeLog, fmt.Errorf("--nodepools %s: %w", nodePools, err)
		}
		if len(b.NodePools) == 0 {
			return opts, closeLog, fmt.Errorf("--nodepools %s: no NodePool in it", nodePools)
		}
		opts.NodePools, opts.NodePoolsName = b, filepath.Base(filepath.Clean(nodePools))
	}
	if logFile != "" {
		f, err := os.Create(logFile)
		if err != nil {
			return opts, closeLog, err
		}
		opts.Log, closeLog = f, func() { f.Close() }
	}
	return opts, closeLog, nil
}

// replayServer loads the kubeconfig named on the command line (with the limits
// and TLS checks the functions use); replay never falls back to $KUBECONFIG or
// ~/.kube/config, so no cluster is used without being named.
func replayServer(ctx context.Context, path, kubeContext string) (*rest.Config, error) {
	cfg, err := access.RESTConfig(ctx, access.Config{Mode: access.ModeKubeconfig, Kubeconfig: path, Context: kubeContext}, access.Deps{})
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

func writeChart(path string, runs []replayRun) error {
	var results []*replay.Result
	for _, r := range runs {
		results = append(results, r.Result)
		if r.WhatIf != nil {
			results = append(results, r.WhatIf)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := replay.WriteSVG(f, results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
