package packertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// TestPreparedCatalogMatchesFreshSolve plans random clusters with a Prepared
// catalog reused across solves and checks every plan is byte-identical to a
// solve that prepares afresh: after offerings are marked unavailable in place,
// after prices change in place (the cached order no longer holds), after the
// catalog changes shape (the Prepared value must then be ignored), and when it
// was prepared from another catalog.
func TestPreparedCatalogMatchesFreshSolve(t *testing.T) {
	for seed := int64(0); seed < 30; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			snap := workload.Random(seed, 150)
			cat := snap.Catalog.Clone() // changed in place below
			snap.Catalog = cat
			prep := packer.Prepare(cat)
			if !prep.Fits(cat) {
				t.Fatal("Prepare(cat).Fits(cat) = false")
			}
			same := func(stage string, explain bool) *packer.Plan {
				t.Helper()
				fresh := packer.Solve(snap, packer.Options{Explain: explain})
				reused := packer.Solve(snap, packer.Options{Explain: explain, Prepared: prep})
				if a, b := planJSON(t, fresh), planJSON(t, reused); !bytes.Equal(a, b) {
					t.Fatalf("%s: plan with a reused Prepared differs:\nfresh  %s\nreused %s", stage, a, b)
				}
				if errs := check.Plan(snap, reused, snap.Catalog); len(errs) > 0 {
					t.Fatalf("%s: %d checker errors, first: %v", stage, len(errs), errs[0])
				}
				return reused
			}
			same("as prepared", seed%2 == 0)

			// Availability is read from the catalog at every solve.
			for i := range cat.InstanceTypes {
				for j := range cat.InstanceTypes[i].Offerings {
					if (i+j)%3 == 0 {
						cat.InstanceTypes[i].Offerings[j].Available = false
					}
				}
			}
			same("offerings unavailable", false)

			// Prices change in place: the prepared order is stale and must be re-sorted.
			for i := range cat.InstanceTypes {
				for j := range cat.InstanceTypes[i].Offerings {
					if (i*7+j)%4 == 0 {
						cat.InstanceTypes[i].Offerings[j].PricePerHour *= 0.37
					}
				}
			}
			same("prices changed", true)

			// A new offering changes the catalog's shape: the Prepared value no longer fits.
			it := &cat.InstanceTypes[len(cat.InstanceTypes)-1]
			extra := it.Offerings[0]
			extra.Zone = "us-east-1f"
			extra.Available = true
			it.Offerings = append(it.Offerings, extra)
			if prep.Fits(cat) {
				t.Fatal("Fits still true after an offering was added")
			}
			same("offering added", false)

			// A Prepared value of another catalog is ignored.
			other := packer.Prepare(catalog.Embedded())
			a := planJSON(t, packer.Solve(snap, packer.Options{}))
			b := planJSON(t, packer.Solve(snap, packer.Options{Prepared: other}))
			if !bytes.Equal(a, b) {
				t.Fatalf("plan with another catalog's Prepared differs:\nfresh %s\nother %s", a, b)
			}
		})
	}
}

// TestPreparedConcurrentSolves shares one Prepared value between concurrent
// solves (the consolidator may simulate in parallel); run with -race.
func TestPreparedConcurrentSolves(t *testing.T) {
	snap := workload.Random(3, 300)
	prep := packer.Prepare(snap.Catalog)
	want := planJSON(t, packer.Solve(snap, packer.Options{}))
	var wg sync.WaitGroup
	got := make([][]byte, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := json.Marshal(packer.Solve(snap, packer.Options{Prepared: prep}))
			if err != nil {
				t.Error(err)
			}
			got[i] = b
		}()
	}
	wg.Wait()
	for i, g := range got {
		if !bytes.Equal(g, want) {
			t.Errorf("solve %d with a shared Prepared differs from a fresh solve", i)
		}
	}
}

// TestPrepareFromPreviousCatalog chains Prepared values over fresh catalogs, as
// a warm container reading a new catalog per invocation would: types whose
// facts are unchanged reuse the previous labels and allocatable, a type whose
// facts changed gets them derived again, and every plan matches a fresh solve.
func TestPrepareFromPreviousCatalog(t *testing.T) {
	for seed := int64(0); seed < 20; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			snap := workload.Random(seed, 150)
			prev := packer.Prepare(snap.Catalog)
			_ = packer.Solve(snap, packer.Options{Prepared: prev}) // fills prev's allocatable
			for round := 0; round < 3; round++ {
				cat := snap.Catalog.Clone()
				for i := range cat.InstanceTypes {
					it := &cat.InstanceTypes[i]
					switch (i + round) % 5 {
					case 0:
						it.MemoryMiB += 1024 // facts changed: must not reuse
					case 1:
						it.MaxPods++
					case 2:
						for j := range it.Offerings {
							it.Offerings[j].PricePerHour *= 1.3
						}
					}
				}
				snap.Catalog = cat
				prep := packer.PrepareFrom(prev, cat)
				if !prep.Fits(cat) || prev.Fits(cat) {
					t.Fatalf("round %d: Fits: new %v (want true), previous %v (want false)", round, prep.Fits(cat), prev.Fits(cat))
				}
				a := planJSON(t, packer.Solve(snap, packer.Options{}))
				b := planJSON(t, packer.Solve(snap, packer.Options{Prepared: prep}))
				if !bytes.Equal(a, b) {
					t.Fatalf("round %d: plan with PrepareFrom differs:\nfresh %s\nchain %s", round, a, b)
				}
				prev = prep
			}
			// A type's facts changed in place: the Prepared value no longer fits.
			snap.Catalog.InstanceTypes[0].VCPU *= 2
			if prev.Fits(snap.Catalog) {
				t.Fatal("Fits still true after a type's vCPU changed in place")
			}
			a := planJSON(t, packer.Solve(snap, packer.Options{}))
			b := planJSON(t, packer.Solve(snap, packer.Options{Prepared: prev}))
			if !bytes.Equal(a, b) {
				t.Fatalf("plan after an in-place change differs:\nfresh %s\nstale %s", a, b)
			}
		})
	}
}

// BenchmarkSolvePrepared is what repeated solves on one catalog cost (the
// consolidator's simulations): a small cluster's pods on the real us-east-1
// catalog (the embedded one when that file is absent), with a fresh Prepare per
// solve ("fresh") and with one Prepared value reused ("reused").
func BenchmarkSolvePrepared(b *testing.B) {
	cat := catalog.Embedded()
	if p := workload.FindSharedCatalog("", "us-east-1.json"); p != "" {
		c, err := catalog.Load(p)
		if err != nil {
			b.Fatal(err)
		}
		cat = c
	}
	snap := workload.Random(5, 40)
	snap.Catalog = cat
	for _, mode := range []string{"fresh", "reused"} {
		b.Run(mode, func(b *testing.B) {
			var prep *packer.Prepared
			if mode == "reused" {
				prep = packer.Prepare(cat)
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				packer.Solve(snap, packer.Options{Prepared: prep})
			}
		})
	}
}
