package handlers

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The figures are fields of one JSON log line Logs Insights can filter and
// aggregate, with nothing CloudWatch would turn into a (billed) custom metric.
func TestMetricsLineIsPlainJSON(t *testing.T) {
	m := NewMetrics()
	m.Add("PodsPending", "Count", 3)
	m.Add("NodesLaunched", "Count", 1)
	m.Add("NodesLaunched", "Count", 1)
	var b strings.Builder
	at := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	if err := m.Flush(&b, "provisioner", "prod", at); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("want one line, got %q", b.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(b.String()), &line); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"msg": MetricsMessage, "level": "INFO", "function": "provisioner", "cluster": "prod",
		"time": "2026-12-04T03:00:00Z", "PodsPending": 3.0, "NodesLaunched": 2.0}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v", k, line[k], v)
		}
	}
	if _, emf := line["_aws"]; emf {
		t.Errorf("the line carries EMF metadata (each figure would be a billed custom metric): %s", b.String())
	}
	if u, _ := line["units"].(map[string]any); u["PodsPending"] != "Count" {
		t.Errorf("units = %v", line["units"])
	}
	b.Reset()
	if err := m.Flush(&b, "provisioner", "prod", at); err != nil || b.Len() != 0 {
		t.Fatalf("a second flush with nothing added wrote %q (%v)", b.String(), err)
	}
}
