package replay

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// Chart geometry, in SVG user units.
const (
	chartWidth  = 820.0
	panelHeight = 200.0
	panelGap    = 56.0
	marginLeft  = 56.0
	marginRight = 72.0
	marginTop   = 40.0
)

// WriteSVG draws one panel per result: node count (steps, left axis), $/hour of the
// instances running (right axis) and the lower bound's $/hour (dashed), over time.
func WriteSVG(w io.Writer, results []*Result) error {
	height := marginTop + float64(len(results))*(panelHeight+panelGap)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="13"><tspan fill="#1f77b4">■ nodes</tspan>  <tspan fill="#d62728">■ $/hour</tspan>  <tspan fill="#7f7f7f">┄ lower bound $/hour</tspan></text>`+"\n", marginLeft)
	for i, r := range results {
		panel(&b, r, marginTop+float64(i)*(panelHeight+panelGap))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func panel(b *strings.Builder, r *Result, top float64) {
	plotW := chartWidth - marginLeft - marginRight
	title := r.Scenario
	if r.NodePools != "" {
		title += " (NodePools: " + r.NodePools + ")"
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="12" font-weight="bold">%s — $%.4f total, lower bound $%.4f</text>`+"\n",
		marginLeft, top+12, html.EscapeString(title), r.Cost, r.LowerBound)
	y0 := top + 20
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#ccc"/>`+"\n", marginLeft, y0, plotW, panelHeight-20)
	if len(r.Series) == 0 {
		return
	}
	maxNodes := float64((max(1, r.MaxNodes) + 3) / 4 * 4) // whole nodes on every grid line
	maxPrice := 0.0
	for _, s := range r.Series {
		maxPrice = math.Max(maxPrice, math.Max(s.Price, s.LowerBound))
	}
	maxPrice = niceCeil(maxPrice)
	span := float64(max(r.Simulated, time.Minute))
	x := func(d time.Duration) float64 { return marginLeft + plotW*float64(d)/span }
	h := panelHeight - 20
	yN := func(v float64) float64 { return y0 + h - h*v/maxNodes }
	yP := func(v float64) float64 { return y0 + h - h*v/maxPrice }
	axes(b, r, x, y0, h, maxNodes, maxPrice, plotW)
	step(b, r.Series, x, func(s Sample) float64 { return yN(float64(s.Nodes)) }, r.Simulated, `stroke="#1f77b4" stroke-width="2"`)
	step(b, r.Series, x, func(s Sample) float64 { return yP(s.Price) }, r.Simulated, `stroke="#d62728" stroke-width="1.5"`)
	step(b, r.Series, x, func(s Sample) float64 { return yP(s.LowerBound) }, r.Simulated, `stroke="#7f7f7f" stroke-dasharray="4 3"`)
}

// step draws a series as a step line (values hold until the next sample).
func step(b *strings.Builder, ss []Sample, x func(time.Duration) float64, y func(Sample) float64, end time.Duration, style string) {
	var pts []string
	for i, s := range ss {
		if i > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At), y(ss[i-1])))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At), y(s)))
	}
	pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(end), y(ss[len(ss)-1])))
	fmt.Fprintf(b, `<polyline fill="none" %s points="%s"/>`+"\n", style, strings.Join(pts, " "))
}

func axes(b *strings.Builder, r *Result, x func(time.Duration) float64, y0, h, maxNodes, maxPrice, plotW float64) {
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		y := y0 + h - h*f
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", marginLeft, marginLeft+plotW, y, y)
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end" fill="#1f77b4">%s</text>`+"\n", marginLeft-6, y+4, trimFloat(maxNodes*f))
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" fill="#d62728">$%s</text>`+"\n", marginLeft+plotW+6, y+4, trimFloat(maxPrice*f))
	}
	tick := tickEvery(r.Simulated)
	for d := time.Duration(0); d <= r.Simulated; d += tick {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", x(d), y0+h+14, fmtClock(d))
	}
}

func tickEvery(total time.Duration) time.Duration {
	for _, t := range []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour} {
		if total/t <= 8 {
			return t
		}
	}
	return 12 * time.Hour
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten (a readable axis maximum).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 0.01
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.4f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" {
		return "0"
	}
	return s
}
