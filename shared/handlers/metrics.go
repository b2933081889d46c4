package handlers

import (
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"
)

// MetricsNamespace is the CloudWatch namespace of Joiner's EMF metrics.
const MetricsNamespace = "Joiner"

// Metrics collects one invocation's counters and writes them as one CloudWatch
// Embedded Metric Format line, which Lambda's log pipeline turns into metrics
// without any API call.
type Metrics struct {
	mu     sync.Mutex
	values map[string]float64
	units  map[string]string
}

// NewMetrics returns an empty collector.
func NewMetrics() *Metrics {
	return &Metrics{values: map[string]float64{}, units: map[string]string{}}
}

// Add adds v to a metric.
func (m *Metrics) Add(name, unit string, v float64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[name] += v
	m.units[name] = unit
}

// Flush writes the EMF line (nothing when no metric was set) and resets.
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
	defs := make([]map[string]string, 0, len(names))
	line := map[string]any{"Function": function, "Cluster": cluster}
	for _, n := range names {
		defs = append(defs, map[string]string{"Name": n, "Unit": m.units[n]})
		line[n] = m.values[n]
	}
	line["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  MetricsNamespace,
			"Dimensions": [][]string{{"Cluster", "Function"}},
			"Metrics":    defs,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	m.values = map[string]float64{}
	m.units = map[string]string{}
	_, err = w.Write(append(b, '\n'))
	return err
}
