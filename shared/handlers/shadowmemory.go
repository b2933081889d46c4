package handlers

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
)

// ShadowMemoryParameter is the SSM parameter shadow mode keeps its memory in; the
// stack grants the functions ssm:GetParameter and ssm:PutParameter on it, and on
// nothing else, only when it deploys them in shadow mode.
func ShadowMemoryParameter(cluster string) string { return "/joiner/" + cluster + "/shadow-memory" }

// MemoryStore keeps shadow mode's memory between invocations: in the stack the SSM
// parameter ShadowMemoryParameter names (see SSMMemory). Load returns nil when
// nothing was saved yet.
type MemoryStore interface {
	Load(ctx context.Context) ([]byte, error)
	Save(ctx context.Context, value []byte) error
}

// shadowMemory is what earlier shadow rounds would have written that later rounds
// read. Acting, those writes are in the cluster; in shadow mode nothing is, so
// without this an empty node would be marked empty every round and its pool's
// consolidateAfter would never run out, and a node already decided on would be
// decided on (and counted) again every round.
type shadowMemory struct {
	// Conditions are the NodeClaim status conditions rounds would have written
	// (Empty), by NodeClaim name.
	Conditions map[string][]memCondition `json:"conditions,omitempty"`
	// Removed are the NodeClaims rounds would have deleted, by name. Acting, such a
	// NodeClaim, its Node and its pods' places there are gone one round later, so
	// later rounds see the cluster without them.
	Removed map[string]memRemoval `json:"removed,omitempty"`
}

type memCondition struct {
	Type string `json:"type"`
	// Status "" is a condition a round would have removed.
	Status metav1.ConditionStatus `json:"status,omitempty"`
	Reason string                 `json:"reason,omitempty"`
	Since  time.Time              `json:"since"`
}

type memRemoval struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// memoryOp is one change an invocation made to the memory, replayed onto the
// latest saved memory when it is saved (the consolidator and the interruption
// function may run at once).
type memoryOp func(m *shadowMemory)

func (m *shadowMemory) setCondition(claim string, c memCondition) {
	if m.Conditions == nil {
		m.Conditions = map[string][]memCondition{}
	}
	cs := m.Conditions[claim]
	for i := range cs {
		if cs[i].Type == c.Type {
			if cs[i].Status != c.Status || cs[i].Reason != c.Reason {
				cs[i] = c
			}
			return
		}
	}
	m.Conditions[claim] = append(cs, c)
}

func (m *shadowMemory) remove(claim string, r memRemoval) {
	if m.Removed == nil {
		m.Removed = map[string]memRemoval{}
	}
	if _, ok := m.Removed[claim]; !ok {
		m.Removed[claim] = r
	}
	delete(m.Conditions, claim)
}

// prune forgets the NodeClaims that are gone from the cluster (Karpenter removed
// them, or they were never there), except entries newer than the read, which
// another invocation may have written for a NodeClaim created since.
func (m *shadowMemory) prune(st *kube.ClusterState) {
	exists := make(map[string]bool, len(st.NodeClaims))
	for _, nc := range st.NodeClaims {
		exists[nc.Name] = true
	}
	for name, cs := range m.Conditions {
		if exists[name] {
			continue
		}
		keep := false
		for _, c := range cs {
			keep = keep || c.Since.After(st.ReadAt)
		}
		if !keep {
			delete(m.Conditions, name)
		}
	}
	for name, r := range m.Removed {
		if !exists[name] && !r.At.After(st.ReadAt) {
			delete(m.Removed, name)
		}
	}
}

// apply makes st what it would be had the remembered writes been made: the
// conditions on the NodeClaims, and the removed NodeClaims gone with their Nodes
// and the pods bound there.
func (m *shadowMemory) apply(st *kube.ClusterState) {
	for _, nc := range st.NodeClaims {
		for _, c := range m.Conditions[nc.Name] {
			setMemCondition(&nc.Status.Conditions, c, nc.Generation)
		}
	}
	if len(m.Removed) == 0 {
		return
	}
	gone, goneProviders := map[string]bool{}, map[string]bool{}
	claims := st.NodeClaims[:0:0]
	for _, nc := range st.NodeClaims {
		if _, ok := m.Removed[nc.Name]; !ok {
			claims = append(claims, nc)
			continue
		}
		if nc.Status.NodeName != "" {
			gone[nc.Status.NodeName] = true
		}
		if nc.Status.ProviderID != "" {
			goneProviders[nc.Status.ProviderID] = true
		}
	}
	st.NodeClaims = claims
	inFlight := st.Snapshot.InFlight[:0:0]
	for _, nc := range st.Snapshot.InFlight {
		if _, ok := m.Removed[nc.Name]; !ok {
			inFlight = append(inFlight, nc)
		}
	}
	st.Snapshot.InFlight = inFlight
	all := st.AllNodes[:0:0]
	for _, n := range st.AllNodes {
		if gone[n.Name] || (n.Spec.ProviderID != "" && goneProviders[n.Spec.ProviderID]) {
			gone[n.Name] = true
			continue
		}
		all = append(all, n)
	}
	st.AllNodes = all
	nodes := st.Snapshot.Nodes[:0:0]
	for _, ns := range st.Snapshot.Nodes {
		if !gone[ns.Node.Name] {
			nodes = append(nodes, ns)
		}
	}
	st.Snapshot.Nodes = nodes
	for name := range gone {
		delete(st.PodsByNode, name)
		delete(st.NominatedByNode, name)
	}
}

func setMemCondition(conds *[]metav1.Condition, c memCondition, gen int64) {
	if c.Status == "" {
		*conds = slices.DeleteFunc(*conds, func(x metav1.Condition) bool { return x.Type == c.Type })
		return
	}
	reason := c.Reason
	switch {
	case reason != "":
	case c.Status == metav1.ConditionTrue:
		reason = c.Type
	default:
		reason = "Not" + c.Type
	}
	nc := metav1.Condition{Type: c.Type, Status: c.Status, Reason: reason, LastTransitionTime: metav1.NewTime(c.Since), ObservedGeneration: gen,
		Message: "remembered by shadow mode"}
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			(*conds)[i] = nc
			return
		}
	}
	*conds = append(*conds, nc)
}

// Memory encoding. SSM's standard tier (free) holds 4096 characters: the JSON as
// it is when it fits (readable with aws ssm get-parameter), else gzipped and
// base64-encoded behind gzipPrefix, else the newest entries are left out (their
// nodes are marked again next round: a later removal, never a wrong one).
const (
	memoryMaxBytes = 4096
	gzipPrefix     = "gzip:"
)

func decodeMemory(b []byte) (*shadowMemory, error) {
	m := &shadowMemory{}
	if len(bytes.TrimSpace(b)) == 0 {
		return m, nil
	}
	if rest, ok := bytes.CutPrefix(b, []byte(gzipPrefix)); ok {
		raw, err := base64.StdEncoding.DecodeString(string(rest))
		if err != nil {
			return nil, fmt.Errorf("shadow memory: %v", err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("shadow memory: %v", err)
		}
		if b, err = io.ReadAll(io.LimitReader(zr, 1<<20)); err != nil {
			return nil, fmt.Errorf("shadow memory: %v", err)
		}
	}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("shadow memory: %v", err)
	}
	return m, nil
}

// encodeMemory returns the encoding and how many entries were left out to fit.
func encodeMemory(m *shadowMemory) ([]byte, int, error) {
	type entry struct {
		at    time.Time
		claim string
		cond  bool
	}
	var entries []entry
	for name, cs := range m.Conditions {
		for _, c := range cs {
			entries = append(entries, entry{c.Since, name, true})
		}
	}
	for name, r := range m.Removed {
		entries = append(entries, entry{r.At, name, false})
	}
	// Oldest first: those are nearest their removal.
	sort.Slice(entries, func(i, j int) bool {
		if !entries[i].at.Equal(entries[j].at) {
			return entries[i].at.Before(entries[j].at)
		}
		return entries[i].claim < entries[j].claim
	})
	encode := func(n int) ([]byte, error) {
		sub := &shadowMemory{}
		for _, e := range entries[:n] {
			if e.cond {
				for _, c := range m.Conditions[e.claim] {
					if c.Since.Equal(e.at) {
						sub.setCondition(e.claim, c)
					}
				}
			} else {
				sub.Removed = cmpMap(sub.Removed)
				sub.Removed[e.claim] = m.Removed[e.claim]
			}
		}
		b, err := json.Marshal(sub)
		if err != nil || len(b) <= memoryMaxBytes {
			return b, err
		}
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(b)
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return []byte(gzipPrefix + base64.StdEncoding.EncodeToString(z.Bytes())), nil
	}
	// The largest prefix that fits, by bisection (the size grows with n).
	lo, hi := 0, len(entries)
	b, err := encode(hi)
	if err != nil {
		return nil, 0, err
	}
	if len(b) <= memoryMaxBytes {
		return b, 0, nil
	}
	for lo < hi-1 {
		mid := (lo + hi) / 2
		mb, err := encode(mid)
		if err != nil {
			return nil, 0, err
		}
		if len(mb) <= memoryMaxBytes {
			lo = mid
		} else {
			hi = mid
		}
	}
	b, err = encode(lo)
	return b, len(entries) - lo, err
}

func cmpMap(m map[string]memRemoval) map[string]memRemoval {
	if m == nil {
		return map[string]memRemoval{}
	}
	return m
}

// loadMemory reads the saved memory into the recorder; a store that fails leaves
// the memory empty and says so (the round decides as without memory).
func (r *Recorder) loadMemory(ctx context.Context, store MemoryStore) error {
	r.store = store
	r.memory = &shadowMemory{}
	if store == nil {
		return nil
	}
	b, err := store.Load(ctx)
	if err != nil {
		return fmt.Errorf("load shadow memory: %w", err)
	}
	m, err := decodeMemory(b)
	if err != nil {
		return err
	}
	r.memory = m
	return nil
}

// remember applies op to the memory now and again, at save, to the latest saved copy.
func (r *Recorder) remember(op memoryOp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.memory == nil {
		r.memory = &shadowMemory{}
	}
	op(r.memory)
	r.ops = append(r.ops, op)
}

// saveMemory writes what this invocation added to the memory, replayed onto the
// latest saved copy and pruned by the last state read; nothing when it added
// nothing. It returns a warning when entries had to be left out.
func (r *Recorder) saveMemory(ctx context.Context) (string, error) {
	r.mu.Lock()
	ops, last := r.ops, r.lastRead
	r.mu.Unlock()
	if r.store == nil || len(ops) == 0 {
		return "", nil
	}
	b, err := r.store.Load(ctx)
	if err != nil {
		return "", fmt.Errorf("save shadow memory: %w", err)
	}
	m, err := decodeMemory(b)
	if err != nil {
		m = &shadowMemory{} // unreadable: replaced by what this round knows
	}
	for _, op := range ops {
		op(m)
	}
	if last != nil {
		m.prune(last)
	}
	out, dropped, err := encodeMemory(m)
	if err != nil {
		return "", fmt.Errorf("save shadow memory: %w", err)
	}
	if err := r.store.Save(ctx, out); err != nil {
		return "", fmt.Errorf("save shadow memory: %w", err)
	}
	if dropped > 0 {
		return fmt.Sprintf("shadow memory holds %d bytes at most: the %d newest entries were left out (their nodes are marked again next round)", memoryMaxBytes, dropped), nil
	}
	return "", nil
}

// withMemory applies the memory to a state just read and keeps the state for the
// memory's pruning.
func (r *Recorder) withMemory(st *kube.ClusterState) *kube.ClusterState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.memory == nil || st == nil {
		return st
	}
	r.lastRead = &kube.ClusterState{NodeClaims: append([]*karpenter.NodeClaim(nil), st.NodeClaims...), ReadAt: st.ReadAt}
	r.memory.apply(st)
	return st
}
