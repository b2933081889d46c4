package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Namespace is where Joiner keeps its Leases (and where deploy/ installs its Role).
const Namespace = "joiner"

// DefaultLeaseDuration is how long a lease stays held without renewal. It is shorter
// than any function timeout Joiner deploys with (the shortest is 60s), so a crashed
// holder never blocks the next invocation for longer than one function run.
const DefaultLeaseDuration = 30 * time.Second

// ErrLeaseHeld is returned when another holder kept the lease for the whole wait.
var ErrLeaseHeld = errors.New("lease held by another invocation")

// ErrLeaseLost is returned by Renew when another holder took the lease after it expired.
var ErrLeaseLost = errors.New("lease lost")

// HeldError says who holds the lease and until when.
type HeldError struct {
	Name   string
	Holder string
	Until  time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %s/%s held by %q until %s", Namespace, e.Name, e.Holder, e.Until.UTC().Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrLeaseHeld) true.
func (e *HeldError) Unwrap() error { return ErrLeaseHeld }

// Lease is a coordination.k8s.io/v1 Lease named joiner-<cluster>: the provisioner and
// the consolidator hold it while they decide, so they never act on the same snapshot.
type Lease struct {
	client   CoordinationAPI
	name     string
	identity string
	duration time.Duration
	now      func() time.Time
	log      *slog.Logger

	mu   sync.Mutex
	held *coordinationv1.Lease
	stop chan struct{}
	done chan struct{}
}

// NewLease returns the cluster's lease for identity (function name + invocation id).
// duration must be shorter than the caller's function timeout; 0 means DefaultLeaseDuration.
func NewLease(client CoordinationAPI, cluster, identity string, duration time.Duration, now func() time.Time, log *slog.Logger) *Lease {
	if duration <= 0 {
		duration = DefaultLeaseDuration
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Lease{client: client, name: "joiner-" + cluster, identity: identity, duration: duration, now: now, log: log}
}

// Name is the Lease object's name.
func (l *Lease) Name() string { return l.name }

// TryAcquire takes the lease, waiting at most wait for the current holder to release it
// or let it expire. It returns a *HeldError (errors.Is ErrLeaseHeld) when the wait ends
// first. Conflicting writers are resolved by resourceVersion: exactly one wins.
func (l *Lease) TryAcquire(ctx context.Context, wait time.Duration) error {
	deadline := l.now().Add(wait)
	delay := 100 * time.Millisecond
	for {
		held, err := l.tryOnce(ctx)
		if err != nil {
			return err
		}
		if held == nil {
			return nil
		}
		left := deadline.Sub(l.now())
		if left <= 0 {
			return held
		}
		sleep := min(delay+time.Duration(rand.Int64N(int64(delay/2)+1)), left, time.Until(held.Until)+10*time.Millisecond)
		if sleep < 10*time.Millisecond {
			sleep = 10 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("acquire lease %s: %w (last holder %q)", l.name, ctx.Err(), held.Holder)
		case <-time.After(sleep):
		}
		delay = min(delay*2, time.Second)
	}
}

// tryOnce makes one attempt: nil, nil when acquired; a HeldError when someone else holds it.
func (l *Lease) tryOnce(ctx context.Context) (*HeldError, error) {
	leases := l.client.Leases(Namespace)
	now := metav1.NewMicroTime(l.now())
	cur, err := leases.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: Namespace},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(l.identity), LeaseDurationSeconds: ptr.To(int32(l.duration / time.Second)),
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To(int32(0)),
			},
		}
		created, err := leases.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return &HeldError{Name: l.name, Holder: "(just created by another)", Until: l.now()}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("create lease %s/%s: %w", Namespace, l.name, err)
		}
		l.setHeld(created)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get lease %s/%s: %w", Namespace, l.name, err)
	}
	holder := ptr.Deref(cur.Spec.HolderIdentity, "")
	if holder != "" && holder != l.identity {
		if until := leaseExpiry(cur); l.now().Before(until) {
			return &HeldError{Name: l.name, Holder: holder, Until: until}, nil
		}
	}
	next := cur.DeepCopy()
	if holder != l.identity {
		next.Spec.AcquireTime = &now
		next.Spec.LeaseTransitions = ptr.To(ptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
	}
	next.Spec.HolderIdentity = ptr.To(l.identity)
	next.Spec.LeaseDurationSeconds = ptr.To(int32(l.duration / time.Second))
	next.Spec.RenewTime = &now
	updated, err := leases.Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return &HeldError{Name: l.name, Holder: "(changed concurrently)", Until: l.now()}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take lease %s/%s: %w", Namespace, l.name, err)
	}
	l.setHeld(updated)
	return nil, nil
}

func leaseExpiry(le *coordinationv1.Lease) time.Time {
	var t time.Time
	switch {
	case le.Spec.RenewTime != nil:
		t = le.Spec.RenewTime.Time
	case le.Spec.AcquireTime != nil:
		t = le.Spec.AcquireTime.Time
	}
	return t.Add(time.Duration(ptr.Deref(le.Spec.LeaseDurationSeconds, 0)) * time.Second)
}

func (l *Lease) setHeld(le *coordinationv1.Lease) {
	l.mu.Lock()
	l.held = le
	l.mu.Unlock()
}

// Renew extends the held lease. It fails when the lease was lost (taken by another
// after expiring): the caller must stop acting.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	held := l.held
	l.mu.Unlock()
	if held == nil {
		return fmt.Errorf("renew lease %s: not held", l.name)
	}
	next := held.DeepCopy()
	next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(l.now()))
	updated, err := l.client.Leases(Namespace).Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// Someone wrote the lease since: still ours only if the holder is unchanged.
		cur, gerr := l.client.Leases(Namespace).Get(ctx, l.name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("renew lease %s: %w", l.name, gerr)
		}
		if ptr.Deref(cur.Spec.HolderIdentity, "") != l.identity {
			l.setHeld(nil)
			return fmt.Errorf("renew lease %s: %w to %q", l.name, ErrLeaseLost, ptr.Deref(cur.Spec.HolderIdentity, ""))
		}
		next = cur.DeepCopy()
		next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(l.now()))
		updated, err = l.client.Leases(Namespace).Update(ctx, next, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("renew lease %s: %w", l.name, err)
	}
	l.setHeld(updated)
	return nil
}

// KeepAlive renews the lease every third of its duration until ctx ends or Release is
// called. onLost runs (once) if a renewal finds the lease taken.
func (l *Lease) KeepAlive(ctx context.Context, onLost func(error)) {
	l.mu.Lock()
	if l.stop != nil {
		l.mu.Unlock()
		return
	}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	stop, done := l.stop, l.done
	l.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(l.duration / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-t.C:
				if err := l.Renew(ctx); err != nil {
					l.log.WarnContext(ctx, "lease renewal failed", "lease", l.name, "error", err.Error())
					if errors.Is(err, ErrLeaseLost) {
						if onLost != nil {
							onLost(err)
						}
						return
					}
				}
			}
		}
	}()
}

// Release gives the lease up so the next invocation need not wait for it to expire.
// It uses its own short timeout, so it works after the caller's context has ended.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.stop, l.done = nil, nil
	l.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for attempt := 0; attempt < 3; attempt++ {
		cur, err := l.client.Leases(Namespace).Get(ctx, l.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("release lease %s: %w", l.name, err)
		}
		if ptr.Deref(cur.Spec.HolderIdentity, "") != l.identity {
			l.setHeld(nil)
			return nil // already lost or released: nothing of ours to give back
		}
		next := cur.DeepCopy()
		next.Spec.HolderIdentity = nil
		next.Spec.AcquireTime, next.Spec.RenewTime = nil, nil
		_, err = l.client.Leases(Namespace).Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("release lease %s: %w", l.name, err)
		}
		l.setHeld(nil)
		return nil
	}
	return fmt.Errorf("release lease %s: kept conflicting", l.name)
}

// InterruptionLeaseWait is the longest the interruption path waits for the lease: a
// spot interruption gives two minutes, so it proceeds rather than queue behind a
// consolidation.
const InterruptionLeaseWait = 3 * time.Second

// LeaseDurationFor returns a lease duration that stays below a function's timeout:
// a third of it (at least a second, at most DefaultLeaseDuration), so a crashed
// holder's lease has expired before the next invocation could time out waiting for it.
func LeaseDurationFor(functionTimeout time.Duration) time.Duration {
	return min(max(functionTimeout/3, time.Second), DefaultLeaseDuration)
}
