package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// PutEvents limits. EventBridge rejects an entry whose size (see Entry.Size) is not
// below 256 KB, and a request of more than 10 entries; the total size of a request's
// entries is held to the same 256 KB.
const (
	MaxEntrySize       = 256 * 1024
	MaxEntriesPerCall  = 10
	maxEntrySizeStrict = MaxEntrySize - 1
)

// Entry is one PutEvents entry, in the terms of PutEventsRequestEntry (the forwarder
// adds EventBusName when it converts it).
type Entry struct {
	Source     string
	DetailType string
	Detail     string
	Resources  []string
	// HasTime says the entry sets Time, which EventBridge counts as 14 bytes.
	HasTime bool
}

// Size is the entry size as EventBridge computes it ("Calculating PutEvents event entry
// size"): Time counts 14 bytes when set; Source, DetailType, Detail and each Resources
// element count their UTF-8 bytes.
func (e Entry) Size() int {
	n := len(e.Source) + len(e.DetailType) + len(e.Detail)
	if e.HasTime {
		n += 14
	}
	for _, r := range e.Resources {
		n += len(r)
	}
	return n
}

// BatchOptions tunes BuildPendingPods.
type BatchOptions struct {
	// MaxEntrySize caps each entry's Size; 0 means MaxEntrySize-1 (EventBridge wants
	// entries below 256 KB). Tests use small values to force splits.
	MaxEntrySize int
	// Truncated marks every entry as incomplete, for a forwarder that dropped pods
	// before building (for example past a per-batch cap).
	Truncated bool
	// Resources are copied into every entry (for example the cluster ARN).
	Resources []string
}

// BuildPendingPods turns one batch of pending pods into as few "Pending Pods" PutEvents
// entries as fit, each below the entry size limit, keeping pod order. Parts of a split
// batch share batchID and carry part/parts. A pod whose spec alone cannot fit is sent
// as a reference (SpecOmitted) in an entry marked Truncated, so the receiver reads it
// from the API server; no pod is silently dropped.
func BuildPendingPods(cluster, batchID string, observedAt time.Time, pods []PendingPod, opt BatchOptions) ([]Entry, error) {
	if cluster == "" {
		return nil, errors.New("events: BuildPendingPods: cluster is empty")
	}
	if batchID == "" {
		return nil, errors.New("events: BuildPendingPods: batchID is empty")
	}
	limit := opt.MaxEntrySize
	if limit <= 0 {
		limit = maxEntrySizeStrict
	}
	proto := Entry{Source: SourceForwarder, DetailType: DetailTypePendingPods, Resources: opt.Resources}
	// The header is sized at its widest: part/parts with as many digits as the batch
	// could ever need, and "truncated":false (one byte longer than true).
	widest := len(pods) + 1
	header := PendingPodsDetail{
		SchemaVersion: PendingPodsSchemaVersion, Cluster: cluster, BatchID: batchID,
		Part: widest, Parts: widest, ObservedAt: observedAt.UTC(), Pods: []PendingPod{},
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return nil, fmt.Errorf("events: BuildPendingPods: %w", err)
	}
	overhead := proto.Size() + len(hb)
	if overhead >= limit {
		return nil, fmt.Errorf("events: BuildPendingPods: the batch header alone is %d bytes, limit %d", overhead, limit)
	}

	type chunk struct {
		pods      [][]byte
		truncated bool
		size      int
	}
	var chunks []*chunk
	cur := &chunk{size: overhead}
	flush := func() {
		if len(cur.pods) > 0 {
			chunks = append(chunks, cur)
		}
		cur = &chunk{size: overhead}
	}
	for i := range pods {
		pb, err := json.Marshal(&pods[i])
		if err != nil {
			return nil, fmt.Errorf("events: BuildPendingPods: pod %s: %w", pods[i].Key(), err)
		}
		omitted := false
		if overhead+len(pb) > limit {
			ref := PendingPod{Namespace: pods[i].Namespace, Name: pods[i].Name, UID: pods[i].UID, SpecOmitted: true}
			if pb, err = json.Marshal(&ref); err != nil {
				return nil, fmt.Errorf("events: BuildPendingPods: pod %s: %w", pods[i].Key(), err)
			}
			if overhead+len(pb) > limit {
				return nil, fmt.Errorf("events: BuildPendingPods: pod %s: even its reference (%d bytes) exceeds the limit %d", pods[i].Key(), len(pb), limit)
			}
			omitted = true
		}
		add := len(pb)
		if len(cur.pods) > 0 {
			add++ // the comma
		}
		if cur.size+add > limit {
			flush()
			add = len(pb)
		}
		cur.pods = append(cur.pods, pb)
		cur.size += add
		cur.truncated = cur.truncated || omitted
	}
	flush()
	if len(chunks) == 0 {
		chunks = append(chunks, cur) // an empty batch is still one (empty) entry
	}

	entries := make([]Entry, 0, len(chunks))
	for i, c := range chunks {
		d := header
		d.Truncated = opt.Truncated || c.truncated
		d.Part, d.Parts = 0, 0
		if len(chunks) > 1 {
			d.Part, d.Parts = i+1, len(chunks)
		}
		detail, err := renderPendingPods(d, c.pods)
		if err != nil {
			return nil, fmt.Errorf("events: BuildPendingPods: %w", err)
		}
		e := proto
		e.Resources = append([]string(nil), opt.Resources...)
		e.Detail = detail
		if e.Size() > limit {
			// Cannot happen: the header was sized at its widest. Kept as a guard so a
			// future field cannot silently produce entries EventBridge rejects.
			return nil, fmt.Errorf("events: BuildPendingPods: entry %d is %d bytes, over the limit %d", i+1, e.Size(), limit)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// renderPendingPods writes the detail with the already-marshaled pods spliced into
// "pods", byte for byte what json.Marshal of the whole detail would produce.
func renderPendingPods(d PendingPodsDetail, pods [][]byte) (string, error) {
	d.Pods = []PendingPod{}
	hb, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	const emptyPods = `"pods":[]}`
	if len(hb) < len(emptyPods) || string(hb[len(hb)-len(emptyPods):]) != emptyPods {
		return "", errors.New(`detail does not end with "pods":[] (field order changed?)`)
	}
	n := len(hb)
	for _, p := range pods {
		n += len(p) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, hb[:len(hb)-2]...) // up to and including '['
	for i, p := range pods {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, p...)
	}
	out = append(out, "]}"...)
	return string(out), nil
}

// GroupForPutEvents packs entries, in order, into PutEvents calls of at most
// MaxEntriesPerCall entries whose sizes add up to less than 256 KB.
func GroupForPutEvents(entries []Entry) [][]Entry {
	var calls [][]Entry
	var cur []Entry
	size := 0
	for _, e := range entries {
		s := e.Size()
		if len(cur) > 0 && (len(cur) == MaxEntriesPerCall || size+s > maxEntrySizeStrict) {
			calls = append(calls, cur)
			cur, size = nil, 0
		}
		cur = append(cur, e)
		size += s
	}
	if len(cur) > 0 {
		calls = append(calls, cur)
	}
	return calls
}

// String summarises an entry for logs.
func (e Entry) String() string {
	return e.Source + " " + strconv.Quote(e.DetailType) + " " + strconv.Itoa(e.Size()) + " bytes"
}

// Wrap returns the envelope a rule target receives for this entry once EventBridge has
// accepted it (EventBridge assigns id and time), for local replay and tests.
func (e Entry) Wrap(id, account, region string, at time.Time) ([]byte, error) {
	if !json.Valid([]byte(e.Detail)) {
		return nil, errors.New("events: Wrap: detail is not valid JSON")
	}
	resources := e.Resources
	if resources == nil {
		resources = []string{}
	}
	w := wireEnvelope{
		ID: id, DetailType: e.DetailType, Source: e.Source, Account: account,
		Time: at.UTC().Format(time.RFC3339), Region: region, Resources: &resources,
		Detail: json.RawMessage(e.Detail),
	}
	v := "0"
	w.Version = &v
	return json.Marshal(w)
}
