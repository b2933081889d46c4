package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/handlers"
)

// foreignEvent is the sample Pending Pods event sent from another account.
func foreignEvent(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../events/pending-pods.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"account": "123456789012"`) {
		t.Fatal("the sample no longer names account 123456789012")
	}
	p := filepath.Join(t.TempDir(), "foreign.json")
	if err := os.WriteFile(p, []byte(strings.Replace(string(raw), `"account": "123456789012"`, `"account": "999999999999"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// `joiner invoke` builds the functions' configuration from the variables the Lambdas
// read (handlers.ConfigFromEnv), with the simulated account as JOINER_ACCOUNT_ID
// unless the environment names another: an event from another account is ignored
// and changes nothing, as the README says of the deployed functions. (It used to
// launch five nodes.)
func TestInvokeSimulatedHonoursTheFunctionsEnvironment(t *testing.T) {
	foreign := foreignEvent(t)
	t.Setenv(handlers.EnvAccountID, "")
	o, code, stderr := invokeJSON(t, "provisioner", "-e", foreign)
	if code != 0 || o.Summary == nil {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if o.Summary.Action != "ignored" || !strings.Contains(o.Summary.Ignored, "event from account 999999999999, not 123456789012") {
		t.Errorf("summary %+v: want the foreign-account event ignored", o.Summary)
	}
	if len(o.Changes) != 0 {
		t.Errorf("a foreign-account event changed %+v", o.Changes)
	}

	// JOINER_ACCOUNT_ID is honoured: the same event is now this function's, and the
	// simulated account's own sample is the foreign one.
	t.Setenv(handlers.EnvAccountID, "999999999999")
	if o, code, stderr = invokeJSON(t, "provisioner", "-e", foreign); code != 0 || o.Summary == nil || o.Summary.Action == "ignored" {
		t.Fatalf("with JOINER_ACCOUNT_ID=999999999999: exit %d, summary %+v, stderr:\n%s", code, o.Summary, stderr)
	}
	if countChanges(o.Changes, "instance launched") == 0 {
		t.Errorf("with JOINER_ACCOUNT_ID=999999999999 the event launched nothing: %+v", o.Changes)
	}
	if o, _, _ = invokeJSON(t, "provisioner", "-e", "../../events/pending-pods.json"); o.Summary == nil || o.Summary.Action != "ignored" || len(o.Changes) != 0 {
		t.Errorf("with JOINER_ACCOUNT_ID=999999999999 the sample from 123456789012: summary %+v, changes %+v; want it ignored", o.Summary, o.Changes)
	}

	// The rest of the functions' variables are read and checked the same way.
	t.Setenv(handlers.EnvAccountID, "")
	t.Setenv(handlers.EnvMinSavings, "5")
	if _, code, stderr = invokeJSON(t, "consolidator", "-e", "../../events/scheduled-rule.json"); code != 2 ||
		!strings.Contains(stderr, `JOINER_MIN_SAVINGS_FRACTION="5": want a number in [0, 1)`) {
		t.Errorf("JOINER_MIN_SAVINGS_FRACTION=5: exit %d, stderr %q; want the variable named", code, stderr)
	}
	t.Setenv(handlers.EnvMinSavings, "")
	t.Setenv(handlers.EnvRebalanceMode, "taint")
	if o, code, stderr = invokeJSON(t, "interruption", "-e", "../../events/rebalance.json"); code != 0 || o.Summary == nil ||
		strings.Contains(o.Summary.Ignored, "REBALANCE_MODE=ignore") {
		t.Errorf("JOINER_REBALANCE_MODE=taint: exit %d, summary %+v, stderr:\n%s; want the mode honoured", code, o.Summary, stderr)
	}
}
