package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

func init() {
	register(cli.Command{Name: "plan", Summary: "plan node launches for the pending pods in manifests (offline)", Run: runPlan})
}

func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var paths cli.PathList
	fs.Var(&paths, "f", "a manifest file or folder (repeatable): NodePools, EC2NodeClasses, NodeClaims, Nodes, Pods, DaemonSets, workloads, PersistentVolumeClaims, PersistentVolumes, StorageClasses")
	catalogPath := fs.String("catalog", "", "instance catalog JSON (default: the embedded us-east-1 catalog)")
	region := fs.String("region", "", "region the plan is for (must match the catalog's)")
	output := fs.String("o", "table", "output format: table or json")
	explain := fs.Bool("explain", false, "say why each type was chosen and why each unschedulable pod is")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	timing := fs.Bool("timing", false, "print how long reading, planning and writing took (stderr)")
	counts := reservationCounts{}
	fs.Var(counts, "reservation", "cr-ID=N (repeatable): a capacity reservation an EC2NodeClass's status lists takes N more instances")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: joiner plan -f PATH [-f PATH]... [--catalog FILE] [--region R] [--reservation cr-ID=N]... [-o table|json] [--explain]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if len(paths) == 0 || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "joiner plan: unknown output format %q (want table or json)\n", *output)
		return 2
	}
	// A plan is one short batch that keeps most of what it allocates until it
	// ends: collecting rarely makes it faster (2,000 pods: about 15% against
	// GOGC=400, with the same 117 MiB peak RSS at 20,000 pods), and the soft limit
	// still collects before a very large input grows the heap past 768 MiB,
	// within the 1 GB a plan of 100,000 pods may take. At 256 MiB the heap
	// of 100,000 pods (some 270 MiB live) stayed at the limit and the collector
	// ran all the time: 2.1 s of CPU against 1.2 s at 768 MiB (373 MiB RSS).
	debug.SetGCPercent(1600)
	debug.SetMemoryLimit(768 << 20)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "joiner plan: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "joiner plan: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()

	snap, prep, region2, err := loadSnapshot(paths, *catalogPath, *region, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "joiner plan: %v\n", err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	if snap.Reservations, err = offlineReservations(snap.NodeClasses, counts, stderr); err != nil {
		fmt.Fprintf(stderr, "joiner plan: %v\n", err)
		return 2
	}
	t1 := time.Now()
	plan := packer.Solve(snap, packer.Options{Explain: *explain, Prepared: prep})
	plan.Region = region2
	t2 := time.Now()
	if *output == "json" {
		// Compact (indenting costs more than planning on large plans; pipe through jq
		// for reading), and streamed by the plan's own writer.
		if err := plan.WriteJSON(bufio.NewWriterSize(stdout, 1<<20)); err != nil {
			fmt.Fprintf(stderr, "joiner plan: %v\n", err)
			return 1
		}
	} else {
		writePlanTable(stdout, plan, *explain)
	}
	if *timing {
		t3 := time.Now()
		fmt.Fprintf(stderr, "joiner plan: %d pods: read %v, plan %v, write %v, total %v (%.0f pods/s)\n", len(snap.Pods),
			t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), t3.Sub(t2).Round(time.Millisecond),
			t3.Sub(t0).Round(time.Millisecond), float64(len(snap.Pods))/t3.Sub(t0).Seconds())
	}
	return 0
}

var errUsage = errors.New("usage")

// loadSnapshot reads manifests and the catalog into the engine's snapshot. Problems
// in the manifests are reported on stderr and the objects they concern left out:
// one bad document does not stop the plan. The catalog comes prepared for Solve.
func loadSnapshot(paths []string, catalogPath, region string, stderr io.Writer) (*packer.Snapshot, *packer.Prepared, string, error) {
	// The catalog is read and prepared while the manifests are read: that keeps
	// a core busy only part of the time.
	type loaded struct {
		cat  *catalog.Catalog
		prep *packer.Prepared
		err  error
	}
	catc := make(chan loaded, 1)
	go func() {
		c, err := catalog.LoadOrEmbedded(catalogPath)
		if err != nil {
			catc <- loaded{err: err}
			return
		}
		catc <- loaded{c, packer.Prepare(c), nil}
	}()
	b, err := manifest.Load(paths...)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: %v", errUsage, err)
	}
	for _, p := range b.Problems {
		fmt.Fprintln(stderr, p.String())
	}
	lc := <-catc
	if lc.err != nil {
		return nil, nil, "", lc.err
	}
	cat := lc.cat
	if region == "" {
		region = cat.Region
	} else if region != cat.Region {
		return nil, nil, "", fmt.Errorf("the catalog covers %s, not %s: pass --catalog with a %s catalog", cat.Region, region, region)
	}
	// One rule with the functions (packer.Assemble): a NodeClaim being deleted is no
	// capacity, and a registered Node whose NodeClaim is not initialized is that
	// claim in flight, not a node whose startup and not-ready taints are permanent.
	// A manifest has no status, so every unbound pod needs a node.
	unbound := func(p *corev1.Pod) bool { return p.Spec.NodeName == "" && !facts.IsTerminal(p) }
	assembled, _, _ := packer.Assemble(b.Nodes, b.Pods, b.NodeClaims, unbound)
	// As the provisioner: the pods of nodes being deleted are planned too.
	assembled, _ = packer.ReplanDeleting(assembled, b.NodeClaims)
	snap := &packer.Snapshot{Pods: assembled.Pods, Nodes: assembled.Nodes, InFlight: assembled.InFlight,
		NodePools: b.NodePools, NodeClasses: b.NodeClasses, DaemonSets: b.DaemonSets, Catalog: cat}
	// Volumes bound where pods run once the manifests hold any storage object
	// (claims, volumes, classes); without one, claims are taken to exist
	// somewhere the manifests do not show and are not looked at.
	if len(b.Claims)+len(b.PersistentVolumes)+len(b.StorageClasses) > 0 {
		snap.Volumes = &packer.Volumes{Claims: b.Claims, PersistentVolumes: b.PersistentVolumes, StorageClasses: b.StorageClasses}
	}
	return snap, lc.prep, region, nil
}

func writePlanTable(w io.Writer, plan *packer.Plan, explain bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NEW NODE\tPOOL\tTYPE\tCAPACITY\tZONE\t$/HOUR\tPODS\n")
	for _, n := range plan.NewNodes {
		capacity := n.CapacityType
		if n.CapacityReservationID != "" {
			capacity += " " + n.CapacityReservationID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.4f\t%s\n", n.Name, n.NodePool, n.InstanceType, capacity, n.Zone, n.PricePerHour, podList(n.Pods))
	}
	tw.Flush()
	if explain {
		for _, n := range plan.NewNodes {
			fmt.Fprintf(w, "  %s: %s\n", n.Name, n.Explain)
		}
	}
	if len(plan.ExistingNodes) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "EXISTING NODE\tIN FLIGHT\tPODS\n")
		for _, n := range plan.ExistingNodes {
			fmt.Fprintf(tw, "%s\t%v\t%s\n", n.Name, n.InFlight, podList(n.Pods))
		}
		tw.Flush()
	}
	if len(plan.Unschedulable) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "UNSCHEDULABLE")
		for _, u := range plan.Unschedulable {
			fmt.Fprintf(w, "  %s: %s\n", u.Pod, u.Reason)
		}
	}
	pods := 0
	for _, n := range plan.NewNodes {
		pods += len(n.Pods)
	}
	fmt.Fprintf(w, "\n%d new node(s) for %d pod(s), %d pod(s) on existing capacity, %d unschedulable; new capacity $%.4f/hour (%s)\n",
		len(plan.NewNodes), pods, countPods(plan.ExistingNodes), len(plan.Unschedulable), plan.TotalPricePerHour, plan.Region)
}

func countPods(ns []packer.ExistingNode) int {
	n := 0
	for _, e := range ns {
		n += len(e.Pods)
	}
	return n
}

// podList shortens long pod lists for the table.
func podList(pods []string) string {
	s := append([]string(nil), pods...)
	sort.Strings(s)
	if len(s) > 4 {
		return fmt.Sprintf("%s, … (%d pods)", strings.Join(s[:3], ", "), len(s))
	}
	return strings.Join(s, ", ")
}
