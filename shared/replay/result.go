package replay

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Result is what one replay did and whether its expectations were met.
type Result struct {
	Scenario    string `json:"scenario"`
	Description string `json:"description,omitempty"`
	// NodePools names the what-if NodePools folder ("" for the scenario's own).
	NodePools string        `json:"nodePools,omitempty"`
	Simulated time.Duration `json:"simulatedNanos"`
	Wall      time.Duration `json:"wallNanos"`

	// Launched and Terminated count instances by type and capacity type.
	Launched   []Count  `json:"launched"`
	Terminated []Count  `json:"terminated"`
	Pods       PodStats `json:"pods"`
	// Interruptions are those the interruption function reported handling.
	Interruptions int            `json:"interruptionsHandled"`
	Invocations   map[string]int `json:"invocations"`
	// Errors counts invocations that returned an error; ErrorMessages keeps the first few.
	Errors        int      `json:"errors"`
	ErrorMessages []string `json:"errorMessages,omitempty"`

	// Series samples the cluster once a simulated minute.
	Series []Sample `json:"series"`
	// MaxNodes is the most Nodes at once.
	MaxNodes int `json:"maxNodes"`
	// Cost and LowerBound are dollars over the replay (see testdata/scenarios/README.md).
	// Cost includes Reservations.
	Cost       float64 `json:"cost"`
	LowerBound float64 `json:"lowerBound"`
	PeakPrice  float64 `json:"peakPricePerHour"`

	// Reservations are the capacity reservations the cluster's instances ran in,
	// billed for the whole replay: a reservation is paid for whether an instance
	// runs in it or not, and an instance in one costs nothing more.
	Reservations []ReservationBill `json:"reservations,omitempty"`

	// Bill is the control plane's own cost at the replay's rate.
	Bill *Bill `json:"controlPlane,omitempty"`
	// NeverJoined counts instances whose executed user data never joined their
	// node; JoinFailures keeps each distinct cause once.
	NeverJoined  int      `json:"neverJoined,omitempty"`
	JoinFailures []string `json:"joinFailures,omitempty"`

	Expectations []Outcome `json:"expectations"`
	Failed       int       `json:"failed"`

	// Scheduler is SchedulerReal when kube-scheduler bound the pods, "" when the
	// simulation did (Joiner's engine on the nodes that exist).
	Scheduler string `json:"scheduler,omitempty"`
	// Bound counts the bindings the scheduler made; Elsewhere those onto a node
	// other than the one Joiner nominated the pod to (real scheduler only).
	Bound     int `json:"podsBound,omitempty"`
	Elsewhere int `json:"podsBoundElsewhere,omitempty"`
}

// SchedulerReal is Result.Scheduler of a replay kube-scheduler bound.
const SchedulerReal = "kube-scheduler"

// NodesLaunched is the number of instances launched, of any type.
func (r *Result) NodesLaunched() int {
	n := 0
	for _, c := range r.Launched {
		n += c.Count
	}
	return n
}

// ReservationBill is one capacity reservation's cost over the replay.
type ReservationBill struct {
	ID           string  `json:"id"`
	InstanceType string  `json:"instanceType"`
	Slots        int     `json:"slots"`
	PricePerHour float64 `json:"pricePerHour"`
	Cost         float64 `json:"cost"`
}

// Count is a number of instances of one type and capacity type.
type Count struct {
	Type         string `json:"type"`
	CapacityType string `json:"capacityType"`
	Count        int    `json:"count"`
}

// PodStats says how pods fared: how many were placed and how long they waited.
type PodStats struct {
	Placed       int           `json:"placed"`
	WaitP50      time.Duration `json:"waitP50Nanos"`
	WaitP95      time.Duration `json:"waitP95Nanos"`
	WaitMax      time.Duration `json:"waitMaxNanos"`
	StillPending int           `json:"stillPending"`
	// Lost are bare pods (no controller) that went with their node.
	Lost int `json:"lost"`
}

// Sample is the cluster at one moment.
type Sample struct {
	At         time.Duration `json:"atNanos"`
	Nodes      int           `json:"nodes"`
	Pending    int           `json:"pending"`
	Price      float64       `json:"pricePerHour"`
	LowerBound float64       `json:"lowerBoundPerHour"`
}

// CostRatio is Cost over LowerBound (1 when both are zero).
func (r *Result) CostRatio() float64 {
	if r.LowerBound <= 0 {
		if r.Cost <= 0 {
			return 1
		}
		return 0
	}
	return r.Cost / r.LowerBound
}

// OK reports whether every expectation was met.
func (r *Result) OK() bool { return r.Failed == 0 }

func countBy(m map[[2]string]int) []Count {
	out := make([]Count, 0, len(m))
	for k, n := range m {
		out = append(out, Count{Type: k[0], CapacityType: k[1], Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Type+out[i].CapacityType < out[j].Type+out[j].CapacityType
	})
	return out
}

// fmtOffset renders a simulated offset as h:mm:ss.
func fmtOffset(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// FormatDuration renders a duration compactly (1m30s, 45s, 2h5m), rounded to the
// second: the one duration format of replay summaries and shadow reports.
func FormatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d == 0 {
		return "0s"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

// WaitStats summarises pod waits: placed pods' waits and still-pending pods'
// waits so far (both count in the percentiles, as a pod still waiting at the end
// has waited at least that long).
func WaitStats(placed, pending []time.Duration) PodStats {
	ws := append(append([]time.Duration(nil), placed...), pending...)
	sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
	return PodStats{Placed: len(placed), StillPending: len(pending),
		WaitP50: percentile(ws, 0.5), WaitP95: percentile(ws, 0.95), WaitMax: percentile(ws, 1)}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}
