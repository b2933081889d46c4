package shadow

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
)

// ConditionDisruptionReason is the condition Karpenter v1 sets on a NodeClaim it
// disrupts, its reason the method (Empty, Underutilized, Drifted, ...).
const ConditionDisruptionReason = "DisruptionReason"

// Observe is the snapshot of a state read at at: every NodeClaim, the pods pending
// now, and the pods the scheduler bound after since (the previous snapshot), with
// their waits. DaemonSet pods are left out: they wait for no node. created is
// when a pod or NodeClaim was created (its creationTimestamp when nil; a simulated
// cluster on a real API server keeps its simulated times elsewhere).
func Observe(st *kube.ClusterState, at, since time.Time, created func(metav1.Object) time.Time) Snapshot {
	if created == nil {
		created = func(o metav1.Object) time.Time { return o.GetCreationTimestamp().Time }
	}
	s := Snapshot{At: at.UTC()}
	for _, nc := range st.NodeClaims {
		c := NodeClaim{Name: nc.Name, NodePool: nc.Labels[karpenter.NodePoolLabelKey], InstanceType: nc.Labels[corev1.LabelInstanceTypeStable],
			Zone: nc.Labels[corev1.LabelTopologyZone], CapacityType: nc.Labels[karpenter.CapacityTypeLabelKey],
			Instance: facts.InstanceID(nc.Status.ProviderID), Node: nc.Status.NodeName, Created: created(nc).UTC(), Reason: reasonOf(nc)}
		if nc.DeletionTimestamp != nil {
			t := nc.DeletionTimestamp.UTC()
			c.Deleting = &t
		}
		s.NodeClaims = append(s.NodeClaims, c)
	}
	sort.Slice(s.NodeClaims, func(i, j int) bool { return s.NodeClaims[i].Name < s.NodeClaims[j].Name })
	seen := map[string]bool{}
	pending := append([]*corev1.Pod(nil), st.Snapshot.Pods...)
	for _, ps := range st.NominatedByNode {
		pending = append(pending, ps...)
	}
	for _, p := range pending {
		if k := facts.PodKey(p); !seen[k] && !facts.IsDaemonSetPod(p) {
			seen[k] = true
			s.Pods = append(s.Pods, PodWait{Pod: k, Created: created(p).UTC()})
		}
	}
	for node, ps := range st.PodsByNode {
		for _, p := range ps {
			c := podScheduled(p)
			if c == nil || c.Status != corev1.ConditionTrue || !c.LastTransitionTime.After(since) || facts.IsDaemonSetPod(p) {
				continue
			}
			if k := facts.PodKey(p); !seen[k] {
				seen[k] = true
				t := c.LastTransitionTime.UTC()
				s.Pods = append(s.Pods, PodWait{Pod: k, Created: created(p).UTC(), Scheduled: &t, Node: node})
			}
		}
	}
	sort.Slice(s.Pods, func(i, j int) bool { return s.Pods[i].Pod < s.Pods[j].Pod })
	return s
}

func podScheduled(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// reasonOf is why the NodeClaim is being disrupted, as far as its conditions say.
func reasonOf(nc *karpenter.NodeClaim) string {
	if c := meta.FindStatusCondition(nc.Status.Conditions, ConditionDisruptionReason); c != nil && c.Status == metav1.ConditionTrue && c.Reason != "" {
		return c.Reason
	}
	for _, t := range []string{karpenter.ConditionDrifted, karpenter.ConditionEmpty} {
		if meta.IsStatusConditionTrue(nc.Status.Conditions, t) {
			return t
		}
	}
	return ""
}
