package crds

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func installedSums(t *testing.T) map[string]SumLine {
	t.Helper()
	f, err := os.Open(SumsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := ParseSums(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]SumLine{}
	for _, l := range lines {
		out[l.Module+"@"+l.Version+"/"+l.Path] = l
	}
	return out
}

// TestInstalledMatchSources checks, offline, that every installed CRD is the
// published file recorded in SOURCES under the generated header, at the pinned
// versions, and that deploy/kustomization.yaml installs exactly these files.
func TestInstalledMatchSources(t *testing.T) {
	sums := installedSums(t)
	for _, name := range Files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		key := ProviderModule + "@" + ProviderVersion + "/" + path.Join(Dir, name)
		want, ok := sums[key]
		if !ok {
			t.Fatalf("%s has no line for %s: run go generate ./deploy/crds", SumsFile, key)
		}
		body := Body(b)
		src := Source{Module: ProviderModule, Version: ProviderVersion, Path: path.Join(Dir, name), Data: body}
		if got := src.SHA256(); got != want.SHA256 {
			t.Errorf("%s: sha256 %s, but %s@%s publishes %s: the file was edited by hand; run go generate ./deploy/crds", name, got, ProviderModule, ProviderVersion, want.SHA256)
		}
		if !bytes.HasPrefix(b, []byte(Header(src))) {
			t.Errorf("%s does not start with the generator's header", name)
		}
		var crd struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal(body, &crd); err != nil || crd.Kind != "CustomResourceDefinition" {
			t.Errorf("%s: not a CustomResourceDefinition (%v)", name, err)
		}
	}
	for _, name := range CoreFiles {
		if _, ok := sums[CoreModule+"@"+CoreVersion+"/"+path.Join(Dir, name)]; !ok {
			t.Errorf("%s has no line for the core module's %s", SumsFile, name)
		}
	}
	k, err := os.ReadFile(filepath.Join("..", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kz struct{ Resources []string }
	if err := yaml.Unmarshal(k, &kz); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range kz.Resources {
		if strings.HasPrefix(r, "crds/") {
			listed = append(listed, strings.TrimPrefix(r, "crds/"))
		}
	}
	if !slices.Equal(listed, Files) {
		t.Errorf("deploy/kustomization.yaml installs CRDs %v, want %v", listed, Files)
	}
}

// TestInstalledMatchModules compares deploy/crds with the files in the pinned
// modules themselves, fetched by the go command (module cache, else GOPROXY). It
// fails in CI (CI=true) and under `make test` (JOINER_REQUIRE_REAL_PARTS=1) when
// they cannot be had, as a missing real part does, and skips elsewhere.
func TestInstalledMatchModules(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: does not fetch modules")
	}
	provider, core, err := Published(true)
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("JOINER_REQUIRE_REAL_PARTS") == "1" {
			t.Fatal(err)
		}
		t.Skip("Karpenter's modules are not available (no module cache, no GOPROXY): ", err)
	}
	sums := installedSums(t)
	for _, name := range Files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := provider[name]
		if !bytes.Equal(Body(b), s.Data) {
			t.Errorf("deploy/crds/%s differs from %s@%s %s: run go generate ./deploy/crds", name, s.Module, s.Version, s.Path)
		}
		if l := sums[s.Module+"@"+s.Version+"/"+s.Path]; l.ModuleSum != s.ModuleSum {
			t.Errorf("%s records module sum %s for %s@%s, the go command verified %s", SumsFile, l.ModuleSum, s.Module, s.Version, s.ModuleSum)
		}
	}
	for _, name := range CoreFiles {
		if err := DerivedFrom(core[name].Data, provider[name].Data); err != nil {
			t.Errorf("%s: %s@%s's copy is not the core module's plus additions: %v", name, ProviderModule, ProviderVersion, err)
		}
	}
}

func TestDerivedFrom(t *testing.T) {
	core := []byte("a:\n  b: 1\n  c: 2\n")
	if err := DerivedFrom(core, []byte("a:\n  b: 1\n  x: extra\n  c: 2\n")); err != nil {
		t.Errorf("additions only: %v", err)
	}
	err := DerivedFrom(core, []byte("a:\n  b: 3\n  c: 2\n"))
	if err == nil || !strings.Contains(err.Error(), `"b: 1"`) {
		t.Errorf("changed line: got %v, want an error naming b: 1", err)
	}
	if err := DerivedFrom(core, []byte("a:\n  c: 2\n  b: 1\n")); err == nil {
		t.Error("reordered lines were accepted")
	}
}

func TestBodyAndSums(t *testing.T) {
	if got := string(Body([]byte("# one\n# two\n---\nkind: X\n"))); got != "---\nkind: X\n" {
		t.Errorf("Body = %q", got)
	}
	s := Source{Module: "m", Version: "v1", ModuleSum: "h1:x=", Path: "p/f.yaml", Data: []byte("d")}
	lines, err := ParseSums(strings.NewReader(FormatSums(s)))
	if err != nil || len(lines) != 1 || lines[0] != (SumLine{"m", "v1", "h1:x=", "p/f.yaml", s.SHA256()}) {
		t.Errorf("round trip: %+v, %v", lines, err)
	}
	if _, err := ParseSums(strings.NewReader("m@v1 h1:x= p\n")); err == nil {
		t.Error("a short line was accepted")
	}
}
