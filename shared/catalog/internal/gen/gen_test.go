package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

// TestCommittedCatalogIsReproducible regenerates the embedded catalog from the
// reference file and requires the committed data/catalog.json to match byte for
// byte, so hand edits and stale output are caught.
func TestCommittedCatalogIsReproducible(t *testing.T) {
	src := filepath.Join("..", "..", "..", "..", "..", "shared", "catalog", "us-east-1.json")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("reference catalog %s not found (it lives in ../shared/catalog next to the repository): %v", src, err)
	}
	full, err := catalog.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := derive(full)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := sub.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join("..", "..", "data", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), committed) {
		t.Fatal("shared/catalog/data/catalog.json is not what the generator produces: run `go run ./shared/catalog/internal/gen`")
	}
	if len(sub.InstanceTypes) < 300 {
		t.Errorf("only %d instance types", len(sub.InstanceTypes))
	}
}

func TestDeriveRejectsGaps(t *testing.T) {
	// A source without inf2 must fail loudly rather than ship a catalog missing a family.
	full, err := catalog.New("us-east-1", []catalog.InstanceType{{Name: "m5.large", Arch: "amd64", VCPU: 2, MemoryMiB: 8192, MaxPods: 29,
		Offerings: []catalog.Offering{{Zone: "us-east-1a", CapacityType: "on-demand", PricePerHour: 0.096, Available: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = derive(full)
	if err == nil {
		t.Fatal("derive accepted a source missing most families")
	}
	for _, want := range []string{"family inf2: not in the source catalog", "m6i.large: in the bandwidth table but not in the catalog"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error does not mention %q", want)
		}
	}
}
