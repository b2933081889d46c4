package karpenter

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/joiner-autoscaler/joiner/shared/quantity"
)

// Limits from Karpenter's v1 CRDs.
const (
	maxRequirements   = 100
	maxMinValues      = 50
	maxBudgets        = 50
	maxSelectorTerms  = 30
	maxBlockDevices   = 50
	minWeight         = 1
	maxWeight         = 100
	maxHopLimit       = 64
	maxVolumeSizeGiB  = 64 * 1024
	exampleNodeClass  = "{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}"
	exampleAMIAlias   = "amiSelectorTerms: [{alias: al2023@latest}]"
	exampleCustomAMIs = "amiSelectorTerms: [{id: ami-0123456789abcdef0}] (or tags or name)"
)

// SupportedOperators are the requirement operators Karpenter v1 accepts.
var SupportedOperators = []corev1.NodeSelectorOperator{
	corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
	corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt,
	NodeSelectorOpGte, NodeSelectorOpLte,
}

var (
	budgetNodesRe = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)
	amiIDRe       = regexp.MustCompile(`^ami-[0-9a-z]+$`)
	subnetIDRe    = regexp.MustCompile(`^subnet-[0-9a-z]+$`)
	sgIDRe        = regexp.MustCompile(`^sg-[0-9a-z]+$`)
)

// Validate checks a NodePool against Karpenter's v1 rules and returns every problem,
// each at its field path with what to write instead. It does not depend on SetDefaults
// having run: fields Karpenter defaults may be left empty.
func (np *NodePool) Validate() []Problem {
	var ps problems
	validateName(&ps, np.Name)
	t := &np.Spec.Template
	validateTemplateLabels(&ps, "spec.template.metadata.labels", t.ObjectMeta.Labels)
	validateTaints(&ps, "spec.template.spec.taints", t.Spec.Taints)
	validateTaints(&ps, "spec.template.spec.startupTaints", t.Spec.StartupTaints)
	validateRequirements(&ps, "spec.template.spec.requirements", t.Spec.Requirements, false)
	validateNodeClassRef(&ps, "spec.template.spec.nodeClassRef", t.Spec.NodeClassRef)
	if d := t.Spec.TerminationGracePeriod; d != nil && d.Duration < 0 {
		ps.errorf("spec.template.spec.terminationGracePeriod", "must not be negative; write a duration such as 48h")
	}
	validateDisruption(&ps, &np.Spec.Disruption)
	validateLimits(&ps, "spec.limits", np.Spec.Limits)
	if w := np.Spec.Weight; w != nil && (*w < minWeight || *w > maxWeight) {
		ps.errorf("spec.weight", "weight %d is out of range: write a number from %d to %d (higher pools are tried first), or leave weight out", *w, minWeight, maxWeight)
	}
	return ps.list
}

// Validate checks a NodeClaim's requirements, taints and nodeClassRef.
func (nc *NodeClaim) Validate() []Problem {
	var ps problems
	validateName(&ps, nc.Name)
	validateTaints(&ps, "spec.taints", nc.Spec.Taints)
	validateTaints(&ps, "spec.startupTaints", nc.Spec.StartupTaints)
	validateRequirements(&ps, "spec.requirements", nc.Spec.Requirements, true)
	validateNodeClassRef(&ps, "spec.nodeClassRef", nc.Spec.NodeClassRef)
	for _, p := range quantity.List(nc.Spec.Resources.Requests) {
		ps.errorf(key("spec.resources.requests", string(p.Name)), "%s", p.Message)
	}
	return ps.list
}

func validateName(ps *problems, name string) {
	if name == "" {
		ps.errorf("metadata.name", "metadata.name is required")
		return
	}
	for _, msg := range content.IsDNS1123Subdomain(name) {
		ps.errorf("metadata.name", "invalid name %q: %s", name, msg)
	}
}

func validateTemplateLabels(ps *problems, path string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		p := key(path, k)
		for _, msg := range content.IsLabelKey(k) {
			ps.errorf(p, "invalid label key %q: %s", k, msg)
		}
		if msg := restrictedLabel(k, false); msg != "" {
			ps.errorf(p, "%s", msg)
		}
		if len(content.IsLabelValue(labels[k])) > 0 {
			ps.errorf(p, "invalid label value %q: %s", labels[k], labelValueRule)
		}
	}
}

func validateTaints(ps *problems, path string, taints []corev1.Taint) {
	seen := map[string]int{}
	for i, t := range taints {
		p := idx(path, i)
		if t.Key == "" {
			ps.errorf(p+".key", "taint key is required, such as key: example.com/dedicated")
		} else {
			for _, msg := range content.IsLabelKey(t.Key) {
				ps.errorf(p+".key", "invalid taint key %q: %s", t.Key, msg)
			}
		}
		if len(content.IsLabelValue(t.Value)) > 0 {
			ps.errorf(p+".value", "invalid taint value %q: %s", t.Value, labelValueRule)
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		case "":
			ps.errorf(p+".effect", "taint effect is required: write effect: NoSchedule, PreferNoSchedule or NoExecute")
		default:
			ps.errorf(p+".effect", "unknown taint effect %q: write NoSchedule, PreferNoSchedule or NoExecute%s", t.Effect, didYouMean(string(t.Effect), "NoSchedule", "PreferNoSchedule", "NoExecute"))
		}
		id := t.Key + ":" + string(t.Effect)
		if j, dup := seen[id]; dup {
			ps.errorf(p, "duplicate taint %s (same key and effect as %s); keep one", id, idx(path, j))
		} else {
			seen[id] = i
		}
	}
}

// validateRequirements applies Karpenter's requirement rules. allowNodePool admits the
// karpenter.sh/nodepool key, which NodeClaims (not NodePools) carry.
func validateRequirements(ps *problems, path string, reqs []NodeSelectorRequirementWithMinValues, allowNodePool bool) {
	if len(reqs) > maxRequirements {
		ps.errorf(path, "%d requirements; Karpenter accepts at most %d", len(reqs), maxRequirements)
	}
	for i, r := range reqs {
		p := idx(path, i)
		validateRequirement(ps, p, r, allowNodePool)
	}
}

func validateRequirement(ps *problems, p string, r NodeSelectorRequirementWithMinValues, allowNodePool bool) {
	switch {
	case r.Key == "":
		ps.errorf(p+".key", "requirement key is required, such as key: karpenter.sh/capacity-type")
	default:
		for _, msg := range content.IsLabelKey(r.Key) {
			ps.errorf(p+".key", "invalid key %q: %s", r.Key, msg)
		}
		if msg := restrictedLabel(r.Key, allowNodePool); msg != "" {
			ps.errorf(p+".key", "%s", msg)
		} else if repl, ok := DeprecatedLabels[r.Key]; ok {
			ps.warnf(p+".key", "%s is deprecated; write key: %s", r.Key, repl)
		}
	}
	n := len(r.Values)
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if n == 0 {
			ps.errorf(p+".values", "operator %s needs at least one value: write values: [\"...\"], or use operator Exists/DoesNotExist", r.Operator)
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if n > 0 {
			ps.errorf(p+".values", "operator %s takes no values; delete values, or use operator In/NotIn to match them", r.Operator)
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, NodeSelectorOpGte, NodeSelectorOpLte:
		if n != 1 {
			ps.errorf(p+".values", "operator %s needs exactly one value, a non-negative integer: write values: [\"4\"]", r.Operator)
		} else if v, err := strconv.Atoi(r.Values[0]); err != nil || v < 0 {
			ps.errorf(idx(p+".values", 0), "operator %s compares integers; %q is not a non-negative integer: write a whole number such as \"4\"", r.Operator, r.Values[0])
		}
	case "":
		ps.errorf(p+".operator", "operator is required: write one of %s", operatorList())
	default:
		ps.errorf(p+".operator", "unknown operator %q: write one of %s%s", r.Operator, operatorList(), didYouMean(string(r.Operator), operatorStrings()...))
	}
	if !isIntegerOperator(r.Operator) {
		for j, v := range r.Values {
			if len(content.IsLabelValue(v)) > 0 {
				ps.errorf(idx(p+".values", j), "invalid value %q: %s", v, labelValueRule)
			}
		}
	}
	validateWellKnownValues(ps, p, r)
	switch r.Key {
	case LabelInstanceTenancy:
		if !r.Matches(TenancyDefault, true) {
			ps.warnf(p, "Joiner launches default-tenancy instances only: a node of this pool can never satisfy %s %s %v, so its pods stay pending (Karpenter would launch dedicated instances)", r.Key, r.Operator, r.Values)
		}
	case LabelPlacementGroupID, LabelPlacementGroupPartition:
		if !r.Matches("", false) {
			ps.warnf(p, "Joiner launches into no placement group: a node of this pool can never satisfy %s %s %v, so its pods stay pending", r.Key, r.Operator, r.Values)
		}
	}
	if r.MinValues != nil {
		mv := *r.MinValues
		switch {
		case mv < 1 || mv > maxMinValues:
			ps.errorf(p+".minValues", "minValues %d is out of range: write a number from 1 to %d", mv, maxMinValues)
		case r.Operator == corev1.NodeSelectorOpIn && mv > n:
			ps.errorf(p+".minValues", "minValues %d asks for more distinct values than the %d listed in values; list at least %d values or lower minValues", mv, n, mv)
		case r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpExists:
			ps.warnf(p+".minValues", "minValues only takes effect with operator In or Exists; with %s it is ignored (delete it or change the operator)", r.Operator)
		}
	}
}

// validateWellKnownValues catches misspelled values of labels whose values Joiner knows.
func validateWellKnownValues(ps *problems, p string, r NodeSelectorRequirementWithMinValues) {
	var allowed []string
	switch r.Key {
	case CapacityTypeLabelKey:
		allowed = []string{CapacityTypeSpot, CapacityTypeOnDemand, CapacityTypeReserved}
	case corev1.LabelArchStable:
		allowed = []string{"amd64", "arm64"}
	case corev1.LabelOSStable:
		allowed = []string{"linux", "windows"}
	case LabelInstanceTenancy:
		allowed = []string{TenancyDefault, "dedicated"}
	default:
		return
	}
	if r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn {
		return
	}
	for j, v := range r.Values {
		if !contains(allowed, v) {
			hint := didYouMean(v, allowed...)
			if r.Key == corev1.LabelArchStable && (v == "x86_64" || v == "x86-64" || v == "amd") {
				hint = " (x86_64 is written amd64)"
			} else if r.Key == corev1.LabelArchStable && (v == "aarch64" || v == "arm") {
				hint = " (aarch64 is written arm64)"
			}
			ps.errorf(idx(p+".values", j), "unknown %s value %q: write one of %s%s", r.Key, v, strings.Join(allowed, ", "), hint)
		}
	}
}

func validateNodeClassRef(ps *problems, path string, ref *NodeClassReference) {
	if ref == nil {
		ps.errorf(path, "nodeClassRef is required: write nodeClassRef: %s", exampleNodeClass)
		return
	}
	want := fmt.Sprintf("{group: %s, kind: %s, name: %s}", AWSGroup, NodeClassKind, orDefault(ref.Name, "default"))
	if ref.Name == "" {
		ps.errorf(path+".name", "nodeClassRef.name is required: write nodeClassRef: %s", want)
	}
	switch {
	case ref.Group == "" && ref.Kind == "":
		ps.errorf(path, "nodeClassRef needs group and kind in karpenter.sh/v1: write nodeClassRef: %s", want)
	case ref.Group == "":
		ps.errorf(path+".group", "nodeClassRef.group is required: write group: %s", AWSGroup)
	case ref.Group != AWSGroup:
		ps.errorf(path+".group", "Joiner launches EC2 instances only; write group: %s (got %q)", AWSGroup, ref.Group)
	}
	switch {
	case ref.Kind == "" && ref.Group != "":
		ps.errorf(path+".kind", "nodeClassRef.kind is required: write kind: %s", NodeClassKind)
	case ref.Kind != "" && ref.Kind != NodeClassKind:
		ps.errorf(path+".kind", "kind %q is not a node class Joiner knows; write kind: %s", ref.Kind, NodeClassKind)
	}
}

func validateDisruption(ps *problems, d *Disruption) {
	const path = "spec.disruption"
	switch d.ConsolidationPolicy {
	case "", ConsolidationPolicyWhenEmpty, ConsolidationPolicyWhenEmptyOrUnderutilized:
	case "WhenUnderutilized":
		ps.errorf(path+".consolidationPolicy", "WhenUnderutilized was renamed in karpenter.sh/v1: write consolidationPolicy: WhenEmptyOrUnderutilized")
	default:
		ps.errorf(path+".consolidationPolicy", "unknown consolidationPolicy %q: write WhenEmptyOrUnderutilized or WhenEmpty%s", d.ConsolidationPolicy,
			didYouMean(string(d.ConsolidationPolicy), string(ConsolidationPolicyWhenEmpty), string(ConsolidationPolicyWhenEmptyOrUnderutilized)))
	}
	if len(d.Budgets) > maxBudgets {
		ps.errorf(path+".budgets", "%d budgets; Karpenter accepts at most %d", len(d.Budgets), maxBudgets)
	}
	for i, b := range d.Budgets {
		p := idx(path+".budgets", i)
		switch {
		case b.Nodes == "":
			ps.errorf(p+".nodes", "nodes is required: write a count such as nodes: \"1\" or a percentage such as nodes: \"10%%\"")
		case !budgetNodesRe.MatchString(b.Nodes):
			ps.errorf(p+".nodes", "invalid nodes %q: write a whole count such as \"5\" or a percentage from 0%% to 100%% such as \"10%%\"", b.Nodes)
		}
		hasSchedule, hasDuration := b.Schedule != nil, b.Duration != nil
		switch {
		case hasSchedule && !hasDuration:
			ps.errorf(p+".duration", "a budget with a schedule needs a duration: add duration: 1h (how long each scheduled window lasts)")
		case hasDuration && !hasSchedule:
			ps.errorf(p+".schedule", "a budget with a duration needs a schedule: add schedule: \"0 9 * * mon-fri\" (when each window starts)")
		}
		if hasSchedule {
			if err := ParseCron(*b.Schedule); err != nil {
				ps.errorf(p+".schedule", "%v", err)
			}
		}
		if hasDuration {
			dd := b.Duration.Duration
			if dd <= 0 || dd%60e9 != 0 {
				ps.errorf(p+".duration", "invalid duration %s: write whole minutes or hours, such as 30m, 8h or 1h30m", dd)
			}
		}
		for j, r := range b.Reasons {
			switch r {
			case DisruptionReasonUnderutilized, DisruptionReasonEmpty, DisruptionReasonDrifted:
			default:
				ps.errorf(idx(p+".reasons", j), "unknown reason %q: write Underutilized, Empty or Drifted%s", r,
					didYouMean(string(r), "Underutilized", "Empty", "Drifted"))
			}
		}
	}
}

func validateLimits(ps *problems, path string, limits corev1.ResourceList) {
	for _, name := range sortedKeys(limits) {
		q := limits[name]
		if msg := quantity.Problem(name, q); msg != "" {
			ps.errorf(key(path, string(name)), "limit %s; write a quantity such as \"1000\" or 1000Gi, or leave the resource out for no limit", msg)
		}
	}
}

// Validate checks an EC2NodeClass against Karpenter's v1 rules.
func (nc *EC2NodeClass) Validate() []Problem {
	var ps problems
	validateName(&ps, nc.Name)
	s := &nc.Spec
	validateSubnetTerms(&ps, s.SubnetSelectorTerms)
	validateSecurityGroupTerms(&ps, s.SecurityGroupSelectorTerms)
	validateAMIs(&ps, s)
	switch {
	case s.Role != "" && s.InstanceProfile != nil && *s.InstanceProfile != "":
		ps.errorf("spec", "role and instanceProfile are mutually exclusive; keep one (role: lets Joiner manage the instance profile)")
	case s.Role == "" && (s.InstanceProfile == nil || *s.InstanceProfile == ""):
		ps.errorf("spec.role", "role is required (or instanceProfile): write role: KarpenterNodeRole-<cluster name>, the IAM role nodes run as")
	}
	validateTags(&ps, "spec.tags", s.Tags)
	validateBlockDevices(&ps, s.BlockDeviceMappings)
	validateMetadataOptions(&ps, s.MetadataOptions)
	if p := s.InstanceStorePolicy; p != nil && *p != "RAID0" {
		ps.errorf("spec.instanceStorePolicy", "unknown instanceStorePolicy %q: write RAID0 or leave it out", *p)
	}
	validateKubelet(&ps, s.Kubelet)
	return ps.list
}

func validateSelectorTags(ps *problems, path string, tags map[string]string) {
	for _, k := range sortedKeys(tags) {
		if k == "" {
			ps.errorf(path, "empty tag keys are not supported")
		} else if tags[k] == "" {
			ps.errorf(key(path, k), "empty tag values are not supported; write \"*\" to match any value")
		}
	}
}

func validateSubnetTerms(ps *problems, terms []SubnetSelectorTerm) {
	const path = "spec.subnetSelectorTerms"
	if len(terms) == 0 {
		ps.errorf(path, "subnetSelectorTerms is required: write subnetSelectorTerms: [{tags: {karpenter.sh/discovery: <cluster name>}}] (or [{id: subnet-...}])")
		return
	}
	if len(terms) > maxSelectorTerms {
		ps.errorf(path, "%d terms; Karpenter accepts at most %d", len(terms), maxSelectorTerms)
	}
	for i, t := range terms {
		p := idx(path, i)
		n := count(len(t.Tags) > 0, t.ID != "")
		if n != 1 {
			ps.errorf(p, "each subnet selector term needs exactly one of tags or id, got %d: write {tags: {karpenter.sh/discovery: <cluster name>}} or {id: subnet-0123456789abcdef0}", n)
		}
		if t.ID != "" && !subnetIDRe.MatchString(t.ID) {
			ps.errorf(p+".id", "invalid subnet id %q: write an id such as subnet-0123456789abcdef0", t.ID)
		}
		validateSelectorTags(ps, p+".tags", t.Tags)
	}
}

func validateSecurityGroupTerms(ps *problems, terms []SecurityGroupSelectorTerm) {
	const path = "spec.securityGroupSelectorTerms"
	if len(terms) == 0 {
		ps.errorf(path, "securityGroupSelectorTerms is required: write securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: <cluster name>}}] (or [{id: sg-...}] or [{name: ...}])")
		return
	}
	if len(terms) > maxSelectorTerms {
		ps.errorf(path, "%d terms; Karpenter accepts at most %d", len(terms), maxSelectorTerms)
	}
	for i, t := range terms {
		p := idx(path, i)
		n := count(len(t.Tags) > 0, t.ID != "", t.Name != "")
		if n != 1 {
			ps.errorf(p, "each security group selector term needs exactly one of tags, id or name, got %d: write {tags: {karpenter.sh/discovery: <cluster name>}}, {id: sg-0123456789abcdef0} or {name: my-group}", n)
		}
		if t.ID != "" && !sgIDRe.MatchString(t.ID) {
			ps.errorf(p+".id", "invalid security group id %q: write an id such as sg-0123456789abcdef0", t.ID)
		}
		validateSelectorTags(ps, p+".tags", t.Tags)
	}
}

var amiFamilies = []string{AMIFamilyAL2, AMIFamilyAL2023, AMIFamilyBottlerocket, AMIFamilyWindows2019, AMIFamilyWindows2022, AMIFamilyCustom}

func validateAMIs(ps *problems, s *EC2NodeClassSpec) {
	const path = "spec.amiSelectorTerms"
	family := ""
	if s.AMIFamily != nil {
		family = *s.AMIFamily
		if !contains(amiFamilies, family) {
			hint := didYouMean(family, amiFamilies...)
			if strings.EqualFold(family, "Ubuntu") {
				hint = " (Ubuntu was dropped in v1: use Custom with amiSelectorTerms for your Ubuntu AMI)"
			}
			ps.errorf("spec.amiFamily", "unknown amiFamily %q: write one of %s%s", family, strings.Join(amiFamilies, ", "), hint)
			family = ""
		}
	}
	terms := s.AMISelectorTerms
	if len(terms) == 0 {
		switch {
		case s.AMIFamily == nil:
			ps.errorf(path, "amiSelectorTerms is required: write %s (or Bottlerocket's bottlerocket@latest, or your own AMIs with amiFamily: Custom)", exampleAMIAlias)
		case family == AMIFamilyCustom:
			ps.errorf(path, "amiFamily Custom needs amiSelectorTerms that pick your AMIs: write %s", exampleCustomAMIs)
		case family != "":
			ps.warnf(path, "Karpenter v1 requires amiSelectorTerms; Joiner uses the alias amiFamily %s implies: write amiSelectorTerms: [{alias: %s}]", family, FamilyAlias(family))
		}
		return
	}
	if len(terms) > maxSelectorTerms {
		ps.errorf(path, "%d terms; Karpenter accepts at most %d", len(terms), maxSelectorTerms)
	}
	aliasAt := -1
	for i, t := range terms {
		p := idx(path, i)
		if count(t.Alias != "", len(t.Tags) > 0, t.ID != "", t.Name != "", t.SSMParameter != "") == 0 {
			ps.errorf(p, "each AMI selector term needs one of alias, id, tags, name or ssmParameter: write {alias: al2023@latest} or {id: ami-0123456789abcdef0}")
		}
		if t.ID != "" {
			if t.Alias != "" || len(t.Tags) > 0 || t.Name != "" || t.Owner != "" {
				ps.errorf(p, "id can't be combined with alias, tags, name or owner in one term; put each in its own term")
			}
			if !amiIDRe.MatchString(t.ID) {
				ps.errorf(p+".id", "invalid AMI id %q: write an id such as ami-0123456789abcdef0", t.ID)
			}
		}
		validateSelectorTags(ps, p+".tags", t.Tags)
		if t.Alias == "" {
			continue
		}
		aliasAt = i
		if len(t.Tags) > 0 || t.ID != "" || t.Name != "" || t.Owner != "" || t.SSMParameter != "" {
			ps.errorf(p, "alias can't be combined with id, tags, name, owner or ssmParameter; write the alias alone: {alias: %s}", t.Alias)
		}
		validateAlias(ps, p+".alias", t.Alias)
	}
	if aliasAt >= 0 {
		if len(terms) != 1 {
			ps.errorf(path, "an alias term must be the only amiSelectorTerm; keep [{alias: %s}] alone, or drop the alias and select AMIs with id, tags or name", terms[aliasAt].Alias)
		}
		implied := AliasFamily(terms[aliasAt].Alias)
		if family != "" && implied != "" && family != implied && family != AMIFamilyCustom {
			ps.errorf("spec.amiFamily", "amiFamily %s does not match alias %s; delete amiFamily (the alias implies %s) or set it to %s",
				family, terms[aliasAt].Alias, implied, implied)
		}
		return
	}
	if s.AMIFamily == nil {
		ps.errorf("spec.amiFamily", "amiFamily is required when amiSelectorTerms has no alias: write amiFamily: AL2023 (or AL2, Bottlerocket, Windows2022, Custom) to say how to bootstrap the AMIs")
	}
}

func validateAlias(ps *problems, p, alias string) {
	fam, version, ok := strings.Cut(alias, "@")
	if !ok || fam == "" || version == "" {
		ps.errorf(p, "invalid alias %q: write family@version, such as al2023@latest, bottlerocket@v1.20.0 or al2@v20240807", alias)
		return
	}
	f := strings.ToLower(fam)
	if _, known := aliasFamilies[f]; !known {
		ps.errorf(p, "unknown alias family %q: write one of al2, al2023, bottlerocket, windows2019, windows2022 (such as al2023@latest)%s",
			fam, didYouMean(f, "al2", "al2023", "bottlerocket", "windows2019", "windows2022"))
		return
	}
	if f != fam {
		ps.errorf(p, "alias family must be lower case: write %s@%s", f, version)
	}
	if strings.HasPrefix(f, "windows") && version != "latest" {
		ps.errorf(p, "Windows aliases only support latest: write %s@latest", f)
		return
	}
	if version != "latest" && !strings.HasPrefix(version, "v") {
		ps.errorf(p, "invalid alias version %q: write latest or a release such as v20240807 (al2/al2023) or v1.20.0 (bottlerocket)", version)
	}
}

// restrictedTags are tag keys Joiner (like Karpenter) sets on every instance itself.
var restrictedTags = []string{"eks:eks-cluster-name", NodePoolLabelKey, NodeClaimLabelKey, NodeClassLabelKey}

func validateTags(ps *problems, path string, tags map[string]string) {
	for _, k := range sortedKeys(tags) {
		switch {
		case k == "":
			ps.errorf(path, "empty tag keys are not supported")
		case strings.HasPrefix(k, "kubernetes.io/cluster"):
			ps.errorf(key(path, k), "tag %s is restricted: Joiner tags every instance it launches kubernetes.io/cluster/<cluster>=owned itself; delete this tag", k)
		case contains(restrictedTags, k):
			ps.errorf(key(path, k), "tag %s is restricted: Joiner sets it on every instance itself (to the pool, claim or class name); delete this tag", k)
		}
	}
}

var volumeTypes = []string{"standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"}

func validateBlockDevices(ps *problems, bdms []*BlockDeviceMapping) {
	const path = "spec.blockDeviceMappings"
	if len(bdms) > maxBlockDevices {
		ps.errorf(path, "%d block devices; Karpenter accepts at most %d", len(bdms), maxBlockDevices)
	}
	roots := 0
	maxSize := resource.MustParse(fmt.Sprintf("%dGi", maxVolumeSizeGiB))
	for i, b := range bdms {
		p := idx(path, i)
		if b == nil {
			ps.errorf(p, "empty block device mapping; write {deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeType: gp3}}")
			continue
		}
		if b.RootVolume {
			roots++
		}
		e := b.EBS
		if e == nil {
			continue
		}
		if e.VolumeSize == nil && e.SnapshotID == nil {
			ps.errorf(p+".ebs", "volumeSize or snapshotID is required: write volumeSize: 20Gi")
		}
		if q := e.VolumeSize; q != nil {
			if q.Sign() <= 0 || q.Cmp(maxSize) > 0 {
				ps.errorf(p+".ebs.volumeSize", "volumeSize %s is out of range: write a size from 1Gi to 64Ti, such as 20Gi", q.String())
			}
		}
		if t := e.VolumeType; t != nil && !contains(volumeTypes, *t) {
			ps.errorf(p+".ebs.volumeType", "unknown volumeType %q: write one of %s%s", *t, strings.Join(volumeTypes, ", "), didYouMean(*t, volumeTypes...))
		}
		if e.Throughput != nil && (e.VolumeType == nil || *e.VolumeType != "gp3") {
			ps.errorf(p+".ebs.throughput", "throughput is only valid with volumeType: gp3")
		}
		if e.IOPS != nil && (e.VolumeType == nil || !contains([]string{"gp3", "io1", "io2"}, *e.VolumeType)) {
			ps.errorf(p+".ebs.iops", "iops is only valid with volumeType gp3, io1 or io2")
		}
	}
	if roots > 1 {
		ps.errorf(path, "%d block devices are marked rootVolume; mark at most one", roots)
	}
}

func validateMetadataOptions(ps *problems, m *MetadataOptions) {
	const path = "spec.metadataOptions"
	if m == nil {
		return
	}
	enum := func(field string, v *string, allowed ...string) {
		if v != nil && !contains(allowed, *v) {
			ps.errorf(path+"."+field, "unknown %s %q: write %s", field, *v, strings.Join(allowed, " or "))
		}
	}
	enum("httpEndpoint", m.HTTPEndpoint, "enabled", "disabled")
	enum("httpProtocolIPv6", m.HTTPProtocolIPv6, "enabled", "disabled")
	enum("httpTokens", m.HTTPTokens, "required", "optional")
	if h := m.HTTPPutResponseHopLimit; h != nil && (*h < 1 || *h > maxHopLimit) {
		ps.errorf(path+".httpPutResponseHopLimit", "hop limit %d is out of range: write a number from 1 to %d (1 keeps pods from reaching the node's IMDS)", *h, maxHopLimit)
	}
}

var (
	evictionSignals  = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}
	reservedResource = []string{"cpu", "memory", "ephemeral-storage", "pid"}
)

func validateKubelet(ps *problems, k *KubeletConfiguration) {
	const path = "spec.kubelet"
	if k == nil {
		return
	}
	for i, ip := range k.ClusterDNS {
		if net.ParseIP(ip) == nil {
			ps.errorf(idx(path+".clusterDNS", i), "%q is not an IP address; write the cluster DNS service IP, such as 10.100.0.10", ip)
		}
	}
	nonNeg := func(field string, v *int32) {
		if v != nil && *v < 0 {
			ps.errorf(path+"."+field, "must not be negative")
		}
	}
	nonNeg("maxPods", k.MaxPods)
	nonNeg("podsPerCore", k.PodsPerCore)
	nonNeg("evictionMaxPodGracePeriod", k.EvictionMaxPodGracePeriod)
	for _, f := range []struct {
		field string
		m     map[string]string
	}{{"systemReserved", k.SystemReserved}, {"kubeReserved", k.KubeReserved}} {
		field, m := f.field, f.m
		for _, name := range sortedKeys(m) {
			p := key(path+"."+field, name)
			if !contains(reservedResource, name) {
				ps.errorf(p, "unknown resource %q: write cpu, memory, ephemeral-storage or pid", name)
			}
			if q, err := resource.ParseQuantity(m[name]); err != nil {
				ps.errorf(p, "invalid quantity %q: write a non-negative quantity such as 100m or 1Gi", m[name])
			} else if msg := quantity.Problem(corev1.ResourceName(name), q); msg != "" {
				ps.errorf(p, "%s", msg)
			}
		}
	}
	for _, f := range []struct {
		field string
		m     map[string]string
	}{{"evictionHard", k.EvictionHard}, {"evictionSoft", k.EvictionSoft}} {
		field, m := f.field, f.m
		for _, name := range sortedKeys(m) {
			if !contains(evictionSignals, name) {
				ps.errorf(key(path+"."+field, name), "unknown eviction signal %q: write one of %s", name, strings.Join(evictionSignals, ", "))
			}
		}
	}
	for _, name := range sortedKeys(k.EvictionSoft) {
		if _, ok := k.EvictionSoftGracePeriod[name]; !ok {
			ps.errorf(key(path+".evictionSoftGracePeriod", name), "evictionSoft %s needs a grace period: add evictionSoftGracePeriod: {%s: 1m}", name, name)
		}
	}
	for _, name := range sortedKeys(k.EvictionSoftGracePeriod) {
		if _, ok := k.EvictionSoft[name]; !ok {
			ps.errorf(key(path+".evictionSoftGracePeriod", name), "grace period for %s without an evictionSoft threshold; add evictionSoft: {%s: 500Mi} or delete it", name, name)
		}
	}
	pct := func(field string, v *int32) bool {
		if v != nil && (*v < 0 || *v > 100) {
			ps.errorf(path+"."+field, "must be a percentage from 0 to 100")
			return false
		}
		return true
	}
	okHigh, okLow := pct("imageGCHighThresholdPercent", k.ImageGCHighThresholdPercent), pct("imageGCLowThresholdPercent", k.ImageGCLowThresholdPercent)
	if okHigh && okLow && k.ImageGCHighThresholdPercent != nil && k.ImageGCLowThresholdPercent != nil &&
		*k.ImageGCHighThresholdPercent <= *k.ImageGCLowThresholdPercent {
		ps.errorf(path+".imageGCLowThresholdPercent", "imageGCLowThresholdPercent (%d) must be lower than imageGCHighThresholdPercent (%d)",
			*k.ImageGCLowThresholdPercent, *k.ImageGCHighThresholdPercent)
	}
}

// labelValueRule says what a label value may hold, shorter than apimachinery's regex text.
const labelValueRule = "write at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"

func isIntegerOperator(op corev1.NodeSelectorOperator) bool {
	return op == corev1.NodeSelectorOpGt || op == corev1.NodeSelectorOpLt || op == NodeSelectorOpGte || op == NodeSelectorOpLte
}

func operatorStrings() []string {
	out := make([]string, len(SupportedOperators))
	for i, o := range SupportedOperators {
		out[i] = string(o)
	}
	return out
}

func operatorList() string { return strings.Join(operatorStrings(), ", ") }

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// didYouMean returns ` (did you mean "x"?)` when s is a near miss of one candidate.
func didYouMean(s string, candidates ...string) string {
	if c := Closest(s, candidates...); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// Closest returns the candidate s most plausibly misspells (same letters in another
// case, or an edit distance of at most 2 for words longer than 3), or "".
func Closest(s string, candidates ...string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if c == s {
			return ""
		}
		if strings.EqualFold(c, s) {
			return c
		}
		if len(s) <= 3 {
			continue
		}
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
