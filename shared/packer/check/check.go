// Package check judges a packer.Plan against the snapshot it was made from, without
// using anything from the engine beyond its public input and output types. It
// recomputes pod requests, DaemonSet overhead, allocatable, labels, taints,
// topology counts, pool usage and prices from first principles (Kubernetes' and
// Karpenter's documented rules, k8s.io/component-helpers for node affinity and
// taints, shared/catalog for instance facts) and reports every rule the plan breaks.
//
// The checker is sound rather than complete: it reports only what no valid plan may
// do. Where the outcome of a rule depends on the order in which kube-scheduler would
// bind the pods (topology spread with selectors that match unconstrained pods, pod
// affinity seeded by the group's first pod), it checks the strongest condition that
// holds in every order.
//
// It deliberately keeps its own statement of the pod facts (requests, finished and
// DaemonSet pods) instead of importing shared/facts, which the engine and the rest
// of Joiner use: a checker that shared the engine's code would share its bugs and
// approve them. Where the two disagree, a test fails and one of them is wrong.
package check

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// Plan checks plan against snap and returns one error per broken rule (nil when the
// plan is valid). cat is the catalog prices and facts are checked against; when nil,
// snap.Catalog is used.
func Plan(snap *packer.Snapshot, plan *packer.Plan, cat *catalog.Catalog) []error {
	if cat == nil {
		cat = snap.Catalog
	}
	if plan == nil {
		return []error{fmt.Errorf("plan is nil")}
	}
	if cat == nil {
		return []error{fmt.Errorf("no catalog to check the plan against")}
	}
	c := newChecker(snap, plan, cat)
	c.placement()
	c.buildNodes()
	c.newNodeFacts()
	c.nodeFits()
	c.topology()
	c.poolLimits()
	c.prices()
	c.reservationCounts()
	c.unschedulable()
	return c.errs
}

// where a pod ended up.
type location struct {
	node   int // index into checker.nodes; -1 when unschedulable
	listed string
}

type checker struct {
	snap *packer.Snapshot
	plan *packer.Plan
	cat  *catalog.Catalog
	errs []error

	pods     map[string]*corev1.Pod // pending input pods by ns/name
	podOrder []string
	loc      map[string]*location

	nodes  []*nodeView
	byName map[string]int

	pools   map[string]*karpenter.NodePool
	classes map[string]*karpenter.EC2NodeClass
	ds      []*dsView

	hypo       []hypoNode
	hypoDone   bool
	launchMemo map[string][]string
	room       map[string]corev1.ResourceList

	reqCache    map[*corev1.Pod]corev1.ResourceList
	affCache    map[*corev1.Pod]nodeaffinity.RequiredNodeAffinity
	allocCache  map[string]corev1.ResourceList
	labelCache  map[string]map[string]string
	optionCache map[string]*optionFact
	// terms are the final state's required topology terms (see hardTerms).
	terms *[]hardTerm
	// accepts remembers whether a node selection accepts an option's labels,
	// counted the pods hard topology terms on some keys count (countedOn).
	accepts map[acceptKey]bool
	counted map[string]map[*corev1.Pod]string
}

// nodeView is one node of the final cluster state: an existing node, an in-flight
// NodeClaim or a new node of the plan.
type nodeView struct {
	name     string
	kind     string // "new", "existing", "in-flight"
	labels   map[string]string
	taints   []corev1.Taint
	alloc    corev1.ResourceList
	hostname string
	pool     string
	node     *corev1.Node // name and labels, for nodeaffinity matching
	running  []*corev1.Pod
	placed   []*corev1.Pod
	daemons  []*dsView
	cordoned bool
	newNode  *packer.NewNode
	typ      *catalog.InstanceType
	capacity corev1.ResourceList // for pool limits
	// sum and count cache the running and placed pods' requests (see podSum).
	sum   corev1.ResourceList
	count int64
}

// dsView is a DaemonSet as the pod it runs on every node it lands on.
type dsView struct {
	name string
	pod  *corev1.Pod
	req  corev1.ResourceList
}

func (c *checker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func newChecker(snap *packer.Snapshot, plan *packer.Plan, cat *catalog.Catalog) *checker {
	c := &checker{
		snap:    snap,
		plan:    plan,
		cat:     cat,
		pods:    map[string]*corev1.Pod{},
		loc:     map[string]*location{},
		byName:  map[string]int{},
		pools:   map[string]*karpenter.NodePool{},
		classes: map[string]*karpenter.EC2NodeClass{},

		reqCache:    map[*corev1.Pod]corev1.ResourceList{},
		affCache:    map[*corev1.Pod]nodeaffinity.RequiredNodeAffinity{},
		allocCache:  map[string]corev1.ResourceList{},
		labelCache:  map[string]map[string]string{},
		optionCache: map[string]*optionFact{},
	}
	for _, p := range snap.Pods {
		k := PodKey(p)
		if _, dup := c.pods[k]; dup {
			c.errorf("input: pod %s is listed twice", k)
			continue
		}
		c.pods[k] = p
		c.podOrder = append(c.podOrder, k)
	}
	for _, np := range snap.NodePools {
		c.pools[np.Name] = np
	}
	for _, nc := range snap.NodeClasses {
		c.classes[nc.Name] = nc
	}
	for _, d := range snap.DaemonSets {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
		pod.Spec.Tolerations = append(slices.Clone(pod.Spec.Tolerations), daemonSetTolerations(pod)...)
		c.ds = append(c.ds, &dsView{name: d.Name, pod: pod, req: PodRequests(pod)})
	}
	return c
}

// PodKey names a pod as the plan does: namespace/name, namespace "default" when empty.
func PodKey(p *corev1.Pod) string {
	ns := p.Namespace
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + p.Name
}

// daemonSetTolerations are the tolerations the DaemonSet controller adds to every
// DaemonSet pod, so DaemonSets land on nodes with these taints.
func daemonSetTolerations(p *corev1.Pod) []corev1.Toleration {
	t := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if p.Spec.HostNetwork {
		t = append(t, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return t
}

// placement: every input pod exactly once, nothing else.
func (c *checker) placement() {
	mark := func(pod, where string) bool {
		if _, ok := c.pods[pod]; !ok {
			c.errorf("%s: pod %s is not a pending input pod", where, pod)
			return false
		}
		if prev, dup := c.loc[pod]; dup {
			c.errorf("pod %s appears more than once: %s and %s", pod, prev.listed, where)
			return false
		}
		c.loc[pod] = &location{node: -1, listed: where}
		return true
	}
	for i := range c.plan.NewNodes {
		n := &c.plan.NewNodes[i]
		for _, p := range n.Pods {
			mark(p, "new node "+n.Name)
		}
	}
	for _, e := range c.plan.ExistingNodes {
		for _, p := range e.Pods {
			mark(p, "existing node "+e.Name)
		}
	}
	for _, u := range c.plan.Unschedulable {
		if mark(u.Pod, "unschedulable") && strings.TrimSpace(u.Reason) == "" {
			c.errorf("unschedulable pod %s has no reason", u.Pod)
		}
	}
	for _, k := range c.podOrder {
		if _, ok := c.loc[k]; !ok {
			c.errorf("pod %s is missing from the plan", k)
		}
	}
}

func (c *checker) addNode(v *nodeView) int {
	if _, dup := c.byName[v.name]; dup {
		c.errorf("node name %s is used twice", v.name)
	}
	if v.hostname == "" {
		v.hostname = v.name
	}
	v.labels = asNodeLabels(v.labels)
	v.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: v.name, Labels: v.labels}}
	c.nodes = append(c.nodes, v)
	idx := len(c.nodes) - 1
	c.byName[v.name] = idx
	return idx
}

// buildNodes assembles the final cluster state: existing nodes with their running
// pods, in-flight NodeClaims, and the plan's new nodes, each with the pods placed on it.
func (c *checker) buildNodes() {
	for _, ns := range c.snap.Nodes {
		n := ns.Node
		alloc := n.Status.Allocatable
		if len(alloc) == 0 {
			alloc = n.Status.Capacity
		}
		capacity := n.Status.Capacity
		if len(capacity) == 0 {
			capacity = alloc
		}
		v := &nodeView{name: n.Name, kind: "existing", labels: n.Labels, taints: n.Spec.Taints, alloc: alloc,
			hostname: n.Labels[corev1.LabelHostname], pool: n.Labels[karpenter.NodePoolLabelKey],
			// A node being deleted takes no new pods, cordoned or not.
			cordoned: n.Spec.Unschedulable || n.DeletionTimestamp != nil, capacity: capacity}
		for _, p := range ns.Pods {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			v.running = append(v.running, p)
		}
		c.addNode(v)
	}
	for _, nc := range c.snap.InFlight {
		c.addNode(c.inFlightView(nc))
	}
	for i := range c.plan.NewNodes {
		nn := &c.plan.NewNodes[i]
		v := &nodeView{name: nn.Name, kind: "new", labels: nn.Labels, taints: nn.Taints, pool: nn.NodePool, newNode: nn}
		if v.labels == nil {
			v.labels = map[string]string{}
		}
		if nn.Name == "" {
			c.errorf("new node #%d has no name", i)
		}
		idx := c.addNode(v)
		for _, p := range nn.Pods {
			if l := c.loc[p]; l != nil && l.listed == "new node "+nn.Name && c.pods[p] != nil {
				l.node = idx
				v.placed = append(v.placed, c.pods[p])
			}
		}
	}
	for _, e := range c.plan.ExistingNodes {
		idx, ok := c.byName[e.Name]
		if !ok {
			// An in-flight NodeClaim may be named by the node it registered as.
			for i, v := range c.nodes {
				if v.kind == "in-flight" && v.hostname == e.Name {
					idx, ok = i, true
					break
				}
			}
		}
		if !ok || c.nodes[idx].kind == "new" {
			c.errorf("existing node %s: no such node or in-flight NodeClaim in the snapshot", e.Name)
			continue
		}
		v := c.nodes[idx]
		if e.InFlight != (v.kind == "in-flight") {
			c.errorf("existing node %s: inFlight=%v but the snapshot has it as %s", e.Name, e.InFlight, v.kind)
		}
		if v.cordoned {
			c.errorf("existing node %s is cordoned (spec.unschedulable) but pods are placed on it", e.Name)
		}
		for _, p := range e.Pods {
			if l := c.loc[p]; l != nil && l.listed == "existing node "+e.Name && c.pods[p] != nil {
				l.node = idx
				v.placed = append(v.placed, c.pods[p])
			}
		}
	}
}

func (c *checker) inFlightView(nc *karpenter.NodeClaim) *nodeView {
	lbl := map[string]string{}
	for k, v := range nc.Labels {
		lbl[k] = v
	}
	for _, r := range nc.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			if _, ok := lbl[r.Key]; !ok {
				lbl[r.Key] = r.Values[0]
			}
		}
	}
	v := &nodeView{name: nc.Name, kind: "in-flight", labels: lbl, taints: nc.Spec.Taints,
		alloc: nc.Status.Allocatable, capacity: nc.Status.Capacity, hostname: nc.Status.NodeName,
		pool: lbl[karpenter.NodePoolLabelKey]}
	if it, ok := c.cat.Lookup(lbl[corev1.LabelInstanceTypeStable]); ok {
		v.typ = it
		// Once launched the node carries its type's well-known labels too.
		off := catalog.Offering{Zone: lbl[corev1.LabelTopologyZone], CapacityType: lbl[karpenter.CapacityTypeLabelKey]}
		for k, val := range offeringLabels(it, off) {
			if _, has := lbl[k]; !has {
				lbl[k] = val
			}
		}
		if len(v.alloc) == 0 {
			v.alloc = c.allocatable(it, c.classFor(v.pool))
		}
		if len(v.capacity) == 0 {
			v.capacity = typeCapacity(it)
		}
	}
	if v.typ == nil && len(v.alloc) == 0 {
		// Not launched yet and several types allowed: only what every allowed type
		// offers is certain.
		for _, r := range nc.Spec.Requirements {
			if r.Key != corev1.LabelInstanceTypeStable || r.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			for _, name := range r.Values {
				it, ok := c.cat.Lookup(name)
				if !ok {
					continue
				}
				a := c.allocatable(it, c.classFor(v.pool))
				if v.alloc == nil {
					v.alloc = corev1.ResourceList{}
					addTo(v.alloc, a)
					continue
				}
				for rn, q := range v.alloc {
					if aq, ok := a[rn]; !ok {
						delete(v.alloc, rn)
					} else if aq.Cmp(q) < 0 {
						v.alloc[rn] = aq.DeepCopy()
					}
				}
			}
		}
	}
	if len(v.capacity) == 0 {
		// Not launched: for limits it may become the largest type it allows.
		for _, r := range nc.Spec.Requirements {
			if r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn {
				for _, name := range r.Values {
					if it, ok := c.cat.Lookup(name); ok {
						v.capacity = maxList(v.capacity, typeCapacity(it))
					}
				}
			}
		}
	}
	if len(v.capacity) == 0 {
		v.capacity = v.alloc
	}
	return v
}

// maxList is the per-resource maximum of two lists.
func maxList(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	addTo(out, a)
	for rn, q := range b {
		if have, ok := out[rn]; !ok || q.Cmp(have) > 0 {
			out[rn] = q.DeepCopy()
		}
	}
	return out
}

func (c *checker) classFor(pool string) *karpenter.EC2NodeClass {
	np := c.pools[pool]
	if np == nil || np.Spec.Template.Spec.NodeClassRef == nil {
		return nil
	}
	return c.classes[np.Spec.Template.Spec.NodeClassRef.Name]
}

// expectedLabels is what Karpenter puts on a node of pool np launched as (it, off):
// the catalog's well-known labels, the zone's ID as its class's status.subnets
// name it, the template labels and the pool label.
// The map is shared (cached): callers must not modify it.
func (c *checker) expectedLabels(np *karpenter.NodePool, it *catalog.InstanceType, off catalog.Offering) map[string]string {
	key := np.Name + "|" + it.Name + "|" + off.Zone + "|" + off.CapacityType
	if m, ok := c.labelCache[key]; ok {
		return m
	}
	out := map[string]string{}
	defer func() { c.labelCache[key] = out }()
	for k, v := range offeringLabels(it, off) {
		out[k] = v
	}
	if class := c.classFor(np.Name); class != nil {
		for _, s := range class.Status.Subnets {
			if s.Zone == off.Zone && s.ZoneID != "" {
				out[karpenter.LabelTopologyZoneID] = s.ZoneID
			}
		}
	}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		out[k] = v
	}
	out[karpenter.NodePoolLabelKey] = np.Name
	return out
}

// labelHasSource reports whether a label the plan put on a new node, beyond the
// expected ones, is one Karpenter would set: a value a pool requirement allows for a
// key the pool constrains, the node-class label, or the hostname/nodeclaim label.
func labelHasSource(np *karpenter.NodePool, class, key, value string) bool {
	switch key {
	case karpenter.NodeClassLabelKey:
		return value == class
	case corev1.LabelHostname, karpenter.NodeClaimLabelKey:
		return true
	}
	found := false
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key != key {
			continue
		}
		found = true
		if !requirementHolds(r, map[string]string{key: value}) {
			return false
		}
	}
	return found
}

// wellKnownDomains are label domains whose keys the catalog models when it models
// them at all; a pool requirement on such a key the catalog does not label is
// skipped rather than reported.
func modelledElsewhere(key string) bool {
	switch key {
	case karpenter.LabelPlacementGroupID, karpenter.LabelPlacementGroupPartition, karpenter.LabelTopologyZoneID:
		// Modelled: a node Joiner launches is in no placement group, and carries a
		// zone ID exactly when its class's status names one.
		return false
	}
	for _, d := range []string{"karpenter.k8s.aws/", "node.kubernetes.io/", "kubernetes.io/", "topology.kubernetes.io/", "karpenter.sh/", "topology.k8s.aws/"} {
		if strings.HasPrefix(key, d) {
			return true
		}
	}
	return false
}

// poolAllows checks the pool's requirements against a node's labels.
func poolAllows(np *karpenter.NodePool, lbl map[string]string) string {
	lbl = asNodeLabels(lbl)
	for _, r := range np.Spec.Template.Spec.Requirements {
		if _, has := lbl[r.Key]; !has && modelledElsewhere(r.Key) &&
			r.Operator != corev1.NodeSelectorOpDoesNotExist && r.Operator != corev1.NodeSelectorOpNotIn {
			continue
		}
		if !requirementHolds(r, lbl) {
			return fmt.Sprintf("%s %s %v (node has %q)", r.Key, r.Operator, r.Values, lbl[r.Key])
		}
	}
	return ""
}

func findOffering(it *catalog.InstanceType, zone, capacityType string) (catalog.Offering, bool) {
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == capacityType {
			return o, true
		}
	}
	return catalog.Offering{}, false
}

// newNodeFacts checks what the plan says about each new node against the catalog and
// its pool: type, offering, price, labels, taints, allocatable and options.
func (c *checker) newNodeFacts() {
	for _, v := range c.nodes {
		if v.kind != "new" {
			continue
		}
		nn := v.newNode
		name := "new node " + nn.Name
		np := c.pools[nn.NodePool]
		if np == nil {
			c.errorf("%s: node pool %q is not in the snapshot", name, nn.NodePool)
			continue
		}
		class := ""
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
			class = ref.Name
		}
		if nn.NodeClass != class {
			c.errorf("%s: nodeClass %q, but pool %s uses %q", name, nn.NodeClass, np.Name, class)
		}
		it, ok := c.cat.Lookup(nn.InstanceType)
		if !ok {
			c.errorf("%s: instance type %q is not in the catalog", name, nn.InstanceType)
			continue
		}
		v.typ = it
		v.capacity = typeCapacity(it)
		v.alloc = c.allocatable(it, c.classes[class])
		off, ok, why := c.nodeOffering(nn, it)
		switch {
		case why != "":
			c.errorf("%s: %s", name, why)
		case !ok:
			c.errorf("%s: %s has no %s offering in %s", name, it.Name, nn.CapacityType, nn.Zone)
		case !off.Available:
			c.errorf("%s: the %s %s offering in %s is not available", name, it.Name, nn.CapacityType, nn.Zone)
		case nn.PricePerHour != off.PricePerHour:
			c.errorf("%s: pricePerHour %v, catalog says %v for %s %s in %s", name, nn.PricePerHour, off.PricePerHour, it.Name, nn.CapacityType, nn.Zone)
		}
		if !ok {
			off = catalog.Offering{Zone: nn.Zone, CapacityType: nn.CapacityType}
		}
		want := c.expectedLabels(np, it, off)
		if rl := c.reservationLabels(nn); rl != nil {
			want = maps.Clone(want)
			maps.Copy(want, rl)
		}
		for k, wv := range want {
			if got, has := nn.Labels[k]; !has {
				c.errorf("%s: label %s missing (want %q)", name, k, wv)
			} else if got != wv {
				c.errorf("%s: label %s=%q, want %q", name, k, got, wv)
			}
		}
		for k, gv := range nn.Labels {
			if _, expected := want[k]; !expected && !labelHasSource(np, class, k, gv) {
				c.errorf("%s: label %s=%q has no source (not well-known, not in the template, not allowed by a pool requirement)", name, k, gv)
			}
		}
		if why := poolAllows(np, nn.Labels); why != "" {
			c.errorf("%s: pool %s does not allow this node: %s", name, np.Name, why)
		}
		for _, t := range np.Spec.Template.Spec.Taints {
			if !slices.ContainsFunc(nn.Taints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Value == t.Value && x.Effect == t.Effect }) {
				c.errorf("%s: pool taint %s=%s:%s missing from the node's taints", name, t.Key, t.Value, t.Effect)
			}
		}
		for _, t := range nn.Taints {
			inPool := slices.ContainsFunc(np.Spec.Template.Spec.Taints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Value == t.Value && x.Effect == t.Effect })
			startup := slices.ContainsFunc(np.Spec.Template.Spec.StartupTaints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Value == t.Value && x.Effect == t.Effect })
			if !inPool && !startup {
				c.errorf("%s: taint %s=%s:%s is not a taint of pool %s", name, t.Key, t.Value, t.Effect, np.Name)
			}
		}
		// Pods are judged against the pool's taints (startup taints are removed once
		// the node is ready, and the scheduler never sees them).
		v.taints = np.Spec.Template.Spec.Taints
		c.compareAllocatable(name, nn.Allocatable, v.alloc)
		c.checkOptions(v, np, class)
	}
}

func (c *checker) compareAllocatable(name string, got map[string]string, want corev1.ResourceList) {
	for rn, wq := range want {
		gs, ok := got[string(rn)]
		if !ok {
			// The plan format's example lists cpu, memory and pods; node disk is
			// optional there.
			if !wq.IsZero() && rn != corev1.ResourceEphemeralStorage {
				c.errorf("%s: allocatable %s missing (catalog says %s)", name, rn, wq.String())
			}
			continue
		}
		gq, err := resource.ParseQuantity(gs)
		if err != nil {
			c.errorf("%s: allocatable %s=%q is not a quantity: %v", name, rn, gs, err)
			continue
		}
		if gq.Cmp(wq) != 0 {
			c.errorf("%s: allocatable %s=%s, catalog says %s", name, rn, gs, wq.String())
		}
	}
	for k, gs := range got {
		if _, ok := want[corev1.ResourceName(k)]; ok {
			continue
		}
		if gq, err := resource.ParseQuantity(gs); err != nil || !gq.IsZero() {
			c.errorf("%s: allocatable %s=%s is not something the instance type has", name, k, gs)
		}
	}
}

// checkOptions: Options[0] is the chosen type, no duplicates, each option is
// launchable in the node's zone and capacity type, allowed by the pool, fits every
// pod of the node (resources, DaemonSets, node affinity), and the list is sorted by
// that offering's price; minValues of the pool are met; so is every other
// offering the node's requirements let its launch fall back to (checkFallback).
func (c *checker) checkOptions(v *nodeView, np *karpenter.NodePool, class string) {
	nn := v.newNode
	name := "new node " + nn.Name
	if len(nn.Options) == 0 {
		c.errorf("%s: options is empty", name)
		return
	}
	if nn.Options[0] != nn.InstanceType {
		c.errorf("%s: options[0]=%s, but instanceType is %s", name, nn.Options[0], nn.InstanceType)
	}
	seen := map[string]bool{}
	prev := math.Inf(-1)
	prevName := ""
	var optionLabels []map[string]string
	// Labels the plan gives the node beyond its type's expected ones (few or none)
	// carry over to every option.
	extra := map[string]string{}
	if v.typ != nil {
		if off, ok, _ := c.nodeOffering(nn, v.typ); ok {
			base := c.expectedLabels(np, v.typ, off)
			for k, val := range nn.Labels {
				if _, ok := base[k]; !ok {
					extra[k] = val
				}
			}
		}
	}
	extraKeys := make([]string, 0, len(extra))
	for k := range extra {
		extraKeys = append(extraKeys, k)
	}
	sort.Strings(extraKeys)
	var extraSig strings.Builder
	for _, k := range extraKeys {
		extraSig.WriteString(k + "=" + extra[k] + ";")
	}
	// Pods with the same node selection are judged once per option.
	var distinct []podSel
	sigs := map[string]bool{}
	for _, p := range v.placed {
		sig := eligibilitySig(p, true, false)
		if !sigs[sig] {
			sigs[sig] = true
			distinct = append(distinct, podSel{sig, p})
		}
	}
	for _, o := range nn.Options {
		if seen[o] {
			c.errorf("%s: option %s listed twice", name, o)
			continue
		}
		seen[o] = true
		it, ok := c.cat.Lookup(o)
		if !ok {
			c.errorf("%s: option %s is not in the catalog", name, o)
			continue
		}
		off, ok, _ := c.nodeOffering(nn, it)
		if !ok || !off.Available {
			c.errorf("%s: option %s has no available %s offering in %s", name, o, nn.CapacityType, nn.Zone)
			continue
		}
		if off.PricePerHour < prev {
			c.errorf("%s: options not sorted cheapest first: %s (%v) after %s (%v)", name, o, off.PricePerHour, prevName, prev)
		}
		prev, prevName = off.PricePerHour, o
		optionLabels = append(optionLabels, c.optionFacts(np, it, off, extraSig.String(), extra).labels)
		c.judgeOption(v, np, class, it, off, extra, extraSig.String(), distinct, nil)
	}
	c.checkFallback(v, np, class, extra, extraSig.String(), distinct)
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.MinValues == nil || offeringDecided(r.Key) {
			continue
		}
		vals := map[string]bool{}
		for _, lbl := range optionLabels {
			if val, ok := lbl[r.Key]; ok {
				vals[val] = true
			}
		}
		if len(vals) < *r.MinValues {
			c.errorf("%s: pool %s wants minValues %d for %s, options span %d", name, np.Name, *r.MinValues, r.Key, len(vals))
		}
	}
}

// offeringDecided reports keys an offering, not the instance type, decides.
// Joiner launches a node in one zone with one capacity type, so minValues on them
// is a documented difference it does not enforce; the checker does not ask it.
func offeringDecided(key string) bool {
	return key == corev1.LabelTopologyZone || key == karpenter.CapacityTypeLabelKey || key == corev1.LabelTopologyRegion ||
		key == karpenter.LabelTopologyZoneID
}

// optionFact is what an option of a new node looks like, shared by every node of
// the same pool, offering and extra labels: its labels (as a node), whether the
// pool allows it and which DaemonSets land on it.
type optionFact struct {
	labels  map[string]string
	node    *corev1.Node
	poolWhy string
	daemons []*dsView
}

func (c *checker) optionFacts(np *karpenter.NodePool, it *catalog.InstanceType, off catalog.Offering, extraSig string, extra map[string]string) *optionFact {
	key := extraSig + "|" + np.Name + "|" + it.Name + "|" + off.Zone + "|" + off.CapacityType
	if f, ok := c.optionCache[key]; ok {
		return f
	}
	lbl := c.expectedLabels(np, it, off)
	if len(extra) > 0 {
		merged := make(map[string]string, len(lbl)+len(extra))
		for k, val := range lbl {
			merged[k] = val
		}
		for k, val := range extra {
			merged[k] = val
		}
		lbl = merged
	}
	// The name is left empty: a new node's name is not known to selectors.
	lbl = asNodeLabels(lbl)
	f := &optionFact{labels: lbl, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: lbl}}, poolWhy: poolAllows(np, lbl)}
	probe := &nodeView{labels: lbl, taints: np.Spec.Template.Spec.Taints, node: f.node}
	c.matchDaemonSets(probe)
	f.daemons = probe.daemons
	c.optionCache[key] = f
	return f
}

func (c *checker) matchDaemonSets(v *nodeView) {
	v.daemons = v.daemons[:0]
	for _, d := range c.ds {
		if !c.podAccepts(d.pod, v) {
			continue
		}
		// A DaemonSet pod already listed on the node is counted as a running pod.
		if slices.ContainsFunc(v.running, func(p *corev1.Pod) bool { return ownedBy(p, d) }) {
			continue
		}
		v.daemons = append(v.daemons, d)
	}
}

func ownedBy(p *corev1.Pod, d *dsView) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Name == d.name && p.Namespace == d.pod.Namespace {
			return true
		}
	}
	return false
}

// podAccepts: the pod's nodeSelector/required node affinity matches the node and it
// tolerates every NoSchedule and NoExecute taint.
func (c *checker) podAccepts(p *corev1.Pod, v *nodeView) bool {
	if ok, _ := c.affinityOf(p).Match(v.node); !ok {
		return false
	}
	_, bad := untolerated(v.taints, p.Spec.Tolerations)
	return !bad
}

// podSum is the requests and count of the running and placed pods of v, computed
// once per node (option probes share their node's).
func (c *checker) podSum(v *nodeView) (corev1.ResourceList, int64) {
	if v.sum != nil {
		return v.sum, v.count
	}
	sum := corev1.ResourceList{}
	for _, p := range v.running {
		addTo(sum, c.requests(p))
	}
	for _, p := range v.placed {
		addTo(sum, c.requests(p))
	}
	v.sum, v.count = sum, int64(len(v.running)+len(v.placed))
	return v.sum, v.count
}

// requests caches PodRequests per pod.
func (c *checker) requests(p *corev1.Pod) corev1.ResourceList {
	if r, ok := c.reqCache[p]; ok {
		return r
	}
	r := PodRequests(p)
	c.reqCache[p] = r
	return r
}

// fitProblem adds the DaemonSet pods to v's pods and compares with its
// allocatable; "" when everything fits.
func (c *checker) fitProblem(v *nodeView) string {
	base, count := c.podSum(v)
	sum := corev1.ResourceList{}
	addTo(sum, base)
	for _, d := range v.daemons {
		addTo(sum, d.req)
		count++
	}
	var problems []string
	names := make([]string, 0, len(sum))
	for rn := range sum {
		names = append(names, string(rn))
	}
	sort.Strings(names)
	for _, n := range names {
		rn := corev1.ResourceName(n)
		q := sum[rn]
		if q.Sign() <= 0 {
			continue
		}
		a, has := v.alloc[rn]
		if !has && (rn == corev1.ResourceEphemeralStorage || rn == corev1.ResourcePods) {
			// Node disk is not always modelled; pod count is checked below.
			continue
		}
		if exceeds(rn, q, a) {
			problems = append(problems, fmt.Sprintf("%s %s > allocatable %s", rn, q.String(), a.String()))
		}
	}
	if a, has := v.alloc[corev1.ResourcePods]; has && count > a.Value() {
		problems = append(problems, fmt.Sprintf("%d pods > allocatable %d", count, a.Value()))
	}
	if len(problems) == 0 {
		return ""
	}
	detail := fmt.Sprintf(" (%d running, %d placed, %d DaemonSet pods)", len(v.running), len(v.placed), len(v.daemons))
	return strings.Join(problems, "; ") + detail
}

// affinityOf caches the parsed nodeSelector and required node affinity of a pod.
func (c *checker) affinityOf(p *corev1.Pod) nodeaffinity.RequiredNodeAffinity {
	if a, ok := c.affCache[p]; ok {
		return a
	}
	a := nodeaffinity.GetRequiredNodeAffinity(p)
	c.affCache[p] = a
	return a
}

func (c *checker) allocatable(it *catalog.InstanceType, class *karpenter.EC2NodeClass) corev1.ResourceList {
	key := it.Name + "|"
	if class != nil {
		key += class.Name
	}
	if a, ok := c.allocCache[key]; ok {
		return a
	}
	a := typeAllocatable(it, class)
	c.allocCache[key] = a
	return a
}

// nodeFits checks, per node: resources incl. DaemonSet overhead, node affinity,
// taints and host ports of the placed pods.
func (c *checker) nodeFits() {
	for _, v := range c.nodes {
		if v.kind == "new" && v.typ == nil {
			continue // already reported: unknown pool or type
		}
		c.matchDaemonSets(v)
		if len(v.placed) == 0 {
			if v.kind == "new" {
				c.errorf("new node %s has no pods", v.name)
			}
			continue
		}
		if why := c.fitProblem(v); why != "" {
			c.errorf("%s node %s: pods do not fit: %s", v.kind, v.name, why)
		}
		for _, p := range v.placed {
			ok, err := c.affinityOf(p).Match(v.node)
			if err != nil {
				c.errorf("pod %s: bad node affinity: %v", PodKey(p), err)
			} else if !ok {
				c.errorf("pod %s on %s node %s: nodeSelector/required node affinity does not match the node's labels", PodKey(p), v.kind, v.name)
			}
			if why := c.volumeCheck(p, v.node); why != "" {
				c.errorf("pod %s on %s node %s: %s", PodKey(p), v.kind, v.name, why)
			}
			if t, bad := untolerated(v.taints, p.Spec.Tolerations); bad {
				c.errorf("pod %s on %s node %s: taint %s=%s:%s not tolerated", PodKey(p), v.kind, v.name, t.Key, t.Value, t.Effect)
			}
		}
		c.hostPorts(v)
	}
}

type hostPort struct {
	ip, proto string
	port      int32
}

func podHostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for i := range cs {
			if sidecarsOnly && (cs[i].RestartPolicy == nil || *cs[i].RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, cp := range cs[i].Ports {
				if cp.HostPort <= 0 {
					continue
				}
				proto := string(cp.Protocol)
				if proto == "" {
					proto = string(corev1.ProtocolTCP)
				}
				ip := cp.HostIP
				if ip == "" {
					ip = "0.0.0.0"
				}
				out = append(out, hostPort{ip: ip, proto: proto, port: cp.HostPort})
			}
		}
	}
	add(p.Spec.Containers, false)
	add(p.Spec.InitContainers, true)
	return out
}

// daemonPortClash names a host port a DaemonSet landing on a node and a pod
// placed there both bind; "" when there is none.
func daemonPortClash(daemons []*dsView, placed []*corev1.Pod) string {
	for _, d := range daemons {
		for _, a := range podHostPorts(d.pod) {
			for _, p := range placed {
				for _, b := range podHostPorts(p) {
					if a.port == b.port && a.proto == b.proto && (a.ip == b.ip || a.ip == "0.0.0.0" || b.ip == "0.0.0.0") {
						return fmt.Sprintf("host port %s/%d is bound by DaemonSet %s and pod %s", a.proto, a.port, d.name, PodKey(p))
					}
				}
			}
		}
	}
	return ""
}

func (c *checker) hostPorts(v *nodeView) {
	type user struct {
		hp     hostPort
		who    string
		placed bool
	}
	var users []user
	for _, p := range v.running {
		for _, hp := range podHostPorts(p) {
			users = append(users, user{hp, PodKey(p), false})
		}
	}
	for _, d := range v.daemons {
		for _, hp := range podHostPorts(d.pod) {
			users = append(users, user{hp, "DaemonSet " + d.name, false})
		}
	}
	for _, p := range v.placed {
		for _, hp := range podHostPorts(p) {
			users = append(users, user{hp, PodKey(p), true})
		}
	}
	for i := range users {
		for j := i + 1; j < len(users); j++ {
			a, b := users[i], users[j]
			if !a.placed && !b.placed {
				continue
			}
			if a.hp.port == b.hp.port && a.hp.proto == b.hp.proto &&
				(a.hp.ip == b.hp.ip || a.hp.ip == "0.0.0.0" || b.hp.ip == "0.0.0.0") {
				c.errorf("%s node %s: host port %s/%d used by both %s and %s", v.kind, v.name, a.hp.proto, a.hp.port, a.who, b.who)
			}
		}
	}
}

// poolLimits: for every pool with limits, what it already runs (existing nodes
// labelled with the pool, in-flight NodeClaims) plus the plan's new nodes stays
// within each limit. Usage is counted in instance capacity, as Karpenter counts it.
func (c *checker) poolLimits() {
	for _, np := range c.snap.NodePools {
		if len(np.Spec.Limits) == 0 {
			continue
		}
		used, planned := c.poolUsage(np.Name)
		total := corev1.ResourceList{}
		addTo(total, used)
		addTo(total, planned)
		// A launch may fall back to any option of a node: the limits must hold
		// whichever each node gets (CreateFleet picks among them).
		worst := corev1.ResourceList{}
		addTo(worst, used)
		for _, v := range c.nodes {
			if v.kind != "new" || v.pool != np.Name {
				continue
			}
			var largest corev1.ResourceList
			for _, o := range v.newNode.Options {
				if it, ok := c.cat.Lookup(o); ok {
					largest = maxList(largest, typeCapacity(it))
				}
			}
			addTo(worst, largest)
		}
		for rn, lim := range np.Spec.Limits {
			got := total[rn]
			// A pool already over its limit (lowered after launch) is only the
			// plan's fault if the plan adds to it.
			if add := planned[rn]; add.Sign() > 0 && exceeds(rn, got, lim) {
				u := used[rn]
				c.errorf("pool %s: %s limit %s exceeded: already running %s, plan adds %s", np.Name, rn, lim.String(), u.String(), qstr(planned[rn]))
			} else if w := worst[rn]; add.Sign() > 0 && rn != karpenter.ResourceLimitsNodes && amount(rn, w) > amount(rn, lim) {
				c.errorf("pool %s: %s limit %s can be broken: launched on their largest options, its new nodes and what it runs reach %s", np.Name, rn, lim.String(), w.String())
			}
		}
	}
}

func qstr(q resource.Quantity) string { return q.String() }

// poolUsage returns what pool already runs and what the plan adds, with "nodes" as a resource.
func (c *checker) poolUsage(pool string) (used, planned corev1.ResourceList) {
	used, planned = corev1.ResourceList{}, corev1.ResourceList{}
	for _, v := range c.nodes {
		if v.pool != pool {
			continue
		}
		dst := used
		if v.kind == "new" {
			dst = planned
		}
		addTo(dst, v.capacity)
		addTo(dst, corev1.ResourceList{karpenter.ResourceLimitsNodes: *resource.NewQuantity(1, resource.DecimalSI)})
	}
	return used, planned
}

// prices: totalPricePerHour is the sum of the new nodes' prices; the region matches.
func (c *checker) prices() {
	sum := 0.0
	for _, n := range c.plan.NewNodes {
		sum += n.PricePerHour
	}
	if math.Abs(sum-c.plan.TotalPricePerHour) > 1e-6*math.Max(1, sum) {
		c.errorf("totalPricePerHour %v, but the new nodes' prices add up to %v", c.plan.TotalPricePerHour, sum)
	}
	if c.cat != nil && c.plan.Region != "" && c.plan.Region != c.cat.Region {
		c.errorf("plan region %q, catalog region %q", c.plan.Region, c.cat.Region)
	}
}

// selectorFor converts a label selector; a nil selector matches nothing, as in the
// scheduler's affinity and spread rules.
func selectorFor(ls *metav1.LabelSelector) labels.Selector {
	if ls == nil {
		return labels.Nothing()
	}
	s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Nothing()
	}
	return s
}
