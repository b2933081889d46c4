// Command gen derives Joiner's embedded instance catalog
// (shared/catalog/data/catalog.json) from the full reference catalog
// (../shared/catalog/us-east-1.json, which is not committed): it keeps the
// families users pick, marks every spot price as an estimate, and adds network
// bandwidth and inf2 accelerators, which the reference file lacks.
//
// Run from the repository root:
//
//	go run ./shared/catalog/internal/gen
//
// or `go generate ./shared/catalog`. The output is deterministic; a test checks
// that the committed file is exactly what the generator produces.
package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func main() {
	src := flag.String("src", "../shared/catalog/us-east-1.json", "full reference catalog to derive from")
	out := flag.String("o", "shared/catalog/data/catalog.json", "where to write the embedded catalog")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(srcPath, outPath string) error {
	full, err := catalog.Load(srcPath)
	if err != nil {
		return err
	}
	sub, err := derive(full)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := sub.WriteJSON(&b); err != nil {
		return err
	}
	if err := os.WriteFile(outPath, b.Bytes(), 0o644); err != nil {
		return err
	}
	// The binaries embed the gzip (12 KB instead of 227 KB of a Lambda bootstrap's
	// 20 MB); the JSON stays in the repository for review.
	gz, err := gzipped(b.Bytes())
	if err != nil {
		return err
	}
	if err := os.WriteFile(outPath+".gz", gz, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gen: wrote %d instance types to %s and %s.gz\n", len(sub.InstanceTypes), outPath, outPath)
	return nil
}

// gzipped compresses data without a name or time in the header, so the output
// depends on the content only.
func gzipped(data []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// derive builds the embedded subset from the full catalog.
func derive(full *catalog.Catalog) (*catalog.Catalog, error) {
	keep := map[string]bool{}
	for _, f := range families {
		keep[f] = true
	}
	sub := full.Filter(func(it *catalog.InstanceType) bool { return keep[it.Family()] })
	var problems []error
	present := map[string]bool{}
	for i := range sub.InstanceTypes {
		it := &sub.InstanceTypes[i]
		present[it.Family()] = true
		mbps, ok := bandwidthMbps[it.Name]
		if !ok {
			problems = append(problems, fmt.Errorf("%s: no network bandwidth in the table", it.Name))
		}
		it.NetworkGbps = float64(mbps) / 1000
		if n, ok := inferentia2[it.Name]; ok {
			it.Accelerator = inferentia2Accelerator(n)
		} else if it.Family() == "inf2" {
			problems = append(problems, fmt.Errorf("%s: no accelerator facts", it.Name))
		}
		for j := range it.Offerings {
			o := &it.Offerings[j]
			o.Estimate = o.CapacityType == karpenter.CapacityTypeSpot
		}
	}
	for _, f := range families {
		if !present[f] {
			problems = append(problems, fmt.Errorf("family %s: not in the source catalog", f))
		}
	}
	var unused []string
	for name := range bandwidthMbps {
		if _, ok := sub.Lookup(name); !ok {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	for _, name := range unused {
		problems = append(problems, fmt.Errorf("%s: in the bandwidth table but not in the catalog", name))
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}

	sub.Notes = "Joiner's embedded subset of the us-east-1 reference catalog (" + fmt.Sprint(len(families)) +
		" families, every size listed). SPOT PRICES ARE ESTIMATES, NOT MARKET PRICES: every spot offering carries " +
		"estimate:true; they are synthetic (on-demand x f, f in [0.28, 0.50] by a hash of family and zone) until live " +
		"prices replace them, and the unavailable spot offerings stand in for capacity shortages. On-demand prices are " +
		"real us-east-1 Linux list prices. networkGbps comes from Karpenter's generated bandwidth table; inf2 " +
		"accelerators from Karpenter's instance-type reference and the AWS Neuron documentation. Reference catalog notes: " +
		full.Notes
	src := catalog.Source{Repo: "aws/karpenter-provider-aws", Version: "v1.14.1", License: "Apache-2.0 (facts only)"}
	if full.Source != nil {
		src = *full.Source
		src.Files = slices.Clone(src.Files)
	}
	src.Files = append(src.Files, "pkg/providers/instancetype/zz_generated.bandwidth.go@9c68c87f33f8a5cdff290cf5feeeb02644114b39")
	sub.Source = &src
	if err := sub.Validate(); err != nil {
		return nil, err
	}
	return sub, nil
}
