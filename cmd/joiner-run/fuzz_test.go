package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseEvent: `joiner record --from FILE` reads any line a log export holds; no
// line panics it, a refusal never names a Go type, and an accepted line is an
// EventBridge event with a kind and a time.
func FuzzParseEvent(f *testing.F) {
	samples, _ := filepath.Glob("../../events/*.json")
	for _, p := range samples {
		if raw, err := os.ReadFile(p); err == nil {
			f.Add(raw)
		}
	}
	for _, s := range []string{`{"message": "{\"id\":\"x\",\"source\":\"aws.ec2\",\"detail-type\":\"EC2 Spot Instance Interruption Warning\",\"time\":\"2026-12-01T09:00:00Z\",\"detail\":{}}"}`,
		`[]`, `null`, `{"message": null}`, `{"message": "{\"message\": \"[]\"}"}`, `{"time": 5}`, `START RequestId: 0f4c`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := parseEvent(raw)
		if err != nil {
			for _, goName := range []string{"struct {", "Go struct", "Go value", "main."} {
				if strings.Contains(err.Error(), goName) {
					t.Fatalf("error names a Go type: %v", err)
				}
			}
			return
		}
		if ev.kind == "" || ev.at.IsZero() || len(ev.raw) == 0 {
			t.Fatalf("accepted %q as %+v", raw, ev)
		}
	})
}
