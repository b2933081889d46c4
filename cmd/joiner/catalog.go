package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/cmd/internal/cli"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func init() {
	register(cli.Command{Name: "catalog", Summary: "print the instance catalog (embedded or --catalog FILE) as a table or JSON", Run: runCatalog})
}

func runCatalog(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner catalog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := fs.String("o", "table", "output format: table or json (json is the --catalog file format)")
	file := fs.String("catalog", "", "read this catalog file instead of the embedded one")
	family := fs.String("family", "", "only these instance families (comma-separated, e.g. m6i,g6)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: joiner catalog [-o table|json] [--catalog FILE] [--family F[,F...]]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "joiner catalog: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "joiner catalog: -o: unknown format %q (want table or json)\n", *output)
		return 2
	}

	cat, err := catalog.LoadOrEmbedded(*file)
	if err != nil {
		fmt.Fprintf(stderr, "joiner catalog: %v\n", err)
		return 1
	}
	if *family != "" {
		want := map[string]bool{}
		for _, f := range strings.Split(*family, ",") {
			if f = strings.TrimSpace(f); f != "" {
				want[f] = true
			}
		}
		cat = cat.Filter(func(it *catalog.InstanceType) bool { return want[it.Family()] })
		if len(cat.InstanceTypes) == 0 {
			fmt.Fprintf(stderr, "joiner catalog: --family %s: no instance type in that family\n", *family)
			return 1
		}
	}

	switch *output {
	case "json":
		err = cat.WriteJSON(stdout)
	default:
		err = writeCatalogTable(stdout, cat)
	}
	if err != nil {
		fmt.Fprintf(stderr, "joiner catalog: %v\n", err)
		return 1
	}
	return 0
}

// writeCatalogTable prints one row per type with the figures a user compares
// when choosing: allocatable under Karpenter's default overhead, the on-demand
// price and the cheapest available spot price (marked * when estimated).
func writeCatalogTable(w io.Writer, cat *catalog.Catalog) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tARCH\tVCPU\tMEMORY\tPODS\tACCELERATOR\tALLOC CPU\tALLOC MEMORY\tON-DEMAND $/H\tSPOT $/H\tZONES")
	estimated := false
	for i := range cat.InstanceTypes {
		it := &cat.InstanceTypes[i]
		alloc := catalog.Allocatable(it, catalog.Overhead{})
		cpu, mem := alloc[corev1.ResourceCPU], alloc[corev1.ResourceMemory]
		od, _ := cheapest(it, karpenter.CapacityTypeOnDemand)
		spot, spotEstimate := cheapest(it, karpenter.CapacityTypeSpot)
		if spotEstimate {
			estimated = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%dMi\t%d\t%s\t%s\t%dMi\t%s\t%s\t%s\n",
			it.Name, it.Arch, it.VCPU, it.MemoryMiB, it.MaxPods, accelerator(it),
			cpu.String(), mem.Value()>>20, od, spotCell(spot, spotEstimate), strings.Join(zonesOf(it), ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d instance types, region %s, zones %s.\n", len(cat.InstanceTypes), cat.Region, strings.Join(cat.Zones(), ","))
	if estimated {
		fmt.Fprintln(w, "* spot price is an estimate, not a market price.")
	}
	return nil
}

// cheapest returns the lowest available price of a capacity type ("-" when
// none) and whether that price is an estimate.
func cheapest(it *catalog.InstanceType, capacityType string) (string, bool) {
	best, estimate, found := 0.0, false, false
	for _, o := range it.Offerings {
		if o.CapacityType != capacityType || !o.Available {
			continue
		}
		if !found || o.PricePerHour < best {
			best, estimate, found = o.PricePerHour, o.Estimate, true
		}
	}
	if !found {
		return "-", false
	}
	return strconv.FormatFloat(best, 'f', -1, 64), estimate
}

func spotCell(price string, estimate bool) string {
	if estimate {
		return price + "*"
	}
	return price
}

func accelerator(it *catalog.InstanceType) string {
	switch {
	case it.GPU != nil:
		return fmt.Sprintf("%dx %s %s (%dMi)", it.GPU.Count, it.GPU.Manufacturer, it.GPU.Name, it.GPU.MemoryMiB)
	case it.Accelerator != nil:
		return fmt.Sprintf("%dx %s %s", it.Accelerator.Count, it.Accelerator.Manufacturer, it.Accelerator.Name)
	}
	return "-"
}

func zonesOf(it *catalog.InstanceType) []string {
	set := map[string]bool{}
	for _, o := range it.Offerings {
		if o.Available {
			set[o.Zone] = true
		}
	}
	zones := make([]string, 0, len(set))
	for z := range set {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	return zones
}
