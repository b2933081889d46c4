package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/events"
)

// fakeBus checks every PutEvents call against EventBridge's limits and fails the
// entries or calls its script says to.
type fakeBus struct {
	mu    sync.Mutex
	calls int
	// failEntries(call, i, entry) returns an error code for entry i of a call, or "".
	failEntries func(call, i int, e ebtypes.PutEventsRequestEntry) string
	// failCall(call) returns an error for the whole call, or nil.
	failCall  func(call int) error
	delivered []ebtypes.PutEventsRequestEntry
	limitErr  error
}

func (f *fakeBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	call := f.calls
	if len(in.Entries) == 0 || len(in.Entries) > events.MaxEntriesPerCall {
		f.limitErr = fmt.Errorf("call %d has %d entries", call, len(in.Entries))
	}
	total := 0
	for _, e := range in.Entries {
		total += len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail))
	}
	if total >= events.MaxEntrySize {
		f.limitErr = fmt.Errorf("call %d is %d bytes", call, total)
	}
	if f.failCall != nil {
		if err := f.failCall(call); err != nil {
			return nil, err
		}
	}
	out := &eventbridge.PutEventsOutput{}
	for i, e := range in.Entries {
		if f.failEntries != nil {
			if code := f.failEntries(call, i, e); code != "" {
				out.FailedEntryCount++
				out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String("simulated")})
				continue
			}
		}
		f.delivered = append(f.delivered, e)
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String(fmt.Sprintf("ev-%d-%d", call, i))})
	}
	return out, nil
}

// deliveredPods decodes every delivered entry and returns the pods by UID, failing on
// a pod delivered twice.
func (f *fakeBus) deliveredPods(t *testing.T) map[types.UID]events.PendingPod {
	t.Helper()
	got := map[types.UID]events.PendingPod{}
	for _, e := range f.delivered {
		if aws.ToString(e.EventBusName) != "joiner-bus" || aws.ToString(e.Source) != events.SourceForwarder || aws.ToString(e.DetailType) != events.DetailTypePendingPods {
			t.Fatalf("entry bus/source/detail-type = %q/%q/%q", aws.ToString(e.EventBusName), aws.ToString(e.Source), aws.ToString(e.DetailType))
		}
		var d events.PendingPodsDetail
		if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &d); err != nil {
			t.Fatalf("detail is not JSON: %v", err)
		}
		if d.Cluster != "c1" {
			t.Fatalf("detail.cluster = %q", d.Cluster)
		}
		for _, p := range d.Pods {
			if _, dup := got[p.UID]; dup {
				t.Fatalf("pod %s delivered twice", p.Key())
			}
			got[p.UID] = p
		}
	}
	return got
}

func testPublisher(api PutEventsAPI) (*Publisher, *[]time.Duration) {
	var sleeps []time.Duration
	return &Publisher{
		API: api, Bus: "joiner-bus", Cluster: "c1", Attempts: 5,
		BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second,
		Now:   func() time.Time { return t0 },
		Sleep: func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil },
		Log:   slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}, &sleeps
}

// realisticPod is a Deployment replica with requests, selectors and tolerations,
// about 700 bytes once described.
func realisticPod(i int) events.PendingPod {
	ctrl := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: fmt.Sprintf("checkout-7d9f8c6b5-%05d", i), UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
			Labels:          map[string]string{"app": "checkout", "pod-template-hash": "7d9f8c6b5", "team": "payments"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "checkout-7d9f8c6b5", Controller: &ctrl}},
		},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"karpenter.sh/capacity-type": "spot", "kubernetes.io/arch": "arm64"},
			Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "payments", Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{
				{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}},
				{Name: "envoy", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}},
			},
		},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}}},
	}
	return events.FromPod(p)
}

func TestPublisherSplits1000PodsBelow256KB(t *testing.T) {
	pods := make([]events.PendingPod, 1000)
	raw := 0
	for i := range pods {
		pods[i] = realisticPod(i)
		b, _ := json.Marshal(&pods[i])
		raw += len(b)
	}
	if raw < 2*events.MaxEntrySize {
		t.Fatalf("test pods total %d bytes; want well over 256 KB to force a split", raw)
	}
	bus := &fakeBus{}
	pub, sleeps := testPublisher(bus)
	if err := pub.Publish(context.Background(), pods); err != nil {
		t.Fatal(err)
	}
	if bus.limitErr != nil {
		t.Fatal(bus.limitErr)
	}
	got := bus.deliveredPods(t)
	if len(got) != 1000 {
		t.Fatalf("delivered %d distinct pods, want 1000", len(got))
	}
	if len(bus.delivered) < 3 || bus.calls != len(bus.delivered) {
		// Each entry is close to 256 KB, so each needs a call of its own.
		t.Fatalf("%d entries in %d calls for %d bytes of pods", len(bus.delivered), bus.calls, raw)
	}
	var first events.PendingPodsDetail
	_ = json.Unmarshal([]byte(aws.ToString(bus.delivered[0].Detail)), &first)
	if first.Parts != len(bus.delivered) || first.Part != 1 || first.BatchID == "" {
		t.Fatalf("part %d of %d (batch %q), want 1 of %d", first.Part, first.Parts, first.BatchID, len(bus.delivered))
	}
	if p := got[pods[999].UID]; p.Key() != pods[999].Key() || len(p.Containers) != 2 || p.NodeSelector["kubernetes.io/arch"] != "arm64" {
		t.Fatalf("pod 999 arrived as %+v", p)
	}
	if len(*sleeps) != 0 {
		t.Fatalf("slept %v with no failure", *sleeps)
	}
}

func TestPublisherRetriesOnlyFailedEntries(t *testing.T) {
	pods := make([]events.PendingPod, 30)
	for i := range pods {
		pods[i] = realisticPod(i)
	}
	bus := &fakeBus{
		// The first two calls throttle every second entry.
		failEntries: func(call, i int, _ ebtypes.PutEventsRequestEntry) string {
			if call <= 2 && i%2 == 1 {
				return "ThrottlingException"
			}
			return ""
		},
	}
	pub, sleeps := testPublisher(bus)
	pub.Options.MaxEntrySize = 2048 // a few pods per entry, so one call carries several entries
	if err := pub.Publish(context.Background(), pods); err != nil {
		t.Fatal(err)
	}
	if got := bus.deliveredPods(t); len(got) != 30 {
		t.Fatalf("delivered %d distinct pods, want 30 (no pod twice, none lost)", len(got))
	}
	if len(*sleeps) < 2 {
		t.Fatalf("backoff sleeps %v, want one per retry", *sleeps)
	}
	for i, d := range *sleeps {
		if d <= 0 || d > time.Second {
			t.Fatalf("sleep %d = %v, want within (0, MaxDelay]", i, d)
		}
	}
	if _, lastErr := pub.Status(); lastErr != "" {
		t.Fatalf("status error %q after success", lastErr)
	}
}

func TestPublisherRetriesCallErrorsThenReports(t *testing.T) {
	bus := &fakeBus{failCall: func(call int) error {
		if call <= 2 {
			return errors.New("connection reset")
		}
		return nil
	}}
	pub, sleeps := testPublisher(bus)
	pub.Flush(context.Background(), []events.PendingPod{realisticPod(1)})
	if len(bus.deliveredPods(t)) != 1 || len(*sleeps) != 2 {
		t.Fatalf("delivered %d pods after %d sleeps, want 1 after 2", len(bus.delivered), len(*sleeps))
	}
	if last, lastErr := pub.Status(); !last.Equal(t0) || lastErr != "" {
		t.Fatalf("status = %v %q, want success at t0", last, lastErr)
	}

	down := &fakeBus{failCall: func(int) error { return errors.New("service unavailable") }}
	pub, sleeps = testPublisher(down)
	pub.Flush(context.Background(), []events.PendingPod{realisticPod(1)})
	if down.calls != pub.Attempts || len(*sleeps) != pub.Attempts-1 {
		t.Fatalf("%d calls, %d sleeps; want %d and %d", down.calls, len(*sleeps), pub.Attempts, pub.Attempts-1)
	}
	if _, lastErr := pub.Status(); !strings.Contains(lastErr, "service unavailable") || !strings.Contains(lastErr, "after 5 attempts") {
		t.Fatalf("status error %q does not say what failed", lastErr)
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	pub, _ := testPublisher(&fakeBus{})
	for try, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 8: time.Second} {
		for range 50 {
			if d := pub.backoff(try); d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", try, d, want/2, want)
			}
		}
	}
}
