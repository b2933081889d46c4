package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/jsonerr"
	"github.com/joiner-autoscaler/joiner/shared/quantity"
)

// PendingPodsSchemaVersion is the schema version of the Pending Pods detail this
// package writes and reads. A new version gets a new number; Decode refuses numbers it
// does not know rather than guess.
const PendingPodsSchemaVersion = "1"

// PendingPodsDetail is the detail of a "Pending Pods" event: one batch (or one part of
// a batch split to fit PutEvents' entry limit) of unschedulable pods seen by the
// forwarder.
type PendingPodsDetail struct {
	SchemaVersion string `json:"schemaVersion"`
	// Cluster is the cluster name the forwarder was configured with.
	Cluster string `json:"cluster"`
	// BatchID identifies the batch; all parts of a split batch share it.
	BatchID string `json:"batchId"`
	// Part and Parts number the entries of a split batch (1-based); absent when the
	// batch fits in one entry.
	Part  int `json:"part,omitempty"`
	Parts int `json:"parts,omitempty"`
	// ObservedAt is when the forwarder closed the batch.
	ObservedAt time.Time `json:"observedAt"`
	// Truncated means the batch is incomplete: some pods were dropped or sent without
	// their spec (SpecOmitted). The receiver must list pending pods from the API
	// server itself rather than trust this list as the whole picture.
	Truncated bool         `json:"truncated"`
	Pods      []PendingPod `json:"pods"`
}

// PendingPod is one unschedulable pod: its identity and the part of its spec that
// scheduling depends on.
type PendingPod struct {
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	UID             types.UID         `json:"uid"`
	Labels          map[string]string `json:"labels,omitempty"`
	Priority        *int32            `json:"priority,omitempty"`
	SchedulerName   string            `json:"schedulerName,omitempty"`
	OwnerReferences []OwnerRef        `json:"ownerReferences,omitempty"`

	// Requests is the pod's total effective request as kube-scheduler computes it
	// (containers, init containers, overhead). A sender sets either Requests or the
	// per-container lists below; when containers are present they win.
	Requests       corev1.ResourceList `json:"requests,omitempty"`
	Containers     []ContainerRequests `json:"containers,omitempty"`
	InitContainers []ContainerRequests `json:"initContainers,omitempty"`
	Overhead       corev1.ResourceList `json:"overhead,omitempty"`
	// PodRequests is spec.resources.requests (pod-level resources).
	PodRequests corev1.ResourceList `json:"podRequests,omitempty"`

	NodeSelector              map[string]string                 `json:"nodeSelector,omitempty"`
	Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
	Tolerations               []corev1.Toleration               `json:"tolerations,omitempty"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// UnschedulableReason is the PodScheduled condition's message, for logs.
	UnschedulableReason string `json:"unschedulableReason,omitempty"`
	// SpecOmitted marks a reference-only entry: the pod's spec alone exceeded the
	// entry limit, so the receiver must read the pod from the API server.
	SpecOmitted bool `json:"specOmitted,omitempty"`
}

// OwnerRef is the part of an owner reference Joiner uses (grouping, DaemonSet
// detection, logs).
type OwnerRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Controller bool   `json:"controller,omitempty"`
}

// ContainerRequests is one container's resource requests. RestartPolicy "Always" on an
// init container marks a sidecar, whose requests count for the pod's whole life.
type ContainerRequests struct {
	Name          string                         `json:"name"`
	Requests      corev1.ResourceList            `json:"requests,omitempty"`
	RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy,omitempty"`
}

// RejectedPod is a pod entry that could not be used; the rest of the batch is.
type RejectedPod struct {
	Index     int
	Namespace string
	Name      string
	Reason    string
}

// PendingPods is Joiner's own "Pending Pods" event from the in-cluster forwarder.
type PendingPods struct {
	Envelope
	Detail PendingPodsDetail
	// Rejected lists pod entries that were malformed. They are not in Detail.Pods and
	// are not re-encoded; one bad pod never sinks the batch.
	Rejected []RejectedPod
}

// Kind implements Event.
func (*PendingPods) Kind() Kind { return KindPendingPods }

// DedupeKey implements Event: a batch part is one occurrence whatever its delivery.
func (e *PendingPods) DedupeKey() string {
	return fmt.Sprintf("pods/%s/%s/%d", e.Detail.Cluster, e.Detail.BatchID, e.Detail.Part)
}

func (e *PendingPods) encodeDetail() (json.RawMessage, error) {
	d := e.Detail
	if d.Pods == nil {
		d.Pods = []PendingPod{}
	}
	return json.Marshal(d)
}

// pendingPodsWire reads the header strictly and leaves each pod raw, so a bad pod is
// rejected alone.
type pendingPodsWire struct {
	SchemaVersion *string           `json:"schemaVersion"`
	Cluster       string            `json:"cluster"`
	BatchID       string            `json:"batchId"`
	Part          int               `json:"part"`
	Parts         int               `json:"parts"`
	ObservedAt    string            `json:"observedAt"`
	Truncated     bool              `json:"truncated"`
	Pods          []json.RawMessage `json:"pods"`
}

func decodePendingPods(env Envelope, raw json.RawMessage) (Event, error) {
	var w pendingPodsWire
	if err := unmarshalDetail(raw, &w); err != nil {
		return nil, err
	}
	var errs []error
	switch {
	case w.SchemaVersion == nil:
		errs = append(errs, errors.New("detail.schemaVersion is missing"))
	case *w.SchemaVersion != PendingPodsSchemaVersion:
		errs = append(errs, fmt.Errorf("detail.schemaVersion %q is not supported (this build reads %q)", *w.SchemaVersion, PendingPodsSchemaVersion))
	}
	if w.Cluster == "" {
		errs = append(errs, errors.New("detail.cluster is missing"))
	}
	if w.BatchID == "" {
		errs = append(errs, errors.New("detail.batchId is missing"))
	}
	if w.Part < 0 || w.Parts < 0 || w.Part > w.Parts || (w.Parts > 0 && w.Part == 0) {
		errs = append(errs, fmt.Errorf("detail.part %d of parts %d: want 1 ≤ part ≤ parts, or neither", w.Part, w.Parts))
	}
	var observed time.Time
	if w.ObservedAt == "" {
		errs = append(errs, errors.New("detail.observedAt is missing"))
	} else if t, err := time.Parse(time.RFC3339, w.ObservedAt); err != nil {
		errs = append(errs, fmt.Errorf("detail.observedAt %q is not RFC 3339", truncate(w.ObservedAt, 40)))
	} else {
		observed = t
	}
	if w.Pods == nil {
		errs = append(errs, errors.New("detail.pods is missing"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	ev := &PendingPods{Envelope: env, Detail: PendingPodsDetail{
		SchemaVersion: *w.SchemaVersion,
		Cluster:       w.Cluster,
		BatchID:       w.BatchID,
		Part:          w.Part,
		Parts:         w.Parts,
		ObservedAt:    observed,
		Truncated:     w.Truncated,
		Pods:          make([]PendingPod, 0, len(w.Pods)),
	}}
	decoded := decodePendingPodsParallel(w.Pods)
	for i, d := range decoded {
		p, err := d.pod, d.err
		if err != nil {
			ev.Rejected = append(ev.Rejected, RejectedPod{Index: i, Namespace: p.Namespace, Name: p.Name,
				Reason: fmt.Sprintf("detail.pods[%d]: %v", i, err)})
			continue
		}
		ev.Detail.Pods = append(ev.Detail.Pods, p)
	}
	return ev, nil
}

type decodedPod struct {
	pod PendingPod
	err error
}

// decodePendingPodsParallel decodes a batch's pods on every core, in order: a
// 1,000-pod batch is most of the provisioner's decoding time, and a Lambda with more
// than 1,769 MB of memory has a second vCPU.
func decodePendingPodsParallel(raws []json.RawMessage) []decodedPod {
	out := make([]decodedPod, len(raws))
	workers := min(runtime.GOMAXPROCS(0), len(raws)/64+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(raws); i += workers {
				out[i].pod, out[i].err = decodePendingPod(raws[i])
			}
		}()
	}
	wg.Wait()
	return out
}

// podIdentity is decoded first so a rejected pod can still be named.
type podIdentity struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func decodePendingPod(raw json.RawMessage) (PendingPod, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return PendingPod{}, fmt.Errorf("not an object: %s", truncate(string(raw), 40))
	}
	var p PendingPod
	if err := json.Unmarshal(raw, &p); err != nil {
		var id podIdentity
		_ = json.Unmarshal(raw, &id) // best effort, only to name the rejected pod
		return PendingPod{Namespace: id.Namespace, Name: id.Name}, jsonerr.Describe(nil, err)
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

// Validate reports what makes the pod entry unusable.
func (p *PendingPod) Validate() error {
	var errs []error
	if p.Namespace == "" {
		errs = append(errs, errors.New("namespace is missing"))
	}
	if p.Name == "" {
		errs = append(errs, errors.New("name is missing"))
	}
	if p.UID == "" {
		errs = append(errs, errors.New("uid is missing"))
	}
	checkList := func(field string, l corev1.ResourceList) {
		for _, p := range quantity.List(l) {
			errs = append(errs, fmt.Errorf("%s.%s: %s", field, p.Name, p.Message))
		}
	}
	checkList("requests", p.Requests)
	checkList("overhead", p.Overhead)
	checkList("podRequests", p.PodRequests)
	for i, c := range p.Containers {
		checkList(fmt.Sprintf("containers[%d].requests", i), c.Requests)
	}
	for i, c := range p.InitContainers {
		checkList(fmt.Sprintf("initContainers[%d].requests", i), c.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			errs = append(errs, fmt.Errorf("initContainers[%d].restartPolicy %q: only Always (a sidecar) is meaningful", i, *c.RestartPolicy))
		}
	}
	if len(errs) == 0 {
		// Each amount in range can still add up past it; the engine reads the pod
		// ToPod builds, so that is what is bounded (the lists above name the field).
		spec := p.ToPod().Spec
		quantity.PodSpec(&spec, func(field string, name corev1.ResourceName, msg string) {
			errs = append(errs, fmt.Errorf("%s: %s", name, msg))
		})
	}
	return errors.Join(errs...)
}

// Key is namespace/name, the usual way to name a pod in logs.
func (p *PendingPod) Key() string { return p.Namespace + "/" + p.Name }

// hasContainerRequests reports whether the entry carries per-container requests, which
// take precedence over the precomputed Requests.
func (p *PendingPod) hasContainerRequests() bool {
	return len(p.Containers) > 0 || len(p.InitContainers) > 0 || len(p.PodRequests) > 0
}

// EffectiveRequests is what the pod needs from a node: facts.PodRequests of the pod
// ToPod rebuilds (kube-scheduler's formula: containers, sidecars, init containers,
// pod-level resources, overhead), or the precomputed Requests when the sender sent only
// that.
func (p *PendingPod) EffectiveRequests() corev1.ResourceList {
	if !p.hasContainerRequests() {
		return p.Requests.DeepCopy()
	}
	return facts.PodRequests(p.ToPod())
}

// ToPod rebuilds a Pending *corev1.Pod carrying exactly the scheduling-relevant fields,
// for the packing engine, which works on pods. With only precomputed Requests the pod
// gets one container named "requests" holding them (overhead is already included, so
// Spec.Overhead stays empty).
func (p *PendingPod) ToPod() *corev1.Pod {
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace,
			Name:      p.Name,
			UID:       p.UID,
			Labels:    copyMap(p.Labels),
		},
		Spec: corev1.PodSpec{
			SchedulerName:             p.SchedulerName,
			NodeSelector:              copyMap(p.NodeSelector),
			Affinity:                  p.Affinity.DeepCopy(),
			Tolerations:               deepCopyTolerations(p.Tolerations),
			TopologySpreadConstraints: deepCopyTSC(p.TopologySpreadConstraints),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{
				Type:    corev1.PodScheduled,
				Status:  corev1.ConditionFalse,
				Reason:  corev1.PodReasonUnschedulable,
				Message: p.UnschedulableReason,
			}},
		},
	}
	if p.Priority != nil {
		prio := *p.Priority
		pod.Spec.Priority = &prio
	}
	for _, o := range p.OwnerReferences {
		ref := metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name}
		if o.Controller {
			ctrl := true
			ref.Controller = &ctrl
		}
		pod.OwnerReferences = append(pod.OwnerReferences, ref)
	}
	if !p.hasContainerRequests() {
		if p.Requests != nil {
			pod.Spec.Containers = []corev1.Container{{Name: "requests", Resources: corev1.ResourceRequirements{Requests: p.Requests.DeepCopy()}}}
		}
		return pod
	}
	for _, c := range p.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: c.Name, Resources: corev1.ResourceRequirements{Requests: c.Requests.DeepCopy()}})
	}
	for _, c := range p.InitContainers {
		ic := corev1.Container{Name: c.Name, Resources: corev1.ResourceRequirements{Requests: c.Requests.DeepCopy()}}
		if c.RestartPolicy != nil {
			rp := *c.RestartPolicy
			ic.RestartPolicy = &rp
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, ic)
	}
	if p.Overhead != nil {
		pod.Spec.Overhead = p.Overhead.DeepCopy()
	}
	if p.PodRequests != nil {
		pod.Spec.Resources = &corev1.ResourceRequirements{Requests: p.PodRequests.DeepCopy()}
	}
	return pod
}

// FromPod extracts the scheduling-relevant part of a pod, as the forwarder sends it.
// Everything is copied, so the result does not alias an informer's cache.
func FromPod(pod *corev1.Pod) PendingPod {
	p := PendingPod{
		Namespace:                 pod.Namespace,
		Name:                      pod.Name,
		UID:                       pod.UID,
		Labels:                    copyMap(pod.Labels),
		SchedulerName:             pod.Spec.SchedulerName,
		NodeSelector:              copyMap(pod.Spec.NodeSelector),
		Affinity:                  pod.Spec.Affinity.DeepCopy(),
		Tolerations:               deepCopyTolerations(pod.Spec.Tolerations),
		TopologySpreadConstraints: deepCopyTSC(pod.Spec.TopologySpreadConstraints),
	}
	if pod.Spec.Priority != nil {
		prio := *pod.Spec.Priority
		p.Priority = &prio
	}
	for _, o := range pod.OwnerReferences {
		p.OwnerReferences = append(p.OwnerReferences, OwnerRef{
			APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, Controller: o.Controller != nil && *o.Controller})
	}
	for _, c := range pod.Spec.Containers {
		p.Containers = append(p.Containers, ContainerRequests{Name: c.Name, Requests: c.Resources.Requests.DeepCopy()})
	}
	for _, c := range pod.Spec.InitContainers {
		cr := ContainerRequests{Name: c.Name, Requests: c.Resources.Requests.DeepCopy()}
		// Only "Always" changes the arithmetic (a sidecar); other values are not valid
		// on init containers and would be rejected by the receiver.
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			rp := *c.RestartPolicy
			cr.RestartPolicy = &rp
		}
		p.InitContainers = append(p.InitContainers, cr)
	}
	if pod.Spec.Overhead != nil {
		p.Overhead = pod.Spec.Overhead.DeepCopy()
	}
	if pod.Spec.Resources != nil && len(pod.Spec.Resources.Requests) > 0 {
		p.PodRequests = pod.Spec.Resources.Requests.DeepCopy()
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			p.UnschedulableReason = c.Message
		}
	}
	return p
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func deepCopyTolerations(in []corev1.Toleration) []corev1.Toleration {
	if in == nil {
		return nil
	}
	out := make([]corev1.Toleration, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

func deepCopyTSC(in []corev1.TopologySpreadConstraint) []corev1.TopologySpreadConstraint {
	if in == nil {
		return nil
	}
	out := make([]corev1.TopologySpreadConstraint, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
