package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// realisticPod builds a pod shaped like real workloads: labels, an owner, two
// containers, a sidecar, tolerations, node affinity, anti-affinity and a spread
// constraint. Sizes vary with i so that splits do not land on round numbers.
func realisticPod(i int) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	prio := int32(i % 3 * 100)
	app := fmt.Sprintf("app-%d", i%17)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("team-%d", i%7),
			Name:      fmt.Sprintf("%s-%08x-%05d", app, i*2654435761%(1<<32), i),
			UID:       types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)),
			Labels:    map[string]string{"app": app, "pod-template-hash": fmt.Sprintf("%x", i%97), "tier": strings.Repeat("x", i%40)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-rs",
				Controller: &[]bool{true}[0]}},
		},
		Spec: corev1.PodSpec{
			Priority:      &prio,
			SchedulerName: "default-scheduler",
			NodeSelector:  map[string]string{"kubernetes.io/os": "linux"},
			Containers: []corev1.Container{
				{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: *resource.NewMilliQuantity(int64(100+i%900), resource.DecimalSI), corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", 128+i%512))}}},
				{Name: "proxy", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}},
			},
			InitContainers: []corev1.Container{{Name: "agent", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}}},
			Tolerations:    []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}}}}}}},
				PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 50,
					PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}},
			},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available."}}},
	}
}

func realisticPods(n int) []PendingPod {
	out := make([]PendingPod, n)
	for i := range out {
		out[i] = FromPod(realisticPod(i))
	}
	return out
}

var observed = time.Date(2024, 5, 1, 12, 0, 4, 0, time.UTC)

// decodeEntries wraps each entry as EventBridge delivers it and decodes it, checking
// everything a receiver relies on.
func decodeEntries(t *testing.T, entries []Entry, limit int) []*PendingPods {
	t.Helper()
	var out []*PendingPods
	for i, e := range entries {
		if e.Size() > limit {
			t.Errorf("entry %d: %d bytes, limit %d", i, e.Size(), limit)
		}
		raw, err := e.Wrap(fmt.Sprintf("id-%d", i), "123456789012", "us-east-1", observed)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := PendingPodsPattern().Matches(raw); !ok {
			t.Errorf("entry %d does not match the Pending Pods rule", i)
		}
		ev, err := Decode(raw)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		pp := ev.(*PendingPods)
		if len(pp.Rejected) > 0 {
			t.Errorf("entry %d rejected %v", i, pp.Rejected)
		}
		d := pp.Detail
		if d.Cluster != "prod" || d.BatchID != "b-1" || !d.ObservedAt.Equal(observed) {
			t.Errorf("entry %d header %+v", i, d)
		}
		if len(entries) > 1 && (d.Part != i+1 || d.Parts != len(entries)) {
			t.Errorf("entry %d: part %d of %d", i, d.Part, d.Parts)
		}
		out = append(out, pp)
	}
	return out
}

// 1,000 realistic pods split into entries below 256 KB, every pod exactly once, in
// order, each with its scheduling data intact.
func TestBuildPendingPods1000(t *testing.T) {
	pods := realisticPods(1000)
	entries, err := BuildPendingPods("prod", "b-1", observed, pods, BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, e := range entries {
		total += e.Size()
	}
	t.Logf("1000 pods -> %d entries, %d bytes in all (%.0f bytes/pod)", len(entries), total, float64(total)/1000)
	if len(entries) < 2 {
		t.Fatalf("expected a split, got %d entries", len(entries))
	}
	got := decodeEntries(t, entries, MaxEntrySize-1)
	var all []PendingPod
	for _, pp := range got {
		if pp.Detail.Truncated {
			t.Errorf("part %d truncated", pp.Detail.Part)
		}
		all = append(all, pp.Detail.Pods...)
	}
	if len(all) != len(pods) {
		t.Fatalf("%d pods out, %d in", len(all), len(pods))
	}
	for i := range pods {
		if !semantic.DeepEqualWithNilDifferentFromEmpty(all[i], pods[i]) {
			t.Fatalf("pod %d differs after the trip:\n got %+v\nwant %+v", i, all[i], pods[i])
		}
	}
	calls := GroupForPutEvents(entries)
	n := 0
	for _, c := range calls {
		size := 0
		for _, e := range c {
			size += e.Size()
		}
		if len(c) > MaxEntriesPerCall || size >= MaxEntrySize {
			t.Errorf("call of %d entries, %d bytes", len(c), size)
		}
		n += len(c)
	}
	if n != len(entries) {
		t.Errorf("grouped %d of %d entries", n, len(entries))
	}
}

// A small limit forces many parts; each is full enough that the next pod would not fit.
func TestBuildPendingPodsTightLimit(t *testing.T) {
	pods := realisticPods(60)
	const limit = 8 * 1024
	entries, err := BuildPendingPods("prod", "b-1", observed, pods, BatchOptions{MaxEntrySize: limit, Resources: []string{"arn:aws:eks:us-east-1:123456789012:cluster/prod"}})
	if err != nil {
		t.Fatal(err)
	}
	got := decodeEntries(t, entries, limit)
	seen := 0
	for i, pp := range got {
		for _, p := range pp.Detail.Pods {
			if p.UID != pods[seen].UID {
				t.Fatalf("order broken at pod %d (%s)", seen, p.Key())
			}
			seen++
		}
		if i+1 < len(got) {
			// The first pod of the next part would have overflowed this one.
			next := got[i+1].Detail.Pods[0]
			nb, _ := json.Marshal(&next)
			if entries[i].Size()+1+len(nb) <= limit {
				t.Errorf("entry %d (%d bytes) had room for the next pod (%d bytes)", i, entries[i].Size(), len(nb))
			}
		}
		if pp.Resources[0] != "arn:aws:eks:us-east-1:123456789012:cluster/prod" {
			t.Errorf("resources %v", pp.Resources)
		}
	}
	if seen != len(pods) {
		t.Errorf("%d of %d pods", seen, len(pods))
	}
}

// A pod too big for any entry goes as a reference, and its entry says the batch is
// truncated; its neighbours keep their specs.
func TestBuildPendingPodsOversizedPod(t *testing.T) {
	pods := realisticPods(3)
	huge := make([]string, 4000)
	for i := range huge {
		huge[i] = fmt.Sprintf("zone-value-%06d", i)
	}
	pods[1].Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values = huge
	const limit = 32 * 1024
	entries, err := BuildPendingPods("prod", "b-1", observed, pods, BatchOptions{MaxEntrySize: limit})
	if err != nil {
		t.Fatal(err)
	}
	got := decodeEntries(t, entries, limit)
	var all []PendingPod
	truncated := false
	for _, pp := range got {
		all = append(all, pp.Detail.Pods...)
		truncated = truncated || pp.Detail.Truncated
	}
	if len(all) != 3 || !all[1].SpecOmitted || all[1].UID != pods[1].UID || all[1].Affinity != nil {
		t.Fatalf("pods %+v", all)
	}
	if all[0].SpecOmitted || all[2].SpecOmitted || all[0].Affinity == nil {
		t.Errorf("neighbours lost their specs")
	}
	if !truncated {
		t.Error("no entry marked truncated")
	}
}

func TestBuildPendingPodsEdges(t *testing.T) {
	entries, err := BuildPendingPods("prod", "b-1", observed, nil, BatchOptions{Truncated: true})
	if err != nil || len(entries) != 1 {
		t.Fatalf("empty batch: %v %v", entries, err)
	}
	if got := decodeEntries(t, entries, MaxEntrySize); len(got[0].Detail.Pods) != 0 || !got[0].Detail.Truncated {
		t.Errorf("empty batch decoded as %+v", got[0].Detail)
	}
	if !strings.Contains(entries[0].Detail, `"pods":[]`) {
		t.Errorf("empty batch detail %s", entries[0].Detail)
	}
	if _, err := BuildPendingPods("", "b", observed, nil, BatchOptions{}); err == nil {
		t.Error("empty cluster accepted")
	}
	if _, err := BuildPendingPods("c", "", observed, nil, BatchOptions{}); err == nil {
		t.Error("empty batch id accepted")
	}
	if _, err := BuildPendingPods("c", "b", observed, realisticPods(1), BatchOptions{MaxEntrySize: 100}); err == nil {
		t.Error("limit below the header accepted")
	}
}

// Size follows EventBridge's documented formula, in UTF-8 bytes.
func TestEntrySize(t *testing.T) {
	e := Entry{Source: "joiner.forwarder", DetailType: "Pending Pods", Detail: `{"é":"ü"}`, Resources: []string{"ab", "€"}}
	want := len("joiner.forwarder") + len("Pending Pods") + 11 + 2 + 3
	if e.Size() != want {
		t.Errorf("size %d, want %d", e.Size(), want)
	}
	e.HasTime = true
	if e.Size() != want+14 {
		t.Errorf("with time: %d, want %d", e.Size(), want+14)
	}
}
