package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
)

// cleanupReserve is the most of an invocation's time kept back for clean-up (a
// quarter of it when that is less).
const cleanupReserve = 5 * time.Second

// Function names.
const (
	Provisioner  = "provisioner"
	Interruption = "interruption"
	Consolidator = "consolidator"
)

// Summary is one invocation's decision summary: the handler's response and its
// last log line.
type Summary struct {
	Function        string   `json:"function"`
	Event           string   `json:"event"`
	EventID         string   `json:"eventId,omitempty"`
	Action          string   `json:"action"`
	Ignored         string   `json:"ignored,omitempty"`
	PodsPending     int      `json:"podsPending"`
	NodesLaunched   []string `json:"nodesLaunched,omitempty"`
	NodesTerminated []string `json:"nodesTerminated,omitempty"`
	// Nominated counts pods whose planned node was written as their nominatedNodeName.
	Nominated      int     `json:"podsNominated,omitempty"`
	Interruptions  int     `json:"interruptionsHandled,omitempty"`
	PricePerHour   float64 `json:"launchedPricePerHour,omitempty"`
	SavingsPerHour float64 `json:"savingsPerHour,omitempty"`
	DecisionMillis float64 `json:"decisionMillis"`
	// PhaseMillis splits DecisionMillis: reading the cluster (with its
	// reconciliation), deciding (the plan or the consolidation search), and
	// acting on the decision (NodeClaims, launches, drains). At scale it says
	// which one a slow invocation waited on.
	PhaseMillis map[string]float64 `json:"phaseMillis,omitempty"`
	// SearchStopped names the limit that cut the consolidator's search short
	// (disruption.Summary.SearchStopped); the untried candidates wait a round.
	SearchStopped string               `json:"searchStopped,omitempty"`
	DryRun        []cloud.DryRunResult `json:"dryRun,omitempty"`
	// Mode is "shadow" when the invocation only recorded its decisions (Shadow).
	Mode   string     `json:"mode,omitempty"`
	Shadow []Decision `json:"shadow,omitempty"`
	Errors []string   `json:"errors,omitempty"`
}

// Phases of an invocation, the keys of Summary.PhaseMillis.
const (
	PhaseRead   = "read"
	PhaseDecide = "decide"
	PhaseAct    = "act"
)

// took records that phase ran from start until now.
func (s *Summary) took(phase string, start time.Time) {
	if s.PhaseMillis == nil {
		s.PhaseMillis = map[string]float64{}
	}
	s.PhaseMillis[phase] += float64(time.Since(start).Microseconds()) / 1000
}

func (s *Summary) fail(err error) {
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
	}
}

type runFunc func(ctx context.Context, d *Deps, ev events.Event, s *Summary) error

// Function is one Lambda function. It implements aws-lambda-go's lambda.Handler, so
// the Lambda runtime, `joiner invoke`, replay and tests all push raw event bytes
// through the same decoding and handling.
type Function struct {
	name string
	run  runFunc
	// NewDeps builds the dependencies of one invocation.
	newDeps func(ctx context.Context) (*Deps, error)
	// MetricsOut receives the metrics line (stdout in Lambda).
	MetricsOut io.Writer
	seen       *dedupe
	// prepared carries the packer's catalog-only work (labels, allocatable) from one
	// invocation of a warm container to the next.
	prepared preparedCatalog
}

// Handler is one function's code: what it does with an event. A binary links the
// handlers it names, so each Lambda main names only its own (ProvisionerHandler,
// InterruptionHandler, ConsolidatorHandler with FromEnvFor) and carries none of the
// other two; NewFunction and FromEnv, which look a handler up by name, link all three.
type Handler struct {
	name string
	run  runFunc
}

// Name is the function's name.
func (h Handler) Name() string { return h.name }

// ProvisionerHandler launches capacity for pending pods.
func ProvisionerHandler() Handler { return Handler{name: Provisioner, run: runProvisioner} }

// InterruptionHandler handles spot interruptions, rebalance recommendations,
// instance state changes and AWS Health scheduled changes.
func InterruptionHandler() Handler { return Handler{name: Interruption, run: runInterruption} }

// ConsolidatorHandler removes and replaces nodes: consolidation, drift, expiry, leaks.
func ConsolidatorHandler() Handler { return Handler{name: Consolidator, run: runConsolidator} }

// HandlerNamed returns the named function's handler.
func HandlerNamed(name string) (Handler, error) {
	switch name {
	case Provisioner:
		return ProvisionerHandler(), nil
	case Interruption:
		return InterruptionHandler(), nil
	case Consolidator:
		return ConsolidatorHandler(), nil
	}
	return Handler{}, fmt.Errorf("unknown function %q (want %s, %s or %s)", name, Provisioner, Interruption, Consolidator)
}

// NewFunction returns the named function over a dependency factory.
func NewFunction(name string, newDeps func(ctx context.Context) (*Deps, error)) (*Function, error) {
	h, err := HandlerNamed(name)
	if err != nil {
		return nil, err
	}
	return NewFunctionFor(h, newDeps), nil
}

// NewFunctionFor returns h's function over a dependency factory.
func NewFunctionFor(h Handler, newDeps func(ctx context.Context) (*Deps, error)) *Function {
	return &Function{name: h.name, run: h.run, newDeps: newDeps, MetricsOut: os.Stdout, seen: newDedupe(4096)}
}

// Name returns the function's name.
func (f *Function) Name() string { return f.name }

// Invoke handles one raw event. Malformed input is an error (EventBridge retries it
// into the dead-letter queue, where it can be read); events Joiner has no business
// with, and repeats of an event already handled by this container, succeed without
// doing anything.
func (f *Function) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	start := time.Now()
	// Work stops a little before the caller's deadline: past Lambda's, the runtime
	// freezes the process and no deferred clean-up (untainting an abandoned
	// disruption, releasing the lease) would run.
	if dl, ok := ctx.Deadline(); ok {
		reserve := min(cleanupReserve, time.Until(dl)/4)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
		defer cancel()
	}
	sum := &Summary{Function: f.name}
	ev, err := events.Decode(payload)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	sum.Event = string(ev.Kind())
	sum.EventID = ev.Meta().ID
	d, err := f.newDeps(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	d.prepared = &f.prepared
	var rec *Recorder
	if d.Config.Mode == ModeShadow {
		// The boundary: from here on every write goes to the recorder, whatever
		// path the handler takes.
		rec = NewRecorder(d.Cluster, d.Cloud, d.now)
		rec.pricedBy(func() *catalog.Catalog { return d.cat })
		d.Cluster, d.Cloud = rec, rec
		sum.Mode = ModeShadow
	}
	log := d.log().With("function", f.name, "event", sum.Event, "eventId", sum.EventID)
	d.Log = log
	if rec != nil {
		if d.ShadowMemory == nil {
			log.Warn("shadow mode without memory: every round starts from the cluster as it is (no Empty marks, no removals remembered)")
		}
		if err := rec.loadMemory(ctx, d.ShadowMemory); err != nil {
			// The round still decides, as if it were the first.
			sum.fail(err)
		}
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics()
	}
	switch {
	case ev.Kind() == events.KindIgnored:
		sum.Action = "ignored"
		sum.Ignored = ev.(*events.Ignored).Reason
	case d.Config.AccountID != "" && ev.Meta().Account != "" && ev.Meta().Account != d.Config.AccountID:
		sum.Action = "ignored"
		sum.Ignored = fmt.Sprintf("event from account %s, not %s", ev.Meta().Account, d.Config.AccountID)
	case f.seen.seen(ev.DedupeKey()):
		sum.Action = "duplicate"
		sum.Ignored = "already handled " + ev.DedupeKey()
	default:
		if err := f.run(ctx, d, ev, sum); err != nil {
			sum.fail(err)
			f.seen.forget(ev.DedupeKey()) // a failed attempt must be retried
		}
	}
	if rec != nil {
		if warn, err := rec.saveMemory(ctx); err != nil {
			sum.fail(err)
		} else if warn != "" {
			log.Warn(warn)
		}
		sum.Shadow = rec.Decisions()
		d.Metrics.Add("ShadowDecisions", "Count", float64(len(sum.Shadow)))
		for _, dec := range sum.Shadow {
			d.Metrics.Add("Shadow"+string(dec.Kind), "Count", 1)
			log.Info("shadow decision", "decision", dec)
		}
	}
	sum.DecisionMillis = float64(time.Since(start).Microseconds()) / 1000
	d.Metrics.Add("DecisionMillis", "Milliseconds", sum.DecisionMillis)
	if err := d.Metrics.Flush(f.MetricsOut, f.name, d.Config.ClusterName, d.now()); err != nil {
		log.Warn("could not write metrics", "error", err.Error())
	}
	if len(sum.Errors) > 0 {
		log.Error("decision", "summary", sum)
	} else {
		log.Info("decision", "summary", sum)
	}
	out, err := json.Marshal(sum)
	if err != nil {
		return nil, err
	}
	if len(sum.Errors) > 0 {
		return out, errors.New(f.name + ": " + sum.Errors[0])
	}
	return out, nil
}

// dedupe remembers recently handled event keys in a warm container: EventBridge
// delivers at least once. Handlers are idempotent on cluster state as well; this
// only saves the work.
type dedupe struct {
	mu    sync.Mutex
	max   int
	order []string
	keys  map[string]bool
}

func newDedupe(max int) *dedupe { return &dedupe{max: max, keys: map[string]bool{}} }

func (d *dedupe) seen(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keys[key] {
		return true
	}
	d.keys[key] = true
	d.order = append(d.order, key)
	if len(d.order) > d.max {
		delete(d.keys, d.order[0])
		d.order = d.order[1:]
	}
	return false
}

func (d *dedupe) forget(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.keys, key)
}
