package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
	"github.com/joiner-autoscaler/joiner/shared/mototest"
	"github.com/joiner-autoscaler/joiner/shared/replay"
)

// sampleDay is a morning of events built from the samples: a Pending Pods batch, a
// scheduled tick, and EC2 and AWS Health events minutes apart.
var sampleDay = []struct {
	file string
	at   time.Duration
}{
	{"pending-pods.json", 5 * time.Second},
	{"scheduled-rule.json", time.Minute},
	{"spot-interruption.json", 12*time.Minute + 30*time.Second},
	{"state-change-terminated.json", 14*time.Minute + 30*time.Second},
	{"health-scheduled-change.json", 20 * time.Minute},
	{"rebalance.json", 25 * time.Minute},
}

var dayStart = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// sampleEvent is a sample with its time and id set.
func sampleEvent(t *testing.T, file string, at time.Time, id string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("../../events", file))
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	ev["time"], ev["id"] = at.Format(time.RFC3339), id
	return ev
}

func record(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), append([]string{"record"}, args...), &out, &errb); code != 0 {
		t.Fatalf("joiner record exited %d:\n%s%s", code, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

// replayRecorded loads the recorded scenario as `joiner replay DIR` does, replays it
// and fails on an error or an unmet expectation.
func replayRecorded(t *testing.T, dir string) *replay.Result {
	t.Helper()
	scs, err := replay.LoadAll(filepath.Dir(dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	var steps strings.Builder
	res, err := replay.Run(context.Background(), scs[0], replay.Options{Steps: &steps})
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, steps.String())
	}
	if res.Errors != 0 || !res.OK() {
		var sum strings.Builder
		replay.WriteSummary(&sum, res)
		t.Fatalf("replay of the recording:\n%s%s", steps.String(), sum.String())
	}
	return res
}

// TestRecordFromFile records a JSON-lines file (one line a CloudWatch Logs record,
// one not an event at all) and replays the scenario it wrote.
func TestRecordFromFile(t *testing.T) {
	dir := t.TempDir()
	var lines bytes.Buffer
	for i, s := range sampleDay {
		ev := sampleEvent(t, s.file, dayStart.Add(s.at), fmt.Sprintf("ev-%d", i))
		b, _ := json.Marshal(ev)
		if s.file == "health-scheduled-change.json" {
			b, _ = json.Marshal(map[string]any{"timestamp": 1, "message": string(b)})
		}
		lines.Write(b)
		lines.WriteByte('\n')
	}
	lines.WriteString("START RequestId: 0f4c Version: $LATEST\n")
	from := filepath.Join(dir, "day.jsonl")
	if err := os.WriteFile(from, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "day")
	stdout, stderr := record(t, "--from", from, "--out", out, "-f", "../../testdata/seeds/001-heavy-app-fixed", "--remap-instances")
	if !strings.Contains(stdout, "recorded 5 event(s) over 24m55s") || !strings.Contains(stdout, "left out: 1 scheduled event(s)") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if !strings.Contains(stderr, "day.jsonl:7: not an event: invalid JSON at line 1") {
		t.Errorf("the non-event line is not reported: %s", stderr)
	}
	sc, err := replay.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Cluster != "technews-karpenter-eks" || !sc.Start.Equal(dayStart.Add(5*time.Second)) || sc.Duration.D() != 34*time.Minute {
		t.Errorf("cluster %q start %s duration %s", sc.Cluster, sc.Start, sc.Duration.D())
	}
	want := []struct {
		at   time.Duration
		file string
	}{
		{0, "events/0001-pending-pods.json"},
		{12*time.Minute + 25*time.Second, "events/0002-ec2-spot-instance-interruption-warning.json"},
		{14*time.Minute + 25*time.Second, "events/0003-ec2-instance-state-change-notification.json"},
		{19*time.Minute + 55*time.Second, "events/0004-aws-health-event.json"},
		{24*time.Minute + 55*time.Second, "events/0005-ec2-instance-rebalance-recommendation.json"},
	}
	if len(sc.Timeline) != len(want) {
		t.Fatalf("timeline %+v", sc.Timeline)
	}
	for i, w := range want {
		st := sc.Timeline[i]
		if st.At.D() != w.at || st.Event != w.file || !st.KeepID {
			t.Errorf("step %d: %+v, want at %s event %s keepId", i, st, w.at, w.file)
		}
		// --remap-instances: every EC2 and Health event, not the Pending Pods batch.
		if (st.Instances != nil) != (i > 0) {
			t.Errorf("step %d: instances %+v", i, st.Instances)
		}
	}
	if sc.Timeline[1].Instances == nil || sc.Timeline[1].Instances.Select != "spot" {
		t.Errorf("the spot warning is not remapped to a spot instance: %+v", sc.Timeline[1].Instances)
	}
	// The event files are the events as received.
	got, err := os.ReadFile(filepath.Join(out, want[1].file))
	if err != nil {
		t.Fatal(err)
	}
	var gotEv map[string]any
	if err := json.Unmarshal(got, &gotEv); err != nil {
		t.Fatal(err)
	}
	if wantEv := sampleEvent(t, "spot-interruption.json", dayStart.Add(12*time.Minute+30*time.Second), "ev-2"); !reflect.DeepEqual(gotEv, wantEv) {
		t.Errorf("recorded event %v, want %v", gotEv, wantEv)
	}
	res := replayRecorded(t, out)
	// The remapped spot warning interrupted one of the nodes launched for the batch.
	if res.Interruptions == 0 || res.Invocations["provisioner"] == 0 {
		t.Errorf("replay: %d interruptions, invocations %v", res.Interruptions, res.Invocations)
	}

	// Recording into the same folder again is refused.
	var o, e bytes.Buffer
	if code := dispatch(context.Background(), []string{"record", "--from", from, "--out", out, "-f", "x"}, &o, &e); code != 2 || !strings.Contains(e.String(), "already holds") {
		t.Errorf("second recording: exit %d %s", code, e.String())
	}
}

// TestRecordQueueEndToEnd: the stack's rules deliver to an SQS queue (moto_server's
// EventBridge and SQS); events put on the buses are recorded with `joiner record
// --queue`, the cluster (a real API server) is snapshotted, and the scenario replays.
func TestRecordQueueEndToEnd(t *testing.T) {
	env := kubetest.Shared(t)
	ep := mototest.New(t)
	ctx := context.Background()
	cfg := mototest.AWSConfig(ep)
	eb, q := eventbridge.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	queue := recordingQueue(t, ctx, eb, q)

	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := "record-e2e"
	t.Cleanup(func() { clearCluster(t, cs, dyn, ns) })
	if out, err := env.Kubectl("apply", "-f", "../../testdata/seeds/001-heavy-app-fixed/nodepool.yaml"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	seedRecordCluster(t, ctx, cs, ns)

	// The day, put on the buses as the sources would; two copies of the batch.
	var entries []ebtypes.PutEventsRequestEntry
	for i, s := range append(sampleDay, sampleDay[0]) {
		ev := sampleEvent(t, s.file, dayStart.Add(s.at), fmt.Sprint(i))
		detail, _ := json.Marshal(ev["detail"])
		bus := "default"
		if ev["source"] == events.SourceForwarder {
			bus = "joiner-record"
		}
		var res []string
		for _, r := range ev["resources"].([]any) {
			res = append(res, r.(string))
		}
		entries = append(entries, ebtypes.PutEventsRequestEntry{EventBusName: aws.String(bus), Source: aws.String(ev["source"].(string)),
			DetailType: aws.String(ev["detail-type"].(string)), Detail: aws.String(string(detail)), Resources: res, Time: aws.Time(dayStart.Add(s.at))})
	}
	put, err := eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
	if err != nil || put.FailedEntryCount != 0 {
		t.Fatalf("PutEvents: %v %+v", err, put)
	}

	// SQS delivers at least once: the same event twice is recorded once.
	dup, _ := json.Marshal(sampleEvent(t, "spot-interruption.json", dayStart.Add(30*time.Minute), "dup-1"))
	for range 2 {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String(string(dup))}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kubetest.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
		"AWS_ENDPOINT_URL": ep, "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none} {
		t.Setenv(k, v)
	}
	// A recording that cannot be written (its manifests do not exist) gives every
	// message back to the queue at once.
	var o, e bytes.Buffer
	failed := filepath.Join(t.TempDir(), "failed")
	if code := dispatch(ctx, []string{"record", "--queue", queue, "--max", "7", "--duration", "1m", "--out", failed, "-f", "no/such/dir"}, &o, &e); code != 1 {
		t.Fatalf("recording with missing manifests: exit %d\n%s%s", code, o.String(), e.String())
	}
	if visible := queueDepth(t, ctx, q, queue); visible[0] != "8" || visible[1] != "0" {
		t.Fatalf("after a failed recording the queue holds %v (visible, in flight), want all 8 messages visible\n%s", visible, e.String())
	}
	if _, err := os.Stat(failed); !os.IsNotExist(err) {
		t.Errorf("a failed recording left %s behind (stat: %v)", failed, err)
	}
	out := filepath.Join(t.TempDir(), "recorded")
	// Seven events reach the queue: six through the rules (the scheduled one matches
	// none; the second batch is an EventBridge event with an id of its own) and the
	// duplicated one. --duration only bounds a failing test.
	stdout, stderr := record(t, "--queue", queue, "--max", "7", "--duration", "1m", "--out", out, "--kubeconfig", kubeconfig)
	t.Logf("joiner record:\n%s%s", stdout, stderr)
	sc, err := replay.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var last time.Duration
	for _, st := range sc.Timeline {
		raw, err := os.ReadFile(sc.Path(st.Event))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", st.Event, err)
		}
		kinds[string(ev.Kind())]++
		if st.At < Duration(last) {
			t.Errorf("timeline out of order at %s", st.Event)
		}
		last = time.Duration(st.At)
	}
	want := map[string]int{"PendingPods": 2, "SpotInterruption": 2, "StateChange": 1, "HealthScheduledChange": 1, "RebalanceRecommendation": 1}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("recorded %v, want %v", kinds, want)
	}
	if sc.Cluster != "technews-karpenter-eks" || len(sc.Manifests) != 1 || sc.Manifests[0] != "cluster.yaml" {
		t.Errorf("cluster %q manifests %v", sc.Cluster, sc.Manifests)
	}
	// The snapshot loads cleanly with shared/manifest and holds what the cluster held.
	b, err := manifest.Load(sc.Path("cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range b.Problems {
		t.Errorf("cluster.yaml: %s", p)
	}
	if len(b.NodePools) != 1 || len(b.NodeClasses) != 1 || len(b.Nodes) != 1 || len(b.DaemonSets) != 1 || len(b.PDBs) != 1 {
		t.Errorf("snapshot: %d NodePools, %d EC2NodeClasses, %d Nodes, %d DaemonSets, %d PDBs", len(b.NodePools), len(b.NodeClasses), len(b.Nodes), len(b.DaemonSets), len(b.PDBs))
	}
	var podNames []string
	for _, p := range b.Pods {
		podNames = append(podNames, p.Namespace+"/"+p.Name)
	}
	if want := []string{ns + "/bound", ns + "/pending-0", ns + "/pending-1"}; !reflect.DeepEqual(podNames, want) {
		t.Errorf("snapshot pods %v, want %v (no DaemonSet pod, no finished pod)", podNames, want)
	}
	// Every message is gone from the queue once the scenario is written.
	if depth := queueDepth(t, ctx, q, queue); depth != [2]string{"0", "0"} {
		t.Errorf("queue still holds messages: %v (visible, in flight)", depth)
	}
	res := replayRecorded(t, out)
	if res.Pods.Placed < 2 || len(res.Launched) == 0 {
		t.Errorf("replay placed %d pods, launched %v: the snapshot's pending pods want nodes", res.Pods.Placed, res.Launched)
	}
}

// queueDepth is the queue's visible and in-flight message counts.
func queueDepth(t *testing.T, ctx context.Context, q *sqs.Client, url string) [2]string {
	t.Helper()
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	return [2]string{attrs.Attributes["ApproximateNumberOfMessages"], attrs.Attributes["ApproximateNumberOfMessagesNotVisible"]}
}

// Duration is replay.Duration, for comparing timeline offsets.
type Duration = replay.Duration

// recordingQueue creates what the stack's recordQueue option deploys: the EC2 and
// Health rules on the default bus, the Pending Pods rule on Joiner's bus, each with
// the queue as a target.
func recordingQueue(t *testing.T, ctx context.Context, eb *eventbridge.Client, q *sqs.Client) string {
	t.Helper()
	return mototest.RulesToQueue(t, ctx, eb, q, "joiner-record",
		mototest.Rule{Name: "ec2", Bus: "default", Pattern: events.InterruptionEC2Pattern()},
		mototest.Rule{Name: "health", Bus: "default", Pattern: events.InterruptionHealthPattern()},
		mototest.Rule{Name: "pods", Bus: "joiner-record", Pattern: events.PendingPodsPattern()})
}

// seedRecordCluster creates a node with a pod on it, two pending pods, a DaemonSet
// with its pod, a finished pod and a PDB.
func seedRecordCluster(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(err)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-10.ec2.internal", Labels: map[string]string{
		"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}}
	node, err = cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	must(err)
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("29")}
	node.Status = corev1.NodeStatus{Capacity: rl, Allocatable: rl, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady", Message: "kubelet is posting ready status"}}}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	must(err)
	podSpec := func(cpu string) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}}
	}
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: ns, Labels: map[string]string{"app": "web"}}, Spec: podSpec("500m")}
	bound.Spec.NodeName = node.Name
	_, err = cs.CoreV1().Pods(ns).Create(ctx, bound, metav1.CreateOptions{})
	must(err)
	for i := range 2 {
		createUnschedulable(t, ctx, cs, ns, fmt.Sprintf("pending-%d", i))
	}
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: ns}, Spec: podSpec("100m")}
	done.Spec.NodeName = node.Name
	done, err = cs.CoreV1().Pods(ns).Create(ctx, done, metav1.CreateOptions{})
	must(err)
	done.Status.Phase = corev1.PodSucceeded
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, done, metav1.UpdateOptions{})
	must(err)
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec("50m")}}}
	ds, err = cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
	must(err)
	dsPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-x7k2p", Namespace: ns, Labels: labels, OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: aws.Bool(true)}}}, Spec: podSpec("50m")}
	dsPod.Spec.NodeName = node.Name
	_, err = cs.CoreV1().Pods(ns).Create(ctx, dsPod, metav1.CreateOptions{})
	must(err)
	one := intstr.FromInt32(1)
	_, err = cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}, metav1.CreateOptions{})
	must(err)
}
