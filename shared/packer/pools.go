package packer

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// cand is one way to launch a node of a pool: an instance type in a zone with a
// capacity type. Candidates of a (pool, zone) are sorted cheapest first.
type cand struct {
	it     *catalog.InstanceType
	ct     string
	price  float64
	alloc  vec               // node allocatable
	avail  vec               // allocatable less the DaemonSets that land on it
	cap    vec               // capacity, what pool limits count
	base   map[string]string // the type's and pool's labels, shared by its offerings
	labels map[string]string // base plus the offering's labels, built on first use
	offer  catalog.Offering
	// allocText is alloc rendered for the plan, filled on first use.
	allocText map[string]string
}

// poolInfo is a NodePool prepared for one solve.
type poolInfo struct {
	idx    int
	np     *karpenter.NodePool
	nc     *karpenter.EC2NodeClass
	name   string
	weight int32
	taints []corev1.Taint
	labels map[string]string
	// custom are requirements on keys instance types do not label (team=a): they
	// are satisfied by labelling the node, not by choosing a type.
	custom   []karpenter.NodeSelectorRequirementWithMinValues
	minVals  []karpenter.NodeSelectorRequirementWithMinValues
	cands    [][]cand // per zone
	maxAvail []vec    // per zone
	limit    vec
	limited  [maxDims]bool
	maxNodes int64 // -1 when unlimited
	used     vec   // capacity of the pool's existing and planned nodes
	nodes    int64
	unusable string
	over     catalog.Overhead
}

// wellKnownKey reports keys whose values come from the instance type or offering;
// any other key in a pool requirement is a custom label the node is given.
func wellKnownKey(k string) bool {
	switch k {
	case corev1.LabelInstanceTypeStable, corev1.LabelArchStable, corev1.LabelOSStable,
		corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelHostname,
		karpenter.CapacityTypeLabelKey, karpenter.NodePoolLabelKey, "karpenter.sh/provisioner-name",
		corev1.LabelWindowsBuild:
		return true
	}
	return strings.HasPrefix(k, "karpenter.k8s.aws/")
}

func (s *solver) buildPools() {
	classes := map[string]*karpenter.EC2NodeClass{}
	for _, nc := range s.snap.NodeClasses {
		classes[nc.Name] = nc
	}
	for _, np := range s.snap.NodePools {
		p := &poolInfo{np: np, name: np.Name, maxNodes: -1, labels: map[string]string{}}
		if np.Spec.Weight != nil {
			p.weight = *np.Spec.Weight
		}
		p.taints = np.Spec.Template.Spec.Taints
		for _, t := range p.taints {
			if t.Effect == corev1.TaintEffectPreferNoSchedule {
				s.preferNoSchedule = true
			}
		}
		for k, v := range np.Spec.Template.ObjectMeta.Labels {
			p.labels[k] = v
		}
		p.labels[karpenter.NodePoolLabelKey] = np.Name
		ref := np.Spec.Template.Spec.NodeClassRef
		switch {
		case ref == nil || ref.Name == "":
			p.unusable = "has no nodeClassRef"
		case classes[ref.Name] == nil:
			p.unusable = fmt.Sprintf("references EC2NodeClass %q, which does not exist", ref.Name)
		default:
			p.nc = classes[ref.Name]
			p.labels[karpenter.NodeClassLabelKey] = ref.Name
		}
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.MinValues != nil {
				p.minVals = append(p.minVals, r)
			}
			if wellKnownKey(r.Key) {
				continue
			}
			p.custom = append(p.custom, r)
			if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				if _, set := p.labels[r.Key]; !set {
					p.labels[r.Key] = r.Values[0]
				}
			}
		}
		for n, q := range np.Spec.Limits {
			if n == karpenter.ResourceLimitsNodes {
				p.maxNodes = q.Value()
				continue
			}
			if i, ok := s.dims.index[n]; ok {
				p.limit[i] = quantityValue(n, q)
				p.limited[i] = true
			}
		}
		s.pools = append(s.pools, p)
	}
	// Higher weight first; the name breaks ties so the order is deterministic.
	sort.SliceStable(s.pools, func(i, j int) bool {
		if s.pools[i].weight != s.pools[j].weight {
			return s.pools[i].weight > s.pools[j].weight
		}
		return s.pools[i].name < s.pools[j].name
	})
	for i, p := range s.pools {
		p.idx = i
		if p.unusable == "" {
			s.buildCandidates(p)
		}
	}
}

// dsInfo is a DaemonSet prepared for matching.
type dsInfo struct {
	ds    *appsv1.DaemonSet
	aff   nodeaffinity.RequiredNodeAffinity
	tol   []corev1.Toleration
	req   vec
	owner string
}

func (s *solver) buildDaemonSets() {
	for _, ds := range s.snap.DaemonSets {
		pod := &corev1.Pod{Spec: ds.Spec.Template.Spec}
		d := &dsInfo{ds: ds, aff: nodeaffinity.GetRequiredNodeAffinity(pod), tol: ds.Spec.Template.Spec.Tolerations,
			req: s.dims.vec(PodRequests(pod)), owner: ds.Namespace + "/" + ds.Name}
		d.req[dimPods]++
		s.daemonsets = append(s.daemonsets, d)
	}
}

// dsLands reports whether the DaemonSet would run a pod on a node with these labels and taints.
func (s *solver) dsLands(d *dsInfo, labels map[string]string, taints []corev1.Taint) bool {
	s.probe.Labels = labels
	if ok, err := d.aff.Match(s.probe); err != nil || !ok {
		return false
	}
	return tolerated(d.tol, taints, false)
}

// discard receives the toleration matcher's debug logging, which Joiner does not want.
var discard = logr.Discard()

// tolerated reports whether tolerations cover every NoSchedule/NoExecute taint
// (and PreferNoSchedule ones when strict).
func tolerated(tols []corev1.Toleration, taints []corev1.Taint, strict bool) bool {
	_, bad := untolerated(tols, taints, strict)
	return !bad
}

func untolerated(tols []corev1.Toleration, taints []corev1.Taint, strict bool) (corev1.Taint, bool) {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !strict {
			continue
		}
		ok := false
		for j := range tols {
			if tols[j].ToleratesTaint(discard, t, true) {
				ok = true
				break
			}
		}
		if !ok {
			return *t, true
		}
	}
	return corev1.Taint{}, false
}

func (s *solver) buildCandidates(p *poolInfo) {
	over := catalog.OverheadFor(p.nc)
	p.over = over
	p.cands = make([][]cand, len(s.zones))
	p.maxAvail = make([]vec, len(s.zones))
	reqs := p.np.Spec.Template.Spec.Requirements
	types := s.snap.Catalog.InstanceTypes
	for ti := range types {
		it := &types[ti]
		base := s.typeLabels(ti, p)
		// Requirements on the type's own labels are checked once per type; the
		// zone, region and capacity type once per offering.
		match := true
		for _, r := range reqs {
			if !wellKnownKey(r.Key) || offeringKey(r.Key) {
				continue
			}
			if !r.MatchesLabels(base) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		var alloc, capv vec
		computed := false
		for _, o := range it.Offerings {
			if !o.Available {
				continue
			}
			z, ok := s.zoneIdx[o.Zone]
			if !ok {
				continue
			}
			get := func(k string) (string, bool) {
				switch k {
				case corev1.LabelTopologyZone:
					return o.Zone, true
				case karpenter.CapacityTypeLabelKey:
					return o.CapacityType, true
				case corev1.LabelTopologyRegion:
					r := catalog.RegionOfZone(o.Zone)
					return r, r != ""
				}
				v, ok := base[k]
				return v, ok
			}
			for _, r := range reqs {
				if offeringKey(r.Key) {
					v, ok := get(r.Key)
					if !r.Matches(v, ok) {
						match = false
						break
					}
				}
			}
			if !match {
				match = true
				continue
			}
			if !computed {
				alloc = s.dims.vec(catalog.Allocatable(it, over))
				capv = s.dims.vec(catalog.CapacityFor(it, over))
				computed = true
			}
			c := cand{it: it, ct: o.CapacityType, price: o.PricePerHour, alloc: alloc, avail: alloc, cap: capv, base: base, offer: o}
			for _, d := range s.daemonsets {
				if s.dsLands(d, c.fullLabels(), p.taints) {
					c.avail = c.avail.sub(d.req)
				}
			}
			if !(vec{}).fits(c.avail) {
				continue // the DaemonSets alone overflow it
			}
			p.cands[z] = append(p.cands[z], c)
		}
	}
	any := false
	for z := range p.cands {
		cs := sortCands(p.cands[z])
		p.cands[z] = cs
		for i := range cs {
			p.maxAvail[z] = p.maxAvail[z].maxWith(cs[i].avail)
		}
		any = any || len(cs) > 0
	}
	if !any {
		p.unusable = "no available instance type offering satisfies its requirements"
	}
}

// sortCands orders a zone's candidates cheapest first, spot before on-demand at
// the same price, then by type name: a total order, since a type has one offering
// per capacity type in a zone. It sorts indexes and copies once: cand is large,
// and swapping it in place was most of a solve's time on a small cluster.
func sortCands(cs []cand) []cand {
	order := make([]int, len(cs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := &cs[i], &cs[j]
		switch {
		case a.price != b.price:
			return cmp.Compare(a.price, b.price)
		case a.ct != b.ct:
			if a.ct == karpenter.CapacityTypeSpot {
				return -1
			}
			return 1
		}
		return strings.Compare(a.it.Name, b.it.Name)
	})
	out := make([]cand, len(cs))
	for i, k := range order {
		out[i] = cs[k]
	}
	return out
}

// offeringKey reports the label keys an offering, not the instance type, decides.
func offeringKey(k string) bool {
	return k == corev1.LabelTopologyZone || k == karpenter.CapacityTypeLabelKey || k == corev1.LabelTopologyRegion
}

// fullLabels returns every label a node of this candidate carries.
func (c *cand) fullLabels() map[string]string {
	if c.labels == nil {
		c.labels = catalog.WithOffering(c.base, c.offer)
	}
	return c.labels
}

// typeLabels returns the labels of type ti in pool p: the type's own labels,
// computed once per solve, and the pool's.
func (s *solver) typeLabels(ti int, p *poolInfo) map[string]string {
	if s.instLabels == nil {
		s.instLabels = make([]map[string]string, len(s.snap.Catalog.InstanceTypes))
	}
	il := s.instLabels[ti]
	if il == nil {
		il = catalog.InstanceLabels(&s.snap.Catalog.InstanceTypes[ti])
		s.instLabels[ti] = il
	}
	l := make(map[string]string, len(il)+len(p.labels))
	for k, v := range il {
		l[k] = v
	}
	for k, v := range p.labels {
		l[k] = v
	}
	return l
}
