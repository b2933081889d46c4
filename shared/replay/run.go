package replay

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kubesim"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
	"github.com/joiner-autoscaler/joiner/shared/nodeboot"
)

// Options tune a replay.
type Options struct {
	// NodePools, when set, replaces the scenario's NodePools and EC2NodeClasses with
	// its own (what-if); NodePoolsName names it in the result.
	NodePools     *manifest.Bundle
	NodePoolsName string
	// Steps receives one line per step as it happens; nil prints nothing.
	Steps io.Writer
	// Progress receives a line per simulated hour on replays longer than two hours.
	Progress io.Writer
	// Log receives the handlers' JSON logs; nil discards them.
	Log io.Writer
	// Server, when set, is a real API server to replay against instead of the
	// in-memory cluster: the kubelet/scheduler simulation registers Nodes, binds pods
	// and recreates evicted ones there, and deletes what it created at the end. It
	// must be an empty scratch cluster with Karpenter's CRDs installed; one with
	// Nodes, NodeClaims or NodePools is refused unless Force is set.
	Server *rest.Config
	Force  bool
	// RealScheduler leaves binding to a kube-scheduler running against Server
	// (required): the simulation registers Nodes as kubelets would and starts the
	// pods the scheduler binds, and binds none itself. Settle waits until that
	// scheduler has acted on a change (nil: until the pods stop changing);
	// NodeAnnotations go on every registered Node (a KWOK controller's selector).
	RealScheduler   bool
	Settle          func(context.Context) error
	NodeAnnotations map[string]string
	// Final, when set, is given the replayed cluster's clients once the replay has
	// ended and its expectations are checked, before a real API server is cleaned
	// up: what the functions left there, for a caller to judge with other code
	// (bench/karpenter hands it to Karpenter's controllers). Its error fails Run.
	Final func(context.Context, *kube.Clients) error
}

// Defaults of a replay with the real scheduler, for scenarios that leave the
// delays unset: a node's kubelet reports Ready some seconds after registering,
// and a device plugin advertises GPUs some seconds after that.
const (
	RealReadyAfter        = 5 * time.Second
	RealDevicePluginAfter = 20 * time.Second
)

// invocationWallLimit bounds one invocation in wall time: simulated sleeps are
// instant, so a handler still running after this is stuck.
const invocationWallLimit = 2 * time.Minute

// Run replays one scenario.
func Run(ctx context.Context, sc *Scenario, opts Options) (*Result, error) {
	wall := time.Now()
	r, err := newRun(ctx, sc, opts)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	if err := r.loop(ctx); err != nil {
		_ = r.close(ctx)
		return nil, fmt.Errorf("scenario %s at %s: %w", sc.Name, fmtOffset(r.offset()), err)
	}
	if err := r.finish(ctx); err != nil {
		_ = r.close(ctx)
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	if opts.Final != nil {
		if err := opts.Final(ctx, r.kc.Clients()); err != nil {
			_ = r.close(ctx)
			return nil, fmt.Errorf("scenario %s: final: %w", sc.Name, err)
		}
	}
	if err := r.close(ctx); err != nil {
		return nil, fmt.Errorf("scenario %s: clean up: %w", sc.Name, err)
	}
	r.res.Wall = time.Since(wall)
	return r.res, nil
}

// run is one replay in progress.
type run struct {
	sc      *Scenario
	opts    Options
	start   time.Time
	end     time.Time
	clock   *awssim.FakeClock
	sim     *awssim.Sim
	account string
	cloud   cloud.Clients
	kc      *kubesim.Cluster
	// boot executes launched instances' user data (nil: not executed here).
	boot *nodeboot.Booter
	fns  map[string]*handlers.Function
	cfg  handlers.Config
	log  *slog.Logger

	q        queue
	nextTick time.Time
	// deadline is the simulated Lambda timeout of the invocation in progress.
	deadline time.Time
	ids      int
	batches  int

	forwarderUp bool
	batch       []kubesim.PodRef
	batchDue    bool
	simEvents   int

	rec      recorder
	meter    *meter
	res      *Result
	outcomes []*Outcome
	nextHour time.Time
	// released are the images releaseAMI steps published.
	released map[string]bool
}

func (r *run) offset() time.Duration { return r.clock.Now().Sub(r.start) }

// loop runs every item and tick in time order up to the end.
func (r *run) loop(ctx context.Context) error {
	r.schedule()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		next := r.nextTick
		fromQueue := r.q.Len() > 0 && r.q[0].at.Before(next)
		if fromQueue {
			next = r.q[0].at
		}
		if next.After(r.end) {
			break
		}
		if fromQueue {
			it := heap.Pop(&r.q).(*item)
			r.clock.Set(it.at)
			if err := it.do(ctx); err != nil {
				return err
			}
		} else if err := r.tick(ctx); err != nil {
			return err
		}
		if err := r.deliverEC2Events(ctx); err != nil {
			return err
		}
		r.progress()
	}
	r.clock.Set(r.end)
	return nil
}

// schedule queues the timeline, the scheduled functions and the timed expectations.
func (r *run) schedule() {
	for _, st := range r.sc.Timeline {
		st := st
		r.at(r.start.Add(st.At.D()), classTimeline, func(ctx context.Context) error { return r.step(ctx, st) })
	}
	every := map[string]time.Duration{handlers.Provisioner: r.sc.Settings.ProvisionerEvery.D(), handlers.Consolidator: r.sc.Settings.ConsolidatorEvery.D()}
	for _, fn := range []string{handlers.Provisioner, handlers.Consolidator} {
		if d := every[fn]; d > 0 {
			r.recurring(fn, d)
		}
	}
	r.outcomes = make([]*Outcome, len(r.sc.Expect))
	for i, e := range r.sc.Expect {
		if when := e.when(r.sc.Duration.D()); when < r.sc.Duration.D() {
			i, e := i, e
			r.at(r.start.Add(when), classCheck, func(ctx context.Context) error { return r.check(ctx, i, e) })
		}
	}
}

// recurring invokes a scheduled function every d, as its EventBridge rule does.
func (r *run) recurring(fn string, d time.Duration) {
	var tick func(ctx context.Context) error
	at := r.start.Add(d)
	tick = func(ctx context.Context) error {
		r.invoke(ctx, fn, r.scheduled(fn), "schedule")
		at = at.Add(d)
		r.at(at, classFunction, tick)
		return nil
	}
	r.at(at, classFunction, tick)
}

// tick runs the cluster's controllers once and moves the next tick on.
func (r *run) tick(ctx context.Context) error {
	r.clock.Set(r.nextTick)
	r.nextTick = r.nextTick.Add(r.sc.Settings.Tick.D())
	rep, err := r.kc.Step(ctx)
	if err != nil {
		return err
	}
	r.report(rep)
	r.forward(rep)
	return r.rec.observe(ctx, r)
}

// forward queues newly unschedulable pods for the forwarder's next batch.
func (r *run) forward(rep *kubesim.Report) {
	if len(rep.Unschedulable) == 0 || !r.forwarderUp {
		return
	}
	r.batch = append(r.batch, rep.Unschedulable...)
	if !r.batchDue {
		r.batchDue = true
		r.at(r.clock.Now().Add(r.sc.Settings.ForwarderDelay.D()), classFunction, r.sendBatch)
	}
}

// sleep is the handlers' (and the drain's) Sleep: simulated time passes, the
// cluster's controllers run meanwhile, and a sleep past the function's timeout ends
// the invocation as Lambda would.
func (r *run) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	target := r.clock.Now().Add(d)
	over := target.After(r.deadline)
	if over {
		target = r.deadline
	}
	for !r.nextTick.After(target) {
		if err := r.tick(ctx); err != nil {
			return err
		}
	}
	r.clock.Set(target)
	if over {
		return context.DeadlineExceeded
	}
	return nil
}

// invoke delivers raw event bytes to a function, as Lambda would.
func (r *run) invoke(ctx context.Context, fn string, payload []byte, why string) {
	r.deadline = r.clock.Now().Add(r.sc.Settings.FunctionTimeout.D())
	ictx, cancel := context.WithTimeout(ctx, invocationWallLimit)
	defer cancel()
	at := r.offset()
	var out []byte
	var err error
	if f := r.fns[fn]; f != nil {
		wall, simAt := time.Now(), r.clock.Now()
		out, err = f.Invoke(ictx, payload)
		// Lambda bills the invocation's wall time: here the handler's own time plus
		// the waits (drains, replacements) it spent on the simulated clock.
		r.meter.invoked(fn, why, time.Since(wall)+r.clock.Now().Sub(simAt))
	} else {
		err = fmt.Errorf("no function %q (want %s)", fn, strings.Join(Functions, ", "))
	}
	var s handlers.Summary
	if len(out) > 0 {
		_ = json.Unmarshal(out, &s)
	}
	r.res.Invocations[fn]++
	r.res.Interruptions += s.Interruptions
	if err != nil {
		r.res.Errors++
		if len(r.res.ErrorMessages) < 10 {
			r.res.ErrorMessages = append(r.res.ErrorMessages, fmt.Sprintf("%s %s: %v", fmtOffset(at), fn, err))
		}
	}
	r.sayInvocation(at, fn, why, &s, err)
	if err == nil && quiet(&s) {
		return
	}
	// The cluster's controllers react at once to what the invocation did (evicted pods
	// recreated and scheduled, or marked unschedulable), as they would in
	// milliseconds, before any other function looks at the cluster.
	if rep, serr := r.kc.Step(ctx); serr == nil {
		r.report(rep)
		r.forward(rep)
	}
}

// deliverEC2Events sends the events the simulated EC2 emitted (spot warnings, state
// changes) to the functions whose rules match them.
func (r *run) deliverEC2Events(ctx context.Context) error {
	for {
		evs := r.sim.Events()
		if len(evs) <= r.simEvents {
			return nil
		}
		fresh := evs[r.simEvents:]
		r.simEvents = len(evs)
		for _, raw := range fresh {
			fns, err := routes(raw)
			if err != nil {
				return err
			}
			for _, fn := range fns {
				r.invoke(ctx, fn, raw, "ec2")
			}
		}
	}
}

// sendBatch is the forwarder: the pods that turned unschedulable since the last
// batch, still pending, go to the provisioner as Pending Pods events.
func (r *run) sendBatch(ctx context.Context) error {
	refs := r.batch
	r.batch, r.batchDue = nil, false
	if !r.forwarderUp {
		return nil
	}
	pods, err := r.pendingSpecs(ctx, refs)
	if err != nil || len(pods) == 0 {
		return err
	}
	payloads, err := r.pendingPods(pods)
	if err != nil {
		return err
	}
	for _, p := range payloads {
		r.invoke(ctx, handlers.Provisioner, p, "forwarder")
	}
	return nil
}

// newDeps builds one invocation's dependencies over the simulated world, as
// handlers.FromEnv builds them over the real one.
func (r *run) newDeps(name string) func(context.Context) (*handlers.Deps, error) {
	// One unavailable-offerings cache and one catalog cache per function: each is
	// its own warm Lambda container.
	unavailable := cloud.NewUnavailableOfferings(r.clock.Now)
	catalogCache := cloud.NewCatalogCache(handlers.TypesTTL, handlers.PricesTTL)
	profiles := cloud.NewInstanceProfileCache(r.clock.Now)
	return func(ctx context.Context) (*handlers.Deps, error) {
		identity := fmt.Sprintf("%s/%d", name, r.res.Invocations[name]+1)
		prov, err := cloud.New(cloud.Config{ClusterName: r.sc.Cluster, Region: r.sim.Region(), Clock: r.clock.Now,
			Unavailable: unavailable, CatalogCache: catalogCache, InstanceProfiles: profiles, Logger: r.log}, r.cloud)
		if err != nil {
			return nil, err
		}
		cluster := kube.New(r.kc.Clients(), kube.Options{ClusterName: r.sc.Cluster, Identity: identity, Now: r.clock.Now,
			Log: r.log, Sleep: r.sleep})
		return &handlers.Deps{Config: r.cfg, Cluster: cluster, Cloud: prov, Log: r.log, Now: r.clock.Now,
			Identity: identity, Sleep: r.sleep, LaunchConcurrency: 1}, nil
	}
}

// Item classes order items due at the same moment.
const (
	classTimeline = iota
	classFunction
	classCheck
)

type item struct {
	at    time.Time
	class int
	seq   int
	do    func(context.Context) error
}

// queue is a min-heap of items by time, class and insertion order.
type queue []*item

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	if q[i].class != q[j].class {
		return q[i].class < q[j].class
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*item)) }
func (q *queue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

func (r *run) at(t time.Time, class int, do func(context.Context) error) {
	r.ids++
	heap.Push(&r.q, &item{at: t, class: class, seq: r.ids, do: do})
}
