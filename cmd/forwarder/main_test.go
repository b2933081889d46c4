package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/joiner-autoscaler/joiner/events"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfigDefaultsAndOverrides(t *testing.T) {
	c, err := parseConfig(nil, envOf(map[string]string{"JOINER_CLUSTER_NAME": "prod", "JOINER_EVENT_BUS": "joiner"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Idle != time.Second || c.MaxWait != 10*time.Second || c.HealthAddr != ":8081" || c.LogLevel != slog.LevelInfo {
		t.Fatalf("defaults = %+v", c)
	}
	c, err = parseConfig([]string{"-idle=250ms", "-max-wait=3s"}, envOf(map[string]string{
		"JOINER_CLUSTER_NAME": "prod", "JOINER_EVENT_BUS": "joiner", "FORWARDER_IDLE": "2s", "LOG_LEVEL": "debug", "FORWARDER_HEALTH_ADDR": "127.0.0.1:9000"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Idle != 250*time.Millisecond || c.MaxWait != 3*time.Second || c.LogLevel != slog.LevelDebug || c.HealthAddr != "127.0.0.1:9000" {
		t.Fatalf("flags should win over env: %+v", c)
	}
}

func TestParseConfigNamesEveryProblem(t *testing.T) {
	_, err := parseConfig(nil, envOf(map[string]string{"FORWARDER_IDLE": "soon", "FORWARDER_MAX_WAIT": "-1s", "LOG_LEVEL": "loud"}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"JOINER_CLUSTER_NAME", "JOINER_EVENT_BUS", "FORWARDER_IDLE", "max-wait", `log level "loud"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestHealthReportsSyncAndLastPut(t *testing.T) {
	synced := false
	pub, _ := testPublisher(&fakeBus{})
	h := &health{synced: func() bool { return synced }, publisher: pub,
		batcher: NewBatcher(clocktesting.NewFakeClock(t0), time.Second, 10*time.Second, nil)}
	get := func() (int, healthReport) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var r healthReport
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatalf("body %q: %v", rec.Body.String(), err)
		}
		return rec.Code, r
	}
	if code, r := get(); code != http.StatusServiceUnavailable || r.Synced {
		t.Fatalf("before sync: %d %+v", code, r)
	}
	synced = true
	pub.Flush(t.Context(), []events.PendingPod{realisticPod(1)})
	code, r := get()
	if code != http.StatusOK || !r.Synced || r.LastSuccessfulPut == nil || !r.LastSuccessfulPut.Equal(t0) {
		t.Fatalf("after sync and a put: %d %+v", code, r)
	}
}
