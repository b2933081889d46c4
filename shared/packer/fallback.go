package packer

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// The offerings a launch may fall back to. The plan picks one zone and
// capacity type per new node (NewNode.Zone and CapacityType), which the launch
// tries first; an insufficient-capacity answer there must not leave the pods
// waiting for the next invocation. So a node's requirements carry every zone
// and capacity type its pods and pool accept, as a Karpenter NodeClaim's do
// (Karpenter narrows a NodeClaim's zone only by what its pods ask, and CreateFleet
// gets overrides across all of them). The plan's own choice is kept where
// something was decided with it in mind: a pod that owns or is counted by a
// term whose domain is the zone (spread, pod affinity or anti-affinity on the
// zone or its zone ID) or the capacity type pins that; a node in a capacity
// reservation pins both. A zone a pod's node selection or volumes rule out,
// where none of the node's options is offered, or that none of the class's
// resolved subnets (status.subnets, when it names any) is in, is left out, as
// is on-demand for a pod that asks for spot.

// launchSets returns the zones (in zone order) and capacity types (the plan's
// first) n's launch may use; c is its final candidate and opts the type
// indexes of its options.
func (s *solver) launchSets(n *node, c *cand, opts []int32) (zones, cts []string) {
	cts = []string{c.ct}
	pinZone, pinCT := c.resv != nil, c.resv != nil
	classes := s.classBuf[:0]
	zonal := s.zonalDaemonSets
	for _, p := range n.pods {
		for _, t := range p.own {
			z, ct := pinsOffering(t.g.lv)
			pinZone, pinCT = pinZone || z, pinCT || ct
		}
		for _, g := range p.matched {
			z, ct := pinsOffering(g.lv)
			pinZone, pinCT = pinZone || z, pinCT || ct
		}
		if cls := p.cls; cls != nil && !cls.generic && !slices.Contains(classes, cls) {
			classes = append(classes, cls)
			zonal = zonal || cls.zonal
		}
	}
	s.classBuf = classes
	if !pinCT && c.ct == karpenter.CapacityTypeSpot && s.capacityTypeAccepted(n, classes, karpenter.CapacityTypeOnDemand, opts) {
		// A spot shortage falls back to on-demand where the pool and every pod allow it.
		cts = append(cts, karpenter.CapacityTypeOnDemand)
	}
	if pinZone {
		return []string{s.zones[n.z]}, cts
	}
	for z, name := range s.zones {
		// A zone the class's resolved subnets leave out has nowhere to launch.
		if z == n.z || (n.pool.subnetZones == nil || n.pool.subnetZones[z]) && s.zoneAccepts(n, classes, z, cts, opts, zonal) {
			zones = append(zones, name)
		}
	}
	return zones, cts
}

// pinsOffering reports whether a term on level lv depends on the zone or on
// the capacity type of the nodes it counts.
func pinsOffering(lv *level) (zone, capacityType bool) {
	switch {
	case lv.kind == levelZone:
		return true, false
	case lv.kind != levelLabel:
		return false, false
	}
	return lv.key == karpenter.LabelTopologyZoneID, lv.key == karpenter.CapacityTypeLabelKey
}

// capacityTypeAccepted reports whether n's launch may use capacity type ct in
// its own zone. Unless a class or a DaemonSet selects the capacity type (the
// only label a type's two candidates in a zone differ by), an option offered
// as ct will do.
func (s *solver) capacityTypeAccepted(n *node, classes []*podClass, ct string, opts []int32) bool {
	selective := s.capacityTypeDaemonSets
	for _, cls := range classes {
		selective = selective || cls.capacityTypeSelective
	}
	if !selective {
		for _, ti := range opts {
			if s.candAt(n.pool, n.z, ti, ct) >= 0 {
				return true
			}
		}
		return false
	}
	ok, found := s.optionsFit(n, classes, n.z, ct, opts)
	return ok && found
}

// zoneAccepts reports whether n's launch may go to zone z with the capacity
// types cts. Unless zonal is set, whether a candidate matches the node's pods
// and holds them does not depend on its zone (no class and no DaemonSet
// selects a zone key, the only labels a type's candidates differ by between
// zones), so an option offered there will do.
func (s *solver) zoneAccepts(n *node, classes []*podClass, z int, cts []string, opts []int32, zonal bool) bool {
	if !zonal {
		for _, ct := range cts {
			for _, ti := range opts {
				if s.candAt(n.pool, z, ti, ct) >= 0 {
					return true
				}
			}
		}
		return false
	}
	offered := false
	for _, ct := range cts {
		ok, found := s.optionsFit(n, classes, z, ct, opts)
		if !ok {
			return false
		}
		offered = offered || found
	}
	return offered
}

// optionsFit checks n's options of capacity type ct in zone z: ok when every one
// offered there matches every class and holds the node's pods (a fleet may
// launch any of them), found when there is one.
func (s *solver) optionsFit(n *node, classes []*podClass, z int, ct string, opts []int32) (ok, found bool) {
	cs := n.pool.cands[z]
	for _, ti := range opts {
		i := s.candAt(n.pool, z, ti, ct)
		if i < 0 {
			continue
		}
		if !n.used.fits(cs[i].avail) {
			return false, found
		}
		for _, cls := range classes {
			cp := cls.perPool[n.pool.idx]
			if !cp.ok || !bitSet(cp.bits[z], i) {
				return false, found
			}
		}
		found = true
	}
	return true, found
}

// candAt is the index of type ti's candidate of capacity type ct (spot or
// on-demand) in zone z of pool p, -1 when the pool has none.
func (s *solver) candAt(p *poolInfo, z int, ti int32, ct string) int {
	var slot int32
	switch ct {
	case karpenter.CapacityTypeOnDemand:
		slot = 2 * ti
	case karpenter.CapacityTypeSpot:
		slot = 2*ti + 1
	default:
		return -1
	}
	if p.candAt == nil {
		p.candAt = make([][]int32, len(p.cands))
	}
	idx := p.candAt[z]
	if idx == nil {
		idx = make([]int32, 2*len(s.snap.Catalog.InstanceTypes))
		for i := range idx {
			idx[i] = -1
		}
		for i := range p.cands[z] {
			c := &p.cands[z][i]
			switch {
			case c.resv != nil:
			case c.ct == karpenter.CapacityTypeOnDemand:
				idx[2*c.ti] = int32(i)
			case c.ct == karpenter.CapacityTypeSpot:
				idx[2*c.ti+1] = int32(i)
			}
		}
		p.candAt[z] = idx
	}
	return int(idx[slot])
}

// zonalKey reports whether a node's value for key depends on its zone alone:
// of a type's candidates in two zones, only these labels differ.
func zonalKey(key string) bool {
	return key == corev1.LabelTopologyZone || key == karpenter.LabelTopologyZoneID
}

// capacityTypeKey reports whether key is the capacity type's.
func capacityTypeKey(key string) bool { return key == karpenter.CapacityTypeLabelKey }

// selects reports whether a (normalized) node selection names a key is accepts.
func selects(sel map[string]string, terms []corev1.NodeSelectorTerm, is func(string) bool) bool {
	for k := range sel {
		if is(k) {
			return true
		}
	}
	for _, t := range terms {
		for _, r := range t.MatchExpressions {
			if is(r.Key) {
				return true
			}
		}
	}
	return false
}
