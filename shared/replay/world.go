package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/kubesim"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
)

// keepTerminated keeps terminated instances visible to the end of any replay, so
// costs and orphan checks see every instance ever launched.
const keepTerminated = 24 * 365 * time.Hour

// newRun builds the simulated world: AWS (the simulator, seeded for the cluster),
// the in-memory cluster with the scenario's manifests, and the three functions.
func newRun(ctx context.Context, sc *Scenario, opts Options) (*run, error) {
	bundle, err := LoadManifests(sc.paths(sc.Manifests)...)
	if err != nil {
		return nil, err
	}
	if opts.NodePools != nil {
		bundle = withNodePools(bundle, opts.NodePools)
	}
	r := &run{sc: sc, opts: opts, start: sc.Start, end: sc.Start.Add(sc.Duration.D()), clock: awssim.NewFakeClock(sc.Start),
		forwarderUp: *sc.Settings.Forwarder, nextTick: sc.Start, nextHour: sc.Start.Add(time.Hour)}
	r.res = &Result{Scenario: sc.Name, Description: sc.Description, NodePools: opts.NodePoolsName, Simulated: sc.Duration.D(),
		Invocations: map[string]int{}}
	logOut := opts.Log
	if logOut == nil {
		logOut = io.Discard
	}
	r.log = handlers.NewLogger(logOut, "INFO")
	if err := r.startAWS(ctx); err != nil {
		return nil, err
	}
	r.kc = kubesim.New(kubesim.Config{Now: r.clock.Now, Instances: r.sim, RegisterAfter: sc.Settings.RegisterAfter.D(), Log: r.log})
	if err := r.kc.Apply(ctx, bundle); err != nil {
		r.sim.Close()
		return nil, err
	}
	r.cfg = handlers.Config{ClusterName: sc.Cluster, Region: r.sim.Region(), AccountID: r.account, Rebalance: sc.Settings.Rebalance,
		LeaseDuration: time.Minute, LeaseWait: 3 * time.Second, MinSavingsFraction: *sc.Settings.MinSavingsFraction}
	r.fns = map[string]*handlers.Function{}
	for _, name := range []string{handlers.Provisioner, handlers.Interruption, handlers.Consolidator} {
		fn, err := handlers.NewFunction(name, r.newDeps(name))
		if err != nil {
			r.sim.Close()
			return nil, err
		}
		fn.MetricsOut = io.Discard
		r.fns[name] = fn
	}
	r.rec.init(r, bundle)
	return r, nil
}

func (r *run) startAWS(ctx context.Context) error {
	seed := awssim.DefaultSeed(r.sc.Cluster)
	sim, err := awssim.Start(ctx, awssim.Config{Seed: &seed, Clock: r.clock, TerminatedVisibleFor: keepTerminated,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	if r.sc.AWS != "" {
		extra, err := awssim.LoadSeed(r.sc.Path(r.sc.AWS))
		if err == nil {
			err = sim.Apply(*extra)
		}
		if err != nil {
			sim.Close()
			return err
		}
	}
	r.sim, r.account = sim, sim.State().AccountID
	r.cloud = cloud.NewClients(sim.AWSConfig(), cloud.RetryOptions{}, false)
	return nil
}

func (sc *Scenario) paths(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = sc.Path(p)
	}
	return out
}

// LoadManifests reads manifests as joiner plan does; a document with errors fails
// the load (a replay of half a cluster would mislead), with every problem listed.
func LoadManifests(paths ...string) (*manifest.Bundle, error) {
	b, err := manifest.Load(paths...)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, p := range b.Problems {
		if !p.Warning {
			problems = append(problems, p.String())
		}
	}
	if len(problems) > 0 {
		return nil, errors.New("manifest problems:\n  " + strings.Join(problems, "\n  "))
	}
	return b, nil
}

// withNodePools is b with its NodePools and EC2NodeClasses replaced by alt's.
func withNodePools(b, alt *manifest.Bundle) *manifest.Bundle {
	out := *b
	out.NodePools, out.NodeClasses = alt.NodePools, alt.NodeClasses
	return &out
}

// selectInstances picks running instances Joiner launched for the cluster, oldest first.
func (r *run) selectInstances(sel string, count int) ([]string, error) {
	if count <= 0 {
		count = 1
	}
	var ids []string
	for _, in := range r.owned() {
		if in.State != awssim.StateRunning || !matches(in, sel) {
			continue
		}
		ids = append(ids, in.ID)
		if len(ids) == count {
			return ids, nil
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no running instance Joiner launched matches %q", sel)
	}
	return ids, nil
}

func matches(in awssim.Instance, sel string) bool {
	switch {
	case sel == "any" || sel == "":
		return true
	case sel == "spot" || sel == "on-demand":
		return in.CapacityType == sel
	case strings.HasPrefix(sel, "pool="):
		return in.Tags["karpenter.sh/nodepool"] == strings.TrimPrefix(sel, "pool=")
	case strings.HasPrefix(sel, "type="):
		return in.InstanceType == strings.TrimPrefix(sel, "type=")
	}
	return false
}

// owned lists the instances Joiner launched for the cluster (any state), oldest first.
func (r *run) owned() []awssim.Instance {
	var out []awssim.Instance
	for _, in := range r.sim.State().Instances {
		if in.Tags["kubernetes.io/cluster/"+r.sc.Cluster] == "owned" && in.Tags["karpenter.sh/nodepool"] != "" {
			out = append(out, in)
		}
	}
	sortInstances(out)
	return out
}
