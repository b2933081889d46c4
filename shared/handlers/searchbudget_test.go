package handlers

import (
	"testing"
	"time"
)

// The consolidator's search budget: 30 s at most, less when the invocation's time
// left would not also hold the replacement wait, never under 2 s.
func TestSearchBudget(t *testing.T) {
	cases := []struct {
		remaining time.Duration
		limited   bool
		want      time.Duration
	}{
		{0, false, 30 * time.Second},
		{295 * time.Second, true, 30 * time.Second}, // the stack's 300 s timeout less the clean-up reserve
		{200 * time.Second, true, 20 * time.Second},
		{181 * time.Second, true, 2 * time.Second},
		{60 * time.Second, true, 2 * time.Second},
		{-time.Second, true, 2 * time.Second},
	}
	for _, c := range cases {
		if got := searchBudgetFor(c.remaining, c.limited); got != c.want {
			t.Errorf("searchBudgetFor(%v, %v) = %v, want %v", c.remaining, c.limited, got, c.want)
		}
	}
}
