package workload

import (
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"time"
)

// heapMetric is the bytes of heap objects, live or not yet swept: the same figure as
// runtime.MemStats.HeapAlloc, read without stopping the world.
const heapMetric = "/memory/classes/heap/objects:bytes"

// PeakHeap runs f once and returns the largest heap size seen while it ran, sampled
// every 100µs (and at the end), after a GC so the baseline holds only live data.
//
// The figure is HeapAlloc: everything allocated and not yet freed, so it includes
// garbage the collector has not reclaimed yet and the input f reads. It is what the
// process must hold in heap at that moment, an upper bound on live data and a lower
// bound on RSS. baseline is the heap before f started (mostly the input).
func PeakHeap(f func()) (peak, baseline uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: heapMetric}}
	read := func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[0].Value.Uint64()
	}
	baseline = read()
	peak = baseline
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		local := make([]metrics.Sample, 1)
		local[0].Name = heapMetric
		for {
			select {
			case <-done:
				return
			case <-t.C:
				metrics.Read(local)
				if local[0].Value.Kind() == metrics.KindUint64 {
					v := local[0].Value.Uint64()
					mu.Lock()
					if v > peak {
						peak = v
					}
					mu.Unlock()
				}
			}
		}
	}()
	f()
	end := read()
	close(done)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if end > peak {
		peak = end
	}
	return peak, baseline
}

// LoadAverage reads the system load average (Linux), or "unknown": the benchmarks
// report it beside their wall times, which mean little on a busy machine.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
