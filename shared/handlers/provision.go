package handlers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/disruption"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/nominate"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// launched is one NodeClaim a plan turned into an instance.
type launched struct {
	NodeClaim string
	Instance  cloud.Instance
	Price     float64
}

// defaultLaunchConcurrency is how many planned nodes are created, launched and
// recorded at once. A CreateFleet call takes about a second in an account and a
// burst plans a thousand nodes: one after another they would take a quarter of an
// hour. The client's rate limit (kube/access) and EC2's retrying client keep the
// two APIs' budgets.
const defaultLaunchConcurrency = 32

// perPodNominations is the most pods one invocation nominates with an Event each, as
// Karpenter does. Past it each NodeClaim's Launched Event names its pods: a
// thousand per-pod Events cost the API server seconds, far more than the decision.
const perPodNominations = 100

// launchJob is one planned node on its way to a launched NodeClaim.
type launchJob struct {
	nn    *packer.NewNode
	pool  *karpenter.NodePool
	class *karpenter.EC2NodeClass
	claim *karpenter.NodeClaim // once created
	inst  cloud.Instance
	rec   kube.Launch
	price float64
	err   error
	// quiet failures (the plan's pool or class vanished) emit no per-pod Events.
	quiet bool
	// recordErr is the first attempt's failure to record the launch.
	recordErr error
}

// launchPlan creates a NodeClaim per new node of the plan, then launches its
// instance. The NodeClaims come first so a concurrent invocation counts the capacity
// as in flight; a failed launch removes its NodeClaim again (terminating anything
// half-made), so the pods stay pending for the next attempt and nothing is orphaned.
// One node's failure does not stop the others. Outcomes, Events and the summary
// follow the plan's order.
func (d *Deps) launchPlan(ctx context.Context, st *kube.ClusterState, cat *catalog.Catalog, plan *packer.Plan, reason string, sum *Summary) []launched {
	pools := map[string]*karpenter.NodePool{}
	for _, p := range st.Snapshot.NodePools {
		pools[p.Name] = p
	}
	classes := map[string]*karpenter.EC2NodeClass{}
	for _, c := range st.Snapshot.NodeClasses {
		classes[c.Name] = c
	}
	pods := map[string]*corev1.Pod{}
	for _, p := range st.Snapshot.Pods {
		pods[facts.PodKey(p)] = p
	}
	jobs := make([]*launchJob, len(plan.NewNodes))
	for i := range plan.NewNodes {
		nn := &plan.NewNodes[i]
		j := &launchJob{nn: nn, pool: pools[nn.NodePool], class: classes[nn.NodeClass]}
		if j.pool == nil || j.class == nil {
			j.err, j.quiet = fmt.Errorf("node for pods %v: NodePool %q or EC2NodeClass %q vanished", nn.Pods, nn.NodePool, nn.NodeClass), true
		}
		jobs[i] = j
	}
	if d.Config.DryRun {
		for _, j := range jobs {
			if j.err == nil {
				d.dryRunLaunch(ctx, j)
			}
		}
	} else {
		d.launchJobs(ctx, cat, jobs, reason)
	}
	var out []launched
	var evs []kube.Event
	for _, j := range jobs {
		if j.err != nil {
			sum.fail(j.err)
			if j.quiet {
				continue
			}
			for _, key := range j.nn.Pods {
				if p := pods[key]; p != nil {
					evs = append(evs, kube.Event{Regarding: kube.PodRef(p), Type: corev1.EventTypeWarning, Reason: kube.ReasonLaunchFailed,
						Action: "Launch", Note: fmt.Sprintf("Could not launch a node for the pod: %v", j.err)})
				}
			}
			continue
		}
		if j.claim == nil { // dry run
			sum.DryRun = append(sum.DryRun, j.inst.DryRun...)
			continue
		}
		l := launched{NodeClaim: j.claim.Name, Instance: j.inst, Price: j.price}
		out = append(out, l)
		sum.NodesLaunched = append(sum.NodesLaunched, l.NodeClaim)
		sum.PricePerHour += l.Price
		d.Metrics.Add("NodesLaunched", "Count", 1)
		if j.rec.Pods != nil { // the Launched Event named them
			continue
		}
		target := fmt.Sprintf("nodeclaim/%s (%s %s in %s)", l.NodeClaim, l.Instance.CapacityType, l.Instance.InstanceType, l.Instance.Zone)
		for _, key := range j.nn.Pods {
			if p := pods[key]; p != nil {
				evs = append(evs, kube.Event{Regarding: kube.PodRef(p), Type: corev1.EventTypeNormal, Reason: kube.ReasonNominated,
					Action: "Nominate", Note: "Pod should schedule on: " + target})
			}
		}
	}
	d.recordAll(ctx, evs)
	return out
}

// launchJobs creates every planned node's NodeClaim, then launches the instances
// and records each launch on its NodeClaim. The NodeClaims come first so a
// concurrent invocation already counts them; the creations, and then the launches
// with their records, run d.launchConcurrency() at a time. At one at a time (replay)
// they go in plan order, so NodeClaim names (generateName, a counter in replay's
// cluster) and the simulator's IDs and addresses do not depend on timing and a
// replay is repeatable. Past perPodNominations pods, each Launched Event names the
// NodeClaim's pods instead of an Event per pod.
func (d *Deps) launchJobs(ctx context.Context, cat *catalog.Catalog, jobs []*launchJob, reason string) {
	pods := 0
	for _, j := range jobs {
		if j.err == nil {
			pods += len(j.nn.Pods)
		}
	}
	par := d.launchConcurrency()
	forEach(jobs, par, func(j *launchJob) {
		nc, err := d.Cluster.CreateNodeClaim(ctx, nodeClaimFor(j.pool, j.class, j.nn))
		if err != nil {
			j.err = fmt.Errorf("pods %v: %w", j.nn.Pods, err)
			return
		}
		j.claim = nc
	})
	bg := context.WithoutCancel(ctx)
	forEach(jobs, par, func(j *launchJob) {
		req := launchRequest(j.pool, j.class, j.nn)
		req.NodeClaim = j.claim.Name
		inst, err := d.Cloud.Launch(ctx, req)
		if err != nil {
			// Remove the NodeClaim (terminating whatever the failed launch left) so the
			// pods are planned afresh next time.
			ferr := d.Cluster.MarkLaunchFailed(bg, j.claim.Name, err, terminator{d.Cloud})
			j.err = errors.Join(fmt.Errorf("launch NodeClaim %s for pods %v: %w", j.claim.Name, j.nn.Pods, err), ferr)
			return
		}
		j.inst = inst
		j.rec, j.price = launchRecord(cat, j.class, j.nn, inst)
		if pods > perPodNominations {
			j.rec.Pods = j.nn.Pods
		}
		// One attempt here; retries wait (on replay's simulated clock too), so
		// they run afterwards, one at a time.
		_, j.recordErr = d.Cluster.MarkLaunched(bg, j.claim.Name, j.rec)
	})
	if err := d.Cloud.ConfirmLaunched(bg); err != nil {
		d.log().Error("could not confirm the tags of launched instances", "error", err.Error())
	}
	for _, j := range jobs {
		if j.err != nil || j.claim == nil {
			continue
		}
		if j.recordErr != nil {
			if err := d.markLaunched(bg, j.claim.Name, j.rec, j.recordErr); err != nil {
				// An instance its NodeClaim does not name would be capacity no decision
				// counts (the next plan launches again) until a timeout reaps it: remove
				// both, and the pods are planned afresh next time.
				_, terr := d.Cloud.Terminate(bg, j.inst.ID)
				ferr := d.Cluster.MarkLaunchFailed(bg, j.claim.Name, err, terminator{d.Cloud})
				j.err = errors.Join(fmt.Errorf("record launch of %s on NodeClaim %s: %w", j.inst.ID, j.claim.Name, err), terr, ferr)
				continue
			}
		}
		d.log().Info("launched", "nodeclaim", j.claim.Name, "reason", reason, "instance", j.inst.ID, "type", j.inst.InstanceType,
			"zone", j.inst.Zone, "capacityType", j.inst.CapacityType, "pods", len(j.nn.Pods), "fleetCalls", j.inst.FleetCalls)
	}
}

// forEach runs fn on each job that has not failed, par at a time; at one at a
// time, in order.
func forEach(jobs []*launchJob, par int, fn func(*launchJob)) {
	if par <= 1 {
		for _, j := range jobs {
			if j.err == nil {
				fn(j)
			}
		}
		return
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, j := range jobs {
		if j.err != nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(j)
		}()
	}
	wg.Wait()
}

func (d *Deps) dryRunLaunch(ctx context.Context, j *launchJob) {
	req := launchRequest(j.pool, j.class, j.nn)
	req.NodeClaim = j.pool.Name + "-dryrun"
	inst, err := d.Cloud.Launch(ctx, req)
	if err != nil {
		j.err = fmt.Errorf("dry-run launch for pods %v: %w", j.nn.Pods, err)
		return
	}
	j.inst = inst
}

// launchRequest is the launch of a planned node: its zone first, then the
// other zones and capacity types its requirements (its NodeClaim's) allow.
func launchRequest(pool *karpenter.NodePool, class *karpenter.EC2NodeClass, nn *packer.NewNode) cloud.LaunchRequest {
	req := cloud.RequestFor(*nn, class)
	req.NodePool = pool.Name
	req.Taints = append(append([]corev1.Taint(nil), pool.Spec.Template.Spec.Taints...), pool.Spec.Template.Spec.StartupTaints...)
	return req
}

// launchRecord is what the NodeClaim records about its instance, and the price of
// the offering it got.
func launchRecord(cat *catalog.Catalog, class *karpenter.EC2NodeClass, nn *packer.NewNode, inst cloud.Instance) (kube.Launch, float64) {
	l := kube.Launch{ProviderID: inst.ProviderID, InstanceType: inst.InstanceType, Zone: inst.Zone,
		CapacityType: inst.CapacityType, ImageID: inst.ImageID}
	price := nn.PricePerHour
	if it, ok := cat.Lookup(inst.InstanceType); ok {
		over := catalog.OverheadFor(class)
		l.Capacity = catalog.CapacityFor(it, over)
		l.Allocatable = catalog.Allocatable(it, over)
		l.Labels = catalog.InstanceLabels(it)
		if class != nil {
			// The zone the launch got (a fallback may differ from the plan's).
			if id := class.ZoneIDs()[inst.Zone]; id != "" {
				l.Labels[karpenter.LabelTopologyZoneID] = id
			}
		}
		if inst.CapacityReservationID != "" {
			// The labels Karpenter puts on a node in a reservation.
			l.Labels[karpenter.LabelCapacityReservationID] = inst.CapacityReservationID
			l.Labels[karpenter.LabelCapacityReservationType] = inst.CapacityReservationType
		}
		for _, o := range it.Offerings {
			if o.Zone == inst.Zone && o.CapacityType == inst.CapacityType {
				price = o.PricePerHour
			}
		}
		if inst.CapacityType == karpenter.CapacityTypeReserved {
			price = packer.ReservedPrice(it, inst.Zone)
		}
	}
	return l, price
}

// eventWriters bounds the concurrent Event writes of one invocation.
const eventWriters = 16

// recordAll writes Events concurrently: one per pod of a large batch, written one
// after another, took seconds against a real API server, far more than the
// decision itself. Events are best effort and their names do not depend on order.
func (d *Deps) recordAll(ctx context.Context, evs []kube.Event) {
	if d.Config.DryRun || len(evs) == 0 {
		return
	}
	sem := make(chan struct{}, eventWriters)
	var wg sync.WaitGroup
	for _, e := range evs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.Cluster.Record(ctx, e)
		}()
	}
	wg.Wait()
}

// nodeClaimFor builds the NodeClaim for a planned node.
func nodeClaimFor(pool *karpenter.NodePool, class *karpenter.EC2NodeClass, nn *packer.NewNode) *karpenter.NodeClaim {
	labels := map[string]string{}
	for k, v := range pool.Spec.Template.ObjectMeta.Labels {
		labels[k] = v
	}
	labels[karpenter.NodePoolLabelKey] = pool.Name
	labels[karpenter.NodeClassLabelKey] = nn.NodeClass
	annotations := map[string]string{}
	for k, v := range pool.Spec.Template.ObjectMeta.Annotations {
		annotations[k] = v
	}
	// Drift detection compares these with the current pool and class.
	annotations[disruption.NodePoolHashAnnotation] = disruption.NodePoolHash(pool)
	annotations[disruption.NodePoolHashVersionAnnotation] = disruption.HashVersion
	annotations[disruption.NodeClassHashAnnotation] = disruption.NodeClassHash(class)
	annotations[disruption.NodeClassHashVersionAnnotation] = disruption.HashVersion
	if len(nn.Pods) > 0 {
		annotations[nominate.PlannedPodsAnnotation] = nominate.PlannedPodsValue(nn.Pods)
	}
	t := pool.Spec.Template.Spec
	return &karpenter.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: karpenter.APIVersion, Kind: karpenter.NodeClaimKind},
		ObjectMeta: metav1.ObjectMeta{GenerateName: pool.Name + "-", Labels: labels, Annotations: annotations,
			// As Karpenter's provisioner writes it: deleting the NodePool in the
			// foreground waits for its NodeClaims.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: karpenter.APIVersion, Kind: karpenter.NodePoolKind, Name: pool.Name, UID: pool.UID,
				BlockOwnerDeletion: ptr.To(true)}}},
		Spec: karpenter.NodeClaimSpec{
			Taints: t.Taints, StartupTaints: t.StartupTaints, Requirements: nn.Requirements,
			NodeClassRef: t.NodeClassRef, TerminationGracePeriod: t.TerminationGracePeriod, ExpireAfter: t.ExpireAfter,
		},
	}
}

// reservations asks EC2 which capacity reservations each class selects and how
// many instances each can still take, for the plan: a status another
// controller wrote (or Karpenter's, left behind) is not trusted for that. A
// reservation a launch found full is left out while the unavailable-offerings
// cache remembers it. A class whose reservations cannot be read plans without
// them (its pools fall back to spot and on-demand), logged, rather than failing
// every pool.
func (d *Deps) reservations(ctx context.Context, classes []*karpenter.EC2NodeClass) []packer.Reservation {
	var out []packer.Reservation
	at := map[string]int{}
	for _, nc := range classes {
		if len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
			continue
		}
		crs, err := d.Cloud.CapacityReservations(ctx, nc)
		if err != nil {
			d.log().Warn("could not read the EC2NodeClass's capacity reservations; planning without them", "nodeClass", nc.Name, "error", err.Error())
			continue
		}
		for _, cr := range crs {
			if u := d.Cloud.Unavailable(); u != nil && u.IsUnavailable(cr.InstanceType, cr.Zone, cloud.ReservedCapacityType(cr.ID)) {
				continue
			}
			if i, ok := at[cr.ID]; ok {
				out[i].NodeClasses = append(out[i].NodeClasses, nc.Name)
				continue
			}
			at[cr.ID] = len(out)
			out = append(out, packer.Reservation{ID: cr.ID, InstanceType: cr.InstanceType, Zone: cr.Zone, Type: cr.Type,
				Available: int(cr.Available), NodeClasses: []string{nc.Name}})
		}
	}
	return out
}

// markLaunched retries recording a launch whose first attempt failed with first:
// the instance already runs, so a transient API-server failure here must not cost it.
func (d *Deps) markLaunched(ctx context.Context, name string, l kube.Launch, first error) error {
	err := first
	for attempt := 1; attempt < 3; attempt++ {
		if serr := d.sleep(ctx, time.Duration(attempt)*200*time.Millisecond); serr != nil {
			return errors.Join(err, serr)
		}
		if _, err = d.Cluster.MarkLaunched(ctx, name, l); err == nil {
			return nil
		}
	}
	return err
}
