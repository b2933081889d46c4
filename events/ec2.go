package events

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/facts"
)

// SpotWarningLead is how long before the interruption AWS sends the spot warning.
const SpotWarningLead = 2 * time.Minute

// SpotInterruption is "EC2 Spot Instance Interruption Warning": the instance will be
// interrupted (hibernated, stopped or terminated) two minutes after Time.
type SpotInterruption struct {
	Envelope
	InstanceID string
	// Action is "terminate", "stop" or "hibernate".
	Action string
}

// Kind implements Event.
func (*SpotInterruption) Kind() Kind { return KindSpotInterruption }

// DedupeKey implements Event: EventBridge keeps the id across redeliveries.
func (e *SpotInterruption) DedupeKey() string { return "spot/" + e.Account + "/" + e.ID }

// Deadline is when the instance is interrupted, or the zero time when the envelope had
// no time.
func (e *SpotInterruption) Deadline() time.Time {
	if e.Time.IsZero() {
		return time.Time{}
	}
	return e.Time.Add(SpotWarningLead)
}

type spotDetail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
}

func (e *SpotInterruption) encodeDetail() (json.RawMessage, error) {
	return json.Marshal(spotDetail{InstanceID: e.InstanceID, InstanceAction: e.Action})
}

func decodeSpot(env Envelope, raw json.RawMessage) (Event, error) {
	var d spotDetail
	if err := unmarshalDetail(raw, &d); err != nil {
		return nil, err
	}
	if err := checkInstanceID(d.InstanceID); err != nil {
		return nil, err
	}
	switch d.InstanceAction {
	case "terminate", "stop", "hibernate":
	case "":
		return nil, fmt.Errorf("detail.instance-action is missing")
	default:
		return nil, fmt.Errorf("detail.instance-action %q: want terminate, stop or hibernate", d.InstanceAction)
	}
	return &SpotInterruption{Envelope: env, InstanceID: d.InstanceID, Action: d.InstanceAction}, nil
}

// RebalanceRecommendation is "EC2 Instance Rebalance Recommendation": the instance is
// at elevated risk of interruption. It can arrive before, with or after the warning.
type RebalanceRecommendation struct {
	Envelope
	InstanceID string
}

// Kind implements Event.
func (*RebalanceRecommendation) Kind() Kind { return KindRebalanceRecommendation }

// DedupeKey implements Event.
func (e *RebalanceRecommendation) DedupeKey() string { return "rebalance/" + e.Account + "/" + e.ID }

type instanceDetail struct {
	InstanceID string `json:"instance-id"`
}

func (e *RebalanceRecommendation) encodeDetail() (json.RawMessage, error) {
	return json.Marshal(instanceDetail{InstanceID: e.InstanceID})
}

func decodeRebalance(env Envelope, raw json.RawMessage) (Event, error) {
	var d instanceDetail
	if err := unmarshalDetail(raw, &d); err != nil {
		return nil, err
	}
	if err := checkInstanceID(d.InstanceID); err != nil {
		return nil, err
	}
	return &RebalanceRecommendation{Envelope: env, InstanceID: d.InstanceID}, nil
}

// Instance states carried by "EC2 Instance State-change Notification".
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
)

// StateChange is "EC2 Instance State-change Notification".
type StateChange struct {
	Envelope
	InstanceID string
	State      string
}

// Kind implements Event.
func (*StateChange) Kind() Kind { return KindStateChange }

// DedupeKey implements Event.
func (e *StateChange) DedupeKey() string { return "state/" + e.Account + "/" + e.ID }

// Leaving reports whether the instance is going away or gone (stopping, stopped,
// shutting-down, terminated): its Node and NodeClaim no longer hold capacity.
func (e *StateChange) Leaving() bool {
	switch e.State {
	case StateStopping, StateStopped, StateShuttingDown, StateTerminated:
		return true
	}
	return false
}

type stateDetail struct {
	InstanceID string `json:"instance-id"`
	State      string `json:"state"`
}

func (e *StateChange) encodeDetail() (json.RawMessage, error) {
	return json.Marshal(stateDetail{InstanceID: e.InstanceID, State: e.State})
}

func decodeStateChange(env Envelope, raw json.RawMessage) (Event, error) {
	var d stateDetail
	if err := unmarshalDetail(raw, &d); err != nil {
		return nil, err
	}
	if err := checkInstanceID(d.InstanceID); err != nil {
		return nil, err
	}
	switch d.State {
	case StatePending, StateRunning, StateStopping, StateStopped, StateShuttingDown, StateTerminated:
	case "":
		return nil, fmt.Errorf("detail.state is missing")
	default:
		return nil, fmt.Errorf("detail.state %q: want one of pending, running, stopping, stopped, shutting-down, terminated", d.State)
	}
	return &StateChange{Envelope: env, InstanceID: d.InstanceID, State: d.State}, nil
}

func checkInstanceID(id string) error {
	if id == "" {
		return fmt.Errorf("detail.instance-id is missing")
	}
	if !facts.ValidInstanceID(id) {
		return fmt.Errorf("detail.instance-id %q is not an EC2 instance ID", id)
	}
	return nil
}
