package karpenter

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestNillableDurationRoundTrip: every value MarshalJSON writes reads back as itself,
// including an unset one (written as null), so a NodePool Joiner serialises (the
// benchmark's translation, the recorder's snapshots) can be decoded again.
func TestNillableDurationRoundTrip(t *testing.T) {
	for _, d := range []NillableDuration{{}, NeverDuration(), NewDuration(0), NewDuration(30 * time.Second), NewDuration(720 * time.Hour)} {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("marshal %v: %v", d, err)
		}
		var got NillableDuration
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s does not read back: %v", b, err)
		}
		if got.IsSet() != d.IsSet() || got.IsNever() != d.IsNever() || got.String() != d.String() {
			t.Errorf("%s read back as %q (set %v, never %v), want %q", b, got, got.IsSet(), got.IsNever(), d)
		}
	}
	var tmpl NodeClaimTemplateSpec
	b, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tmpl); err != nil {
		t.Errorf("an unset expireAfter written as %s does not read back: %v", b, err)
	}
	for _, bad := range []string{`""`, `"-5m"`, `"5 minutes"`, `5`} {
		var got NillableDuration
		err := json.Unmarshal([]byte(bad), &got)
		if err == nil || !strings.Contains(err.Error(), "duration") {
			t.Errorf("%s: want an error naming the duration, got %v", bad, err)
		}
	}
}
