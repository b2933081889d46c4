package facts

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// protectedRoles are the node roles Joiner never disrupts, taints or deletes,
// whether a node carries them as labels or as taint keys: clusters mark their
// control plane one way or the other (kubeadm labels and taints control-plane;
// older ones use master), and infra nodes are kept out of autoscaling by the same
// convention.
var protectedRoles = []string{
	"node-role.kubernetes.io/control-plane",
	"node-role.kubernetes.io/master",
	"node-role.kubernetes.io/infra",
}

// IsProtectedNode reports whether n is a control-plane or infra node: never a
// disruption candidate, never tainted, drained or deleted, even if a NodeClaim
// seems to own it.
func IsProtectedNode(n *corev1.Node) bool {
	for _, k := range protectedRoles {
		if _, ok := n.Labels[k]; ok {
			return true
		}
		for _, t := range n.Spec.Taints {
			if t.Key == k {
				return true
			}
		}
	}
	return false
}

// NodeReady reports whether the node's Ready condition is True. A node without
// one (not yet reported by its kubelet) is not ready.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SubtractPod takes one pod off a node's free room, in place: its requests (as
// PodRequests returns them) and one pod slot, each floored at zero. Resources
// alloc does not list stay unlisted. alloc must be the caller's own copy: the
// quantities are changed where they are.
func SubtractPod(alloc, requests corev1.ResourceList) {
	for name, q := range requests {
		if cur, ok := alloc[name]; ok {
			cur.Sub(q)
			if cur.Sign() < 0 {
				cur = *resource.NewQuantity(0, cur.Format)
			}
			alloc[name] = cur
		}
	}
	if cur, ok := alloc[corev1.ResourcePods]; ok {
		cur.Sub(*resource.NewQuantity(1, resource.DecimalSI))
		if cur.Sign() < 0 {
			cur = *resource.NewQuantity(0, cur.Format)
		}
		alloc[corev1.ResourcePods] = cur
	}
}
