package workload

import (
	"fmt"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Case is one benchmark case of the foundation issue.
type Case struct {
	// Name is the benchmark's sub-name: "karpenter-2000", "preferences-4000", "real-mixed-5000".
	Name string
	Pods int
	// Snapshot builds the case's input (a fresh one on every call).
	Snapshot func() *packer.Snapshot
	// CatalogPath is the catalog file `joiner plan --catalog` should read, "" when
	// the catalog was generated and must be written out first.
	CatalogPath string
	Catalog     *catalog.Catalog
	// CostInfoOnly marks a case whose cost ratio is reported but is no target: the
	// mixed real-catalog case, which the issue only times and whose lower bound
	// relaxes zones while 40% of its pods must spread over three zones whose
	// cheapest spot vCPU differs by up to 20% (and counts hostname anti-affinity
	// only within a group).
	CostInfoOnly bool
	// Large marks the scale case (ScalePods): minutes for an engine as slow as
	// Karpenter's, so a side-by-side benchmark runs it only when asked for by name.
	Large bool
}

// ScalePods is the pod count of the scale case, karpenter-100000: Karpenter's mix
// at five times the largest of KarpenterCounts, where `joiner plan` must take at
// most five times as long as at 20,000 pods, at most 1 GB, and cost no more
// relative to the bound (issue 18, work that grows linearly).
const ScalePods = 100000

// KarpenterCounts are the pod counts of the Karpenter-workload cases.
var KarpenterCounts = []int{100, 1000, 2000, 5000, 20000}

// Cases lists the benchmark cases: the Karpenter workload at KarpenterCounts and the
// 4,000-pod preferences case on the bench catalog, and the 5,000-pod mixed workload
// on the real catalog when it can be found.
func Cases() ([]Case, error) {
	bench, benchPath, err := BenchCatalog()
	if err != nil {
		return nil, err
	}
	if benchPath == "generated" {
		benchPath = ""
	}
	var out []Case
	for _, n := range KarpenterCounts {
		n := n
		out = append(out, Case{Name: fmt.Sprintf("karpenter-%d", n), Pods: n, Catalog: bench, CatalogPath: benchPath,
			Snapshot: func() *packer.Snapshot { return KarpenterSnapshot(n, bench) }})
	}
	out = append(out, Case{Name: fmt.Sprintf("karpenter-%d", ScalePods), Pods: ScalePods, Catalog: bench, CatalogPath: benchPath, Large: true,
		Snapshot: func() *packer.Snapshot { return KarpenterSnapshot(ScalePods, bench) }})
	out = append(out, Case{Name: "preferences-4000", Pods: 4000, Catalog: bench, CatalogPath: benchPath,
		Snapshot: func() *packer.Snapshot { return PreferenceSnapshot(4000, bench) }})
	out = append(out, Case{Name: "limit-300", Pods: 300, Catalog: bench, CatalogPath: benchPath,
		Snapshot: func() *packer.Snapshot { return LimitSnapshot(300, bench) }})
	real, realPath, err := RealCatalog()
	if err != nil {
		return nil, err
	}
	if real != nil {
		out = append(out, Case{Name: "real-mixed-5000", Pods: 5000, Catalog: real, CatalogPath: realPath, CostInfoOnly: true,
			Snapshot: func() *packer.Snapshot { return MixedSnapshot(5000, real) }})
		out = append(out, realCases(real, realPath)...)
	}
	return out, nil
}
