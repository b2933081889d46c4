package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParse: no scenario text panics the loader, an error never names a Go type,
// and a scenario that loads is within every bound a replay relies on to finish (the
// fields validate checks, after defaults).
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob("../../testdata/scenarios/*/" + ScenarioFile)
	for _, p := range paths {
		if raw, err := os.ReadFile(p); err == nil {
			f.Add(raw)
		}
	}
	for _, s := range []string{
		"cluster: c\nduration: 30m\nsettings: {tick: 1ns, provisionerEvery: 1ns}\n",
		"cluster: c\nduration: 30m\ntimeline:\n- at: -5m\n  spotInterrupt: {fraction: 5}\n- at: 1m\n  healthEvent: {startIn: 2h, endIn: 1h}\n",
		"cluster: c\nduration: 30m\ntimeline:\n- at: 1m\n  event: e.json\n  function: janitor\n- at: 2m\n  scale: a/b\n  replicas: 1000000000\n",
		"cluster: c\nduration: 30m\ntimeline:\n- at: 1m\n  faults: {faults: [{kind: latency, latency: 1h}, {kind: throttle, rate: 5}]}\n",
		"cluster: c\nduration: 30m\nexpect:\n- at: 40m\n  nodes: {min: 1}\n", "[]", "null", "", "cluster: c\nduration: 1h\n---\ncluster: d\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, raw []byte) {
		sc, err := Parse(dir, raw)
		if err != nil {
			for _, goName := range []string{"replay.", "awssim.", "struct {", "Go struct", "Go value"} {
				if strings.Contains(err.Error(), goName) {
					t.Fatalf("error names a Go type: %v", err)
				}
			}
			return
		}
		s := sc.Settings
		steps := sc.Duration.D() / s.Tick.D()
		switch {
		case sc.Duration <= 0 || sc.Duration.D() > MaxDuration:
			t.Fatalf("duration %s accepted", sc.Duration.D())
		case s.Tick.D() < MinTick || s.Tick.D() > MaxTick || steps > MaxSteps:
			t.Fatalf("tick %s accepted (%d steps)", s.Tick.D(), steps)
		case s.FunctionTimeout.D() <= 0 || s.FunctionTimeout.D() > MaxFunctionTimeout:
			t.Fatalf("functionTimeout %s accepted", s.FunctionTimeout.D())
		}
		for _, every := range []time.Duration{s.ProvisionerEvery.D(), s.ConsolidatorEvery.D()} {
			if every != 0 && (every < MinEvery || every > MaxEvery) {
				t.Fatalf("schedule every %s accepted", every)
			}
		}
		for i, st := range sc.Timeline {
			if st.At < 0 || st.At > sc.Duration {
				t.Fatalf("timeline[%d].at %s accepted", i, st.At.D())
			}
			if st.Scale != "" && (st.Replicas == nil || *st.Replicas < 0) {
				t.Fatalf("timeline[%d]: scale without valid replicas accepted", i)
			}
			if si := st.SpotInterrupt; si != nil && (si.Fraction < 0 || si.Fraction > 1 || si.Count < 0) {
				t.Fatalf("timeline[%d].spotInterrupt %+v accepted", i, *si)
			}
			if h := st.HealthEvent; h != nil && (h.StartIn < 0 || h.EndIn <= h.StartIn) {
				t.Fatalf("timeline[%d].healthEvent %+v accepted", i, *h)
			}
			if st.Faults != nil && st.Faults.Validate() != nil {
				t.Fatalf("timeline[%d].faults accepted: %v", i, st.Faults.Validate())
			}
		}
	})
}
