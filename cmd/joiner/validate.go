package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
)

func init() {
	register(cli.Command{Name: "validate", Summary: "check NodePool, EC2NodeClass and workload manifests (files or folders)", Run: runValidate})
}

// runValidate reads every -f path and prints one line per problem
// ("file:doc: field.path: message", warnings prefixed "warning: "). It exits 0 when
// nothing is an error (then also printing one summary line per file), 1 when
// something is, and 2 on usage errors and unreadable paths.
func runValidate(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var paths cli.PathList
	fs.Var(&paths, "f", "a manifest file, or a folder of *.yaml/*.yml/*.json files (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: joiner validate -f PATH [-f PATH]...")
		fmt.Fprintln(stderr, "\nChecks Karpenter v1 NodePools/EC2NodeClasses/NodeClaims and the Nodes, Pods, DaemonSets,")
		fmt.Fprintln(stderr, "PodDisruptionBudgets and workloads Joiner plans for. Exit 0: valid; 1: problems; 2: usage.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "joiner validate: unexpected argument %q (name each path with -f)\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "joiner validate: -f PATH is required")
		fs.Usage()
		return 2
	}
	b, err := manifest.Load(paths...)
	if err != nil {
		fmt.Fprintf(stderr, "joiner validate: %v\n", err)
		return 2
	}
	for _, p := range b.Problems {
		fmt.Fprintln(stdout, p.String())
	}
	if b.HasErrors() {
		return 1
	}
	for _, f := range b.Files {
		fmt.Fprintln(stdout, summaryLine(f, b.Skipped))
	}
	return 0
}

// summaryLine says what a valid file held: "file: ok: 2 documents: 1 NodePool, 1
// EC2NodeClass, 1 Deployment (5 pods), 1 skipped", with the reason for skipped
// documents that have one.
func summaryLine(f manifest.FileSummary, skipped []manifest.Skipped) string {
	var parts []string
	for _, k := range f.Kinds {
		kind := k.Kind
		if k.Count != 1 {
			kind = plural(kind)
		}
		s := fmt.Sprintf("%d %s", k.Count, kind)
		if k.Pods > 0 || k.Kind == "Deployment" || k.Kind == "ReplicaSet" || k.Kind == "StatefulSet" || k.Kind == "Job" {
			s += fmt.Sprintf(" (%d pods)", k.Pods)
		}
		parts = append(parts, s)
	}
	if f.Skipped > 0 {
		s := fmt.Sprintf("%d skipped", f.Skipped)
		for _, sk := range skipped {
			if sk.File == f.File && sk.Note != "" {
				s += fmt.Sprintf(" (document %d, %s %s: %s)", sk.Doc, sk.Kind, sk.Name, sk.Note)
			}
		}
		parts = append(parts, s)
	}
	docs := "documents"
	if f.Documents == 1 {
		docs = "document"
	}
	line := fmt.Sprintf("%s: ok: %d %s", f.File, f.Documents, docs)
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	if f.Warnings > 0 {
		line += fmt.Sprintf(" (%d warnings)", f.Warnings)
	}
	return line
}

func plural(kind string) string {
	if strings.HasSuffix(kind, "s") {
		return kind + "es"
	}
	return kind + "s"
}
