package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/facts"
)

// HealthTime is a time in an AWS Health event. AWS Health writes RFC 1123 times
// ("Wed, 15 May 2024 00:00:00 GMT"), not RFC 3339; the original text is kept so that
// encoding reproduces it exactly.
type HealthTime struct {
	Raw  string
	Time time.Time
}

// healthTimeLayouts are tried in order; RFC 1123 is what AWS Health documents.
var healthTimeLayouts = []string{time.RFC1123, time.RFC1123Z, time.RFC3339}

// ParseHealthTime parses an AWS Health time.
func ParseHealthTime(s string) (HealthTime, error) {
	for _, layout := range healthTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return HealthTime{Raw: s, Time: t.UTC()}, nil
		}
	}
	return HealthTime{}, fmt.Errorf("%q is not an RFC 1123 time (like \"Wed, 15 May 2024 00:00:00 GMT\")", s)
}

// MarshalJSON writes the original text.
func (t HealthTime) MarshalJSON() ([]byte, error) { return json.Marshal(t.Raw) }

// UnmarshalJSON parses RFC 1123 (or, leniently, RFC 1123Z / RFC 3339).
func (t *HealthTime) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a string time, got %s", truncate(string(b), 40))
	}
	p, err := ParseHealthTime(s)
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// HealthDescription is one entry of detail.eventDescription.
type HealthDescription struct {
	Language          string `json:"language,omitempty"`
	LatestDescription string `json:"latestDescription,omitempty"`
}

// AffectedEntity is one entry of detail.affectedEntities; for EC2 events EntityValue
// is an instance ID.
type AffectedEntity struct {
	EntityValue     string            `json:"entityValue"`
	LastUpdatedTime *HealthTime       `json:"lastUpdatedTime,omitempty"`
	StatusCode      string            `json:"statusCode,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
}

// HealthDetail is the detail of an "AWS Health Event".
type HealthDetail struct {
	EventArn          string              `json:"eventArn"`
	Service           string              `json:"service"`
	EventScopeCode    string              `json:"eventScopeCode,omitempty"`
	CommunicationID   string              `json:"communicationId,omitempty"`
	LastUpdatedTime   *HealthTime         `json:"lastUpdatedTime,omitempty"`
	StatusCode        string              `json:"statusCode,omitempty"`
	EventRegion       string              `json:"eventRegion,omitempty"`
	EventTypeCode     string              `json:"eventTypeCode"`
	EventTypeCategory string              `json:"eventTypeCategory"`
	StartTime         *HealthTime         `json:"startTime,omitempty"`
	EndTime           *HealthTime         `json:"endTime,omitempty"`
	EventDescription  []HealthDescription `json:"eventDescription,omitempty"`
	AffectedEntities  []AffectedEntity    `json:"affectedEntities,omitempty"`
	AffectedAccount   string              `json:"affectedAccount,omitempty"`
}

// Values of HealthDetail fields that select the events Joiner acts on.
const (
	HealthServiceEC2              = "EC2"
	HealthCategoryScheduledChange = "scheduledChange"
)

// HealthScheduledChange is an "AWS Health Event" for service EC2 in category
// scheduledChange (retirement, maintenance reboot, ...): replace the instances and drain
// them before the window starts.
type HealthScheduledChange struct {
	Envelope
	Detail HealthDetail
}

// Kind implements Event.
func (*HealthScheduledChange) Kind() Kind { return KindHealthScheduledChange }

// DedupeKey implements Event. AWS Health re-sends an event (new EventBridge id) when it
// is updated; the communicationId stays, so it is the key, scoped to the account. The
// NTH fixtures show that ids and accounts are not always well-formed, so neither is
// validated.
func (e *HealthScheduledChange) DedupeKey() string {
	if e.Detail.CommunicationID != "" {
		return "health/" + e.Account + "/" + e.Detail.CommunicationID
	}
	return "health/" + e.Account + "/" + e.Detail.EventArn
}

// InstanceIDs lists the affected instances: affectedEntities first, then resources
// (which hold bare instance IDs for AWS Health), without duplicates.
func (e *HealthScheduledChange) InstanceIDs() []string {
	return healthInstanceIDs(e.Resources, e.Detail.AffectedEntities)
}

// Window returns the scheduled start and end; either is zero when the event omits it.
func (e *HealthScheduledChange) Window() (start, end time.Time) {
	if e.Detail.StartTime != nil {
		start = e.Detail.StartTime.Time
	}
	if e.Detail.EndTime != nil {
		end = e.Detail.EndTime.Time
	}
	return start, end
}

func (e *HealthScheduledChange) encodeDetail() (json.RawMessage, error) {
	return json.Marshal(e.Detail)
}

func healthInstanceIDs(resources []string, entities []AffectedEntity) []string {
	var ids []string
	seen := map[string]bool{}
	add := func(s string) {
		if facts.ValidInstanceID(s) && !seen[s] {
			seen[s] = true
			ids = append(ids, s)
		}
	}
	for _, ent := range entities {
		add(ent.EntityValue)
	}
	for _, r := range resources {
		add(r)
	}
	return ids
}

func decodeHealth(env Envelope, raw json.RawMessage) (Event, error) {
	var d HealthDetail
	if err := unmarshalDetail(raw, &d); err != nil {
		return nil, err
	}
	if d.Service != HealthServiceEC2 {
		return ignore(env, raw, fmt.Sprintf("AWS Health event for service %q: Joiner acts on EC2 only", d.Service)), nil
	}
	if d.EventTypeCategory != HealthCategoryScheduledChange {
		return ignore(env, raw, fmt.Sprintf("AWS Health EC2 event of category %q: Joiner acts on scheduledChange only", d.EventTypeCategory)), nil
	}
	if len(healthInstanceIDs(env.Resources, d.AffectedEntities)) == 0 {
		return ignore(env, raw, fmt.Sprintf("AWS Health scheduledChange %s names no EC2 instance", strings.TrimSpace(d.EventTypeCode))), nil
	}
	return &HealthScheduledChange{Envelope: env, Detail: d}, nil
}
