package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Kind names the typed event a decoded input turned into.
type Kind string

// Kinds returned by Decode.
const (
	KindSpotInterruption        Kind = "SpotInterruption"
	KindRebalanceRecommendation Kind = "RebalanceRecommendation"
	KindStateChange             Kind = "StateChange"
	KindHealthScheduledChange   Kind = "HealthScheduledChange"
	KindScheduledRule           Kind = "ScheduledRule"
	KindSchedulerTick           Kind = "SchedulerTick"
	KindPendingPods             Kind = "PendingPods"
	KindIgnored                 Kind = "Ignored"
)

// Sources and detail-types Joiner handles.
const (
	SourceEC2       = "aws.ec2"
	SourceHealth    = "aws.health"
	SourceEvents    = "aws.events"
	SourceScheduler = "aws.scheduler"
	// SourceForwarder is the source of Joiner's own events. EventBridge refuses
	// PutEvents sources that start with "aws.", hence the project prefix.
	SourceForwarder = "joiner.forwarder"

	DetailTypeSpotInterruption = "EC2 Spot Instance Interruption Warning"
	DetailTypeRebalance        = "EC2 Instance Rebalance Recommendation"
	DetailTypeStateChange      = "EC2 Instance State-change Notification"
	DetailTypeHealth           = "AWS Health Event"
	DetailTypeScheduled        = "Scheduled Event"
	DetailTypePendingPods      = "Pending Pods"
)

// Event is a decoded input. Concrete types are the pointers listed in the package doc.
type Event interface {
	// Kind says which concrete type this is.
	Kind() Kind
	// Meta returns the EventBridge envelope the event arrived in.
	Meta() *Envelope
	// DedupeKey identifies the occurrence, not the delivery: EventBridge delivers at
	// least once, so two deliveries of one occurrence share the key.
	DedupeKey() string
	// encodeDetail renders the detail back to JSON (see Encode).
	encodeDetail() (json.RawMessage, error)
}

// Envelope holds the EventBridge fields common to every event. Version is optional
// because AWS's current EC2 state-change sample omits it.
type Envelope struct {
	Version    string
	ID         string
	DetailType string
	Source     string
	Account    string
	// Time is when the event occurred (RFC 3339 on the wire); zero when absent.
	Time   time.Time
	Region string
	// Resources are ARNs for aws.ec2 events but bare instance IDs for aws.health: read
	// instance IDs from the detail, never by parsing these.
	Resources []string
}

// Meta returns the envelope itself, so types that embed it satisfy Event.Meta.
func (e *Envelope) Meta() *Envelope { return e }

// wireEnvelope is the JSON shape. Pointers tell "absent" from "empty" so that an
// encoded event says what the original said.
type wireEnvelope struct {
	Version    *string         `json:"version,omitempty"`
	ID         string          `json:"id,omitempty"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account,omitempty"`
	Time       string          `json:"time,omitempty"`
	Region     string          `json:"region,omitempty"`
	Resources  *[]string       `json:"resources,omitempty"`
	Detail     json.RawMessage `json:"detail,omitempty"`
}

// Encode renders an event as the EventBridge envelope a Lambda target receives.
// Decode(Encode(ev)) yields an equal event.
func Encode(ev Event) ([]byte, error) {
	if ev == nil {
		return nil, fmt.Errorf("events: encode: nil event")
	}
	m := ev.Meta()
	detail, err := ev.encodeDetail()
	if err != nil {
		return nil, fmt.Errorf("events: encode %s: %w", ev.Kind(), err)
	}
	w := wireEnvelope{
		ID:         m.ID,
		DetailType: m.DetailType,
		Source:     m.Source,
		Account:    m.Account,
		Region:     m.Region,
		Detail:     detail,
	}
	if m.Version != "" {
		w.Version = &m.Version
	}
	if !m.Time.IsZero() {
		w.Time = m.Time.Format(time.RFC3339Nano)
	}
	if m.Resources != nil {
		w.Resources = &m.Resources
	}
	return json.Marshal(w)
}

// isNull reports whether raw is absent or the JSON literal null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}
