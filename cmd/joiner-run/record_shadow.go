package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/access"
	"github.com/joiner-autoscaler/joiner/shared/shadow"
)

// snapshotsFile is where --snapshot-every writes, in the recording's folder.
const snapshotsFile = "snapshots.jsonl"

// snapshotter appends snapshots of a cluster (shadow.Observe) to a JSON-lines
// file, one at a time, each whole line written and flushed before the next read:
// a recording stopped at any moment keeps every snapshot taken.
type snapshotter struct {
	cluster kube.Cluster
	out     io.Writer
	every   time.Duration
	// created is a pod's or NodeClaim's creation time (nil: its creationTimestamp).
	created func(metav1.Object) time.Time
	last    time.Time
	taken   int
	failed  int
}

// take reads the cluster and appends its snapshot at now.
func (s *snapshotter) take(ctx context.Context, now time.Time) error {
	st, err := s.cluster.ReadState(ctx)
	if err != nil {
		s.failed++
		return fmt.Errorf("snapshot at %s: %w", now.UTC().Format(time.RFC3339), err)
	}
	since := s.last
	if since.IsZero() {
		since = now.Add(-s.every)
	}
	b, err := json.Marshal(shadow.Observe(st, now, since, s.created))
	if err != nil {
		return err
	}
	if _, err := s.out.Write(append(b, '\n')); err != nil {
		s.failed++
		return err
	}
	s.last = now
	s.taken++
	return nil
}

// snapshotLoop is --snapshot-every running beside the recording.
type snapshotLoop struct {
	path   string
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	s      *snapshotter
}

// startSnapshots connects to the cluster, takes the first snapshot at once (a
// kubeconfig that does not work fails the recording before it starts) and then
// one every f.snapshotEvery until stop.
func startSnapshots(ctx context.Context, f recordFlags, stderr io.Writer) (*snapshotLoop, error) {
	rest, err := access.RESTConfig(ctx, access.Config{Mode: access.ModeKubeconfig, Kubeconfig: f.kubeconfig, Context: f.kubeContext}, access.Deps{})
	if err != nil {
		return nil, err
	}
	kc, err := kube.NewClients(rest)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(f.out, snapshotsFile)
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriter(file)
	flushing := writerFunc(func(b []byte) (int, error) {
		n, err := w.Write(b)
		if err == nil {
			err = w.Flush()
		}
		return n, err
	})
	s := &snapshotter{cluster: kube.New(kc, kube.Options{ClusterName: f.cluster, Identity: "joiner-record"}), out: flushing, every: f.snapshotEvery}
	if err := s.take(ctx, time.Now()); err != nil {
		file.Close()
		os.Remove(path)
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	l := &snapshotLoop{path: path, cancel: cancel, done: make(chan struct{}), s: s}
	go func() {
		defer close(l.done)
		defer file.Close()
		t := time.NewTicker(f.snapshotEvery)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case now := <-t.C:
				l.mu.Lock()
				err := s.take(lctx, now)
				l.mu.Unlock()
				if err != nil && lctx.Err() == nil {
					// One failed read loses one snapshot, not the recording.
					fmt.Fprintf(stderr, "joiner record: %v; the next one is in %s\n", err, f.snapshotEvery)
				}
			}
		}
	}()
	return l, nil
}

// stop ends the loop and returns how many snapshots were taken and failed.
func (l *snapshotLoop) stop() (taken, failed int) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.taken, l.s.failed
}

// waitFor returns after d, or when ctx ends (Ctrl-C); d 0 waits for ctx alone.
func waitFor(ctx context.Context, d time.Duration) {
	if d <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
