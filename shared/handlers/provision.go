package handlers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/disruption"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// launched is one NodeClaim a plan turned into an instance.
type launched struct {
	NodeClaim string
	Instance  cloud.Instance
	Price     float64
}

// launchPlan creates a NodeClaim per new node of the plan, then launches its
// instance. The NodeClaim comes first so a concurrent invocation counts the capacity
// as in flight; a failed launch removes it again (terminating anything half-made), so
// the pods stay pending for the next attempt and nothing is orphaned. One node's
// failure does not stop the others.
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
		pods[p.Namespace+"/"+p.Name] = p
	}
	var out []launched
	for i := range plan.NewNodes {
		nn := &plan.NewNodes[i]
		pool, class := pools[nn.NodePool], classes[nn.NodeClass]
		if pool == nil || class == nil {
			sum.fail(fmt.Errorf("node for pods %v: NodePool %q or EC2NodeClass %q vanished", nn.Pods, nn.NodePool, nn.NodeClass))
			continue
		}
		l, err := d.launchNode(ctx, pool, class, cat, nn, reason)
		if err != nil {
			sum.fail(err)
			for _, key := range nn.Pods {
				if p := pods[key]; p != nil {
					d.record(ctx, kube.Event{Regarding: kube.PodRef(p), Type: corev1.EventTypeWarning, Reason: "FailedLaunch",
						Action: "Launch", Note: fmt.Sprintf("Could not launch a node for the pod: %v", err)})
				}
			}
			continue
		}
		if l.Instance.ID == "" { // dry run
			sum.DryRun = append(sum.DryRun, l.Instance.DryRun...)
			continue
		}
		out = append(out, l)
		sum.NodesLaunched = append(sum.NodesLaunched, l.NodeClaim)
		sum.PricePerHour += l.Price
		d.Metrics.Add("NodesLaunched", "Count", 1)
		for _, key := range nn.Pods {
			if p := pods[key]; p != nil {
				d.record(ctx, kube.Event{Regarding: kube.PodRef(p), Type: corev1.EventTypeNormal, Reason: "Nominated",
					Action: "Nominate", Note: fmt.Sprintf("Pod should schedule on: nodeclaim/%s (%s %s in %s)", l.NodeClaim, l.Instance.CapacityType, l.Instance.InstanceType, l.Instance.Zone)})
			}
		}
	}
	return out
}

func (d *Deps) record(ctx context.Context, e kube.Event) {
	if d.Config.DryRun {
		return
	}
	d.Cluster.Record(ctx, e)
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
	t := pool.Spec.Template.Spec
	return &karpenter.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: karpenter.APIVersion, Kind: karpenter.NodeClaimKind},
		ObjectMeta: metav1.ObjectMeta{GenerateName: pool.Name + "-", Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: karpenter.APIVersion, Kind: karpenter.NodePoolKind, Name: pool.Name, UID: pool.UID}}},
		Spec: karpenter.NodeClaimSpec{
			Taints: t.Taints, StartupTaints: t.StartupTaints, Requirements: nn.Requirements,
			NodeClassRef: t.NodeClassRef, TerminationGracePeriod: t.TerminationGracePeriod, ExpireAfter: t.ExpireAfter,
		},
	}
}

// capacityTypes are the capacity types a node may launch with: the plan's choice
// first, then on-demand when the pool allows it, so a spot shortage falls back.
func capacityTypes(pool *karpenter.NodePool, chosen string) []string {
	out := []string{chosen}
	if chosen == karpenter.CapacityTypeSpot {
		od := map[string]string{karpenter.CapacityTypeLabelKey: karpenter.CapacityTypeOnDemand}
		allowed := true
		for _, r := range pool.Spec.Template.Spec.Requirements {
			if r.Key == karpenter.CapacityTypeLabelKey && !r.MatchesLabels(od) {
				allowed = false
			}
		}
		if allowed {
			out = append(out, karpenter.CapacityTypeOnDemand)
		}
	}
	return out
}

func (d *Deps) launchNode(ctx context.Context, pool *karpenter.NodePool, class *karpenter.EC2NodeClass, cat *catalog.Catalog, nn *packer.NewNode, reason string) (launched, error) {
	req := cloud.LaunchRequest{
		NodePool: pool.Name, NodeClass: class, InstanceTypes: nn.Options, Zones: []string{nn.Zone},
		CapacityTypes: capacityTypes(pool, nn.CapacityType), Labels: nn.Labels,
		Taints: append(append([]corev1.Taint(nil), pool.Spec.Template.Spec.Taints...), pool.Spec.Template.Spec.StartupTaints...),
	}
	if d.Config.DryRun {
		req.NodeClaim = pool.Name + "-dryrun"
		inst, err := d.Cloud.Launch(ctx, req)
		if err != nil {
			return launched{}, fmt.Errorf("dry-run launch for pods %v: %w", nn.Pods, err)
		}
		return launched{Instance: inst}, nil
	}
	nc, err := d.Cluster.CreateNodeClaim(ctx, nodeClaimFor(pool, class, nn))
	if err != nil {
		return launched{}, fmt.Errorf("pods %v: %w", nn.Pods, err)
	}
	req.NodeClaim = nc.Name
	inst, err := d.Cloud.Launch(ctx, req)
	if err != nil {
		// Remove the NodeClaim (terminating whatever the failed launch left) so the
		// pods are planned afresh next time.
		ferr := d.Cluster.MarkLaunchFailed(context.WithoutCancel(ctx), nc.Name, err, terminator{d.Cloud})
		return launched{}, errors.Join(fmt.Errorf("launch NodeClaim %s for pods %v: %w", nc.Name, nn.Pods, err), ferr)
	}
	l := kube.Launch{ProviderID: inst.ProviderID, InstanceType: inst.InstanceType, Zone: inst.Zone,
		CapacityType: inst.CapacityType, ImageID: inst.ImageID}
	price := nn.PricePerHour
	if it, ok := cat.Lookup(inst.InstanceType); ok {
		over := catalog.OverheadFor(class)
		l.Capacity = catalog.CapacityFor(it, over)
		l.Allocatable = catalog.Allocatable(it, over)
		l.Labels = catalog.InstanceLabels(it)
		for _, o := range it.Offerings {
			if o.Zone == inst.Zone && o.CapacityType == inst.CapacityType {
				price = o.PricePerHour
			}
		}
	}
	if _, err := d.Cluster.MarkLaunched(context.WithoutCancel(ctx), nc.Name, l); err != nil {
		// The instance runs and carries the NodeClaim's name in its tags; the next
		// reconcile (or leak clean-up) settles it. Report, don't terminate.
		return launched{NodeClaim: nc.Name, Instance: inst, Price: price}, fmt.Errorf("record launch of %s on NodeClaim %s: %w", inst.ID, nc.Name, err)
	}
	d.log().Info("launched", "nodeclaim", nc.Name, "reason", reason, "instance", inst.ID, "type", inst.InstanceType,
		"zone", inst.Zone, "capacityType", inst.CapacityType, "pods", len(nn.Pods), "fleetCalls", inst.FleetCalls)
	return launched{NodeClaim: nc.Name, Instance: inst, Price: price}, nil
}
