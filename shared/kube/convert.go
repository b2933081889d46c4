package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// fromUnstructured decodes a custom resource into its Karpenter type. The converter
// honours json.Unmarshaler, so NillableDuration's "Never" round-trips.
func fromUnstructured[T any](u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("decode %s %q: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}

// toUnstructured encodes a Karpenter object for the dynamic client, stamping its
// apiVersion and kind.
func toUnstructured(obj any, apiVersion, kind string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", kind, err)
	}
	dropNulls(m)
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, nil
}

// dropNulls removes null members (unset NillableDurations, zero metav1.Time), which
// a structural schema would otherwise have to declare nullable.
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch t := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(t)
		case []any:
			for _, e := range t {
				if em, ok := e.(map[string]any); ok {
					dropNulls(em)
				}
			}
		}
	}
}

// NodeClaimFromUnstructured decodes a karpenter.sh/v1 NodeClaim.
func NodeClaimFromUnstructured(u *unstructured.Unstructured) (*karpenter.NodeClaim, error) {
	return fromUnstructured[karpenter.NodeClaim](u)
}

// NodePoolFromUnstructured decodes a karpenter.sh/v1 NodePool.
func NodePoolFromUnstructured(u *unstructured.Unstructured) (*karpenter.NodePool, error) {
	return fromUnstructured[karpenter.NodePool](u)
}

// NodeClassFromUnstructured decodes a karpenter.k8s.aws/v1 EC2NodeClass.
func NodeClassFromUnstructured(u *unstructured.Unstructured) (*karpenter.EC2NodeClass, error) {
	return fromUnstructured[karpenter.EC2NodeClass](u)
}

// NodeClaimToUnstructured encodes a NodeClaim for the API.
func NodeClaimToUnstructured(nc *karpenter.NodeClaim) (*unstructured.Unstructured, error) {
	return toUnstructured(nc, karpenter.APIVersion, karpenter.NodeClaimKind)
}
