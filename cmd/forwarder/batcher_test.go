package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/joiner-autoscaler/joiner/events"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type batcherHarness struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	b       *Batcher
	flushed chan []events.PendingPod
	cancel  context.CancelFunc
	done    chan struct{}
}

func startBatcher(t *testing.T, idle, max time.Duration) *batcherHarness {
	t.Helper()
	h := &batcherHarness{t: t, clock: clocktesting.NewFakeClock(t0), flushed: make(chan []events.PendingPod, 16), done: make(chan struct{})}
	h.b = NewBatcher(h.clock, idle, max, func(_ context.Context, pods []events.PendingPod) { h.flushed <- pods })
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { defer close(h.done); h.b.Run(ctx, time.Second) }()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

func pod(i int) events.PendingPod {
	return events.PendingPod{Namespace: "default", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}
}

// waitArmed waits until Run has set its timer for deadline, so moving the fake clock
// afterwards is seen by that timer.
func (h *batcherHarness) waitArmed(deadline time.Time) {
	h.t.Helper()
	end := time.Now().Add(5 * time.Second)
	for !h.b.armedDeadline().Equal(deadline) || !h.clock.HasWaiters() {
		if time.Now().After(end) {
			h.t.Fatalf("batcher armed for %v, want %v", h.b.armedDeadline(), deadline)
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *batcherHarness) expectNoFlush() {
	h.t.Helper()
	select {
	case got := <-h.flushed:
		h.t.Fatalf("flushed %d pods early at %v", len(got), h.clock.Now())
	case <-time.After(50 * time.Millisecond):
	}
}

func (h *batcherHarness) expectFlush() []events.PendingPod {
	h.t.Helper()
	select {
	case got := <-h.flushed:
		return got
	case <-time.After(5 * time.Second):
		h.t.Fatalf("no flush at %v", h.clock.Now())
		return nil
	}
}

func names(pods []events.PendingPod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func TestBatcherFlushesAfterIdle(t *testing.T) {
	h := startBatcher(t, time.Second, 10*time.Second)
	h.b.Add(pod(1))
	h.waitArmed(t0.Add(time.Second))
	h.clock.Step(600 * time.Millisecond)
	h.b.Add(pod(2)) // resets the idle timer
	h.waitArmed(t0.Add(1600 * time.Millisecond))
	h.clock.Step(999 * time.Millisecond)
	h.expectNoFlush()
	h.clock.Step(time.Millisecond)
	got := h.expectFlush()
	if fmt.Sprint(names(got)) != "[p1 p2]" {
		t.Fatalf("flushed %v, want [p1 p2]", names(got))
	}
	if h.b.Len() != 0 {
		t.Fatalf("batcher still holds %d pods after a flush", h.b.Len())
	}
}

func TestBatcherFlushesAtMaxUnderSteadyTrickle(t *testing.T) {
	h := startBatcher(t, time.Second, 10*time.Second)
	// A pod every 500 ms never leaves a 1 s gap; Max must cut the batch at 10 s.
	for i := range 20 {
		h.b.Add(pod(i))
		want := t0.Add(time.Duration(i)*500*time.Millisecond + time.Second)
		if limit := t0.Add(10 * time.Second); want.After(limit) {
			want = limit
		}
		h.waitArmed(want)
		h.clock.Step(500 * time.Millisecond)
		if i < 19 {
			h.expectNoFlush()
		}
	}
	got := h.expectFlush()
	if len(got) != 20 || h.clock.Now() != t0.Add(10*time.Second) {
		t.Fatalf("flushed %d pods at %v, want 20 at +10s", len(got), h.clock.Now().Sub(t0))
	}
	// The next pod starts a new batch with its own timers.
	h.b.Add(pod(100))
	h.waitArmed(h.clock.Now().Add(time.Second))
	h.clock.Step(time.Second)
	if got := h.expectFlush(); fmt.Sprint(names(got)) != "[p100]" {
		t.Fatalf("second batch %v, want [p100]", names(got))
	}
}

func TestBatcherDedupesByUID(t *testing.T) {
	h := startBatcher(t, time.Second, 10*time.Second)
	h.b.Add(pod(1))
	h.b.Add(pod(2))
	newer := pod(1)
	newer.UnschedulableReason = "0/3 nodes are available"
	h.b.Add(newer)
	h.b.Add(pod(3))
	h.b.Remove(pod(3).UID) // scheduled before the batch went out
	h.b.Add(pod(2))
	h.waitArmed(t0.Add(time.Second))
	h.clock.Step(time.Second)
	got := h.expectFlush()
	if fmt.Sprint(names(got)) != "[p1 p2]" {
		t.Fatalf("flushed %v, want [p1 p2] (first-seen order, one each)", names(got))
	}
	if got[0].UnschedulableReason != newer.UnschedulableReason {
		t.Fatalf("p1 is the older copy; want the latest")
	}
}

func TestBatcherRemovingEveryPodCancelsTheFlush(t *testing.T) {
	h := startBatcher(t, time.Second, 10*time.Second)
	h.b.Add(pod(1))
	h.waitArmed(t0.Add(time.Second))
	h.b.Remove(pod(1).UID)
	end := time.Now().Add(5 * time.Second)
	for !h.b.armedDeadline().IsZero() || h.clock.HasWaiters() {
		if time.Now().After(end) {
			t.Fatal("batcher kept its timer after every pod was removed")
		}
		time.Sleep(time.Millisecond)
	}
	h.clock.Step(20 * time.Second)
	h.expectNoFlush()
}

func TestBatcherFlushesOnShutdown(t *testing.T) {
	h := startBatcher(t, time.Second, 10*time.Second)
	h.b.Add(pod(1))
	h.waitArmed(t0.Add(time.Second))
	h.cancel()
	got := h.expectFlush()
	if fmt.Sprint(names(got)) != "[p1]" {
		t.Fatalf("shutdown flushed %v, want [p1]", names(got))
	}
	<-h.done
}
