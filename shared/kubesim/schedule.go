package kubesim

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// schedule binds pending pods to Ready nodes. Where each goes is the packing engine's
// answer for a snapshot holding only the existing nodes (no NodePools, so it opens no
// node): node affinity, taints, topology spread, host ports and DaemonSet overhead
// are judged exactly as the provisioner judges them. Pods left over are marked
// PodScheduled=False/Unschedulable.
func (c *Cluster) schedule(ctx context.Context, r *Report, pods *[]*corev1.Pod) error {
	var pending []*corev1.Pod
	bound := map[string][]*corev1.Pod{}
	index := map[*corev1.Pod]int{}
	for i, p := range *pods {
		index[p] = i
		switch {
		case !facts.IsActive(p) || facts.IsDaemonSetPod(p):
		case p.Spec.NodeName != "":
			bound[p.Spec.NodeName] = append(bound[p.Spec.NodeName], p)
		default:
			pending = append(pending, p)
		}
	}
	c.waits.keepOnly(pending)
	if len(pending) == 0 {
		return nil
	}
	snap, err := c.schedulingSnapshot(ctx, pending, bound)
	if err != nil {
		return err
	}
	// Nothing changed since the last attempt left these pods pending: the answer
	// would be the same.
	sig := signature(snap)
	if sig == c.lastSchedule {
		return nil
	}
	plan := packer.Solve(snap, packer.Options{Prepared: c.prep()})
	byKey := make(map[string]*corev1.Pod, len(pending))
	for _, p := range pending {
		byKey[facts.PodKey(p)] = p
		c.waits.pending(p)
	}
	now := c.cfg.Now()
	for _, en := range plan.ExistingNodes {
		for _, key := range en.Pods {
			p := byKey[key]
			out, err := c.bind(ctx, p, en.Name, now)
			if err != nil {
				return err
			}
			if out != nil {
				(*pods)[index[p]] = out
				r.Bound++
			}
		}
	}
	c.lastSchedule = ""
	if r.Bound == 0 {
		c.lastSchedule = sig
	}
	for _, u := range plan.Unschedulable {
		p := byKey[u.Pod]
		marked, err := c.markUnschedulable(ctx, p, fmt.Sprintf("0/%d nodes are available: %s", len(snap.Nodes), u.Reason))
		if err != nil {
			return err
		}
		if marked {
			r.Unschedulable = append(r.Unschedulable, PodRef{p.Namespace, p.Name})
		}
	}
	return nil
}

func (c *Cluster) schedulingSnapshot(ctx context.Context, pending []*corev1.Pod, bound map[string][]*corev1.Pod) (*packer.Snapshot, error) {
	nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, errf(err, "list nodes")
	}
	ds, err := c.cs.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, errf(err, "list daemonsets")
	}
	snap := &packer.Snapshot{Pods: pending, Catalog: c.cfg.Catalog}
	for i := range ds.Items {
		snap.DaemonSets = append(snap.DaemonSets, &ds.Items[i])
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if facts.NodeReady(n) && n.DeletionTimestamp == nil {
			snap.Nodes = append(snap.Nodes, packer.NodeState{Node: n, Pods: bound[n.Name]})
		}
	}
	return snap, nil
}

// bind does what the scheduler's binding and the kubelet's start do: the pod is on
// the node, running and ready.
func (c *Cluster) bind(ctx context.Context, p *corev1.Pod, node string, now time.Time) (*corev1.Pod, error) {
	if c.real != nil {
		return c.bindReal(ctx, p, node, now)
	}
	p = p.DeepCopy()
	p.Spec.NodeName = node
	t := metav1.NewTime(now)
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &t
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t},
	}
	out, err := c.cs.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errf(err, "bind pod %s/%s to %s", p.Namespace, p.Name, node)
	}
	c.waits.bound(p, now)
	return out, nil
}

// markUnschedulable sets PodScheduled=False/Unschedulable; it reports whether the
// pod was not marked so before (a new pod for the forwarder to report).
func (c *Cluster) markUnschedulable(ctx context.Context, p *corev1.Pod, msg string) (bool, error) {
	for _, cd := range p.Status.Conditions {
		if cd.Type == corev1.PodScheduled && cd.Status == corev1.ConditionFalse && cd.Reason == corev1.PodReasonUnschedulable {
			return false, nil
		}
	}
	p = p.DeepCopy()
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.NewTime(c.cfg.Now())}}
	if _, err := c.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil // gone, or changed meanwhile (a real server): the next step sees it
		}
		return false, errf(err, "mark pod %s/%s unschedulable", p.Namespace, p.Name)
	}
	return true, nil
}

// signature identifies what a scheduling attempt looked at: the pending pods and
// each node's taints, unschedulable flag and bound pods.
func signature(snap *packer.Snapshot) string {
	h := fnv.New64a()
	for _, p := range snap.Pods {
		h.Write([]byte(p.UID))
	}
	for _, n := range snap.Nodes {
		fmt.Fprintf(h, "|%s/%s/%d/%t/%d", n.Node.Name, n.Node.ResourceVersion, len(n.Node.Spec.Taints), n.Node.Spec.Unschedulable, len(n.Pods))
		for _, p := range n.Pods {
			h.Write([]byte(p.UID))
		}
	}
	return fmt.Sprintf("%d/%d/%x", len(snap.Pods), len(snap.Nodes), h.Sum64())
}
