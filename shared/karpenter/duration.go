package karpenter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Never is the value that disables a NillableDuration.
const Never = "Never"

// NillableDuration is a duration that may also be "Never" (Karpenter's expireAfter and
// consolidateAfter). The zero value is unset; IsNever reports the "Never" form.
type NillableDuration struct {
	// Duration is set when a duration was given.
	Duration *time.Duration
	// never is true for "Never".
	never bool
}

// NewDuration returns a NillableDuration holding d.
func NewDuration(d time.Duration) NillableDuration { return NillableDuration{Duration: &d} }

// NeverDuration returns the "Never" NillableDuration.
func NeverDuration() NillableDuration { return NillableDuration{never: true} }

// IsNever reports whether the value is "Never".
func (d NillableDuration) IsNever() bool { return d.never }

// IsSet reports whether a duration or "Never" was given.
func (d NillableDuration) IsSet() bool { return d.never || d.Duration != nil }

// String renders the value as written in manifests.
func (d NillableDuration) String() string {
	switch {
	case d.never:
		return Never
	case d.Duration != nil:
		return d.Duration.String()
	}
	return ""
}

// UnmarshalJSON accepts a Go duration string ("720h", "30s") or "Never".
// null is unset, so what MarshalJSON writes for an unset value reads back as unset.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*d = NillableDuration{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"720h\" or \"Never\", got %s", string(b))
	}
	if s == Never {
		*d = NeverDuration()
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a value such as \"30s\", \"5m\", \"720h\" or \"Never\"", s)
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	*d = NewDuration(v)
	return nil
}

// MarshalJSON writes the manifest form; an unset value is written as null.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	if !d.IsSet() {
		return []byte("null"), nil
	}
	return json.Marshal(d.String())
}
