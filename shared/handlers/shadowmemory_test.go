package handlers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestShadowMemoryEncoding: the memory fits SSM's standard tier (4096 characters):
// plain JSON while it fits, gzipped past that, and past that the oldest entries
// (those nearest their removal) are kept and the newest left out, counted.
func TestShadowMemoryEncoding(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	mem := func(n int) *shadowMemory {
		m := &shadowMemory{}
		for i := 0; i < n; i++ {
			m.setCondition(fmt.Sprintf("default-%05d", i), memCondition{Type: "Empty", Status: metav1.ConditionTrue, Since: t0.Add(time.Duration(i) * time.Second)})
		}
		m.remove("default-gone", memRemoval{At: t0, Reason: "Expired"})
		return m
	}
	for _, tc := range []struct {
		n        int
		gzipped  bool
		dropping bool
	}{{3, false, false}, {200, true, false}, {5000, true, true}} {
		b, dropped, err := encodeMemory(mem(tc.n))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > memoryMaxBytes {
			t.Errorf("%d marks: %d bytes, over %d", tc.n, len(b), memoryMaxBytes)
		}
		if got := strings.HasPrefix(string(b), gzipPrefix); got != tc.gzipped {
			t.Errorf("%d marks: gzipped %v, want %v", tc.n, got, tc.gzipped)
		}
		if (dropped > 0) != tc.dropping {
			t.Errorf("%d marks: %d left out", tc.n, dropped)
		}
		back, err := decodeMemory(b)
		if err != nil {
			t.Fatalf("%d marks: %v", tc.n, err)
		}
		if got := len(back.Conditions) + len(back.Removed); got != tc.n+1-dropped {
			t.Errorf("%d marks: %d entries decoded, want %d", tc.n, got, tc.n+1-dropped)
		}
		if _, ok := back.Removed["default-gone"]; !ok {
			t.Errorf("%d marks: the oldest entry (a removal) was left out", tc.n)
		}
		if c := back.Conditions["default-00000"]; len(c) != 1 || !c[0].Since.Equal(t0) {
			t.Errorf("%d marks: oldest mark decoded as %v", tc.n, c)
		}
		t.Logf("%d marks: %d bytes, %d left out", tc.n, len(b), dropped)
	}
	for _, bad := range []string{"{", "gzip:%%%", "gzip:aGVsbG8="} {
		if _, err := decodeMemory([]byte(bad)); err == nil || !strings.Contains(err.Error(), "shadow memory") {
			t.Errorf("decode %q: %v", bad, err)
		}
	}
}
