package kubesim

import (
	"context"
	"math"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/joiner-autoscaler/joiner/shared/facts"
)

// updatePDBs computes each PodDisruptionBudget's status as the disruption controller
// does: healthy pods are running and ready, expected pods are the selected pods'
// workload replicas (or the pods themselves when bare), and disruptionsAllowed is
// what the budget leaves.
func (c *Cluster) updatePDBs(ctx context.Context, _ *Report, pods *[]*corev1.Pod) error {
	pdbs, err := c.cs.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil || len(pdbs.Items) == 0 {
		return errf(err, "list poddisruptionbudgets")
	}
	for i := range pdbs.Items {
		pdb := &pdbs.Items[i]
		old := *pdb.Status.DeepCopy()
		c.budgetStatus(pdb, *pods)
		if reflect.DeepEqual(old, pdb.Status) {
			continue
		}
		if _, err := c.cs.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
			return errf(err, "update PodDisruptionBudget %s/%s status", pdb.Namespace, pdb.Name)
		}
	}
	return nil
}

// budgetStatus fills pdb.Status.
func (c *Cluster) budgetStatus(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		sel = labels.Nothing()
	}
	healthy, expected := 0, 0
	owners := map[workloadKey]bool{}
	for _, p := range pods {
		if p.Namespace != pdb.Namespace || !facts.IsActive(p) || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			healthy++
		}
		if k, ok := controllerOf(p); ok && c.workloads[k] != nil {
			if !owners[k] {
				owners[k] = true
				expected += c.workloads[k].replicas
			}
		} else {
			expected++
		}
	}
	desired := 0
	switch {
	case pdb.Spec.MinAvailable != nil:
		desired = scaled(pdb.Spec.MinAvailable, expected)
	case pdb.Spec.MaxUnavailable != nil:
		desired = max(0, expected-scaled(pdb.Spec.MaxUnavailable, expected))
	}
	pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy, pdb.Status.ExpectedPods = int32(healthy), int32(desired), int32(expected)
	pdb.Status.DisruptionsAllowed = int32(max(0, healthy-desired))
	pdb.Status.ObservedGeneration = pdb.Generation
}

// scaled resolves an int-or-percent against total, rounding up as the disruption
// controller does.
func scaled(v *intstr.IntOrString, total int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, true)
	if err != nil {
		return math.MaxInt32
	}
	return n
}
