package shadow

import (
	"sort"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/replay"
)

// PriceFunc is the hourly price of an offering; ok is false when it is unknown.
type PriceFunc func(instanceType, zone, capacityType string) (float64, bool)

// Options tune the comparison.
type Options struct {
	// MatchWindow is how far apart in time a Karpenter launch and a Joiner launch
	// in the same NodePool may be and still be the same decision (default 10m).
	MatchWindow time.Duration
	// Price prices both sides' nodes alike (one table, so the difference is in the
	// decisions, not in the prices each side saw).
	Price PriceFunc
}

// Side is one autoscaler's account of the window.
type Side struct {
	Launched []Node
	Removed  []Removal
	Series   []replay.Sample
	// Cost is dollars over the window.
	Cost float64
	Pods replay.PodStats
	// NotComparable counts pods whose wait Joiner's side cannot estimate: they
	// waited for a node Karpenter launched and Joiner did not.
	NotComparable int
}

// Node is one launched node.
type Node struct {
	NodeClaim    string
	NodePool     string
	InstanceType string
	Zone         string
	CapacityType string
	At           time.Time
	PricePerHour float64
}

// Removal is one node removed.
type Removal struct {
	NodeClaim string
	At        time.Time
	Reason    string
}

// Pair is a Karpenter launch and the Joiner launch taken for the same decision.
type Pair struct {
	Karpenter, Joiner Node
}

// RemovalDiff is a node one side removed and the other did not, or removed at
// another time or for another reason.
type RemovalDiff struct {
	NodeClaim         string
	Karpenter, Joiner *Removal
}

// Report is the comparison.
type Report struct {
	Start, End time.Time
	Snapshots  int
	Every      time.Duration
	Decisions  int
	Skipped    int
	Karpenter  Side
	Joiner     Side
	// Matched are the launches both sides made; UnmatchedKarpenter and
	// UnmatchedJoiner the launches only one side made.
	Matched            []Pair
	UnmatchedKarpenter []Node
	UnmatchedJoiner    []Node
	Removals           []RemovalDiff
	// UnknownPrices names offerings neither the price table nor the decision priced.
	UnknownPrices []string
}

// interval is one node's life inside the window.
type interval struct {
	from, to time.Time
	price    float64
}

// Compare compares the snapshots (what Karpenter did) with the decisions (what
// Joiner decided in shadow mode over the same cluster).
//
// Joiner's side starts from the cluster of the first snapshot; it gains a node
// for each shadow launch and loses one for each NodeClaim a shadow decision
// deleted. A Karpenter launch and a Joiner launch of the same NodePool within
// MatchWindow of each other are the same decision: Joiner's later decisions on
// Karpenter's node are its decisions on its own, and the pods that waited for
// Karpenter's node wait on Joiner's side as long, shifted by the difference in
// launch times (the nodes' boot times are taken to be alike; in shadow mode
// Joiner's never booted). Pods that waited for a Karpenter node Joiner did not
// launch are not comparable and counted apart.
func Compare(snaps []Snapshot, dec *Decisions, opt Options) *Report {
	if opt.MatchWindow <= 0 {
		opt.MatchWindow = 10 * time.Minute
	}
	rep := &Report{Start: snaps[0].At, End: snaps[len(snaps)-1].At, Snapshots: len(snaps)}
	if dec != nil {
		rep.Decisions, rep.Skipped = len(dec.List), dec.Skipped
	}
	if len(snaps) > 1 {
		rep.Every = rep.End.Sub(rep.Start) / time.Duration(len(snaps)-1)
	}
	unknown := map[string]bool{}
	price := func(t, zone, ct string, fallback float64) float64 {
		if opt.Price != nil {
			if p, ok := opt.Price(t, zone, ct); ok {
				return p
			}
		}
		if fallback == 0 && t != "" {
			unknown[t+" "+ct+" "+zone] = true
		}
		return fallback
	}

	// Karpenter's side, from the snapshots.
	type claimLife struct {
		nc         NodeClaim
		first      int // index of the first snapshot holding it
		goneAt     time.Time
		launchedAt time.Time
		// deletingAt is when it was first seen deleting: its deletionTimestamp
		// when that lies since the snapshot before, else that snapshot's time.
		deletingAt time.Time
	}
	lives := map[string]*claimLife{}
	var order []string
	for i, s := range snaps {
		present := map[string]bool{}
		for _, nc := range s.NodeClaims {
			present[nc.Name] = true
			l := lives[nc.Name]
			if l == nil {
				l = &claimLife{first: i}
				lives[nc.Name] = l
				order = append(order, nc.Name)
				l.launchedAt = s.At
				// Its creation time when that lies since the snapshot before
				// (a simulated clock is not the API server's), else this one's.
				if i > 0 && !nc.Created.Before(snaps[i-1].At) && !nc.Created.After(s.At) {
					l.launchedAt = nc.Created
				}
			}
			// The latest view wins, but a field once known stays known.
			prev := l.nc
			l.nc = nc
			if l.nc.InstanceType == "" {
				l.nc.InstanceType, l.nc.Zone, l.nc.CapacityType = prev.InstanceType, prev.Zone, prev.CapacityType
			}
			if l.nc.Reason == "" {
				l.nc.Reason = prev.Reason
			}
			if l.nc.Deleting == nil {
				l.nc.Deleting = prev.Deleting
			}
			if l.nc.Deleting != nil && l.deletingAt.IsZero() {
				l.deletingAt = s.At
				if d := *l.nc.Deleting; !d.After(s.At) && (i == 0 || !d.Before(snaps[i-1].At)) {
					l.deletingAt = d
				}
			}
		}
		for name, l := range lives {
			if !present[name] && l.goneAt.IsZero() && l.first < i {
				l.goneAt = s.At
			}
		}
	}
	initial := map[string]bool{}
	for _, nc := range snaps[0].NodeClaims {
		initial[nc.Name] = true
	}
	var karpIntervals []interval
	for _, name := range order {
		l := lives[name]
		p := price(l.nc.InstanceType, l.nc.Zone, l.nc.CapacityType, 0)
		end := rep.End
		if !l.goneAt.IsZero() {
			end = l.goneAt
		}
		from := l.launchedAt
		if initial[name] {
			from = rep.Start
		} else {
			rep.Karpenter.Launched = append(rep.Karpenter.Launched, Node{NodeClaim: name, NodePool: l.nc.NodePool, InstanceType: l.nc.InstanceType,
				Zone: l.nc.Zone, CapacityType: l.nc.CapacityType, At: l.launchedAt, PricePerHour: p})
		}
		karpIntervals = append(karpIntervals, interval{from, end, p})
		if !l.goneAt.IsZero() || l.nc.Deleting != nil {
			// Removed when first seen deleting, or gone when no snapshot caught
			// it deleting.
			at := l.goneAt
			if !l.deletingAt.IsZero() {
				at = l.deletingAt
			}
			rep.Karpenter.Removed = append(rep.Karpenter.Removed, Removal{NodeClaim: name, At: at, Reason: l.nc.Reason})
		}
	}

	// Joiner's side, from the decisions.
	var launches []Node
	removed := map[string]Removal{}
	var removedOrder []string
	if dec != nil {
		for _, d := range dec.List {
			switch d.Kind {
			case handlers.DecideLaunch:
				if d.At.Before(rep.Start) || d.At.After(rep.End) {
					continue
				}
				launches = append(launches, Node{NodeClaim: d.NodeClaim, NodePool: d.NodePool, InstanceType: d.InstanceType, Zone: d.Zone,
					CapacityType: d.CapacityType, At: d.At, PricePerHour: price(d.InstanceType, d.Zone, d.CapacityType, d.PricePerHour)})
			case handlers.DecideDeleteNodeClaim:
				if d.NodeClaim == "" || d.At.Before(rep.Start) || d.At.After(rep.End) {
					continue
				}
				if _, ok := removed[d.NodeClaim]; !ok {
					removed[d.NodeClaim] = Removal{NodeClaim: d.NodeClaim, At: d.At, Reason: d.Reason}
					removedOrder = append(removedOrder, d.NodeClaim)
				}
			}
		}
	}
	rep.Joiner.Launched = launches

	// Match launches: each Joiner launch takes the nearest unmatched Karpenter
	// launch of its NodePool within the window.
	matchedK := map[string]string{} // Karpenter NodeClaim -> Joiner NodeClaim
	matchedJ := map[string]Node{}   // Joiner NodeClaim -> Karpenter node
	for _, j := range launches {
		best, bestGap := -1, opt.MatchWindow+1
		for i, k := range rep.Karpenter.Launched {
			if _, taken := matchedK[k.NodeClaim]; taken || k.NodePool != j.NodePool {
				continue
			}
			gap := j.At.Sub(k.At)
			if gap < 0 {
				gap = -gap
			}
			if gap <= opt.MatchWindow && gap < bestGap {
				best, bestGap = i, gap
			}
		}
		if best < 0 {
			rep.UnmatchedJoiner = append(rep.UnmatchedJoiner, j)
			continue
		}
		k := rep.Karpenter.Launched[best]
		matchedK[k.NodeClaim] = j.NodeClaim
		matchedJ[j.NodeClaim] = k
		rep.Matched = append(rep.Matched, Pair{Karpenter: k, Joiner: j})
	}
	for _, k := range rep.Karpenter.Launched {
		if _, ok := matchedK[k.NodeClaim]; !ok {
			rep.UnmatchedKarpenter = append(rep.UnmatchedKarpenter, k)
		}
	}

	// Joiner's fleet: the first snapshot's nodes and its own launches, less what
	// it removed. A removal of a Karpenter-launched node is a removal of the
	// Joiner launch matched with it, and of nothing when there is none.
	joinerRemoval := map[string]Removal{} // Joiner fleet member -> removal
	for _, name := range removedOrder {
		r := removed[name]
		switch {
		case initial[name]:
			joinerRemoval[name] = r
		case matchedK[name] != "":
			joinerRemoval[matchedK[name]] = r
		default:
			for _, j := range launches {
				if j.NodeClaim == name {
					joinerRemoval[name] = r
				}
			}
		}
	}
	var joinIntervals []interval
	for _, nc := range snaps[0].NodeClaims {
		l := lives[nc.Name]
		end := rep.End
		if r, ok := joinerRemoval[nc.Name]; ok {
			end = r.At
			rep.Joiner.Removed = append(rep.Joiner.Removed, r)
		}
		joinIntervals = append(joinIntervals, interval{rep.Start, end, price(l.nc.InstanceType, l.nc.Zone, l.nc.CapacityType, 0)})
	}
	for _, j := range launches {
		end := rep.End
		if r, ok := joinerRemoval[j.NodeClaim]; ok {
			end = r.At
			rep.Joiner.Removed = append(rep.Joiner.Removed, Removal{NodeClaim: j.NodeClaim, At: r.At, Reason: r.Reason})
		}
		joinIntervals = append(joinIntervals, interval{j.At, end, j.PricePerHour})
	}
	sort.SliceStable(rep.Joiner.Removed, func(i, j int) bool { return rep.Joiner.Removed[i].At.Before(rep.Joiner.Removed[j].At) })
	sort.SliceStable(rep.Karpenter.Removed, func(i, j int) bool { return rep.Karpenter.Removed[i].At.Before(rep.Karpenter.Removed[j].At) })

	rep.Karpenter.Cost, rep.Karpenter.Series = account(karpIntervals, snaps, rep.Start, rep.End)
	rep.Joiner.Cost, rep.Joiner.Series = account(joinIntervals, snaps, rep.Start, rep.End)

	// Removals that differ, by the node on Karpenter's side.
	byName := map[string]*RemovalDiff{}
	var diffs []*RemovalDiff
	diff := func(name string) *RemovalDiff {
		if byName[name] == nil {
			byName[name] = &RemovalDiff{NodeClaim: name}
			diffs = append(diffs, byName[name])
		}
		return byName[name]
	}
	for i := range rep.Karpenter.Removed {
		r := rep.Karpenter.Removed[i]
		diff(r.NodeClaim).Karpenter = &r
	}
	for _, name := range removedOrder {
		r := removed[name]
		if initial[name] || matchedK[name] != "" {
			diff(name).Joiner = &r
		}
	}
	for _, j := range launches {
		if r, ok := joinerRemoval[j.NodeClaim]; ok && matchedJ[j.NodeClaim].NodeClaim == "" {
			diff(j.NodeClaim).Joiner = &r
		}
	}
	for _, d := range diffs {
		if d.Karpenter != nil && d.Joiner != nil && d.Karpenter.Reason == d.Joiner.Reason &&
			absDur(d.Karpenter.At.Sub(d.Joiner.At)) <= rep.Every {
			continue // the same removal, within a snapshot of each other
		}
		rep.Removals = append(rep.Removals, *d)
	}

	// Pod waits.
	type podRec struct {
		w    PodWait
		last time.Time
	}
	pods := map[string]*podRec{}
	nodeClaimOf := map[string]string{} // node name -> NodeClaim
	for _, s := range snaps {
		for _, nc := range s.NodeClaims {
			if nc.Node != "" {
				nodeClaimOf[nc.Node] = nc.Name
			}
		}
		for _, p := range s.Pods {
			r := pods[p.Pod]
			if r == nil {
				r = &podRec{}
				pods[p.Pod] = r
			}
			if r.w.Scheduled == nil || p.Scheduled != nil {
				r.w = p
			}
			r.last = s.At
		}
	}
	var kPlaced, kPending, jPlaced, jPending []time.Duration
	names := make([]string, 0, len(pods))
	for n := range pods {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w := pods[n].w
		if w.Scheduled == nil {
			wait := rep.End.Sub(w.Created)
			kPending, jPending = append(kPending, wait), append(jPending, wait)
			continue
		}
		wait := w.Scheduled.Sub(w.Created)
		kPlaced = append(kPlaced, wait)
		claim := nodeClaimOf[w.Node]
		switch {
		case claim == "" || initial[claim] || lives[claim] == nil:
			jPlaced = append(jPlaced, wait) // a node both sides had
		case matchedK[claim] != "":
			// Joiner decided the same launch this much later (earlier when negative).
			shift := findJoiner(launches, matchedK[claim]).At.Sub(lives[claim].launchedAt)
			jPlaced = append(jPlaced, max(0, wait+shift))
		default:
			rep.Joiner.NotComparable++
		}
	}
	rep.Karpenter.Pods = replay.WaitStats(kPlaced, kPending)
	rep.Joiner.Pods = replay.WaitStats(jPlaced, jPending)
	for k := range unknown {
		rep.UnknownPrices = append(rep.UnknownPrices, k)
	}
	sort.Strings(rep.UnknownPrices)
	return rep
}

func findJoiner(launches []Node, name string) Node {
	for _, j := range launches {
		if j.NodeClaim == name {
			return j
		}
	}
	return Node{}
}

// account returns the cost of the intervals over [start, end] and the fleet at
// each snapshot's time.
func account(ivs []interval, snaps []Snapshot, start, end time.Time) (float64, []replay.Sample) {
	cost := 0.0
	for _, iv := range ivs {
		from, to := maxTime(iv.from, start), minTime(iv.to, end)
		if to.After(from) {
			cost += iv.price * to.Sub(from).Hours()
		}
	}
	series := make([]replay.Sample, 0, len(snaps))
	for _, s := range snaps {
		smp := replay.Sample{At: s.At.Sub(start)}
		for _, iv := range ivs {
			// A node counts from its launch until it is gone (a node removed at
			// this very moment no longer counts).
			if !iv.from.After(s.At) && iv.to.After(s.At) || (iv.to.Equal(end) && s.At.Equal(end) && !iv.from.After(s.At)) {
				smp.Nodes++
				smp.Price += iv.price
			}
		}
		series = append(series, smp)
	}
	return cost, series
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
