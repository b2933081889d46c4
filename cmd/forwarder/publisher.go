package main

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/joiner-autoscaler/joiner/events"
)

// PutEventsAPI is the one EventBridge call the forwarder makes.
type PutEventsAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Publisher turns a batch of pending pods into "Pending Pods" events on Joiner's bus.
type Publisher struct {
	API     PutEventsAPI
	Bus     string
	Cluster string
	// Options go to events.BuildPendingPods (tests shrink MaxEntrySize).
	Options events.BatchOptions
	// Attempts bounds the tries per PutEvents call, counting the first.
	Attempts int
	// BaseDelay doubles per retry up to MaxDelay, with jitter.
	BaseDelay, MaxDelay time.Duration
	Now                 func() time.Time
	// Sleep waits d or until ctx is done; tests replace it to run retries instantly.
	Sleep func(ctx context.Context, d time.Duration) error
	Log   *slog.Logger

	mu          sync.Mutex
	lastSuccess time.Time
	lastErr     string
}

// Status is what the health endpoint reports about publishing.
func (p *Publisher) Status() (lastSuccess time.Time, lastErr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSuccess, p.lastErr
}

func (p *Publisher) record(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.lastErr = err.Error()
		return
	}
	p.lastSuccess = p.now()
	p.lastErr = ""
}

func (p *Publisher) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Flush is a FlushFunc: it publishes pods and logs, rather than returns, a failure,
// because the provisioner's scheduled sweep finds any pod a lost batch left out.
func (p *Publisher) Flush(ctx context.Context, pods []events.PendingPod) {
	if len(pods) == 0 {
		return
	}
	err := p.Publish(ctx, pods)
	p.record(err)
	if err != nil {
		p.Log.Error("publishing pending pods failed", "pods", len(pods), "err", err)
	}
}

// Publish builds the entries for pods (split below the 256 KB entry limit), groups
// them into PutEvents calls and sends each call, retrying failed entries with backoff.
func (p *Publisher) Publish(ctx context.Context, pods []events.PendingPod) error {
	batchID, err := newBatchID()
	if err != nil {
		return err
	}
	entries, err := events.BuildPendingPods(p.Cluster, batchID, p.now(), pods, p.Options)
	if err != nil {
		return err
	}
	var errs []error
	for _, call := range events.GroupForPutEvents(entries) {
		if err := p.put(ctx, call); err != nil {
			errs = append(errs, err) // the other calls may still get through
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("batch %s: %w", batchID, err)
	}
	p.Log.Info("published pending pods", "batch", batchID, "pods", len(pods), "entries", len(entries))
	return nil
}

// put sends one call's entries, resending only the entries EventBridge reported as
// failed (a partial failure is normal under throttling).
func (p *Publisher) put(ctx context.Context, entries []events.Entry) error {
	attempts := max(p.Attempts, 1)
	pending := entries
	var last error
	for try := 1; ; try++ {
		in := &eventbridge.PutEventsInput{Entries: make([]ebtypes.PutEventsRequestEntry, len(pending))}
		for i, e := range pending {
			in.Entries[i] = ebtypes.PutEventsRequestEntry{
				EventBusName: aws.String(p.Bus),
				Source:       aws.String(e.Source),
				DetailType:   aws.String(e.DetailType),
				Detail:       aws.String(e.Detail),
				Resources:    e.Resources,
			}
		}
		out, err := p.API.PutEvents(ctx, in)
		switch {
		case err != nil:
			last = err
		case out.FailedEntryCount == 0:
			return nil
		default:
			var failed []events.Entry
			for i, r := range out.Entries {
				if i < len(pending) && r.ErrorCode != nil {
					failed = append(failed, pending[i])
					last = fmt.Errorf("entry failed: %s: %s", aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))
				}
			}
			if len(failed) == 0 {
				// The counts disagree with the per-entry results; resending all is safe
				// because the provisioner ignores pods already covered.
				failed = pending
				last = fmt.Errorf("%d entries failed without an error code", out.FailedEntryCount)
			}
			pending = failed
		}
		if try >= attempts {
			return fmt.Errorf("PutEvents: %d of %d entries not delivered after %d attempts: %w", len(pending), len(entries), try, last)
		}
		d := p.backoff(try)
		p.Log.Warn("PutEvents failed, retrying", "attempt", try, "entries", len(pending), "delay", d.String(), "err", last)
		if err := p.sleep(ctx, d); err != nil {
			return fmt.Errorf("PutEvents: gave up after %d attempts: %w (last error: %v)", try, err, last)
		}
	}
}

// backoff is BaseDelay·2^(try-1) capped at MaxDelay, with "equal jitter" so several
// forwarders retrying after a throttle do not stay in step.
func (p *Publisher) backoff(try int) time.Duration {
	base, ceil := p.BaseDelay, p.MaxDelay
	if base <= 0 {
		base = 200 * time.Millisecond
	}
	if ceil < base {
		ceil = base
	}
	d := base
	for i := 1; i < try && d < ceil; i++ {
		d *= 2
	}
	d = min(d, ceil)
	half := d / 2
	return half + rand.N(half+1)
}

func (p *Publisher) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func newBatchID() (string, error) {
	var b [16]byte
	if _, err := cryptorand.Read(b[:]); err != nil {
		return "", fmt.Errorf("batch id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
