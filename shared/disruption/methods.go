package disruption

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// byName returns the nodes accepted by keep, sorted by name, so decisions do not
// depend on the order the snapshot lists nodes in.
func (s *state) byName(keep func(*nodeInfo) bool) []*nodeInfo {
	var out []*nodeInfo
	for _, n := range s.nodes {
		if keep(n) {
			out = append(out, n)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].name() < out[j].name() })
	return out
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// expiration replaces or deletes nodes older than their expireAfter, oldest first.
func (s *state) expiration() {
	type expired struct {
		n  *nodeInfo
		at time.Time
	}
	var list []expired
	for _, n := range s.byName((*nodeInfo).candidate) {
		d, ok := expireAfter(n.claim, n.pool)
		if !ok {
			continue
		}
		born := n.claim.CreationTimestamp.Time
		if born.IsZero() {
			born = n.state.CreationTimestamp.Time
		}
		if born.IsZero() {
			continue // no age to measure
		}
		if at := born.Add(d); !s.now.Before(at) {
			list = append(list, expired{n, at})
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].at.Before(list[j].at) })
	for _, e := range list {
		n := e.n
		forceful := false
		if code, why := s.voluntaryBlock(n); code != "" {
			tgp, has := terminationGracePeriod(n.claim, n.pool)
			if !has {
				s.block(n, code, fmt.Sprintf("expired at %s, but %s (no terminationGracePeriod forces it)", stamp(e.at), why))
				continue
			}
			if deadline := e.at.Add(tgp); s.now.Before(deadline) {
				s.block(n, code, fmt.Sprintf("expired at %s, but %s until its terminationGracePeriod ends at %s", stamp(e.at), why, stamp(deadline)))
				continue
			}
			forceful = true
		}
		if !s.canSimulate() {
			s.block(n, BlockSimulationLimit, "expired, but "+s.limitReached())
			continue
		}
		plan, why := s.simulate([]*nodeInfo{n})
		if why != "" {
			s.block(n, BlockUnschedulable, fmt.Sprintf("expired at %s, but %s", stamp(e.at), why))
			continue
		}
		msg := fmt.Sprintf("Expired: created %s, expireAfter passed at %s; its %d pod(s) go to %s", stamp(n.claim.CreationTimestamp.Time),
			stamp(e.at), len(n.movable), orNothing(destinations([]*nodeInfo{n}, plan)))
		if forceful {
			msg += "; forceful: its terminationGracePeriod has also run out, so do-not-disrupt and PDBs no longer hold it"
		}
		s.accept(command{reason: ReasonExpired, nodes: []*nodeInfo{n}, plan: plan, replacements: plan.NewNodes, forceful: forceful, explain: msg})
	}
}

// newNodePods lists (up to five of) the pods plan puts on new nodes.
func newNodePods(plan *packer.Plan) string {
	var pods []string
	for _, nn := range plan.NewNodes {
		pods = append(pods, nn.Pods...)
	}
	sort.Strings(pods)
	if len(pods) > 5 {
		pods = append(pods[:5], fmt.Sprintf("and %d more", len(pods)-5))
	}
	return strings.Join(pods, ", ")
}

func orNothing(s string) string {
	if s == "" {
		return "nowhere (none to move)"
	}
	return s
}

// drift replaces nodes whose NodePool template, EC2NodeClass or AMI changed.
func (s *state) drift() {
	for _, n := range s.byName((*nodeInfo).candidate) {
		reason := s.driftReason(n)
		if reason == "" {
			continue
		}
		if b := s.budgets[n.poolName()]; b.remaining(ReasonDrifted) <= 0 {
			s.block(n, BlockBudget, "drifted ("+reason+"), but "+b.describe(ReasonDrifted, 0))
			continue
		}
		if code, why := s.voluntaryBlock(n); code != "" {
			s.block(n, code, "drifted ("+reason+"), but "+why)
			continue
		}
		if !s.canSimulate() {
			s.block(n, BlockSimulationLimit, "drifted, but "+s.limitReached())
			continue
		}
		plan, why := s.simulate([]*nodeInfo{n})
		if why != "" {
			s.block(n, BlockUnschedulable, "drifted ("+reason+"), but "+why)
			continue
		}
		s.accept(command{reason: ReasonDrifted, nodes: []*nodeInfo{n}, plan: plan, replacements: plan.NewNodes, explain: fmt.Sprintf(
			"Drifted: %s; its %d pod(s) go to %s", reason, len(n.movable), orNothing(destinations([]*nodeInfo{n}, plan)))})
	}
}

// emptiness deletes nodes that have been empty for their pool's consolidateAfter.
// With a consolidateAfter above zero the emptiness must have been observed: pods
// that left a node leave no trace in a snapshot, so a node without the Empty
// condition may have emptied a moment ago. Such a node is decided as if deleted
// (it counts against the budget and takes no pods in later simulations: moving
// pods onto a node that goes next round would only move them twice) but its action
// is MarkEmpty, and its timer runs from the round that writes it.
func (s *state) emptiness() {
	var eligible []*nodeInfo
	batch := map[string]int{}
	for _, n := range s.byName(func(n *nodeInfo) bool { return n.candidate() && n.empty() }) {
		after, enabled := consolidateAfter(n.pool)
		if !enabled || s.now.Sub(emptySince(n)) < after {
			continue
		}
		if code, why := s.voluntaryBlock(n); code != "" {
			s.block(n, code, "empty, but "+why)
			continue
		}
		b := s.budgets[n.poolName()]
		if b.remaining(ReasonEmpty)-batch[n.poolName()] <= 0 {
			s.block(n, BlockBudget, "empty, but "+b.describe(ReasonEmpty, batch[n.poolName()]))
			continue
		}
		batch[n.poolName()]++
		eligible = append(eligible, n)
	}
	if len(eligible) == 0 {
		return
	}
	explain := func(n *nodeInfo) string {
		after, _ := consolidateAfter(n.pool)
		return fmt.Sprintf("Empty: no pods but DaemonSet and mirror pods since %s (consolidateAfter %s)", stamp(emptySince(n)), after)
	}
	unobserved := func(n *nodeInfo) bool {
		after, _ := consolidateAfter(n.pool)
		return after > 0 && !conditionTrue(n.claim.Status.Conditions, karpenter.ConditionEmpty)
	}
	// Empty nodes hold no pods of their own, but pending pods may be counting on
	// their room: remove them all at once if that costs nothing, else one by one.
	// The all-at-once check runs past the round's limits: it is one simulation (none
	// when no pod is pinned to these nodes), and the surest saving of the round.
	if plan, why := s.simulate(eligible); why == "" && len(plan.NewNodes) == 0 {
		for _, n := range eligible {
			s.accept(command{reason: ReasonEmpty, nodes: []*nodeInfo{n}, plan: plan, explain: explain(n), observeOnly: unobserved(n)})
		}
		return
	}
	for _, n := range eligible {
		if !s.canSimulate() {
			s.block(n, BlockSimulationLimit, "empty, but "+s.limitReached())
			continue
		}
		plan, why := s.simulate([]*nodeInfo{n})
		if why == "" && len(plan.NewNodes) > 0 {
			why = fmt.Sprintf("pod(s) %s, which fit on existing capacity now, would then need a new node", newNodePods(plan))
		}
		if why != "" {
			s.block(n, BlockUnconsolidable, "empty, but "+why)
			continue
		}
		s.accept(command{reason: ReasonEmpty, nodes: []*nodeInfo{n}, plan: plan, explain: explain(n), observeOnly: unobserved(n)})
	}
}

// underutilized lists the nodes consolidation may try, cheapest to disrupt first:
// non-empty nodes of WhenEmptyOrUnderutilized pools whose last pod event is at
// least consolidateAfter ago.
func (s *state) underutilized() []*nodeInfo {
	var out []*nodeInfo
	for _, n := range s.byName(func(n *nodeInfo) bool { return n.candidate() && !n.empty() }) {
		if policy(n.pool) != karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized {
			continue
		}
		after, enabled := consolidateAfter(n.pool)
		if !enabled || s.now.Sub(lastPodEvent(n)) < after {
			continue
		}
		out = append(out, n)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.cost != b.cost {
			return a.cost < b.cost
		}
		if a.util != b.util {
			return a.util < b.util
		}
		if a.price != b.price {
			return a.price > b.price
		}
		return a.name() < b.name()
	})
	return out
}

// multiNode looks for the longest prefix of the candidates (at most
// MaxCandidates) that can go at once, with at most one cheaper replacement. The
// prefix length is found by binary search, as Karpenter does: removing more nodes
// is rarely possible when removing fewer is not.
func (s *state) multiNode() {
	var pick []*nodeInfo
	inBatch := map[string]int{}
	pdbUse := map[*pdbInfo]int{}
	for _, n := range s.underutilized() {
		if code, _ := s.voluntaryBlock(n); code != "" {
			continue // singleNode reports it
		}
		if s.budgets[n.poolName()].remaining(ReasonUnderutilized)-inBatch[n.poolName()] <= 0 {
			continue
		}
		if !s.pdbsAllow(n, pdbUse) {
			continue
		}
		inBatch[n.poolName()]++
		pick = append(pick, n)
		if len(pick) == s.opts.MaxCandidates {
			break
		}
	}
	if len(pick) < 2 {
		return
	}
	var best *command
	lo, hi := 2, len(pick)
	for lo <= hi && s.canSimulate() {
		mid := (lo + hi) / 2
		plan, why := s.simulate(pick[:mid])
		if why == "" {
			if cmd, why := s.consolidation(pick[:mid], plan); why == "" {
				cmd.explain = fmt.Sprintf("multi-node consolidation of %d nodes; %s", mid, cmd.explain)
				best = &cmd
				lo = mid + 1
				continue
			}
		}
		hi = mid - 1
	}
	if best != nil {
		s.accept(*best)
	}
}

// pdbsAllow reports whether every PDB covering n's pods still allows an eviction
// once the nodes already in the batch (use) are counted, and counts n in.
func (s *state) pdbsAllow(n *nodeInfo, use map[*pdbInfo]int) bool {
	touched := map[*pdbInfo]int{}
	for _, p := range n.movable {
		for _, b := range s.pdbs {
			if b.matches(p) {
				touched[b]++
			}
		}
	}
	for b := range touched {
		if b.remaining-use[b] <= 0 {
			return false
		}
	}
	for b, c := range touched {
		use[b] += c
	}
	return true
}

// singleNode tries the remaining candidates one at a time: delete when the pods
// fit elsewhere, replace when one cheaper node takes them.
func (s *state) singleNode() {
	for _, n := range s.underutilized() {
		if code, why := s.voluntaryBlock(n); code != "" {
			s.block(n, code, why)
			continue
		}
		if b := s.budgets[n.poolName()]; b.remaining(ReasonUnderutilized) <= 0 {
			s.block(n, BlockBudget, b.describe(ReasonUnderutilized, 0))
			continue
		}
		// The limit first: hopeless walks every node's free room per pod, which
		// over 10,000 candidates and nodes is most of a round once the search is over.
		if !s.canSimulate() {
			s.block(n, BlockSimulationLimit, "not tried: "+s.limitReached())
			continue
		}
		if why := s.hopeless(n); why != "" {
			s.block(n, BlockUnconsolidable, why)
			continue
		}
		plan, why := s.simulate([]*nodeInfo{n})
		if why == "" {
			var cmd command
			if cmd, why = s.consolidation([]*nodeInfo{n}, plan); why == "" {
				s.accept(cmd)
				continue
			}
		}
		s.block(n, BlockUnconsolidable, why)
	}
}
