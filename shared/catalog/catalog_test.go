package catalog

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// referenceDir holds the read-only reference catalogs (../shared/catalog from
// the repository root). They are present on the build machines and in CI.
const referenceDir = "../../../shared/catalog"

func referenceFile(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(referenceDir, name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("reference catalog %s not found (it lives in ../shared/catalog next to the repository): %v", path, err)
	}
	return path
}

// requiredSizes is every family the foundation issue asks for, with the sizes
// EC2 sells in us-east-1 (all of them, metal included).
var requiredSizes = map[string][]string{
	"t3":   {"nano", "micro", "small", "medium", "large", "xlarge", "2xlarge"},
	"t3a":  {"nano", "micro", "small", "medium", "large", "xlarge", "2xlarge"},
	"t4g":  {"nano", "micro", "small", "medium", "large", "xlarge", "2xlarge"},
	"m5":   {"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "metal"},
	"m6i":  {"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge", "metal"},
	"m6a":  {"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge", "48xlarge", "metal"},
	"m6g":  {"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "metal"},
	"m7i":  {"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "metal-24xl", "48xlarge", "metal-48xl"},
	"m7g":  {"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "metal"},
	"c5":   {"large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge", "18xlarge", "24xlarge", "metal"},
	"c6i":  {"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge", "metal"},
	"c6g":  {"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "metal"},
	"c7i":  {"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "metal-24xl", "48xlarge", "metal-48xl"},
	"c7g":  {"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "metal"},
	"r5":   {"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "metal"},
	"r6i":  {"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge", "metal"},
	"r6g":  {"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "metal"},
	"r7i":  {"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "metal-24xl", "48xlarge", "metal-48xl"},
	"g5":   {"xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"},
	"g6":   {"xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"},
	"g6e":  {"xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"},
	"p4d":  {"24xlarge"},
	"p5":   {"4xlarge", "48xlarge"},
	"inf2": {"xlarge", "8xlarge", "24xlarge", "48xlarge"},
}

func TestEmbeddedHasEveryRequiredFamilyAndSize(t *testing.T) {
	c := Embedded()
	got := map[string][]string{}
	for i := range c.InstanceTypes {
		it := &c.InstanceTypes[i]
		got[it.Family()] = append(got[it.Family()], it.Size())
	}
	if len(requiredSizes) != 24 {
		t.Fatalf("the issue names 24 families, the table has %d", len(requiredSizes))
	}
	for family, sizes := range requiredSizes {
		for _, size := range sizes {
			if !slices.Contains(got[family], size) {
				t.Errorf("%s.%s missing from the embedded catalog (family has %v)", family, size, got[family])
			}
		}
	}
}

func TestEmbeddedFacts(t *testing.T) {
	c := Embedded()
	if c.Region != "us-east-1" {
		t.Errorf("region = %q", c.Region)
	}
	if want := []string{"us-east-1a", "us-east-1b", "us-east-1c"}; !slices.Equal(c.Zones(), want) {
		t.Errorf("zones = %v, want %v", c.Zones(), want)
	}
	if !strings.Contains(c.Notes, "SPOT PRICES ARE ESTIMATES") {
		t.Errorf("notes do not say spot prices are estimates: %q", c.Notes)
	}
	if !c.HasEstimates() {
		t.Error("HasEstimates = false for the embedded catalog")
	}
	for i := range c.InstanceTypes {
		it := &c.InstanceTypes[i]
		zones := map[string]map[string]bool{}
		for _, o := range it.Offerings {
			if (o.CapacityType == karpenter.CapacityTypeSpot) != o.Estimate {
				t.Errorf("%s %s %s: estimate = %v; exactly the spot prices are estimates", it.Name, o.Zone, o.CapacityType, o.Estimate)
			}
			if o.PricePerHour <= 0 {
				t.Errorf("%s %s %s: price %v", it.Name, o.Zone, o.CapacityType, o.PricePerHour)
			}
			if zones[o.Zone] == nil {
				zones[o.Zone] = map[string]bool{}
			}
			zones[o.Zone][o.CapacityType] = true
		}
		for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
			if !zones[z][karpenter.CapacityTypeOnDemand] || !zones[z][karpenter.CapacityTypeSpot] {
				t.Errorf("%s: zone %s lacks an on-demand or spot offering: %v", it.Name, z, zones[z])
			}
		}
		if it.NetworkGbps <= 0 {
			t.Errorf("%s: networkGbps missing", it.Name)
		}
		if wantArm := strings.Contains(it.Family(), "g") && it.Category() != "g"; wantArm != (it.Arch == ArchARM64) {
			// Graviton families carry a "g" after the generation (m6g, c7g, t4g, c6gn);
			// GPU families start with g. Anything else is a wrong arch.
			t.Errorf("%s: arch %s", it.Name, it.Arch)
		}
	}

	// Spot-check real figures against the reference tables.
	for _, tc := range []struct {
		name   string
		vcpu   int
		mem    int64
		pods   int
		od     float64
		gbps   float64
		gpu    *GPU
		accCnt int
	}{
		{"m5.large", 2, 8192, 29, 0.096, 0.75, nil, 0},
		{"m6i.large", 2, 8192, 29, 0.096, 0.781, nil, 0},
		{"t3.micro", 2, 1024, 4, 0.0104, 0.064, nil, 0},
		{"g6.xlarge", 4, 16384, 58, 0.8048, 2.5, &GPU{Count: 1, Name: "l4", Manufacturer: "nvidia", MemoryMiB: 22888}, 0},
		{"p4d.24xlarge", 96, 1179648, 737, 0, 400, &GPU{Count: 8, Name: "a100", Manufacturer: "nvidia", MemoryMiB: 40960}, 0},
		{"inf2.48xlarge", 192, 786432, 737, 12.98127, 100, nil, 12},
	} {
		it, ok := c.Lookup(tc.name)
		if !ok {
			t.Errorf("%s: not found", tc.name)
			continue
		}
		if it.VCPU != tc.vcpu || it.MemoryMiB != tc.mem || it.MaxPods != tc.pods || it.NetworkGbps != tc.gbps {
			t.Errorf("%s: vcpu %d memory %d pods %d gbps %v; want %d %d %d %v", tc.name, it.VCPU, it.MemoryMiB, it.MaxPods, it.NetworkGbps, tc.vcpu, tc.mem, tc.pods, tc.gbps)
		}
		if !reflect.DeepEqual(it.GPU, tc.gpu) {
			t.Errorf("%s: gpu %+v, want %+v", tc.name, it.GPU, tc.gpu)
		}
		if tc.od > 0 && it.Offerings[0].PricePerHour != tc.od {
			t.Errorf("%s: on-demand %v, want %v", tc.name, it.Offerings[0].PricePerHour, tc.od)
		}
		if tc.accCnt > 0 {
			want := &Accelerator{Count: tc.accCnt, Name: "inferentia2", Manufacturer: "aws", MemoryMiB: 32768, CoresPerDevice: 2}
			if !reflect.DeepEqual(it.Accelerator, want) {
				t.Errorf("%s: accelerator %+v, want %+v", tc.name, it.Accelerator, want)
			}
		}
	}
}

func TestEmbeddedIsSharedAndCloneIsPrivate(t *testing.T) {
	a, b := Embedded(), Embedded()
	if a != b {
		t.Fatal("Embedded decoded twice")
	}
	c := a.Clone()
	c.InstanceTypes[0].Offerings[0].PricePerHour = 999
	c.InstanceTypes[0].Name = "changed"
	if g := c.InstanceTypes[0].GPU; g != nil {
		g.Count = 99
	}
	if a.InstanceTypes[0].Offerings[0].PricePerHour == 999 || a.InstanceTypes[0].Name == "changed" {
		t.Fatal("Clone shares memory with the embedded catalog")
	}
	g6, _ := c.Lookup("g6.xlarge")
	g6.GPU.Count = 42
	if orig, _ := a.Lookup("g6.xlarge"); orig.GPU.Count != 1 {
		t.Fatal("Clone shares GPU structs with the embedded catalog")
	}
}

func TestRoundTrip(t *testing.T) {
	c := Embedded()
	var first bytes.Buffer
	if err := c.WriteJSON(&first); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), EmbeddedJSON()) {
		t.Error("WriteJSON of the embedded catalog differs from the embedded file: regenerate data/catalog.json")
	}
	back, err := Decode(first.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatal("decoded catalog differs from the one written")
	}
	var second bytes.Buffer
	if err := back.WriteJSON(&second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatal("second write differs from the first")
	}
	// One instance type per line, as in the reference files.
	lines := strings.Split(strings.TrimSpace(first.String()), "\n")
	typeLines := 0
	for _, l := range lines {
		if strings.HasPrefix(l, `{"name":`) {
			typeLines++
		}
	}
	if typeLines != len(c.InstanceTypes) {
		t.Errorf("%d lines start an instance type, want %d", typeLines, len(c.InstanceTypes))
	}
}

func TestLookup(t *testing.T) {
	c := Embedded()
	it, ok := c.Lookup("m7i-flex.large")
	if !ok || it.Name != "m7i-flex.large" {
		t.Fatalf("Lookup(m7i-flex.large) = %v, %v", it, ok)
	}
	if _, ok := c.Lookup("m5.nonexistent"); ok {
		t.Fatal("Lookup found a type that does not exist")
	}
	// A literal catalog (no index) still answers.
	lit := &Catalog{Region: "r", InstanceTypes: []InstanceType{{Name: "a.large"}, {Name: "b.large"}}}
	if it, ok := lit.Lookup("b.large"); !ok || it != &lit.InstanceTypes[1] {
		t.Fatal("Lookup on a literal catalog failed")
	}
	var nilCat *Catalog
	if _, ok := nilCat.Lookup("x"); ok {
		t.Fatal("nil catalog found something")
	}
}

func TestFilter(t *testing.T) {
	c := Embedded().Filter(func(it *InstanceType) bool { return it.Family() == "g6" })
	if len(c.InstanceTypes) != len(requiredSizes["g6"]) {
		t.Fatalf("g6 filter kept %d types", len(c.InstanceTypes))
	}
	if _, ok := c.Lookup("g6.48xlarge"); !ok {
		t.Fatal("filtered catalog index is stale")
	}
	if _, ok := c.Lookup("m5.large"); ok {
		t.Fatal("filter kept m5.large")
	}
	if len(Embedded().InstanceTypes) == len(c.InstanceTypes) {
		t.Fatal("Filter modified the embedded catalog")
	}
}

func TestWithPrices(t *testing.T) {
	base := Embedded()
	live := base.WithPrices(func(name, zone, ct string) (float64, bool) {
		switch {
		case name == "m5.large" && zone == "us-east-1a" && ct == karpenter.CapacityTypeSpot:
			return 0.0421, true
		case name == "m5.large" && zone == "us-east-1b" && ct == karpenter.CapacityTypeSpot:
			return -1, true // a bad feed value is ignored
		}
		return 0, false
	})
	it, _ := live.Lookup("m5.large")
	orig, _ := base.Lookup("m5.large")
	for j, o := range it.Offerings {
		was := orig.Offerings[j]
		switch {
		case o.Zone == "us-east-1a" && o.CapacityType == karpenter.CapacityTypeSpot:
			if o.PricePerHour != 0.0421 || o.Estimate {
				t.Errorf("overlaid offering = %+v", o)
			}
			if was.PricePerHour == 0.0421 || !was.Estimate {
				t.Errorf("WithPrices modified the original: %+v", was)
			}
		default:
			if o != was {
				t.Errorf("offering %d changed: %+v, was %+v", j, o, was)
			}
		}
	}
	if err := live.Validate(); err != nil {
		t.Fatal(err)
	}
}

const validType = `{"name":"a.large","arch":"amd64","vcpu":2,"memoryMiB":4096,"maxPods":29,"offerings":[{"zone":"z1a","capacityType":"on-demand","pricePerHour":0.1,"available":true}]}`

func TestLoadErrors(t *testing.T) {
	doc := func(types ...string) string {
		return `{"region":"us-east-1","instanceTypes":[` + strings.Join(types, ",\n") + `]}`
	}
	with := func(old, repl string) string { return strings.Replace(validType, old, repl, 1) }
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"unknown arch", doc(with(`"amd64"`, `"x86_64"`)), []string{`instanceTypes[0] (a.large): arch: unknown architecture "x86_64"`}},
		{"zero vcpu", doc(with(`"vcpu":2`, `"vcpu":0`)), []string{`instanceTypes[0] (a.large): vcpu: must be positive, got 0`}},
		{"zero memory", doc(with(`"memoryMiB":4096`, `"memoryMiB":0`)), []string{`memoryMiB: must be positive`}},
		{"zero pods", doc(with(`"maxPods":29`, `"maxPods":0`)), []string{`maxPods: must be positive`}},
		{"negative price", doc(with(`0.1`, `-1`)), []string{`instanceTypes[0] (a.large): offerings[0].pricePerHour: required: a positive price in USD per hour, such as 0.096 (got -1`}},
		// A missing price read as $0 and won every comparison.
		{"missing price", doc(with(`"pricePerHour":0.1,`, ``)), []string{`offerings[0].pricePerHour: required: a positive price in USD per hour, such as 0.096 (got 0; a missing price reads as 0)`}},
		{"zero price", doc(with(`0.1`, `0`)), []string{`offerings[0].pricePerHour: required: a positive price`}},
		{"absurd price", doc(with(`0.1`, `1e308`)), []string{`offerings[0].pricePerHour: 1e+308 is out of range: at most 10000 USD per hour`}},
		{"vcpu past the engine's arithmetic", doc(with(`"vcpu":2`, `"vcpu":9300000000000000`)), []string{`vcpu: 9300000000000000 is out of range: at most 9007199254740`}},
		{"memory past the engine's arithmetic", doc(with(`"memoryMiB":4096`, `"memoryMiB":9000000000000`)), []string{`memoryMiB: 9000000000000 is out of range: at most 8589934592`}},
		{"duplicate names", doc(validType, validType), []string{`instanceTypes[1] (a.large): name: duplicates instanceTypes[0]`}},
		{"unknown capacity type", doc(with(`"on-demand"`, `"preemptible"`)), []string{`offerings[0].capacityType: unknown capacity type "preemptible"`}},
		{"duplicate offering", doc(with(`"available":true}]`, `"available":true},{"zone":"z1a","capacityType":"on-demand","pricePerHour":0.2,"available":true}]`)), []string{`offerings[1]: duplicates offerings[0] (z1a on-demand)`}},
		{"no offerings", doc(with(`"offerings":[{"zone":"z1a","capacityType":"on-demand","pricePerHour":0.1,"available":true}]`, `"offerings":[]`)), []string{`offerings: at least one offering is required`}},
		{"missing name", doc(with(`"name":"a.large",`, ``)), []string{`instanceTypes[0]: name: required`}},
		{"gpu without name", doc(with(`"maxPods":29`, `"maxPods":29,"gpu":{"count":1,"manufacturer":"nvidia","memoryMiB":1}`)), []string{`gpu.name: required`}},
		{"negative gpu count", doc(with(`"maxPods":29`, `"maxPods":29,"gpu":{"count":-1,"name":"l4","manufacturer":"nvidia"}`)), []string{`gpu.count: must not be negative, got -1`}},
		{"accelerator count", doc(with(`"maxPods":29`, `"maxPods":29,"accelerator":{"count":0,"name":"inferentia2","manufacturer":"aws"}`)), []string{`accelerator.count: must be positive, got 0`}},
		{"unknown field", doc(with(`"maxPods":29`, `"maxPods":29,"memoryGiB":4`)), []string{`instanceTypes[0] (a.large): unknown field "memoryGiB"`}},
		{"wrong type", doc(with(`"vcpu":2`, `"vcpu":"two"`)), []string{`instanceTypes[0] (a.large): vcpu: want a whole number from -9223372036854775808 to 9223372036854775807, got a string`}},
		// encoding/json's own words named the Go type (struct { Region *string ... }).
		{"a list, not a catalog", `[]`, []string{`the document: want an object, got a list`}},
		{"offerings as an object", doc(with(`"offerings":[{"zone":"z1a","capacityType":"on-demand","pricePerHour":0.1,"available":true}]`, `"offerings":{}`)), []string{`instanceTypes[0] (a.large): offerings: want a list, got an object`}},
		{"missing region", `{"instanceTypes":[` + validType + `]}`, []string{`region: required`}},
		{"no types", `{"region":"r","instanceTypes":[]}`, []string{`instanceTypes: at least one instance type is required`}},
		{"types missing", `{"region":"r"}`, []string{`instanceTypes: required`}},
		{"unknown top-level field", `{"region":"r","instance_types":[]}`, []string{`unknown field "instance_types"`}},
		{"syntax error", "{\"region\":\"r\",\n\"instanceTypes\": [\n{\"name\": }\n]}", []string{`invalid JSON at line 3, column 10`}},
		{"truncated", `{"region":"r","instanceTypes":[`, []string{`unexpected end of input`}},
		{"empty", ``, []string{`empty document`}},
		{"trailing data", `{"region":"r","instanceTypes":[` + validType + `]} {}`, []string{`unexpected data after the JSON document`}},
		{"several problems", doc(with(`"vcpu":2`, `"vcpu":0`), strings.Replace(with(`"amd64"`, `"sparc"`), "a.large", "b.large", 1)),
			[]string{`instanceTypes[0] (a.large): vcpu: must be positive`, `instanceTypes[1] (b.large): arch: unknown architecture "sparc"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cat.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := Load(path)
			if err == nil {
				t.Fatalf("Load accepted it: %+v", c)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, w)
				}
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, path+": ") {
					t.Errorf("error line %q does not name the file", line)
				}
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "absent.json")); err == nil || !strings.Contains(err.Error(), "absent.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestLoadValid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cat.json")
	content := `{"region":"eu-west-1","notes":"mine","instanceTypes":[` + validType + `]}`
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Region != "eu-west-1" || c.Notes != "mine" || len(c.InstanceTypes) != 1 || c.HasEstimates() {
		t.Fatalf("loaded %+v", c)
	}
	if _, ok := c.Lookup("a.large"); !ok {
		t.Fatal("Lookup after Load failed")
	}
}

func TestNewValidatesAndCopies(t *testing.T) {
	types := []InstanceType{{Name: "a.large", Arch: ArchAMD64, VCPU: 2, MemoryMiB: 4096, MaxPods: 29,
		Offerings: []Offering{{Zone: "z", CapacityType: karpenter.CapacityTypeSpot, PricePerHour: 0.1, Available: true}}}}
	c, err := New("r", types)
	if err != nil {
		t.Fatal(err)
	}
	types[0].Name = "changed"
	if _, ok := c.Lookup("a.large"); !ok {
		t.Fatal("New kept the caller's slice")
	}
	if _, err := New("r", []InstanceType{{Name: "x"}}); err == nil {
		t.Fatal("New accepted an invalid type")
	}
}

func TestBenchCatalogLoads(t *testing.T) {
	c, err := Load(referenceFile(t, "karpenter-bench-400.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.InstanceTypes) != 400 {
		t.Fatalf("%d types, want 400", len(c.InstanceTypes))
	}
	it, ok := c.Lookup("fake-it-12")
	if !ok {
		t.Fatal("fake-it-12 missing")
	}
	if it.VCPU != 13 || it.MemoryMiB != 26*1024 || it.MaxPods != 130 {
		t.Errorf("fake-it-12 = %d vCPU %d MiB %d pods", it.VCPU, it.MemoryMiB, it.MaxPods)
	}
	if it.Family() != "fake-it" || it.Size() != "12" || it.Category() != "fake" || it.Generation() != "" {
		t.Errorf("fake-it-12 derives family %q size %q category %q generation %q", it.Family(), it.Size(), it.Category(), it.Generation())
	}
	if got := Labels(it, it.Offerings[0]); got["karpenter.k8s.aws/instance-family"] != "fake-it" || got["kubernetes.io/arch"] != "amd64" {
		t.Errorf("labels %v", got)
	}
}

func TestReferenceCatalogLoads(t *testing.T) {
	c, err := Load(referenceFile(t, "us-east-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.InstanceTypes) != 1345 {
		t.Fatalf("%d types, want 1345", len(c.InstanceTypes))
	}
	if c.Source == nil || c.Source.Repo != "aws/karpenter-provider-aws" {
		t.Fatalf("source = %+v", c.Source)
	}
	// Every embedded type's facts and prices come from the reference unchanged.
	for i := range Embedded().InstanceTypes {
		e := &Embedded().InstanceTypes[i]
		r, ok := c.Lookup(e.Name)
		if !ok {
			t.Errorf("%s not in the reference catalog", e.Name)
			continue
		}
		if e.Arch != r.Arch || e.VCPU != r.VCPU || e.MemoryMiB != r.MemoryMiB || e.MaxPods != r.MaxPods || !reflect.DeepEqual(e.GPU, r.GPU) {
			t.Errorf("%s facts differ from the reference", e.Name)
		}
		for j := range e.Offerings {
			eo, ro := e.Offerings[j], r.Offerings[j]
			ro.Estimate = eo.Estimate
			if eo != ro {
				t.Errorf("%s offering %d = %+v, reference %+v", e.Name, j, eo, r.Offerings[j])
			}
		}
	}
}

func BenchmarkDecodeEmbedded(b *testing.B) {
	data := EmbeddedJSON()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// Prices that JSON cannot carry (NaN, infinities) can still reach New from code.
func TestNewRefusesPricesThatAreNotFinite(t *testing.T) {
	for _, p := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := New("r", []InstanceType{{Name: "a.large", Arch: ArchAMD64, VCPU: 2, MemoryMiB: 4096, MaxPods: 29,
			Offerings: []Offering{{Zone: "z", CapacityType: "on-demand", PricePerHour: p, Available: true}}}})
		if err == nil || !strings.Contains(err.Error(), "offerings[0].pricePerHour: must be a finite number") {
			t.Errorf("price %v: error %v", p, err)
		}
	}
}

// Price answers an offering's price, and nothing for an unknown type, an offering
// the type does not have, or a nil catalog.
func TestPrice(t *testing.T) {
	c := Embedded()
	it := c.InstanceTypes[0]
	o := it.Offerings[0]
	if p, ok := c.Price(it.Name, o.Zone, o.CapacityType); !ok || p != o.PricePerHour {
		t.Errorf("Price(%s, %s, %s) = %v, %v; want %v", it.Name, o.Zone, o.CapacityType, p, ok, o.PricePerHour)
	}
	for _, q := range [][3]string{{"no.such", o.Zone, o.CapacityType}, {it.Name, "mars-1a", o.CapacityType}, {it.Name, o.Zone, "barter"}} {
		if p, ok := c.Price(q[0], q[1], q[2]); ok || p != 0 {
			t.Errorf("Price(%v) = %v, %v", q, p, ok)
		}
	}
	var none *Catalog
	if _, ok := none.Price(it.Name, o.Zone, o.CapacityType); ok {
		t.Error("a nil catalog priced an offering")
	}
}
