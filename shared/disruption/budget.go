package disruption

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// unbounded is what an inactive budget allows (Karpenter uses MaxInt32 too).
const unbounded = math.MaxInt32

// BudgetActive reports whether b applies at now. A budget without a schedule is
// always active. With one, it is active for duration after each time the schedule
// fires (in UTC), exactly as Karpenter evaluates it: walk back duration from now
// and ask whether the schedule fires again before now.
func BudgetActive(b karpenter.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil && b.Duration == nil {
		return true, nil
	}
	if b.Schedule == nil || b.Duration == nil {
		return false, fmt.Errorf("budget %q: schedule and duration must be set together", b.Nodes)
	}
	if err := karpenter.ParseCron(*b.Schedule); err != nil {
		return false, fmt.Errorf("budget %q: %w", b.Nodes, err)
	}
	sched, err := cron.ParseStandard("TZ=UTC " + strings.TrimSpace(*b.Schedule))
	if err != nil {
		return false, fmt.Errorf("budget %q: schedule %q: %w", b.Nodes, *b.Schedule, err)
	}
	now = now.UTC()
	next := sched.Next(now.Add(-b.Duration.Duration))
	return !next.After(now), nil
}

// BudgetAllows returns how many of numNodes one budget lets be disrupted at now.
// A percentage is rounded up, as Karpenter (and Kubernetes' maxUnavailable) round
// it: 10% of 5 nodes allows 1. An inactive budget is unbounded; a budget that
// cannot be read allows nothing (fail closed) and returns the error.
func BudgetAllows(b karpenter.Budget, numNodes int, now time.Time) (int, error) {
	active, err := BudgetActive(b, now)
	if err != nil {
		return 0, err
	}
	if !active {
		return unbounded, nil
	}
	v := intstr.FromString(strings.TrimSpace(b.Nodes))
	if n, err := strconv.Atoi(strings.TrimSpace(b.Nodes)); err == nil {
		v = intstr.FromInt32(int32(n))
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, numNodes, true)
	if err != nil {
		return 0, fmt.Errorf("budget nodes %q: want a count such as \"5\" or a percentage such as \"10%%\": %w", b.Nodes, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("budget nodes %q: must not be negative", b.Nodes)
	}
	return n, nil
}

// AllowedDisruptions is the most restrictive active budget of the pool that
// applies to reason (a budget without reasons applies to all), before nodes
// already being disrupted are subtracted. A pool without budgets gets Karpenter's
// default of 10%. Errors name the budgets that could not be read; those allow 0.
func AllowedDisruptions(np *karpenter.NodePool, numNodes int, reason karpenter.DisruptionReason, now time.Time) (int, []error) {
	budgets := np.Spec.Disruption.Budgets
	if len(budgets) == 0 {
		budgets = []karpenter.Budget{{Nodes: karpenter.DefaultBudgetNodes}}
	}
	allowed := unbounded
	var errs []error
	for i, b := range budgets {
		if b.Reasons != nil && !containsReason(b.Reasons, reason) {
			continue
		}
		n, err := BudgetAllows(b, numNodes, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("NodePool %s spec.disruption.budgets[%d]: %w", np.Name, i, err))
		}
		allowed = min(allowed, n)
	}
	return allowed, errs
}

func containsReason(rs []karpenter.DisruptionReason, r karpenter.DisruptionReason) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// poolBudget tracks one pool's disruptions during a decision.
type poolBudget struct {
	pool     *karpenter.NodePool
	nodes    int // initialized nodes Joiner manages in the pool
	inFlight int // nodes already being disrupted (or NotReady), before this decision
	decided  int // nodes this decision disrupts
	allowed  map[karpenter.DisruptionReason]int
}

func newPoolBudget(np *karpenter.NodePool, nodes, disrupting int, now time.Time, warn func(error)) *poolBudget {
	pb := &poolBudget{pool: np, nodes: nodes, inFlight: disrupting, allowed: map[karpenter.DisruptionReason]int{}}
	for _, r := range []karpenter.DisruptionReason{karpenter.DisruptionReasonEmpty, karpenter.DisruptionReasonUnderutilized, karpenter.DisruptionReasonDrifted} {
		n, errs := AllowedDisruptions(np, nodes, r, now)
		for _, e := range errs {
			warn(e)
		}
		pb.allowed[r] = n
	}
	return pb
}

// remaining is how many more nodes may be disrupted for reason. Expiry is not
// budgeted (Karpenter v1 treats it as forceful) but still counts against the others.
func (pb *poolBudget) remaining(r Reason) int {
	if r == ReasonExpired {
		return unbounded
	}
	n := pb.allowed[karpenter.DisruptionReason(r)]
	if n >= unbounded {
		return unbounded
	}
	return max(n-pb.inFlight-pb.decided, 0)
}

// describe explains the budget; pending counts nodes already chosen for the same
// command batch but not yet decided.
func (pb *poolBudget) describe(r Reason, pending int) string {
	msg := fmt.Sprintf("NodePool %s disruption budget allows %d %s disruption(s) of its %d node(s); %d already disrupting, %d decided this round",
		pb.pool.Name, pb.allowed[karpenter.DisruptionReason(r)], r, pb.nodes, pb.inFlight, pb.decided)
	if pending > 0 {
		msg += fmt.Sprintf(", %d more chosen with this one", pending)
	}
	return msg
}
