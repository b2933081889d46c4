package disruption

import (
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// state is one decision in progress. Accepted commands change it: their nodes stop
// taking pods, their pods are pinned where the simulation put them, and their
// replacements become in-flight capacity, so later commands build on earlier ones
// as the executor will carry them out.
type state struct {
	in   Input
	opts Options
	now  time.Time
	snap *packer.Snapshot

	nodes   []*nodeInfo
	pools   map[string]*karpenter.NodePool
	classes map[string]*karpenter.EC2NodeClass
	budgets map[string]*poolBudget
	pdbs    []*pdbInfo

	// removed nodes take no pods in simulations: being deleted already or
	// disrupted by this decision.
	removed map[string]bool
	// inflight is the snapshot's in-flight NodeClaims plus this decision's
	// replacements, with the room of pods pinned to them taken off.
	inflight []*karpenter.NodeClaim
	// extra are pods pinned to existing nodes by this decision (see pin.go).
	extra map[string][]*corev1.Pod
	reqs  map[*corev1.Pod]corev1.ResourceList
	// compact caches nodes in the engine's compact view (see compact.go).
	compact map[string]packer.NodeState
	// free is the room left on nodes that take pods, for hopeless's estimate.
	free       map[string]room
	freeOrder  []string
	priceIndex []priced

	actions  []Action
	blocked  []Blocked
	blockSet map[string]bool
	warnings []string
	command  int
	sims     int
	sum      Summary

	// started is when the search began by Options.Clock (zero without a
	// deadline); stopped names the first limit the search ran into, lastLimit
	// the latest (for the reasons of the candidates it left untried).
	started   time.Time
	stopped   string
	lastLimit string
	phase     phase
}

// Decide chooses this round's disruptions. Methods run in Karpenter's order of
// precedence, each seeing the commands of the ones before: expiry, drift, empty
// nodes, multi-node consolidation, single-node consolidation. It never fails as a
// whole: problems with the input become warnings and a more cautious decision.
//
// Choices where Karpenter offers no single answer:
//   - Expiry ignores NodePool budgets (Karpenter v1: expiration is forceful) but
//     counts against them. Unlike Karpenter it still launches any replacement
//     first, and it never leaves a pod without a home. A do-not-disrupt annotation
//     or a PDB allowing no eviction holds an expired node until its
//     terminationGracePeriod has also passed since expiry; then the action is
//     marked Forceful (Karpenter v1's maximum node lifetime, expireAfter +
//     terminationGracePeriod). Without a terminationGracePeriod they hold it.
//   - A node is consolidated as Underutilized only once consolidateAfter has
//     passed since its last pod event (Karpenter v1's Consolidatable condition);
//     empty nodes only as Empty.
//   - Pods that would land on a NodeClaim that is not initialized yet make a
//     consolidation wait, as in Karpenter: a launch may still fail.
func Decide(in Input) Decision {
	s := newState(in)
	if s == nil {
		return Decision{Actions: []Action{}, Blocked: []Blocked{}, Warnings: inputProblems(in)}
	}
	s.baseline()
	// Under a deadline each method gets a share of the round (Options.Deadline).
	s.enter("expiry and drift", 0.5)
	s.expiration()
	s.drift()
	s.enter("", 1)
	s.emptiness()
	s.enter("multi-node consolidation", 0.5)
	s.multiNode()
	s.enter("", 1)
	s.singleNode()
	s.emptyConditions()
	s.driftConditions()
	return s.decision()
}

func inputProblems(in Input) []string {
	switch {
	case in.Snapshot == nil:
		return []string{"no cluster snapshot: nothing decided"}
	case in.Snapshot.Catalog == nil:
		return []string{"snapshot has no instance catalog: nothing decided (prices and simulations need it)"}
	case in.Now.IsZero():
		return []string{"no decision time (Input.Now): nothing decided"}
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.MinSavingsFraction == 0 {
		o.MinSavingsFraction = DefaultMinSavingsFraction
	}
	if o.MinSavingsFraction < 0 {
		o.MinSavingsFraction = 0
	}
	if o.MaxCandidates <= 0 {
		o.MaxCandidates = DefaultMaxCandidates
	}
	if o.MaxSimulations == 0 {
		o.MaxSimulations = DefaultMaxSimulations
	}
	if o.NodeClassHashAnnotation == "" {
		o.NodeClassHashAnnotation = NodeClassHashAnnotation
	}
	if o.NodePoolHashAnnotation == "" {
		o.NodePoolHashAnnotation = NodePoolHashAnnotation
	}
	return o
}

func newState(in Input) *state {
	if len(inputProblems(in)) > 0 {
		return nil
	}
	snap := in.Snapshot
	if len(snap.Reservations) > 0 {
		// Accepted replacements take reservation slots (see accept): count them
		// on a copy, never on the caller's snapshot.
		cp := *snap
		cp.Reservations = slices.Clone(snap.Reservations)
		snap = &cp
	}
	s := &state{in: in, opts: in.Options.withDefaults(), now: in.Now, snap: snap,
		pools: map[string]*karpenter.NodePool{}, classes: map[string]*karpenter.EC2NodeClass{},
		budgets: map[string]*poolBudget{}, removed: map[string]bool{}, blockSet: map[string]bool{},
		extra: map[string][]*corev1.Pod{}, reqs: map[*corev1.Pod]corev1.ResourceList{}, free: map[string]room{},
		compact: map[string]packer.NodeState{}}
	if !s.opts.Deadline.IsZero() {
		if s.opts.Clock == nil {
			s.warn("Options.Deadline without Options.Clock: the search has no time limit")
			s.opts.Deadline = time.Time{}
		} else {
			s.started = s.opts.Clock()
		}
	}
	// Every simulation of the decision solves the same catalog: derive its
	// labels, allocatable and offering order once, not per simulation.
	if !s.opts.Packer.Prepared.Fits(s.snap.Catalog) {
		s.opts.Packer.Prepared = packer.Prepare(s.snap.Catalog)
	}
	for _, np := range s.snap.NodePools {
		if np != nil {
			s.pools[np.Name] = np
		}
	}
	for _, nc := range s.snap.NodeClasses {
		if nc != nil {
			s.classes[nc.Name] = nc
		}
	}
	s.pdbs = newPDBs(in.PDBs, s.warn)
	for _, nc := range s.snap.InFlight {
		if nc != nil {
			s.inflight = append(s.inflight, nc)
		}
	}

	byProvider := map[string]*karpenter.NodeClaim{}
	byNode := map[string]*karpenter.NodeClaim{}
	claims := append([]*karpenter.NodeClaim(nil), in.NodeClaims...)
	sort.SliceStable(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	for _, nc := range claims {
		if nc == nil {
			continue
		}
		if id := nc.Status.ProviderID; id != "" && byProvider[id] == nil {
			byProvider[id] = nc
		}
		if nn := nc.Status.NodeName; nn != "" && byNode[nn] == nil {
			byNode[nn] = nc
		}
	}

	poolNodes, poolDisrupting := map[string]int{}, map[string]int{}
	for i := range s.snap.Nodes {
		ns := &s.snap.Nodes[i]
		if ns.Node == nil {
			continue
		}
		n := &nodeInfo{state: ns.Node, pods: ns.Pods}
		s.nodes = append(s.nodes, n)
		for _, p := range ns.Pods {
			if facts.IsReschedulable(p) {
				n.movable = append(n.movable, p)
			}
		}
		if id := ns.Node.Spec.ProviderID; id != "" {
			n.claim = byProvider[id]
		}
		if n.claim == nil {
			// By name only when the claim names no other instance: a stale claim
			// for a recycled node name must not make a stranger's node ours.
			if nc := byNode[ns.Node.Name]; nc != nil && (nc.Status.ProviderID == "" || nc.Status.ProviderID == ns.Node.Spec.ProviderID) {
				n.claim = nc
			}
		}
		n.controlPlane = facts.IsProtectedNode(ns.Node)
		n.deleting = ns.Node.DeletionTimestamp != nil || hasDisruptedTaint(ns.Node) ||
			(n.claim != nil && n.claim.DeletionTimestamp != nil)
		n.notReady = !facts.NodeReady(ns.Node)
		if n.deleting {
			s.removed[n.name()] = true
		}
		if n.claim == nil {
			continue // not Joiner's: never a candidate, never reported
		}
		poolName := n.claim.Labels[karpenter.NodePoolLabelKey]
		if l, ok := ns.Node.Labels[karpenter.NodePoolLabelKey]; ok && l != poolName {
			s.block(n, BlockNotCandidate, fmt.Sprintf("node label %s=%s disagrees with its NodeClaim %s (%q)",
				karpenter.NodePoolLabelKey, l, n.claim.Name, poolName))
			continue
		}
		n.pool = s.pools[poolName]
		switch {
		case n.controlPlane:
			s.block(n, BlockNotCandidate, "control-plane or infra node: never a candidate")
			continue
		case poolName == "":
			continue
		case n.pool == nil:
			s.block(n, BlockNotCandidate, fmt.Sprintf("its NodePool %q does not exist", poolName))
			continue
		}
		n.managed = true
		n.initialized = conditionTrue(n.claim.Status.Conditions, karpenter.ConditionInitialized)
		s.price(n)
		s.rank(n)
		s.sum.Managed++
		if !n.initialized {
			continue
		}
		// Karpenter counts initialized nodes, and subtracts the disrupting and the
		// NotReady ones from what budgets allow.
		poolNodes[poolName]++
		if n.deleting || n.notReady {
			poolDisrupting[poolName]++
		}
		if n.candidate() {
			s.sum.Candidates++
			if !n.priceKnown {
				s.warn(fmt.Sprintf("node %s: no catalog price for %s %s in %s: it may be deleted but not replaced",
					n.name(), n.capacityType, n.instanceType, n.zone))
			}
		}
	}
	s.sum.Nodes = len(s.nodes)
	s.initRoom()
	names := make([]string, 0, len(s.pools))
	for name := range s.pools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s.budgets[name] = newPoolBudget(s.pools[name], poolNodes[name], poolDisrupting[name], s.now,
			func(err error) { s.warn(err.Error() + "; it allows no disruptions until fixed") })
	}
	return s
}

func (s *state) warn(msg string) { s.warnings = append(s.warnings, msg) }

// block records why a node is left alone; only its first reason is kept.
func (s *state) block(n *nodeInfo, code BlockCode, reason string) {
	if s.blockSet[n.name()] {
		return
	}
	s.blockSet[n.name()] = true
	s.blocked = append(s.blocked, Blocked{Node: n.name(), NodeClaim: n.claimName(), NodePool: n.poolName(), Code: code, Reason: reason})
}

// baseline places the pending pods and the pods of nodes already being disrupted
// on the cluster as it is, and pins those that fit on existing or in-flight
// capacity: every later simulation must keep a home for them. Those that need new
// nodes are the provisioner's business and left out.
func (s *state) baseline() {
	var pods []*corev1.Pod
	pods = append(pods, s.snap.Pods...)
	for _, n := range s.nodes {
		if n.deleting {
			pods = append(pods, n.movable...)
		}
	}
	if len(pods) == 0 {
		return
	}
	s.pin(pods, s.solve(pods, nil), nil)
}

// command is a set of nodes disrupted together, with the simulation that showed
// where their pods go; replacements are the plan's new nodes, in order (narrowed
// to the options that keep a consolidation's saving).
type command struct {
	reason       Reason
	nodes        []*nodeInfo
	plan         *packer.Plan
	replacements []packer.NewNode
	forceful     bool
	explain      string
	// observeOnly: an empty node whose emptiness no round has recorded yet. It is
	// decided as a deletion but its action is MarkEmpty (see emptiness).
	observeOnly bool
}

// takeSlot counts a replacement planned in capacity reservation id (none when
// id is empty) against the reservation's available instances, so the
// decision's later simulations do not plan into the same slot.
func (s *state) takeSlot(id string) {
	for i := range s.snap.Reservations {
		if id != "" && s.snap.Reservations[i].ID == id && s.snap.Reservations[i].Available > 0 {
			s.snap.Reservations[i].Available--
		}
	}
}

// accept records a command and applies it to the state.
func (s *state) accept(c command) {
	s.command++
	total := 0.0
	for _, n := range c.nodes {
		total += n.price
	}
	repl := 0.0
	var claims []*karpenter.NodeClaim
	for i := range c.replacements {
		nn := &c.replacements[i]
		nn.Name = fmt.Sprintf("%s-replacement-%d-%d", nn.NodePool, s.command, i+1)
		repl += nn.PricePerHour
		claims = append(claims, s.replacementClaim(*nn))
		s.takeSlot(nn.CapacityReservationID)
	}
	s.inflight = append(s.inflight, claims...)
	var pods []*corev1.Pod
	for _, n := range c.nodes {
		pods = append(pods, s.podsOf(n)...)
	}
	s.pin(pods, c.plan, claims)
	kind := Delete
	if len(c.replacements) > 0 {
		kind = Replace
	}
	for i, n := range c.nodes {
		n.done = true
		s.removed[n.name()] = true
		delete(s.extra, n.name())
		s.consumePDBs(n)
		if b := s.budgets[n.poolName()]; b != nil {
			b.decided++
		}
		share := n.price
		if total > 0 {
			share -= repl * n.price / total
		} else {
			share -= repl / float64(len(c.nodes))
		}
		a := Action{Kind: kind, Reason: c.reason, Command: s.command, NodeClaim: n.claimName(), Node: n.name(),
			NodePool: n.poolName(), SavingsPerHour: share, Forceful: c.forceful, Explanation: c.explain}
		if c.observeOnly {
			since := emptySince(n)
			a = Action{Kind: MarkEmpty, Reason: ReasonEmpty, Command: s.command, NodeClaim: n.claimName(), Node: n.name(),
				NodePool: n.poolName(), EmptySince: &since, Explanation: c.explain + "; first seen empty now, so it waits for consolidateAfter from here"}
		}
		if i == 0 && len(c.replacements) > 0 {
			r := c.replacements[0]
			a.Replacement = &r
			a.AdditionalReplacements = c.replacements[1:]
		}
		s.actions = append(s.actions, a)
	}
}

// replacementClaim turns a planned replacement into in-flight capacity for the
// simulations that follow.
func (s *state) replacementClaim(nn packer.NewNode) *karpenter.NodeClaim {
	l := make(map[string]string, len(nn.Labels)+4)
	for k, v := range nn.Labels {
		l[k] = v
	}
	l[karpenter.NodePoolLabelKey] = nn.NodePool
	l[corev1.LabelInstanceTypeStable] = nn.InstanceType
	l[corev1.LabelTopologyZone] = nn.Zone
	l[karpenter.CapacityTypeLabelKey] = nn.CapacityType
	alloc := corev1.ResourceList{}
	for k, v := range nn.Allocatable {
		if q, err := parseQuantity(v); err == nil {
			alloc[corev1.ResourceName(k)] = q
		}
	}
	capacity := alloc
	if it, ok := s.snap.Catalog.Lookup(nn.InstanceType); ok {
		capacity = catalog.CapacityFor(it, catalog.OverheadFor(s.classes[nn.NodeClass]))
	}
	nc := &karpenter.NodeClaim{}
	nc.Name = nn.Name
	nc.Labels = l
	nc.Spec.Taints = nn.Taints
	nc.Status.Allocatable = alloc
	nc.Status.Capacity = capacity
	return nc
}

// emptyConditions keeps the NodeClaims' Empty condition in step with the nodes.
func (s *state) emptyConditions() {
	var acts []Action
	for _, n := range s.nodes {
		if !n.managed || !n.initialized || n.deleting || n.done {
			continue
		}
		isTrue := conditionTrue(n.claim.Status.Conditions, karpenter.ConditionEmpty)
		_, enabled := consolidateAfter(n.pool)
		switch {
		case n.empty() && !isTrue && enabled && len(s.extra[n.name()]) == 0: // pods are expected there
			since := emptySince(n)
			acts = append(acts, Action{Kind: MarkEmpty, Reason: ReasonEmpty, NodeClaim: n.claimName(), Node: n.name(),
				NodePool: n.poolName(), EmptySince: &since,
				Explanation: fmt.Sprintf("no pods but DaemonSet and mirror pods since %s", since.UTC().Format(time.RFC3339))})
		case !n.empty() && isTrue:
			acts = append(acts, Action{Kind: ClearEmpty, NodeClaim: n.claimName(), Node: n.name(), NodePool: n.poolName(),
				Explanation: fmt.Sprintf("runs %d pod(s) again", len(n.movable))})
		}
	}
	sort.SliceStable(acts, func(i, j int) bool { return acts[i].Node < acts[j].Node })
	s.actions = append(s.actions, acts...)
}

func (s *state) decision() Decision {
	// A node held back for one reason may still go for another later in the round
	// (a drifted node over the drift budget may be empty): the action wins.
	acted := map[string]bool{}
	for _, a := range s.actions {
		if a.Kind == Delete || a.Kind == Replace {
			acted[a.Node] = true
		}
	}
	blocked := s.blocked[:0:0]
	for _, b := range s.blocked {
		if !acted[b.Node] {
			blocked = append(blocked, b)
		}
	}
	d := Decision{Actions: s.actions, Blocked: blocked, Warnings: s.warnings, Summary: s.sum}
	if d.Actions == nil {
		d.Actions = []Action{}
	}
	if d.Blocked == nil {
		d.Blocked = []Blocked{}
	}
	d.Summary.Simulations = s.sims
	d.Summary.SearchStopped = s.stopped
	d.Summary.Blocked = len(d.Blocked)
	for _, a := range d.Actions {
		switch a.Kind {
		case MarkEmpty:
			d.Summary.MarkEmpty++
			continue
		case ClearEmpty:
			d.Summary.ClearEmpty++
			continue
		case MarkDrifted, ClearDrifted:
			continue
		case Delete:
			d.Summary.Deletes++
		case Replace:
			d.Summary.Replaces++
		}
		d.Summary.SavingsPerHour += a.SavingsPerHour
		switch a.Reason {
		case ReasonEmpty:
			d.Summary.Empty++
		case ReasonUnderutilized:
			d.Summary.Underutilized++
		case ReasonDrifted:
			d.Summary.Drifted++
		case ReasonExpired:
			d.Summary.Expired++
		}
	}
	return d
}

// classFor is the EC2NodeClass the node was launched from: its NodeClaim's
// reference, else its pool's.
func (s *state) classFor(np *karpenter.NodePool, nc *karpenter.NodeClaim) *karpenter.EC2NodeClass {
	if nc != nil && nc.Spec.NodeClassRef != nil {
		if c := s.classes[nc.Spec.NodeClassRef.Name]; c != nil {
			return c
		}
	}
	if np != nil && np.Spec.Template.Spec.NodeClassRef != nil {
		return s.classes[np.Spec.Template.Spec.NodeClassRef.Name]
	}
	return nil
}
