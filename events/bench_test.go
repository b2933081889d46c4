package events

import "testing"

// BenchmarkBuildPendingPods1000 is the forwarder's cost to split 1,000 pending pods
// into PutEvents entries.
func BenchmarkBuildPendingPods1000(b *testing.B) {
	pods := realisticPods(1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BuildPendingPods("prod", "b-1", observed, pods, BatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodePendingPods is the provisioner's cost to decode one full (≈256 KB)
// Pending Pods event.
func BenchmarkDecodePendingPods(b *testing.B) {
	entries, err := BuildPendingPods("prod", "b-1", observed, realisticPods(1000), BatchOptions{})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := entries[0].Wrap("id", "123456789012", "us-east-1", observed)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		ev, err := Decode(raw)
		if err != nil {
			b.Fatal(err)
		}
		if len(ev.(*PendingPods).Detail.Pods) == 0 {
			b.Fatal("no pods decoded")
		}
	}
}
