package events

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/quantity"
)

// FuzzDecode: no input panics; an accepted input re-encodes, and the encoding decodes
// to the same kind, key and envelope (encode is a fixpoint after one trip).
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("*.json")
	more, _ := filepath.Glob("testdata/*.json")
	for _, file := range append(files, more...) {
		f.Add(readFile(f, file))
	}
	for _, s := range []string{``, `{}`, `null`, `{"source":"aws.scheduler","detail-type":"Scheduled Event","detail":"\"{}\""}`,
		`{"source":"joiner.forwarder","detail-type":"Pending Pods","detail":{"schemaVersion":"1","cluster":"c","batchId":"b","observedAt":"2024-05-01T12:00:00Z","pods":[{}]}}`,
		// Quantities at and past what the engine's int64 vectors hold.
		`{"source":"joiner.forwarder","detail-type":"Pending Pods","detail":{"schemaVersion":"1","cluster":"c","batchId":"b","observedAt":"2024-05-01T12:00:00Z","pods":[` +
			`{"namespace":"a","name":"p","uid":"u","containers":[{"name":"c","requests":{"cpu":"9007199254740","memory":"8Pi"}},{"name":"d","requests":{"cpu":"1e18"}}]},` +
			`{"namespace":"a","name":"q","uid":"u","requests":{"memory":"1e400"},"overhead":{"cpu":"-1"}}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := Decode(raw)
		if err != nil {
			if ev != nil {
				t.Fatalf("event and error: %#v, %v", ev, err)
			}
			return
		}
		if ev == nil {
			t.Fatal("nil event without error")
		}
		enc, err := Encode(ev)
		if err != nil {
			t.Fatalf("encode of a decoded %s: %v", ev.Kind(), err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("decode of own encoding %s: %v", enc, err)
		}
		if again.Kind() != ev.Kind() || again.DedupeKey() != ev.DedupeKey() {
			t.Fatalf("trip changed %s/%s into %s/%s", ev.Kind(), ev.DedupeKey(), again.Kind(), again.DedupeKey())
		}
		enc2, err := Encode(again)
		if err != nil {
			t.Fatal(err)
		}
		if string(enc2) != string(enc) {
			t.Fatalf("encoding not stable:\n%s\n%s", enc, enc2)
		}
		// A pod that passed decoding never asks the engine for more than its
		// vectors hold.
		if pp, ok := ev.(*PendingPods); ok {
			for i := range pp.Detail.Pods {
				if msg := quantity.PodProblem(pp.Detail.Pods[i].ToPod()); msg != "" {
					t.Fatalf("accepted pod %s: %s", pp.Detail.Pods[i].Key(), msg)
				}
			}
		}
		for _, p := range []Pattern{InterruptionEC2Pattern(), InterruptionHealthPattern(), PendingPodsPattern()} {
			if _, err := p.Matches(raw); err != nil && json.Valid(raw) {
				t.Fatalf("Matches failed on valid JSON: %v", err)
			}
		}
	})
}
