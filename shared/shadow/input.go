// Package shadow compares what Joiner decided in shadow mode with what the
// autoscaler running the cluster (Karpenter) did there: the snapshots `joiner
// record --snapshot-every` takes of the cluster's NodeClaims and pod waits on one
// side, the shadow decisions the functions log on the other. It reads and
// compares; it does no I/O of its own beyond the readers it is given.
package shadow

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/jsonerr"
)

// Snapshot is the cluster at one moment, as `joiner record --snapshot-every`
// writes it (one JSON object a line of snapshots.jsonl).
type Snapshot struct {
	At time.Time `json:"at"`
	// NodeClaims are every NodeClaim, deleting ones included.
	NodeClaims []NodeClaim `json:"nodeClaims"`
	// Pods are the pods pending at At and those scheduled since the previous
	// snapshot, each with how long it waited.
	Pods []PodWait `json:"pods,omitempty"`
}

// NodeClaim is what a snapshot keeps of one NodeClaim.
type NodeClaim struct {
	Name         string    `json:"name"`
	NodePool     string    `json:"nodePool"`
	InstanceType string    `json:"instanceType,omitempty"`
	Zone         string    `json:"zone,omitempty"`
	CapacityType string    `json:"capacityType,omitempty"`
	Instance     string    `json:"instance,omitempty"`
	Node         string    `json:"node,omitempty"`
	Created      time.Time `json:"created"`
	// Deleting is the NodeClaim's deletionTimestamp.
	Deleting *time.Time `json:"deleting,omitempty"`
	// Reason is why it is being disrupted, when a condition says so
	// (DisruptionReason, Drifted, Empty).
	Reason string `json:"reason,omitempty"`
}

// PodWait is one pod's wait for a node.
type PodWait struct {
	// Pod is namespace/name.
	Pod     string    `json:"pod"`
	Created time.Time `json:"created"`
	// Scheduled is when the scheduler bound it (its PodScheduled condition); nil
	// while it is pending.
	Scheduled *time.Time `json:"scheduled,omitempty"`
	Node      string     `json:"node,omitempty"`
}

// maxLine bounds one line of either file (a snapshot of a 10,000-node cluster is
// a few MB).
const maxLine = 64 << 20

// ReadSnapshots reads snapshots.jsonl; name labels errors (file:line).
func ReadSnapshots(r io.Reader, name string) ([]Snapshot, error) {
	var out []Snapshot
	err := eachLine(r, name, func(n int, line []byte) error {
		var s Snapshot
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return fmt.Errorf("%s:%d: not a snapshot: %v", name, n, jsonerr.Describe(line, err))
		}
		if s.At.IsZero() {
			return fmt.Errorf("%s:%d: snapshot without \"at\"", name, n)
		}
		for i, nc := range s.NodeClaims {
			if nc.Name == "" {
				return fmt.Errorf("%s:%d: nodeClaims[%d] has no name", name, n, i)
			}
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no snapshot in it", name)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// Decisions are the shadow decisions read from a log, and how many lines were
// something else.
type Decisions struct {
	List    []handlers.Decision
	Skipped int
}

// ReadDecisions reads shadow decisions from JSON lines in any of the forms the
// functions write them: their log records ({"msg": "shadow decision",
// "decision": {...}}, and the summary record {"msg": "decision", "summary":
// {...}}), CloudWatch Logs exports ({"message": "<record>"}), decision summaries
// (`joiner invoke` output, {"function": ..., "shadow": [...]}) and bare decisions.
// A decision logged twice (its own line and the summary's) counts once. Lines that
// are JSON but none of these (other log records) are skipped and counted; a line
// that is not JSON is an error naming the file and line.
func ReadDecisions(r io.Reader, name string) (*Decisions, error) {
	out := &Decisions{}
	seen := map[string]bool{}
	add := func(d handlers.Decision) {
		k, _ := json.Marshal(d)
		if !seen[string(k)] {
			seen[string(k)] = true
			out.List = append(out.List, d)
		}
	}
	err := eachLine(r, name, func(n int, line []byte) error {
		ds, ok, err := decisionsOf(line)
		if err != nil {
			return fmt.Errorf("%s:%d: %v", name, n, err)
		}
		if !ok {
			out.Skipped++
		}
		for _, d := range ds {
			if d.At.IsZero() {
				return fmt.Errorf("%s:%d: %s decision without \"at\"", name, n, d.Kind)
			}
			add(d)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out.List, func(i, j int) bool { return out.List[i].At.Before(out.List[j].At) })
	return out, nil
}

func decisionsOf(line []byte) ([]handlers.Decision, bool, error) {
	var rec struct {
		Msg      string                `json:"msg"`
		Message  *string               `json:"message"`
		Decision *handlers.Decision    `json:"decision"`
		Summary  *handlers.Summary     `json:"summary"`
		Function string                `json:"function"`
		Shadow   []handlers.Decision   `json:"shadow"`
		Kind     handlers.DecisionKind `json:"kind"`
		At       time.Time             `json:"at"`
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return nil, false, fmt.Errorf("not JSON: %v", jsonerr.Describe(line, err))
	}
	switch {
	case rec.Message != nil && rec.Msg == "":
		// A CloudWatch Logs event; its message may carry Lambda's plain-text
		// prefix (timestamp, request id, level) before the JSON record.
		msg := *rec.Message
		i := strings.IndexByte(msg, '{')
		if i < 0 {
			return nil, false, nil
		}
		ds, ok, err := decisionsOf([]byte(msg[i:]))
		if err != nil {
			return nil, false, nil // a plain-text log line, not ours
		}
		return ds, ok, nil
	case rec.Msg == "shadow decision" && rec.Decision != nil:
		return []handlers.Decision{*rec.Decision}, true, nil
	case rec.Summary != nil:
		return rec.Summary.Shadow, rec.Summary.Mode == handlers.ModeShadow, nil
	case rec.Function != "" && rec.Msg == "":
		return rec.Shadow, true, nil
	case rec.Kind != "" && !rec.At.IsZero():
		var d handlers.Decision
		if err := json.Unmarshal(line, &d); err != nil {
			return nil, false, err
		}
		return []handlers.Decision{d}, true, nil
	}
	return nil, false, nil
}

func eachLine(r io.Reader, name string, f func(n int, line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := f(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
