// Package catalog is Joiner's instance-type catalog: facts per EC2 instance type
// (vCPU, memory, architecture, GPUs, max pods) and its offerings (zone, capacity
// type, price, availability). An embedded catalog works offline; `--catalog FILE`
// replaces it with a file in the same JSON format.
//
// # Spot prices are estimates
//
// The embedded catalog's on-demand prices are real us-east-1 list prices, but its
// spot prices are synthetic stand-ins (EC2 publishes spot prices only through its
// live API). Every such offering carries Estimate = true and the catalog's Notes
// say so. Callers that know live prices overlay them with [Catalog.WithPrices],
// which clears the flag on every offering it prices.
//
// # Sharing
//
// A *Catalog returned by [Embedded], [Load] or [Decode] is shared read-only data:
// the engine and the handlers read it from many goroutines. Never modify one in
// place; derive a new catalog with [Catalog.Clone], [Catalog.Filter] or
// [Catalog.WithPrices] instead.
package catalog

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	jsoniter "github.com/json-iterator/go"

	"github.com/joiner-autoscaler/joiner/shared/jsonerr"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/quantity"
)

// Catalog is the JSON document `joiner catalog -o json` writes and `--catalog` reads.
type Catalog struct {
	Region string `json:"region"`
	Notes  string `json:"notes,omitempty"`
	// Source records where the facts and prices were taken from.
	Source        *Source        `json:"source,omitempty"`
	InstanceTypes []InstanceType `json:"instanceTypes"`

	// index maps a name to its position in InstanceTypes. Set only by the
	// constructors (Decode, New, Clone, ...); Lookup verifies every hit, so a
	// catalog whose slice was rearranged afterwards still answers correctly.
	index map[string]int
}

// Source names the upstream data a catalog was derived from.
type Source struct {
	Repo    string   `json:"repo,omitempty"`
	Version string   `json:"version,omitempty"`
	Files   []string `json:"files,omitempty"`
	License string   `json:"license,omitempty"`
}

// InstanceType holds the facts of one EC2 instance type. Family, category,
// generation and size are not stored: they derive from Name.
type InstanceType struct {
	Name      string `json:"name"`
	Arch      string `json:"arch"` // amd64 or arm64
	VCPU      int    `json:"vcpu"`
	MemoryMiB int64  `json:"memoryMiB"`
	// MaxPods follows the ENI formula (ENIs × (IPv4 per ENI − 1) + 2), as Karpenter computes it.
	MaxPods int `json:"maxPods"`
	// GPU is nil when the type has none.
	GPU *GPU `json:"gpu,omitempty"`
	// Accelerator is a non-GPU accelerator such as AWS Inferentia (inf2), nil when absent.
	Accelerator *Accelerator `json:"accelerator,omitempty"`
	// NetworkGbps is the baseline network bandwidth, when known.
	NetworkGbps float64    `json:"networkGbps,omitempty"`
	Offerings   []Offering `json:"offerings"`
}

// GPU describes the GPUs of an instance type.
type GPU struct {
	Count        int    `json:"count"`
	Name         string `json:"name"`
	Manufacturer string `json:"manufacturer"`
	MemoryMiB    int64  `json:"memoryMiB"`
}

// Accelerator describes non-GPU accelerators (e.g. Inferentia: resource aws.amazon.com/neuron).
type Accelerator struct {
	Count        int    `json:"count"`
	Name         string `json:"name"`
	Manufacturer string `json:"manufacturer"`
	MemoryMiB    int64  `json:"memoryMiB,omitempty"`
	// CoresPerDevice is the number of NeuronCores on each device; with Count it
	// gives the aws.amazon.com/neuroncore capacity. 0 when unknown.
	CoresPerDevice int `json:"coresPerDevice,omitempty"`
}

// Offering is one (zone, capacity type) in which the type can be bought.
type Offering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"` // spot or on-demand
	PricePerHour float64 `json:"pricePerHour"`
	Available    bool    `json:"available"`
	// Estimate marks a price that is not a live market price (the embedded spot prices).
	Estimate bool `json:"estimate,omitempty"`
}

// Architectures a catalog may name (Kubernetes' spelling, as in kubernetes.io/arch).
const (
	ArchAMD64 = "amd64"
	ArchARM64 = "arm64"
)

//go:generate go run ./internal/gen -src ../../../shared/catalog/us-east-1.json -o data/catalog.json

// The binaries embed data/catalog.json gzipped, as the generator writes it next to
// the JSON: 12 KB instead of 227 KB of a Lambda bootstrap's 20 MB budget.
//
//go:embed data/catalog.json.gz
var embeddedGzip []byte

// embeddedJSON is data/catalog.json, decompressed on first use.
var embeddedJSON = sync.OnceValue(func() []byte {
	r, err := gzip.NewReader(bytes.NewReader(embeddedGzip))
	if err == nil {
		var data []byte
		if data, err = io.ReadAll(r); err == nil {
			return data
		}
	}
	// The file is generated and tested; a failure here is a build defect.
	panic("catalog: embedded catalog is not gzip: " + err.Error())
})

var embedded = sync.OnceValue(func() *Catalog {
	c, err := Decode(embeddedJSON())
	if err != nil {
		// The file is generated and tested; a failure here is a build defect.
		panic("catalog: embedded catalog is invalid: " + err.Error())
	}
	return c
})

// Embedded returns the catalog compiled into the binary, decoded once and cached.
// The result is shared by every caller: treat it as read-only (see the package
// documentation) and use Clone for a private copy.
func Embedded() *Catalog { return embedded() }

// EmbeddedJSON returns the embedded catalog's JSON exactly as compiled in.
func EmbeddedJSON() []byte { return slices.Clone(embeddedJSON()) }

// LoadOrEmbedded is Load, or the embedded catalog when path is empty (what a
// --catalog flag left unset means).
func LoadOrEmbedded(path string) (*Catalog, error) {
	if path == "" {
		return Embedded(), nil
	}
	return Load(path)
}

// Load reads and validates a catalog file. Errors name the file and, for bad
// entries, the field path and instance type (for example
// `catalog.json: instanceTypes[3] (m5.large): vcpu: must be positive, got 0`).
func Load(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Decode(data)
	if err != nil {
		return nil, prefixLines(path+": ", err)
	}
	return c, nil
}

// Read decodes and validates a catalog from r.
func Read(r io.Reader) (*Catalog, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return Decode(data)
}

// Decode parses and validates catalog JSON. Unknown fields are rejected so a
// wrong key ("memoryGiB") is reported instead of silently reading as zero; key
// case is not significant, as everywhere in encoding/json.
func Decode(data []byte) (*Catalog, error) {
	// Fast path: one strict pass. Only a document that fails it is decoded again
	// element by element, to say which instance type is wrong.
	var fast struct {
		Region        *string        `json:"region"`
		Notes         string         `json:"notes"`
		Source        *Source        `json:"source"`
		InstanceTypes []InstanceType `json:"instanceTypes"`
	}
	if fastJSON.Unmarshal(data, &fast) == nil && fast.Region != nil && fast.InstanceTypes != nil {
		c := &Catalog{Region: *fast.Region, Notes: fast.Notes, Source: fast.Source, InstanceTypes: fast.InstanceTypes}
		if err := c.Validate(); err != nil {
			return nil, err
		}
		c.buildIndex()
		return c, nil
	}
	return decodeSlow(data)
}

// fastJSON reads the fast path: json-iterator with encoding/json's rules
// (case-insensitive keys, unknown fields rejected, nothing after the document),
// three times faster on the 400-type benchmark catalog. Anything it refuses goes through
// decodeSlow, whose encoding/json errors say where the problem is.
var fastJSON = jsoniter.Config{DisallowUnknownFields: true, ValidateJsonRawMessage: true}.Froze()

func decodeSlow(data []byte) (*Catalog, error) {
	var doc struct {
		Region        *string           `json:"region"`
		Notes         string            `json:"notes"`
		Source        *Source           `json:"source"`
		InstanceTypes []json.RawMessage `json:"instanceTypes"`
	}
	if err := strictUnmarshal(data, &doc); err != nil {
		return nil, jsonerr.Describe(data, err)
	}
	c := &Catalog{Notes: doc.Notes, Source: doc.Source}
	var problems []error
	if doc.Region == nil || *doc.Region == "" {
		problems = append(problems, errors.New("region: required"))
	} else {
		c.Region = *doc.Region
	}
	if doc.InstanceTypes == nil {
		problems = append(problems, errors.New("instanceTypes: required"))
	}
	c.InstanceTypes = make([]InstanceType, len(doc.InstanceTypes))
	for i, raw := range doc.InstanceTypes {
		if err := strictUnmarshal(raw, &c.InstanceTypes[i]); err != nil {
			var named struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(raw, &named)
			problems = append(problems, fmt.Errorf("%s: %w", itemPath(i, named.Name), jsonerr.Describe(raw, err)))
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.buildIndex()
	return c, nil
}

// New builds a validated catalog from instance types (copied, so the caller keeps
// ownership of its slice).
func New(region string, types []InstanceType) (*Catalog, error) {
	c := &Catalog{Region: region, InstanceTypes: cloneTypes(types)}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.buildIndex()
	return c, nil
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON document")
	}
	return nil
}

func itemPath(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("instanceTypes[%d]", i)
	}
	return fmt.Sprintf("instanceTypes[%d] (%s)", i, name)
}

func prefixLines(prefix string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return errors.New(strings.Join(lines, "\n"))
}

// Validate reports every problem in the catalog, one per line, each naming its
// field path. It checks what the engine relies on: known architecture and
// capacity types, positive vCPU/memory/pods, prices PriceProblem accepts, counts
// within the engine's int64 arithmetic, unique instance-type names and unique
// (zone, capacity type) offerings.
func (c *Catalog) Validate() error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if c.Region == "" {
		add("region: required")
	}
	if len(c.InstanceTypes) == 0 {
		add("instanceTypes: at least one instance type is required")
	}
	seen := make(map[string]int, len(c.InstanceTypes))
	for i := range c.InstanceTypes {
		it := &c.InstanceTypes[i]
		// Paths are formatted only for problems: Validate runs on every Load of
		// catalogs with thousands of offerings.
		p := lazyPath(func() string { return itemPath(i, it.Name) })
		switch {
		case it.Name == "":
			add("%s: name: required", p)
		case strings.TrimSpace(it.Name) != it.Name || strings.ContainsAny(it.Name, " \t\n,"):
			add("%s: name: must not contain spaces or commas", p)
		default:
			if j, dup := seen[it.Name]; dup {
				add("%s: name: duplicates instanceTypes[%d]", p, j)
			} else {
				seen[it.Name] = i
			}
		}
		if it.Arch != ArchAMD64 && it.Arch != ArchARM64 {
			add("%s: arch: unknown architecture %q (want %s or %s)", p, it.Arch, ArchAMD64, ArchARM64)
		}
		if it.VCPU <= 0 {
			add("%s: vcpu: must be positive, got %d", p, it.VCPU)
		}
		if it.MemoryMiB <= 0 {
			add("%s: memoryMiB: must be positive, got %d", p, it.MemoryMiB)
		}
		if it.MaxPods <= 0 {
			add("%s: maxPods: must be positive, got %d", p, it.MaxPods)
		}
		// The engine counts millicores and bytes in int64 (see shared/quantity).
		atMost := func(field string, v, limit int64) {
			if v > limit {
				add("%s: %s: %d is out of range: at most %d", p, field, v, limit)
			}
		}
		atMost("vcpu", int64(it.VCPU), quantity.Max/1000)
		atMost("memoryMiB", it.MemoryMiB, quantity.Max>>20)
		atMost("maxPods", int64(it.MaxPods), quantity.Max)
		if g := it.GPU; g != nil {
			atMost("gpu.count", int64(g.Count), quantity.Max)
			atMost("gpu.memoryMiB", g.MemoryMiB, quantity.Max>>20)
		}
		if a := it.Accelerator; a != nil {
			atMost("accelerator.count", int64(a.Count), quantity.Max)
			atMost("accelerator.coresPerDevice", int64(a.CoresPerDevice), quantity.Max/max(int64(a.Count), 1))
			atMost("accelerator.memoryMiB", a.MemoryMiB, quantity.Max>>20)
		}
		if g := it.GPU; g != nil {
			if g.Count < 0 {
				add("%s: gpu.count: must not be negative, got %d", p, g.Count)
			}
			if g.Name == "" {
				add("%s: gpu.name: required", p)
			}
			if g.Manufacturer == "" {
				add("%s: gpu.manufacturer: required", p)
			}
			if g.MemoryMiB < 0 {
				add("%s: gpu.memoryMiB: must not be negative, got %d", p, g.MemoryMiB)
			}
		}
		if a := it.Accelerator; a != nil {
			if a.Count <= 0 {
				add("%s: accelerator.count: must be positive, got %d", p, a.Count)
			}
			if a.Name == "" {
				add("%s: accelerator.name: required", p)
			}
			if a.Manufacturer == "" {
				add("%s: accelerator.manufacturer: required", p)
			}
			if a.MemoryMiB < 0 {
				add("%s: accelerator.memoryMiB: must not be negative, got %d", p, a.MemoryMiB)
			}
			if a.CoresPerDevice < 0 {
				add("%s: accelerator.coresPerDevice: must not be negative, got %d", p, a.CoresPerDevice)
			}
		}
		if it.NetworkGbps < 0 || math.IsNaN(it.NetworkGbps) || math.IsInf(it.NetworkGbps, 0) {
			add("%s: networkGbps: must be a non-negative number, got %v", p, it.NetworkGbps)
		}
		if len(it.Offerings) == 0 {
			add("%s: offerings: at least one offering is required", p)
		}
		type key struct{ zone, ct string }
		offered := make(map[key]int, len(it.Offerings))
		for j := range it.Offerings {
			o := &it.Offerings[j]
			op := lazyPath(func() string { return fmt.Sprintf("%s: offerings[%d]", p, j) })
			if o.Zone == "" {
				add("%s.zone: required", op)
			}
			switch o.CapacityType {
			case karpenter.CapacityTypeOnDemand, karpenter.CapacityTypeSpot, karpenter.CapacityTypeReserved:
			default:
				add("%s.capacityType: unknown capacity type %q (want %s, %s or %s)", op, o.CapacityType,
					karpenter.CapacityTypeOnDemand, karpenter.CapacityTypeSpot, karpenter.CapacityTypeReserved)
			}
			if msg := PriceProblem(o.PricePerHour); msg != "" {
				add("%s.pricePerHour: %s", op, msg)
			}
			k := key{o.Zone, o.CapacityType}
			if prev, dup := offered[k]; dup && o.Zone != "" {
				add("%s: duplicates offerings[%d] (%s %s)", op, prev, o.Zone, o.CapacityType)
			} else {
				offered[k] = j
			}
		}
	}
	return errors.Join(problems...)
}

// MaxPricePerHour bounds an offering's price. The most expensive EC2 instance
// lists at about $400 an hour; a price far past that is a typo or a unit mistake,
// and one past float64's range would make every cost comparison meaningless.
const MaxPricePerHour = 10000

// PriceProblem says what is wrong with an offering's price in USD per hour, or ""
// when it is usable. Zero is refused with the rest: it is what a missing
// pricePerHour reads as, and a free offering would win every comparison.
func PriceProblem(p float64) string {
	switch {
	case math.IsNaN(p) || math.IsInf(p, 0):
		return fmt.Sprintf("must be a finite number, got %v", p)
	case p <= 0:
		return fmt.Sprintf("required: a positive price in USD per hour, such as 0.096 (got %v; a missing price reads as 0)", p)
	case p > MaxPricePerHour:
		return fmt.Sprintf("%v is out of range: at most %d USD per hour", p, MaxPricePerHour)
	}
	return ""
}

// lazyPath formats a field path only when printed (via %s).
type lazyPath func() string

func (f lazyPath) String() string { return f() }

func (c *Catalog) buildIndex() {
	c.index = make(map[string]int, len(c.InstanceTypes))
	for i := range c.InstanceTypes {
		c.index[c.InstanceTypes[i].Name] = i
	}
}

// Lookup finds an instance type by name. The pointer refers into the catalog:
// read it, do not modify it.
func (c *Catalog) Lookup(name string) (*InstanceType, bool) {
	if c == nil {
		return nil, false
	}
	if i, ok := c.index[name]; ok && i < len(c.InstanceTypes) && c.InstanceTypes[i].Name == name {
		return &c.InstanceTypes[i], true
	}
	// Catalogs built as literals have no index; a linear scan keeps them correct.
	for i := range c.InstanceTypes {
		if c.InstanceTypes[i].Name == name {
			return &c.InstanceTypes[i], true
		}
	}
	return nil, false
}

// Price is the hourly price of an offering: ok is false when the catalog has no
// such type or offering, or no price for it.
func (c *Catalog) Price(instanceType, zone, capacityType string) (price float64, ok bool) {
	it, found := c.Lookup(instanceType)
	if !found {
		return 0, false
	}
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == capacityType && o.PricePerHour > 0 {
			return o.PricePerHour, true
		}
	}
	return 0, false
}

// Zones returns every zone any offering names, sorted.
func (c *Catalog) Zones() []string {
	set := map[string]struct{}{}
	for i := range c.InstanceTypes {
		for _, o := range c.InstanceTypes[i].Offerings {
			set[o.Zone] = struct{}{}
		}
	}
	zones := make([]string, 0, len(set))
	for z := range set {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	return zones
}

// HasEstimates reports whether any offering's price is an estimate rather than a
// live or list price.
func (c *Catalog) HasEstimates() bool {
	for i := range c.InstanceTypes {
		for _, o := range c.InstanceTypes[i].Offerings {
			if o.Estimate {
				return true
			}
		}
	}
	return false
}

// Clone returns a deep copy that the caller may modify freely.
func (c *Catalog) Clone() *Catalog {
	out := &Catalog{Region: c.Region, Notes: c.Notes, InstanceTypes: cloneTypes(c.InstanceTypes)}
	if c.Source != nil {
		s := *c.Source
		s.Files = slices.Clone(s.Files)
		out.Source = &s
	}
	out.buildIndex()
	return out
}

// Filter returns a deep copy holding only the instance types keep accepts, in
// their original order.
func (c *Catalog) Filter(keep func(*InstanceType) bool) *Catalog {
	out := c.Clone()
	out.InstanceTypes = slices.DeleteFunc(out.InstanceTypes, func(it InstanceType) bool { return !keep(&it) })
	out.buildIndex()
	return out
}

// PriceFunc returns the live price of an offering, or false when it has none.
type PriceFunc func(instanceType, zone, capacityType string) (float64, bool)

// WithPrices returns a copy of the catalog in which every offering that price
// knows gets that price and loses its Estimate flag; the others keep theirs.
// Prices PriceProblem refuses are ignored, so a bad feed cannot make the catalog
// invalid.
func (c *Catalog) WithPrices(price PriceFunc) *Catalog {
	out := c.Clone()
	for i := range out.InstanceTypes {
		it := &out.InstanceTypes[i]
		for j := range it.Offerings {
			o := &it.Offerings[j]
			if p, ok := price(it.Name, o.Zone, o.CapacityType); ok && PriceProblem(p) == "" {
				o.PricePerHour = p
				o.Estimate = false
			}
		}
	}
	return out
}

func cloneTypes(in []InstanceType) []InstanceType {
	out := make([]InstanceType, len(in))
	for i := range in {
		out[i] = in[i]
		if in[i].GPU != nil {
			g := *in[i].GPU
			out[i].GPU = &g
		}
		if in[i].Accelerator != nil {
			a := *in[i].Accelerator
			out[i].Accelerator = &a
		}
		out[i].Offerings = slices.Clone(in[i].Offerings)
	}
	return out
}

// WriteJSON writes the catalog in the layout of the reference files: the
// document's own fields one per line, then one instance type per line, so that
// diffs of catalog files stay readable. The output is plain JSON that Load reads.
func (c *Catalog) WriteJSON(w io.Writer) error {
	var b bytes.Buffer
	field := func(name string, v any, comma bool) error {
		raw, err := marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%q: %s", name, raw)
		if comma {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		return nil
	}
	b.WriteString("{\n")
	if err := field("region", c.Region, true); err != nil {
		return err
	}
	if c.Notes != "" {
		if err := field("notes", c.Notes, true); err != nil {
			return err
		}
	}
	if c.Source != nil {
		if err := field("source", c.Source, true); err != nil {
			return err
		}
	}
	b.WriteString("\"instanceTypes\": [\n")
	for i := range c.InstanceTypes {
		raw, err := marshal(&c.InstanceTypes[i])
		if err != nil {
			return fmt.Errorf("%s: %w", itemPath(i, c.InstanceTypes[i].Name), err)
		}
		b.Write(raw)
		if i < len(c.InstanceTypes)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// marshal is json.Marshal without HTML escaping: catalogs are data files, and
// "&" in a note should stay readable.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
