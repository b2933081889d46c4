package awssim

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// FaultKind names a kind of injected fault.
type FaultKind string

// Fault kinds.
const (
	// FaultThrottle answers the throttling error of the service: EC2
	// RequestLimitExceeded (HTTP 503), SSM/EKS ThrottlingException.
	FaultThrottle FaultKind = "throttle"
	// FaultInternal answers the service's 5xx internal error (EC2 InternalError, HTTP 500).
	FaultInternal FaultKind = "internal"
	// FaultLatency delays the answer by Latency (a real sleep, or, with
	// SimulatedOnly and an Advancer clock, an advance of simulated time).
	FaultLatency FaultKind = "latency"
	// FaultPartialFleet caps the instances one CreateFleet or RunInstances call
	// launches at Launch; the unfulfilled rest is reported as
	// InsufficientInstanceCapacity in the fleet's Errors.
	FaultPartialFleet FaultKind = "partial-fleet"
)

// Fault is one scripted fault. It hits calls of Action ("" for every action;
// "CreateFleet" or "ec2:CreateFleet") until Count hits are used up (0: until
// cleared), each matching call with probability Rate (0 means 1).
type Fault struct {
	Kind          FaultKind `json:"kind"`
	Action        string    `json:"action,omitempty"`
	Count         int       `json:"count,omitempty"`
	Rate          float64   `json:"rate,omitempty"`
	Latency       Duration  `json:"latency,omitempty"`
	SimulatedOnly bool      `json:"simulatedOnly,omitempty"`
	Launch        int       `json:"launch,omitempty"`
	// Hits counts the calls the fault has hit so far (reported, not read).
	Hits int `json:"hits,omitempty"`
}

// Bounds of a latency fault: a real sleep holds a caller (and a replay) for that
// long in wall time; a simulated one only moves the fake clock.
const (
	MaxRealLatency      = time.Minute
	MaxSimulatedLatency = time.Hour
)

func (f Fault) validate() error {
	switch f.Kind {
	case FaultThrottle, FaultInternal:
	case FaultLatency:
		limit := MaxRealLatency
		if f.SimulatedOnly {
			limit = MaxSimulatedLatency
		}
		if f.Latency <= 0 || time.Duration(f.Latency) > limit {
			return fmt.Errorf("latency: %s is out of range: want more than 0, at most %s (%s with simulatedOnly)",
				time.Duration(f.Latency), MaxRealLatency, MaxSimulatedLatency)
		}
	case FaultPartialFleet:
		if f.Launch < 0 {
			return fmt.Errorf("launch: %d is out of range: want 0 or more", f.Launch)
		}
	default:
		return fmt.Errorf("kind: unknown fault kind %q (want throttle, internal, latency or partial-fleet)", f.Kind)
	}
	if f.Count < 0 {
		return fmt.Errorf("count: %d is out of range: want 0 (until cleared) or more", f.Count)
	}
	if !(f.Rate >= 0 && f.Rate <= 1) {
		return fmt.Errorf("rate: %v is out of range: want 0 to 1 (0 means every matching call)", f.Rate)
	}
	return nil
}

// matches reports whether the fault applies to service:action.
func (f Fault) matches(service, action string) bool {
	if f.Action == "" {
		return true
	}
	svc, act, ok := strings.Cut(f.Action, ":")
	if !ok {
		return strings.EqualFold(f.Action, action)
	}
	return strings.EqualFold(svc, service) && strings.EqualFold(act, action)
}

// Duration is a time.Duration that reads and writes as a Go duration string ("250ms").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts a duration string ("1.5s") or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("awssim: bad duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("awssim: duration must be a string like \"250ms\" or nanoseconds: %s", b)
	}
	*d = Duration(n)
	return nil
}

// Call is one request the simulator answered, for assertions in tests.
type Call struct {
	Seq     int       `json:"seq"`
	Time    time.Time `json:"time"` // simulated time
	Service string    `json:"service"`
	Action  string    `json:"action"`
	// Params summarises the request: EC2 form parameters (long values such as
	// UserData shortened), or the top-level JSON fields of SSM/EKS requests.
	Params map[string]string `json:"params,omitempty"`
	// Code is "OK" or the error code answered (e.g. RequestLimitExceeded, DryRunOperation).
	Code   string `json:"code"`
	Status int    `json:"status"`
	// Attempt is the SDK's attempt number from the amz-sdk-request header (0 when absent).
	Attempt int  `json:"attempt,omitempty"`
	DryRun  bool `json:"dryRun,omitempty"`
}

// CodeOK is the Call.Code of a successful call.
const CodeOK = "OK"
