package kube

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Annotate merges annotations into a NodePool, EC2NodeClass or NodeClaim (a merge
// patch of metadata.annotations: other annotations stay). An object that is gone is
// not an error.
func (c *Client) Annotate(ctx context.Context, kind, name string, annotations map[string]string) error {
	var gvr schema.GroupVersionResource
	switch kind {
	case karpenter.NodePoolKind:
		gvr = NodePoolGVR
	case karpenter.NodeClassKind:
		gvr = NodeClassGVR
	case karpenter.NodeClaimKind:
		gvr = NodeClaimGVR
	default:
		return fmt.Errorf("annotate %s %s: not a Karpenter kind", kind, name)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = c.clients.Dynamic.Resource(gvr).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotate %s %s: %w", kind, name, err)
	}
	return nil
}
