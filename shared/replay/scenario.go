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
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
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

// UnmarshalJSON reads a Go duration string or the number 0.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "0" {
		*d = 0
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration like \"90s\" or \"10m\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("want a duration like \"90s\" or \"10m\", got %q", s)
	}
	*d = Duration(v)
	return nil
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
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	sc := &Scenario{}
	if err := dec.Decode(sc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sc.Dir, sc.Name = dir, filepath.Base(dir)
	if err := sc.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
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

func (sc *Scenario) validate() error {
	var problems []string
	if sc.Cluster == "" {
		problems = append(problems, "cluster: required (the cluster name Joiner is configured with)")
	}
	if sc.Duration <= 0 {
		problems = append(problems, "duration: required, like \"1h\"")
	}
	for i, st := range sc.Timeline {
		if err := st.validate(); err != nil {
			problems = append(problems, fmt.Sprintf("timeline[%d]: %v", i, err))
		}
		if st.At > sc.Duration {
			problems = append(problems, fmt.Sprintf("timeline[%d].at: %s is after the end (%s)", i, st.At.D(), sc.Duration.D()))
		}
	}
	for i, e := range sc.Expect {
		if n := len(e.checks()); n != 1 {
			problems = append(problems, fmt.Sprintf("expect[%d]: want exactly one check, got %d", i, n))
		}
	}
	if s := sc.Settings.Rebalance; s != "" && s != "ignore" && s != "taint" && s != "replace" {
		problems = append(problems, fmt.Sprintf("settings.rebalance: %q: want ignore, taint or replace", s))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
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
	return a
}

func (st Step) validate() error {
	a := st.actions()
	switch {
	case len(a) != 1:
		return fmt.Errorf("want exactly one action (event, spotInterrupt, healthEvent, scale, apply, delete, forwarder, faults, terminate), got %v", a)
	case st.Scale != "" && st.Replicas == nil:
		return errors.New("scale: replicas is required")
	case st.Forwarder != "" && st.Forwarder != "up" && st.Forwarder != "down":
		return fmt.Errorf("forwarder: %q: want up or down", st.Forwarder)
	case st.Function != "" && st.Event == "":
		return errors.New("function: only with event")
	case st.SpotInterrupt != nil && st.SpotInterrupt.Fraction <= 0 && st.SpotInterrupt.Count <= 0:
		return errors.New("spotInterrupt: set fraction (0-1] or count")
	case st.Delete != "" && len(strings.Fields(st.Delete)) != 2:
		return fmt.Errorf("delete: %q: want \"KIND NAMESPACE/NAME\"", st.Delete)
	}
	for _, sel := range []*Selector{st.Instances, st.Terminate} {
		if sel != nil {
			if err := checkSelect(sel.Select); err != nil {
				return err
			}
		}
	}
	return nil
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
