package karpenter

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestNodePoolSetDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// expireAfter, consolidateAfter, policy, budgets, group/kind after defaulting
		expire, consolidate string
		policy              ConsolidationPolicy
		budgets             []Budget
	}{
		{
			name:   "empty pool gets every default",
			in:     `{"spec":{"template":{"spec":{"requirements":[],"nodeClassRef":{"name":"default"}}}}}`,
			expire: "720h0m0s", consolidate: "0s", policy: ConsolidationPolicyWhenEmptyOrUnderutilized,
			budgets: []Budget{{Nodes: "10%"}},
		},
		{
			name: "set values are kept",
			in: `{"spec":{"template":{"spec":{"requirements":[],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"expireAfter":"Never"}},
			      "disruption":{"consolidationPolicy":"WhenEmpty","consolidateAfter":"5m","budgets":[{"nodes":"2"}]}}}`,
			expire: "Never", consolidate: "5m0s", policy: ConsolidationPolicyWhenEmpty,
			budgets: []Budget{{Nodes: "2"}},
		},
		{
			name:   "consolidateAfter Never is kept",
			in:     `{"spec":{"template":{"spec":{"requirements":[],"nodeClassRef":{"name":"x"},"expireAfter":"24h"}},"disruption":{"consolidateAfter":"Never"}}}`,
			expire: "24h0m0s", consolidate: "Never", policy: ConsolidationPolicyWhenEmptyOrUnderutilized,
			budgets: []Budget{{Nodes: "10%"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var np NodePool
			if err := json.Unmarshal([]byte(tc.in), &np); err != nil {
				t.Fatal(err)
			}
			np.SetDefaults()
			ts := np.Spec.Template.Spec
			if got := ts.ExpireAfter.String(); got != tc.expire {
				t.Errorf("expireAfter = %q, want %q", got, tc.expire)
			}
			if got := np.Spec.Disruption.ConsolidateAfter.String(); got != tc.consolidate {
				t.Errorf("consolidateAfter = %q, want %q", got, tc.consolidate)
			}
			if np.Spec.Disruption.ConsolidationPolicy != tc.policy {
				t.Errorf("policy = %q, want %q", np.Spec.Disruption.ConsolidationPolicy, tc.policy)
			}
			if !reflect.DeepEqual(np.Spec.Disruption.Budgets, tc.budgets) {
				t.Errorf("budgets = %+v, want %+v", np.Spec.Disruption.Budgets, tc.budgets)
			}
			if ref := ts.NodeClassRef; ref.Group != AWSGroup || ref.Kind != NodeClassKind {
				t.Errorf("nodeClassRef = %+v, want group %s kind %s", ref, AWSGroup, NodeClassKind)
			}
		})
	}
}

func TestNodePoolDefaultsValue(t *testing.T) {
	var np NodePool
	np.SetDefaults()
	if d := np.Spec.Template.Spec.ExpireAfter.Duration; d == nil || *d != 720*time.Hour {
		t.Errorf("expireAfter = %v, want 720h", np.Spec.Template.Spec.ExpireAfter)
	}
	if d := np.Spec.Disruption.ConsolidateAfter.Duration; d == nil || *d != 0 {
		t.Errorf("consolidateAfter = %v, want 0s", np.Spec.Disruption.ConsolidateAfter)
	}
	// A missing nodeClassRef stays missing: validation reports it, defaults don't invent one.
	if np.Spec.Template.Spec.NodeClassRef != nil {
		t.Errorf("nodeClassRef invented: %+v", np.Spec.Template.Spec.NodeClassRef)
	}
}

func TestNodeClaimSetDefaults(t *testing.T) {
	nc := NodeClaim{Spec: NodeClaimSpec{NodeClassRef: &NodeClassReference{Name: "default"}}}
	nc.SetDefaults()
	if nc.Spec.ExpireAfter.String() != "720h0m0s" || nc.Spec.NodeClassRef.Group != AWSGroup || nc.Spec.NodeClassRef.Kind != NodeClassKind {
		t.Errorf("defaults not applied: %+v %+v", nc.Spec.ExpireAfter, nc.Spec.NodeClassRef)
	}
}

func TestEC2NodeClassSetDefaults(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantAlias  string
		wantFamily string
		wantTokens string
		wantHops   int64
	}{
		{"alias implies family; IMDS defaults", `{"spec":{"amiSelectorTerms":[{"alias":"al2023@latest"}]}}`, "al2023@latest", AMIFamilyAL2023, "required", 1},
		{"family implies alias", `{"spec":{"amiFamily":"Bottlerocket"}}`, "bottlerocket@latest", AMIFamilyBottlerocket, "required", 1},
		{"Custom gets no alias", `{"spec":{"amiFamily":"Custom","amiSelectorTerms":[{"id":"ami-1"}]}}`, "", AMIFamilyCustom, "required", 1},
		{"set IMDS values are kept", `{"spec":{"amiSelectorTerms":[{"alias":"al2@latest"}],"metadataOptions":{"httpTokens":"optional","httpPutResponseHopLimit":2}}}`, "al2@latest", AMIFamilyAL2, "optional", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var nc EC2NodeClass
			if err := yaml.Unmarshal([]byte(tc.in), &nc); err != nil {
				t.Fatal(err)
			}
			nc.SetDefaults()
			if got := nc.Spec.Alias(); got != tc.wantAlias {
				t.Errorf("alias = %q, want %q", got, tc.wantAlias)
			}
			if got := nc.Spec.EffectiveAMIFamily(); got != tc.wantFamily {
				t.Errorf("family = %q, want %q", got, tc.wantFamily)
			}
			m := nc.Spec.MetadataOptions
			if *m.HTTPTokens != tc.wantTokens || *m.HTTPPutResponseHopLimit != tc.wantHops || *m.HTTPEndpoint != "enabled" || *m.HTTPProtocolIPv6 != "disabled" {
				t.Errorf("metadataOptions = tokens %s hops %d endpoint %s ipv6 %s", *m.HTTPTokens, *m.HTTPPutResponseHopLimit, *m.HTTPEndpoint, *m.HTTPProtocolIPv6)
			}
		})
	}
}
