package packertest

import (
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

func BenchmarkZZ(b *testing.B) {
	cat, _, _ := workload.BenchCatalog()
	snap := workload.KarpenterSnapshot(2000, cat)
	prep := packer.Prepare(cat)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		packer.Solve(snap, packer.Options{Prepared: prep})
	}
}
