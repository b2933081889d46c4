package disruption

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// The engine reads every bound pod of every node on each call, which dominates a
// simulation in a large cluster. When none of the pods being placed has pod
// affinity, pod anti-affinity or topology spread constraints, Kubernetes lets a
// bound pod influence where they go only through its requests, its count against
// the node's pod limit, its host ports, the DaemonSet it belongs to, and its own
// anti-affinity. The compact view keeps the pods with ports, DaemonSet owners or
// inter-pod terms as they are and folds the rest of a node's pods into a pod
// requesting their sum, lowering the node's pod allocatable by the pods folded
// away: the same answer from a fraction of the reading.

// mergedNamespace holds the folded pods; no workload lives there.
const mergedNamespace = "joiner.merged"

// interPod reports whether p has terms that make other pods' positions matter.
func interPod(p *corev1.Pod) bool {
	if len(p.Spec.TopologySpreadConstraints) > 0 {
		return true
	}
	a := p.Spec.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

// keepAsIs reports whether a bound pod must stay itself in the compact view.
// DaemonSet pods fold too: the folded pod carries their owner references, which is
// how the engine, like Kubernetes, knows their DaemonSets already run there.
func keepAsIs(p *corev1.Pod) bool {
	return interPod(p) || len(facts.HostPorts(&p.Spec)) > 0
}

// compactable reports whether a simulation placing pods may use the compact view.
func compactable(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if interPod(p) {
			return false
		}
	}
	return true
}

// compactNode is ns (with the pods pinned to it) in the compact view, cached until
// the pods pinned to the node change.
func (s *state) compactNode(ns packer.NodeState) packer.NodeState {
	name := ns.Node.Name
	if c, ok := s.compact[name]; ok {
		return c
	}
	all := ns.Pods
	if extra := s.extra[name]; len(extra) > 0 {
		all = append(append(make([]*corev1.Pod, 0, len(ns.Pods)+len(extra)), ns.Pods...), extra...)
	}
	var keep []*corev1.Pod
	// A DaemonSet's owner reference is read in its pod's namespace, so DaemonSet
	// pods fold into one pod per namespace; the other pods' namespace no longer
	// matters and they join the first of those (or a pod of their own).
	folds := map[string]*corev1.Pod{}
	var order []string
	first := mergedNamespace
	for _, p := range all {
		if !facts.IsTerminal(p) && !keepAsIs(p) && facts.IsDaemonSetPod(p) {
			first = facts.PodNamespace(p)
			break
		}
	}
	folded := 0
	for _, p := range all {
		if facts.IsTerminal(p) {
			continue
		}
		if keepAsIs(p) {
			keep = append(keep, p)
			continue
		}
		ns := first
		if facts.IsDaemonSetPod(p) {
			ns = facts.PodNamespace(p)
		}
		f := folds[ns]
		if f == nil {
			f = &corev1.Pod{Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "merged",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}}}
			f.Name, f.Namespace = "joiner-merged-"+name, ns
			folds[ns] = f
			order = append(order, ns)
		}
		if ref := facts.DaemonSetRef(p); ref != nil {
			f.OwnerReferences = append(f.OwnerReferences, *ref)
		}
		sum := f.Spec.Containers[0].Resources.Requests
		for k, q := range s.requests(p) {
			cur := sum[k]
			cur.Add(q)
			sum[k] = cur
		}
		folded++
	}
	out := packer.NodeState{Node: ns.Node, Pods: all}
	if folded > len(folds) {
		for _, k := range order {
			keep = append(keep, folds[k])
		}
		node := *ns.Node
		node.Status.Allocatable = ns.Node.Status.Allocatable.DeepCopy()
		if q, ok := node.Status.Allocatable[corev1.ResourcePods]; ok {
			q.Sub(*resource.NewQuantity(int64(folded-len(folds)), resource.DecimalSI))
			node.Status.Allocatable[corev1.ResourcePods] = q
		}
		out = packer.NodeState{Node: &node, Pods: keep}
	}
	s.compact[name] = out
	return out
}
