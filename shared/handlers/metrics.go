package handlers

import (
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"
)

// MetricsMessage is the "msg" of the one log line per invocation that carries its
// figures. The figures are plain fields of that JSON line, not CloudWatch Embedded
// Metric Format: every EMF metric is a custom metric at $0.30 a month (name ×
// dimension set), which alone put the control plane's bill over its $1 goal. The
// stack's dashboard reads the same figures with Logs Insights, e.g.
//
//	filter msg = "metrics" and function = "provisioner" | stats max(PodsPending) by bin(5m)
//
// and costs only while it is viewed ($0.005 per GB scanned).
const MetricsMessage = "metrics"

// Metrics collects one invocation's figures and writes them as one JSON log line
// (Flush).
type Metrics struct {
	mu     sync.Mutex
	values map[string]float64
	units  map[string]string
}

// NewMetrics returns an empty collector.
func NewMetrics() *Metrics {
	return &Metrics{values: map[string]float64{}, units: map[string]string{}}
}

// Add adds v to a figure; unit names what it counts (kept in the line's "units").
func (m *Metrics) Add(name, unit string, v float64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[name] += v
	m.units[name] = unit
}

// Flush writes the metrics line (nothing when no figure was set) and resets: the
// fields time, level, msg ("metrics"), function and cluster as every log line of
// the functions has them, then each figure under its name, and units (name to
// unit).
func (m *Metrics) Flush(w io.Writer, function, cluster string, now time.Time) error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.values) == 0 {
		return nil
	}
	names := make([]string, 0, len(m.values))
	for n := range m.values {
		names = append(names, n)
	}
	sort.Strings(names)
	line := map[string]any{"time": now.UTC().Format(time.RFC3339Nano), "level": "INFO", "msg": MetricsMessage,
		"function": function, "cluster": cluster}
	units := map[string]string{}
	for _, n := range names {
		line[n] = m.values[n]
		units[n] = m.units[n]
	}
	line["units"] = units
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	m.values = map[string]float64{}
	m.units = map[string]string{}
	_, err = w.Write(append(b, '\n'))
	return err
}
