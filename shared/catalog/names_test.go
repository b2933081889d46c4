package catalog

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestNameDerivation(t *testing.T) {
	for _, tc := range []struct {
		name, family, category, generation, size string
	}{
		{"m6i.large", "m6i", "m", "6", "large"},
		{"m7i-flex.large", "m7i-flex", "m", "7", "large"},
		{"u-6tb1.56xlarge", "u-6tb1", "u", "1", "56xlarge"},
		{"u7i-12tb.224xlarge", "u7i-12tb", "u", "7", "224xlarge"},
		{"c6gn.large", "c6gn", "c", "6", "large"},
		{"p4d.24xlarge", "p4d", "p", "4", "24xlarge"},
		{"g6e.xlarge", "g6e", "g", "6", "xlarge"},
		{"inf2.xlarge", "inf2", "inf", "2", "xlarge"},
		{"t3a.nano", "t3a", "t", "3", "nano"},
		{"m7i.metal-24xl", "m7i", "m", "7", "metal-24xl"},
		{"p6-b200.48xlarge", "p6-b200", "p", "6", "48xlarge"},
		{"mac2-m2pro.metal", "mac2-m2pro", "mac", "2", "metal"},
		{"x2iedn.32xlarge", "x2iedn", "x", "2", "32xlarge"},
		{"hpc7g.16xlarge", "hpc7g", "hpc", "7", "16xlarge"},
		// Karpenter's benchmark types: no dot, so Karpenter derives nothing;
		// Joiner's extension gives family and size, the category from the letters.
		{"fake-it-12", "fake-it", "fake", "", "12"},
		{"fake-it-0", "fake-it", "fake", "", "0"},
		{"custom", "custom", "custom", "", ""},
		{"a.b.c", "", "", "", ""},
		{"", "", "", "", ""},
	} {
		it := &InstanceType{Name: tc.name}
		if got := it.Family(); got != tc.family {
			t.Errorf("Family(%q) = %q, want %q", tc.name, got, tc.family)
		}
		if got := it.Category(); got != tc.category {
			t.Errorf("Category(%q) = %q, want %q", tc.name, got, tc.category)
		}
		if got := it.Generation(); got != tc.generation {
			t.Errorf("Generation(%q) = %q, want %q", tc.name, got, tc.generation)
		}
		if got := it.Size(); got != tc.size {
			t.Errorf("Size(%q) = %q, want %q", tc.name, got, tc.size)
		}
	}
}

// karpenterScheme is Karpenter's instanceTypeScheme, verbatim.
var karpenterScheme = regexp.MustCompile(`(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`)

// TestCategoryGenerationMatchesKarpenterRegexp checks the hand-written matcher
// against Karpenter's regexp on every real name and on awkward inputs.
func TestCategoryGenerationMatchesKarpenterRegexp(t *testing.T) {
	names := []string{
		"u-6tb1.56xlarge", "u-6tb.large", "u-tb1.large", "u-6tb1", "x-12tb3.metal", "m", "m.", "m5", "m5.",
		"5m.large", "M5.large", "m-5.large", "m5-flex.x", "ab12cd.e", "u-6tbx.large", "u-6tb", "u-6tb.",
		"fake-it-12", "a1.b.c", ".large", "m5..large",
	}
	for i := range Embedded().InstanceTypes {
		names = append(names, Embedded().InstanceTypes[i].Name)
	}
	// The full reference catalog adds every other real name (u-*, mac*, p6-*, ...).
	if ref, err := Load(filepath.Join(referenceDir, "us-east-1.json")); err == nil {
		for i := range ref.InstanceTypes {
			names = append(names, ref.InstanceTypes[i].Name)
		}
	} else {
		t.Logf("reference catalog not used: %v", err)
	}
	for _, name := range names {
		wantCat, wantGen := "", ""
		if m := karpenterScheme.FindStringSubmatch(name); len(m) == 4 {
			wantCat, wantGen = m[1], m[3]
		}
		cat, gen, ok := categoryGeneration(name)
		if cat != wantCat || gen != wantGen || ok != (wantCat != "") {
			t.Errorf("categoryGeneration(%q) = %q, %q, %v; Karpenter's regexp gives %q, %q", name, cat, gen, ok, wantCat, wantGen)
		}
		if strings.Contains(name, ".") && Category(name) != wantCat {
			t.Errorf("Category(%q) = %q, want %q", name, Category(name), wantCat)
		}
	}
}

func BenchmarkInstanceLabels(b *testing.B) {
	it, _ := Embedded().Lookup("m7i-flex.large")
	for b.Loop() {
		_ = InstanceLabels(it)
	}
}
