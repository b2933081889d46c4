package events

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/conversion"
)

// semantic compares decoded events: quantities by value, times by instant, and nil
// apart from empty (a lost "resources": [] is a round-trip bug).
var semantic = conversion.EqualitiesOrDie(
	func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 },
	func(a, b time.Time) bool { return a.Equal(b) },
)

// samples maps each sample shipped for `sam local invoke -e` to the kind it decodes to.
var samples = map[string]Kind{
	"spot-interruption.json":       KindSpotInterruption,
	"rebalance.json":               KindRebalanceRecommendation,
	"state-change-terminated.json": KindStateChange,
	"health-scheduled-change.json": KindHealthScheduledChange,
	"scheduled-rule.json":          KindScheduledRule,
	"scheduler.json":               KindSchedulerTick,
	"pending-pods.json":            KindPendingPods,
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustDecode(t testing.TB, raw []byte) Event {
	t.Helper()
	ev, err := Decode(raw)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return ev
}

func generic(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return v
}

// Every *.json in the package directory is a sample and must be listed above, so a new
// sample cannot skip the round-trip test.
func TestEverySampleIsListed(t *testing.T) {
	files, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(samples) {
		t.Fatalf("samples on disk %v, listed %d", files, len(samples))
	}
	for _, f := range files {
		if _, ok := samples[f]; !ok {
			t.Errorf("%s is not listed in samples", f)
		}
	}
}

func TestSamplesRoundTrip(t *testing.T) {
	for file, kind := range samples {
		t.Run(file, func(t *testing.T) {
			raw := readFile(t, file)
			ev := mustDecode(t, raw)
			if ev.Kind() != kind {
				t.Fatalf("kind %s, want %s", ev.Kind(), kind)
			}
			enc, err := Encode(ev)
			if err != nil {
				t.Fatal(err)
			}
			// Semantically the same JSON as the sample: nothing lost, nothing added.
			if got, want := generic(t, enc), generic(t, raw); !reflect.DeepEqual(got, want) {
				t.Errorf("encoded differs from the sample\n got: %s\nwant: %s", enc, raw)
			}
			again := mustDecode(t, enc)
			if !semantic.DeepEqualWithNilDifferentFromEmpty(ev, again) {
				t.Errorf("decode(encode(ev)) != ev\n first: %#v\nsecond: %#v", ev, again)
			}
			if ev.DedupeKey() == "" || ev.DedupeKey() != again.DedupeKey() {
				t.Errorf("dedupe keys %q / %q", ev.DedupeKey(), again.DedupeKey())
			}
		})
	}
}

func TestSpotInterruption(t *testing.T) {
	ev := mustDecode(t, readFile(t, "spot-interruption.json")).(*SpotInterruption)
	if ev.InstanceID != "i-1234567890abcdef0" || ev.Action != "terminate" {
		t.Fatalf("got %+v", ev)
	}
	if want := time.Date(2024, 5, 1, 12, 2, 0, 0, time.UTC); !ev.Deadline().Equal(want) {
		t.Errorf("deadline %v, want %v", ev.Deadline(), want)
	}
	if ev.Account != "123456789012" || ev.Region != "us-east-2" || ev.Version != "0" {
		t.Errorf("envelope %+v", ev.Envelope)
	}
}

// The instance ID comes from the detail, never from the ARN: a non-standard ARN (as in
// NTH's sample) changes nothing.
func TestInstanceIDNotFromARN(t *testing.T) {
	raw := strings.Replace(string(readFile(t, "spot-interruption.json")),
		"arn:aws:ec2:us-east-2:123456789012:instance/i-1234567890abcdef0", "arn:aws:ec2:us-east-1b:instance/i-0000000000000000f", 1)
	ev := mustDecode(t, []byte(raw)).(*SpotInterruption)
	if ev.InstanceID != "i-1234567890abcdef0" {
		t.Fatalf("instance %q", ev.InstanceID)
	}
}

func TestRebalanceAndStateChange(t *testing.T) {
	rb := mustDecode(t, readFile(t, "rebalance.json")).(*RebalanceRecommendation)
	if rb.InstanceID != "i-1234567890abcdef0" {
		t.Errorf("rebalance instance %q", rb.InstanceID)
	}
	sc := mustDecode(t, readFile(t, "state-change-terminated.json")).(*StateChange)
	if sc.State != StateTerminated || !sc.Leaving() {
		t.Errorf("state %q leaving=%v", sc.State, sc.Leaving())
	}
	pending := mustDecode(t, readFile(t, "testdata/ec2-instance-state-change-pending.json")).(*StateChange)
	if pending.State != StatePending || pending.Leaving() {
		t.Errorf("pending: state %q leaving=%v", pending.State, pending.Leaving())
	}
	for _, s := range []string{StateStopping, StateStopped, StateShuttingDown} {
		if !(&StateChange{State: s}).Leaving() {
			t.Errorf("%s should be leaving", s)
		}
	}
}

// AWS's current state-change doc sample has no "version": it decodes, and encoding
// does not invent one.
func TestMissingVersion(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(readFile(t, "state-change-terminated.json"), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "version")
	raw, _ := json.Marshal(m)
	ev := mustDecode(t, raw).(*StateChange)
	if ev.Version != "" {
		t.Fatalf("version %q", ev.Version)
	}
	enc, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(enc), `"version"`) {
		t.Errorf("encode added a version: %s", enc)
	}
}

func TestHealthScheduledChange(t *testing.T) {
	ev := mustDecode(t, readFile(t, "health-scheduled-change.json")).(*HealthScheduledChange)
	if got := ev.InstanceIDs(); !reflect.DeepEqual(got, []string{"i-1234567890abcdef0"}) {
		t.Errorf("instances %v", got)
	}
	start, end := ev.Window()
	if !start.Equal(time.Date(2024, 5, 15, 0, 0, 0, 0, time.UTC)) || !end.Equal(time.Date(2024, 5, 15, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("window %v – %v", start, end)
	}
	if ev.DedupeKey() != "health/123456789012/1234abc01232a4012345678-1" {
		t.Errorf("dedupe key %q", ev.DedupeKey())
	}
	// A re-sent update has a new EventBridge id but the same communicationId.
	resent := strings.Replace(string(readFile(t, "health-scheduled-change.json")), "7fb65329-1628-4cf3-a740-95f9457a1402", "00000000-0000-0000-0000-000000000001", 1)
	if again := mustDecode(t, []byte(resent)); again.DedupeKey() != ev.DedupeKey() {
		t.Errorf("re-sent health event has key %q, want %q", again.DedupeKey(), ev.DedupeKey())
	}
	// The same communication in another account is another occurrence.
	other := strings.Replace(string(readFile(t, "health-scheduled-change.json")), `"account": "123456789012"`, `"account": "210987654321"`, 1)
	if o := mustDecode(t, []byte(other)); o.DedupeKey() == ev.DedupeKey() {
		t.Errorf("other account shares key %q", o.DedupeKey())
	}
}

// NTH's fixture: account "account id", an id that is not hex, no communicationId, no
// endTime, tags on the entity. Joiner does not validate UUID syntax.
func TestHealthNTHFixture(t *testing.T) {
	raw := readFile(t, "testdata/aws-health-ec2-scheduled-change.nth-fixture.json")
	ev := mustDecode(t, raw).(*HealthScheduledChange)
	if got := ev.InstanceIDs(); !reflect.DeepEqual(got, []string{"i-12345678"}) {
		t.Errorf("instances %v", got)
	}
	if ev.Account != "account id" || ev.ID != "7fb65329-1628-4cf3-a740-95fg457h1402" {
		t.Errorf("envelope %+v", ev.Envelope)
	}
	if _, end := ev.Window(); !end.IsZero() {
		t.Errorf("end %v, want zero", end)
	}
	if ev.Detail.AffectedEntities[0].Tags["app"] != "my-app" {
		t.Errorf("entity tags %v", ev.Detail.AffectedEntities[0].Tags)
	}
	if ev.DedupeKey() != "health/account id/arn:aws:health:region::event/id" {
		t.Errorf("dedupe key %q", ev.DedupeKey())
	}
	enc, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(generic(t, enc), generic(t, raw)) {
		t.Errorf("NTH fixture does not round-trip:\n%s", enc)
	}
}

func TestSchedulerDetailString(t *testing.T) {
	tick := mustDecode(t, readFile(t, "scheduler.json")).(*SchedulerTick)
	if !tick.Detail.AsString || string(tick.Detail.Object) != "{}" {
		t.Errorf("detail %+v", tick.Detail)
	}
	rule := mustDecode(t, readFile(t, "scheduled-rule.json")).(*ScheduledRule)
	if rule.Detail.AsString || string(rule.Detail.Object) != "{}" {
		t.Errorf("detail %+v", rule.Detail)
	}
	// The Scheduler's string detail may also be an object, and may be absent.
	for _, detail := range []string{`{}`, `"{\"a\":1}"`, ``} {
		raw := `{"id":"x","source":"aws.scheduler","detail-type":"Scheduled Event","account":"1","region":"r"`
		if detail != "" {
			raw += `,"detail":` + detail
		}
		raw += `}`
		if _, err := Decode([]byte(raw)); err != nil {
			t.Errorf("detail %s: %v", detail, err)
		}
	}
}

func TestPendingPodsSample(t *testing.T) {
	ev := mustDecode(t, readFile(t, "pending-pods.json")).(*PendingPods)
	d := ev.Detail
	if d.Cluster != "technews-karpenter-eks" || d.BatchID == "" || d.Truncated || len(d.Pods) != 3 || len(ev.Rejected) != 0 {
		t.Fatalf("detail %+v rejected %v", d, ev.Rejected)
	}
	if !d.ObservedAt.Equal(time.Date(2024, 5, 1, 12, 0, 4, 0, time.UTC)) {
		t.Errorf("observedAt %v", d.ObservedAt)
	}
	coredns := d.Pods[0]
	if coredns.Key() != "kube-system/coredns-5d78c9869d-x7k2p" || *coredns.Priority != 2000000000 ||
		coredns.OwnerReferences[0].Kind != "ReplicaSet" || !coredns.OwnerReferences[0].Controller ||
		len(coredns.Tolerations) != 2 || coredns.Affinity.PodAntiAffinity == nil {
		t.Errorf("coredns %+v", coredns)
	}
	if ev.DedupeKey() != "pods/technews-karpenter-eks/technews-karpenter-eks/2024-05-01T12:00:05Z/7/0" {
		t.Errorf("dedupe key %q", ev.DedupeKey())
	}
}

// Inputs that decode to *Ignored, with the reason each must give.
func TestIgnored(t *testing.T) {
	health := string(readFile(t, "health-scheduled-change.json"))
	cases := map[string]struct {
		raw    string
		reason string
	}{
		"asg lifecycle":        {string(readFile(t, "testdata/asg-terminate-lifecycle-action.json")), `source "aws.autoscaling"`},
		"proposed batch type":  {string(readFile(t, "testdata/PROPOSED-pending-pods-batch.json")), `detail-type "Pending Pods Batch"`},
		"health other service": {strings.Replace(health, `"service": "EC2"`, `"service": "RDS"`, 1), `service "RDS"`},
		"health issue":         {strings.Replace(health, `"eventTypeCategory": "scheduledChange"`, `"eventTypeCategory": "issue"`, 1), `category "issue"`},
		"health no instance": {strings.NewReplacer(`"resources": ["i-1234567890abcdef0"]`, `"resources": []`,
			`{ "entityValue": "i-1234567890abcdef0" }`, `{ "entityValue": "vol-0123" }`).Replace(health), "names no EC2 instance"},
		"ec2 other detail-type": {`{"source":"aws.ec2","detail-type":"EC2 Fleet State Change","detail":{}}`, `"EC2 Fleet State Change"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ev := mustDecode(t, []byte(c.raw))
			ig, ok := ev.(*Ignored)
			if !ok {
				t.Fatalf("got %T, want *Ignored", ev)
			}
			if !strings.Contains(ig.Reason, c.reason) {
				t.Errorf("reason %q does not mention %q", ig.Reason, c.reason)
			}
			enc, err := Encode(ig)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(generic(t, enc), generic(t, []byte(c.raw))) {
				t.Errorf("ignored event does not re-encode as received:\n%s", enc)
			}
		})
	}
}

// Malformed inputs: each is an error wrapping ErrMalformed whose text names the problem.
func TestMalformed(t *testing.T) {
	spot := string(readFile(t, "spot-interruption.json"))
	pods := string(readFile(t, "pending-pods.json"))
	cases := map[string]struct{ raw, want string }{
		"empty":             {"", "empty input"},
		"spaces":            {"  \n", "empty input"},
		"array":             {"[1,2]", "not a JSON object"},
		"truncated":         {spot[:len(spot)/2], "envelope"},
		"no source":         {`{"detail-type":"x","detail":{}}`, `"source" is missing`},
		"no detail-type":    {`{"source":"aws.ec2","detail":{}}`, `"detail-type" is missing`},
		"source not string": {`{"source":5,"detail-type":"x"}`, "source"},
		"bad time":          {strings.Replace(spot, "2024-05-01T12:00:00Z", "Wed, 01 May 2024 12:00:00 GMT", 1), "not RFC 3339"},
		"no detail":         {`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning"}`, "detail is missing"},
		"detail string":     {`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":"{}"}`, "not an object"},
		"no instance":       {strings.Replace(spot, `"instance-id": "i-1234567890abcdef0",`, "", 1), "instance-id is missing"},
		"bad instance":      {strings.Replace(spot, `"instance-id": "i-1234567890abcdef0"`, `"instance-id": "i-../../x"`, 1), "not an EC2 instance ID"},
		"bad action":        {strings.Replace(spot, `"terminate"`, `"explode"`, 1), `instance-action "explode"`},
		"bad state":         {strings.Replace(string(readFile(t, "state-change-terminated.json")), `"terminated"`, `"melting"`, 1), `state "melting"`},
		"health bad time":   {strings.Replace(string(readFile(t, "health-scheduled-change.json")), "Wed, 15 May 2024 00:00:00 GMT", "2024-05-15 00:00", 1), "not an RFC 1123 time"},
		"scheduler junk":    {`{"source":"aws.scheduler","detail-type":"Scheduled Event","detail":"nope"}`, "not an object"},
		"pods schema":       {strings.Replace(pods, `"schemaVersion": "1"`, `"schemaVersion": "2"`, 1), `schemaVersion "2" is not supported`},
		"pods no cluster":   {strings.Replace(pods, `"cluster": "technews-karpenter-eks",`, "", 1), "detail.cluster is missing"},
		"pods no pods":      {`{"source":"joiner.forwarder","detail-type":"Pending Pods","detail":{"schemaVersion":"1","cluster":"c","batchId":"b","observedAt":"2024-05-01T12:00:00Z"}}`, "detail.pods is missing"},
		"pods bad part":     {`{"source":"joiner.forwarder","detail-type":"Pending Pods","detail":{"schemaVersion":"1","cluster":"c","batchId":"b","part":3,"parts":2,"observedAt":"2024-05-01T12:00:00Z","pods":[]}}`, "part 3 of parts 2"},
		"pods observedAt":   {strings.Replace(pods, `"observedAt": "2024-05-01T12:00:04Z"`, `"observedAt": "yesterday"`, 1), `observedAt "yesterday"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ev, err := Decode([]byte(c.raw))
			if err == nil {
				t.Fatalf("no error; got %#v", ev)
			}
			if ev != nil {
				t.Errorf("event %#v returned with error", ev)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

// One bad pod is rejected alone; the rest of the batch is used.
func TestPendingPodsRejectsBadPodOnly(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(readFile(t, "pending-pods.json"), &m); err != nil {
		t.Fatal(err)
	}
	pods := m["detail"].(map[string]any)["pods"].([]any)
	pods[0].(map[string]any)["containers"] = []any{map[string]any{"name": "c", "requests": map[string]any{"cpu": "lots"}}}
	delete(pods[1].(map[string]any), "uid")
	pods = append(pods, "not a pod", map[string]any{"namespace": "a", "name": "neg", "uid": "u", "requests": map[string]any{"memory": "-1Gi"}},
		// Past int64 in the engine's units: these read as 0 or wrapped negative.
		map[string]any{"namespace": "a", "name": "wraps", "uid": "u", "containers": []any{
			map[string]any{"name": "c", "requests": map[string]any{"cpu": "9300000000000000"}}}},
		map[string]any{"namespace": "a", "name": "huge", "uid": "u", "initContainers": []any{
			map[string]any{"name": "i", "requests": map[string]any{"memory": "1e400"}}}},
		map[string]any{"namespace": "a", "name": "big", "uid": "u", "overhead": map[string]any{"cpu": "1e18"}})
	m["detail"].(map[string]any)["pods"] = pods
	raw, _ := json.Marshal(m)
	ev := mustDecode(t, raw).(*PendingPods)
	if len(ev.Detail.Pods) != 1 || ev.Detail.Pods[0].Name != "trainer-0" {
		t.Fatalf("kept pods %v", ev.Detail.Pods)
	}
	want := []struct {
		index int
		name  string
		msg   string
	}{
		{0, "coredns-5d78c9869d-x7k2p", "quantities must match"},
		{1, "heavy-app-7c9d8b6f4-2xq9z", "uid is missing"},
		{3, "", "not an object"},
		{4, "neg", "requests.memory: must not be negative, got -1Gi"},
		{5, "wraps", "containers[0].requests.cpu: 9300T is out of range"},
		{6, "huge", "initContainers[0].requests.memory: 10e399 is out of range"},
		{7, "big", "overhead.cpu: 1e18 is out of range"},
	}
	if len(ev.Rejected) != len(want) {
		t.Fatalf("rejected %+v", ev.Rejected)
	}
	for i, w := range want {
		r := ev.Rejected[i]
		if r.Index != w.index || r.Name != w.name || !strings.Contains(r.Reason, w.msg) {
			t.Errorf("rejected[%d] = %+v, want index %d name %q reason ~%q", i, r, w.index, w.name, w.msg)
		}
	}
}

func TestScope(t *testing.T) {
	spot := mustDecode(t, readFile(t, "spot-interruption.json"))
	if got := (Scope{Account: "123456789012"}).Admit(spot); got != spot {
		t.Errorf("own account not admitted: %#v", got)
	}
	ig, ok := (Scope{Account: "999999999999"}).Admit(spot).(*Ignored)
	if !ok || !strings.Contains(ig.Reason, `account "123456789012"`) || ig.ID != spot.Meta().ID {
		t.Fatalf("foreign account: %#v", ig)
	}
	pods := mustDecode(t, readFile(t, "pending-pods.json"))
	if got := (Scope{Account: "123456789012", Cluster: "technews-karpenter-eks"}).Admit(pods); got != pods {
		t.Errorf("own cluster not admitted: %#v", got)
	}
	ig, ok = (Scope{Cluster: "other"}).Admit(pods).(*Ignored)
	if !ok || !strings.Contains(ig.Reason, `cluster "technews-karpenter-eks"`) {
		t.Fatalf("other cluster: %#v", ig)
	}
	// The ignored event keeps what arrived, for the log.
	if enc, err := Encode(ig); err != nil || !reflect.DeepEqual(generic(t, enc), generic(t, readFile(t, "pending-pods.json"))) {
		t.Errorf("ignored pods event re-encodes as %s (%v)", enc, err)
	}
}
