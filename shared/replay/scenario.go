// Package replay replays scenarios: an initial cluster, a timeline of events and the
// outcome expected (the format is described in testdata/scenarios/README.md). The
// cluster is in memory (shared/kubesim), AWS is the wire-level simulator
// (shared/awssim) driven through the real SDK, and every event goes as raw EventBridge
// JSON through Function.Invoke of the handlers the Lambdas run, on simulated time.
package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/jsonerr"
	"github.com/joiner-autoscaler/joiner/shared/kubesim"
)

// ScenarioFile is the file that makes a folder a scenario.
const ScenarioFile = "scenario.yaml"

// DefaultStart is the simulated start of a scenario that names none.
var DefaultStart = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// Scenario is one scenario.yaml, resolved against its folder.
type Scenario struct {
	// Name is the folder's name; Dir the folder.
	Name string `json:"-"`
	Dir  string `json:"-"`

	Description string        `json:"description,omitempty"`
	Cluster     string        `json:"cluster"`
	Start       time.Time     `json:"start,omitzero"`
	Duration    Duration      `json:"duration"`
	Manifests   []string      `json:"manifests,omitempty"`
	AWS         string        `json:"aws,omitempty"`
	Settings    Settings      `json:"settings,omitzero"`
	Timeline    []Step        `json:"timeline,omitempty"`
	Expect      []Expectation `json:"expect,omitempty"`
}

// Settings tune the simulation; zero values take the defaults documented in
// testdata/scenarios/README.md.
type Settings struct {
	Tick               Duration  `json:"tick,omitempty"`
	RegisterAfter      Duration  `json:"registerAfter,omitempty"`
	ReadyAfter         Duration  `json:"readyAfter,omitempty"`
	DevicePluginAfter  Duration  `json:"devicePluginAfter,omitempty"`
	ProvisionerEvery   *Duration `json:"provisionerEvery,omitempty"`
	ConsolidatorEvery  *Duration `json:"consolidatorEvery,omitempty"`
	Forwarder          *bool     `json:"forwarder,omitempty"`
	ForwarderDelay     Duration  `json:"forwarderDelay,omitempty"`
	Rebalance          string    `json:"rebalance,omitempty"`
	MinSavingsFraction *float64  `json:"minSavingsFraction,omitempty"`
	FunctionTimeout    Duration  `json:"functionTimeout,omitempty"`
}

// Step is one timeline entry: a time and exactly one action.
type Step struct {
	At Duration `json:"at"`

	Event     string    `json:"event,omitempty"`
	Function  string    `json:"function,omitempty"`
	KeepID    bool      `json:"keepId,omitempty"`
	Instances *Selector `json:"instances,omitempty"`
	Window    *Window   `json:"window,omitempty"`

	SpotInterrupt *SpotInterrupt      `json:"spotInterrupt,omitempty"`
	HealthEvent   *HealthEvent        `json:"healthEvent,omitempty"`
	Scale         string              `json:"scale,omitempty"`
	Replicas      *int                `json:"replicas,omitempty"`
	Apply         string              `json:"apply,omitempty"`
	Delete        string              `json:"delete,omitempty"`
	Forwarder     string              `json:"forwarder,omitempty"`
	Faults        *awssim.FaultScript `json:"faults,omitempty"`
	Terminate     *Selector           `json:"terminate,omitempty"`
	ReleaseAMI    *ReleaseAMI         `json:"releaseAMI,omitempty"`
}

// ReleaseAMI has AWS ship a new build of an AMI family: every public SSM
// parameter of the family for the cluster's Kubernetes version (what an alias
// such as al2023@latest reads) then names a new image.
type ReleaseAMI struct {
	// Family is al2023, al2 or bottlerocket.
	Family string `json:"family"`
	// Release names the build (for example v20270101); the images are named after it.
	Release string `json:"release"`
}

// Selector picks running instances Joiner launched: Select is any, spot, on-demand,
// pool=NAME or type=TYPE; Count how many (default 1).
type Selector struct {
	Select string `json:"select"`
	Count  int    `json:"count,omitempty"`
}

// Window moves an AWS Health event's start and end relative to its delivery.
type Window struct {
	StartIn Duration `json:"startIn"`
	EndIn   Duration `json:"endIn"`
}

// SpotInterrupt has the simulator interrupt a share (or a count) of the running spot
// instances, spread over Within.
type SpotInterrupt struct {
	Fraction float64  `json:"fraction,omitempty"`
	Count    int      `json:"count,omitempty"`
	Within   Duration `json:"within,omitempty"`
}

// HealthEvent is an AWS Health scheduled retirement of Count running instances.
type HealthEvent struct {
	Count   int      `json:"count,omitempty"`
	Select  string   `json:"select,omitempty"`
	StartIn Duration `json:"startIn"`
	EndIn   Duration `json:"endIn"`
}

// Duration is a time.Duration written as "90s", "10m", "1h30m" (or 0).
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalJSON reads a Go duration string or the number 0. A negative duration is
// read as written: validation says which field it is and what range it allows
// (encoding/json gives an Unmarshaler's error no field path).
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "0" {
		*d = 0
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration like \"90s\" or \"10m\", got %s", clip(string(b)))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration like \"90s\" or \"10m\", got %q", clip(s))
	}
	*d = Duration(v)
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.D().String()) }

// Load reads dir/scenario.yaml. Unknown fields, a step with no action or two, and
// expectations without a check are errors naming the field.
func Load(dir string) (*Scenario, error) {
	path := filepath.Join(dir, ScenarioFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc, err := Parse(dir, raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// Parse reads the text of a scenario.yaml that lives in dir (the folder its paths
// are relative to), as Load does.
func Parse(dir string, raw []byte) (*Scenario, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	sc := &Scenario{}
	if err := dec.Decode(sc); err != nil {
		return nil, jsonerr.Describe(nil, err)
	}
	if dec.More() {
		return nil, errors.New("more than one document: a scenario is one YAML document")
	}
	sc.Dir, sc.Name = dir, filepath.Base(dir)
	if err := sc.validate(); err != nil {
		return nil, err
	}
	sc.defaults()
	return sc, nil
}

// LoadAll loads every scenario folder under root, in name order; names, when given,
// select folders by name.
func LoadAll(root string, names ...string) ([]*Scenario, error) {
	if len(names) == 0 {
		entries, err := os.ReadDir(root)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(root, e.Name(), ScenarioFile)); e.IsDir() && err == nil {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		if len(names) == 0 {
			return nil, fmt.Errorf("%s: no scenario folders (with a %s)", root, ScenarioFile)
		}
	}
	var out []*Scenario
	for _, n := range names {
		dir := n
		if _, err := os.Stat(filepath.Join(dir, ScenarioFile)); err != nil {
			dir = filepath.Join(root, n)
		}
		sc, err := Load(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no scenario %q: %s has no %s", n, dir, ScenarioFile)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// Path resolves a path of the scenario file against its folder.
func (sc *Scenario) Path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(sc.Dir, p)
}

// Bounds of the scenario's fields. They keep a replay finite and its memory
// bounded (a 1ns tick or a billion replicas would hang or exhaust the machine) and
// follow what the real services allow where they have a rule.
const (
	// MaxDuration is a month: `joiner record` captures days, not seasons.
	MaxDuration = 31 * 24 * time.Hour
	// MinTick and MaxTick bound the kubelet/scheduler simulation's step.
	MinTick = time.Second
	MaxTick = 10 * time.Minute
	// MaxSteps bounds duration/tick, the simulation steps of one replay.
	MaxSteps = 300_000
	// MinEvery is EventBridge's shortest rate rule, rate(1 minute).
	MinEvery = time.Minute
	MaxEvery = 24 * time.Hour
	// MaxFunctionTimeout is Lambda's longest timeout.
	MaxFunctionTimeout = 15 * time.Minute
	// MaxDelay bounds registerAfter and forwarderDelay.
	MaxDelay = time.Hour
	// MaxHealthNotice bounds how far ahead an AWS Health window may start or end.
	MaxHealthNotice = 90 * 24 * time.Hour
	// MaxCount bounds instance counts of selectors, storms and Health events.
	MaxCount = 10_000
)

// problems collects a scenario's problems, each naming its field.
type problems []string

func (ps *problems) add(field, format string, args ...any) {
	*ps = append(*ps, field+": "+fmt.Sprintf(format, args...))
}

// within reports d outside [lo, hi].
func (ps *problems) within(field string, d Duration, lo, hi time.Duration, why string) {
	if d.D() < lo || d.D() > hi {
		if why != "" {
			why = " (" + why + ")"
		}
		ps.add(field, "%s is out of range: want %s to %s%s", d.D(), lo, hi, why)
	}
}

func (ps *problems) count(field string, n, lo int) {
	if n < lo || n > MaxCount {
		ps.add(field, "%d is out of range: want %d to %d", n, lo, MaxCount)
	}
}

func (sc *Scenario) validate() error {
	var ps problems
	if sc.Cluster == "" {
		ps.add("cluster", "required (the cluster name Joiner is configured with)")
	}
	if sc.Duration == 0 {
		ps.add("duration", "required, like \"1h\"")
	} else {
		ps.within("duration", sc.Duration, time.Nanosecond, MaxDuration, "")
	}
	st := &sc.Settings
	if st.Tick != 0 {
		ps.within("settings.tick", st.Tick, MinTick, MaxTick, "")
	}
	if tick := st.Tick.D(); sc.Duration > 0 && sc.Duration.D() <= MaxDuration {
		if tick == 0 {
			tick = DefaultTick
		}
		if tick >= MinTick && sc.Duration.D()/tick > MaxSteps {
			ps.add("settings.tick", "%s over a duration of %s is %d simulation steps, more than %d: raise tick or shorten duration",
				tick, sc.Duration.D(), sc.Duration.D()/tick, MaxSteps)
		}
	}
	ps.within("settings.registerAfter", st.RegisterAfter, 0, MaxDelay, "")
	ps.within("settings.readyAfter", st.ReadyAfter, 0, MaxDelay, "")
	ps.within("settings.devicePluginAfter", st.DevicePluginAfter, 0, MaxDelay, "")
	ps.within("settings.forwarderDelay", st.ForwarderDelay, 0, MaxDelay, "")
	if st.FunctionTimeout != 0 {
		ps.within("settings.functionTimeout", st.FunctionTimeout, time.Second, MaxFunctionTimeout, "Lambda's limit")
	}
	for _, e := range []struct {
		field string
		d     *Duration
	}{{"settings.provisionerEvery", st.ProvisionerEvery}, {"settings.consolidatorEvery", st.ConsolidatorEvery}} {
		if e.d != nil && *e.d != 0 {
			ps.within(e.field, *e.d, MinEvery, MaxEvery, "0 turns the schedule off; EventBridge's shortest rate is one minute")
		}
	}
	if f := st.MinSavingsFraction; f != nil && (*f < 0 || *f >= 1 || math.IsNaN(*f)) {
		ps.add("settings.minSavingsFraction", "%v is out of range: want a number from 0 to below 1", *f)
	}
	if s := st.Rebalance; s != "" && s != "ignore" && s != "taint" && s != "replace" {
		ps.add("settings.rebalance", "%q: want ignore, taint or replace", s)
	}
	for i, step := range sc.Timeline {
		field := fmt.Sprintf("timeline[%d]", i)
		if step.At < 0 || step.At > sc.Duration {
			ps.add(field+".at", "%s is out of range: want 0 to the duration (%s)", step.At.D(), sc.Duration.D())
		}
		step.validate(&ps, field, sc)
	}
	for i, e := range sc.Expect {
		if n := len(e.checks()); n != 1 {
			ps.add(fmt.Sprintf("expect[%d]", i), "want exactly one check, got %d", n)
		}
		if e.At != nil && (*e.At < 0 || *e.At > sc.Duration) {
			ps.add(fmt.Sprintf("expect[%d].at", i), "%s is out of range: want 0 to the duration (%s)", e.At.D(), sc.Duration.D())
		}
		if e.NodesWith != nil && len(e.NodesWith.Labels) == 0 {
			ps.add(fmt.Sprintf("expect[%d].nodesWith.labels", i), "required: the labels the nodes counted carry")
		}
	}
	if len(ps) > 0 {
		return errors.New(strings.Join(ps, "; "))
	}
	return nil
}

func (st Step) actions() []string {
	var a []string
	add := func(set bool, name string) {
		if set {
			a = append(a, name)
		}
	}
	add(st.Event != "", "event")
	add(st.SpotInterrupt != nil, "spotInterrupt")
	add(st.HealthEvent != nil, "healthEvent")
	add(st.Scale != "", "scale")
	add(st.Apply != "", "apply")
	add(st.Delete != "", "delete")
	add(st.Forwarder != "", "forwarder")
	add(st.Faults != nil, "faults")
	add(st.Terminate != nil, "terminate")
	add(st.ReleaseAMI != nil, "releaseAMI")
	return a
}

// releaseName is what an image name may carry (EC2: 3-128 of letters, digits
// and ()[] ./-'@_; the family's prefix takes the rest).
var releaseName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Functions are the names a step's function: may give.
var Functions = []string{handlers.Provisioner, handlers.Interruption, handlers.Consolidator}

func (st Step) validate(ps *problems, field string, sc *Scenario) {
	a := st.actions()
	if len(a) != 1 {
		ps.add(field, "want exactly one action (event, spotInterrupt, healthEvent, scale, apply, delete, forwarder, faults, terminate, releaseAMI), got %v", a)
		return
	}
	switch {
	case st.Scale != "" && st.Replicas == nil:
		ps.add(field+".replicas", "required with scale")
	case st.Scale != "" && (*st.Replicas < 0 || *st.Replicas > kubesim.MaxReplicas):
		ps.add(field+".replicas", "%d is out of range: want 0 to %d (the in-memory cluster's cap per workload; a 10,000-replica Deployment takes about 630 MB to replay)",
			*st.Replicas, kubesim.MaxReplicas)
	case st.Scale == "" && st.Replicas != nil:
		ps.add(field+".replicas", "only with scale")
	}
	if st.Forwarder != "" && st.Forwarder != "up" && st.Forwarder != "down" {
		ps.add(field+".forwarder", "%q: want up or down", st.Forwarder)
	}
	if st.Function != "" {
		if st.Event == "" {
			ps.add(field+".function", "only with event")
		} else if !slices.Contains(Functions, st.Function) {
			ps.add(field+".function", "unknown function %q: want %s", clip(st.Function), strings.Join(Functions, ", "))
		}
	}
	if st.Event == "" && (st.KeepID || st.Instances != nil || st.Window != nil) {
		ps.add(field, "keepId, instances and window go with event")
	}
	if st.Event != "" {
		if err := checkEventFile(sc.Path(st.Event)); err != nil {
			ps.add(field+".event", "%s: %v", st.Event, err)
		}
	}
	if w := st.Window; w != nil {
		checkWindow(ps, field+".window", w.StartIn, w.EndIn)
	}
	if s := st.SpotInterrupt; s != nil {
		p := field + ".spotInterrupt"
		switch {
		case s.Fraction == 0 && s.Count == 0:
			ps.add(p, "set fraction (more than 0, at most 1) or count")
		case s.Fraction != 0 && s.Count != 0:
			ps.add(p, "set fraction or count, not both")
		case s.Fraction != 0 && !(s.Fraction > 0 && s.Fraction <= 1):
			ps.add(p+".fraction", "%v is out of range: want more than 0, at most 1 (a share of the running spot instances)", s.Fraction)
		case s.Count != 0:
			ps.count(p+".count", s.Count, 1)
		}
		ps.within(p+".within", s.Within, 0, sc.Duration.D(), "at most the scenario's duration")
	}
	if h := st.HealthEvent; h != nil {
		p := field + ".healthEvent"
		if h.Count != 0 {
			ps.count(p+".count", h.Count, 1)
		}
		if h.Select != "" {
			if err := checkSelect(h.Select); err != nil {
				ps.add(p+".select", "%v", err)
			}
		}
		checkWindow(ps, p, h.StartIn, h.EndIn)
	}
	if rel := st.ReleaseAMI; rel != nil {
		if !slices.Contains([]string{"al2023", "al2", "bottlerocket"}, rel.Family) {
			ps.add(field+".releaseAMI.family", "%q: want al2023, al2 or bottlerocket", clip(rel.Family))
		}
		if !releaseName.MatchString(rel.Release) {
			ps.add(field+".releaseAMI.release", "%q: want a build name of letters, digits, '.', '_' or '-' (1 to 64), such as v20270101", clip(rel.Release))
		}
	}
	if st.Delete != "" && len(strings.Fields(st.Delete)) != 2 {
		ps.add(field+".delete", "%q: want \"KIND NAMESPACE/NAME\"", st.Delete)
	}
	if st.Faults != nil {
		if err := st.Faults.Validate(); err != nil {
			ps.add(field+".faults", "%v", err)
		}
	}
	for _, sel := range []struct {
		field string
		s     *Selector
	}{{field + ".instances", st.Instances}, {field + ".terminate", st.Terminate}} {
		if sel.s == nil {
			continue
		}
		if err := checkSelect(sel.s.Select); err != nil {
			ps.add(sel.field+".select", "%v", err)
		}
		if sel.s.Count != 0 {
			ps.count(sel.field+".count", sel.s.Count, 1)
		}
	}
}

// checkWindow bounds an AWS Health window relative to its delivery.
func checkWindow(ps *problems, field string, start, end Duration) {
	ps.within(field+".startIn", start, 0, MaxHealthNotice, "")
	ps.within(field+".endIn", end, 0, MaxHealthNotice, "")
	if end <= start {
		ps.add(field+".endIn", "%s ends before the window starts (startIn %s): want endIn after startIn", end.D(), start.D())
	}
}

// checkEventFile reads a timeline event file: it must hold one JSON object with
// EventBridge's source and detail-type, so a replay does not stop half-way on it.
func checkEventFile(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	_, err = eventObject(raw)
	return err
}

// eventObject decodes an EventBridge event file as a JSON object.
func eventObject(raw []byte) (map[string]any, error) {
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("not an EventBridge event: %w", jsonerr.Describe(raw, err))
	}
	if ev == nil {
		return nil, errors.New("not an EventBridge event: the file holds null, want a JSON object with source, detail-type and detail")
	}
	for _, k := range []string{"source", "detail-type"} {
		if v, ok := ev[k].(string); !ok || v == "" {
			return nil, fmt.Errorf("not an EventBridge event: %q is missing or not a string", k)
		}
	}
	return ev, nil
}

func checkSelect(s string) error {
	switch {
	case s == "any", s == "spot", s == "on-demand", strings.HasPrefix(s, "pool="), strings.HasPrefix(s, "type="):
		return nil
	}
	return fmt.Errorf("select: %q: want any, spot, on-demand, pool=NAME or type=TYPE", s)
}

// Defaults of Settings.
const (
	DefaultTick            = 10 * time.Second
	DefaultEvery           = time.Minute
	DefaultForwarderDelay  = 2 * time.Second
	DefaultFunctionTimeout = 5 * time.Minute
)

func (sc *Scenario) defaults() {
	if sc.Start.IsZero() {
		sc.Start = DefaultStart
	}
	s := &sc.Settings
	def := func(d *Duration, v time.Duration) {
		if *d == 0 {
			*d = Duration(v)
		}
	}
	def(&s.Tick, DefaultTick)
	def(&s.ForwarderDelay, DefaultForwarderDelay)
	def(&s.FunctionTimeout, DefaultFunctionTimeout)
	for _, p := range []**Duration{&s.ProvisionerEvery, &s.ConsolidatorEvery} {
		if *p == nil {
			d := Duration(DefaultEvery)
			*p = &d
		}
	}
	if s.Forwarder == nil {
		on := true
		s.Forwarder = &on
	}
	if s.Rebalance == "" {
		s.Rebalance = "ignore"
	}
	if s.MinSavingsFraction == nil {
		f := 0.1
		s.MinSavingsFraction = &f
	}
}
