package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kubesim"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
	"github.com/joiner-autoscaler/joiner/shared/nodeboot"
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
	start := sc.Start
	if opts.Server != nil {
		start = realServerStart(start, time.Now())
	}
	r := &run{sc: sc, opts: opts, start: start, end: start.Add(sc.Duration.D()), clock: awssim.NewFakeClock(start),
		forwarderUp: *sc.Settings.Forwarder, nextTick: start, nextHour: start.Add(time.Hour)}
	r.res = &Result{Scenario: sc.Name, Description: sc.Description, NodePools: opts.NodePoolsName, Simulated: sc.Duration.D(),
		Invocations: map[string]int{}}
	logOut := opts.Log
	if logOut == nil {
		logOut = io.Discard
	}
	r.meter = newMeter()
	r.log = handlers.NewLogger(io.MultiWriter(logOut, logWriter{r.meter}), "INFO")
	if err := r.startAWS(ctx, bundle); err != nil {
		return nil, err
	}
	kcfg := kubesim.Config{Now: r.clock.Now, Instances: r.sim, RegisterAfter: sc.Settings.RegisterAfter.D(), Log: r.log,
		ReadyAfter: sc.Settings.ReadyAfter.D(), DevicePluginAfter: sc.Settings.DevicePluginAfter.D()}
	if opts.RealScheduler {
		if opts.Server == nil {
			r.sim.Close()
			return nil, fmt.Errorf("the real scheduler runs against a real API server: give one (--kubeconfig)")
		}
		r.res.Scheduler = SchedulerReal
		kcfg.RealScheduler, kcfg.Settle, kcfg.NodeAnnotations = true, opts.Settle, opts.NodeAnnotations
		if kcfg.ReadyAfter == 0 {
			kcfg.ReadyAfter = RealReadyAfter
		}
		if kcfg.DevicePluginAfter == 0 {
			kcfg.DevicePluginAfter = RealDevicePluginAfter
		}
	}
	if err := nodeboot.Available(); err != nil {
		// Without a sandbox, nodes register as their NodeClaims say, unchecked.
		r.log.Warn("user data is not executed: every instance registers as its NodeClaim says", "why", err.Error())
	} else {
		// The manifests name the cluster's address in user data as they please;
		// what a node must get right to join is its identity and labels.
		r.boot = nodeboot.New(r.sim, nodeboot.Cluster{})
		kcfg.Boot = r.boot.Boot
	}
	if opts.Server != nil {
		if r.kc, err = kubesim.NewReal(ctx, kcfg, opts.Server, opts.Force); err != nil {
			r.sim.Close()
			return nil, err
		}
	} else {
		r.kc = kubesim.New(kcfg)
	}
	if err := r.kc.Apply(ctx, bundle); err != nil {
		_ = r.close(ctx)
		return nil, err
	}
	r.cfg = handlers.Config{ClusterName: sc.Cluster, Region: r.sim.Region(), AccountID: r.account, Rebalance: sc.Settings.Rebalance,
		LeaseDuration: time.Minute, LeaseWait: 3 * time.Second, MinSavingsFraction: *sc.Settings.MinSavingsFraction}
	r.fns = map[string]*handlers.Function{}
	for _, name := range []string{handlers.Provisioner, handlers.Interruption, handlers.Consolidator} {
		fn, err := handlers.NewFunction(name, r.newDeps(name))
		if err != nil {
			_ = r.close(ctx)
			return nil, err
		}
		fn.MetricsOut = metricsWriter{r.meter}
		r.fns[name] = fn
	}
	r.rec.init(r, bundle)
	return r, nil
}

// realServerStart is when a replay against a real API server starts in simulated
// time: the scenario's start, unless that is less than a day after now, then the next
// hour a day from now. The server stamps creationTimestamp with its own clock, and
// the functions read those stamps as ages (emptiness, expiry, launch timeouts); with
// simulated time ahead of the server's, they read as old rather than in the future,
// so nothing waits forever on a timestamp from tomorrow.
func realServerStart(start, now time.Time) time.Time {
	if earliest := now.Add(24 * time.Hour); start.Before(earliest) {
		return earliest.Truncate(time.Hour).Add(time.Hour)
	}
	return start
}

// close releases the simulated AWS and, on a real API server, deletes what the
// replay created there.
func (r *run) close(ctx context.Context) error {
	defer r.sim.Close()
	if r.kc == nil {
		return nil
	}
	// A cancelled replay still cleans up.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return r.kc.Cleanup(cctx)
}

func (r *run) startAWS(ctx context.Context, bundle *manifest.Bundle) error {
	seed := awssim.DefaultSeed(r.sc.Cluster)
	// The node roles the classes name exist in the account, as they must in a
	// real one; Joiner makes the instance profiles that hold them. Classes a
	// timeline step applies later count too.
	classes := bundle.NodeClasses
	for _, st := range r.sc.Timeline {
		if st.Apply == "" {
			continue
		}
		if b, err := LoadManifests(r.sc.Path(st.Apply)); err == nil {
			classes = append(classes, b.NodeClasses...)
		}
	}
	seed.Roles = NodeRoles(seed.Roles, classes)
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

// NodeRoles adds to roles an IAM role for every role the classes name (by its
// name: spec.role may be a path or an ARN), once each.
func NodeRoles(roles []awssim.Role, classes []*karpenter.EC2NodeClass) []awssim.Role {
	have := map[string]bool{}
	for _, r := range roles {
		have[r.Name] = true
	}
	for _, c := range classes {
		name := c.Spec.Role
		if i := strings.LastIndex(name, "/"); i >= 0 {
			name = name[i+1:]
		}
		if name != "" && !have[name] {
			have[name] = true
			roles = append(roles, awssim.Role{Name: name})
		}
	}
	return roles
}

// LoadManifests reads manifests as joiner plan does; a document with errors fails
// the load (a replay of half a cluster would mislead), with every problem listed.
// Errors that only show when a node boots (Problem.Runtime, such as user data that
// cannot join) do not: the cluster would hold those objects, and the replay shows
// what they do.
func LoadManifests(paths ...string) (*manifest.Bundle, error) {
	b, err := manifest.Load(paths...)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, p := range b.Problems {
		if !p.Warning && !p.Runtime {
			problems = append(problems, p.String())
		}
	}
	// The replay's cluster is in memory: a workload past its replica cap is refused
	// here, naming it, before anything is built.
	perWorkload := map[string]int{}
	for _, p := range b.Pods {
		for _, o := range p.OwnerReferences {
			if o.Controller != nil && *o.Controller {
				perWorkload[o.Kind+" "+p.Namespace+"/"+o.Name]++
			}
		}
	}
	for _, w := range slices.Sorted(maps.Keys(perWorkload)) {
		if err := kubesim.ReplicasError(w, perWorkload[w]); err != nil {
			problems = append(problems, err.Error())
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
