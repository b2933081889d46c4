package awssim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/jsonerr"
)

// FaultScript is the body of POST /_sim/faults: everything a test or an
// operator can script over HTTP, applied in the order of the fields.
type FaultScript struct {
	// Clear removes the scripted faults first (ICE, capacity and policy stay).
	Clear      bool        `json:"clear,omitempty"`
	Faults     []Fault     `json:"faults,omitempty"`
	ICE        []Offering  `json:"ice,omitempty"`
	ClearICE   []Offering  `json:"clearIce,omitempty"`
	Capacity   []Capacity  `json:"capacity,omitempty"` // count < 0: unlimited
	SpotPrices []SpotPrice `json:"spotPrices,omitempty"`
	Deny       []string    `json:"deny,omitempty"`
	Allow      []string    `json:"allow,omitempty"`
	// Interrupt lists spot instances to send an interruption warning to.
	Interrupt []string `json:"interrupt,omitempty"`
}

// FaultScriptResult answers POST /_sim/faults.
type FaultScriptResult struct {
	// Events holds the interruption warnings issued, one per Interrupt entry.
	Events []json.RawMessage `json:"events,omitempty"`
	Faults []Fault           `json:"faults"`
}

// Validate reports the first entry of the script that cannot be applied, naming
// it (faults[2].rate, spotPrices[0].price).
func (fs FaultScript) Validate() error {
	for i, f := range fs.Faults {
		if err := f.validate(); err != nil {
			return fmt.Errorf("faults[%d]: %w", i, err)
		}
	}
	for i, p := range fs.SpotPrices {
		if !(p.Price > 0) || math.IsInf(p.Price, 0) {
			return fmt.Errorf("spotPrices[%d].price: the spot price of %s in %s must be a positive number, got %v", i, p.InstanceType, p.Zone, p.Price)
		}
	}
	return nil
}

// ApplyFaults runs a fault script; it applies nothing when an entry is invalid.
func (s *Sim) ApplyFaults(fs FaultScript) (FaultScriptResult, error) {
	var res FaultScriptResult
	if err := fs.Validate(); err != nil {
		return res, fmt.Errorf("awssim: %w", err)
	}
	if fs.Clear {
		s.ClearFaults()
	}
	for _, f := range fs.Faults {
		s.AddFault(f)
	}
	for _, o := range fs.ICE {
		s.SetICE(o, true)
	}
	for _, o := range fs.ClearICE {
		s.SetICE(o, false)
	}
	for _, c := range fs.Capacity {
		s.SetCapacity(c.Offering, c.Count)
	}
	for _, p := range fs.SpotPrices {
		s.SetSpotPrice(p.InstanceType, p.Zone, p.Price)
	}
	s.Deny(fs.Deny...)
	s.Allow(fs.Allow...)
	for _, id := range fs.Interrupt {
		ev, err := s.Interrupt(id)
		if err != nil {
			return res, err
		}
		res.Events = append(res.Events, ev)
	}
	res.Faults = s.State().Faults
	if res.Faults == nil {
		res.Faults = []Fault{}
	}
	return res, nil
}

// serveControl answers the /_sim/ endpoints:
//
//	GET  /_sim/state   the Snapshot (a valid seed file)
//	POST /_sim/state   merge a Seed into the state
//	GET  /_sim/calls   the call log
//	GET  /_sim/events  the EventBridge events emitted so far
//	POST /_sim/faults  run a FaultScript
//	DELETE /_sim/faults clear scripted faults
//	POST /_sim/clock   {"advance":"5m"} or {"set":"2026-01-01T00:00:00Z"} (fake clock only)
func (s *Sim) serveControl(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		enc.Encode(v)
	}
	fail := func(status int, err error) { reply(status, map[string]string{"error": err.Error()}) }
	decode := func(v any) bool {
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				fail(http.StatusRequestEntityTooLarge, fmt.Errorf("awssim: %s body is larger than the limit of %d bytes", r.URL.Path, MaxBodyBytes))
				return false
			}
			fail(http.StatusBadRequest, fmt.Errorf("awssim: bad %s body: %w", r.URL.Path, jsonerr.Describe(nil, err)))
			return false
		}
		return true
	}
	switch route := r.Method + " " + r.URL.Path; route {
	case "GET /_sim/state":
		reply(http.StatusOK, s.State())
	case "POST /_sim/state":
		var seed Seed
		if !decode(&seed) {
			return
		}
		if err := s.Apply(seed); err != nil {
			fail(http.StatusBadRequest, err)
			return
		}
		reply(http.StatusOK, map[string]bool{"ok": true})
	case "GET /_sim/calls":
		reply(http.StatusOK, s.Calls())
	case "GET /_sim/events":
		reply(http.StatusOK, s.Events())
	case "POST /_sim/faults":
		var fs FaultScript
		if !decode(&fs) {
			return
		}
		res, err := s.ApplyFaults(fs)
		if err != nil {
			fail(http.StatusBadRequest, err)
			return
		}
		reply(http.StatusOK, res)
	case "DELETE /_sim/faults":
		s.ClearFaults()
		reply(http.StatusOK, map[string]bool{"ok": true})
	case "POST /_sim/clock":
		adv, ok := s.clock.(Advancer)
		if !ok {
			fail(http.StatusConflict, fmt.Errorf("awssim: the simulator runs on the wall clock; start it with a fake clock to move time"))
			return
		}
		var body struct {
			Advance Duration  `json:"advance"`
			Set     time.Time `json:"set"`
		}
		if !decode(&body) {
			return
		}
		if !body.Set.IsZero() {
			if fc, ok := adv.(*FakeClock); ok {
				fc.Set(body.Set)
			}
		}
		adv.Advance(time.Duration(body.Advance))
		reply(http.StatusOK, map[string]time.Time{"now": s.clock.Now()})
	default:
		fail(http.StatusNotFound, fmt.Errorf("awssim: no control endpoint %s (see GET /_sim/state, /_sim/calls, /_sim/events; POST /_sim/faults, /_sim/clock, /_sim/state)", route))
	}
}
