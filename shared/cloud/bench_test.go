package cloud

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// iceScenario launches n NodeClaims against a backend where 20% of the
// offerings they could use are short of capacity. NodeClaims differ in their
// options (1 to 3 of 10 types), zones (one or three) and capacity types; a
// quarter fit one type in one zone, so they exhaust a capacity type and fall back.
type iceScenario struct {
	launched, failed int
	fleetCalls       int // as the launches counted them
	wall             time.Duration
}

var scenarioTypes = []string{"m6i.large", "m6i.xlarge", "m7i.large", "m7i.xlarge", "m5.large", "m5.xlarge", "c6i.large", "c6i.xlarge", "r6i.large", "c5.large"}

func seedICE(e *env, fraction float64) int {
	rng := rand.New(rand.NewPCG(42, 20))
	n := 0
	for _, it := range scenarioTypes {
		for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
			for _, ct := range []string{"spot", "on-demand"} {
				if rng.Float64() < fraction {
					e.setICE(it, z, ct)
					n++
				}
			}
		}
	}
	return n
}

func runICEScenario(tb testing.TB, e *env, n int) iceScenario {
	nc := e.loadClass("al2023.yaml")
	p := e.provider()
	ctx := context.Background()
	var s iceScenario
	start := time.Now()
	for i := range n {
		width := 1 + i%3
		if i%4 == 0 {
			// A quarter of the claims fit exactly one type in one zone.
			width = 1
		}
		types := make([]string, 0, 3)
		for k := range width {
			types = append(types, scenarioTypes[(i+k)%len(scenarioTypes)])
		}
		zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
		if i%4 == 0 {
			zones = zones[(i/4)%3 : (i/4)%3+1]
		}
		cts := []string{karpenter.CapacityTypeOnDemand}
		if i%2 == 0 {
			cts = []string{karpenter.CapacityTypeSpot, karpenter.CapacityTypeOnDemand}
		}
		inst, err := p.Launch(ctx, cpuRequest(nc, "bench-"+itoa3(i), types, zones, cts...))
		s.fleetCalls += inst.FleetCalls
		switch {
		case err == nil:
			s.launched++
		case errors.Is(err, ErrInsufficientCapacity):
			s.failed++
		default:
			tb.Fatalf("NodeClaim %d: %v", i, err)
		}
	}
	s.wall = time.Since(start)
	return s
}

func itoa3(i int) string {
	return string([]byte{byte('0' + i/100%10), byte('0' + i/10%10), byte('0' + i%10)})
}

// TestLaunch100WithICECallBudget checks the fallback cost: every NodeClaim
// makes at most one CreateFleet besides its fallback steps (fleets that
// launched nothing), and no fleet asks again for an offering an earlier answer
// reported short while it is within the unavailable TTL.
func TestLaunch100WithICECallBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		const n = 100
		iced := seedICE(e, 0.2)
		s := runICEScenario(t, e, n)
		wire := e.proxy.count("CreateFleet")
		e.proxy.mu.Lock()
		fleets := append([]fleetOutcome(nil), e.proxy.fleets...)
		retried := append([]string(nil), e.proxy.retried...)
		reported := len(e.proxy.reported)
		e.proxy.mu.Unlock()
		fallbacks, withInstance := 0, 0
		for _, f := range fleets {
			if f.instances == 0 {
				fallbacks++
			} else {
				withInstance++
			}
		}
		t.Logf("%s: %d ICE offerings; %d launched, %d insufficient capacity; %d CreateFleet (%d fallback steps); %d offerings reported short; %v",
			e.kind, iced, s.launched, s.failed, wire, fallbacks, reported, s.wall)
		if len(fleets) != wire || s.fleetCalls != wire {
			t.Fatalf("CreateFleet: %d on the wire, %d answered, %d counted by the launches", wire, len(fleets), s.fleetCalls)
		}
		if wire > n+fallbacks {
			t.Errorf("%d CreateFleet calls > %d NodeClaims + %d fallback steps", wire, n, fallbacks)
		}
		if withInstance != s.launched {
			t.Errorf("%d fleets launched an instance, %d launches succeeded", withInstance, s.launched)
		}
		if len(retried) > 0 {
			t.Errorf("offerings asked for again after being reported short: %v", retried)
		}
		if s.launched < n*3/4 || fallbacks == 0 || reported == 0 {
			t.Errorf("scenario too easy or too hard to mean anything: %d launched, %d fallback steps, %d reported", s.launched, fallbacks, reported)
		}
		if got := len(e.runningInstances()); got != s.launched {
			t.Errorf("%d instances running, %d launched", got, s.launched)
		}
	})
}

// BenchmarkLaunch100WithICE launches 100 NodeClaims against awssim with 20%
// of the offerings short of capacity and reports CreateFleet calls, fallback
// steps and wall time per 100 launches.
func BenchmarkLaunch100WithICE(b *testing.B) {
	const n = 100
	var calls, fallbacks, launched int
	var wall time.Duration
	for range b.N {
		b.StopTimer()
		e := newEnvFor(b, "awssim")
		seedICE(e, 0.2)
		b.StartTimer()
		s := runICEScenario(b, e, n)
		b.StopTimer()
		calls += e.proxy.count("CreateFleet")
		e.proxy.mu.Lock()
		for _, f := range e.proxy.fleets {
			if f.instances == 0 {
				fallbacks++
			}
		}
		e.proxy.mu.Unlock()
		launched += s.launched
		wall += s.wall
	}
	b.ReportMetric(float64(calls)/float64(b.N), "createfleet/100-launches")
	b.ReportMetric(float64(fallbacks)/float64(b.N), "fallback-steps/100-launches")
	b.ReportMetric(float64(launched)/float64(b.N), "launched/100")
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "wall-ms/100-launches")
}
