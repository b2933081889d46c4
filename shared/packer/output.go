package packer

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// finish turns the solver's nodes into the plan.
func (s *solver) finish(plan *Plan) {
	for _, n := range s.nodes {
		if len(n.pods) == 0 {
			continue
		}
		pods := make([]string, len(n.pods))
		for i, p := range n.pods {
			pods[i] = p.key
		}
		sort.Strings(pods)
		if n.existing {
			plan.ExistingNodes = append(plan.ExistingNodes, ExistingNode{Name: n.name, InFlight: n.inflight, Pods: pods})
			continue
		}
		nn, why := s.newNode(n, pods)
		if why != "" {
			// Its options would not keep the pool's minValues: Karpenter (policy
			// Strict) creates no such NodeClaim, and its pods wait. Placement
			// checks every step that shapes the options (minvalues.go), so this
			// is a safety net; 1,000 property seeds never reach it.
			for _, p := range n.pods {
				p.placedOn, p.err = nil, "NodePool "+n.pool.name+": "+why
			}
			continue
		}
		plan.NewNodes = append(plan.NewNodes, nn)
		plan.TotalPricePerHour += nn.PricePerHour
	}
	sort.SliceStable(plan.ExistingNodes, func(i, j int) bool { return plan.ExistingNodes[i].Name < plan.ExistingNodes[j].Name })
	for _, p := range s.pods {
		if p.placedOn == nil {
			reason := p.err
			if reason == "" {
				reason = "not placed"
			}
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: p.key, Reason: reason})
		}
	}
	sort.SliceStable(plan.Unschedulable, func(i, j int) bool { return plan.Unschedulable[i].Pod < plan.Unschedulable[j].Pod })
}

// finalIdx chooses the offering to launch: spot when any compatible spot offering
// holds the pods (as Karpenter launches spot whenever the pool allows it),
// otherwise the cheapest.
func (s *solver) finalIdx(n *node) int {
	cs := n.pool.cands[n.z]
	if cs[n.minIdx].ct == karpenter.CapacityTypeSpot || cs[n.minIdx].resv != nil {
		return n.minIdx
	}
	for i := n.minIdx + 1; i < len(cs); i++ {
		if cs[i].ct == karpenter.CapacityTypeSpot && bitSet(n.compat, i) && n.used.fits(cs[i].avail) &&
			s.limitOK(n.pool, cs[i].cap.sub(cs[n.minIdx].cap), false) && s.minValuesOK(n.pool, n.z, i, n.compat, nil, n.used) {
			n.pool.used = n.pool.used.add(cs[i].cap.sub(cs[n.minIdx].cap))
			return i
		}
	}
	return n.minIdx
}

// chooseCustomLabels gives a node a value for each multi-valued In requirement
// its pool puts on a custom label (team In [a, b]) that none of its pods chose.
// Karpenter labels such a node with one of the allowed values, so the node meets
// its pool's requirements and pods selecting the label can use it; a node left
// without one met neither. The first value, in the pool's order, that every pod
// on the node accepts is taken.
func (s *solver) chooseCustomLabels(n *node, c *cand) {
	for _, r := range n.pool.custom {
		if r.Operator != corev1.NodeSelectorOpIn || len(r.Values) < 2 {
			continue
		}
		if _, set := n.extra[r.Key]; set {
			continue
		}
		if _, set := n.pool.labels[r.Key]; set {
			continue
		}
		for _, v := range r.Values {
			extra := maps.Clone(n.extra)
			if extra == nil {
				extra = map[string]string{}
			}
			extra[r.Key] = v
			if s.podsAccept(n, c, extra) {
				n.extra = extra
				break
			}
		}
	}
}

// podsAccept reports whether every pod on n matches c's labels with extra.
func (s *solver) podsAccept(n *node, c *cand, extra map[string]string) bool {
	for _, p := range n.pods {
		if p.cls != nil && !p.cls.generic && !s.matchLabels(p.cls, c.fullLabels(), extra) {
			return false
		}
	}
	return true
}

// optionSpace returns an empty slice with room for n option names, cut from a
// block shared by the plan's nodes: one allocation for all their lists instead of
// several growing ones per node (the capacity is clipped, so no list can run into
// the next).
func (s *solver) optionSpace(n int) []string {
	if cap(s.optionBlock)-len(s.optionBlock) < n {
		s.optionBlock = make([]string, 0, max(n, 64*s.opts.MaxOptions))
	}
	start := len(s.optionBlock)
	s.optionBlock = s.optionBlock[:start+n]
	return s.optionBlock[start : start : start+n]
}

// newNode writes a planned node for the plan; why is set instead when its
// options, cut to the pool's limits and to MaxOptions, miss the pool's minValues.
func (s *solver) newNode(n *node, pods []string) (nn NewNode, why string) {
	fi := s.finalIdx(n)
	cs := n.pool.cands[n.z]
	c := &cs[fi]
	s.chooseCustomLabels(n, c)
	s.newCount[n.pool.name]++
	nn = NewNode{
		Name:         fmt.Sprintf("%s-%d", n.pool.name, s.newCount[n.pool.name]),
		NodePool:     n.pool.name,
		InstanceType: c.it.Name,
		CapacityType: c.ct,
		Zone:         s.zones[n.z],
		PricePerHour: c.price,
		Labels:       c.fullLabels(),
		Taints:       n.pool.taints,
		Allocatable:  s.allocatableText(n.pool, n.z, fi),
		Pods:         pods,
	}
	if n.pool.nc != nil {
		nn.NodeClass = n.pool.nc.Name
	}
	if c.resv != nil {
		nn.CapacityReservationID = c.resv.id
	}
	if len(n.extra) > 0 {
		nn.Labels = make(map[string]string, len(c.fullLabels())+len(n.extra))
		for k, v := range c.fullLabels() {
			nn.Labels[k] = v
		}
		for k, v := range n.extra {
			nn.Labels[k] = v
		}
	}
	// Each type appears at most once per capacity type in a zone's candidates, so
	// filtering on the capacity type leaves no duplicates.
	fitting, overLimit := 0, 0
	limited := n.pool.hasLimits()
	nn.Options = s.optionSpace(min(s.opts.MaxOptions, len(cs)-fi))
	optTypes := s.optionTypes[:0]
	// A launch may fall back to any option: under limits, only the options that
	// keep the pool within them even then, with the room each node's options may
	// take beyond its type reserved in turn (as Karpenter subtracts the largest
	// option of every NodeClaim it plans from what the limits leave).
	var beyond vec
	for i := fi; i < len(cs); i++ {
		if cs[i].ct != c.ct || cs[i].resv != c.resv || !bitSet(n.compat, i) || !n.used.fits(cs[i].avail) {
			continue
		}
		fitting++
		if limited && (len(n.pool.minValues) > 0 && !n.pool.noLarger(&cs[i], c) || !s.limitOK(n.pool, cs[i].cap.sub(c.cap), false)) {
			overLimit++
			continue
		}
		if len(nn.Options) < s.opts.MaxOptions {
			nn.Options = append(nn.Options, cs[i].it.Name)
			optTypes = append(optTypes, cs[i].ti)
			if limited {
				beyond = beyond.maxWith(cs[i].cap.sub(c.cap))
			}
		} else if !s.opts.Explain {
			break
		}
	}
	if counts, ok := s.minValuesSpan(n.pool, n.z, fi, n.compat, nil, n.used); !ok {
		return nn, s.minValuesNote(n.pool, counts)
	}
	minValuesNote := n.pool.minValuesIgnored()
	n.pool.reserved = n.pool.reserved.add(beyond)
	if overLimit > 0 {
		minValuesNote = fmt.Sprintf("; %d larger type(s) left out of the options: launched instead, they would break the pool's limits", overLimit) + minValuesNote
	}
	s.optionTypes = optTypes
	zones, cts := s.launchSets(n, c, optTypes)
	nn.Requirements = s.requirementsFor(n, nn, zones, cts)
	if s.opts.Explain {
		nn.Explain = fmt.Sprintf("%s %s in %s at $%.4f/h: the cheapest of %d instance types that hold its %d pod(s) "+
			"(requests %s; allocatable less DaemonSets %s) in NodePool %s (weight %d)%s",
			c.ct, c.it.Name, nn.Zone, c.price, fitting, len(pods), s.dims.describe(n.used), s.dims.describe(c.avail),
			n.pool.name, n.pool.weight, minValuesNote) + s.whyType(n, c)
	}
	return nn, ""
}

// allocatableText renders a candidate's allocatable once; nodes on the same
// candidate share the map.
func (s *solver) allocatableText(p *poolInfo, z, i int) map[string]string {
	c := &p.cands[z][i]
	if c.allocText == nil {
		// From the catalog, not the solve's vector: it also names resources no pod
		// asked for (the GPUs of a node that only got CPU pods).
		al := c.res.alloc
		c.allocText = make(map[string]string, len(al))
		for n, q := range al {
			c.allocText[string(n)] = formatQuantity(n, quantityValue(n, q))
		}
	}
	return c.allocText
}

// requirementsFor narrows the pool's requirements to this node's options, for
// the NodeClaim: its instance types, the zones and capacity types its launch
// may use (see launchSets), its reservation and chosen labels.
func (s *solver) requirementsFor(n *node, nn NewNode, zones, cts []string) []karpenter.NodeSelectorRequirementWithMinValues {
	var out []karpenter.NodeSelectorRequirementWithMinValues
	for _, r := range n.pool.reqs {
		switch r.Key {
		case corev1.LabelInstanceTypeStable, corev1.LabelTopologyZone, karpenter.CapacityTypeLabelKey:
			continue
		case karpenter.LabelCapacityReservationID:
			if nn.CapacityReservationID != "" {
				continue
			}
		}
		out = append(out, r)
	}
	out = append(out,
		karpenter.NodeSelectorRequirementWithMinValues{Key: karpenter.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{n.pool.name}},
		karpenter.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: nn.Options},
		karpenter.NodeSelectorRequirementWithMinValues{Key: karpenter.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: cts},
		karpenter.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones},
	)
	if nn.CapacityReservationID != "" {
		out = append(out, karpenter.NodeSelectorRequirementWithMinValues{Key: karpenter.LabelCapacityReservationID,
			Operator: corev1.NodeSelectorOpIn, Values: []string{nn.CapacityReservationID}})
	}
	keys := make([]string, 0, len(n.extra))
	for k := range n.extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, karpenter.NodeSelectorRequirementWithMinValues{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{n.extra[k]}})
	}
	return out
}

func (d *dimensions) describe(v vec) string {
	parts := make([]string, 0, len(d.names))
	for i, n := range d.names {
		if v[i] == 0 && i > dimPods {
			continue
		}
		parts = append(parts, string(n)+" "+formatQuantity(n, v[i]))
	}
	return strings.Join(parts, ", ")
}
