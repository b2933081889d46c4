// Command karpenter runs Karpenter's scheduler (sigs.k8s.io/karpenter, as a
// library) and Joiner's packer side by side on packbench's cases: the same
// pods, NodePools, DaemonSets, existing nodes and instance catalog, loaded by
// the same code (shared/packer/workload). Per case it prints the pods each
// schedules per second, what each plan costs against workload.LowerBound, and
// the pods each left unschedulable.
//
//	cd bench && go run ./karpenter [-cases REGEXP] [-runs N]
//
// It lives in its own module (bench/go.mod) so that the main module never
// depends on Karpenter. Its tests also hand what Joiner leaves in a cluster it
// took over to Karpenter's controllers (wayback_test.go: the way back). Both engines are given the same allocatable: each
// catalog type becomes a cloudprovider.InstanceType whose capacity and
// overhead (kube-reserved, system-reserved, eviction threshold) come from the
// catalog package's implementation of Karpenter's AWS formulas for the pool's
// EC2NodeClass. A Karpenter NodeClaim is priced at the cheapest available
// offering of its instance-type options that its requirements allow, which is
// what a lowest-price launch would pay (Karpenter's spot allocation,
// price-capacity-optimized, may pay more): the comparison errs in Karpenter's
// favour.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/fake"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	karpscheduling "sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/test"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// awsLabels are the labels Karpenter's AWS provider registers as well known
// (its apis/v1 init); core Karpenter alone knows only the Kubernetes ones.
var awsLabels = []string{
	karpenter.LabelInstanceCategory, karpenter.LabelInstanceFamily, karpenter.LabelInstanceGeneration,
	karpenter.LabelInstanceSize, karpenter.LabelInstanceCPU, karpenter.LabelInstanceMemory,
	karpenter.LabelInstanceGPUName, karpenter.LabelInstanceGPUManufacturer, karpenter.LabelInstanceGPUCount,
	karpenter.LabelInstanceGPUMemory, catalog.LabelInstanceNetworkBandwidth,
	catalog.LabelInstanceAcceleratorName, catalog.LabelInstanceAcceleratorManufacturer, catalog.LabelInstanceAcceleratorCount,
}

func init() {
	log.SetLogger(logging.NopLogger)
	v1.WellKnownLabels.Insert(awsLabels...)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// side is one engine's figures on one case.
type side struct {
	dur     time.Duration // median
	nodes   int
	cost    float64
	unsched int
	placed  int      // pods on new or existing nodes
	left    []string // the pods left unschedulable (namespace/name)
	bound   float64  // workload.LowerBoundPlaced of the pods it placed
}

type row struct {
	c        workload.Case
	bound    float64
	joiner   side
	karp     side
	karpNote string
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-karpenter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("cases", "", "run only the cases whose name matches this regular expression")
	runs := fs.Int("runs", 3, "timed runs per case and engine (the median is reported)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var filter *regexp.Regexp
	if *only != "" {
		var err error
		if filter, err = regexp.Compile(*only); err != nil {
			fmt.Fprintf(stderr, "bench-karpenter: -cases: %v\n", err)
			return 2
		}
	}
	cases, err := workload.Cases()
	if err != nil {
		fmt.Fprintf(stderr, "bench-karpenter: loading the cases: %v\n", err)
		return 1
	}
	load := workload.LoadAverage()
	var rows []*row
	for _, c := range cases {
		if (filter != nil && !filter.MatchString(c.Name)) || (filter == nil && c.Large) {
			continue // the 100,000-pod case only when named: minutes for Karpenter
		}
		fmt.Fprintf(stderr, "case %s (%d pods)\n", c.Name, c.Pods)
		r := &row{c: c}
		// The input packbench plans: the case written as manifests and read
		// back as joiner plan reads them (see workload.ReadYAML).
		mk, done, err := readBack(c)
		if err != nil {
			fmt.Fprintf(stderr, "bench-karpenter: %s: %v\n", c.Name, err)
			return 1
		}
		r.joiner = runJoiner(mk, *runs)
		k, err := runKarpenter(mk, *runs)
		if err != nil {
			r.karpNote = err.Error()
			fmt.Fprintf(stderr, "  karpenter: %v\n", err)
		}
		r.karp = k
		// Each engine is judged against the bound of the pods it placed: the
		// same bound unless a limit left pods pending.
		r.joiner.bound, _ = workload.LowerBoundPlaced(mk(), r.joiner.left)
		r.karp.bound = r.joiner.bound
		if !slices.Equal(r.karp.left, r.joiner.left) {
			r.karp.bound, _ = workload.LowerBoundPlaced(mk(), r.karp.left)
		}
		r.bound = r.joiner.bound
		done()
		rows = append(rows, r)
	}
	report(stdout, rows)
	fmt.Fprintf(stdout, "load average (1, 5, 15 min): %s before, %s after\n", load, workload.LoadAverage())
	return 0
}

// readBack writes the case's manifests once and returns a function reading
// them back (a fresh snapshot per call) and one removing them.
func readBack(c workload.Case) (func() *packer.Snapshot, func(), error) {
	dir, err := os.MkdirTemp("", "bench-karpenter-")
	if err != nil {
		return nil, nil, err
	}
	done := func() { os.RemoveAll(dir) }
	if _, err := workload.WriteYAML(dir, c.Snapshot()); err != nil {
		done()
		return nil, nil, err
	}
	if _, err := workload.ReadYAML(dir, c.Catalog); err != nil {
		done()
		return nil, nil, err
	}
	return func() *packer.Snapshot {
		snap, err := workload.ReadYAML(dir, c.Catalog)
		if err != nil {
			panic(err) // read once above
		}
		return snap
	}, done, nil
}

func runJoiner(mk func() *packer.Snapshot, runs int) side {
	var s side
	times := make([]time.Duration, runs)
	for i := range times {
		snap := mk()
		start := time.Now()
		plan := packer.Solve(snap, packer.Options{})
		times[i] = time.Since(start)
		s.nodes, s.cost, s.unsched = len(plan.NewNodes), plan.TotalPricePerHour, len(plan.Unschedulable)
		s.left = s.left[:0]
		for _, u := range plan.Unschedulable {
			s.left = append(s.left, u.Pod)
		}
		slices.Sort(s.left)
		s.placed = 0
		for _, n := range plan.NewNodes {
			s.placed += len(n.Pods)
		}
		for _, n := range plan.ExistingNodes {
			s.placed += len(n.Pods)
		}
	}
	s.dur = median(times)
	return s
}

// karpInput is a case translated into Karpenter's types.
type karpInput struct {
	pools         []*v1.NodePool
	instanceTypes map[string][]*cloudprovider.InstanceType
	daemonPods    []*corev1.Pod
	pods          []*corev1.Pod
	nodes         []*corev1.Node
	bound         []*corev1.Pod // pods already running on nodes
}

// runKarpenter schedules the case with Karpenter's scheduler as its
// provisioner does each round: cluster state, topology, scheduler, Solve. All
// of it is timed (the input translation is not).
func runKarpenter(mk func() *packer.Snapshot, runs int) (side, error) {
	var s side
	times := make([]time.Duration, runs)
	for i := range times {
		in, err := translate(mk())
		if err != nil {
			return s, err
		}
		ctx := testContext()
		start := time.Now()
		res, err := schedule(ctx, in)
		times[i] = time.Since(start)
		if err != nil {
			return s, err
		}
		s.nodes, s.unsched = len(res.NewNodeClaims), len(res.PodErrors)
		s.cost, s.placed = 0, 0
		s.left = s.left[:0]
		for p := range res.PodErrors {
			s.left = append(s.left, p.Namespace+"/"+p.Name)
		}
		slices.Sort(s.left)
		for _, nc := range res.NewNodeClaims {
			p, ok := claimPrice(nc)
			if !ok {
				return s, fmt.Errorf("NodeClaim %s has no available offering its requirements allow", nc.NodeClaimTemplate.NodePoolName)
			}
			s.cost += p
			s.placed += len(nc.Pods)
		}
		for _, en := range res.ExistingNodes {
			s.placed += len(en.Pods)
		}
		if s.placed+s.unsched != len(in.pods) {
			return s, fmt.Errorf("karpenter accounted for %d pods (%d placed, %d unschedulable) of %d", s.placed+s.unsched, s.placed, s.unsched, len(in.pods))
		}
	}
	s.dur = median(times)
	return s, nil
}

// testContext is the context Karpenter's own scheduling benchmark runs in.
func testContext() context.Context {
	return options.ToContext(injection.WithControllerName(context.Background(), "provisioner"), test.Options())
}

// claimPrice is the cheapest available offering of the claim's options (which
// the scheduler keeps compatible with it) that its requirements (zone,
// capacity type) allow.
func claimPrice(nc *scheduling.NodeClaim) (float64, bool) {
	best, ok := 0.0, false
	for _, it := range nc.InstanceTypeOptions {
		of := it.Offerings.Available().Compatible(nc.Requirements)
		if len(of) == 0 {
			continue
		}
		if p := of.Cheapest().Price; !ok || p < best {
			best, ok = p, true
		}
	}
	return best, ok
}

func schedule(ctx context.Context, in *karpInput) (scheduling.Results, error) {
	kube := fakecr.NewClientBuilder().
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		Build()
	for _, p := range in.bound {
		if err := kube.Create(ctx, p.DeepCopy()); err != nil {
			return scheduling.Results{}, fmt.Errorf("creating running pod %s: %w", p.Name, err)
		}
	}
	cp := fake.NewCloudProvider()
	clk := clock.RealClock{}
	cluster := state.NewCluster(clk, kube, cp)
	for _, n := range in.nodes {
		if err := cluster.UpdateNode(ctx, n.DeepCopy()); err != nil {
			return scheduling.Results{}, fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	for _, p := range in.bound {
		if err := cluster.UpdatePod(ctx, p); err != nil {
			return scheduling.Results{}, fmt.Errorf("running pod %s: %w", p.Name, err)
		}
	}
	stateNodes := cluster.DeepCopyNodes().Active()
	topo, err := scheduling.NewTopology(ctx, kube, cluster, stateNodes, in.pools, in.instanceTypes, in.pods)
	if err != nil {
		return scheduling.Results{}, fmt.Errorf("topology: %w", err)
	}
	s := scheduling.NewScheduler(ctx, kube, in.pools, cluster, stateNodes, topo, in.instanceTypes, in.daemonPods,
		events.NewRecorder(&record.FakeRecorder{}), clk, nil, nil)
	return s.Solve(ctx, in.pods)
}

// translate turns a packbench snapshot into Karpenter's inputs. NodePools go
// through JSON (both types are the karpenter.sh/v1 schema).
func translate(snap *packer.Snapshot) (*karpInput, error) {
	in := &karpInput{instanceTypes: map[string][]*cloudprovider.InstanceType{}}
	classes := map[string]*karpenter.EC2NodeClass{}
	for _, nc := range snap.NodeClasses {
		classes[nc.Name] = nc
	}
	for _, np := range snap.NodePools {
		b, err := json.Marshal(np)
		if err != nil {
			return nil, err
		}
		// Unset durations marshal as null or "", which karpenter.sh/v1 reads as
		// an invalid duration; absent, they are unset there too.
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, err
		}
		if b, err = json.Marshal(dropEmpty(doc)); err != nil {
			return nil, err
		}
		var kp v1.NodePool
		if err := json.Unmarshal(b, &kp); err != nil {
			return nil, fmt.Errorf("NodePool %s: %w", np.Name, err)
		}
		in.pools = append(in.pools, &kp)
		var ov catalog.Overhead
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && classes[ref.Name] != nil {
			ov = catalog.OverheadFor(classes[ref.Name])
		}
		in.instanceTypes[np.Name] = instanceTypes(snap.Catalog, ov)
	}
	// Karpenter's provisioner orders pools by weight, then name.
	slices.SortStableFunc(in.pools, func(a, b *v1.NodePool) int {
		if c := cmp.Compare(ptrOr(b.Spec.Weight), ptrOr(a.Spec.Weight)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, ds := range snap.DaemonSets {
		in.daemonPods = append(in.daemonPods, daemonPod(ds))
	}
	for _, p := range snap.Pods {
		in.pods = append(in.pods, withUID(p))
	}
	for _, ns := range snap.Nodes {
		n := ns.Node.DeepCopy()
		if n.Spec.ProviderID == "" {
			n.Spec.ProviderID = "aws:///" + n.Labels[corev1.LabelTopologyZone] + "/i-" + n.Name
		}
		n.Labels[v1.NodeInitializedLabelKey] = "true"
		n.Labels[v1.NodeRegisteredLabelKey] = "true"
		in.nodes = append(in.nodes, n)
		for _, p := range ns.Pods {
			q := withUID(p)
			q.Spec.NodeName = n.Name
			in.bound = append(in.bound, q)
		}
	}
	return in, nil
}

// dropEmpty removes the empty strings and nulls of a decoded JSON document.
func dropEmpty(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == "" || e == nil {
				delete(t, k)
				continue
			}
			t[k] = dropEmpty(e)
		}
	case []any:
		for i := range t {
			t[i] = dropEmpty(t[i])
		}
	}
	return v
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func withUID(p *corev1.Pod) *corev1.Pod {
	q := p.DeepCopy()
	if q.UID == "" {
		q.UID = types.UID(q.Namespace + "/" + q.Name)
	}
	if q.Status.Phase == "" {
		q.Status.Phase = corev1.PodPending
	}
	return q
}

// daemonPod is the pod a DaemonSet would run on a node, as Karpenter's
// provisioner builds it from the template.
func daemonPod(ds *appsv1.DaemonSet) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: ds.Spec.Template.ObjectMeta, Spec: ds.Spec.Template.Spec}
	p = p.DeepCopy()
	p.Namespace, p.Name = ds.Namespace, ds.Name
	p.UID = types.UID("ds/" + ds.Namespace + "/" + ds.Name)
	return p
}

// instanceTypes is the catalog as Karpenter's cloud provider would report it
// for a node class configured as ov.
func instanceTypes(cat *catalog.Catalog, ov catalog.Overhead) []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, 0, len(cat.InstanceTypes))
	for i := range cat.InstanceTypes {
		it := &cat.InstanceTypes[i]
		var offs cloudprovider.Offerings
		zones, capTypes := map[string]bool{}, map[string]bool{}
		for _, o := range it.Offerings {
			offs = append(offs, &cloudprovider.Offering{
				Requirements: karpscheduling.NewLabelRequirements(map[string]string{
					v1.CapacityTypeLabelKey: o.CapacityType, corev1.LabelTopologyZone: o.Zone}),
				Price:     o.PricePerHour,
				Available: o.Available,
			})
			if o.Available {
				zones[o.Zone], capTypes[o.CapacityType] = true, true
			}
		}
		reqs := karpscheduling.NewLabelRequirements(catalog.InstanceLabels(it))
		reqs.Add(karpscheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, keys(zones)...))
		reqs.Add(karpscheduling.NewRequirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, keys(capTypes)...))
		for _, k := range awsLabels {
			if !reqs.Has(k) {
				reqs.Add(karpscheduling.NewRequirement(k, corev1.NodeSelectorOpDoesNotExist))
			}
		}
		out = append(out, &cloudprovider.InstanceType{
			Name:         it.Name,
			Requirements: reqs,
			Offerings:    offs,
			Capacity:     catalog.CapacityFor(it, ov),
			Overhead: &cloudprovider.InstanceTypeOverhead{
				KubeReserved:      catalog.KubeReserved(it, ov),
				SystemReserved:    catalog.SystemReserved(ov),
				EvictionThreshold: catalog.EvictionThreshold(it, ov),
			},
		})
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func rate(pods int, d time.Duration) string {
	if d <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", float64(pods)/d.Seconds())
}

func ratio(cost, bound float64) string {
	if bound <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", cost/bound)
}

func report(w io.Writer, rows []*row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tpods\tbound $/h\tjoiner pods/s\tkarpenter pods/s\tjoiner nodes\tkarpenter nodes\tjoiner $/h\tkarpenter $/h\tjoiner cost/bound\tkarpenter cost/bound\tjoiner unsched\tkarpenter unsched\t")
	for _, r := range rows {
		k := r.karp
		kr, kn, kc, kx, ku := rate(r.c.Pods, k.dur), fmt.Sprint(k.nodes), fmt.Sprintf("%.2f", k.cost), ratio(k.cost, k.bound), fmt.Sprint(k.unsched)
		if r.karpNote != "" {
			kr, kn, kc, kx, ku = "error", "-", "-", "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%s\t%s\t%d\t%s\t%.2f\t%s\t%s\t%s\t%d\t%s\t\n", r.c.Name, r.c.Pods, r.bound,
			rate(r.c.Pods, r.joiner.dur), kr, r.joiner.nodes, kn, r.joiner.cost, kc, ratio(r.joiner.cost, r.joiner.bound), kx, r.joiner.unsched, ku)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "pods/s: median wall time of packer.Solve, and of Karpenter's cluster state + NewTopology + NewScheduler + Solve, in this process;")
	fmt.Fprintln(w, "cost: new nodes only (room on existing nodes is free); a Karpenter NodeClaim at the cheapest available offering its options and requirements allow;")
	fmt.Fprintln(w, "bound: workload.LowerBound, the LP relaxation packbench reports; where a limit leaves pods pending, each engine's cost is judged")
	fmt.Fprintln(w, "against the bound of the pods it placed (workload.LowerBoundPlaced), and the bound column is Joiner's.")
	for _, r := range rows {
		if r.karpNote != "" {
			fmt.Fprintf(w, "%s: karpenter: %s\n", r.c.Name, r.karpNote)
		}
	}
}
