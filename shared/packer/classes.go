package packer

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// podClass groups pods that fit the same nodes: same node selector, required
// node affinity and tolerations. Compatibility with every pool and zone is
// computed once per class, not per pod.
type podClass struct {
	id          int
	key         string
	aff         nodeaffinity.RequiredNodeAffinity
	nodeSel     map[string]string
	terms       []corev1.NodeSelectorTerm
	tolerations []corev1.Toleration
	strict      bool // PreferNoSchedule taints must be tolerated too
	perPool     []*classPool
	generic     bool // no selector, no affinity: every label set matches
	// zonal: its selection names a zone key, so whether it matches a type's
	// candidate may differ between zones; capacityTypeSelective: it names the
	// capacity type (see launchSets).
	zonal, capacityTypeSelective bool
}

// classPool is a class's view of one pool.
type classPool struct {
	ok     bool
	reason string
	extra  map[string]string // custom labels the node must carry
	bits   [][]uint64        // per zone: candidates whose labels match
	any    []bool            // per zone, when ok
	// labelAny is per zone whether any candidate's labels match, taints aside.
	labelAny []bool
}

// classFor returns the class of a pod. pref, when not nil, is one of the pod's
// preferred node-affinity terms, added as if it were required; strict also refuses
// PreferNoSchedule taints. Preferences are kept when possible and relaxed otherwise.
func (s *solver) classFor(pod *corev1.Pod, pref *corev1.NodeSelectorTerm, strict bool) *podClass {
	var terms []corev1.NodeSelectorTerm
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = normalizedTerms(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}
	nodeSel := normalizedSelector(pod.Spec.NodeSelector)
	if pref != nil {
		if len(terms) == 0 {
			terms = []corev1.NodeSelectorTerm{*pref}
		} else {
			merged := make([]corev1.NodeSelectorTerm, len(terms))
			for i, t := range terms {
				merged[i] = corev1.NodeSelectorTerm{
					MatchExpressions: append(append([]corev1.NodeSelectorRequirement(nil), t.MatchExpressions...), pref.MatchExpressions...),
					MatchFields:      append(append([]corev1.NodeSelectorRequirement(nil), t.MatchFields...), pref.MatchFields...),
				}
			}
			terms = merged
		}
	}
	key := classKey(nodeSel, terms, pod.Spec.Tolerations, strict)
	if c, ok := s.classes[key]; ok {
		return c
	}
	var aff *corev1.Affinity
	if len(terms) > 0 {
		aff = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	c := &podClass{id: len(s.classList), key: key, aff: nodeaffinity.NewRequiredNodeAffinity(nodeSel, aff),
		nodeSel: nodeSel, terms: terms, tolerations: pod.Spec.Tolerations, strict: strict,
		generic: len(nodeSel) == 0 && len(terms) == 0, zonal: selects(nodeSel, terms, zonalKey),
		capacityTypeSelective: selects(nodeSel, terms, capacityTypeKey)}
	c.perPool = make([]*classPool, len(s.pools))
	for _, p := range s.pools {
		c.perPool[p.idx] = s.classPoolFor(c, p)
	}
	s.classes[key] = c
	s.classList = append(s.classList, c)
	return c
}

// preferredTerms returns a pod's preferred node-affinity terms, heaviest first:
// relaxation drops them one at a time in that order, as Karpenter does.
func preferredTerms(pod *corev1.Pod) []corev1.NodeSelectorTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return nil
	}
	ps := append([]corev1.PreferredSchedulingTerm(nil), a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Weight > ps[j].Weight })
	out := make([]corev1.NodeSelectorTerm, len(ps))
	for i := range ps {
		out[i] = ps[i].Preference
	}
	return normalizedTerms(out)
}

// hasPreferences reports whether a pod carries anything the engine treats as a
// relaxable preference.
func hasPreferences(pod *corev1.Pod) bool {
	if len(preferredTerms(pod)) > 0 {
		return true
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			return true
		}
	}
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
	}
	return false
}

func classKey(sel map[string]string, terms []corev1.NodeSelectorTerm, tols []corev1.Toleration, strict bool) string {
	if len(sel) == 0 && len(terms) == 0 && len(tols) == 0 {
		if strict {
			return "S"
		}
		return ""
	}
	var b strings.Builder
	if strict {
		b.WriteByte('S')
	}
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "|s:%s=%s", k, sel[k])
	}
	for _, t := range terms {
		b.WriteString("|t")
		for _, r := range t.MatchExpressions {
			fmt.Fprintf(&b, ";%s %s %v", r.Key, r.Operator, r.Values)
		}
		for _, r := range t.MatchFields {
			fmt.Fprintf(&b, ";f:%s %s %v", r.Key, r.Operator, r.Values)
		}
	}
	for _, t := range tols {
		fmt.Fprintf(&b, "|o:%s %s %s %s", t.Key, t.Operator, t.Value, t.Effect)
	}
	return b.String()
}

// selects reports whether the class's node selector or required node affinity
// names key: only then can a node's value for it decide whether the class matches.
func (c *podClass) selects(key string) bool {
	if _, ok := c.nodeSel[key]; ok {
		return true
	}
	for _, t := range c.terms {
		for _, r := range t.MatchExpressions {
			if r.Key == key {
				return true
			}
		}
	}
	return false
}

// customValue picks the value a pod wants for a custom key: its nodeSelector, or
// the first value of an In requirement in its first term.
func (c *podClass) customValue(key string) (string, bool) {
	if v, ok := c.nodeSel[key]; ok {
		return v, true
	}
	if len(c.terms) > 0 {
		for _, r := range c.terms[0].MatchExpressions {
			if r.Key == key && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) > 0 {
				return r.Values[0], true
			}
		}
	}
	return "", false
}

func (s *solver) classPoolFor(c *podClass, p *poolInfo) *classPool {
	cp := &classPool{any: make([]bool, len(s.zones)), labelAny: make([]bool, len(s.zones))}
	if p.unusable != "" {
		cp.reason = "NodePool " + p.name + " " + p.unusable
		return cp
	}
	for _, r := range p.custom {
		v, ok := c.customValue(r.Key)
		if !ok {
			continue // the pod does not ask; the label-set match below decides
		}
		if !requirementAllows(r, v) {
			cp.reason = fmt.Sprintf("NodePool %s: requirement %s %s %v does not allow %s=%s", p.name, r.Key, r.Operator, r.Values, r.Key, v)
			return cp
		}
		if p.labels[r.Key] == "" {
			if cp.extra == nil {
				cp.extra = map[string]string{}
			}
			cp.extra[r.Key] = v
		}
	}
	cp.bits = make([][]uint64, len(s.zones))
	matched := false
	for z, cs := range p.cands {
		bits := make([]uint64, (len(cs)+63)/64)
		for i := range cs {
			if c.generic || s.matchLabels(c, cs[i].fullLabels(), cp.extra) {
				bits[i/64] |= 1 << uint(i%64)
				cp.labelAny[z] = true
				matched = true
			}
		}
		cp.bits[z] = bits
	}
	if !matched {
		cp.reason = fmt.Sprintf("NodePool %s: no instance type offering matches the pod's node selector/affinity", p.name)
		if why := c.unsupportedAsk(p); why != "" {
			cp.reason += " (" + why + ")"
		}
		return cp
	}
	if t, bad := untolerated(c.tolerations, p.taints, c.strict); bad {
		cp.reason = fmt.Sprintf("NodePool %s: taint %s=%s:%s not tolerated", p.name, t.Key, t.Value, t.Effect)
		return cp
	}
	copy(cp.any, cp.labelAny)
	cp.ok = true
	return cp
}

// unsupportedAsk names what the class asks that no node of pool p can carry
// whatever its type: a tenancy other than default, a placement group, or a
// zone ID its class's status does not name. "" when it asks none of these.
func (c *podClass) unsupportedAsk(p *poolInfo) string {
	check := func(key string, op corev1.NodeSelectorOperator, values []string) string {
		r := karpenter.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
		switch key {
		case karpenter.LabelInstanceTenancy:
			if !r.Matches(karpenter.TenancyDefault, true) {
				return fmt.Sprintf("%s %s %v: Joiner launches default-tenancy instances only", key, op, values)
			}
		case karpenter.LabelPlacementGroupID, karpenter.LabelPlacementGroupPartition:
			if !r.Matches("", false) {
				return fmt.Sprintf("%s %s %v: Joiner launches into no placement group", key, op, values)
			}
		case karpenter.LabelTopologyZoneID:
			if len(p.zoneIDs) == 0 && !r.Matches("", false) {
				return fmt.Sprintf("%s %s %v: EC2NodeClass %s's status.subnets name no zone IDs", key, op, values, classNameOf(p))
			}
		}
		return ""
	}
	keys := make([]string, 0, len(c.nodeSel))
	for k := range c.nodeSel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if why := check(k, corev1.NodeSelectorOpIn, []string{c.nodeSel[k]}); why != "" {
			return why
		}
	}
	for _, t := range c.terms {
		for _, r := range t.MatchExpressions {
			if why := check(r.Key, r.Operator, r.Values); why != "" {
				return why
			}
		}
	}
	return ""
}

// classNameOf is the name of a pool's EC2NodeClass ("" when it has none).
func classNameOf(p *poolInfo) string {
	if p.nc == nil {
		return ""
	}
	return p.nc.Name
}

func (s *solver) matchLabels(c *podClass, l, extra map[string]string) bool {
	if len(extra) > 0 {
		m := make(map[string]string, len(l)+len(extra))
		for k, v := range l {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		l = m
	}
	s.probe.Labels = l
	ok, err := c.aff.Match(s.probe)
	return err == nil && ok
}

func bitSet(bits []uint64, i int) bool { return bits[i/64]&(1<<uint(i%64)) != 0 }
