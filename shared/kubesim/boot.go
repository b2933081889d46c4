package kubesim

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// boot is a registered Node still coming up: NotReady until Config.ReadyAfter
// has passed, then without its extended resources until Config.DevicePluginAfter
// has passed.
type boot struct {
	registered, readyAt time.Time
	ready               bool
	// capacity and alloc are the Node's full capacity and allocatable, to be
	// advertised once the device plugin runs (nil: nothing withheld).
	capacity, alloc corev1.ResourceList
}

// notReadyTaint is what the node lifecycle controller (TaintNodesByCondition)
// puts on a Node whose kubelet does not report Ready.
var notReadyTaint = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}

// withoutExtended returns rl without its extended resources (names in a domain
// other than kubernetes.io, such as nvidia.com/gpu): a device plugin's to add.
func withoutExtended(rl corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range rl {
		if !extendedResource(k) {
			out[k] = v
		}
	}
	return out
}

func extendedResource(name corev1.ResourceName) bool {
	n := string(name)
	return strings.Contains(n, "/") && !strings.HasPrefix(n, "kubernetes.io/") && !strings.HasPrefix(n, corev1.ResourceHugePagesPrefix)
}

// advanceBoots moves the Nodes coming up along: Ready (the not-ready taint
// lifted) ReadyAfter after registering, their extended resources advertised
// DevicePluginAfter after Ready.
func (c *Cluster) advanceBoots(ctx context.Context) error {
	now := c.cfg.Now()
	for _, name := range sortedKeys(c.boots) {
		b := c.boots[name]
		if !b.ready && !now.Before(b.registered.Add(c.cfg.ReadyAfter)) {
			if err := c.nodeUp(ctx, name, now, nil, nil); err != nil {
				return err
			}
			b.ready, b.readyAt = true, now
			c.logf("node ready", "node", name)
		}
		if b.ready && b.capacity != nil && !now.Before(b.readyAt.Add(c.cfg.DevicePluginAfter)) {
			if err := c.nodeUp(ctx, name, now, b.capacity, b.alloc); err != nil {
				return err
			}
			b.capacity, b.alloc = nil, nil
			c.logf("node advertises its extended resources", "node", name)
		}
		if b.ready && b.capacity == nil {
			delete(c.boots, name)
		}
	}
	return nil
}

// nodeUp reports a Node Ready (lifting the not-ready taint) and, when capacity
// is given, advertises it. A Node gone meanwhile is left alone.
func (c *Cluster) nodeUp(ctx context.Context, name string, now time.Time, capacity, alloc corev1.ResourceList) error {
	nodes := c.cs.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		t := metav1.NewTime(now)
		ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: t, LastTransitionTime: t}
		found := false
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				if n.Status.Conditions[i].Status == corev1.ConditionTrue {
					ready.LastTransitionTime = n.Status.Conditions[i].LastTransitionTime
				}
				n.Status.Conditions[i], found = ready, true
			}
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, ready)
		}
		if capacity != nil {
			n.Status.Capacity, n.Status.Allocatable = capacity.DeepCopy(), alloc.DeepCopy()
		}
		n, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(n.Spec.Taints, isNotReady) {
			return nil
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, isNotReady)
		_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		delete(c.boots, name)
		return nil
	}
	return errf(err, "node %s up", name)
}

// booting makes node, as KubeletNode built it, register the way its kubelet
// does under Config.ReadyAfter and Config.DevicePluginAfter: NotReady and
// tainted not-ready, without its extended resources, with Config.NodeAnnotations.
// The boot it returns says what is still to come.
func (c *Cluster) booting(node *corev1.Node) *boot {
	now := c.cfg.Now()
	b := &boot{registered: now, ready: c.cfg.ReadyAfter <= 0}
	if len(c.cfg.NodeAnnotations) > 0 {
		node.Annotations = maps.Clone(c.cfg.NodeAnnotations)
	}
	if c.cfg.ReadyAfter > 0 || c.cfg.DevicePluginAfter > 0 {
		// The device plugin registers extended resources only once it runs.
		capacity, alloc := withoutExtended(node.Status.Capacity), withoutExtended(node.Status.Allocatable)
		if len(capacity) != len(node.Status.Capacity) || len(alloc) != len(node.Status.Allocatable) {
			b.capacity, b.alloc = node.Status.Capacity, node.Status.Allocatable
			node.Status.Capacity, node.Status.Allocatable = capacity, alloc
		}
	}
	if b.ready {
		b.readyAt = now
		return b
	}
	for i := range node.Status.Conditions {
		if cd := &node.Status.Conditions[i]; cd.Type == corev1.NodeReady {
			cd.Status, cd.Reason, cd.Message = corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready"
		}
	}
	node.Spec.Taints = append(node.Spec.Taints, notReadyTaint)
	return b
}
