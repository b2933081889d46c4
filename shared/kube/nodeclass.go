package kube

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// NodeClassStatus merges a freshly resolved status into the one an EC2NodeClass
// carries, as Karpenter's status conditions do: a condition whose status did not
// change keeps its lastTransitionTime, every condition records the class's
// generation, and conditions the resolution no longer sets (another controller's)
// are dropped. changed is false when nothing but those times would differ.
func NodeClassStatus(nc *karpenter.EC2NodeClass, resolved karpenter.EC2NodeClassStatus, now metav1.Time) (out karpenter.EC2NodeClassStatus, changed bool) {
	out = resolved
	out.Conditions = make([]metav1.Condition, 0, len(resolved.Conditions))
	for _, c := range resolved.Conditions {
		c.ObservedGeneration = nc.Generation
		c.LastTransitionTime = now
		for _, old := range nc.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status && !old.LastTransitionTime.IsZero() {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		out.Conditions = append(out.Conditions, c)
	}
	return out, !equality.Semantic.DeepEqual(normalized(nc.Status), normalized(out))
}

// normalized treats empty and absent lists alike (the API server drops empty ones).
func normalized(s karpenter.EC2NodeClassStatus) karpenter.EC2NodeClassStatus {
	b, _ := json.Marshal(s)
	var out karpenter.EC2NodeClassStatus
	_ = json.Unmarshal(b, &out)
	return out
}

// UpdateNodeClassStatus writes an EC2NodeClass's status through its status
// subresource when it differs from what the class carries (NodeClassStatus), and
// reports whether it wrote. Every field of Karpenter's status is written, absent
// ones as null, so nothing another controller left there survives. A class that
// is gone is not an error.
func (c *Client) UpdateNodeClassStatus(ctx context.Context, nc *karpenter.EC2NodeClass, resolved karpenter.EC2NodeClassStatus) (bool, error) {
	status, changed := NodeClassStatus(nc, resolved, metav1.NewTime(c.now()))
	if !changed {
		return false, nil
	}
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return false, err
	}
	dropNulls(st)
	for _, k := range []string{"subnets", "securityGroups", "capacityReservations", "amis", "instanceProfile", "conditions"} {
		if _, ok := st[k]; !ok {
			st[k] = nil
		}
	}
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return false, err
	}
	_, err = c.clients.Dynamic.Resource(NodeClassGVR).Patch(ctx, nc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("update EC2NodeClass %s status: %w", nc.Name, err)
	}
	return true, nil
}
