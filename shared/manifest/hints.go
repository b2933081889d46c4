package manifest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Unknown fields that older Karpenter APIs (v1alpha5 Provisioner, v1alpha1
// AWSNodeTemplate, v1beta1) or common guides use get a message saying exactly what the
// v1 field is and, where the value allows, the replacement YAML to write.

// hint explains an unknown field, given its value and the mapping holding it. It may
// name related paths whose own problems would repeat the same mistake.
type hint func(value any, parent map[string]any) (msg string, related []string)

var indexRe = regexp.MustCompile(`\[[0-9]+\]`)

// normalizePath drops list indices so hints match any list entry.
func normalizePath(p string) string { return indexRe.ReplaceAllString(p, "[]") }

var nodeClassHints = map[string]hint{
	"spec.securityGroupSelector": func(v any, parent map[string]any) (string, []string) {
		return selectorHint("securityGroupSelector", "securityGroupSelectorTerms", v, true), relatedIfAbsent(parent, "securityGroupSelectorTerms", "spec.securityGroupSelectorTerms")
	},
	"spec.subnetSelector": func(v any, parent map[string]any) (string, []string) {
		return selectorHint("subnetSelector", "subnetSelectorTerms", v, false), relatedIfAbsent(parent, "subnetSelectorTerms", "spec.subnetSelectorTerms")
	},
	"spec.amiSelector": func(v any, parent map[string]any) (string, []string) {
		return amiSelectorHint(v), relatedIfAbsent(parent, "amiSelectorTerms", "spec.amiSelectorTerms", "spec.amiFamily")
	},
	"spec.launchTemplate":             fixed("launch templates are not supported since v1beta1; describe the instance with amiSelectorTerms, userData, blockDeviceMappings and metadataOptions instead"),
	"spec.launchTemplateName":         fixed("launch templates are not supported since v1beta1; describe the instance with amiSelectorTerms, userData, blockDeviceMappings and metadataOptions instead"),
	"spec.subnetSelectorTerms[].name": fixed("subnet selector terms take tags or id, not name; write {tags: {Name: <subnet name>}}"),
}

var nodePoolHints = map[string]hint{
	"spec.disruption.expireAfter": func(v any, _ map[string]any) (string, []string) {
		return fmt.Sprintf("expireAfter moved to spec.template.spec.expireAfter in karpenter.sh/v1; write it there: expireAfter: %s", jsonScalar(v, "720h")), nil
	},
	"spec.template.spec.kubelet":                 fixed("kubelet settings moved from the NodePool to the EC2NodeClass in karpenter.sh/v1; move them to spec.kubelet of the EC2NodeClass this pool uses"),
	"spec.template.spec.nodeClassRef.apiVersion": fixed("nodeClassRef names a group in karpenter.sh/v1, not an apiVersion: write group: karpenter.k8s.aws"),
	"spec.template.spec.resources":               fixed("NodePools have no resources in karpenter.sh/v1; delete it (cap the pool with spec.limits)"),
	"spec.requirements":                          fixed("requirements moved under the template: write them at spec.template.spec.requirements"),
	"spec.labels":                                fixed("labels moved under the template: write them at spec.template.metadata.labels"),
	"spec.annotations":                           fixed("annotations moved under the template: write them at spec.template.metadata.annotations"),
	"spec.taints":                                fixed("taints moved under the template: write them at spec.template.spec.taints"),
	"spec.startupTaints":                         fixed("startupTaints moved under the template: write them at spec.template.spec.startupTaints"),
	"spec.kubeletConfiguration":                  fixed("kubelet settings belong to the EC2NodeClass in karpenter.sh/v1: move them to its spec.kubelet"),
	"spec.provider": func(any, map[string]any) (string, []string) {
		return "inline provider settings are gone: put them in an EC2NodeClass (karpenter.k8s.aws/v1) and point spec.template.spec.nodeClassRef at it", []string{"spec.template.spec.nodeClassRef"}
	},
	"spec.consolidation": fixed("the v1alpha5 consolidation switch is now a policy: write spec.disruption.consolidationPolicy: WhenEmptyOrUnderutilized"),
	"spec.ttlSecondsAfterEmpty": func(v any, _ map[string]any) (string, []string) {
		return fmt.Sprintf("ttlSecondsAfterEmpty is gone: write spec.disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: %s}", secondsDuration(v)), nil
	},
	"spec.ttlSecondsUntilExpired": func(v any, _ map[string]any) (string, []string) {
		return fmt.Sprintf("ttlSecondsUntilExpired is gone: write spec.template.spec.expireAfter: %s", secondsDuration(v)), nil
	},
	"spec.providerRef": func(v any, _ map[string]any) (string, []string) {
		name := "default"
		if m, ok := v.(map[string]any); ok {
			if n, ok := m["name"].(string); ok && n != "" {
				name = n
			}
		}
		return fmt.Sprintf("providerRef is gone: write spec.template.spec.nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: %s}", karpenter.QuoteYAML(name)), []string{"spec.template.spec.nodeClassRef"}
	},
}

func fixed(msg string) hint {
	return func(any, map[string]any) (string, []string) { return msg, nil }
}

// relatedIfAbsent returns paths when the v1 field the old one maps to is absent, so that
// "X is required" is not reported on top of the hint that already says what to write.
func relatedIfAbsent(parent map[string]any, field string, paths ...string) []string {
	if _, ok := parent[field]; ok {
		return nil
	}
	return paths
}

// selectorHint turns a v1alpha5 selector map ({tag: value} or {aws-ids: "a,b"}) into the
// v1 selector terms to write.
func selectorHint(old, terms string, v any, allowName bool) string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return fmt.Sprintf("%s is the old (v1alpha5) form; write %s: [{tags: {karpenter.sh/discovery: <cluster name>}}]", old, terms)
	}
	var out []string
	tags := map[string]string{}
	for _, k := range sortedKeys(m) {
		s := fmt.Sprint(m[k])
		switch {
		case k == "aws-ids" || k == "aws::ids":
			for _, id := range strings.Split(s, ",") {
				if id = strings.TrimSpace(id); id != "" {
					out = append(out, "{id: "+karpenter.QuoteYAML(id)+"}")
				}
			}
		case allowName && (k == "aws::name" || k == "aws-name"):
			out = append(out, "{name: "+karpenter.QuoteYAML(s)+"}")
		default:
			tags[k] = s
		}
	}
	if len(tags) > 0 {
		out = append(out, "{tags: "+flowMap(tags)+"}")
	}
	return fmt.Sprintf("%s is the old (v1alpha5) selector map; write %s: [%s]", old, terms, strings.Join(out, ", "))
}

func amiSelectorHint(v any) string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return "amiSelector is the old (v1alpha5) form; write amiSelectorTerms: [{alias: al2023@latest}] or [{id: ami-0123456789abcdef0}]"
	}
	var out []string
	term := []string{}
	tags := map[string]string{}
	for _, k := range sortedKeys(m) {
		s := fmt.Sprint(m[k])
		switch k {
		case "aws-ids", "aws::ids":
			for _, id := range strings.Split(s, ",") {
				if id = strings.TrimSpace(id); id != "" {
					out = append(out, "{id: "+karpenter.QuoteYAML(id)+"}")
				}
			}
		case "aws::name":
			term = append(term, "name: "+karpenter.QuoteYAML(s))
		case "aws::owners":
			term = append(term, "owner: "+karpenter.QuoteYAML(s))
		default:
			tags[k] = s
		}
	}
	if len(tags) > 0 {
		term = append(term, "tags: "+flowMap(tags))
	}
	if len(term) > 0 {
		out = append(out, "{"+strings.Join(term, ", ")+"}")
	}
	return fmt.Sprintf("amiSelector is the old (v1alpha5) selector map; write amiSelectorTerms: [%s] (with amiFamily set)", strings.Join(out, ", "))
}

func flowMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = karpenter.QuoteYAML(k) + ": " + karpenter.QuoteYAML(m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func jsonScalar(v any, def string) string {
	switch x := v.(type) {
	case string:
		return karpenter.QuoteYAML(x)
	case json.Number:
		return x.String()
	}
	return def
}

func secondsDuration(v any) string {
	if n, ok := v.(json.Number); ok {
		return n.String() + "s"
	}
	return "<seconds>s"
}
