package catalog

import (
	"bytes"
	"os"
	"testing"
)

// TestEmbeddedGzipMatchesJSON: the binaries embed data/catalog.json.gz, the
// repository shows data/catalog.json; they must hold the same catalog.
func TestEmbeddedGzipMatchesJSON(t *testing.T) {
	want, err := os.ReadFile("data/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(EmbeddedJSON(), want) {
		t.Fatal("data/catalog.json.gz does not hold data/catalog.json: run `go generate ./shared/catalog`")
	}
}
