package disruption

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// stepClock is a fake clock: every read is step later than the one before, as if
// each check of the deadline came after a simulation that long. Decide reads it
// only to compare with Options.Deadline, so the reads stand for the search's work.
type stepClock struct {
	t     time.Time
	step  time.Duration
	reads int
}

func (c *stepClock) now() time.Time {
	t := c.t
	c.t = c.t.Add(c.step)
	c.reads++
	return t
}

// deadlineCluster has two empty nodes, one node holding a single small pod (the
// obviously underutilised one: cheapest to disrupt), one roomy node, and many busy
// nodes that each take a simulation to rule out.
func deadlineCluster(t *testing.T, busy int) *cluster {
	c := newCluster(t, testPool("default", whenUnderused, 0, m5, budgets(karpenter.Budget{Nodes: "100%"})))
	c.managed("empty-1", "default", "m5.xlarge", time.Hour, dsPod("empty-1"))
	c.managed("empty-2", "default", "m5.xlarge", time.Hour, dsPod("empty-2"))
	c.managed("tiny", "default", "m5.xlarge", time.Hour, appPod("tiny-app", "100m", "128Mi"), dsPod("tiny"))
	c.managed("roomy", "default", "m5.2xlarge", time.Hour, appPod("roomy-app", "1", "2Gi"))
	for i := 0; i < busy; i++ {
		name := fmt.Sprintf("busy-%02d", i)
		c.managed(name, "default", "m5.xlarge", time.Hour,
			appPod(name+"-a", "1200m", "4Gi"), appPod(name+"-b", "1200m", "4Gi"), appPod(name+"-c", "1200m", "4Gi"))
	}
	return c
}

func TestSearchStopsAtTheDeadlineAfterTheObviousNodes(t *testing.T) {
	// Without a deadline every busy node is tried: the control for what the
	// deadline leaves out.
	c := deadlineCluster(t, 30)
	full := c.decide()
	if full.Summary.SearchStopped != "" || countCode(full, BlockSimulationLimit) != 0 {
		t.Fatalf("without a deadline the search should run to the end:\n%s", dump(full))
	}
	if full.Summary.Simulations < 30 {
		t.Fatalf("control: want a simulation per busy node at least, got %d", full.Summary.Simulations)
	}

	clock := &stepClock{t: now, step: time.Second}
	c = deadlineCluster(t, 30)
	c.opts.Clock = clock.now
	c.opts.Deadline = now.Add(8 * time.Second)
	d := c.decide()
	got := strings.Join(disruptions(d), " ")
	for _, want := range []string{"Delete/Empty/empty-1", "Delete/Empty/empty-2", "Delete/Underutilized/tiny"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %s within the deadline, got %v\n%s", want, disruptions(d), dump(d))
		}
	}
	if !strings.HasPrefix(d.Summary.SearchStopped, "time limit (8s") {
		t.Errorf("SearchStopped = %q, want the time limit named", d.Summary.SearchStopped)
	}
	if !strings.Contains(d.Summary.String(), "search stopped by the time limit") {
		t.Errorf("summary line does not say the search stopped: %s", d.Summary)
	}
	untried := countCode(d, BlockSimulationLimit)
	if untried < 20 {
		t.Errorf("want most busy nodes left untried for the next round, got %d\n%s", untried, dump(d))
	}
	for _, b := range d.Blocked {
		if b.Code == BlockSimulationLimit && !strings.Contains(b.Reason, "time limit") {
			t.Errorf("%s: reason %q does not name the time limit", b.Node, b.Reason)
		}
	}
	if d.Summary.Simulations >= full.Summary.Simulations {
		t.Errorf("the deadline saved no simulations: %d with, %d without", d.Summary.Simulations, full.Summary.Simulations)
	}
}

// A deadline already past still removes the empty nodes: their check is one
// simulation (here none: nothing is pinned to them) and the surest saving.
func TestDeadlinePassedStillRemovesEmptyNodes(t *testing.T) {
	clock := &stepClock{t: now, step: time.Second}
	c := deadlineCluster(t, 5)
	c.opts.Clock = clock.now
	c.opts.Deadline = now
	d := c.decide()
	if got := disruptions(d); !equalStrings(got, []string{"Delete/Empty/empty-1", "Delete/Empty/empty-2"}) {
		t.Fatalf("want only the empty nodes deleted, got %v\n%s", got, dump(d))
	}
	if b := blockedFor(d, "tiny"); b == nil || b.Code != BlockSimulationLimit {
		t.Fatalf("want tiny left for the next round, got %+v\n%s", b, dump(d))
	}
}

// Drift may take half the round: a rollout over many nodes does not keep the
// empty and the obviously underutilised nodes from being found.
func TestDriftDoesNotStarveConsolidation(t *testing.T) {
	c := deadlineCluster(t, 0)
	// The drifted nodes are another pool's, whose pods select it, so the rollout
	// does not fill the empty nodes.
	c.Snapshot.NodePools = append(c.Snapshot.NodePools, testPool("legacy", whenEmpty, 0, m5, budgets(karpenter.Budget{Nodes: "100%"})))
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("old-%02d", i)
		sel := selecting(karpenter.NodePoolLabelKey, "legacy")
		_, nc := c.managed(name, "legacy", "m5.xlarge", time.Hour,
			appPod(name+"-a", "1500m", "6Gi", sel), appPod(name+"-b", "1500m", "6Gi", sel))
		nc.Annotations = map[string]string{NodeClassHashAnnotation: "0123456789abcdef"}
	}
	clock := &stepClock{t: now, step: time.Second}
	c.opts.Clock = clock.now
	c.opts.Deadline = now.Add(20 * time.Second)
	d := c.decide()
	got := strings.Join(disruptions(d), " ")
	for _, want := range []string{"Delete/Empty/empty-1", "Delete/Empty/empty-2", "Underutilized/tiny", "Drifted/old-00"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %s, got %v\n%s", want, disruptions(d), dump(d))
		}
	}
	if !strings.Contains(d.Summary.SearchStopped, "expiry and drift's share") {
		t.Errorf("SearchStopped = %q, want drift's share of the time limit named", d.Summary.SearchStopped)
	}
	if d.Summary.Drifted >= 40 {
		t.Errorf("drift was not bounded: %d of 40 drifted nodes replaced", d.Summary.Drifted)
	}
}

func TestSimulationLimitIsNamed(t *testing.T) {
	c := deadlineCluster(t, 10)
	c.opts.MaxSimulations = 3
	d := c.decide()
	if d.Summary.SearchStopped != "simulation limit (3)" {
		t.Fatalf("SearchStopped = %q\n%s", d.Summary.SearchStopped, dump(d))
	}
	for _, b := range d.Blocked {
		if b.Code == BlockSimulationLimit && !strings.Contains(b.Reason, "simulation limit (3)") {
			t.Errorf("%s: reason %q does not name the simulation limit", b.Node, b.Reason)
		}
	}
}

func TestDeadlineWithoutClockIsIgnoredWithAWarning(t *testing.T) {
	c := deadlineCluster(t, 3)
	c.opts.Deadline = now
	d := c.decide()
	if d.Summary.SearchStopped != "" || len(d.Warnings) == 0 || !strings.Contains(d.Warnings[0], "Options.Clock") {
		t.Fatalf("want no time limit and a warning naming Options.Clock, got %q %v", d.Summary.SearchStopped, d.Warnings)
	}
}

func countCode(d Decision, code BlockCode) int {
	n := 0
	for _, b := range d.Blocked {
		if b.Code == code {
			n++
		}
	}
	return n
}

// Past the deadline a candidate costs nothing: it is not even estimated (hopeless
// walks every node's room per pod), only reported as not tried.
func TestNothingIsEstimatedPastTheDeadline(t *testing.T) {
	c := newCluster(t, testPool("default", whenUnderused, 0, m5, budgets(karpenter.Budget{Nodes: "100%"})))
	// Pods too big for any other node's room: each node is hopeless to move.
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("big-%02d", i)
		c.managed(name, "default", "m5.xlarge", time.Hour, appPod(name+"-a", "3", "8Gi"))
	}
	d := c.decide()
	if countCode(d, BlockUnconsolidable) != 10 {
		t.Fatalf("control: without a deadline each node should be found hopeless:\n%s", dump(d))
	}
	clock := &stepClock{t: now, step: time.Second}
	c.opts.Clock, c.opts.Deadline = clock.now, now
	d = c.decide()
	if countCode(d, BlockSimulationLimit) != 10 || countCode(d, BlockUnconsolidable) != 0 {
		t.Fatalf("past the deadline every node should be left untried:\n%s", dump(d))
	}
}
