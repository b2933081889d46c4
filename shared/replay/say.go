package replay

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/kubesim"
)

// say prints one step line: the simulated offset, who acted, and what happened.
func (r *run) say(who, format string, a ...any) {
	r.sayAt(r.offset(), who, format, a...)
}

func (r *run) sayAt(at time.Duration, who, format string, a ...any) {
	if r.opts.Steps == nil {
		return
	}
	fmt.Fprintf(r.opts.Steps, "  %s  %-13s %s\n", fmtOffset(at), who, fmt.Sprintf(format, a...))
}

// quiet are invocation outcomes not worth a line: the schedule firing with nothing to do.
func quiet(s *handlers.Summary) bool {
	a := s.Action
	return a == "nothing pending" || strings.HasPrefix(a, "nothing to consolidate") || a == "ignored" ||
		a == "duplicate" || strings.HasPrefix(a, "skipped")
}

func (r *run) sayInvocation(at time.Duration, fn, why string, s *handlers.Summary, err error) {
	if err == nil && quiet(s) && why != "timeline" {
		return
	}
	msg := s.Action
	if s.Ignored != "" {
		msg += ": " + s.Ignored
	}
	if len(s.NodesLaunched) > 0 {
		msg += fmt.Sprintf(" [+%d node(s), $%.4f/h]", len(s.NodesLaunched), s.PricePerHour)
	}
	if err != nil {
		msg += " ERROR: " + err.Error()
	}
	// A handler that waited (a replacement becoming ready, a drain) reports when it
	// ends, so the lines stay in time order.
	if took := r.offset() - at; took > 0 {
		why += fmt.Sprintf(", from %s", fmtOffset(at))
	}
	r.say(fn, "(%s) %s", why, msg)
}

// report prints what the cluster's controllers did in one tick.
func (r *run) report(rep *kubesim.Report) {
	if len(rep.Registered) > 0 {
		r.say("kubelet", "%d node(s) registered: %s", len(rep.Registered), short(rep.Registered))
	}
	for _, f := range rep.BootFailed {
		r.res.NeverJoined++
		// One line per distinct cause, whichever instance showed it.
		cause := strings.ReplaceAll(f.Cause, f.Instance, "<instance-id>")
		if !slices.Contains(r.res.JoinFailures, cause) && len(r.res.JoinFailures) < 10 {
			r.res.JoinFailures = append(r.res.JoinFailures, cause)
		}
		r.say("kubelet", "instance %s of NodeClaim %s never joins: %s", f.Instance, f.NodeClaim, f.Cause)
	}
	if len(rep.Removed) > 0 {
		r.say("kubelet", "%d node(s) gone with their instance: %s", len(rep.Removed), short(rep.Removed))
	}
	if rep.Bound > 0 {
		r.res.Bound += rep.Bound
		r.res.Elsewhere += rep.Elsewhere
		if rep.Elsewhere > 0 {
			r.say("scheduler", "%d pod(s) bound, %d of them to a node other than Joiner nominated", rep.Bound, rep.Elsewhere)
		} else {
			r.say("scheduler", "%d pod(s) bound", rep.Bound)
		}
	}
	if len(rep.Lost) > 0 {
		r.rec.lost += len(rep.Lost)
		r.say("kubelet", "%d bare pod(s) lost with their node: %s", len(rep.Lost), short(rep.Lost))
	}
}

func short(names []string) string {
	if len(names) <= 4 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, … (%d more)", strings.Join(names[:3], ", "), len(names)-3)
}

// progress prints a line per simulated hour on long replays.
func (r *run) progress() {
	if r.opts.Progress == nil || r.sc.Duration.D() <= 2*time.Hour || r.clock.Now().Before(r.nextHour) {
		return
	}
	r.nextHour = r.nextHour.Add(time.Hour)
	last := Sample{}
	if n := len(r.res.Series); n > 0 {
		last = r.res.Series[n-1]
	}
	fmt.Fprintf(r.opts.Progress, "  … %s of %s simulated: %d node(s), %d pending pod(s), %d invocation(s)\n",
		fmtOffset(r.offset()), fmtOffset(r.sc.Duration.D()), last.Nodes, last.Pending, sum(r.res.Invocations))
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
