package disruption

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Pods that must keep a home are pinned where a simulation put them: pending pods
// that fit on existing or in-flight capacity, pods of nodes already being
// disrupted, and pods of nodes this decision disrupts. A pinned pod counts on its
// node like a bound pod; if that node is later a candidate, the pod moves with the
// node's own pods. Re-placing every such pod in every simulation would instead
// let the engine's heuristics shuffle them, and cost time that grows with every
// command.

// requests is the pod's effective requests, computed once per decision.
func (s *state) requests(p *corev1.Pod) corev1.ResourceList {
	if r, ok := s.reqs[p]; ok {
		return r
	}
	r := facts.PodRequests(p)
	s.reqs[p] = r
	return r
}

// room is what is left on a node, for the quick estimate in hopeless.
type room struct{ cpu, mem, pods int64 }

func (s *state) roomOf(p *corev1.Pod) room {
	r := s.requests(p)
	return room{cpu: r.Cpu().MilliValue(), mem: r.Memory().Value(), pods: 1}
}

func (r room) fits(in room) bool { return r.cpu <= in.cpu && r.mem <= in.mem && r.pods <= in.pods }

func (r room) minus(o room) room { return room{r.cpu - o.cpu, r.mem - o.mem, r.pods - o.pods} }

func (r room) plus(o room) room { return room{r.cpu + o.cpu, r.mem + o.mem, r.pods + o.pods} }

// initRoom records the free room of every node that takes pods.
func (s *state) initRoom() {
	for _, n := range s.nodes {
		if s.removed[n.name()] || n.state.Spec.Unschedulable {
			continue
		}
		a := n.state.Status.Allocatable
		r := room{cpu: a.Cpu().MilliValue(), mem: a.Memory().Value(), pods: a.Pods().Value()}
		for _, p := range n.pods {
			if !facts.IsTerminal(p) {
				r = r.minus(s.roomOf(p))
			}
		}
		s.free[n.name()] = r
		s.freeOrder = append(s.freeOrder, n.name())
	}
	sort.Strings(s.freeOrder)
}

// podsOf are the pods that must move when n goes: its own and those pinned to it.
func (s *state) podsOf(n *nodeInfo) []*corev1.Pod {
	extra := s.extra[n.name()]
	if len(extra) == 0 {
		return n.movable
	}
	out := make([]*corev1.Pod, 0, len(n.movable)+len(extra))
	return append(append(out, n.movable...), extra...)
}

// pin records where plan put pods: on existing nodes, on in-flight NodeClaims, or
// on the plan's new nodes, which become the in-flight claims named claims[i]
// (pods on new nodes are dropped when claims is shorter, as for the pending pods
// the provisioner will launch for).
func (s *state) pin(pods []*corev1.Pod, plan *packer.Plan, claims []*karpenter.NodeClaim) {
	byKey := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		byKey[facts.PodKey(p)] = p
	}
	for _, e := range plan.ExistingNodes {
		var on []*corev1.Pod
		for _, k := range e.Pods {
			if p := byKey[k]; p != nil {
				on = append(on, p)
			}
		}
		if len(on) == 0 {
			continue
		}
		if e.InFlight {
			s.pinInFlight(e.Name, on)
			continue
		}
		s.extra[e.Name] = append(s.extra[e.Name], on...)
		delete(s.compact, e.Name)
		if r, ok := s.free[e.Name]; ok {
			for _, p := range on {
				r = r.minus(s.roomOf(p))
			}
			s.free[e.Name] = r
		}
	}
	for i, nn := range plan.NewNodes {
		if i >= len(claims) {
			break
		}
		var on []*corev1.Pod
		for _, k := range nn.Pods {
			if p := byKey[k]; p != nil {
				on = append(on, p)
			}
		}
		s.reduce(claims[i], on)
	}
}

// pinInFlight replaces the in-flight claim name with a copy whose allocatable
// leaves out pods, so later simulations do not offer that room twice.
func (s *state) pinInFlight(name string, pods []*corev1.Pod) {
	for i, nc := range s.inflight {
		if nc.Name != name {
			continue
		}
		cp := *nc
		cp.Status.Allocatable = nc.Status.Allocatable.DeepCopy()
		if len(cp.Status.Allocatable) == 0 {
			// A claim known only by its instance type: the engine sizes it from the
			// catalog, so pin the pods by stating that size less the pods.
			if it, ok := s.snap.Catalog.Lookup(instanceTypeOf(nc)); ok {
				cp.Status.Allocatable = allocatableFor(s, it, nc)
			}
		}
		s.inflight[i] = &cp
		s.reduce(&cp, pods)
		return
	}
}

// reduce takes pods' requests off a claim's allocatable (never below zero).
func (s *state) reduce(nc *karpenter.NodeClaim, pods []*corev1.Pod) {
	alloc := nc.Status.Allocatable
	if alloc == nil {
		return
	}
	for _, p := range pods {
		facts.SubtractPod(alloc, s.requests(p))
	}
}

func instanceTypeOf(nc *karpenter.NodeClaim) string {
	if t := nc.Labels[corev1.LabelInstanceTypeStable]; t != "" {
		return t
	}
	for _, r := range nc.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}

// hopeless says, without a simulation, why a single node can be neither deleted
// nor replaced more cheaply, or returns "" when a simulation is worth running.
// Its pods are packed, largest first, into the room other nodes have left (by cpu,
// memory and pod count alone: taints and affinity only make the real answer
// worse); what does not fit would need a new node, and no instance type in the
// catalog that holds it is cheap enough. Simulations cost the engine a pass over
// every bound pod in the cluster, and most nodes of a packed cluster are hopeless.
func (s *state) hopeless(n *nodeInfo) string {
	pods := append([]*corev1.Pod(nil), s.podsOf(n)...)
	if len(pods) == 0 {
		return ""
	}
	sort.SliceStable(pods, func(i, j int) bool { return s.roomOf(pods[i]).cpu > s.roomOf(pods[j]).cpu })
	taken := map[string]room{}
	var left room
	for _, p := range pods {
		need := s.roomOf(p)
		best, bestLeft := "", int64(-1)
		for _, name := range s.freeOrder {
			if name == n.name() || s.removed[name] {
				continue
			}
			avail := s.free[name].minus(taken[name])
			if !need.fits(avail) {
				continue
			}
			if l := avail.cpu - need.cpu; best == "" || l < bestLeft {
				best, bestLeft = name, l
			}
		}
		if best == "" {
			left = left.plus(need)
			continue
		}
		taken[best] = taken[best].plus(need)
	}
	if left.pods == 0 {
		return ""
	}
	if !n.priceKnown {
		return "its pods do not fit on other nodes, and without a known price no replacement can be shown cheaper"
	}
	limit := n.price - max(s.opts.MinSavingsFraction*n.price, s.opts.MinSavingsPerHour)
	lb, ok := s.cheapestHolding(left)
	if ok && lb <= limit {
		return ""
	}
	if !ok {
		return "no cheaper replacement: its pods do not fit on other nodes' free room, and no instance type can hold the rest (estimate without simulation)"
	}
	return "no cheaper replacement: its pods do not fit on other nodes' free room, and the cheapest instance type that could hold the rest costs " +
		money(lb) + ", more than the " + money(max(limit, 0)) + " a replacement may cost (estimate without simulation)"
}

// cheapestHolding is the lowest price of any offering of any catalog type whose
// capacity holds r: a lower bound on what a replacement for r costs.
func (s *state) cheapestHolding(r room) (float64, bool) {
	if s.priceIndex == nil {
		for i := range s.snap.Catalog.InstanceTypes {
			it := &s.snap.Catalog.InstanceTypes[i]
			best, ok := 0.0, false
			for _, o := range it.Offerings {
				if !ok || o.PricePerHour < best {
					best, ok = o.PricePerHour, true
				}
			}
			if ok {
				s.priceIndex = append(s.priceIndex, priced{room{int64(it.VCPU) * 1000, it.MemoryMiB << 20, int64(it.MaxPods)}, best})
			}
		}
		sort.SliceStable(s.priceIndex, func(i, j int) bool { return s.priceIndex[i].price < s.priceIndex[j].price })
	}
	for _, p := range s.priceIndex {
		if p.max.pods == 0 {
			p.max.pods = r.pods
		}
		if r.fits(p.max) {
			return p.price, true
		}
	}
	return 0, false
}

type priced struct {
	max   room
	price float64
}

// allocatableFor sizes an in-flight claim the way the engine does: the catalog's
// allocatable with its pool's EC2NodeClass overhead.
func allocatableFor(s *state, it *catalog.InstanceType, nc *karpenter.NodeClaim) corev1.ResourceList {
	return catalog.Allocatable(it, catalog.OverheadFor(s.classFor(s.pools[nc.Labels[karpenter.NodePoolLabelKey]], nil)))
}

func money(v float64) string { return fmt.Sprintf("$%.4f/h", v) }
