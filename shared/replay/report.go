package replay

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteSummary writes a scenario's summary table.
func WriteSummary(w io.Writer, r *Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	row("nodes launched", countLine(r.Launched))
	row("nodes terminated", countLine(r.Terminated))
	p := r.Pods
	row("pods placed", fmt.Sprintf("%d; waited p50 %s, p95 %s, max %s; %d still pending, %d bare pod(s) lost",
		p.Placed, FormatDuration(p.WaitP50), FormatDuration(p.WaitP95), FormatDuration(p.WaitMax), p.StillPending, p.Lost))
	if r.Scheduler == SchedulerReal {
		row("scheduler", fmt.Sprintf("kube-scheduler bound %d pod(s), %d to a node other than Joiner nominated", r.Bound, r.Elsewhere))
	}
	row("interruptions", fmt.Sprintf("%d handled", r.Interruptions))
	row("invocations", invocationLine(r))
	row("nodes over time", seriesLine(r, func(s Sample) string { return fmt.Sprint(s.Nodes) }))
	row("$/hour over time", seriesLine(r, func(s Sample) string { return fmt.Sprintf("%.4f", s.Price) }))
	row("total cost", fmt.Sprintf("$%.4f over %s (peak $%.4f/h, at most %d node(s))", r.Cost, FormatDuration(r.Simulated), r.PeakPrice, r.MaxNodes))
	for _, b := range r.Reservations {
		row("reservation", fmt.Sprintf("%s: %d × %s at $%.4f/h = $%.4f over the replay, in the total (paid whether used or not; its instances cost nothing more)",
			b.ID, b.Slots, b.InstanceType, b.PricePerHour, b.Cost))
	}
	row("lower bound", fmt.Sprintf("$%.4f for the same pods (cost %.2f× the bound)", r.LowerBound, r.CostRatio()))
	usage, cost := billLines(r.Bill)
	row("control plane", usage)
	row("control plane cost", cost)
	if r.NeverJoined > 0 {
		row("never joined", fmt.Sprintf("%d instance(s): their user data did not join the node", r.NeverJoined))
	}
	row("expectations", fmt.Sprintf("%d of %d met", len(r.Expectations)-r.Failed, len(r.Expectations)))
	tw.Flush()
	for _, o := range r.Expectations {
		mark := "ok  "
		switch {
		case !o.Met:
			mark = "FAIL"
		case o.Skipped:
			mark = "skip"
		}
		fmt.Fprintf(w, "    %s %s: %s\n", mark, o.Check, o.Detail)
	}
	for _, m := range r.JoinFailures {
		fmt.Fprintf(w, "    never joined: %s\n", m)
	}
	for _, m := range r.ErrorMessages {
		fmt.Fprintf(w, "    error: %s\n", m)
	}
}

func countLine(cs []Count) string {
	if len(cs) == 0 {
		return "0"
	}
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s %s ×%d", c.Type, c.CapacityType, c.Count))
	}
	return fmt.Sprintf("%d: %s", total(cs), strings.Join(parts, ", "))
}

func invocationLine(r *Result) string {
	names := make([]string, 0, len(r.Invocations))
	for n := range r.Invocations {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, r.Invocations[n]))
	}
	return fmt.Sprintf("%s; %d error(s)", strings.Join(parts, ", "), r.Errors)
}

// seriesLine shows about eight evenly spaced samples of the series.
func seriesLine(r *Result, f func(Sample) string) string {
	return SeriesLine(r.Series, f)
}

// SeriesLine shows about eight evenly spaced samples of a series ("0:00 6 · 0:05 7"),
// each as its offset (h:mm) and f of it, and always the last.
func SeriesLine(series []Sample, f func(Sample) string) string {
	if len(series) == 0 {
		return "-"
	}
	step := max(1, (len(series)+7)/8)
	var parts []string
	for i := 0; i < len(series); i += step {
		parts = append(parts, fmt.Sprintf("%s %s", fmtClock(series[i].At), f(series[i])))
	}
	if last := series[len(series)-1]; (len(series)-1)%step != 0 {
		parts = append(parts, fmt.Sprintf("%s %s", fmtClock(last.At), f(last)))
	}
	return strings.Join(parts, " · ")
}

// fmtClock renders an offset as h:mm.
func fmtClock(d time.Duration) string {
	return fmt.Sprintf("%d:%02d", int(d.Hours()), int(d.Minutes())%60)
}

// WriteComparison writes a what-if: the scenario's run and the run with other
// NodePools, side by side.
func WriteComparison(w io.Writer, base, alt *Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  what-if\tscenario's NodePools\t%s\tdifference\n", alt.NodePools)
	money := func(k string, a, b float64) {
		fmt.Fprintf(tw, "  %s\t$%.4f\t$%.4f\t%+.4f (%s)\n", k, a, b, b-a, Change(a, b))
	}
	money("total cost", base.Cost, alt.Cost)
	money("peak $/hour", base.PeakPrice, alt.PeakPrice)
	money("lower bound", base.LowerBound, alt.LowerBound)
	fmt.Fprintf(tw, "  nodes launched\t%d\t%d\t%+d\n", total(base.Launched), total(alt.Launched), total(alt.Launched)-total(base.Launched))
	fmt.Fprintf(tw, "  max pod wait\t%s\t%s\t\n", FormatDuration(base.Pods.WaitMax), FormatDuration(alt.Pods.WaitMax))
	fmt.Fprintf(tw, "  still pending\t%d\t%d\t%+d\n", base.Pods.StillPending, alt.Pods.StillPending, alt.Pods.StillPending-base.Pods.StillPending)
	fmt.Fprintf(tw, "  expectations met\t%d/%d\t%d/%d\t\n", len(base.Expectations)-base.Failed, len(base.Expectations),
		len(alt.Expectations)-alt.Failed, len(alt.Expectations))
	tw.Flush()
}

// Change renders b's change from a as a signed percentage ("n/a" from 0).
func Change(a, b float64) string {
	if a == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", (b-a)/a*100)
}
