package replay

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeScenario writes scenario.yaml (a valid base with extra appended) and files
// into a fresh folder.
func writeScenario(t *testing.T, body string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ScenarioFile), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const (
	baseScenario = "cluster: c\nduration: 30m\n"
	sampleEvent  = `{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events","account":"1","time":"2026-12-01T09:00:00Z","region":"us-east-1","resources":[],"detail":{}}`
)

// Every field that could hang a replay, exhaust memory or stop it half-way is
// refused when the scenario loads, with the field and the range allowed.
func TestScenarioBounds(t *testing.T) {
	files := map[string]string{"null.json": "null", "list.json": "[1]", "sched.json": sampleEvent, "nosource.json": `{"detail-type":"x"}`}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"tick of a nanosecond", baseScenario + "settings: {tick: 1ns}\n", "settings.tick: 1ns is out of range: want 1s to 10m0s"},
		{"tick too coarse", baseScenario + "settings: {tick: 2h}\n", "settings.tick: 2h0m0s is out of range"},
		{"too many steps", "cluster: c\nduration: 744h\nsettings: {tick: 1s}\n", "settings.tick: 1s over a duration of 744h0m0s is 2678400 simulation steps, more than 300000"},
		{"duration past a month", "cluster: c\nduration: 10000h\n", "duration: 10000h0m0s is out of range: want 1ns to 744h0m0s"},
		{"negative duration", "cluster: c\nduration: -5m\n", "duration: -5m0s is out of range"},
		{"provisioner every nanosecond", baseScenario + "settings: {provisionerEvery: 1ns}\n", "settings.provisionerEvery: 1ns is out of range: want 1m0s to 24h0m0s (0 turns the schedule off; EventBridge's shortest rate is one minute)"},
		{"consolidator every second", baseScenario + "settings: {consolidatorEvery: 1s}\n", "settings.consolidatorEvery: 1s is out of range"},
		{"function timeout past Lambda's", baseScenario + "settings: {functionTimeout: 1h}\n", "settings.functionTimeout: 1h0m0s is out of range: want 1s to 15m0s (Lambda's limit)"},
		{"negative register delay", baseScenario + "settings: {registerAfter: -1s}\n", "settings.registerAfter: -1s is out of range: want 0s to 1h0m0s"},
		{"forwarder delay", baseScenario + "settings: {forwarderDelay: 48h}\n", "settings.forwarderDelay: 48h0m0s is out of range"},
		{"savings fraction", baseScenario + "settings: {minSavingsFraction: 1.5}\n", "settings.minSavingsFraction: 1.5 is out of range: want a number from 0 to below 1"},
		{"negative time", baseScenario + "timeline:\n- at: -5m\n  forwarder: down\n", "timeline[0].at: -5m0s is out of range: want 0 to the duration (30m0s)"},
		{"step after the end", baseScenario + "timeline:\n- at: 2h\n  forwarder: down\n", "timeline[0].at: 2h0m0s is out of range"},
		{"expectation before the start", baseScenario + "expect:\n- at: -1m\n  allPodsRunning: true\n", "expect[0].at: -1m0s is out of range"},
		{"spot fraction of 5", baseScenario + "timeline:\n- at: 5m\n  spotInterrupt: {fraction: 5}\n", "timeline[0].spotInterrupt.fraction: 5 is out of range: want more than 0, at most 1"},
		{"negative spot fraction", baseScenario + "timeline:\n- at: 5m\n  spotInterrupt: {fraction: -0.5}\n", "timeline[0].spotInterrupt.fraction: -0.5 is out of range"},
		{"spot count and fraction", baseScenario + "timeline:\n- at: 5m\n  spotInterrupt: {fraction: 0.5, count: 2}\n", "timeline[0].spotInterrupt: set fraction or count, not both"},
		{"spot within past the end", baseScenario + "timeline:\n- at: 5m\n  spotInterrupt: {count: 1, within: 100h}\n", "timeline[0].spotInterrupt.within: 100h0m0s is out of range"},
		{"health window backwards", baseScenario + "timeline:\n- at: 5m\n  healthEvent: {count: 1, startIn: 2h, endIn: 1h}\n", "timeline[0].healthEvent.endIn: 1h0m0s ends before the window starts (startIn 2h0m0s): want endIn after startIn"},
		{"health window negative", baseScenario + "timeline:\n- at: 5m\n  healthEvent: {count: 1, startIn: -1h, endIn: 1h}\n", "timeline[0].healthEvent.startIn: -1h0m0s is out of range"},
		{"health count", baseScenario + "timeline:\n- at: 5m\n  healthEvent: {count: -3, startIn: 1h, endIn: 2h}\n", "timeline[0].healthEvent.count: -3 is out of range: want 1 to 10000"},
		{"event window backwards", baseScenario + "timeline:\n- at: 5m\n  event: sched.json\n  function: interruption\n  window: {startIn: 1h, endIn: 10m}\n", "timeline[0].window.endIn: 10m0s ends before the window starts"},
		{"a billion replicas", baseScenario + "timeline:\n- at: 5m\n  scale: default/app\n  replicas: 1000000000\n", "timeline[0].replicas: 1000000000 is out of range: want 0 to 20000 (the in-memory cluster's cap per workload"},
		{"replicas past the cap", baseScenario + "timeline:\n- at: 5m\n  scale: default/app\n  replicas: 20001\n", "timeline[0].replicas: 20001 is out of range: want 0 to 20000"},
		{"negative replicas", baseScenario + "timeline:\n- at: 5m\n  scale: default/app\n  replicas: -1\n", "timeline[0].replicas: -1 is out of range"},
		{"replicas as a float", baseScenario + "timeline:\n- at: 5m\n  scale: default/app\n  replicas: 1.5\n", "timeline.replicas: want a whole number"},
		{"terminate count", baseScenario + "timeline:\n- at: 5m\n  terminate: {select: any, count: -2}\n", "timeline[0].terminate.count: -2 is out of range"},
		{"release family", baseScenario + "timeline:\n- at: 5m\n  releaseAMI: {family: al2024, release: v1}\n", `timeline[0].releaseAMI.family: "al2024": want al2023, al2 or bottlerocket`},
		{"release name", baseScenario + "timeline:\n- at: 5m\n  releaseAMI: {family: al2023, release: \"a b\"}\n", `timeline[0].releaseAMI.release: "a b": want a build name`},
		{"release and scale", baseScenario + "timeline:\n- at: 5m\n  releaseAMI: {family: al2023, release: v1}\n  scale: default/x\n  replicas: 1\n", "want exactly one action"},
		{"fault rate", baseScenario + "timeline:\n- at: 5m\n  faults: {faults: [{kind: throttle, rate: 5}]}\n", "timeline[0].faults: faults[0]: rate: 5 is out of range: want 0 to 1"},
		{"real latency of an hour", baseScenario + "timeline:\n- at: 5m\n  faults: {faults: [{kind: latency, latency: 1h}]}\n", "timeline[0].faults: faults[0]: latency: 1h0m0s is out of range"},
		{"spot price", baseScenario + "timeline:\n- at: 5m\n  faults: {spotPrices: [{instanceType: m5.large, zone: us-east-1a, price: -1}]}\n", "timeline[0].faults: spotPrices[0].price"},
		{"faults as a list", baseScenario + "timeline:\n- at: 5m\n  faults: [1]\n", "timeline.faults: want an object, got a list"},
		// These crashed the replay half-way (issue 15).
		{"event file holding null", baseScenario + "timeline:\n- at: 5m\n  event: null.json\n  function: provisioner\n", "timeline[0].event: null.json: not an EventBridge event: the file holds null"},
		{"event file holding a list", baseScenario + "timeline:\n- at: 5m\n  event: list.json\n", "timeline[0].event: list.json: not an EventBridge event: the document: want an object (a mapping), got a list"},
		{"event without a source", baseScenario + "timeline:\n- at: 5m\n  event: nosource.json\n", `timeline[0].event: nosource.json: not an EventBridge event: "source" is missing`},
		{"missing event file", baseScenario + "timeline:\n- at: 5m\n  event: nothere.json\n", "timeline[0].event: nothere.json: open"},
		{"unknown function", baseScenario + "timeline:\n- at: 5m\n  event: sched.json\n  function: janitor\n", `timeline[0].function: unknown function "janitor": want provisioner, interruption, consolidator`},
		{"function with a capital", baseScenario + "timeline:\n- at: 5m\n  event: sched.json\n  function: Provisioner\n", `timeline[0].function: unknown function "Provisioner"`},
		{"duration of the wrong type", "cluster: c\nduration: [1]\n", `want a duration like "90s" or "10m", got [1]`},
		{"settings as a list", baseScenario + "settings: [1]\n", "settings: want an object, got a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeScenario(t, tc.body, files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, tc.want)
			}
			for _, goName := range []string{"replay.", "awssim.", "struct {", "Go struct", "Go value"} {
				if strings.Contains(err.Error(), goName) {
					t.Errorf("error %v names a Go type (%q)", err, goName)
				}
			}
		})
	}
}

// A valid scenario at the edges of every range still loads and runs, and an event
// step reaches the function it names.
func TestScenarioAtTheBoundsRuns(t *testing.T) {
	seed, err := filepath.Abs("../../testdata/seeds/001-heavy-app-fixed")
	if err != nil {
		t.Fatal(err)
	}
	body := "cluster: technews-karpenter-eks\nduration: 3m\nmanifests: [" + seed + "]\nsettings: {tick: 1s, provisionerEvery: 1m, consolidatorEvery: 0, functionTimeout: 15m, minSavingsFraction: 0}\n" +
		"timeline:\n- at: 0\n  event: sched.json\n  function: consolidator\n- at: 3m\n  forwarder: down\n"
	sc, err := Load(writeScenario(t, body, map[string]string{"sched.json": sampleEvent}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Invocations["consolidator"] != 1 || res.Errors != 0 {
		t.Errorf("invocations %v, %d error(s) %v: want the consolidator invoked once by the event", res.Invocations, res.Errors, res.ErrorMessages)
	}
}

// A workload past the in-memory cluster's replica cap in the manifests is refused
// before anything runs, naming the workload.
func TestReplicaCapInManifests(t *testing.T) {
	big := `apiVersion: apps/v1
kind: Deployment
metadata: {name: big, namespace: default}
spec:
  replicas: 20001
  selector: {matchLabels: {app: big}}
  template:
    metadata: {labels: {app: big}}
    spec:
      containers: [{name: c, image: nginx, resources: {requests: {cpu: 10m}}}]
`
	sc, err := Load(writeScenario(t, baseScenario+"manifests: [big.yaml]\n", map[string]string{"big.yaml": big}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), sc, Options{})
	want := "Deployment default/big: 20001 replicas is over the in-memory cluster's cap of 20000 per workload"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v\nwant it to contain %q", err, want)
	}
}
