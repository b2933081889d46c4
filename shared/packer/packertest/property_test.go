package packertest

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

var (
	propertySeeds   = flag.Int("property.seeds", 200, "number of random clusters TestPropertyRandomClusters plans")
	propertyFirst   = flag.Int64("property.first", 1, "first seed of TestPropertyRandomClusters")
	propertyMaxPods = flag.Int("property.maxpods", 300, "largest pending-pod count of a random cluster")
)

// TestPropertyRandomClusters plans seeded random clusters (pools with taints,
// requirements, weights and limits; existing and in-flight nodes; DaemonSets; pods
// with every constraint the engine honours) and has the independent checker judge
// every plan. A failure names the seed; rerun one with
//
//	go test ./shared/packer/packertest -run 'TestPropertyRandomClusters/seed=17$' -v
func TestPropertyRandomClusters(t *testing.T) {
	n := *propertySeeds
	if testing.Short() {
		n = min(n, 40)
	}
	for seed := *propertyFirst; seed < *propertyFirst+int64(n); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			snap := workload.Random(seed, *propertyMaxPods)
			plan := packer.Solve(snap, packer.Options{})
			errs := check.Plan(snap, plan, snap.Catalog)
			if len(errs) > 0 {
				var b strings.Builder
				for i, e := range errs {
					if i == 10 {
						fmt.Fprintf(&b, "\n  ... %d more", len(errs)-10)
						break
					}
					fmt.Fprintf(&b, "\n  %v", e)
				}
				t.Errorf("seed %d (%d pods, %d pools, %d existing, %d in flight, %d DaemonSets): %d checker errors:%s\nreproduce: go test ./shared/packer/packertest -run 'TestPropertyRandomClusters/seed=%d$' -v",
					seed, len(snap.Pods), len(snap.NodePools), len(snap.Nodes), len(snap.InFlight), len(snap.DaemonSets), len(errs), b.String(), seed)
			}
			// A valid plan that places every pod can never cost less than the lower
			// bound: this cross-checks workload.LowerBound on varied clusters.
			if len(errs) == 0 && len(plan.Unschedulable) == 0 {
				if bound, why := workload.LowerBound(snap); bound > plan.TotalPricePerHour*(1+1e-9)+1e-9 {
					t.Errorf("seed %d: lower bound $%v/h above a valid plan's $%v/h (%s)", seed, bound, plan.TotalPricePerHour, why)
				} else if strings.HasPrefix(why, "lower bound:") {
					t.Errorf("seed %d: %s", seed, why)
				}
			}
			if seed%10 == 0 {
				again := packer.Solve(workload.Random(seed, *propertyMaxPods), packer.Options{})
				if !bytes.Equal(planJSON(t, plan), planJSON(t, again)) {
					t.Errorf("seed %d: the same cluster planned twice gave different plans", seed)
				}
			}
		})
	}
}
