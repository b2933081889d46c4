package packer

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Prepared holds what a solve derives from the catalog alone: every type's
// well-known labels, its capacity and allocatable per node configuration, and
// each zone's offerings in candidate order. Building it costs about as much as
// one solve's candidate setup on a large catalog, so callers that solve the same
// catalog many times (the consolidator's simulations) build it once with
// Prepare and pass it in Options.Prepared.
//
// Offering availability is not part of it: solves read Available from the
// catalog each time, so marking offerings unavailable between solves is safe.
// Prices may change too (the cached order is checked and re-sorted when they
// no longer agree). Adding or removing types or offerings, or changing a type's
// facts (vCPU, memory, ...), is noticed: a solve then ignores the Prepared value
// and derives everything afresh.
//
// A Prepared value is safe for concurrent solves.
type Prepared struct {
	cat *catalog.Catalog
	// facts are the types as prepared, without offerings: labels and resources
	// derive from them, so a type changed in place no longer fits.
	facts []catalog.InstanceType
	// offerKeys are the offerings' zones and capacity types, all types' in
	// order: zoneOrder buckets by zone, and node labels hold both.
	offerKeys []offerKey
	// offerStart is each type's first index into offerKeys.
	offerStart []int32
	// labels are catalog.InstanceLabels per type; solves share them read-only.
	labels []map[string]string
	// zoneOrder lists, per zone, every offering in the order sortCands gives.
	zoneOrder map[string][]offerRef

	mu sync.Mutex
	// res holds capacity and allocatable per node configuration (an
	// EC2NodeClass's overhead, keyed by its JSON) and type, filled on first use.
	res map[string][]*typeRes
	// nodeLabels holds every label of a node per pool labelling (keyed by
	// poolLabelKey) and offering (indexed like offerKeys), filled on first use:
	// DaemonSet and node-selector matching need them for every candidate.
	nodeLabels map[string][]map[string]string
}

type offerKey struct{ zone, capacityType string }

// offerRef names an offering by type and offering index.
type offerRef struct{ ti, oi int32 }

// typeRes is one type's allocatable and capacity under one overhead.
type typeRes struct {
	alloc, capacity corev1.ResourceList
	// allocQ and capQ are the lists as (name, value) pairs, the values already
	// in vec units, so a solve maps them onto its dimensions without parsing.
	allocQ, capQ []namedValue
}

type namedValue struct {
	name  corev1.ResourceName
	value int64
}

// Prepare derives the catalog-only facts of every type of cat. The catalog must
// not change shape afterwards (see Prepared).
func Prepare(cat *catalog.Catalog) *Prepared { return PrepareFrom(nil, cat) }

// PrepareFrom is Prepare for a catalog that replaces prev's (a warm Lambda
// container reads a fresh catalog per invocation, mostly of the same types): it
// takes labels, capacity and allocatable from prev for every type whose facts
// (everything but the offerings) are unchanged and derives the rest. prev may
// be nil; it is not modified and stays valid for its own catalog.
func PrepareFrom(prev *Prepared, cat *catalog.Catalog) *Prepared {
	if cat == nil {
		return nil
	}
	types := cat.InstanceTypes
	p := &Prepared{cat: cat, facts: make([]catalog.InstanceType, len(types)), labels: make([]map[string]string, len(types)),
		offerStart: make([]int32, len(types)), zoneOrder: map[string][]offerRef{}, res: map[string][]*typeRes{},
		nodeLabels: map[string][]map[string]string{}}
	var reuse func(ti int) int // index of the same type in prev, -1 when none
	if prev != nil {
		prevIdx := make(map[string]int, len(prev.facts))
		for i := range prev.facts {
			prevIdx[prev.facts[i].Name] = i
		}
		prev.mu.Lock()
		defer prev.mu.Unlock()
		reuse = func(ti int) int {
			if i, ok := prevIdx[types[ti].Name]; ok && sameFacts(&types[ti], &prev.facts[i]) {
				return i
			}
			return -1
		}
	}
	for ti := range types {
		it := &types[ti]
		p.facts[ti] = factsOf(it)
		if reuse != nil {
			if pi := reuse(ti); pi >= 0 {
				p.labels[ti] = prev.labels[pi]
				for key, rs := range prev.res {
					if rs[pi] != nil {
						if p.res[key] == nil {
							p.res[key] = make([]*typeRes, len(types))
						}
						p.res[key][ti] = rs[pi]
					}
				}
			}
		}
		if p.labels[ti] == nil {
			p.labels[ti] = catalog.InstanceLabels(it)
		}
		p.offerStart[ti] = int32(len(p.offerKeys))
		for oi := range it.Offerings {
			z := it.Offerings[oi].Zone
			p.offerKeys = append(p.offerKeys, offerKey{z, it.Offerings[oi].CapacityType})
			p.zoneOrder[z] = append(p.zoneOrder[z], offerRef{int32(ti), int32(oi)})
		}
	}
	for _, refs := range p.zoneOrder {
		slices.SortFunc(refs, func(a, b offerRef) int { return compareOffers(types, a, b) })
	}
	return p
}

// factsOf copies a type without its offerings.
func factsOf(it *catalog.InstanceType) catalog.InstanceType {
	f := *it
	f.Offerings = nil
	if it.GPU != nil {
		g := *it.GPU
		f.GPU = &g
	}
	if it.Accelerator != nil {
		a := *it.Accelerator
		f.Accelerator = &a
	}
	return f
}

// sameFacts reports whether two instance types agree on everything labels,
// capacity and allocatable derive from: all fields but the offerings.
func sameFacts(a, b *catalog.InstanceType) bool {
	if (a.GPU == nil) != (b.GPU == nil) || a.GPU != nil && *a.GPU != *b.GPU ||
		(a.Accelerator == nil) != (b.Accelerator == nil) || a.Accelerator != nil && *a.Accelerator != *b.Accelerator {
		return false
	}
	// A field added to InstanceType must be added here: it may shape labels.
	return a.Name == b.Name && a.Arch == b.Arch && a.VCPU == b.VCPU && a.MemoryMiB == b.MemoryMiB &&
		a.MaxPods == b.MaxPods && a.NetworkGbps == b.NetworkGbps
}

// compareOffers is the candidate order of two offerings (see offerOrder).
func compareOffers(types []catalog.InstanceType, a, b offerRef) int {
	oa, ob := &types[a.ti].Offerings[a.oi], &types[b.ti].Offerings[b.oi]
	return offerOrder(oa.PricePerHour, oa.CapacityType, types[a.ti].Name, ob.PricePerHour, ob.CapacityType, types[b.ti].Name)
}

// offerOrder is the order of a zone's candidates: cheapest first, spot before
// on-demand at the same price, then by type name. It is a total order, since a
// type has one offering per capacity type in a zone.
func offerOrder(priceA float64, ctA, nameA string, priceB float64, ctB, nameB string) int {
	switch {
	case priceA != priceB:
		return cmp.Compare(priceA, priceB)
	case ctA != ctB:
		if ctA == karpenter.CapacityTypeSpot {
			return -1
		}
		return 1
	}
	return strings.Compare(nameA, nameB)
}

// Fits reports whether p was prepared from cat as it is now: same value, same
// types with the same facts in the same order, offerings in the same zones with
// the same capacity types.
func (p *Prepared) Fits(cat *catalog.Catalog) bool {
	if p == nil || p.cat != cat || len(cat.InstanceTypes) != len(p.facts) {
		return false
	}
	k := 0
	for ti := range cat.InstanceTypes {
		it := &cat.InstanceTypes[ti]
		if !sameFacts(it, &p.facts[ti]) || k+len(it.Offerings) > len(p.offerKeys) {
			return false
		}
		for oi := range it.Offerings {
			if o := &it.Offerings[oi]; o.Zone != p.offerKeys[k].zone || o.CapacityType != p.offerKeys[k].capacityType {
				return false
			}
			k++
		}
	}
	return k == len(p.offerKeys)
}

// overheadKey identifies a node configuration by content, so pools whose
// EC2NodeClasses configure nodes alike share entries.
func overheadKey(o catalog.Overhead) string {
	b, err := json.Marshal(o)
	if err != nil {
		return "" // never for these plain types; "" then simply means "uncached"
	}
	return string(b)
}

// resources returns type ti's allocatable and capacity under overhead o.
func (p *Prepared) resources(ti int, key string, o catalog.Overhead) *typeRes {
	if key == "" {
		return newTypeRes(&p.facts[ti], o)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.res[key]
	if rs == nil {
		rs = make([]*typeRes, len(p.facts))
		p.res[key] = rs
	}
	if rs[ti] == nil {
		rs[ti] = newTypeRes(&p.facts[ti], o)
	}
	return rs[ti]
}

func newTypeRes(it *catalog.InstanceType, o catalog.Overhead) *typeRes {
	r := &typeRes{alloc: catalog.Allocatable(it, o), capacity: catalog.CapacityFor(it, o)}
	r.allocQ = namedValues(r.alloc)
	r.capQ = namedValues(r.capacity)
	return r
}

func namedValues(rl corev1.ResourceList) []namedValue {
	out := make([]namedValue, 0, len(rl))
	for n, q := range rl {
		out = append(out, namedValue{n, quantityValue(n, q)})
	}
	return out
}

// vecOf maps prepared values onto the solve's dimensions, as dimensions.vec does.
func (d *dimensions) vecOf(nv []namedValue) vec {
	var v vec
	for _, x := range nv {
		if i, ok := d.index[x.name]; ok {
			v[i] = x.value
		}
	}
	return v
}

// poolLabelKey identifies a pool's labels by content.
func poolLabelKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
		b.WriteString(strconv.Itoa(len(l[k])))
		b.WriteByte(':')
		b.WriteString(l[k])
	}
	return b.String()
}

// nodeLabelsOf returns every label a node of offering oi of type ti carries in
// a pool labelled poolLabels (key poolKey, which covers zoneIDs, its class's
// zone IDs): the type's, the pool's over them, and the offering's over both. Solves share the map: it must not be modified.
func (p *Prepared) nodeLabelsOf(poolKey string, poolLabels, zoneIDs map[string]string, ti, oi int) map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := p.nodeLabels[poolKey]
	if ls == nil {
		ls = make([]map[string]string, len(p.offerKeys))
		p.nodeLabels[poolKey] = ls
	}
	k := int(p.offerStart[ti]) + oi
	if ls[k] == nil {
		il := p.labels[ti]
		l := make(map[string]string, len(il)+len(poolLabels)+3)
		for k, v := range il {
			l[k] = v
		}
		for k, v := range poolLabels {
			l[k] = v
		}
		// catalog.WithOffering's additions, without its copy.
		o := p.offerKeys[k]
		for _, kv := range [...][2]string{{corev1.LabelTopologyZone, o.zone},
			{karpenter.CapacityTypeLabelKey, o.capacityType}, {corev1.LabelTopologyRegion, catalog.RegionOfZone(o.zone)},
			{karpenter.LabelTopologyZoneID, zoneIDs[o.zone]}} {
			if kv[1] != "" {
				l[kv[0]] = kv[1]
			}
		}
		ls[k] = l
	}
	return ls[k]
}
