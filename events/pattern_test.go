package events

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// Each installed pattern matches exactly the samples its function handles.
func TestPatternsSelectTheirSamples(t *testing.T) {
	patterns := map[string]Pattern{
		"interruption-ec2":    InterruptionEC2Pattern(),
		"interruption-health": InterruptionHealthPattern(),
		"pending-pods":        PendingPodsPattern(),
	}
	// Which pattern must match each input; "" means none of them.
	want := map[string]string{
		"spot-interruption.json":       "interruption-ec2",
		"rebalance.json":               "interruption-ec2",
		"state-change-terminated.json": "interruption-ec2",
		"health-scheduled-change.json": "interruption-health",
		"pending-pods.json":            "pending-pods",
		// Schedules reach their functions through Scheduler targets, not rules.
		"scheduled-rule.json": "",
		"scheduler.json":      "",
		"testdata/ec2-instance-state-change-pending.json":           "interruption-ec2",
		"testdata/aws-health-ec2-scheduled-change.nth-fixture.json": "interruption-health",
		"testdata/asg-terminate-lifecycle-action.json":              "",
		"testdata/PROPOSED-pending-pods-batch.json":                 "",
	}
	files, _ := filepath.Glob("*.json")
	for _, f := range files {
		if _, ok := want[f]; !ok {
			t.Errorf("sample %s has no expectation here", f)
		}
	}
	health := string(readFile(t, "health-scheduled-change.json"))
	extra := map[string]string{
		"health RDS":   strings.Replace(health, `"service": "EC2"`, `"service": "RDS"`, 1),
		"health issue": strings.Replace(health, `"eventTypeCategory": "scheduledChange"`, `"eventTypeCategory": "issue"`, 1),
		"ec2 lowercase detail-type": strings.Replace(string(readFile(t, "spot-interruption.json")),
			"EC2 Spot Instance Interruption Warning", "ec2 spot instance interruption warning", 1),
		"forwarder impostor source": strings.Replace(string(readFile(t, "pending-pods.json")), `"joiner.forwarder"`, `"aws.joiner"`, 1),
	}
	inputs := map[string][]byte{}
	for f := range want {
		inputs[f] = readFile(t, f)
	}
	for name, raw := range extra {
		inputs[name] = []byte(raw)
		want[name] = ""
	}
	for input, raw := range inputs {
		for name, p := range patterns {
			got, err := p.Matches(raw)
			if err != nil {
				t.Fatalf("%s on %s: %v", name, input, err)
			}
			if exp := want[input] == name; got != exp {
				t.Errorf("pattern %s on %s: matched=%v, want %v", name, input, got, exp)
			}
		}
	}
}

// A rule must never deliver an event its function would reject as malformed or ignore:
// every sample a pattern matches decodes to a handled kind.
func TestMatchedSamplesDecodeToHandledKinds(t *testing.T) {
	files, _ := filepath.Glob("*.json")
	more, _ := filepath.Glob("testdata/*.json")
	for _, f := range append(files, more...) {
		raw := readFile(t, f)
		for _, p := range []Pattern{InterruptionEC2Pattern(), InterruptionHealthPattern(), PendingPodsPattern()} {
			if ok, _ := p.Matches(raw); ok {
				ev, err := Decode(raw)
				if err != nil || ev.Kind() == KindIgnored {
					t.Errorf("%s matches a rule but decodes to %v, %v", f, ev, err)
				}
			}
		}
	}
}

func TestPatternJSON(t *testing.T) {
	cases := map[string]struct {
		p    Pattern
		want string
	}{
		"ec2": {InterruptionEC2Pattern(),
			`{"detail-type":["EC2 Spot Instance Interruption Warning","EC2 Instance Rebalance Recommendation","EC2 Instance State-change Notification"],"source":["aws.ec2"]}`},
		"health": {InterruptionHealthPattern(),
			`{"detail":{"eventTypeCategory":["scheduledChange"],"service":["EC2"]},"detail-type":["AWS Health Event"],"source":["aws.health"]}`},
		"pods":   {PendingPodsPattern(), `{"detail-type":["Pending Pods"],"source":["joiner.forwarder"]}`},
		"prefix": {Pattern{"source": Values{Prefix("joiner."), Exact("x")}}, `{"source":[{"prefix":"joiner."},"x"]}`},
	}
	for name, c := range cases {
		b, err := json.Marshal(c.p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(b) != c.want {
			t.Errorf("%s: got %s\nwant %s", name, b, c.want)
		}
	}
	for name, bad := range map[string]Pattern{
		"empty":        {},
		"empty values": {"source": Values{}},
		"empty nested": {"detail": Pattern{}},
		"nil field":    {"source": nil},
	} {
		if _, err := json.Marshal(bad); err == nil {
			t.Errorf("%s: rendered without error", name)
		}
	}
}

// The matching semantics, one rule at a time.
func TestPatternSemantics(t *testing.T) {
	p := Pattern{
		"source": Strings("a", "b"),
		"detail": Pattern{
			"state": Values{Exact("running"), Prefix("stop")},
			"meta":  Pattern{"zone": Strings("z1")},
		},
	}
	cases := map[string]struct {
		event string
		want  bool
	}{
		"all match":                {`{"source":"a","detail":{"state":"running","meta":{"zone":"z1"},"x":1}}`, true},
		"second value of OR":       {`{"source":"b","detail":{"state":"running","meta":{"zone":"z1"}}}`, true},
		"prefix":                   {`{"source":"a","detail":{"state":"stopping","meta":{"zone":"z1"}}}`, true},
		"array value, one matches": {`{"source":["x","a"],"detail":{"state":"running","meta":{"zone":"z1"}}}`, true},
		"array value, none match":  {`{"source":["x","y"],"detail":{"state":"running","meta":{"zone":"z1"}}}`, false},
		"exact is case-sensitive":  {`{"source":"A","detail":{"state":"running","meta":{"zone":"z1"}}}`, false},
		"exact is type-sensitive":  {`{"source":"a","detail":{"state":"running","meta":{"zone":1}}}`, false},
		"prefix needs a string":    {`{"source":"a","detail":{"state":5,"meta":{"zone":"z1"}}}`, false},
		"missing leaf":             {`{"source":"a","detail":{"meta":{"zone":"z1"}}}`, false},
		"missing nested":           {`{"source":"a","detail":{"state":"running"}}`, false},
		"nested is not an object":  {`{"source":"a","detail":{"state":"running","meta":"z1"}}`, false},
		"detail as a string":       {`{"source":"a","detail":"{\"state\":\"running\",\"meta\":{\"zone\":\"z1\"}}"}`, false},
		"null leaf":                {`{"source":null,"detail":{"state":"running","meta":{"zone":"z1"}}}`, false},
		"other fields ignored":     {`{"id":"1","source":"a","account":"x","detail":{"state":"stop","meta":{"zone":"z1","k":[1]}}}`, true},
	}
	for name, c := range cases {
		got, err := p.Matches([]byte(c.event))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != c.want {
			t.Errorf("%s: matched=%v, want %v", name, got, c.want)
		}
	}
	for _, bad := range []string{``, `[1]`, `{"a":`} {
		if _, err := p.Matches([]byte(bad)); err == nil {
			t.Errorf("Matches(%q): no error", bad)
		}
	}
}
