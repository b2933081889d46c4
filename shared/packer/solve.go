package packer

import (
	"fmt"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/quantity"
)

// Options tunes a solve.
type Options struct {
	// Explain fills NewNode.Explain and makes unschedulable reasons name every pool.
	Explain bool
	// MaxOptions caps the instance-type options kept per new node; 60 is
	// CreateFleet's override limit and the default.
	MaxOptions int
	// Prepared is the snapshot catalog's Prepare result, for callers that solve
	// the same catalog repeatedly. It is used only when it was prepared from the
	// snapshot's catalog (same pointer, same types and offerings); otherwise, and
	// when nil, Solve prepares the catalog itself. Plans are the same either way.
	Prepared *Prepared
}

// Search widths: how many nodes a pod looks at in the slack index before it
// grows a node or opens a new one. They bound the per-pod cost on large plans.
const (
	fitWindow = 64
	// priceEpsilon absorbs float rounding when comparing price differences.
	priceEpsilon = 1e-9
	// growTolerance prefers growing a planned node over opening a new one that is
	// at most this much cheaper: catalog prices are rounded, and every extra node
	// costs DaemonSets and reserved memory the prices do not show.
	growTolerance = 0.005
	growWindow    = 8
)

// podInfo is a pending pod prepared for placement.
type podInfo struct {
	pod      *corev1.Pod
	key      string
	ns       string
	req      vec
	own      []ownTerm
	matched  []*topoGroup
	ports    []facts.HostPort
	prefs    bool
	tier     int
	size     float64
	err      string
	placedOn *node
	cls      *podClass   // the class it was placed under (planned and existing nodes)
	classes  []slotClass // per relaxation level, computed on first use
	// prefTerms are the preferred node-affinity terms, heaviest first.
	prefTerms []corev1.NodeSelectorTerm
	// rej records why the pod's last attempt failed (pods retried only).
	rej *rejections
	// realReq is p's own request while req holds its group's (see tryPlace).
	realReq *vec
	// orig is the pod as given when its volumes' topology was added to pod's
	// required node affinity (volumes.go), origCls its class: spread policies
	// look at the pod's own node selection only, as kube-scheduler does.
	orig    *corev1.Pod
	origCls *podClass
	// levels are the label levels of the groups it owns or matches.
	levels []*level
}

// node is an existing node, an in-flight NodeClaim, or a node the plan opens.
type node struct {
	id       int
	name     string
	existing bool
	inflight bool
	pool     *poolInfo
	z        int
	// planned nodes: the candidates still compatible with every pod on it, and the
	// cheapest of them that holds the pods.
	compat []uint64
	minIdx int
	extra  map[string]string
	// existing nodes
	labels     map[string]string
	taints     []corev1.Taint
	avail      vec
	classCache []int8
	used       vec
	pods       []*podInfo
	// The node's counters per topology group (topoGroup.slot): matching pods
	// (hc) and owners (ho) of hostname groups, whose domain the node is, and
	// matching pods of the other groups (gc, nil until one lands).
	hc, ho []int32
	gc     []int32
	// ldom is the node's domain per label level (see levels.go).
	ldom  []int32
	ports map[facts.HostPort]bool
	ref   slackRef
	tree  *slackIndex
	// improvedFrom says what the improvement phase replaced ("" when it did not
	// touch the node); see improve.go.
	improvedFrom string
	// improvedHow names the packing that chose the node (greedy or LP).
	improvedHow string
}

// slackRef orders nodes by free memory, then cpu: a best-fit index.
type slackRef struct {
	mem, cpu int64
	id       int
	n        *node
}

func slackLess(a, b slackRef) bool {
	if a.mem != b.mem {
		return a.mem < b.mem
	}
	if a.cpu != b.cpu {
		return a.cpu < b.cpu
	}
	return a.id < b.id
}

func (n *node) capacity() vec {
	if n.pool != nil && !n.existing {
		return n.pool.cands[n.z][n.minIdx].avail
	}
	return n.avail
}

func (n *node) slack() vec { return n.capacity().sub(n.used) }

type solver struct {
	// recMemo keeps the recording round's zone walks (see walkMemo); nil
	// outside that round.
	recMemo    map[recKey]poolRejection
	snap       *Snapshot
	opts       Options
	dims       *dimensions
	zones      []string
	zoneIdx    map[string]int
	pools      []*poolInfo
	daemonsets []*dsInfo
	topo       *topology
	classes    map[string]*podClass
	classList  []*podClass
	pods       []*podInfo
	nodes      []*node
	trees      map[[2]int]*slackIndex
	prep       *Prepared
	treeKeys   [][2]int // sorted: existing nodes (-1) first, then pools by index; zones in order
	probe      *corev1.Node
	newCount   map[string]int // new nodes written per pool, for their names
	// domainSets caches domainSet.
	domainSets map[domainKey]bitset
	// volumeWhy holds why their volumes leave pods unschedulable, origPods the
	// pods as given whose volumes restrict where they run (by pod key).
	volumeWhy map[string]string
	origPods  map[string]*corev1.Pod
	// members caches groupMembers.
	members map[*topoGroup][]*podInfo
	// exhaustGen counts the pools found exhausted so far: domainSet's cache key,
	// since an exhausted pool adds no domain.
	exhaustGen int
	// preferNoSchedule is set when some pool has a PreferNoSchedule taint: then
	// every pod first tries to avoid it.
	preferNoSchedule bool
	zoneNew          []int
	// demand is the pending pods' mean request per dimension (see pricePerUnit).
	demand [maxDims]float64
	// valueOrder caches byValue.
	valueOrder map[valueKey][]valued
	// optionBlock backs the new nodes' option lists (see optionSpace);
	// optionTypes is scratch for one node's options as type indexes, classBuf
	// for its pods' classes (see launchSets).
	optionBlock []string
	optionTypes []int32
	classBuf    []*podClass
	// zonalDaemonSets (capacityTypeDaemonSets) is set when a DaemonSet's node
	// selection names a zone key (the capacity type): what it leaves of a type
	// may then depend on the zone (capacity type).
	zonalDaemonSets, capacityTypeDaemonSets bool
	// checkedContainers is the container list last found in range (quantityProblem).
	checkedContainers *corev1.Container
	checkedLen        int
	// maskBuf is scratch space for minValuesWith.
	maskBuf []uint64
	// resv are the snapshot's capacity reservations by ID, resvOrder the same
	// by ID order, typeIndex the catalog's types by name (see reserved.go).
	resv      map[string]*reservation
	resvOrder []*reservation
	typeIndex map[string]int
}

// Solve plans the snapshot. It never fails as a whole: a pod that cannot be
// placed is listed as unschedulable with the reason.
func Solve(snap *Snapshot, opts Options) *Plan {
	if opts.MaxOptions <= 0 {
		opts.MaxOptions = 60
	}
	s := &solver{snap: snap, opts: opts, dims: newDimensions(), zoneIdx: map[string]int{},
		classes: map[string]*podClass{}, trees: map[[2]int]*slackIndex{},
		probe: &corev1.Node{}, newCount: map[string]int{}}
	plan := &Plan{NewNodes: []NewNode{}, ExistingNodes: []ExistingNode{}, Unschedulable: []Unschedulable{}}
	if snap.Catalog == nil {
		for _, p := range snap.Pods {
			plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: facts.PodKey(p), Reason: "no instance catalog"})
		}
		return plan
	}
	plan.Region = snap.Catalog.Region
	if snap.Volumes != nil {
		pods, why := withVolumeTopology(snap.Volumes, snap.Pods)
		s.volumeWhy = why
		if len(pods) > 0 && &pods[0] != &snap.Pods[0] {
			s.origPods = map[string]*corev1.Pod{}
			for i, p := range pods {
				if p != snap.Pods[i] {
					s.origPods[facts.PodKey(p)] = snap.Pods[i]
				}
			}
			cp := *snap
			cp.Pods = pods
			snap, s.snap = &cp, &cp
		}
	}
	s.prep = opts.Prepared
	if !s.prep.Fits(snap.Catalog) {
		s.prep = Prepare(snap.Catalog)
	}
	dimErr := s.registerDims()
	s.buildZones()
	s.buildDaemonSets()
	s.topo = newTopology(s.zones)
	s.zoneNew = make([]int, len(s.zones))
	// Pools (candidates per zone) and pods (requests, topology terms) do not read
	// each other: build them on two cores. Everything after is sequential.
	pools := make(chan struct{})
	go func() {
		defer close(pools)
		s.buildPools()
	}()
	s.preparePods(dimErr)
	<-pools
	s.addExisting()
	for _, p := range s.pools {
		s.noteUsed(p) // existing and in-flight capacity may have used its limits up
	}
	s.finishLevels()
	s.seedCounts()
	order := make([]*podInfo, 0, len(s.pods))
	for _, p := range s.pods {
		if p.err == "" {
			order = append(order, p)
			for d := range p.req {
				s.demand[d] += float64(p.req[d])
			}
		}
	}
	for d := range s.demand {
		s.demand[d] /= float64(max(1, len(order)))
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.tier != b.tier {
			return a.tier < b.tier
		}
		if a.size != b.size {
			return a.size > b.size
		}
		return a.key < b.key
	})
	var failed []*podInfo
	for _, p := range order {
		if !s.place(p, nil) {
			failed = append(failed, p)
		}
	}
	// A pod whose affinity targets pods placed after it gets another chance once
	// they are placed; repeat while that helps.
	for progress := true; progress && len(failed) > 0; {
		progress = false
		rest := failed[:0]
		for _, p := range failed {
			if s.place(p, nil) {
				progress = true
			} else {
				rest = append(rest, p)
			}
		}
		failed = rest
	}
	// The last round placed nothing, so trying once more on the same state,
	// recording why each attempt fails, gives records that hold for the end
	// state. Recording walks every candidate (a fast attempt under a binding
	// limit looks at a few), so only this round records.
	s.recMemo = map[recKey]poolRejection{}
	for _, p := range failed {
		if p.rej == nil {
			p.rej = &rejections{}
		}
		if !s.place(p, p.rej) { // it fails again: nothing changed
			p.err = s.unplacedReason(p)
		} else {
			s.recMemo = map[recKey]poolRejection{} // it did change: walks again
		}
	}
	s.recMemo = nil
	s.rebalance()
	s.improve()
	s.downsize()
	s.finish(plan)
	return plan
}

func (s *solver) registerDims() error {
	var err error
	reg := func(rl corev1.ResourceList) {
		for n := range rl {
			if e := s.dims.register(n); e != nil && err == nil {
				err = e
			}
		}
	}
	var last *corev1.Container // replicas of one template share their containers
	for _, p := range s.snap.Pods {
		if len(p.Spec.Containers) > 0 && &p.Spec.Containers[0] == last && len(p.Spec.InitContainers) == 0 &&
			p.Spec.Overhead == nil && p.Spec.Resources == nil {
			continue
		}
		if len(p.Spec.Containers) > 0 {
			last = &p.Spec.Containers[0]
		}
		for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range cs {
				reg(cs[i].Resources.Requests)
				reg(cs[i].Resources.Limits)
			}
		}
		reg(p.Spec.Overhead)
		if p.Spec.Resources != nil {
			reg(p.Spec.Resources.Requests)
			reg(p.Spec.Resources.Limits)
		}
	}
	for _, d := range s.snap.DaemonSets {
		reg(facts.PodRequests(&corev1.Pod{Spec: d.Spec.Template.Spec}))
	}
	for _, np := range s.snap.NodePools {
		for n := range np.Spec.Limits {
			if n != karpenter.ResourceLimitsNodes {
				reg(corev1.ResourceList{n: np.Spec.Limits[n]})
			}
		}
	}
	s.dims.sortExtra()
	return err
}

func (s *solver) buildZones() {
	set := map[string]bool{}
	for _, it := range s.snap.Catalog.InstanceTypes {
		for _, o := range it.Offerings {
			set[o.Zone] = true
		}
	}
	for _, n := range s.snap.Nodes {
		if z := n.Node.Labels[corev1.LabelTopologyZone]; z != "" {
			set[z] = true
		}
	}
	for z := range set {
		s.zones = append(s.zones, z)
	}
	sort.Strings(s.zones)
	if len(s.zones) > 64 {
		s.zones = s.zones[:64]
	}
	for i, z := range s.zones {
		s.zoneIdx[z] = i
	}
}

// preparePods computes requests, classes and topology terms of every pending pod,
// and creates the topology groups running pods own (anti-affinity is symmetric).
func (s *solver) preparePods(dimErr error) {
	seen := make(map[string]bool, len(s.snap.Pods))
	infos := make([]podInfo, len(s.snap.Pods)) // one allocation, not one per pod
	s.pods = make([]*podInfo, 0, len(s.snap.Pods))
	for i, pod := range s.snap.Pods {
		p := &infos[i]
		*p = podInfo{pod: pod, key: facts.PodKey(pod), ns: pod.Namespace}
		if p.ns == "" {
			p.ns = "default"
		}
		if seen[p.key] {
			continue // a pod listed twice is placed once
		}
		seen[p.key] = true
		s.pods = append(s.pods, p)
		if dimErr != nil {
			p.err = dimErr.Error()
			continue
		}
		// The decoders refuse quantities the vectors cannot hold; pods that reach
		// the engine another way (read from the API server) are held to the same
		// rule here rather than packed as if they asked for nothing.
		if msg := s.quantityProblem(pod); msg != "" {
			p.err = msg
			continue
		}
		if msg, ok := s.volumeWhy[p.key]; ok {
			p.err = msg
			continue
		}
		p.orig = s.origPods[p.key]
		p.req = s.podVec(pod)
		p.req[dimPods] = 1
		p.prefs = hasPreferences(pod)
		p.prefTerms = preferredTerms(pod)
		if err := s.ownTerms(p); err != nil {
			p.err = err.Error()
			continue
		}
		p.ports = facts.HostPorts(&pod.Spec)
		p.tier = 3
		for _, t := range p.own {
			if t.soft {
				continue
			}
			host := t.g.lv.kind == levelHost
			switch {
			case host && t.g.kind == kindAntiAffinity:
				p.tier = 0
			case host && p.tier > 1:
				p.tier = 1
			case p.tier > 2:
				p.tier = 2
			}
		}
		p.size = math.Max(float64(p.req[dimCPU])/1000, float64(p.req[dimMemory])/(2<<30))
		for i := dimPods + 1; i < len(s.dims.names); i++ {
			if p.req[i] > 0 {
				p.size += 1000 * float64(p.req[i]) // accelerators first: they need the rarest nodes
			}
		}
	}
	// Running pods' anti-affinity terms constrain where pending pods go.
	for _, ns := range s.snap.Nodes {
		for _, pod := range ns.Pods {
			a := pod.Spec.Affinity
			if a == nil || a.PodAntiAffinity == nil {
				continue
			}
			for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				_, _ = s.topo.group(affinityTerm(kindAntiAffinity, pod, facts.PodNamespace(pod), &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]))
			}
		}
	}
	for _, p := range s.pods {
		if p.err == "" {
			p.matched = s.topo.matching(p.ns, p.pod.Labels)
			p.levels = labelLevels(p)
		}
	}
}

// labelLevels lists, once each, the label levels of the groups p owns or matches.
func labelLevels(p *podInfo) []*level {
	var out []*level
	add := func(lv *level) {
		if lv.kind == levelLabel && !slices.Contains(out, lv) {
			out = append(out, lv)
		}
	}
	for _, t := range p.own {
		add(t.g.lv)
	}
	for _, g := range p.matched {
		add(g.lv)
	}
	return out
}

// portsClash reports whether two host-port lists share a port.
func portsClash(a, b []facts.HostPort) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

func (s *solver) ownTerms(p *podInfo) error {
	pod := p.pod
	add := func(tm term, soft bool) error {
		g, err := s.topo.group(tm)
		if err != nil {
			if soft {
				return nil // an unusable preference is simply not honoured
			}
			return fmt.Errorf("%s: %v", tm.kind, err)
		}
		self := g.matches(p.ns, labels.Set(pod.Labels))
		if !soft {
			g.hardOwned = true
			own := pod
			if p.orig != nil {
				own = p.orig
			}
			if tm.kind == kindSpread && (tm.honorTaints || tm.honorAffinity && requiresNodes(own)) {
				g.filteredOwners = true
			}
		}
		p.own = append(p.own, ownTerm{g: g, soft: soft, selfHits: self})
		return nil
	}
	for i := range pod.Spec.TopologySpreadConstraints {
		c := &pod.Spec.TopologySpreadConstraints[i]
		if err := add(spreadTerm(pod, p.ns, c), c.WhenUnsatisfiable == corev1.ScheduleAnyway); err != nil {
			return err
		}
	}
	a := pod.Spec.Affinity
	if a == nil {
		return nil
	}
	for _, kind := range [2]groupKind{kindAffinity, kindAntiAffinity} {
		var required []corev1.PodAffinityTerm
		var preferred []corev1.WeightedPodAffinityTerm
		switch {
		case kind == kindAffinity && a.PodAffinity != nil:
			required, preferred = a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		case kind == kindAntiAffinity && a.PodAntiAffinity != nil:
			required, preferred = a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		}
		for i := range required {
			if err := add(affinityTerm(kind, pod, p.ns, &required[i]), false); err != nil {
				return err
			}
		}
		for i := range preferred {
			_ = add(affinityTerm(kind, pod, p.ns, &preferred[i].PodAffinityTerm), true)
		}
	}
	return nil
}

// requiresNodes reports whether a pod selects nodes (node selector or required
// node affinity).
func requiresNodes(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	return len(pod.Spec.NodeSelector) > 0 ||
		a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil &&
			len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) > 0
}

// quantityProblem is quantity.PodProblem, checked once per pod template: replicas
// of a workload share their containers.
func (s *solver) quantityProblem(pod *corev1.Pod) string {
	plain := len(pod.Spec.Containers) > 0 && len(pod.Spec.InitContainers) == 0 && pod.Spec.Overhead == nil && pod.Spec.Resources == nil
	cs := pod.Spec.Containers
	if plain && &cs[0] == s.checkedContainers && len(cs) == s.checkedLen {
		return ""
	}
	msg := quantity.PodProblem(pod)
	if plain && msg == "" {
		s.checkedContainers, s.checkedLen = &cs[0], len(cs)
	}
	return msg
}

// podVec is facts.PodRequests as a vector. Most pods have only app containers
// with requests set; summing those directly avoids the general rule's allocations.
func (s *solver) podVec(pod *corev1.Pod) vec {
	if !facts.RequestsAreContainerSum(pod) {
		return s.dims.vec(facts.PodRequests(pod))
	}
	var v vec
	for i := range pod.Spec.Containers {
		for n, q := range pod.Spec.Containers[i].Resources.Requests {
			if d, ok := s.dims.index[n]; ok {
				v[d] += quantityValue(n, q)
			}
		}
	}
	return v
}
