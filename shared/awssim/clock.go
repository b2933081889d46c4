package awssim

import (
	"sync"
	"time"
)

// Clock is the simulator's source of time. Launch times, state transitions,
// spot interruption deadlines and "simulated-only" latency all read it, so a
// replay can run hours of EC2 behaviour in milliseconds with a FakeClock.
type Clock interface {
	Now() time.Time
}

// Advancer is a Clock that can be moved forward; FakeClock implements it.
// Latency faults marked SimulatedOnly advance such a clock instead of sleeping.
type Advancer interface {
	Clock
	Advance(d time.Duration)
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now in UTC.
func (RealClock) Now() time.Time { return time.Now().UTC() }

// FakeClock is a manually driven clock, safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a FakeClock that starts at start (UTC).
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{now: start.UTC()} }

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (negative d is ignored: simulated time never runs backwards).
func (c *FakeClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t if t is later than the current time.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t.UTC()
	}
	c.mu.Unlock()
}
