package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// ReportingController is the reportingController of every Event Joiner writes.
const ReportingController = "joiner"

// Event reasons, named as Karpenter names them so `kubectl describe` and alerting built
// for Karpenter keep working.
const (
	ReasonNominated            = "Nominated"
	ReasonFailedScheduling     = "FailedScheduling"
	ReasonLaunched             = "Launched"
	ReasonLaunchFailed         = "FailedLaunch"
	ReasonRegistered           = "Registered"
	ReasonInitialized          = "Initialized"
	ReasonRegistrationTimeout  = "RegistrationTimeout"
	ReasonDisrupting           = "Disrupting"
	ReasonDisruptionBlocked    = "DisruptionBlocked"
	ReasonDisruptionAbandoned  = "DisruptionAbandoned"
	ReasonEvicted              = "Evicted"
	ReasonFailedDraining       = "FailedDraining"
	ReasonTerminating          = "DisruptionTerminating"
	ReasonInstanceTerminated   = "InstanceTerminated"
	ReasonUnconsolidatable     = "Unconsolidatable"
	ReasonRebalanceRecommended = "RebalanceRecommended"
)

// Event is one decision to show on an object.
type Event struct {
	Regarding corev1.ObjectReference
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type   string
	Reason string
	// Action is what Joiner did or would do (e.g. "Evict", "Launch", "Delete").
	Action string
	// Note is the human-readable message.
	Note string
}

// Recorder writes events.k8s.io/v1 Events. Recording is best effort: a failure is
// logged and never fails the decision it reports. The same (object, reason, note)
// recorded again updates one Event's series instead of adding another.
type Recorder struct {
	client   EventsAPI
	instance string
	now      func() time.Time
	log      *slog.Logger
}

// NewRecorder returns a Recorder; instance names the writer (function name and
// invocation id), as reportingInstance.
func NewRecorder(client EventsAPI, instance string, now func() time.Time, log *slog.Logger) *Recorder {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	if instance == "" {
		instance = ReportingController
	}
	if len(instance) > 128 {
		instance = instance[:128]
	}
	return &Recorder{client: client, instance: instance, now: now, log: log}
}

// Record writes e.
func (r *Recorder) Record(ctx context.Context, e Event) {
	if r == nil || r.client == nil {
		return
	}
	if err := r.record(ctx, e); err != nil {
		r.log.WarnContext(ctx, "event not recorded", "reason", e.Reason, "object", e.Regarding.Kind+"/"+e.Regarding.Name, "error", err.Error())
	}
}

func (r *Recorder) record(ctx context.Context, e Event) error {
	ns := e.Regarding.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // cluster-scoped objects' events live in default
	}
	if e.Type == "" {
		e.Type = corev1.EventTypeNormal
	}
	if len(e.Note) > 1000 {
		e.Note = e.Note[:1000]
	}
	if e.Action == "" {
		e.Action = e.Reason
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s", e.Regarding.Kind, e.Regarding.Name, e.Regarding.UID, e.Reason, e.Note)
	name := fmt.Sprintf("%s.%016x", strings.ToLower(e.Regarding.Name), h.Sum64())
	now := r.now()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: ReportingController,
		ReportingInstance:   r.instance,
		Action:              e.Action,
		Reason:              e.Reason,
		Regarding:           e.Regarding,
		Note:                e.Note,
		Type:                e.Type,
	}
	_, err := r.client.Events(ns).Create(ctx, ev, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old, err := r.client.Events(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if d := DedupeInterval[e.Reason]; d > 0 && now.Sub(lastObserved(old)) < d {
		return nil // said within the interval: no write
	}
	count := int32(2)
	if old.Series != nil {
		count = old.Series.Count + 1
	}
	patch, _ := json.Marshal(map[string]any{
		"series": map[string]any{"count": count, "lastObservedTime": metav1.NewMicroTime(now)},
	})
	_, err = r.client.Events(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// DedupeInterval is, per Event reason, how long the same Event (object, reason and
// note) is not written again: Karpenter's DedupeTimeout. A provisioner runs on every
// pending-pods batch and every sweep, and without it wrote one FailedScheduling
// update per unschedulable pod per run.
var DedupeInterval = map[string]time.Duration{
	ReasonFailedScheduling: 5 * time.Minute,
}

// lastObserved is when an Event was last said: its series' last observation, else
// its eventTime (or, from an older writer, its deprecated lastTimestamp).
func lastObserved(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.DeprecatedLastTimestamp.Time
}

// PodRef, NodeRef and NodeClaimRef build the regarding references of Events.
func PodRef(p *corev1.Pod) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// NodeRef references a Node.
func NodeRef(n *corev1.Node) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID}
}

// NodeClaimRef references a NodeClaim.
func NodeClaimRef(nc *karpenter.NodeClaim) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: karpenter.NodeClaimKind, APIVersion: karpenter.APIVersion, Name: nc.Name, UID: nc.UID}
}

// NoteNamingPods is head followed by "N pod(s) should schedule on it:" and as many
// of pods as fit an Event note's 1 kB, counting the rest.
func NoteNamingPods(head string, pods []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%d pod(s) should schedule on it:", head, len(pods))
	for i, key := range pods {
		more := fmt.Sprintf(" and %d more", len(pods)-i)
		if b.Len()+1+len(key)+len(more) > 1000 {
			b.WriteString(more)
			break
		}
		b.WriteString(" " + key)
	}
	return b.String()
}

// Nominate records, on each pod, the node or NodeClaim it is expected to land on
// (Karpenter's "Nominated" Event); target is e.g. "nodeclaim/default-x7k2p" or "node/ip-10-0-1-2".
func (c *Client) Nominate(ctx context.Context, pods []*corev1.Pod, target string) {
	for _, p := range pods {
		c.normal(ctx, PodRef(p), ReasonNominated, "Nominate", "Pod should schedule on: "+target)
	}
}

// FailedScheduling records why no NodePool can take a pod.
func (c *Client) FailedScheduling(ctx context.Context, p *corev1.Pod, reason string) {
	c.warn(ctx, PodRef(p), ReasonFailedScheduling, "Schedule", "Failed to schedule pod, "+reason)
}
