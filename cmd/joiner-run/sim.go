package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

func init() {
	register(cli.Command{Name: "sim", Summary: cli.RunSummary("sim"), Run: runSim})
}

const simUsage = `usage: joiner sim serve [--addr 127.0.0.1:PORT] [--state FILE] [--catalog FILE]
                        [--cluster NAME] [--fake-clock RFC3339] [-v]`

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	args, code, ok := subcommand(args, "serve", simUsage, stderr)
	if !ok {
		return code
	}
	fs := flag.NewFlagSet("joiner sim serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to listen on (port 0 picks a free one)")
	state := fs.String("state", "", "seed the simulator from this JSON state file (format: shared/awssim/README.md)")
	catFile := fs.String("catalog", "", "instance catalog file instead of the embedded one")
	cluster := fs.String("cluster", awssim.DefaultClusterName, "cluster name of the default state (ignored with --state)")
	fake := fs.String("fake-clock", "", "run on simulated time starting at this RFC 3339 instant; move it with POST /_sim/clock")
	verbose := fs.Bool("v", false, "log every call (JSON, to stderr)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, simUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "joiner sim serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := awssim.CheckLoopback(*addr); err != nil {
		fmt.Fprintf(stderr, "joiner sim serve: --addr: %v\n", err)
		return 2
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := awssim.Config{Addr: *addr, Logger: logger}
	cat, err := catalog.LoadOrEmbedded(*catFile)
	if err != nil {
		fmt.Fprintf(stderr, "joiner sim serve: --catalog: %v\n", err)
		return 1
	}
	cfg.Catalog = cat
	if *state != "" {
		seed, err := awssim.LoadSeed(*state)
		if err != nil {
			fmt.Fprintf(stderr, "joiner sim serve: --state: %v\n", err)
			return 1
		}
		cfg.Seed = seed
	} else {
		seed := awssim.DefaultSeed(*cluster)
		cfg.Seed = &seed
	}
	if *fake != "" {
		start, err := time.Parse(time.RFC3339, *fake)
		if err != nil {
			fmt.Fprintf(stderr, "joiner sim serve: --fake-clock: %v\n", err)
			return 2
		}
		cfg.Clock = awssim.NewFakeClock(start)
	}

	s, err := awssim.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "joiner sim serve: %v\n", err)
		return 1
	}
	defer s.Close()
	ep := s.Endpoint()
	fmt.Fprintf(stdout, "awssim serving EC2, SSM, EKS and Secrets Manager (%s) on %s\n", s.Region(), ep)
	fmt.Fprintf(stdout, "  export AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x AWS_DEFAULT_REGION=%s\n", s.Region())
	fmt.Fprintf(stdout, "  aws --endpoint-url %s ec2 describe-instance-types --instance-types g6.xlarge\n", ep)
	fmt.Fprintf(stdout, "  curl %s/_sim/state\n", ep)
	logger.Info("awssim started", "endpoint", ep, "region", s.Region(), "types", len(cat.InstanceTypes))
	<-ctx.Done()
	logger.Info("awssim stopping", "calls", len(s.Calls()))
	return 0
}
