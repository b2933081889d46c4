package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Pattern is an EventBridge event pattern: each key names an event field and maps to a
// nested Pattern (for an object such as detail) or to Values (the field's allowed
// values). It renders to the JSON EventBridge stores (json.Marshal), and Matches
// implements EventBridge's semantics for the operators it can hold.
type Pattern map[string]Field

// Field is a Pattern or Values.
type Field interface{ isField() }

// Values is a leaf of a pattern: the field matches when its value (or, for an array
// field, any of its elements) matches any one of them.
type Values []Value

// Value is one allowed value: Exact or Prefix.
type Value interface {
	matches(v any) bool
	render() any
}

// Exact matches a string field equal to it (case-sensitive, type-sensitive: it never
// matches a number or a boolean).
type Exact string

// Prefix matches a string field that starts with it ({"prefix": "..."}).
type Prefix string

func (Pattern) isField() {}
func (Values) isField()  {}

func (x Exact) matches(v any) bool {
	s, ok := v.(string)
	return ok && s == string(x)
}

func (x Exact) render() any { return string(x) }

func (p Prefix) matches(v any) bool {
	s, ok := v.(string)
	return ok && strings.HasPrefix(s, string(p))
}

func (p Prefix) render() any { return map[string]string{"prefix": string(p)} }

// Strings is shorthand for Values of Exact strings.
func Strings(ss ...string) Values {
	v := make(Values, len(ss))
	for i, s := range ss {
		v[i] = Exact(s)
	}
	return v
}

// MarshalJSON renders the pattern as EventBridge stores it.
func (p Pattern) MarshalJSON() ([]byte, error) {
	m, err := p.render()
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// Map renders the pattern as generic JSON values (map[string]any, []any, string, ...),
// the form CDK's EventPattern.detail and assertions take.
func (p Pattern) Map() (map[string]any, error) { return p.render() }

func (p Pattern) render() (map[string]any, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("events: empty pattern (EventBridge requires at least one field)")
	}
	out := make(map[string]any, len(p))
	for _, k := range p.keys() {
		switch f := p[k].(type) {
		case Pattern:
			sub, err := f.render()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = sub
		case Values:
			if len(f) == 0 {
				return nil, fmt.Errorf("events: pattern field %q has no values (it would match nothing)", k)
			}
			vals := make([]any, len(f))
			for i, v := range f {
				if v == nil {
					return nil, fmt.Errorf("events: pattern field %q: nil value", k)
				}
				vals[i] = v.render()
			}
			out[k] = vals
		default:
			return nil, fmt.Errorf("events: pattern field %q has type %T (want Pattern or Values)", k, f)
		}
	}
	return out, nil
}

func (p Pattern) keys() []string {
	ks := make([]string, 0, len(p))
	for k := range p {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Matches reports whether EventBridge would deliver the event (a JSON envelope) to a
// rule with this pattern. Semantics implemented: every pattern field must match; a
// nested pattern requires an object field; a leaf requires the field to be present and
// its value (or any element of an array value) to match one of the Values; fields the
// pattern does not name are ignored. A detail that is a JSON string (as EventBridge
// Scheduler sends) is not an object, so nested detail patterns do not match it.
func (p Pattern) Matches(event []byte) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(event))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return false, fmt.Errorf("events: match: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return false, fmt.Errorf("events: match: event is not a JSON object")
	}
	return p.match(obj), nil
}

func (p Pattern) match(obj map[string]any) bool {
	for k, f := range p {
		v, present := obj[k]
		switch f := f.(type) {
		case Pattern:
			sub, ok := v.(map[string]any)
			if !present || !ok || !f.match(sub) {
				return false
			}
		case Values:
			if !present || !f.match(v) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func (vs Values) match(v any) bool {
	if arr, ok := v.([]any); ok {
		for _, el := range arr {
			if vs.matchOne(el) {
				return true
			}
		}
		return false
	}
	return vs.matchOne(v)
}

func (vs Values) matchOne(v any) bool {
	for _, x := range vs {
		if x != nil && x.matches(v) {
			return true
		}
	}
	return false
}
