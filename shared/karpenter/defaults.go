package karpenter

import (
	"strings"
	"time"
)

// Karpenter's documented defaults.
const (
	DefaultExpireAfter      = 720 * time.Hour
	DefaultConsolidateAfter = time.Duration(0)
	DefaultBudgetNodes      = "10%"
	DefaultHTTPEndpoint     = "enabled"
	DefaultHTTPProtocolIPv6 = "disabled"
	DefaultHTTPTokens       = "required"
	DefaultHTTPHopLimit     = int64(1)
)

// SetDefaults fills what Karpenter's CRD defaults fill: expireAfter 720h, consolidation
// policy WhenEmptyOrUnderutilized after 0s, one budget of 10% of nodes, and the
// nodeClassRef group and kind. Fields already set are kept.
func (np *NodePool) SetDefaults() {
	ts := &np.Spec.Template.Spec
	if !ts.ExpireAfter.IsSet() {
		ts.ExpireAfter = NewDuration(DefaultExpireAfter)
	}
	defaultNodeClassRef(ts.NodeClassRef)
	d := &np.Spec.Disruption
	if d.ConsolidationPolicy == "" {
		d.ConsolidationPolicy = ConsolidationPolicyWhenEmptyOrUnderutilized
	}
	if !d.ConsolidateAfter.IsSet() {
		d.ConsolidateAfter = NewDuration(DefaultConsolidateAfter)
	}
	if len(d.Budgets) == 0 {
		d.Budgets = []Budget{{Nodes: DefaultBudgetNodes}}
	}
}

// SetDefaults fills a NodeClaim's expireAfter (720h) and nodeClassRef group and kind.
func (nc *NodeClaim) SetDefaults() {
	if !nc.Spec.ExpireAfter.IsSet() {
		nc.Spec.ExpireAfter = NewDuration(DefaultExpireAfter)
	}
	defaultNodeClassRef(nc.Spec.NodeClassRef)
}

func defaultNodeClassRef(ref *NodeClassReference) {
	if ref == nil {
		return
	}
	if ref.Group == "" {
		ref.Group = AWSGroup
	}
	if ref.Kind == "" {
		ref.Kind = NodeClassKind
	}
}

// aliasFamilies maps an AMI alias family (the part before '@') to its amiFamily.
var aliasFamilies = map[string]string{
	"al2":          AMIFamilyAL2,
	"al2023":       AMIFamilyAL2023,
	"bottlerocket": AMIFamilyBottlerocket,
	"windows2019":  AMIFamilyWindows2019,
	"windows2022":  AMIFamilyWindows2022,
}

// AliasFamily returns the amiFamily an alias such as "al2023@latest" implies, or "".
func AliasFamily(alias string) string {
	fam, _, _ := strings.Cut(alias, "@")
	return aliasFamilies[strings.ToLower(fam)]
}

// FamilyAlias returns the "family@latest" alias for an amiFamily, or "" for Custom and
// unknown families.
func FamilyAlias(amiFamily string) string {
	for alias, fam := range aliasFamilies {
		if strings.EqualFold(fam, amiFamily) {
			return alias + "@latest"
		}
	}
	return ""
}

// Alias returns the class's alias AMI selector term, or "".
func (s *EC2NodeClassSpec) Alias() string {
	for _, t := range s.AMISelectorTerms {
		if t.Alias != "" {
			return t.Alias
		}
	}
	return ""
}

// EffectiveAMIFamily is the amiFamily the class bootstraps with, as Karpenter v1
// reads it: the amiFamily set, else the one an alias implies, else Custom (AMIs
// selected by id, name, tags or ssmParameter); "" when the class selects no AMIs
// at all (package amifamily's Default then applies).
func (s *EC2NodeClassSpec) EffectiveAMIFamily() string {
	if s.AMIFamily != nil && *s.AMIFamily != "" {
		return *s.AMIFamily
	}
	for _, t := range s.AMISelectorTerms {
		if fam := AliasFamily(t.Alias); fam != "" {
			return fam
		}
	}
	if len(s.AMISelectorTerms) > 0 {
		return AMIFamilyCustom
	}
	return ""
}

// SetDefaults fills what Karpenter fills for an EC2NodeClass: IMDS settings (endpoint
// enabled, IPv6 disabled, tokens required, hop limit 1), the alias implied by an
// amiFamily given without amiSelectorTerms, and the amiFamily an alias implies.
func (nc *EC2NodeClass) SetDefaults() {
	s := &nc.Spec
	if len(s.AMISelectorTerms) == 0 && s.AMIFamily != nil {
		if a := FamilyAlias(*s.AMIFamily); a != "" {
			s.AMISelectorTerms = []AMISelectorTerm{{Alias: a}}
		}
	}
	if s.AMIFamily == nil {
		if fam := AliasFamily(s.Alias()); fam != "" {
			s.AMIFamily = &fam
		}
	}
	if s.MetadataOptions == nil {
		s.MetadataOptions = &MetadataOptions{}
	}
	m := s.MetadataOptions
	if m.HTTPEndpoint == nil {
		m.HTTPEndpoint = ptr(DefaultHTTPEndpoint)
	}
	if m.HTTPProtocolIPv6 == nil {
		m.HTTPProtocolIPv6 = ptr(DefaultHTTPProtocolIPv6)
	}
	if m.HTTPPutResponseHopLimit == nil {
		m.HTTPPutResponseHopLimit = ptr(DefaultHTTPHopLimit)
	}
	if m.HTTPTokens == nil {
		m.HTTPTokens = ptr(DefaultHTTPTokens)
	}
}

func ptr[T any](v T) *T { return &v }
