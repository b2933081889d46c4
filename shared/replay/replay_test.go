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
