package packer

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// cand is one way to launch a node of a pool: an instance type in a zone with a
// capacity type. Candidates of a (pool, zone) are sorted cheapest first.
type cand struct {
	it    *catalog.InstanceType
	ct    string
	price float64
	avail vec // allocatable less the DaemonSets that land on it
	cap   vec // capacity, what pool limits count
	// labels are every label of the node, from prep on first use (see
	// Prepared.nodeLabelsOf); pool, ti and oi say which.
	labels map[string]string
	prep   *Prepared
	pool   *poolInfo
	ti, oi int32
	res    *typeRes // allocatable and capacity as resource lists
	// allocText is the allocatable (res) rendered for the plan, filled on first use.
	allocText map[string]string
	// dsPorts are the host ports of the DaemonSets that land on it: a pod binding
	// one of them cannot run there.
	dsPorts []facts.HostPort
	// resv is the capacity reservation it launches into (ct reserved; labels
	// set at creation, oi -1), nil for every other offering: see reserved.go.
	resv *reservation
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
	// reqs are its requirements, deprecated keys renamed (see normalize.go).
	reqs []karpenter.NodeSelectorRequirementWithMinValues
	// custom are requirements on keys instance types do not label (team=a): they
	// are satisfied by labelling the node, not by choosing a type.
	custom  []karpenter.NodeSelectorRequirementWithMinValues
	minVals []karpenter.NodeSelectorRequirementWithMinValues
	// minValues are the minVals the engine enforces (see minvalues.go).
	minValues []*minValuesReq
	cands     [][]cand // per zone
	maxAvail  []vec    // per zone
	limit     vec
	limited   [maxDims]bool
	maxNodes  int64 // -1 when unlimited
	used      vec   // capacity of the pool's existing and planned nodes
	// reserved is the room new nodes' options may take beyond their types (see
	// newNode); limitOK counts it as used.
	reserved vec
	nodes    int64
	// byCap lists each zone's candidate indexes by capacity in the first
	// limited dimension (built on first use under a limit; see growIdx).
	byCap [][]int32
	// resvBits are, per zone, the candidates that are reservations (nil when
	// the pool has none).
	resvBits [][]uint64
	unusable string
	overKey  string // its EC2NodeClass's overhead, keyed for Prepared.res
	labelKey string // labels' key in Prepared.nodeLabels
	// zoneIDs are its class's zone IDs by zone (status.subnets): a node's
	// topology.k8s.aws/zone-id, when known.
	zoneIDs map[string]string
	// exhausted is set once its limits (or node count) admit no new node of
	// any candidate: it adds no topology domain from then on (see noteUsed).
	exhausted bool
	// candAt indexes each zone's candidates by type and capacity type (built
	// on first use; see solver.candAt).
	candAt [][]int32
	// subnetZones marks the zones of its class's resolved subnets
	// (status.subnets), nil when the status names none.
	subnetZones []bool
}

// wellKnownKey reports keys whose values come from the instance type or offering;
// any other key in a pool requirement is a custom label the node is given.
func wellKnownKey(k string) bool {
	switch k {
	case corev1.LabelInstanceTypeStable, corev1.LabelArchStable, corev1.LabelOSStable,
		corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelHostname,
		karpenter.CapacityTypeLabelKey, karpenter.NodePoolLabelKey, "karpenter.sh/provisioner-name",
		corev1.LabelWindowsBuild, karpenter.LabelTopologyZoneID:
		return true
	}
	return strings.HasPrefix(k, "karpenter.k8s.aws/")
}

func (s *solver) buildPools() {
	s.buildReservations()
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
			p.zoneIDs = p.nc.ZoneIDs()
			if len(p.nc.Status.Subnets) > 0 {
				p.subnetZones = make([]bool, len(s.zones))
				for _, sn := range p.nc.Status.Subnets {
					if z, ok := s.zoneIdx[sn.Zone]; ok {
						p.subnetZones[z] = true
					}
				}
			}
		}
		p.reqs = normalizedRequirements(np.Spec.Template.Spec.Requirements)
		if why := unsupportedRequirement(p.reqs); why != "" && p.unusable == "" {
			p.unusable = why
		}
		for _, r := range p.reqs {
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
			s.buildMinValues(p)
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
	ports []facts.HostPort // the host ports its pod binds
}

func (s *solver) buildDaemonSets() {
	for _, ds := range s.snap.DaemonSets {
		pod := &corev1.Pod{Spec: *normalizedNodeSelection(&ds.Spec.Template.Spec)}
		d := &dsInfo{ds: ds, aff: nodeaffinity.GetRequiredNodeAffinity(pod), tol: ds.Spec.Template.Spec.Tolerations,
			req: s.dims.vec(facts.PodRequests(pod)), owner: ds.Namespace + "/" + ds.Name, ports: facts.HostPorts(&ds.Spec.Template.Spec)}
		d.req[dimPods]++
		s.daemonsets = append(s.daemonsets, d)
		var terms []corev1.NodeSelectorTerm
		if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		}
		s.zonalDaemonSets = s.zonalDaemonSets || selects(pod.Spec.NodeSelector, terms, zonalKey)
		s.capacityTypeDaemonSets = s.capacityTypeDaemonSets || selects(pod.Spec.NodeSelector, terms, capacityTypeKey)
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
	p.overKey = overheadKey(over)
	p.labelKey = poolLabelKey(p.labels) + zoneIDsKey(p.zoneIDs)
	p.cands = make([][]cand, len(s.zones))
	p.maxAvail = make([]vec, len(s.zones))
	reqs := p.reqs
	types := s.snap.Catalog.InstanceTypes
	prep := s.prep
	// Requirements on the type's own labels are checked once per type (pool
	// labels override the type's, as on the node); the zone, region and capacity
	// type once per offering.
	typeOK := make([]int8, len(types)) // 0 unchecked, 1 matches, -1 does not
	typeMatches := func(ti int) bool {
		if typeOK[ti] == 0 {
			typeOK[ti] = 1
			il := prep.labels[ti]
			for _, r := range reqs {
				if !wellKnownKey(r.Key) || offeringKey(r.Key) {
					continue
				}
				v, ok := p.labels[r.Key]
				if !ok {
					v, ok = il[r.Key]
				}
				if !r.Matches(v, ok) {
					typeOK[ti] = -1
					break
				}
			}
		}
		return typeOK[ti] > 0
	}
	var res []*typeRes // per type, looked up on first use
	var vecs []*[2]vec // per type: allocatable and capacity on this solve's dimensions
	picked := make([]offerRef, 0, 64)
	for z, zone := range s.zones {
		picked = picked[:0]
		sorted := true
		for _, ref := range prep.zoneOrder[zone] {
			it := &types[ref.ti]
			o := &it.Offerings[ref.oi]
			if !o.Available || !typeMatches(int(ref.ti)) || !offeringMatches(reqs, o.Zone, o.CapacityType, nil, p.zoneIDs) {
				continue
			}
			if n := len(picked); n > 0 && compareOffers(types, picked[n-1], ref) > 0 {
				sorted = false // prices changed since Prepare: sort below
			}
			picked = append(picked, ref)
		}
		cs := make([]cand, 0, len(picked))
		// add completes c (resources, DaemonSets) and keeps it unless the
		// DaemonSets alone overflow it.
		add := func(c cand) {
			ti := int(c.ti)
			if vecs == nil {
				res = make([]*typeRes, len(types))
				vecs = make([]*[2]vec, len(types))
			}
			if vecs[ti] == nil {
				res[ti] = prep.resources(ti, p.overKey, over)
				vecs[ti] = &[2]vec{s.dims.vecOf(res[ti].allocQ), s.dims.vecOf(res[ti].capQ)}
			}
			c.avail, c.cap, c.prep, c.pool, c.res = vecs[ti][0], vecs[ti][1], prep, p, res[ti]
			for _, d := range s.daemonsets {
				if s.dsLands(d, c.fullLabels(), p.taints) {
					c.avail = c.avail.sub(d.req)
					c.dsPorts = append(c.dsPorts, d.ports...)
				}
			}
			if (vec{}).fits(c.avail) {
				cs = append(cs, c)
			}
		}
		for _, ref := range picked {
			o := &types[ref.ti].Offerings[ref.oi]
			add(cand{it: &types[ref.ti], ct: o.CapacityType, price: o.PricePerHour, ti: ref.ti, oi: ref.oi})
		}
		for _, r := range s.reservationsIn(p, zone) {
			ti, ok := s.typeIndex[r.instanceType]
			if !ok || !typeMatches(ti) || !offeringMatches(reqs, zone, karpenter.CapacityTypeReserved, r, p.zoneIDs) {
				continue
			}
			add(cand{it: &types[ti], ct: karpenter.CapacityTypeReserved, price: ReservedPrice(&types[ti], zone), ti: int32(ti), oi: -1,
				resv: r, labels: s.reservedLabels(ti, p, r)})
			sorted = false
		}
		if !sorted {
			cs = sortCands(cs)
		}
		p.cands[z] = cs
		p.markReserved(z)
	}
	any := false
	for z, cs := range p.cands {
		for i := range cs {
			p.maxAvail[z] = p.maxAvail[z].maxWith(cs[i].avail)
		}
		any = any || len(cs) > 0
	}
	if !any {
		p.unusable = "no available instance type offering satisfies its requirements"
	}
}

// offeringMatches checks the requirements an offering decides (zone, its zone ID
// by the pool's class, region, capacity type, and a reservation's ID and type;
// r is nil for an offering that is not a reservation).
func offeringMatches(reqs []karpenter.NodeSelectorRequirementWithMinValues, zone, capacityType string, r *reservation, zoneIDs map[string]string) bool {
	for _, q := range reqs {
		if !offeringKey(q.Key) {
			continue
		}
		v, ok := offeringValue(q.Key, zone, capacityType, r, zoneIDs)
		if !q.Matches(v, ok) {
			return false
		}
	}
	return true
}

// sortCands puts a zone's candidates in offerOrder. It sorts indexes and copies
// once: cand is large, and swapping it in place was most of a solve's time on a
// small cluster.
func sortCands(cs []cand) []cand {
	order := make([]int, len(cs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := &cs[i], &cs[j]
		if c := offerOrder(a.price, a.ct, a.it.Name, b.price, b.ct, b.it.Name); c != 0 || a.resv == nil || b.resv == nil {
			return c
		}
		return strings.Compare(a.resv.id, b.resv.id) // two reservations of one type in one zone
	})
	out := make([]cand, len(cs))
	for i, k := range order {
		out[i] = cs[k]
	}
	return out
}

// offeringKey reports the label keys an offering, not the instance type, decides.
func offeringKey(k string) bool {
	return k == corev1.LabelTopologyZone || k == karpenter.CapacityTypeLabelKey || k == corev1.LabelTopologyRegion ||
		k == karpenter.LabelTopologyZoneID || reservationKey(k)
}

// zoneIDsKey renders a class's zone IDs for a pool's label key: pools whose
// classes map zones differently label their nodes differently.
func zoneIDsKey(ids map[string]string) string {
	if len(ids) == 0 {
		return ""
	}
	zones := make([]string, 0, len(ids))
	for z := range ids {
		zones = append(zones, z)
	}
	slices.Sort(zones)
	var b strings.Builder
	b.WriteString("|zone-ids")
	for _, z := range zones {
		b.WriteString(";" + z + "=" + ids[z])
	}
	return b.String()
}

// unsupportedRequirement names a pool requirement Joiner cannot launch for, or
// returns "": a tenancy other than default (Joiner launches shared-tenancy
// instances only) or a placement group (Joiner launches into none).
func unsupportedRequirement(reqs []karpenter.NodeSelectorRequirementWithMinValues) string {
	for _, r := range reqs {
		switch r.Key {
		case karpenter.LabelInstanceTenancy:
			if !r.Matches(karpenter.TenancyDefault, true) {
				return fmt.Sprintf("requires %s %s %v: Joiner launches default-tenancy instances only", r.Key, r.Operator, r.Values)
			}
		case karpenter.LabelPlacementGroupID, karpenter.LabelPlacementGroupPartition:
			if !r.Matches("", false) {
				return fmt.Sprintf("requires %s %s %v: Joiner launches into no placement group", r.Key, r.Operator, r.Values)
			}
		}
	}
	return ""
}

// fullLabels returns every label a node of this candidate carries.
func (c *cand) fullLabels() map[string]string {
	if c.labels == nil {
		c.labels = c.prep.nodeLabelsOf(c.pool.labelKey, c.pool.labels, c.pool.zoneIDs, int(c.ti), int(c.oi))
	}
	return c.labels
}
