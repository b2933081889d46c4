package replay

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// sampleEvery is the resolution of the series (chart, $/hour, lower bound).
const sampleEvery = time.Minute

// recorder samples the cluster once a simulated minute.
type recorder struct {
	next    time.Time
	pools   []*karpenter.NodePool
	classes []*karpenter.EC2NodeClass
	cat     *catalog.Catalog
	// bounds caches the lower bound per set of pods (by workload counts).
	bounds map[string]float64
	lost   int
}

func (rec *recorder) init(r *run, b *manifest.Bundle) {
	rec.next = r.start
	rec.pools, rec.classes = b.NodePools, b.NodeClasses
	rec.cat = catalog.Embedded()
	rec.bounds = map[string]float64{}
}

// observe samples the cluster when a minute has passed.
func (rec *recorder) observe(ctx context.Context, r *run) error {
	now := r.clock.Now()
	if now.Before(rec.next) {
		return nil
	}
	rec.next = rec.next.Add(sampleEvery)
	c := r.kc.Clientset()
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ds, err := c.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	s := Sample{At: now.Sub(r.start), Nodes: len(nodes.Items)}
	for i := range pods.Items {
		if facts.IsPending(&pods.Items[i]) {
			s.Pending++
		}
	}
	s.LowerBound = rec.lowerBound(pods.Items, nodes.Items, ds.Items)
	r.res.Series = append(r.res.Series, s)
	r.res.MaxNodes = max(r.res.MaxNodes, s.Nodes)
	return nil
}

// lowerBound is the LP lower bound, in $/hour, of holding the pods that exist now on
// the scenario's NodePools, planned from scratch; nodes Joiner did not launch keep
// their pods at no cost.
func (rec *recorder) lowerBound(pods []corev1.Pod, nodes []corev1.Node, ds []appsv1.DaemonSet) float64 {
	foreign := map[string]*packer.NodeState{}
	snap := &packer.Snapshot{NodePools: rec.pools, NodeClasses: rec.classes, Catalog: rec.cat}
	for i := range nodes {
		if nodes[i].Labels[karpenter.NodePoolLabelKey] == "" {
			foreign[nodes[i].Name] = &packer.NodeState{Node: &nodes[i]}
		}
	}
	for i := range ds {
		snap.DaemonSets = append(snap.DaemonSets, &ds[i])
	}
	counts := map[string]int{}
	for i := range pods {
		p := &pods[i]
		if facts.IsDaemonSetPod(p) || !facts.IsActive(p) {
			continue
		}
		if f := foreign[p.Spec.NodeName]; f != nil {
			f.Pods = append(f.Pods, p)
			continue
		}
		q := *p
		q.Spec.NodeName = ""
		snap.Pods = append(snap.Pods, &q)
		counts[workloadOf(p)]++
	}
	if len(snap.Pods) == 0 {
		return 0
	}
	key := signature(counts, foreign)
	if v, ok := rec.bounds[key]; ok {
		return v
	}
	for _, f := range foreign {
		snap.Nodes = append(snap.Nodes, *f)
	}
	sort.Slice(snap.Nodes, func(i, j int) bool { return snap.Nodes[i].Node.Name < snap.Nodes[j].Node.Name })
	v, _ := workload.LowerBound(snap)
	rec.bounds[key] = v
	return v
}

// workloadOf names what a pod's requests come from: its controller, or itself.
func workloadOf(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return p.Namespace + "/" + o.Kind + "/" + o.Name
		}
	}
	return p.Namespace + "/" + p.Name
}

func signature(counts map[string]int, foreign map[string]*packer.NodeState) string {
	parts := make([]string, 0, len(counts)+len(foreign))
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	for name, f := range foreign {
		parts = append(parts, fmt.Sprintf("node %s=%d", name, len(f.Pods)))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// finish completes the result: instances launched and terminated, costs, pod waits,
// the price series, and the expectations checked at the end.
func (r *run) finish(ctx context.Context) error {
	if err := r.rec.observe(ctx, r); err != nil {
		return err
	}
	owned := r.owned()
	r.instanceStats(owned)
	r.costs(owned)
	r.res.Bill = r.meter.bill(r.res.Simulated, r.res.Cost)
	r.podStats()
	v, err := r.view(ctx)
	if err != nil {
		return err
	}
	for i, e := range r.sc.Expect {
		if r.outcomes[i] == nil {
			o := e.check(v)
			r.outcomes[i] = &o
		}
		r.res.Expectations = append(r.res.Expectations, *r.outcomes[i])
		if !r.outcomes[i].Met {
			r.res.Failed++
		}
	}
	return nil
}

func (r *run) instanceStats(owned []awssim.Instance) {
	launched, terminated := map[[2]string]int{}, map[[2]string]int{}
	for _, in := range owned {
		k := [2]string{in.InstanceType, in.CapacityType}
		if in.CapacityReservationID != "" {
			k[1] = karpenter.CapacityTypeReserved
		}
		before := in.LaunchTime.Before(r.start)
		if !before {
			launched[k]++
		}
		// Terminated during the replay: the instances it launched, and those the
		// cluster started with (adopted ones, a scenario 020 cluster's), once their
		// termination falls after the start (shutting down: no time yet, so not
		// one the seed already had going).
		gone := in.State == awssim.StateShuttingDown || in.State == awssim.StateTerminated
		if gone && (!before || (!in.TerminatedAt.IsZero() && !in.TerminatedAt.Before(r.start)) ||
			(in.TerminatedAt.IsZero() && in.State == awssim.StateShuttingDown && in.NextTransition.After(r.start))) {
			terminated[k]++
		}
	}
	r.res.Launched, r.res.Terminated = countBy(launched), countBy(terminated)
}

// costs integrates each instance's price over the time it ran, and the lower bound
// over the samples; each sample gets the $/hour of the instances running then.
func (r *run) costs(owned []awssim.Instance) {
	type span struct {
		from, to time.Time
		price    float64
	}
	var spans []span
	// rate is, per capacity reservation an instance ran in, what it costs an
	// hour: every slot at the on-demand price the instance was launched at.
	rate := map[string]float64{}
	for _, in := range owned {
		if in.CapacityReservationID != "" {
			rate[in.CapacityReservationID] = in.PricePerHour
		}
	}
	r.res.Reservations = nil
	for _, cr := range r.sim.State().CapacityReservations {
		if odPrice, ok := rate[cr.ID]; ok {
			b := ReservationBill{ID: cr.ID, InstanceType: cr.InstanceType, Slots: cr.TotalCount, PricePerHour: odPrice * float64(cr.TotalCount)}
			b.Cost = b.PricePerHour * r.end.Sub(r.start).Hours()
			r.res.Reservations = append(r.res.Reservations, b)
			r.res.Cost += b.Cost
			spans = append(spans, span{r.start, r.end.Add(time.Nanosecond), b.PricePerHour})
		}
	}
	for _, in := range owned {
		if in.CapacityReservationID != "" {
			continue // paid for by its reservation, above
		}
		to := r.end.Add(time.Nanosecond) // still running: counted in the last sample
		if !in.TerminatedAt.IsZero() && in.TerminatedAt.Before(r.end) {
			to = in.TerminatedAt
		}
		from := in.LaunchTime
		if from.Before(r.start) {
			from = r.start
		}
		if to.After(from) {
			spans = append(spans, span{from, to, in.PricePerHour})
			billed := to
			if billed.After(r.end) {
				billed = r.end
			}
			r.res.Cost += in.PricePerHour * billed.Sub(from).Hours()
		}
	}
	for i := range r.res.Series {
		s := &r.res.Series[i]
		t := r.start.Add(s.At)
		for _, sp := range spans {
			if !t.Before(sp.from) && t.Before(sp.to) {
				s.Price += sp.price
			}
		}
		r.res.PeakPrice = max(r.res.PeakPrice, s.Price)
		next := r.end
		if i+1 < len(r.res.Series) {
			next = r.start.Add(r.res.Series[i+1].At)
		}
		r.res.LowerBound += s.LowerBound * next.Sub(t).Hours()
	}
}

func (r *run) podStats() {
	ran, waiting := r.kc.Waits()
	var placed, pending []time.Duration
	for _, w := range ran {
		placed = append(placed, w.Wait)
	}
	for _, w := range waiting {
		pending = append(pending, w.Wait)
	}
	r.res.Pods = WaitStats(placed, pending)
	r.res.Pods.Lost = r.rec.lost
}

func sortInstances(in []awssim.Instance) {
	sort.Slice(in, func(i, j int) bool {
		if !in[i].LaunchTime.Equal(in[j].LaunchTime) {
			return in[i].LaunchTime.Before(in[j].LaunchTime)
		}
		return in[i].ID < in[j].ID
	})
}
