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

func (f Fault) validate() error {
	switch f.Kind {
	case FaultThrottle, FaultInternal:
	case FaultLatency:
		if f.Latency <= 0 {
			return fmt.Errorf("awssim: latency fault needs a positive latency")
		}
	case FaultPartialFleet:
		if f.Launch < 0 {
			return fmt.Errorf("awssim: partial-fleet fault needs launch >= 0, got %d", f.Launch)
		}
	default:
		return fmt.Errorf("awssim: unknown fault kind %q (want throttle, internal, latency or partial-fleet)", f.Kind)
	}
	if f.Count < 0 {
		return fmt.Errorf("awssim: fault count must be >= 0, got %d", f.Count)
	}
	if f.Rate < 0 || f.Rate > 1 {
		return fmt.Errorf("awssim: fault rate must be within [0, 1], got %v", f.Rate)
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
