package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
)

// Signals are the signals that stop a command: Ctrl-C, a service manager or
// timeout(1), and a closed terminal. `joiner` passes each to RunProgram.
var Signals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// signalCause is the cancellation cause of a context a signal cancelled.
type signalCause struct{ sig os.Signal }

func (c signalCause) Error() string { return "received " + c.sig.String() }

// notify returns a context that the first of Signals cancels (with the signal as
// its cause). Later signals go to the child RunProgram, if one is running, so a
// second Ctrl-C or SIGTERM still reaches it.
func (s *Set) notify(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, len(Signals))
	signal.Notify(ch, Signals...)
	done := make(chan struct{})
	go func() {
		first := true
		for {
			select {
			case sig := <-ch:
				if first {
					first = false
					cancel(signalCause{sig})
					continue
				}
				s.signalChild(sig)
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(context.Canceled)
	}
}

// forwardSignals passes the signal that cancels ctx to p (SIGTERM when ctx ended
// for another reason), and registers p for the signals after it. The returned
// function stops both.
func (s *Set) forwardSignals(ctx context.Context, p *os.Process) func() {
	s.mu.Lock()
	s.child = p
	s.mu.Unlock()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			var c signalCause
			sig := os.Signal(syscall.SIGTERM)
			if errors.As(context.Cause(ctx), &c) {
				sig = c.sig
			}
			_ = p.Signal(sig)
		case <-done:
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		s.mu.Lock()
		s.child = nil
		s.mu.Unlock()
	}
}

func (s *Set) signalChild(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.child != nil {
		_ = s.child.Signal(sig)
	}
}

// exitCode is RunProgram's exit code as a shell reports it: its own code, or
// 128 + the signal's number when a signal ended it. Other errors (it could not
// be waited for) are reported through fail and give 1.
func exitCode(err error, fail func(error)) int {
	var exit *exec.ExitError
	if err == nil {
		return 0
	}
	if errors.As(err, &exit) {
		if exit.ExitCode() >= 0 {
			return exit.ExitCode()
		}
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
	}
	fail(err)
	return 1
}
