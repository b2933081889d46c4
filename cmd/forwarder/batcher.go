package main

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/joiner-autoscaler/joiner/events"
)

// FlushFunc receives one batch of pending pods, deduplicated by UID, in the order
// they were first seen. It is called from Batcher.Run's goroutine only, one batch at
// a time, so a slow flush (retries) lets the next batch build up instead of racing.
type FlushFunc func(ctx context.Context, pods []events.PendingPod)

// Batcher collects pending pods and hands them to a FlushFunc once no pod was added
// for Idle or the oldest pod has waited Max, whichever comes first. Idle keeps a burst
// (a Deployment scaled to 100) in one event; Max bounds the delay under a steady trickle.
type Batcher struct {
	clock clock.Clock
	idle  time.Duration
	max   time.Duration
	flush FlushFunc

	mu    sync.Mutex
	pods  map[types.UID]events.PendingPod
	order []types.UID
	first time.Time // when the current batch got its first pod
	last  time.Time // when a pod was last added
	// armed is the deadline Run's timer is set for (zero when idle); tests wait on it
	// to know Run has seen an Add before they move the fake clock.
	armed time.Time
	wake  chan struct{}
}

// NewBatcher returns a Batcher; idle and max must be positive.
func NewBatcher(c clock.Clock, idle, max time.Duration, flush FlushFunc) *Batcher {
	return &Batcher{
		clock: c, idle: idle, max: max, flush: flush,
		pods: map[types.UID]events.PendingPod{},
		wake: make(chan struct{}, 1),
	}
}

// Add puts p in the current batch; a pod already there (same UID) is replaced by this
// newer copy and keeps its place.
func (b *Batcher) Add(p events.PendingPod) {
	b.mu.Lock()
	now := b.clock.Now()
	if len(b.pods) == 0 {
		b.first = now
	}
	b.last = now
	if _, ok := b.pods[p.UID]; !ok {
		b.order = append(b.order, p.UID)
	}
	b.pods[p.UID] = p
	b.mu.Unlock()
	b.poke()
}

// Remove drops the pod from the current batch: it was scheduled or deleted before
// the batch went out, so announcing it would only make the provisioner look twice.
func (b *Batcher) Remove(uid types.UID) {
	b.mu.Lock()
	_, ok := b.pods[uid]
	delete(b.pods, uid)
	b.mu.Unlock()
	if ok {
		b.poke()
	}
}

// Len is the number of pods waiting in the current batch.
func (b *Batcher) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pods)
}

func (b *Batcher) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *Batcher) armedDeadline() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.armed
}

// deadlineLocked is when the current (non-empty) batch is due.
func (b *Batcher) deadlineLocked() time.Time {
	d := b.last.Add(b.idle)
	if m := b.first.Add(b.max); m.Before(d) {
		d = m
	}
	return d
}

// takeLocked empties the batch and returns its pods in first-seen order.
func (b *Batcher) takeLocked() []events.PendingPod {
	out := make([]events.PendingPod, 0, len(b.pods))
	for _, uid := range b.order {
		if p, ok := b.pods[uid]; ok {
			out = append(out, p)
			delete(b.pods, uid) // a UID removed then re-added appears twice in order
		}
	}
	b.order = b.order[:0]
	clear(b.pods)
	b.armed = time.Time{}
	return out
}

// Run flushes batches as they fall due until ctx is done, then flushes what is left
// with a context of its own that lasts at most final, so SIGTERM loses nothing that a
// PutEvents could still deliver.
func (b *Batcher) Run(ctx context.Context, final time.Duration) {
	for {
		var timer clock.Timer
		var fire <-chan time.Time
		b.mu.Lock()
		if len(b.pods) == 0 {
			b.order = b.order[:0] // everything was removed; forget the stale order
			b.armed = time.Time{}
		} else {
			dl := b.deadlineLocked()
			wait := dl.Sub(b.clock.Now())
			if wait <= 0 {
				batch := b.takeLocked()
				b.mu.Unlock()
				b.flush(ctx, batch)
				continue
			}
			timer = b.clock.NewTimer(wait)
			fire = timer.C()
			b.armed = dl
		}
		b.mu.Unlock()

		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			b.mu.Lock()
			batch := b.takeLocked()
			b.mu.Unlock()
			if len(batch) > 0 {
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), final)
				b.flush(fctx, batch)
				cancel()
			}
			return
		case <-b.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}
