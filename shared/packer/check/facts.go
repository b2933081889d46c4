package check

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// The instance facts a plan is judged by come from shared/catalog: they are the
// project's statement of Karpenter's overhead rules and label set, and the engine is
// expected to agree with them exactly.

func typeAllocatable(it *catalog.InstanceType, nc *karpenter.EC2NodeClass) corev1.ResourceList {
	return catalog.Allocatable(it, catalog.OverheadFor(nc))
}

// typeCapacity is what a node of the type adds to its pool's usage. Karpenter counts
// limits in capacity (memory after VM overhead), with the default configuration.
func typeCapacity(it *catalog.InstanceType) corev1.ResourceList {
	return catalog.Capacity(it)
}

func offeringLabels(it *catalog.InstanceType, off catalog.Offering) map[string]string {
	return catalog.Labels(it, off)
}

func resourceOne() *resource.Quantity { return resource.NewQuantity(1, resource.DecimalSI) }

func corev1helpersFind(taints []corev1.Taint, tolerations []corev1.Toleration) (corev1.Taint, bool) {
	return corev1helpers.FindMatchingUntoleratedTaint(quiet, taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
}
