package events

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// TickDetail is the detail of a schedule event. Classic rules send an object ({}); the
// EventBridge Scheduler's default payload sends the string "{}". Both decode to the
// same Object; AsString remembers the wire form so encoding reproduces it.
type TickDetail struct {
	// Object is the detail object, compacted; nil when the event had no detail.
	Object json.RawMessage
	// AsString is true when the wire detail was a JSON string holding the object.
	AsString bool
}

func decodeTickDetail(raw json.RawMessage) (TickDetail, error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return TickDetail{}, nil
	}
	var d TickDetail
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return TickDetail{}, fmt.Errorf("detail: %v", err)
		}
		raw = bytes.TrimSpace([]byte(s))
		d.AsString = true
		if len(raw) == 0 {
			return TickDetail{}, fmt.Errorf("detail is an empty string (want an object or a string holding one)")
		}
	}
	if raw[0] != '{' {
		return TickDetail{}, fmt.Errorf("detail is %s, not an object", truncate(string(raw), 40))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return TickDetail{}, fmt.Errorf("detail: invalid JSON object: %v", err)
	}
	// Compact also rejects anything after the object; keep its canonical form so that
	// equal details compare equal.
	d.Object = buf.Bytes()
	return d, nil
}

func (d TickDetail) encode() (json.RawMessage, error) {
	if d.Object == nil {
		return nil, nil
	}
	if d.AsString {
		return json.Marshal(string(d.Object))
	}
	return d.Object, nil
}

// ScheduledRule is the event a classic EventBridge rule with a ScheduleExpression
// sends (source aws.events, detail-type "Scheduled Event").
type ScheduledRule struct {
	Envelope
	Detail TickDetail
}

// Kind implements Event.
func (*ScheduledRule) Kind() Kind { return KindScheduledRule }

// DedupeKey implements Event.
func (e *ScheduledRule) DedupeKey() string { return "tick/" + e.Account + "/" + e.ID }

func (e *ScheduledRule) encodeDetail() (json.RawMessage, error) { return e.Detail.encode() }

// SchedulerTick is the default payload of an EventBridge Scheduler schedule
// (AWS::Scheduler::Schedule without Input): source aws.scheduler, detail often the
// string "{}". Resources hold the schedule ARN.
type SchedulerTick struct {
	Envelope
	Detail TickDetail
}

// Kind implements Event.
func (*SchedulerTick) Kind() Kind { return KindSchedulerTick }

// DedupeKey implements Event.
func (e *SchedulerTick) DedupeKey() string { return "tick/" + e.Account + "/" + e.ID }

func (e *SchedulerTick) encodeDetail() (json.RawMessage, error) { return e.Detail.encode() }

func decodeScheduledRule(env Envelope, raw json.RawMessage) (Event, error) {
	d, err := decodeTickDetail(raw)
	if err != nil {
		return nil, err
	}
	return &ScheduledRule{Envelope: env, Detail: d}, nil
}

func decodeSchedulerTick(env Envelope, raw json.RawMessage) (Event, error) {
	d, err := decodeTickDetail(raw)
	if err != nil {
		return nil, err
	}
	return &SchedulerTick{Envelope: env, Detail: d}, nil
}
