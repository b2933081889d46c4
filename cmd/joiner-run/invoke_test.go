package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// invokeJSON runs `joiner invoke ARGS -o json` in-process and decodes its output.
func invokeJSON(t *testing.T, args ...string) (invokeOutput, int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), append(append([]string{"invoke"}, args...), "-o", "json"), &out, &errb)
	var o invokeOutput
	if code != 2 {
		if err := json.Unmarshal(out.Bytes(), &o); err != nil {
			t.Fatalf("joiner invoke %v: output is not JSON (%v):\n%s\nstderr:\n%s", args, err, out.String(), errb.String())
		}
	}
	return o, code, errb.String()
}

func countChanges(cs []change, what string) int {
	n := 0
	for _, c := range cs {
		if c.What == what {
			n++
		}
	}
	return n
}

// TestInvokeSampleEvents sends every sample event in events/ to the function its
// rule targets, on the default simulated world (seed 001: six pending pods, no node).
func TestInvokeSampleEvents(t *testing.T) {
	launches := func(t *testing.T, o invokeOutput) {
		s := o.Summary
		// Seed 001: heavy-app's 5 replicas and the s3-reader pod fit on 5 t3a.small.
		if s.PodsPending != 6 || len(s.NodesLaunched) != 5 || !strings.HasPrefix(s.Action, "launched 5 of 5") {
			t.Errorf("summary %+v, want 6 pending pods and 5 nodes launched", s)
		}
		if countChanges(o.Changes, "NodeClaim created") != 5 || countChanges(o.Changes, "instance launched") != 5 || len(o.Changes) != 10 {
			t.Errorf("changes %+v, want 5 NodeClaims and 5 instances", o.Changes)
		}
		for _, c := range o.Changes {
			if c.What == "instance launched" && !strings.Contains(c.Detail, "NodeClaim default-") {
				t.Errorf("instance %s does not name its NodeClaim: %s", c.Object, c.Detail)
			}
		}
	}
	ignored := func(reason string) func(*testing.T, invokeOutput) {
		return func(t *testing.T, o invokeOutput) {
			if o.Summary.Action != "ignored" || !strings.Contains(o.Summary.Ignored, reason) {
				t.Errorf("summary %+v, want ignored because %q", o.Summary, reason)
			}
			if len(o.Changes) != 0 {
				t.Errorf("an ignored event changed %+v", o.Changes)
			}
		}
	}
	nothing := func(t *testing.T, o invokeOutput) {
		if !strings.HasPrefix(o.Summary.Action, "nothing to consolidate") || len(o.Changes) != 0 {
			t.Errorf("summary %+v, changes %+v; want nothing to consolidate on a cluster without nodes", o.Summary, o.Changes)
		}
	}
	cases := []struct {
		fn, event string
		check     func(*testing.T, invokeOutput)
	}{
		{"provisioner", "pending-pods.json", launches},
		{"provisioner", "scheduled-rule.json", launches},
		{"consolidator", "scheduled-rule.json", nothing},
		{"consolidator", "scheduler.json", nothing},
		// The samples name i-1234567890abcdef0, which Joiner did not launch.
		{"interruption", "spot-interruption.json", ignored("no instance of this event is one Joiner launched")},
		{"interruption", "state-change-terminated.json", ignored("no instance of this event is one Joiner launched")},
		{"interruption", "health-scheduled-change.json", ignored("no instance of this event is one Joiner launched")},
		{"interruption", "rebalance.json", ignored("REBALANCE_MODE=ignore")},
		{"provisioner", "spot-interruption.json", ignored("not a provisioner trigger")},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.event] = true
		t.Run(tc.fn+"/"+tc.event, func(t *testing.T) {
			o, code, stderr := invokeJSON(t, tc.fn, "-e", filepath.Join("../../events", tc.event))
			if code != 0 || o.Summary == nil || o.Error != "" {
				t.Fatalf("exit %d, error %q, stderr:\n%s", code, o.Error, stderr)
			}
			if o.Summary.Function != tc.fn {
				t.Errorf("summary of %q, want %q", o.Summary.Function, tc.fn)
			}
			tc.check(t, o)
		})
	}
	samples, _ := filepath.Glob("../../events/*.json")
	for _, s := range samples {
		if !seen[filepath.Base(s)] {
			t.Errorf("sample %s is not invoked by this test", s)
		}
	}
}

// TestInvokeTableOutput checks what a user sees: the summary as JSON on stdout, the
// table of changes after it, and the handler's JSON logs (each with a level) on stderr.
func TestInvokeTableOutput(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"invoke", "provisioner", "-e", "../../events/pending-pods.json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	summary, table, ok := strings.Cut(out.String(), "\n\n")
	if !ok {
		t.Fatalf("no table after the summary:\n%s", out.String())
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(summary), &s); err != nil || s["function"] != "provisioner" {
		t.Fatalf("stdout does not start with the summary JSON (%v):\n%s", err, summary)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if !strings.HasPrefix(lines[0], "CHANGE") || len(lines) != 11 || !strings.HasPrefix(lines[10], "instance launched") {
		t.Errorf("table:\n%s", table)
	}
	decisions := 0
	sc := bufio.NewScanner(&errb)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("stderr line is not JSON: %s", sc.Text())
		}
		if _, ok := rec["level"]; !ok {
			t.Errorf("log line without level: %s", sc.Text())
		}
		if rec["msg"] == "decision" {
			decisions++
		}
	}
	if decisions != 1 {
		t.Errorf("%d decision log lines, want 1", decisions)
	}
}

// TestInvokeDryRunSimulated: with --dry-run the plan is the same, EC2 answers
// DryRunOperation for every mutating call and nothing changes.
func TestInvokeDryRunSimulated(t *testing.T) {
	o, code, stderr := invokeJSON(t, "provisioner", "-e", "../../events/pending-pods.json", "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(o.Summary.NodesLaunched) != 0 || len(o.Summary.DryRun) == 0 || len(o.Changes) != 0 {
		t.Fatalf("summary %+v changes %+v: want dry-run answers and no change", o.Summary, o.Changes)
	}
	fleets := 0
	for _, r := range o.Summary.DryRun {
		if !r.Allowed {
			t.Errorf("dry run %+v not allowed", r)
		}
		if r.Operation == "CreateFleet" {
			fleets++
		}
	}
	if fleets != 5 {
		t.Errorf("%d CreateFleet dry runs, want one per planned node (5)", fleets)
	}
}

// TestInvokeScenarioAndManifests loads the simulated cluster from a scenario and
// from -f, and names the cluster from them.
func TestInvokeScenarioAndManifests(t *testing.T) {
	o, code, stderr := invokeJSON(t, "provisioner", "-e", "../../events/scheduled-rule.json", "--scenario", "../../testdata/scenarios/001-heavy-app")
	if code != 0 || len(o.Summary.NodesLaunched) != 5 {
		t.Fatalf("scenario 001: exit %d, %+v\n%s", code, o.Summary, stderr)
	}
	// -f names the cluster from the EC2NodeClasses' discovery tags: the sample batch
	// is for technews-karpenter-eks, seed 001's cluster.
	o, code, stderr = invokeJSON(t, "provisioner", "-e", "../../events/pending-pods.json", "-f", "../../testdata/seeds/001-heavy-app-fixed")
	if code != 0 || len(o.Summary.NodesLaunched) != 5 {
		t.Fatalf("seed 001 by -f: exit %d, %+v\n%s", code, o.Summary, stderr)
	}
	// Seed 002 (cluster kubean-demo) names AMIs by id that the simulated account does
	// not have: the handler's error is the exit status, and the failed launch left
	// nothing behind.
	o, code, _ = invokeJSON(t, "provisioner", "-e", "../../events/scheduled-rule.json", "-f", "../../testdata/seeds/002-kubean-filled")
	if code != 1 || !strings.Contains(o.Error, "ami-0fedcba9876543210") || len(o.Changes) != 0 {
		t.Errorf("seed 002: exit %d, error %q, changes %+v; want exit 1 naming the missing AMI and nothing left", code, o.Error, o.Changes)
	}
	// A Pending Pods batch for another cluster is ignored.
	o, code, _ = invokeJSON(t, "provisioner", "-e", "../../events/pending-pods.json", "-f", "../../testdata/seeds/002-kubean-filled")
	if code != 0 || o.Summary.Action != "ignored" || !strings.Contains(o.Summary.Ignored, "technews-karpenter-eks") || len(o.Changes) != 0 {
		t.Errorf("foreign batch: exit %d %+v %+v", code, o.Summary, o.Changes)
	}
}

func TestInvokeErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"detail-type": "Pending Pods"`), 0o644); err != nil {
		t.Fatal(err)
	}
	o, code, stderr := invokeJSON(t, "provisioner", "-e", bad)
	if code != 1 || !strings.Contains(o.Error, "invalid JSON") {
		t.Errorf("malformed event: exit %d, error %q, stderr %s", code, o.Error, stderr)
	}
	for _, args := range [][]string{
		{"-e", "../../events/pending-pods.json"},
		{"scaler", "-e", "../../events/pending-pods.json"},
		{"provisioner"},
		{"provisioner", "-e", "../../events/nope.json"},
		{"provisioner", "-e", "../../events/pending-pods.json", "--live", "-f", "x"},
		{"provisioner", "-e", "../../events/pending-pods.json", "--kubeconfig", "x"},
	} {
		if _, code, stderr := invokeJSON(t, args...); code != 2 || !strings.Contains(stderr, "joiner invoke:") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, stderr)
		}
	}
}
