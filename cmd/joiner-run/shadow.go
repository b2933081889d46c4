package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/shadow"
)

func init() {
	register(cli.Command{Name: "shadow", Summary: cli.RunSummary("shadow"), Run: runShadow})
}

const shadowUsage = `usage: joiner shadow report --snapshots FILE --decisions FILE [--catalog FILE] [--match-window D]
Compares what the cluster's autoscaler did (the snapshots joiner record --snapshot-every wrote)
with what Joiner decided over the same time in shadow mode (-c mode=shadow): nodes launched and
removed, nodes and $/hour over time, total cost and pod wait side by side, then every launch and
removal that differs. --decisions reads the functions' logs as JSON lines: Lambda's JSON log
records, a CloudWatch Logs export ({"message": ...} lines), or joiner invoke's summaries. Both
sides are priced by one table (--catalog, default the embedded catalog's prices).`

func runShadow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	args, code, ok := subcommand(args, "report", shadowUsage, stderr)
	if !ok {
		return code
	}
	fs := flag.NewFlagSet("shadow report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	snapshots := fs.String("snapshots", "", "snapshots.jsonl written by joiner record --snapshot-every")
	decisions := fs.String("decisions", "", "the functions' shadow decisions (JSON lines: log records, a CloudWatch Logs export, summaries)")
	catPath := fs.String("catalog", "", "price both sides with this catalog (joiner catalog's JSON; default the embedded one)")
	window := fs.Duration("match-window", 10*time.Minute, "how far apart a Karpenter launch and a Joiner launch of one NodePool may be and still be matched")
	fs.Usage = func() {
		fmt.Fprintln(stderr, shadowUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "joiner shadow report: unexpected arguments %v\n", fs.Args())
		return 2
	case *snapshots == "" || *decisions == "":
		fmt.Fprintln(stderr, "joiner shadow report: --snapshots FILE and --decisions FILE are required")
		fs.Usage()
		return 2
	case *window <= 0:
		fmt.Fprintln(stderr, "joiner shadow report: --match-window must be positive")
		return 2
	}
	rep, err := shadowReport(*snapshots, *decisions, *catPath, *window)
	if err != nil {
		fmt.Fprintf(stderr, "joiner shadow report: %v\n", err)
		return 1
	}
	shadow.Write(stdout, rep)
	return 0
}

// shadowReport reads both files and compares them.
func shadowReport(snapshotsPath, decisionsPath, catalogPath string, window time.Duration) (*shadow.Report, error) {
	var snaps []shadow.Snapshot
	var decs *shadow.Decisions
	err := readWith(snapshotsPath, func(r io.Reader) (err error) { snaps, err = shadow.ReadSnapshots(r, snapshotsPath); return })
	if err == nil {
		err = readWith(decisionsPath, func(r io.Reader) (err error) { decs, err = shadow.ReadDecisions(r, decisionsPath); return })
	}
	if err != nil {
		return nil, err
	}
	cat, err := catalog.LoadOrEmbedded(catalogPath)
	if err != nil {
		return nil, fmt.Errorf("--catalog %s: %w", catalogPath, err)
	}
	return shadow.Compare(snaps, decs, shadow.Options{MatchWindow: window, Price: cat.Price}), nil
}

func readWith(path string, read func(io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return read(f)
}
