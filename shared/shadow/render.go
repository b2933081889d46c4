package shadow

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/replay"
)

// Write writes the report: both sides side by side, then every launch and
// removal that differs.
func Write(w io.Writer, r *Report) {
	fmt.Fprintf(w, "shadow report: %d snapshot(s) from %s to %s (%s, every %s), %d shadow decision(s)",
		r.Snapshots, r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339), replay.FormatDuration(r.End.Sub(r.Start)),
		replay.FormatDuration(r.Every), r.Decisions)
	if r.Skipped > 0 {
		fmt.Fprintf(w, " (%d other log line(s) skipped)", r.Skipped)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  \tKarpenter (what happened)\tJoiner (shadow decisions)\n")
	row := func(k string, f func(s *Side) string) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", k, f(&r.Karpenter), f(&r.Joiner))
	}
	row("nodes launched", func(s *Side) string { return launchLine(s.Launched) })
	row("nodes removed", func(s *Side) string { return removalLine(s.Removed) })
	row("total cost", func(s *Side) string {
		line := fmt.Sprintf("$%.4f", s.Cost)
		if s == &r.Joiner {
			line += fmt.Sprintf(" (%+.4f, %s)", r.Joiner.Cost-r.Karpenter.Cost, replay.Change(r.Karpenter.Cost, r.Joiner.Cost))
		}
		return line
	})
	row("pod wait", func(s *Side) string {
		p := s.Pods
		line := fmt.Sprintf("%d placed: p50 %s, p95 %s, max %s; %d still pending", p.Placed, replay.FormatDuration(p.WaitP50),
			replay.FormatDuration(p.WaitP95), replay.FormatDuration(p.WaitMax), p.StillPending)
		if s.NotComparable > 0 {
			line += fmt.Sprintf("; %d not comparable", s.NotComparable)
		}
		return line
	})
	tw.Flush()
	// The series are too long to stand side by side: one line per side.
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	series := func(k string, f func(replay.Sample) string) {
		fmt.Fprintf(tw, "  %s\tKarpenter\t%s\n", k, replay.SeriesLine(r.Karpenter.Series, f))
		fmt.Fprintf(tw, "  \tJoiner\t%s\n", replay.SeriesLine(r.Joiner.Series, f))
	}
	series("nodes over time", func(x replay.Sample) string { return fmt.Sprint(x.Nodes) })
	series("$/hour over time", func(x replay.Sample) string { return fmt.Sprintf("%.4f", x.Price) })
	tw.Flush()
	off := func(t time.Time) string { return replay.FormatDuration(t.Sub(r.Start)) }
	node := func(n Node) string {
		return strings.TrimSpace(fmt.Sprintf("%s %s %s %s $%.4f/h", n.NodeClaim, n.InstanceType, n.CapacityType, n.Zone, n.PricePerHour))
	}
	if len(r.Matched)+len(r.UnmatchedKarpenter)+len(r.UnmatchedJoiner) > 0 {
		fmt.Fprintln(w, "launches (offsets from the first snapshot):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		type line struct {
			at   time.Time
			text string
		}
		var lines []line
		for _, p := range r.Matched {
			same := p.Karpenter.InstanceType == p.Joiner.InstanceType && p.Karpenter.CapacityType == p.Joiner.CapacityType
			mark := "differs"
			if same {
				mark = "same"
			}
			lines = append(lines, line{p.Karpenter.At, fmt.Sprintf("  %s\tboth (%s)\tKarpenter %s at %s\tJoiner %s at %s", p.Karpenter.NodePool, mark,
				node(p.Karpenter), off(p.Karpenter.At), node(p.Joiner), off(p.Joiner.At))})
		}
		for _, k := range r.UnmatchedKarpenter {
			lines = append(lines, line{k.At, fmt.Sprintf("  %s\tKarpenter only\tKarpenter %s at %s\t", k.NodePool, node(k), off(k.At))})
		}
		for _, j := range r.UnmatchedJoiner {
			lines = append(lines, line{j.At, fmt.Sprintf("  %s\tJoiner only\t\tJoiner %s at %s", j.NodePool, node(j), off(j.At))})
		}
		sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
		for _, l := range lines {
			fmt.Fprintln(tw, l.text)
		}
		tw.Flush()
	}
	if len(r.Removals) > 0 {
		fmt.Fprintln(w, "removals that differ:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		side := func(who string, x *Removal) string {
			if x == nil {
				return who + " kept it"
			}
			s := fmt.Sprintf("%s removed it at %s", who, off(x.At))
			if x.Reason != "" {
				s += " (" + x.Reason + ")"
			}
			return s
		}
		for _, d := range r.Removals {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.NodeClaim, side("Karpenter", d.Karpenter), side("Joiner", d.Joiner))
		}
		tw.Flush()
	}
	if len(r.UnknownPrices) > 0 {
		fmt.Fprintf(w, "no price for %s: counted at $0\n", strings.Join(r.UnknownPrices, ", "))
	}
}

func launchLine(ns []Node) string {
	if len(ns) == 0 {
		return "0"
	}
	counts := map[string]int{}
	for _, n := range ns {
		counts[strings.TrimSpace(n.InstanceType+" "+n.CapacityType)]++
	}
	return fmt.Sprintf("%d (%s)", len(ns), countLine(counts))
}

func removalLine(rs []Removal) string {
	if len(rs) == 0 {
		return "0"
	}
	counts := map[string]int{}
	for _, r := range rs {
		counts[cmp.Or(r.Reason, "no reason seen")]++
	}
	return fmt.Sprintf("%d (%s)", len(rs), countLine(counts))
}

func countLine(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, ", ")
}
