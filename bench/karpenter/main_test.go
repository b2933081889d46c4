package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// Both engines must see the same allocatable, or the comparison measures the
// translation: Karpenter's InstanceType.Allocatable (capacity less overhead)
// must equal the catalog's for every type, on AL2023 and Bottlerocket.
func TestInstanceTypesKeepAllocatable(t *testing.T) {
	cat := catalog.Embedded()
	br := workload.DefaultNodeClass()
	br.Spec.AMISelectorTerms = []karpenter.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
	for _, ov := range []catalog.Overhead{{}, catalog.OverheadFor(br)} {
		its := instanceTypes(cat, ov)
		if len(its) != len(cat.InstanceTypes) {
			t.Fatalf("%d instance types from %d catalog types", len(its), len(cat.InstanceTypes))
		}
		for i, it := range its {
			want := catalog.Allocatable(&cat.InstanceTypes[i], ov)
			got := it.Allocatable()
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
				if g, w := got[r], want[r]; g.Cmp(w) != 0 {
					t.Errorf("%s (%s): %s allocatable %s, catalog says %s", it.Name, ov.AMIFamily, r, g.String(), w.String())
				}
			}
			if it.Offerings.Available().Cheapest() == nil && len(cat.InstanceTypes[i].Offerings) > 0 {
				available := false
				for _, o := range cat.InstanceTypes[i].Offerings {
					available = available || o.Available
				}
				if available {
					t.Errorf("%s: no available offering after translation", it.Name)
				}
			}
		}
	}
}

// A translated case keeps every pod, pool and existing node, and Karpenter
// schedules every pod of a small case somewhere.
func TestTranslateAndSchedule(t *testing.T) {
	snap := workload.KarpenterSnapshot(100, mustBench(t))
	in, err := translate(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.pods) != len(snap.Pods) || len(in.pools) != len(snap.NodePools) {
		t.Fatalf("translated %d pods, %d pools from %d, %d", len(in.pods), len(in.pools), len(snap.Pods), len(snap.NodePools))
	}
	res, err := schedule(testContext(), in)
	if err != nil {
		t.Fatal(err)
	}
	placed := 0
	for _, nc := range res.NewNodeClaims {
		placed += len(nc.Pods)
		if _, ok := claimPrice(nc); !ok {
			t.Errorf("a NodeClaim has no priced offering: %d options, requirements %s", len(nc.InstanceTypeOptions), nc.Requirements)
			break
		}
	}
	if placed != len(snap.Pods) || len(res.PodErrors) != 0 {
		t.Errorf("karpenter placed %d of %d pods, %d errors", placed, len(snap.Pods), len(res.PodErrors))
	}
}

func mustBench(t *testing.T) *catalog.Catalog {
	t.Helper()
	c, _, err := workload.BenchCatalog()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
