package packer

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func (s *solver) newNodeBase(name string) *node {
	n := &node{id: len(s.nodes), name: name, z: -1, ldom: s.newLdom()}
	if k := s.topo.hostSlots; k > 0 {
		c := make([]int32, 2*k) // one allocation for both
		n.hc, n.ho = c[:k:k], c[k:]
	}
	for _, g := range s.topo.groups {
		if g.lv.kind == levelHost && g.kind == kindSpread {
			g.histMove(-1, 0)
		}
	}
	s.nodes = append(s.nodes, n)
	return n
}

func (s *solver) poolByName(name string) *poolInfo {
	for _, p := range s.pools {
		if p.name == name {
			return p
		}
	}
	return nil
}

// addExisting turns existing nodes and in-flight NodeClaims into placement targets.
func (s *solver) addExisting() {
	for _, ns := range s.snap.Nodes {
		node := ns.Node
		n := s.newNodeBase(node.Name)
		n.existing = true
		n.labels = node.Labels
		n.taints = node.Spec.Taints
		if z, ok := s.zoneIdx[node.Labels[corev1.LabelTopologyZone]]; ok {
			n.z = z
		}
		n.avail = s.dims.vec(node.Status.Allocatable)
		listed := map[string]bool{}
		for _, pod := range ns.Pods {
			if facts.IsTerminal(pod) {
				continue
			}
			n.used = n.used.add(s.dims.vec(facts.PodRequests(pod)))
			n.used[dimPods]++
			if ref := facts.DaemonSetRef(pod); ref != nil {
				listed[facts.PodNamespace(pod)+"/"+ref.Name] = true
			}
			for _, c := range pod.Spec.Containers {
				for _, port := range c.Ports {
					if hp, ok := facts.ContainerHostPort(port); ok {
						s.reservePorts(n, hp)
					}
				}
			}
		}
		for _, d := range s.daemonsets {
			if !listed[d.owner] && s.dsLands(d, n.labels, n.taints) {
				n.used = n.used.add(d.req)
				s.reservePorts(n, d.ports...)
			}
		}
		if p := s.poolByName(node.Labels[karpenter.NodePoolLabelKey]); p != nil {
			n.pool = p
			p.used = p.used.add(s.dims.vec(node.Status.Capacity))
			p.nodes++
		}
		if node.Spec.Unschedulable {
			continue // it still counts for topology, but takes no pods
		}
		s.index(n, [2]int{-1, n.z})
	}
	claims := append([]*karpenter.NodeClaim(nil), s.snap.InFlight...)
	sort.SliceStable(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	for _, c := range claims {
		s.addInFlight(c)
	}
}

// claimCapacity is a NodeClaim's reported capacity, else the largest capacity
// of the instance types it allows.
func (s *solver) claimCapacity(c *karpenter.NodeClaim) vec {
	if len(c.Status.Capacity) > 0 {
		return s.dims.vec(c.Status.Capacity)
	}
	var largest vec
	for _, r := range c.Spec.Requirements {
		if r.Key != corev1.LabelInstanceTypeStable || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		for _, name := range r.Values {
			if it, ok := s.snap.Catalog.Lookup(name); ok {
				largest = largest.maxWith(s.dims.vec(catalog.Capacity(it)))
			}
		}
	}
	return largest
}

// reservePorts marks host ports as taken on n.
func (s *solver) reservePorts(n *node, ports ...facts.HostPort) {
	for _, pk := range ports {
		if n.ports == nil {
			n.ports = map[facts.HostPort]bool{}
		}
		n.ports[pk] = true
	}
}

// addInFlight adds a launched (or about to launch) NodeClaim whose node is not
// ready yet: its capacity is already paid for.
func (s *solver) addInFlight(c *karpenter.NodeClaim) {
	labels := map[string]string{}
	for k, v := range c.Labels {
		labels[k] = v
	}
	// A single-valued requirement is a label the node will carry; a launched
	// NodeClaim's own labels say what it got, and win (its requirements may
	// allow more, e.g. on-demand beside spot, and one written before may name
	// the capacity type it fell back from).
	for _, r := range c.Spec.Requirements {
		if _, set := labels[r.Key]; !set && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	pool := s.poolByName(labels[karpenter.NodePoolLabelKey])
	if pool != nil {
		for k, v := range pool.labels {
			if _, ok := labels[k]; !ok {
				labels[k] = v
			}
		}
	}
	it, hasType := s.snap.Catalog.Lookup(labels[corev1.LabelInstanceTypeStable])
	if hasType {
		for k, v := range catalog.InstanceLabels(it) {
			if _, ok := labels[k]; !ok {
				labels[k] = v
			}
		}
	}
	var alloc, capv vec
	switch {
	case len(c.Status.Allocatable) > 0:
		alloc = s.dims.vec(c.Status.Allocatable)
		capv = s.dims.vec(c.Status.Capacity)
	case hasType:
		var nc *karpenter.EC2NodeClass
		if pool != nil {
			nc = pool.nc
		}
		over := catalog.OverheadFor(nc)
		alloc = s.dims.vec(catalog.Allocatable(it, over))
		capv = s.dims.vec(catalog.CapacityFor(it, over))
	default:
		// Nothing says how big it is: it cannot take pods, but it is part of its
		// pool's limits, at its reported capacity or the largest type it may be.
		if pool != nil {
			pool.used = pool.used.add(s.claimCapacity(c))
			pool.nodes++
		}
		return
	}
	n := s.newNodeBase(c.Name)
	n.existing, n.inflight = true, true
	n.labels = labels
	n.taints = c.Spec.Taints
	n.avail = alloc
	if z, ok := s.zoneIdx[labels[corev1.LabelTopologyZone]]; ok {
		n.z = z
	}
	for _, d := range s.daemonsets {
		if s.dsLands(d, n.labels, n.taints) {
			n.used = n.used.add(d.req)
			s.reservePorts(n, d.ports...)
		}
	}
	if pool != nil {
		n.pool = pool
		pool.used = pool.used.add(capv)
		pool.nodes++
	}
	s.index(n, [2]int{-1, n.z})
}

// seedCounts counts running pods into the topology groups.
func (s *solver) seedCounts() {
	for i, ns := range s.snap.Nodes {
		n := s.nodes[i]
		for _, pod := range ns.Pods {
			if facts.IsTerminal(pod) {
				continue
			}
			s.count(n, s.topo.matching(facts.PodNamespace(pod), pod.Labels))
			a := pod.Spec.Affinity
			if a == nil || a.PodAntiAffinity == nil {
				continue
			}
			for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				g, err := s.topo.group(affinityTerm(kindAntiAffinity, pod, facts.PodNamespace(pod), &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]))
				if err == nil {
					s.own(n, g)
				}
			}
		}
	}
}

func (s *solver) index(n *node, key [2]int) {
	t := s.trees[key]
	if t == nil {
		t = &slackIndex{}
		s.trees[key] = t
		// Walk trees in a fixed order: the search budget is shared between them, so
		// map order would make plans differ from run to run.
		s.treeKeys = append(s.treeKeys, key)
		sort.Slice(s.treeKeys, func(i, j int) bool {
			a, b := s.treeKeys[i], s.treeKeys[j]
			if a[0] != b[0] {
				return a[0] < b[0]
			}
			return a[1] < b[1]
		})
	}
	n.tree = t
	sl := n.slack()
	n.ref = slackRef{mem: sl[dimMemory], cpu: sl[dimCPU], id: n.id, n: n}
	t.insert(n.ref)
}

func (s *solver) reindex(n *node) {
	if n.tree == nil {
		return
	}
	n.tree.remove(n.ref)
	sl := n.slack()
	n.ref = slackRef{mem: sl[dimMemory], cpu: sl[dimCPU], id: n.id, n: n}
	n.tree.insert(n.ref)
}
