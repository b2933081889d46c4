package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/joiner-autoscaler/joiner/shared/jsonerr"
)

// ErrMalformed is wrapped by every error Decode returns, so callers can tell bad input
// (log it, do not retry) from their own failures.
var ErrMalformed = errors.New("malformed event")

// DecodeError says what is wrong with an input and which event it was, as far as known.
type DecodeError struct {
	Source     string
	DetailType string
	ID         string
	Err        error
}

func (e *DecodeError) Error() string {
	if e.Source == "" && e.DetailType == "" {
		return fmt.Sprintf("events: %v", e.Err)
	}
	return fmt.Sprintf("events: %s %q (id %q): %v", e.Source, e.DetailType, e.ID, e.Err)
}

// Unwrap lets errors.Is(err, ErrMalformed) hold and exposes the cause.
func (e *DecodeError) Unwrap() []error { return []error{ErrMalformed, e.Err} }

// Ignored is a well-formed event Joiner has no business with (another source, another
// service's Health event, another account's or cluster's event). Handlers log Reason
// and change nothing.
type Ignored struct {
	Envelope
	Reason string
	// Detail is the original detail, kept so the event can be logged or re-encoded.
	Detail json.RawMessage
}

// Kind implements Event.
func (*Ignored) Kind() Kind { return KindIgnored }

// DedupeKey implements Event.
func (e *Ignored) DedupeKey() string { return "ignored/" + e.Account + "/" + e.ID }

func (e *Ignored) encodeDetail() (json.RawMessage, error) {
	if isNull(e.Detail) {
		return nil, nil
	}
	return e.Detail, nil
}

func ignore(env Envelope, detail json.RawMessage, reason string) *Ignored {
	var d json.RawMessage
	if !isNull(detail) {
		d = append(json.RawMessage(nil), bytes.TrimSpace(detail)...)
	}
	return &Ignored{Envelope: env, Reason: reason, Detail: d}
}

type decoder func(Envelope, json.RawMessage) (Event, error)

// route is the dispatch table; a (source, detail-type) pair not in it is ignored.
var route = map[[2]string]decoder{
	{SourceEC2, DetailTypeSpotInterruption}:  decodeSpot,
	{SourceEC2, DetailTypeRebalance}:         decodeRebalance,
	{SourceEC2, DetailTypeStateChange}:       decodeStateChange,
	{SourceHealth, DetailTypeHealth}:         decodeHealth,
	{SourceEvents, DetailTypeScheduled}:      decodeScheduledRule,
	{SourceScheduler, DetailTypeScheduled}:   decodeSchedulerTick,
	{SourceForwarder, DetailTypePendingPods}: decodePendingPods,
}

// Decode parses one EventBridge envelope as a Lambda target receives it and returns
// the typed event. Events Joiner does not handle come back as *Ignored; malformed input
// is a *DecodeError (wrapping ErrMalformed) that names the problem. Decode never panics.
func Decode(raw []byte) (Event, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return nil, &DecodeError{Err: errors.New("empty input")}
	}
	if trimmed[0] != '{' {
		return nil, &DecodeError{Err: fmt.Errorf("input is not a JSON object (starts with %q)", truncate(string(trimmed), 20))}
	}
	var w wireEnvelope
	if err := json.Unmarshal(trimmed, &w); err != nil {
		return nil, &DecodeError{Err: fmt.Errorf("envelope: %v", jsonerr.Describe(nil, err))}
	}
	fail := func(err error) (Event, error) {
		return nil, &DecodeError{Source: w.Source, DetailType: w.DetailType, ID: w.ID, Err: err}
	}
	if w.Source == "" {
		return fail(errors.New(`envelope: "source" is missing (is this an EventBridge event?)`))
	}
	if w.DetailType == "" {
		return fail(errors.New(`envelope: "detail-type" is missing`))
	}
	env := Envelope{
		ID:         w.ID,
		DetailType: w.DetailType,
		Source:     w.Source,
		Account:    w.Account,
		Region:     w.Region,
	}
	if w.Version != nil {
		env.Version = *w.Version
	}
	if w.Resources != nil {
		env.Resources = *w.Resources
	}
	if w.Time != "" {
		t, err := time.Parse(time.RFC3339, w.Time)
		if err != nil {
			return fail(fmt.Errorf("envelope: time %q is not RFC 3339", truncate(w.Time, 40)))
		}
		env.Time = t
	}
	dec, ok := route[[2]string{w.Source, w.DetailType}]
	if !ok {
		return ignore(env, w.Detail, fmt.Sprintf("no Joiner handler for source %q detail-type %q", w.Source, w.DetailType)), nil
	}
	ev, err := dec(env, w.Detail)
	if err != nil {
		return fail(err)
	}
	return ev, nil
}

// unmarshalDetail decodes an object detail into v, naming the problem on failure.
func unmarshalDetail(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return errors.New("detail is missing")
	}
	if raw[0] != '{' {
		return fmt.Errorf("detail is %s, not an object", truncate(string(raw), 40))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("detail: %v", jsonerr.Describe(nil, err))
	}
	return nil
}

// Scope holds what a function knows about where it runs, to turn events that belong
// elsewhere into *Ignored before any handler sees them.
type Scope struct {
	// Account is the function's AWS account; events from other accounts are ignored.
	// Empty disables the check.
	Account string
	// Cluster is the cluster the function manages; Pending Pods for other clusters are
	// ignored. Empty disables the check.
	Cluster string
}

// Admit returns ev, or an *Ignored saying why ev is not this function's business.
func (s Scope) Admit(ev Event) Event {
	if ev == nil || ev.Kind() == KindIgnored {
		return ev
	}
	m := ev.Meta()
	if s.Account != "" && m.Account != s.Account {
		return s.reject(ev, fmt.Sprintf("event from account %q, this function serves account %q", m.Account, s.Account))
	}
	if pp, ok := ev.(*PendingPods); ok && s.Cluster != "" && pp.Detail.Cluster != s.Cluster {
		return s.reject(ev, fmt.Sprintf("Pending Pods for cluster %q, this function serves cluster %q", pp.Detail.Cluster, s.Cluster))
	}
	return ev
}

func (s Scope) reject(ev Event, reason string) Event {
	detail, err := ev.encodeDetail()
	if err != nil {
		detail = nil
	}
	return ignore(*ev.Meta(), detail, reason)
}

// truncate shortens s to about n bytes for an error message, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
