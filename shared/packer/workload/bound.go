package workload

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
)

// LowerBound returns a price per hour that no valid plan for snap can undercut
// (counting only new nodes, as Plan.TotalPricePerHour does), and a one-line account
// of how it was found.
//
// It is the optimum of a linear-programming relaxation, solved with gonum's simplex:
//
//	minimise   Σ_v price_v · x_v
//	subject to Σ_{v∈S} alloc_{v,r} · x_v ≥ demand_r(S)   for each pod class S and r ∈ {cpu, memory, pods, extended}
//	           Σ_{v∈K} x_v ≥ |K-clique|                   for each set of pods that pairwise cannot share a node
//	           Σ_{v∈P} cap_{v,r} · x_v ≤ limit_r − used_r  for each pool P with limits
//	           x_e ≤ 1 for each existing or in-flight node e,  x ≥ 0
//
// A variable v is a (pool, instance type) — priced at the cheapest available offering
// the pool allows, with allocatable less the smallest DaemonSet overhead over those
// offerings — or an existing/in-flight node at price 0 with its free allocatable. A
// pod's compatible set is every v it could sit on alone (taints tolerated, node
// affinity met by some allowed offering's labels, requests within allocatable); S
// ranges over the distinct compatible sets, and demand_r(S) sums the pods whose
// compatible set lies inside S.
//
// Why it is a lower bound: take any valid plan and let x_v count its new nodes of
// each (pool, type) plus 1 for each existing node. Every pod sits on a node of a
// variable in its compatible set, so the pods whose sets lie inside S fit in the
// allocatable of S's nodes: each row holds. Pods of a clique (hostname
// anti-affinity group whose pods match their own term; pods asking for the same host
// port) need distinct nodes among their compatible variables. Pool limits hold for
// a valid plan by definition. So x is feasible for the LP, and its LP cost — each
// new node at the cheapest price its pool allows — is at most the plan's cost. The
// LP optimum is at most the cost of every feasible x, hence of every valid plan.
// Pods no variable can take are left out (a plan must leave them unschedulable).
// Zones: a variable is a (pool, type, zone), priced at that zone's cheapest
// offering, and zone topology spread adds per-zone rows (see zoneRows): spot
// prices differ between zones by up to a fifth, and pods told to spread must buy
// room in the dear zones too.
// Relaxed away: integrality, other topology, pod affinity, the packing of
// individual nodes; so the bound may be loose but never too high.
//
// Dominated variables are pruned first: v goes when another u of the same kind
// (same pool, or both existing) is no dearer, has at least v's allocatable in every
// dimension, is compatible with every pod class v is, and uses no more of a limited
// pool resource. Replacing v by u in any solution keeps it feasible and no dearer.
// Where pool limits cannot hold every pod, see LowerBoundPlaced.
func LowerBound(snap *packer.Snapshot) (float64, string) {
	b := newBoundBuilder(snap)
	return b.solve()
}

// LowerBoundPlaced is LowerBound for the pods a plan placed: the snapshot
// less the pods it left unschedulable (namespace/name keys). Where a NodePool's
// limits leave no room for every pod, LowerBound's relaxation has no solution
// (its dual is unbounded); this one always has, the plan itself, so it bounds
// what placing those pods can cost. With none left out it is LowerBound.
func LowerBoundPlaced(snap *packer.Snapshot, unschedulable []string) (float64, string) {
	if len(unschedulable) == 0 {
		return LowerBound(snap)
	}
	left := make(map[string]bool, len(unschedulable))
	for _, k := range unschedulable {
		left[k] = true
	}
	placed := *snap
	placed.Pods = make([]*corev1.Pod, 0, len(snap.Pods))
	for _, p := range snap.Pods {
		if !left[facts.PodKey(p)] {
			placed.Pods = append(placed.Pods, p)
		}
	}
	b, why := LowerBound(&placed)
	return b, fmt.Sprintf("the %d pods placed (%d left unschedulable): %s", len(placed.Pods), len(unschedulable), why)
}

var quiet = klog.Background()

type variable struct {
	name     string
	pool     *karpenter.NodePool // nil for existing/in-flight nodes
	existing bool
	// zone is where the variable's nodes run ("" when unknown): a (pool, type)
	// is one variable per zone it is offered in, priced at that zone's cheapest
	// offering, so that rows about a zone's pods see that zone's prices.
	zone     string
	price    float64
	alloc    []float64 // per dimension
	capacity []float64 // per limited dimension of the pool
	labels   []map[string]string
	taints   []corev1.Taint
}

type boundBuilder struct {
	snap  *packer.Snapshot
	dims  []corev1.ResourceName
	dimIx map[corev1.ResourceName]int
	vars  []*variable
}

func newBoundBuilder(snap *packer.Snapshot) *boundBuilder {
	b := &boundBuilder{snap: snap, dimIx: map[corev1.ResourceName]int{}}
	for _, d := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		b.dim(d)
	}
	return b
}

func (b *boundBuilder) dim(n corev1.ResourceName) int {
	if i, ok := b.dimIx[n]; ok {
		return i
	}
	b.dimIx[n] = len(b.dims)
	b.dims = append(b.dims, n)
	return len(b.dims) - 1
}

// scale turns a quantity into the LP's units: cores, GiB, pods, devices.
func scale(n corev1.ResourceName, v float64) float64 {
	switch n {
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return v / (1 << 30)
	}
	return v
}

func (b *boundBuilder) vector(rl corev1.ResourceList, count float64) []float64 {
	out := make([]float64, len(b.dims))
	for n, q := range rl {
		if n == corev1.ResourcePods || n == corev1.ResourceEphemeralStorage {
			continue
		}
		i := b.dim(n)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i] = scale(n, q.AsApproximateFloat64())
	}
	out[b.dimIx[corev1.ResourcePods]] = count
	return out
}

func at(v []float64, i int) float64 {
	if i < len(v) {
		return v[i]
	}
	return 0
}

func dsPods(snap *packer.Snapshot) []*corev1.Pod {
	var out []*corev1.Pod
	for _, d := range snap.DaemonSets {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace}, Spec: *d.Spec.Template.Spec.DeepCopy()}
		p.Spec.Tolerations = append(p.Spec.Tolerations,
			corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		out = append(out, p)
	}
	return out
}

func lands(p *corev1.Pod, node *corev1.Node, taints []corev1.Taint) bool {
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(node); !ok {
		return false
	}
	_, bad := corev1helpers.FindMatchingUntoleratedTaint(quiet, taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	return !bad
}

// poolAllows evaluates the pool's requirements on a label set. Keys the catalog
// does not label in Karpenter's own domains are not held against the type.
func poolAllows(np *karpenter.NodePool, lbl map[string]string) bool {
	for _, r := range np.Spec.Template.Spec.Requirements {
		v, has := lbl[r.Key]
		if !has && (strings.Contains(r.Key, "kubernetes.io/") || strings.HasPrefix(r.Key, "karpenter.")) &&
			r.Operator != corev1.NodeSelectorOpDoesNotExist && r.Operator != corev1.NodeSelectorOpNotIn {
			continue
		}
		if !holds(r, v, has) {
			return false
		}
	}
	return true
}

func holds(r karpenter.NodeSelectorRequirementWithMinValues, v string, has bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !has || !contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	}
	if !has || len(r.Values) != 1 {
		return false
	}
	var got, bound int64
	if _, err := fmt.Sscan(v, &got); err != nil {
		return false
	}
	if _, err := fmt.Sscan(r.Values[0], &bound); err != nil {
		return false
	}
	switch r.Operator {
	case corev1.NodeSelectorOpGt:
		return got > bound
	case corev1.NodeSelectorOpLt:
		return got < bound
	case karpenter.NodeSelectorOpGte:
		return got >= bound
	case karpenter.NodeSelectorOpLte:
		return got <= bound
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// buildVariables lists (pool, type) and existing-node variables.
func (b *boundBuilder) buildVariables() {
	daemons := dsPods(b.snap)
	dsReq := make([]corev1.ResourceList, len(daemons))
	for i, d := range daemons {
		dsReq[i] = check.PodRequests(d)
	}
	classes := map[string]*karpenter.EC2NodeClass{}
	for _, nc := range b.snap.NodeClasses {
		classes[nc.Name] = nc
	}
	for _, np := range b.snap.NodePools {
		var class *karpenter.EC2NodeClass
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
			class = classes[ref.Name]
		}
		overhead := catalog.OverheadFor(class)
		for ti := range b.snap.Catalog.InstanceTypes {
			it := &b.snap.Catalog.InstanceTypes[ti]
			base := catalog.InstanceLabels(it)
			for _, zone := range offeringZones(it) {
				v := &variable{name: np.Name + "/" + it.Name + "/" + zone, pool: np, zone: zone, price: math.Inf(1), taints: np.Spec.Template.Spec.Taints}
				var bestAlloc []float64
				for _, off := range it.Offerings {
					if !off.Available || off.Zone != zone {
						continue
					}
					lbl := catalog.WithOffering(base, off)
					for k, val := range np.Spec.Template.ObjectMeta.Labels {
						lbl[k] = val
					}
					lbl[karpenter.NodePoolLabelKey] = np.Name
					// A key the type does not label gets one of the values the pool's In
					// requirement allows: each is a way to launch the type.
					lbls := []map[string]string{lbl}
					for _, r := range np.Spec.Template.Spec.Requirements {
						if _, has := lbl[r.Key]; has || r.Operator != corev1.NodeSelectorOpIn {
							continue
						}
						var more []map[string]string
						for _, l := range lbls {
							for _, val := range r.Values {
								c := maps.Clone(l)
								c[r.Key] = val
								more = append(more, c)
							}
						}
						lbls = more
					}
					allowed := false
					for _, l := range lbls {
						if poolAllows(np, l) {
							v.labels = append(v.labels, l)
							allowed = true
						}
					}
					if !allowed {
						continue
					}
					v.price = math.Min(v.price, off.PricePerHour)
					node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bound", Labels: lbl}}
					used := corev1.ResourceList{}
					count := 0.0
					for i, d := range daemons {
						if lands(d, node, v.taints) {
							addList(used, dsReq[i])
							count++
						}
					}
					alloc := catalog.Allocatable(it, overhead)
					av := b.vector(alloc, float64(alloc.Pods().Value()))
					uv := b.vector(used, count)
					for i := range av {
						av[i] -= at(uv, i)
					}
					if bestAlloc == nil {
						bestAlloc = av
					} else {
						for i := range bestAlloc {
							bestAlloc[i] = math.Max(bestAlloc[i], av[i])
						}
					}
				}
				if len(v.labels) == 0 {
					continue
				}
				v.alloc = bestAlloc
				capacity := catalog.Capacity(it)
				for rn := range np.Spec.Limits {
					if rn == karpenter.ResourceLimitsNodes {
						v.capacity = append(v.capacity, 1)
						continue
					}
					qv := capacity[rn]
					v.capacity = append(v.capacity, scale(rn, qv.AsApproximateFloat64()))
				}
				b.vars = append(b.vars, v)
			}
		}
	}
	for _, ns := range b.snap.Nodes {
		n := ns.Node
		if n.Spec.Unschedulable {
			continue
		}
		alloc := n.Status.Allocatable
		used := corev1.ResourceList{}
		count := float64(len(ns.Pods))
		for _, p := range ns.Pods {
			addList(used, check.PodRequests(p))
		}
		for i, d := range daemons {
			if lands(d, n, n.Spec.Taints) {
				addList(used, dsReq[i])
				count++
			}
		}
		av := b.vector(alloc, float64(alloc.Pods().Value()))
		uv := b.vector(used, count)
		for i := range av {
			av[i] = math.Max(0, av[i]-at(uv, i))
		}
		b.vars = append(b.vars, &variable{name: "existing/" + n.Name, existing: true, zone: n.Labels[corev1.LabelTopologyZone], alloc: av, labels: []map[string]string{n.Labels}, taints: n.Spec.Taints})
	}
	for _, nc := range b.snap.InFlight {
		lbl := map[string]string{}
		for k, v := range nc.Labels {
			lbl[k] = v
		}
		for _, r := range nc.Spec.Requirements {
			if _, set := lbl[r.Key]; !set && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				lbl[r.Key] = r.Values[0]
			}
		}
		alloc := nc.Status.Allocatable
		if len(alloc) == 0 {
			if it, ok := b.snap.Catalog.Lookup(lbl[corev1.LabelInstanceTypeStable]); ok {
				alloc = catalog.Allocatable(it, catalog.Overhead{})
			}
		}
		if len(alloc) == 0 {
			continue
		}
		b.vars = append(b.vars, &variable{name: "inflight/" + nc.Name, existing: true, zone: lbl[corev1.LabelTopologyZone], alloc: b.vector(alloc, float64(alloc.Pods().Value())), labels: []map[string]string{lbl}, taints: nc.Spec.Taints})
	}
	for _, v := range b.vars {
		for len(v.alloc) < len(b.dims) {
			v.alloc = append(v.alloc, 0)
		}
	}
}

// offeringZones lists the zones it has an available offering in, in catalog order.
func offeringZones(it *catalog.InstanceType) []string {
	var out []string
	for _, off := range it.Offerings {
		if off.Available && !contains(out, off.Zone) {
			out = append(out, off.Zone)
		}
	}
	return out
}

func addList(dst, src corev1.ResourceList) {
	for n, q := range src {
		cur := dst[n]
		cur.Add(q)
		dst[n] = cur
	}
}

// row is one LP constraint over all variables: coef·x ≥ rhs, or ≤ when le.
type row struct {
	coef []float64
	rhs  float64
	le   bool
}

type podClass struct {
	members []bool // compatible variables
	key     string
	demand  []float64
	pods    int
}

func (b *boundBuilder) solve() (float64, string) {
	if b.snap.Catalog == nil {
		return 0, "no catalog"
	}
	// Register every extended resource the pods ask for before sizing vectors.
	reqs := make([]corev1.ResourceList, len(b.snap.Pods))
	for i, p := range b.snap.Pods {
		reqs[i] = check.PodRequests(p)
		for n := range reqs[i] {
			if n != corev1.ResourceEphemeralStorage {
				b.dim(n)
			}
		}
	}
	b.buildVariables()
	nv := len(b.vars)
	// Compatibility is evaluated once per distinct (selector, affinity, tolerations).
	type sigInfo struct{ ok []bool }
	sigs := map[string]*sigInfo{}
	classes := map[string]*podClass{}
	var classOrder []string
	podClassOf := make([]*podClass, len(b.snap.Pods))
	excluded := 0
	// Pods with the same placement signature and requests share a class.
	byShape := map[string]*podClass{}
	for i, p := range b.snap.Pods {
		sig := placementSig(p)
		need := b.vector(reqs[i], 1)
		shape := fmt.Sprint(sig, need)
		if c, ok := byShape[shape]; ok {
			if c == nil {
				excluded++
				continue
			}
			for d := range need {
				c.demand[d] += need[d]
			}
			c.pods++
			podClassOf[i] = c
			continue
		}
		si := sigs[sig]
		if si == nil {
			si = &sigInfo{ok: make([]bool, nv)}
			for vi, v := range b.vars {
				for _, lbl := range v.labels {
					if lands(p, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bound", Labels: lbl}}, v.taints) {
						si.ok[vi] = true
						break
					}
				}
			}
			sigs[sig] = si
		}
		members := make([]bool, nv)
		var key strings.Builder
		any := false
		for vi, v := range b.vars {
			if !si.ok[vi] {
				continue
			}
			fits := true
			for d := range need {
				if need[d] > at(v.alloc, d)+1e-9 {
					fits = false
					break
				}
			}
			if fits {
				members[vi] = true
				any = true
				fmt.Fprintf(&key, "%d,", vi)
			}
		}
		if !any {
			byShape[shape] = nil
			excluded++
			continue
		}
		c := classes[key.String()]
		if c == nil {
			c = &podClass{members: members, key: key.String(), demand: make([]float64, len(b.dims))}
			classes[c.key] = c
			classOrder = append(classOrder, c.key)
		}
		for d := range need {
			c.demand[d] += need[d]
		}
		c.pods++
		podClassOf[i] = c
		byShape[shape] = c
	}
	if len(classOrder) == 0 {
		return 0, fmt.Sprintf("no pod fits any variable (%d pods left out)", excluded)
	}
	// Rows: every class S with the demand of all classes inside it; the union row.
	var rows []row
	subset := func(a, b []bool) bool {
		for i := range a {
			if a[i] && !b[i] {
				return false
			}
		}
		return true
	}
	classList := make([]*podClass, 0, len(classOrder))
	for _, k := range classOrder {
		classList = append(classList, classes[k])
	}
	union := &podClass{members: make([]bool, nv), demand: make([]float64, len(b.dims))}
	for _, c := range classList {
		for i, m := range c.members {
			union.members[i] = union.members[i] || m
		}
	}
	// Cap the number of class rows for speed: keep the classes with most pods.
	sort.SliceStable(classList, func(i, j int) bool { return classList[i].pods > classList[j].pods })
	if len(classList) > 40 {
		classList = classList[:40]
	}
	targets := append([]*podClass{union}, classList...)
	allClasses := make([]*podClass, 0, len(classes))
	for _, k := range classOrder {
		allClasses = append(allClasses, classes[k])
	}
	for _, s := range targets {
		demand := make([]float64, len(b.dims))
		for _, c := range allClasses {
			if subset(c.members, s.members) {
				for d := range demand {
					demand[d] += c.demand[d]
				}
			}
		}
		for d, dem := range demand {
			if dem <= 1e-12 {
				continue
			}
			coef := make([]float64, nv)
			for vi, v := range b.vars {
				if s.members[vi] {
					coef[vi] = v.alloc[d]
				}
			}
			rows = append(rows, row{coef: coef, rhs: dem})
		}
	}
	zoneRows, spreadGroups := b.zoneRows(podClassOf, reqs)
	rows = append(rows, zoneRows...)
	// Cliques: pods that pairwise cannot share a node.
	cliques := b.cliques(podClassOf, nv)
	maxClique := 0
	for _, cl := range cliques {
		coef := make([]float64, nv)
		for vi, m := range cl.members {
			if m {
				coef[vi] = 1
			}
		}
		rows = append(rows, row{coef: coef, rhs: float64(cl.size)})
		maxClique = max(maxClique, cl.size)
	}
	// Pool limits.
	for _, np := range b.snap.NodePools {
		if len(np.Spec.Limits) == 0 {
			continue
		}
		used := b.poolUsed(np)
		li := 0
		for rn, lim := range np.Spec.Limits {
			left := scale(rn, lim.AsApproximateFloat64()) - used[rn]
			coef := make([]float64, nv)
			anyVar := false
			for vi, v := range b.vars {
				if v.pool == np {
					coef[vi] = v.capacity[li]
					anyVar = anyVar || coef[vi] > 0
				}
			}
			li++
			if !anyVar {
				continue
			}
			rows = append(rows, row{coef: coef, rhs: math.Max(0, left), le: true})
		}
	}
	// Existing nodes at most once.
	for vi, v := range b.vars {
		if v.existing {
			coef := make([]float64, nv)
			coef[vi] = 1
			rows = append(rows, row{coef: coef, rhs: 1, le: true})
		}
	}
	// Prune dominated variables.
	keep := b.prune(rows)
	var idx []int
	for vi := range b.vars {
		if keep[vi] {
			idx = append(idx, vi)
		}
	}
	// Drop rows that no kept variable touches (ge rows there would be infeasible,
	// which cannot happen: every class has a compatible variable and pruning keeps a
	// dominating one).
	var A [][]float64
	var rhs []float64
	var le []bool
	for _, r := range rows {
		c := make([]float64, len(idx))
		nz := false
		for j, vi := range idx {
			c[j] = r.coef[vi]
			nz = nz || c[j] != 0
		}
		if !nz {
			if !r.le && r.rhs > 0 {
				return 0, "lower bound: a demand row lost all its variables (bug)"
			}
			continue
		}
		A = append(A, c)
		rhs = append(rhs, r.rhs)
		le = append(le, r.le)
	}
	total := 0.0
	for _, c := range allClasses {
		total += float64(c.pods)
	}
	summary := fmt.Sprintf("LP over %d of %d (pool,type,zone)/node variables, %d rows; %d pods in %d classes, %d left out (fit nothing); largest clique %d; %d zone-spread groups with a per-zone minimum",
		len(idx), nv, len(A), int(total), len(allClasses), excluded, maxClique, spreadGroups)
	cost := make([]float64, len(idx))
	for j, vi := range idx {
		cost[j] = b.vars[vi].price
	}
	bound, err := solveDual(A, rhs, le, cost)
	if err != nil {
		return 0, "lower bound: " + err.Error() + " (" + summary + ")"
	}
	return bound, summary
}

// solveDual solves the primal  min cᵀx, A x ≥ rhs (≤ where le), x ≥ 0  through its
// dual  max rhsᵀy, Aᵀy ≤ c, y ≥ 0  (≤ rows negated first). Prices are never
// negative, so y = 0 with every slack basic is a feasible start and the simplex
// needs no phase 1, which is where gonum's solver is fragile on degenerate
// problems. The bound returned is rhsᵀy for the y found, after checking that y is
// dual feasible: by weak duality that is a lower bound whatever the solver did.
func solveDual(A [][]float64, rhs []float64, le []bool, c []float64) (float64, error) {
	m, n := len(A), len(c)
	if m == 0 {
		return 0, nil
	}
	// Scale each primal row to |rhs| 1 (or its largest coefficient), after
	// turning ≤ rows into ≥ rows.
	rows := make([][]float64, m)
	b := make([]float64, m)
	for i := range A {
		sign := 1.0
		if le[i] {
			sign = -1
		}
		s := math.Abs(rhs[i])
		if s == 0 {
			for _, v := range A[i] {
				s = math.Max(s, math.Abs(v))
			}
		}
		if s == 0 {
			s = 1
		}
		rows[i] = make([]float64, n)
		for j, v := range A[i] {
			rows[i][j] = sign * v / s
		}
		b[i] = sign * rhs[i] / s
	}
	// Dual in gonum's standard form: minimise −bᵀy subject to Aᵀy + t = c, y, t ≥ 0.
	cols := m + n
	data := make([]float64, n*cols)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			data[j*cols+i] = rows[i][j]
		}
		data[j*cols+m+j] = 1
	}
	obj := make([]float64, cols)
	for i := range b {
		obj[i] = -b[i]
	}
	basic := make([]int, n)
	for j := range basic {
		basic[j] = m + j
	}
	// gonum's simplex can cycle on degenerate problems (equal prices are common).
	// Lowering each price by a distinct, tiny fraction breaks the ties; a dual
	// solution feasible for the lowered prices is feasible for the real ones, so
	// the bound stays valid.
	cp := make([]float64, n)
	for j := range c {
		cp[j] = c[j] * (1 - 1e-9*float64(j+1)/float64(n))
	}
	_, x, err := lp.Simplex(obj, mat.NewDense(n, cols, data), cp, 1e-10, basic)
	if x == nil {
		if err == nil {
			err = fmt.Errorf("no solution")
		}
		return 0, err
	}
	y := x[:m]
	for j := 0; j < n; j++ {
		lhs := 0.0
		for i := 0; i < m; i++ {
			lhs += rows[i][j] * math.Max(0, y[i])
		}
		if lhs > c[j]+1e-7*math.Max(1, c[j]) {
			if err == nil {
				err = fmt.Errorf("dual solution infeasible at variable %d (%v > %v)", j, lhs, c[j])
			}
			return 0, err
		}
	}
	bound := 0.0
	for i := range b {
		bound += b[i] * math.Max(0, y[i])
	}
	return math.Max(0, bound), nil
}

func placementSig(p *corev1.Pod) string {
	var b strings.Builder
	keys := make([]string, 0, len(p.Spec.NodeSelector))
	for k := range p.Spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + "=" + p.Spec.NodeSelector[k] + ";")
	}
	if p.Spec.Affinity != nil && p.Spec.Affinity.NodeAffinity != nil {
		fmt.Fprintf(&b, "%v", p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	fmt.Fprintf(&b, "|%v", p.Spec.Tolerations)
	return b.String()
}

// spreadGroup is the pending pods of one zone spread constraint.
type spreadGroup struct {
	ns      string
	sel     labels.Selector
	maxSkew int32
	pods    []int
	sig     string
	bad     bool
}

// zoneRows returns, for every zone topology spread group it can account for
// exactly, rows that make each zone's variables hold the group's per-zone minimum.
//
// Why they hold for every valid plan: let a group's n pods carry the same
// DoNotSchedule constraint (zone key, maxSkew s, no minDomains, default node
// inclusion policies), let no other pod, pending or running, match its selector,
// and let E be the zones counted as domains. Each domain's last carrier was bound
// when its count minus the minimum over E was at most s, and the minimum only
// grows, so in the final state every count is at most min + s; the n pods lie in
// E, so n ≤ min + (|E|−1)(min+s), that is every zone of E holds at least
// m = ⌈(n − s(|E|−1)) / |E|⌉ of them. |E| is at most D, the number of zones the
// catalog and the nodes know, and m falls as |E| grows, so m computed with D is
// a valid minimum. A zone where every pod of the group has a compatible variable
// can launch a node the pods count as eligible, so it is in E. Those m pods sit
// on that zone's nodes among their compatible variables: the zone's allocatable
// there is at least m times the group's smallest request in each dimension. Groups
// that share no pod add up in a row per zone over the union of their variables.
func (b *boundBuilder) zoneRows(classOf []*podClass, reqs []corev1.ResourceList) ([]row, int) {
	zones := map[string]bool{}
	for _, it := range b.snap.Catalog.InstanceTypes {
		for _, off := range it.Offerings {
			zones[off.Zone] = true
		}
	}
	for _, ns := range b.snap.Nodes {
		if z := ns.Node.Labels[corev1.LabelTopologyZone]; z != "" {
			zones[z] = true
		}
	}
	D := len(zones)
	if D < 2 {
		return nil, 0
	}
	groups := map[string]*spreadGroup{}
	var order []string
	for i, p := range b.snap.Pods {
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != corev1.DoNotSchedule || c.TopologyKey != corev1.LabelTopologyZone {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err != nil {
				continue
			}
			k := fmt.Sprintf("%s|%s|%d", p.Namespace, sel.String(), c.MaxSkew)
			g := groups[k]
			if g == nil {
				g = &spreadGroup{ns: p.Namespace, sel: sel, maxSkew: c.MaxSkew, sig: placementSig(p)}
				groups[k] = g
				order = append(order, k)
			}
			g.pods = append(g.pods, i)
			g.bad = g.bad || c.MinDomains != nil || len(c.MatchLabelKeys) > 0 || classOf[i] == nil || !sel.Matches(labels.Set(p.Labels)) ||
				c.NodeAffinityPolicy != nil && *c.NodeAffinityPolicy != corev1.NodeInclusionPolicyHonor ||
				c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy != corev1.NodeInclusionPolicyIgnore ||
				placementSig(p) != g.sig
		}
	}
	// Every pod a selector matches must be one of its carriers, counted once.
	for _, k := range order {
		g := groups[k]
		if g.bad {
			continue
		}
		carriers := map[int]bool{}
		for _, i := range g.pods {
			if carriers[i] {
				g.bad = true // a constraint written twice
			}
			carriers[i] = true
		}
		for i, p := range b.snap.Pods {
			if !carriers[i] && p.Namespace == g.ns && g.sel.Matches(labels.Set(p.Labels)) {
				g.bad = true
				break
			}
		}
		for _, ns := range b.snap.Nodes {
			for _, p := range ns.Pods {
				if p.Namespace == g.ns && g.sel.Matches(labels.Set(p.Labels)) {
					g.bad = true
				}
			}
		}
	}
	var rows []row
	used := map[int]bool{}
	type zoneSum struct {
		members []bool
		need    []float64
	}
	sums := map[string]*zoneSum{}
	var zoneOrder []string
	nv := len(b.vars)
	counted := 0
	for _, k := range order {
		g := groups[k]
		n := len(g.pods)
		m := (n - int(g.maxSkew)*(D-1) + D - 1) / D // ⌈(n − s(D−1)) / D⌉ for a positive numerator
		if g.bad || n-int(g.maxSkew)*(D-1) <= 0 || m <= 0 {
			continue
		}
		counted++
		minReq := make([]float64, len(b.dims))
		for d := range minReq {
			minReq[d] = math.Inf(1)
		}
		shared := false
		for _, i := range g.pods {
			need := b.vector(reqs[i], 1)
			for d := range minReq {
				minReq[d] = math.Min(minReq[d], at(need, d))
			}
			shared = shared || used[i]
		}
		if !shared {
			for _, i := range g.pods {
				used[i] = true
			}
		}
		for z := range zones {
			members := make([]bool, nv)
			inZone := true
			for _, i := range g.pods {
				any := false
				for vi, ok := range classOf[i].members {
					if ok && b.vars[vi].zone == z {
						members[vi] = true
						any = true
					}
				}
				inZone = inZone && any
			}
			if !inZone {
				continue
			}
			for d, r := range minReq {
				if r <= 1e-12 {
					continue
				}
				coef := make([]float64, nv)
				for vi, ok := range members {
					if ok {
						coef[vi] = b.vars[vi].alloc[d]
					}
				}
				rows = append(rows, row{coef: coef, rhs: float64(m) * r})
			}
			if shared {
				continue
			}
			zs := sums[z]
			if zs == nil {
				zs = &zoneSum{members: make([]bool, nv), need: make([]float64, len(b.dims))}
				sums[z] = zs
				zoneOrder = append(zoneOrder, z)
			}
			for vi, ok := range members {
				zs.members[vi] = zs.members[vi] || ok
			}
			for d, r := range minReq {
				zs.need[d] += float64(m) * r
			}
		}
	}
	sort.Strings(zoneOrder)
	for _, z := range zoneOrder {
		zs := sums[z]
		for d, need := range zs.need {
			if need <= 1e-12 {
				continue
			}
			coef := make([]float64, nv)
			for vi, ok := range zs.members {
				if ok {
					coef[vi] = b.vars[vi].alloc[d]
				}
			}
			rows = append(rows, row{coef: coef, rhs: need})
		}
	}
	return rows, counted
}

type clique struct {
	size    int
	members []bool
}

// cliques finds sets of pending pods that pairwise cannot share a node: pods of a
// required hostname anti-affinity term that match it themselves, and pods asking
// for the same host port and protocol.
func (b *boundBuilder) cliques(classOf []*podClass, nv int) []clique {
	groups := map[string][]int{}
	var order []string
	addTo := func(k string, i int) {
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	for i, p := range b.snap.Pods {
		if classOf[i] == nil {
			continue
		}
		if p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil {
			for _, t := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if t.TopologyKey != corev1.LabelHostname || t.LabelSelector == nil || len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
					continue
				}
				sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
				if err != nil || !sel.Matches(labels.Set(p.Labels)) {
					continue
				}
				addTo("anti|"+p.Namespace+"|"+sel.String(), i)
			}
		}
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				if port.HostPort > 0 {
					addTo(fmt.Sprintf("port|%s|%d", port.Protocol, port.HostPort), i)
				}
			}
		}
	}
	var out []clique
	for _, k := range order {
		members := groups[k]
		if len(members) < 2 {
			continue
		}
		cl := clique{size: len(members), members: make([]bool, nv)}
		for _, i := range members {
			for vi, m := range classOf[i].members {
				cl.members[vi] = cl.members[vi] || m
			}
		}
		out = append(out, cl)
	}
	return out
}

// poolUsed sums what a pool already runs (nodes labelled with it, in-flight claims),
// in LP units keyed by limit resource.
func (b *boundBuilder) poolUsed(np *karpenter.NodePool) map[corev1.ResourceName]float64 {
	used := map[corev1.ResourceName]float64{}
	add := func(capacity corev1.ResourceList) {
		for rn := range np.Spec.Limits {
			if rn == karpenter.ResourceLimitsNodes {
				used[rn]++
				continue
			}
			q := capacity[rn]
			used[rn] += scale(rn, q.AsApproximateFloat64())
		}
	}
	for _, ns := range b.snap.Nodes {
		if ns.Node.Labels[karpenter.NodePoolLabelKey] == np.Name {
			c := ns.Node.Status.Capacity
			if len(c) == 0 {
				c = ns.Node.Status.Allocatable
			}
			add(c)
		}
	}
	for _, nc := range b.snap.InFlight {
		if nc.Labels[karpenter.NodePoolLabelKey] != np.Name {
			continue
		}
		c := nc.Status.Capacity
		if len(c) == 0 {
			for _, r := range nc.Spec.Requirements {
				if r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
					if it, ok := b.snap.Catalog.Lookup(r.Values[0]); ok {
						c = catalog.Capacity(it)
					}
				}
			}
		}
		add(c)
	}
	return used
}

// prune keeps the variables worth giving the LP: those in some ≥ row and not
// dominated by another (see LowerBound for the rule).
func (b *boundBuilder) prune(rows []row) []bool {
	nv := len(b.vars)
	keep := make([]bool, nv)
	var ge, le []int
	for ri, r := range rows {
		if r.le {
			le = append(le, ri)
		} else {
			ge = append(ge, ri)
		}
	}
	for vi := range b.vars {
		for _, ri := range ge {
			if rows[ri].coef[vi] > 0 {
				keep[vi] = true
				break
			}
		}
	}
	dominates := func(u, v int) bool {
		vu, vv := b.vars[u], b.vars[v]
		if vu.existing || vv.existing || vu.price > vv.price {
			return false
		}
		for d := range vv.alloc {
			if vu.alloc[d] < vv.alloc[d] {
				return false
			}
		}
		for _, ri := range ge {
			if rows[ri].coef[v] > 0 && rows[ri].coef[u] <= 0 {
				return false
			}
		}
		for _, ri := range le {
			if rows[ri].coef[u] > rows[ri].coef[v] {
				return false
			}
		}
		return true
	}
	order := make([]int, 0, nv)
	for vi := range b.vars {
		if keep[vi] {
			order = append(order, vi)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return b.vars[order[i]].price < b.vars[order[j]].price })
	var kept []int
	for _, v := range order {
		dominated := false
		for _, u := range kept {
			if dominates(u, v) {
				dominated = true
				break
			}
		}
		if dominated {
			keep[v] = false
			continue
		}
		kept = append(kept, v)
	}
	return keep
}
