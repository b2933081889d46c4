package disruption

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

func parseQuantity(s string) (resource.Quantity, error) { return resource.ParseQuantity(s) }

// canSimulate reports whether the decision may run another packing simulation:
// below the simulation limit and before the deadline.
// The deadline is the running method's share of the round's time (s.phase).
// The first limit reached is kept for the summary.
func (s *state) canSimulate() bool {
	if s.opts.MaxSimulations >= 0 && s.sims >= s.opts.MaxSimulations {
		s.stopBy(fmt.Sprintf("simulation limit (%d)", s.opts.MaxSimulations))
		return false
	}
	if s.phase.over {
		return false
	}
	if end := s.phase.end; !end.IsZero() && !s.opts.Clock().Before(end) {
		s.phase.over = true // the clock is read once per simulation, not per candidate left
		limit := fmt.Sprintf("time limit (%s", s.opts.Deadline.Sub(s.started).Round(time.Millisecond))
		if s.phase.name != "" {
			limit += ", " + s.phase.name + "'s share"
		}
		s.stopBy(limit + ")")
		return false
	}
	return true
}

// phase is the method searching and the time it may search until.
type phase struct {
	name string
	end  time.Time
	over bool
}

// enter starts a method that may use frac of what is left of the round's time
// (all of it when frac is 1 or there is no deadline).
func (s *state) enter(name string, frac float64) {
	s.phase = phase{}
	if s.opts.Deadline.IsZero() {
		return
	}
	s.phase.end = s.opts.Deadline
	if frac >= 1 {
		return
	}
	s.phase.name = name
	if now := s.opts.Clock(); now.Before(s.opts.Deadline) {
		s.phase.end = now.Add(time.Duration(frac * float64(s.opts.Deadline.Sub(now))))
	}
}

func (s *state) stopBy(limit string) {
	s.lastLimit = limit
	if s.stopped == "" {
		s.stopped = limit
	}
}

// limitReached says which limit left a candidate untried, for its Blocked reason.
func (s *state) limitReached() string {
	if s.lastLimit == "" {
		return "the search limit of this round is reached"
	}
	return "the " + s.lastLimit + " of this round is reached"
}

// solve runs the packing engine on the cluster without the removed nodes and
// without, placing pods; pinned pods count where they are pinned, and in-flight
// capacity includes this decision's replacements.
func (s *state) solve(pods []*corev1.Pod, without []*nodeInfo) *packer.Plan {
	s.sims++
	gone := func(name string) bool {
		if s.removed[name] {
			return true
		}
		for _, n := range without {
			if n.name() == name {
				return true
			}
		}
		return false
	}
	snap := *s.snap
	snap.Pods = pods
	snap.Nodes = make([]packer.NodeState, 0, len(s.snap.Nodes))
	compact := !s.opts.fullView && compactable(pods)
	for _, ns := range s.snap.Nodes {
		if ns.Node == nil || gone(ns.Node.Name) {
			continue
		}
		switch {
		case compact:
			ns = s.compactNode(ns)
		case len(s.extra[ns.Node.Name]) > 0:
			extra := s.extra[ns.Node.Name]
			ns.Pods = append(append(make([]*corev1.Pod, 0, len(ns.Pods)+len(extra)), ns.Pods...), extra...)
		}
		snap.Nodes = append(snap.Nodes, ns)
	}
	snap.InFlight = s.inflight
	return packer.Solve(&snap, s.opts.Packer)
}

// simulate removes cands and places the pods that must move with them (their own
// and those pinned to them). It returns the plan, or why removing them would leave
// a pod without a home. Nodes with nothing to move need no simulation.
func (s *state) simulate(cands []*nodeInfo) (*packer.Plan, string) {
	var pods []*corev1.Pod
	own := map[string]bool{}
	for _, n := range cands {
		for _, p := range n.movable {
			own[facts.PodKey(p)] = true
		}
		pods = append(pods, s.podsOf(n)...)
	}
	if len(pods) == 0 {
		return &packer.Plan{NewNodes: []packer.NewNode{}, ExistingNodes: []packer.ExistingNode{}, Unschedulable: []packer.Unschedulable{}}, ""
	}
	plan := s.solve(pods, cands)
	for _, u := range plan.Unschedulable {
		if own[u.Pod] {
			return plan, fmt.Sprintf("pod %s would be unschedulable: %s", u.Pod, u.Reason)
		}
		return plan, fmt.Sprintf("pod %s, which fits on existing capacity now, would no longer fit: %s", u.Pod, u.Reason)
	}
	for _, e := range plan.ExistingNodes {
		if !e.InFlight {
			continue
		}
		for _, p := range e.Pods {
			if own[p] {
				return plan, fmt.Sprintf("pod %s would depend on NodeClaim %s, which is not initialized yet", p, e.Name)
			}
		}
	}
	return plan, ""
}

// destinations describes where cands' pods went in plan.
func destinations(cands []*nodeInfo, plan *packer.Plan) string {
	own := map[string]bool{}
	for _, n := range cands {
		for _, p := range n.movable {
			own[facts.PodKey(p)] = true
		}
	}
	count := map[string]int{}
	for _, e := range plan.ExistingNodes {
		for _, p := range e.Pods {
			if own[p] {
				count[e.Name]++
			}
		}
	}
	for _, nn := range plan.NewNodes {
		for _, p := range nn.Pods {
			if own[p] {
				count["new "+nn.InstanceType]++
			}
		}
	}
	names := make([]string, 0, len(count))
	for k := range count {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, 0, 5)
	for i, k := range names {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("%d more", len(names)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("%s: %d", k, count[k]))
	}
	return strings.Join(parts, ", ")
}

func describeNodes(cands []*nodeInfo) string {
	parts := make([]string, 0, len(cands))
	for i, n := range cands {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("%d more", len(cands)-5))
			break
		}
		if n.priceKnown {
			parts = append(parts, fmt.Sprintf("%s (%s %s, $%.4f/h)", n.name(), n.capacityType, n.instanceType, n.price))
		} else {
			parts = append(parts, fmt.Sprintf("%s (%s %s, price unknown)", n.name(), n.capacityType, n.instanceType))
		}
	}
	return strings.Join(parts, ", ")
}

func movableCount(cands []*nodeInfo) int {
	c := 0
	for _, n := range cands {
		c += len(n.movable)
	}
	return c
}

// consolidation turns a simulation into a consolidation command: a deletion when
// the pods fit on capacity that exists, a replacement when one new node that is
// cheaper by at least the minimum saving takes them, or why neither pays.
func (s *state) consolidation(cands []*nodeInfo, plan *packer.Plan) (command, string) {
	switch len(plan.NewNodes) {
	case 0:
		return command{reason: ReasonUnderutilized, nodes: cands, plan: plan, explain: fmt.Sprintf(
			"Underutilized: the %d pod(s) of %s fit on other nodes (%s)", movableCount(cands), describeNodes(cands), destinations(cands, plan))}, ""
	case 1:
	default:
		return command{}, fmt.Sprintf("its pods would need %d new nodes, and consolidation replaces with at most one", len(plan.NewNodes))
	}
	total := 0.0
	allSpot := true
	sameType := map[string]float64{} // cheapest price among candidates of each type
	for _, n := range cands {
		if !n.priceKnown {
			return command{}, fmt.Sprintf("node %s has no known price (%s %s in %s), so no replacement can be shown cheaper",
				n.name(), n.capacityType, n.instanceType, n.zone)
		}
		total += n.price
		allSpot = allSpot && n.capacityType == karpenter.CapacityTypeSpot
		if p, ok := sameType[n.instanceType]; !ok || n.price < p {
			sameType[n.instanceType] = n.price
		}
	}
	nn := plan.NewNodes[0]
	if allSpot && nn.CapacityType == karpenter.CapacityTypeSpot && !s.opts.SpotToSpot {
		return command{}, "replacing spot with spot is off (Options.SpotToSpot, Karpenter's SpotToSpotConsolidation)"
	}
	need := max(s.opts.MinSavingsFraction*total, s.opts.MinSavingsPerHour)
	limit := total - need
	// Replacing several nodes with a type one of them already has is no better than
	// keeping that node and deleting the others, so options must undercut the
	// cheapest such node (Karpenter's filterOutSameType).
	sameCap := 1e300
	if len(cands) > 1 {
		sameCap = cheapestSame(sameType, nn.Options)
	}
	var keep []string
	var prices []float64
	for _, name := range nn.Options {
		p, ok := s.offeringPrice(name, nn.Zone, nn.CapacityType)
		if !ok || p > limit+1e-9 || p >= total {
			continue
		}
		if p >= sameCap {
			continue
		}
		keep = append(keep, name)
		prices = append(prices, p)
	}
	if len(keep) == 0 {
		return command{}, fmt.Sprintf("no cheaper replacement: its pods need %s %s at $%.4f/h, and replacing $%.4f/h needs at most $%.4f/h (minimum saving $%.4f/h)",
			nn.CapacityType, nn.InstanceType, nn.PricePerHour, total, max(limit, 0), need)
	}
	if allSpot && len(cands) == 1 {
		if len(keep) < spotToSpotMinOptions {
			return command{}, fmt.Sprintf("spot-to-spot replacement needs %d cheaper instance types to keep launches flexible, found %d",
				spotToSpotMinOptions, len(keep))
		}
		keep, prices = keep[:spotToSpotMinOptions], prices[:spotToSpotMinOptions]
	}
	if why := s.minValuesShort(nn, keep); why != "" {
		return command{}, why
	}
	nn = s.narrow(nn, keep, prices[0])
	return command{reason: ReasonUnderutilized, nodes: cands, plan: plan, replacements: []packer.NewNode{nn}, explain: fmt.Sprintf(
		"Underutilized: replace %s with %s %s in %s at $%.4f/h (%d option(s), each at most $%.4f/h) holding their %d pod(s); saves $%.4f/h, minimum $%.4f/h",
		describeNodes(cands), nn.CapacityType, nn.InstanceType, nn.Zone, nn.PricePerHour, len(keep), prices[len(prices)-1],
		movableCount(cands), total-nn.PricePerHour, need)}, ""
}

// cheapestSame is the lowest candidate price among the options' types, or +Inf.
func cheapestSame(sameType map[string]float64, options []string) float64 {
	best := 1e300
	for _, o := range options {
		if p, ok := sameType[o]; ok && p < best {
			best = p
		}
	}
	return best
}

// minValuesShort explains a pool minValues requirement the narrowed options no
// longer meet, or returns "".
func (s *state) minValuesShort(nn packer.NewNode, keep []string) string {
	np := s.pools[nn.NodePool]
	if np == nil {
		return ""
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.MinValues == nil {
			continue
		}
		distinct := map[string]bool{}
		for _, name := range keep {
			it, ok := s.snap.Catalog.Lookup(name)
			if !ok {
				continue
			}
			l := catalog.InstanceLabels(it)
			if v, ok := l[r.Key]; ok {
				distinct[v] = true
			} else if r.Key == corev1.LabelInstanceTypeStable {
				distinct[name] = true
			}
		}
		if len(distinct) < *r.MinValues {
			return fmt.Sprintf("NodePool %s requires minValues %d for %s, but only %d distinct value(s) are cheaper",
				np.Name, *r.MinValues, r.Key, len(distinct))
		}
	}
	return ""
}

// narrow restricts a replacement to the options that keep the saving, in the
// zone and capacity type they were priced at, relabelling it when its first
// choice changes.
func (s *state) narrow(nn packer.NewNode, keep []string, price float64) packer.NewNode {
	old := nn.InstanceType
	nn.Options = keep
	nn.InstanceType = keep[0]
	nn.PricePerHour = price
	reqs := make([]karpenter.NodeSelectorRequirementWithMinValues, len(nn.Requirements))
	copy(reqs, nn.Requirements)
	for i := range reqs {
		if reqs[i].Operator != corev1.NodeSelectorOpIn {
			continue
		}
		// The saving holds at the offering the prices were checked at: the
		// replacement launches there or not at all (the command is then
		// abandoned), never as on-demand or in a zone that may cost more.
		switch reqs[i].Key {
		case corev1.LabelInstanceTypeStable:
			reqs[i].Values = append([]string(nil), keep...)
		case corev1.LabelTopologyZone:
			reqs[i].Values = []string{nn.Zone}
		case karpenter.CapacityTypeLabelKey:
			reqs[i].Values = []string{nn.CapacityType}
		}
	}
	nn.Requirements = reqs
	if old == nn.InstanceType {
		return nn
	}
	l := make(map[string]string, len(nn.Labels))
	for k, v := range nn.Labels {
		l[k] = v
	}
	if it, ok := s.snap.Catalog.Lookup(old); ok {
		for k := range catalog.InstanceLabels(it) {
			delete(l, k)
		}
	}
	if it, ok := s.snap.Catalog.Lookup(nn.InstanceType); ok {
		for k, v := range catalog.InstanceLabels(it) {
			l[k] = v
		}
		alloc := map[string]string{}
		for k, q := range catalog.Allocatable(it, catalog.OverheadFor(s.classes[nn.NodeClass])) {
			alloc[string(k)] = q.String()
		}
		nn.Allocatable = alloc
	}
	nn.Labels = l
	return nn
}
