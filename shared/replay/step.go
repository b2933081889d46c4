package replay

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/handlers"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kubesim"
)

// step carries out one timeline entry.
func (r *run) step(ctx context.Context, st Step) error {
	switch {
	case st.Event != "":
		return r.sendEvent(ctx, st)
	case st.SpotInterrupt != nil:
		return r.spotStorm(st.SpotInterrupt)
	case st.HealthEvent != nil:
		ids, err := r.selectInstances(st.HealthEvent.Select, max(st.HealthEvent.Count, 1))
		if err != nil {
			return fmt.Errorf("healthEvent: %w", err)
		}
		r.say("timeline", "AWS Health: retirement of %s scheduled in %s", strings.Join(ids, ", "), st.HealthEvent.StartIn.D())
		r.invoke(ctx, handlers.Interruption, r.healthEvent(ids, st.HealthEvent), "timeline")
		return nil
	case st.Scale != "":
		ns, name := splitName(st.Scale)
		r.say("timeline", "scale %s/%s to %d", ns, name, *st.Replicas)
		return r.kc.Scale(ctx, ns, name, *st.Replicas)
	case st.Apply != "":
		b, err := LoadManifests(r.sc.Path(st.Apply))
		if err != nil {
			return fmt.Errorf("apply %s: %w", st.Apply, err)
		}
		r.say("timeline", "apply %s", st.Apply)
		return r.kc.Apply(ctx, b)
	case st.Delete != "":
		f := strings.Fields(st.Delete)
		r.say("timeline", "delete %s %s", f[0], f[1])
		if err := r.kc.Delete(ctx, f[0], f[1]); !apierrors.IsNotFound(err) {
			return err
		}
		r.say("timeline", "%s %s was already gone", f[0], f[1])
		return nil
	case st.Forwarder != "":
		r.forwarderUp = st.Forwarder == "up"
		r.say("timeline", "forwarder %s", st.Forwarder)
		return nil
	case st.Faults != nil:
		r.say("timeline", "AWS faults applied")
		_, err := r.sim.ApplyFaults(*st.Faults)
		return err
	case st.Terminate != nil:
		return r.terminate(ctx, st.Terminate)
	case st.ReleaseAMI != nil:
		return r.releaseAMI(st.ReleaseAMI)
	}
	return nil
}

// releaseAMI publishes a new build of an AMI family behind its public parameters
// for the cluster's Kubernetes version, and remembers the images for the
// onReleasedImage and releasedKept expectations.
func (r *run) releaseAMI(rel *ReleaseAMI) error {
	version := ""
	snap := r.sim.State()
	for _, c := range snap.Clusters {
		if c.Name == r.sc.Cluster {
			version = c.Version
		}
	}
	if version == "" {
		return fmt.Errorf("releaseAMI: the simulated account has no EKS cluster %s to take the Kubernetes version from", r.sc.Cluster)
	}
	names, err := r.sim.ReleaseFamily(rel.Family, version, rel.Release)
	if err != nil {
		return fmt.Errorf("releaseAMI: %w", err)
	}
	values := map[string]string{}
	for _, p := range r.sim.State().Parameters {
		values[p.Name] = p.Value
	}
	if r.released == nil {
		r.released = map[string]bool{}
	}
	var ids []string
	for _, n := range names {
		r.released[values[n]] = true
		ids = append(ids, values[n])
	}
	sort.Strings(ids)
	r.say("timeline", "AWS released %s %s for Kubernetes %s: %s", rel.Family, rel.Release, version, strings.Join(ids, ", "))
	return nil
}

// sendEvent delivers a sample event, rewritten for this moment, to its functions.
func (r *run) sendEvent(ctx context.Context, st Step) error {
	raw, err := os.ReadFile(r.sc.Path(st.Event))
	if err != nil {
		return fmt.Errorf("event: %w", err)
	}
	var idSets [][]string
	if st.Instances != nil {
		ids, err := r.selectInstances(st.Instances.Select, max(st.Instances.Count, 1))
		if err != nil {
			return fmt.Errorf("event %s: %w", st.Event, err)
		}
		if len(instanceIDPattern.FindAll(raw, -1)) > 0 && len(uniqueIDs(raw)) == 1 {
			for _, id := range ids { // one event per instance
				idSets = append(idSets, []string{id})
			}
		} else {
			idSets = [][]string{ids}
		}
	} else {
		idSets = [][]string{nil}
	}
	for _, ids := range idSets {
		payload, err := r.rewrite(raw, st.KeepID, ids, st.Window)
		if err != nil {
			return fmt.Errorf("event %s: %w", st.Event, err)
		}
		fns := []string{st.Function}
		if st.Function == "" {
			if fns, err = routes(payload); err != nil {
				return err
			}
			if len(fns) == 0 {
				return fmt.Errorf("event %s matches no rule of the stack; name its target with function:", st.Event)
			}
		}
		for _, fn := range fns {
			r.say("timeline", "event %s → %s", st.Event, fn)
			r.invoke(ctx, fn, payload, "timeline")
		}
	}
	return nil
}

func uniqueIDs(raw []byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range instanceIDPattern.FindAll(raw, -1) {
		out[string(m)] = true
	}
	return out
}

// spotStorm has the simulator warn a share of the running spot instances, spread
// over the window; the warnings reach the interruption function as EC2 events.
func (r *run) spotStorm(s *SpotInterrupt) error {
	var spot []string
	for _, in := range r.owned() {
		if in.State == awssim.StateRunning && in.CapacityType == awssim.CapacitySpot {
			spot = append(spot, in.ID)
		}
	}
	n := s.Count
	if n == 0 {
		n = max(1, int(math.Ceil(s.Fraction*float64(len(spot)))))
	}
	if len(spot) == 0 {
		return fmt.Errorf("spotInterrupt: no running spot instance to interrupt")
	}
	n = min(n, len(spot))
	h := fnv.New64a()
	h.Write([]byte(r.sc.Name))
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(r.offset())))
	rng.Shuffle(len(spot), func(i, j int) { spot[i], spot[j] = spot[j], spot[i] })
	picked := spot[:n]
	sort.Strings(picked)
	r.say("timeline", "spot interruption storm: %d of %d spot instance(s) warned within %s", n, len(spot), s.Within.D())
	for i, id := range picked {
		id := id
		at := r.clock.Now().Add(time.Duration(int64(s.Within.D()) * int64(i) / int64(n)))
		r.at(at, classTimeline, func(context.Context) error {
			_, err := r.sim.Interrupt(id)
			return err
		})
	}
	return nil
}

// terminate ends instances behind Joiner's back, through EC2's API.
func (r *run) terminate(ctx context.Context, sel *Selector) error {
	ids, err := r.selectInstances(sel.Select, max(sel.Count, 1))
	if err != nil {
		return fmt.Errorf("terminate: %w", err)
	}
	r.say("timeline", "terminate %s (not by Joiner)", strings.Join(ids, ", "))
	_, err = ec2.NewFromConfig(r.sim.AWSConfig()).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
	return err
}

// pendingSpecs reads the pods of a forwarder batch that are still pending.
func (r *run) pendingSpecs(ctx context.Context, refs []kubesim.PodRef) ([]events.PendingPod, error) {
	seen := map[kubesim.PodRef]bool{}
	var out []events.PendingPod
	for _, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		p, err := r.kc.Clientset().CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if facts.IsPending(p) {
			out = append(out, events.FromPod(p))
		}
	}
	return out, nil
}

func splitName(s string) (string, string) {
	if ns, name, ok := strings.Cut(s, "/"); ok {
		return ns, name
	}
	return metav1.NamespaceDefault, s
}

// check evaluates a timed expectation now.
func (r *run) check(ctx context.Context, i int, e Expectation) error {
	v, err := r.view(ctx)
	if err != nil {
		return err
	}
	o := e.check(v)
	r.outcomes[i] = &o
	if !o.Met {
		r.say("expect", "NOT MET: %s: %s", o.Check, o.Detail)
	}
	return nil
}

func (r *run) view(ctx context.Context) (*view, error) {
	c := r.kc.Clientset()
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	st, err := kube.New(r.kc.Clients(), kube.Options{ClusterName: r.sc.Cluster, Now: r.clock.Now, Log: r.log}).ReadState(ctx)
	if err != nil {
		return nil, err
	}
	events, err := c.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	boot := map[string]string{}
	for _, ev := range events.Items {
		if ev.Reason == kubesim.ReasonNodeBootFailed && ev.Regarding.Kind == "NodeClaim" {
			boot[ev.Regarding.Name] = ev.Note
		}
	}
	return &view{cluster: r.sc.Cluster, real: r.opts.Server != nil, at: r.offset(), start: r.start, pods: pods.Items, nodes: nodes.Items,
		claims: st.NodeClaims, pools: st.Snapshot.NodePools, instances: r.owned(), res: r.res, released: r.released, bootEvents: boot}, nil
}
