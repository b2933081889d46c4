package replay

import (
	"context"
	"strings"
	"testing"
)

// TestScenarios replays every scenario of testdata/scenarios and fails on an
// unmet expectation or a failed replay.
func TestScenarios(t *testing.T) {
	scenarios, err := LoadAll("../../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			var steps strings.Builder
			res, err := Run(context.Background(), sc, Options{Steps: &steps})
			if err != nil {
				t.Fatalf("%v\n%s", err, steps.String())
			}
			for _, o := range res.Expectations {
				if !o.Met {
					t.Errorf("expectation not met: %s: %s", o.Check, o.Detail)
				}
			}
			if t.Failed() || testing.Verbose() {
				var sum strings.Builder
				WriteSummary(&sum, res)
				t.Logf("steps:\n%s%s", steps.String(), sum.String())
			}
		})
	}
}

// TestReplayIsDeterministic replays seed 001 twice: the steps (names,
// instance ids, times, prices) must be the same, or a what-if comparison would measure noise.
func TestReplayIsDeterministic(t *testing.T) {
	sc, err := Load("../../testdata/scenarios/001-heavy-app")
	if err != nil {
		t.Fatal(err)
	}
	var runs [2]string
	for i := range runs {
		var steps strings.Builder
		if _, err := Run(context.Background(), sc, Options{Steps: &steps}); err != nil {
			t.Fatal(err)
		}
		runs[i] = steps.String()
	}
	if runs[0] == "" {
		t.Fatal("the replay printed no steps")
	}
	if runs[0] != runs[1] {
		t.Errorf("two replays differ:\n--- first\n%s\n--- second\n%s", runs[0], runs[1])
	}
}
