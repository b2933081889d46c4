package kubesim

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/nodeboot"
)

// kubelet removes the nodes whose instance is gone, registers the nodes of instances
// launched for NodeClaims, and lifts startup taints once Joiner has registered a node
// (the agent that owns a startup taint removes it when the node is up).
func (c *Cluster) kubelet(ctx context.Context, r *Report) error {
	if c.cfg.Instances == nil {
		return nil
	}
	if err := c.removeGone(ctx, r); err != nil {
		return err
	}
	if err := c.advanceBoots(ctx); err != nil {
		return err
	}
	claims, err := c.listNodeClaims(ctx)
	if err != nil {
		return err
	}
	nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return errf(err, "list nodes")
	}
	byProvider := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byProvider[nodes.Items[i].Spec.ProviderID] = &nodes.Items[i]
	}
	for _, nc := range claims {
		pid := nc.Status.ProviderID
		if pid == "" {
			continue
		}
		if n := byProvider[pid]; n != nil {
			if err := c.liftStartupTaints(ctx, n, nc); err != nil {
				return err
			}
			continue
		}
		in, ok := c.cfg.Instances.Instance(facts.InstanceID(pid))
		if !ok || in.State != awssim.StateRunning || c.cfg.Now().Before(in.LaunchTime.Add(c.cfg.RegisterAfter)) || c.bootFailed[pid] {
			continue
		}
		var join *nodeboot.Join
		if c.cfg.Boot != nil {
			res := c.cfg.Boot(ctx, in.ID)
			if res.Err != nil {
				// The node never registers: its NodeClaim times out (lifecycle
				// decides when) and Joiner terminates the instance.
				c.bootFailed[pid] = true
				r.BootFailed = append(r.BootFailed, BootFailure{NodeClaim: nc.Name, Instance: in.ID, Cause: res.Err.Error()})
				c.bootFailedEvent(ctx, nc, in.ID, res.Err)
				c.cfg.Log.Warn("node never registers: its user data does not join it", "nodeclaim", nc.Name, "instance", in.ID, "cause", res.Err.Error())
				continue
			}
			join = res.Join
		}
		name, err := c.register(ctx, nc, in, join)
		if err != nil {
			return err
		}
		r.Registered = append(r.Registered, name)
	}
	return nil
}

// register creates the Node the kubelet of in would register (KubeletNode).
func (c *Cluster) register(ctx context.Context, nc *karpenter.NodeClaim, in awssim.Instance, join *nodeboot.Join) (string, error) {
	node := KubeletNode(nc, in, join, c.cfg.Catalog, c.cfg.Now())
	name := node.Name
	b := c.booting(node)
	out, err := c.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", errf(err, "register node %s", name)
	}
	if err == nil && c.real != nil {
		c.real.track(nodesGVR, "", name)
		if err := c.writeNodeStatus(ctx, out, node.Status); err != nil {
			return "", err
		}
	}
	c.nodes[nc.Status.ProviderID] = name
	if !b.ready || b.capacity != nil {
		c.boots[name] = b
	}
	c.logf("node registered", "node", name, "nodeclaim", nc.Name, "type", in.InstanceType, "capacityType", in.CapacityType, "zone", in.Zone)
	return name, nil
}

// bootFailedEvent shows on the NodeClaim why its node never registers, as the
// instance's console (cloud-init's log) would tell whoever read it.
func (c *Cluster) bootFailedEvent(ctx context.Context, nc *karpenter.NodeClaim, instance string, cause error) {
	note := "instance " + instance + " never joins: " + cause.Error()
	if len(note) > 1000 {
		note = note[:1000]
	}
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: nc.Name + ".bootfailed", Namespace: metav1.NamespaceDefault},
		EventTime:           metav1.NewMicroTime(c.cfg.Now()),
		ReportingController: "kubesim/cloud-init",
		ReportingInstance:   instance,
		Action:              "Bootstrap",
		Reason:              ReasonNodeBootFailed,
		Regarding:           kube.NodeClaimRef(nc),
		Note:                note,
		Type:                corev1.EventTypeWarning,
	}
	if _, err := c.cs.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		c.cfg.Log.Warn("event not recorded", "reason", ReasonNodeBootFailed, "nodeclaim", nc.Name, "error", err.Error())
	}
}

// ReasonNodeBootFailed is the reason of the Event on a NodeClaim whose instance's
// user data never joins it.
const ReasonNodeBootFailed = "NodeBootFailed"

func (c *Cluster) liftStartupTaints(ctx context.Context, n *corev1.Node, nc *karpenter.NodeClaim) error {
	if len(nc.Spec.StartupTaints) == 0 || !facts.NodeReady(n) ||
		slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpenter.UnregisteredTaintKey }) {
		return nil
	}
	before := len(n.Spec.Taints)
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return slices.ContainsFunc(nc.Spec.StartupTaints, func(s corev1.Taint) bool { return s.MatchTaint(&t) })
	})
	if len(n.Spec.Taints) == before {
		return nil
	}
	_, err := c.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil // Joiner wrote the node meanwhile (a real server): the next step retries
	}
	return errf(err, "lift startup taints of node %s", n.Name)
}

// removeGone deletes the nodes this kubelet registered whose instance is no longer
// running, with their pods: the node controller would mark them NotReady and the
// pods' controllers recreate them elsewhere.
func (c *Cluster) removeGone(ctx context.Context, r *Report) error {
	for _, pid := range sortedKeys(c.nodes) {
		name := c.nodes[pid]
		if in, ok := c.cfg.Instances.Instance(facts.InstanceID(pid)); ok && (in.State == awssim.StateRunning || in.State == awssim.StatePending) {
			continue
		}
		delete(c.nodes, pid)
		lost, err := c.deletePodsOn(ctx, name)
		if err != nil {
			return err
		}
		r.Lost = append(r.Lost, lost...)
		err = c.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return errf(err, "remove node %s", name)
		}
		if err == nil {
			r.Removed = append(r.Removed, name)
			c.logf("node removed: its instance is gone", "node", name)
		}
	}
	return nil
}

// deletePodsOn deletes the pods bound to a node and returns the bare ones, which
// nothing recreates.
func (c *Cluster) deletePodsOn(ctx context.Context, node string) ([]string, error) {
	pods, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, errf(err, "list pods")
	}
	var lost []string
	for _, p := range pods.Items {
		if p.Spec.NodeName != node {
			continue
		}
		if err := c.deletePod(ctx, p.Namespace, p.Name); err != nil && !apierrors.IsNotFound(err) {
			return lost, errf(err, "delete pod %s/%s", p.Namespace, p.Name)
		}
		if _, ok := controllerOf(&p); !ok && !facts.IsDaemonSetPod(&p) {
			lost = append(lost, facts.PodKey(&p))
		}
	}
	return lost, nil
}

func (c *Cluster) listNodeClaims(ctx context.Context) ([]*karpenter.NodeClaim, error) {
	list, err := c.dyn.Resource(kube.NodeClaimGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, errf(err, "list NodeClaims")
	}
	out := make([]*karpenter.NodeClaim, 0, len(list.Items))
	for i := range list.Items {
		nc, err := kube.NodeClaimFromUnstructured(&list.Items[i])
		if err != nil {
			return nil, errf(err, "read NodeClaim %s", list.Items[i].GetName())
		}
		out = append(out, nc)
	}
	// The fake tracker lists in map order; the simulation must not depend on it, or two
	// replays of one scenario register (and then schedule onto) nodes in different orders.
	slices.SortFunc(out, func(a, b *karpenter.NodeClaim) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// KubeletNode is the Node the kubelet of instance in registers for NodeClaim nc, as
// Joiner's user data starts it: with a join (the executed user data's), its name,
// provider ID, labels and taints; without, the NodeClaim's labels and taints
// (unregistered first), named after the instance. Either way the kubelet's own
// labels, the instance type's capacity (the NodeClaim's, else cat's) and a Ready
// condition. Tests that play the kubelet beside a real API server create it too.
func KubeletNode(nc *karpenter.NodeClaim, in awssim.Instance, join *nodeboot.Join, cat *catalog.Catalog, now time.Time) *corev1.Node {
	labels := map[string]string{}
	name, providerID := in.ID, nc.Status.ProviderID
	taints := bootstrap.NodeTaints(append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...))
	if join != nil {
		maps.Copy(labels, join.Labels)
		name, taints = join.NodeName, slices.Clone(join.Taints)
		if join.ProviderID != "" { // else the cloud controller sets aws:///<zone>/<id>
			providerID = join.ProviderID
		}
	} else {
		maps.Copy(labels, nc.Labels)
	}
	labels[corev1.LabelHostname] = name
	labels[corev1.LabelOSStable] = "linux"
	labels[corev1.LabelInstanceTypeStable] = in.InstanceType
	labels[corev1.LabelTopologyZone] = in.Zone
	labels[corev1.LabelTopologyRegion] = strings.TrimRight(in.Zone, "abcdefghijklmnopqrstuvwxyz")
	labels[karpenter.CapacityTypeLabelKey] = in.CapacityType
	it, known := cat.Lookup(in.InstanceType)
	if known {
		labels[corev1.LabelArchStable] = it.Arch // the kubelet's own, from the machine
	}
	karpenter.SetDeprecatedLabels(labels)
	capacity, alloc := nc.Status.Capacity, nc.Status.Allocatable
	if len(alloc) == 0 && known {
		capacity, alloc = catalog.CapacityFor(it, catalog.OverheadFor(nil)), catalog.Allocatable(it, catalog.OverheadFor(nil))
	}
	ts := metav1.NewTime(now)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: providerID, Taints: taints},
		Status: corev1.NodeStatus{Capacity: capacity.DeepCopy(), Allocatable: alloc.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: ts, LastTransitionTime: ts}}},
	}
	if _, ok := node.Status.Allocatable[corev1.ResourcePods]; !ok && node.Status.Allocatable != nil {
		node.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
	}
	return node
}
