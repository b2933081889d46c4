package replay

import (
	"context"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/kubesim"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// BenchmarkReplay10000Replicas replays testdata/replicas-10000: a Deployment
// scaled from 10 to 10,000 replicas (80 c6g nodes) and back to 0 over 20 simulated
// minutes, through the three functions' handlers, the in-memory cluster and its
// scheduler simulation. It reports the peak heap next to the time; the replay must
// finish with every expectation met. Not part of make test (about 12 s of CPU):
//
//	go test ./shared/replay -run XXX -bench BenchmarkReplay10000Replicas -benchtime 1x
func BenchmarkReplay10000Replicas(b *testing.B) {
	sc, err := Load("testdata/replicas-10000")
	if err != nil {
		b.Fatal(err)
	}
	if *sc.Timeline[0].Replicas != 10000 || 10000 > kubesim.MaxReplicas {
		b.Fatalf("the scenario should scale to 10,000 replicas, within the cap of %d", kubesim.MaxReplicas)
	}
	for i := 0; i < b.N; i++ {
		var res *Result
		peak, base := workload.PeakHeap(func() { res, err = Run(context.Background(), sc, Options{}) })
		if err != nil {
			b.Fatal(err)
		}
		if res.Errors != 0 || !res.OK() || len(res.Expectations) == 0 {
			b.Fatalf("replay: %d error(s) %v; expectations %+v", res.Errors, res.ErrorMessages, res.Expectations)
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(base)/(1<<20), "baseline-heap-MiB")
	}
}
