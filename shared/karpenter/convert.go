package karpenter

import (
	"fmt"
	"strings"
)

// v1beta1 API versions Joiner converts.
const (
	V1beta1APIVersion    = Group + "/v1beta1"
	AWSV1beta1APIVersion = AWSGroup + "/v1beta1"
)

// ConvertNodePoolV1beta1 rewrites a karpenter.sh/v1beta1 NodePool, held as decoded JSON,
// into its karpenter.sh/v1 shape where the mapping is unambiguous: disruption.expireAfter
// moves to template.spec.expireAfter, WhenUnderutilized becomes WhenEmptyOrUnderutilized,
// and a nodeClassRef naming only the class gets group karpenter.k8s.aws and kind
// EC2NodeClass. Every change comes back as a warning naming it; what has no single v1
// meaning (kubelet settings, which moved to the EC2NodeClass) comes back as an error.
func ConvertNodePoolV1beta1(obj map[string]any) []Problem {
	var ps problems
	obj["apiVersion"] = APIVersion
	ps.warnf("apiVersion", "karpenter.sh/v1beta1 NodePool converted to karpenter.sh/v1 (changes follow); write apiVersion: %s", APIVersion)
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return ps.list
	}
	template := ensureMap(spec, "template")
	tspec := ensureMap(template, "spec")
	if d, ok := spec["disruption"].(map[string]any); ok {
		if exp, ok := d["expireAfter"]; ok {
			delete(d, "expireAfter")
			if _, set := tspec["expireAfter"]; set {
				ps.errorf("spec.disruption.expireAfter", "expireAfter moved to spec.template.spec.expireAfter in v1, which is also set; delete this one")
			} else {
				tspec["expireAfter"] = exp
				ps.warnf("spec.disruption.expireAfter", "expireAfter moved to spec.template.spec.expireAfter in karpenter.sh/v1 (converted); write it there: expireAfter: %s", scalar(exp))
			}
		}
		if d["consolidationPolicy"] == "WhenUnderutilized" {
			d["consolidationPolicy"] = string(ConsolidationPolicyWhenEmptyOrUnderutilized)
			ps.warnf("spec.disruption.consolidationPolicy", "WhenUnderutilized was renamed in karpenter.sh/v1 (converted); write consolidationPolicy: WhenEmptyOrUnderutilized")
		}
	}
	if ref, ok := tspec["nodeClassRef"].(map[string]any); ok {
		convertNodeClassRef(&ps, "spec.template.spec.nodeClassRef", ref)
	}
	if _, ok := tspec["kubelet"]; ok {
		delete(tspec, "kubelet")
		ps.errorf("spec.template.spec.kubelet", "kubelet settings moved from the NodePool to the EC2NodeClass in v1 (spec.kubelet there); move them to the EC2NodeClass this pool uses")
	}
	return ps.list
}

// ConvertNodeClaimV1beta1 rewrites a karpenter.sh/v1beta1 NodeClaim into karpenter.sh/v1
// (its nodeClassRef gains group and kind), reporting each change as a warning.
func ConvertNodeClaimV1beta1(obj map[string]any) []Problem {
	var ps problems
	obj["apiVersion"] = APIVersion
	ps.warnf("apiVersion", "karpenter.sh/v1beta1 NodeClaim converted to karpenter.sh/v1; write apiVersion: %s", APIVersion)
	if spec, ok := obj["spec"].(map[string]any); ok {
		if ref, ok := spec["nodeClassRef"].(map[string]any); ok {
			convertNodeClassRef(&ps, "spec.nodeClassRef", ref)
		}
		if _, ok := spec["kubelet"]; ok {
			delete(spec, "kubelet")
			ps.warnf("spec.kubelet", "kubelet settings moved to the EC2NodeClass in v1; ignored here")
		}
	}
	return ps.list
}

func convertNodeClassRef(ps *problems, path string, ref map[string]any) {
	var changed []string
	if av, ok := ref["apiVersion"].(string); ok {
		delete(ref, "apiVersion")
		if _, has := ref["group"]; !has {
			g, _, _ := strings.Cut(av, "/")
			ref["group"] = g
			changed = append(changed, "apiVersion "+av+" became group "+g)
		}
	}
	if _, ok := ref["group"]; !ok {
		ref["group"] = AWSGroup
		changed = append(changed, "group "+AWSGroup+" added")
	}
	if _, ok := ref["kind"]; !ok {
		ref["kind"] = NodeClassKind
		changed = append(changed, "kind "+NodeClassKind+" added")
	}
	if len(changed) == 0 {
		return
	}
	ps.warnf(path, "v1beta1 nodeClassRef converted (%s); write nodeClassRef: {group: %s, kind: %s, name: %s}",
		strings.Join(changed, ", "), scalar(ref["group"]), scalar(ref["kind"]), scalar(ref["name"]))
}

// ConvertEC2NodeClassV1beta1 rewrites a karpenter.k8s.aws/v1beta1 EC2NodeClass into v1:
// an amiFamily given without amiSelectorTerms becomes the alias "<family>@latest" (v1beta1
// defaulted amiFamily to AL2), and amiSelectorTerms without amiFamily get AL2, as v1beta1
// meant. Each change comes back as a warning.
func ConvertEC2NodeClassV1beta1(obj map[string]any) []Problem {
	var ps problems
	obj["apiVersion"] = AWSAPIVersion
	ps.warnf("apiVersion", "karpenter.k8s.aws/v1beta1 EC2NodeClass converted to karpenter.k8s.aws/v1 (changes follow); write apiVersion: %s", AWSAPIVersion)
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return ps.list
	}
	family, hasFamily := spec["amiFamily"].(string)
	terms, hasTerms := spec["amiSelectorTerms"].([]any)
	hasTerms = hasTerms && len(terms) > 0
	switch {
	case !hasTerms:
		if !hasFamily {
			family = AMIFamilyAL2
		}
		if alias := FamilyAlias(family); alias != "" {
			spec["amiSelectorTerms"] = []any{map[string]any{"alias": alias}}
			how := "amiFamily " + family
			if !hasFamily {
				how = "the v1beta1 default amiFamily AL2"
			}
			ps.warnf("spec.amiSelectorTerms", "v1 selects AMIs only through amiSelectorTerms; %s converted to amiSelectorTerms: [{alias: %s}]; write that", how, alias)
		}
	case !hasFamily:
		spec["amiFamily"] = AMIFamilyAL2
		ps.warnf("spec.amiFamily", "v1beta1 defaulted amiFamily to AL2; converted to amiFamily: AL2; write it (v1 has no default)")
	}
	return ps.list
}

func ensureMap(m map[string]any, k string) map[string]any {
	if v, ok := m[k].(map[string]any); ok {
		return v
	}
	if _, exists := m[k]; exists {
		// Not a map: leave it for the strict decoder to report at its path.
		return map[string]any{}
	}
	v := map[string]any{}
	m[k] = v
	return v
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return quoteYAML(x)
	case nil:
		return `""`
	}
	return fmt.Sprint(v)
}
