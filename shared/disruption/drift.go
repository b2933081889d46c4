package disruption

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// nodeClassLaunch is the part of an EC2NodeClass an instance is launched from.
// Status (resolved subnets, AMIs) is left out: AMI drift is checked against
// status.amis separately, and re-resolving the same selectors must not drift.
type nodeClassLaunch struct {
	AMISelectorTerms           []karpenter.AMISelectorTerm           `json:"amiSelectorTerms,omitempty"`
	AMIFamily                  string                                `json:"amiFamily,omitempty"`
	UserData                   string                                `json:"userData,omitempty"`
	Role                       string                                `json:"role,omitempty"`
	InstanceProfile            string                                `json:"instanceProfile,omitempty"`
	SubnetSelectorTerms        []karpenter.SubnetSelectorTerm        `json:"subnetSelectorTerms,omitempty"`
	SecurityGroupSelectorTerms []karpenter.SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms,omitempty"`
	Tags                       map[string]string                     `json:"tags,omitempty"`
	BlockDeviceMappings        []*karpenter.BlockDeviceMapping       `json:"blockDeviceMappings,omitempty"`
	MetadataOptions            *karpenter.MetadataOptions            `json:"metadataOptions,omitempty"`
	Kubelet                    *karpenter.KubeletConfiguration       `json:"kubelet,omitempty"`
	AssociatePublicIPAddress   *bool                                 `json:"associatePublicIPAddress,omitempty"`
	DetailedMonitoring         *bool                                 `json:"detailedMonitoring,omitempty"`
	InstanceStorePolicy        string                                `json:"instanceStorePolicy,omitempty"`
	Context                    string                                `json:"context,omitempty"`
}

// NodeClassHash is a stable hash of the EC2NodeClass fields an instance is
// launched from: AMI selector terms, amiFamily, userData, role, instanceProfile,
// subnet and security-group selector terms, tags, blockDeviceMappings,
// metadataOptions, kubelet, associatePublicIPAddress, detailedMonitoring,
// instanceStorePolicy and context. Capacity-reservation selectors are left out:
// they steer where new instances go, not what a running one is. Empty and unset
// fields hash alike, and map order does not matter (encoding/json sorts keys).
func NodeClassHash(nc *karpenter.EC2NodeClass) string {
	if nc == nil {
		return ""
	}
	s := nc.Spec
	return hashJSON(nodeClassLaunch{
		AMISelectorTerms:           s.AMISelectorTerms,
		AMIFamily:                  deref(s.AMIFamily),
		UserData:                   deref(s.UserData),
		Role:                       s.Role,
		InstanceProfile:            deref(s.InstanceProfile),
		SubnetSelectorTerms:        s.SubnetSelectorTerms,
		SecurityGroupSelectorTerms: s.SecurityGroupSelectorTerms,
		Tags:                       s.Tags,
		BlockDeviceMappings:        s.BlockDeviceMappings,
		MetadataOptions:            s.MetadataOptions,
		Kubelet:                    s.Kubelet,
		AssociatePublicIPAddress:   s.AssociatePublicIPAddress,
		DetailedMonitoring:         s.DetailedMonitoring,
		InstanceStorePolicy:        deref(s.InstanceStorePolicy),
		Context:                    deref(s.Context),
	})
}

// nodePoolTemplate is the part of a NodePool's template a NodeClaim is stamped
// from. Requirements are left out, as Karpenter leaves them out: widening a list of
// instance types must not replace every node; a node whose labels no longer
// satisfy the requirements is found by requirementDrift instead.
type nodePoolTemplate struct {
	Labels                 map[string]string             `json:"labels,omitempty"`
	Annotations            map[string]string             `json:"annotations,omitempty"`
	Taints                 []corev1.Taint                `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                `json:"startupTaints,omitempty"`
	NodeClassRef           *karpenter.NodeClassReference `json:"nodeClassRef,omitempty"`
	TerminationGracePeriod string                        `json:"terminationGracePeriod,omitempty"`
	ExpireAfter            string                        `json:"expireAfter,omitempty"`
}

// NodePoolHash is a stable hash of a NodePool's template: metadata labels and
// annotations, taints, startupTaints, nodeClassRef, terminationGracePeriod and
// expireAfter. Budgets, limits, weight and consolidation settings are behaviour,
// not node shape, and are left out, as in Karpenter.
func NodePoolHash(np *karpenter.NodePool) string {
	if np == nil {
		return ""
	}
	t := np.Spec.Template
	h := nodePoolTemplate{
		Labels:        t.ObjectMeta.Labels,
		Annotations:   t.ObjectMeta.Annotations,
		Taints:        t.Spec.Taints,
		StartupTaints: t.Spec.StartupTaints,
		NodeClassRef:  t.Spec.NodeClassRef,
		ExpireAfter:   t.Spec.ExpireAfter.String(),
	}
	if ref := h.NodeClassRef; ref != nil {
		// The defaulted and the written-out forms are the same reference.
		r := *ref
		if r.Group == "" {
			r.Group = karpenter.AWSGroup
		}
		if r.Kind == "" {
			r.Kind = karpenter.NodeClassKind
		}
		h.NodeClassRef = &r
	}
	if !t.Spec.ExpireAfter.IsSet() {
		h.ExpireAfter = karpenter.DefaultExpireAfter.String()
	}
	if g := t.Spec.TerminationGracePeriod; g != nil {
		h.TerminationGracePeriod = g.Duration.String()
	}
	return hashJSON(h)
}

func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain data is hashed; a failure is a programming error.
		panic(fmt.Sprintf("disruption: hash: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Karpenter's drift reasons (the Drifted condition's reason) for the drift Joiner
// judges itself.
const (
	DriftNodePool     = "NodePoolDrifted"
	DriftNodeClass    = "NodeClassDrift"
	DriftAMI          = "AMIDrift"
	DriftRequirements = "RequirementsDrifted"
)

// driftReason explains why the node's NodeClaim drifted from its pool and class,
// or returns "" when it has not. A Drifted condition counts unless it carries a
// reason Joiner judges, and can judge on this NodeClaim, and finds no longer true.
func (s *state) driftReason(n *nodeInfo) string {
	if _, msg := s.ownDrift(n); msg != "" {
		return msg
	}
	if c := findCondition(n.claim.Status.Conditions, karpenter.ConditionDrifted); c != nil && c.Status == metav1.ConditionTrue && !s.judges(n, c.Reason) {
		msg := "NodeClaim has condition Drifted=True"
		if c.Reason != "" {
			msg += " (" + c.Reason + ")"
		}
		return msg
	}
	return ""
}

// judges reports whether ownDrift can tell, on this NodeClaim, whether the drift
// of reason holds: an AMI drift needs the image and the class's resolved AMIs, a
// hash drift a hash Joiner's function wrote.
func (s *state) judges(n *nodeInfo, reason string) bool {
	nc := n.claim
	switch reason {
	case DriftRequirements:
		return true
	case DriftNodePool:
		_, ok := nc.Annotations[s.opts.NodePoolHashAnnotation]
		return ok && hashComparable(nc, NodePoolHashVersionAnnotation)
	case DriftNodeClass:
		_, ok := nc.Annotations[s.opts.NodeClassHashAnnotation]
		return ok && hashComparable(nc, NodeClassHashVersionAnnotation) && s.classFor(n.pool, nc) != nil
	case DriftAMI:
		class := s.classFor(n.pool, nc)
		return nc.Status.ImageID != "" && class != nil && len(class.Status.AMIs) > 0
	}
	return false
}

// ownDrift is the drift Joiner judges from the NodeClaim, its pool and its
// class: Karpenter's reason for it and the explanation, or "" twice.
func (s *state) ownDrift(n *nodeInfo) (reason, msg string) {
	nc, np := n.claim, n.pool
	if got, ok := nc.Annotations[s.opts.NodePoolHashAnnotation]; ok && hashComparable(nc, NodePoolHashVersionAnnotation) {
		if want := NodePoolHash(np); got != want {
			return DriftNodePool, fmt.Sprintf("NodePool %s template changed (annotation %s %s, now %s)", np.Name, s.opts.NodePoolHashAnnotation, got, want)
		}
	}
	class := s.classFor(np, nc)
	if class != nil {
		if got, ok := nc.Annotations[s.opts.NodeClassHashAnnotation]; ok && hashComparable(nc, NodeClassHashVersionAnnotation) {
			if want := NodeClassHash(class); got != want {
				return DriftNodeClass, fmt.Sprintf("EC2NodeClass %s changed (annotation %s %s, now %s)", class.Name, s.opts.NodeClassHashAnnotation, got, want)
			}
		}
		if img := nc.Status.ImageID; img != "" && len(class.Status.AMIs) > 0 {
			found := false
			for _, a := range class.Status.AMIs {
				if a.ID == img {
					found = true
					break
				}
			}
			if !found {
				return DriftAMI, fmt.Sprintf("image %s is no longer among EC2NodeClass %s's AMIs (%s)", img, class.Name, amiIDs(class))
			}
		}
	}
	if msg := requirementDrift(np, n.labels()); msg != "" {
		return DriftRequirements, msg
	}
	return "", ""
}

// driftConditions keeps the NodeClaims' Drifted condition in step with the drift
// Joiner judges, as Karpenter's drift controller does: True with the reason on a
// drifted node that stays this round (a budget or a PDB holds it), removed once a
// node is no longer drifted for a reason Joiner judges (see judges).
func (s *state) driftConditions() {
	var acts []Action
	for _, n := range s.nodes {
		if !n.managed || !n.initialized || n.deleting || n.done {
			continue
		}
		reason, msg := s.ownDrift(n)
		c := findCondition(n.claim.Status.Conditions, karpenter.ConditionDrifted)
		switch {
		// A Drifted=True already there stays as it is while the node is drifted,
		// whatever reason Joiner finds first: Karpenter's reason is often the more
		// telling one (a NodeClaim it found drifted keeps its hash, which differs
		// from Joiner's by construction).
		case reason != "" && (c == nil || c.Status != metav1.ConditionTrue):
			acts = append(acts, Action{Kind: MarkDrifted, Reason: ReasonDrifted, NodeClaim: n.claimName(), Node: n.name(), NodePool: n.poolName(),
				DriftedReason: reason, Explanation: msg})
		case reason == "" && c != nil && s.judges(n, c.Reason):
			// Another reason (SubnetDrift, SecurityGroupDrift, ...) is Karpenter's
			// verdict on what Joiner does not judge, and stays.
			acts = append(acts, Action{Kind: ClearDrifted, NodeClaim: n.claimName(), Node: n.name(), NodePool: n.poolName(),
				Explanation: "no longer drifted (" + c.Reason + " no longer holds)"})
		}
	}
	sort.SliceStable(acts, func(i, j int) bool { return acts[i].Node < acts[j].Node })
	s.actions = append(s.actions, acts...)
}

// hashComparable reports whether the hash on nc was written by this hash function:
// either no version is recorded or it is HashVersion.
func hashComparable(nc *karpenter.NodeClaim, versionKey string) bool {
	v, ok := nc.Annotations[versionKey]
	return !ok || v == HashVersion
}

func amiIDs(nc *karpenter.EC2NodeClass) string {
	s := ""
	for i, a := range nc.Status.AMIs {
		if i > 0 {
			s += ", "
		}
		s += a.ID
	}
	return s
}

// requirementDrift names a pool requirement the node's labels no longer satisfy.
// Keys the node does not label are not judged: the node cannot show them.
func requirementDrift(np *karpenter.NodePool, labels map[string]string) string {
	for _, r := range np.Spec.Template.Spec.Requirements {
		v, ok := labels[r.Key]
		if !ok {
			continue
		}
		if !r.Matches(v, ok) {
			return fmt.Sprintf("label %s=%s no longer satisfies NodePool %s requirement %s %s %v", r.Key, v, np.Name, r.Key, r.Operator, r.Values)
		}
	}
	return ""
}

// expireAfter is the node's lifetime: the NodeClaim's own expireAfter (copied from
// the pool when it was created, as in Karpenter v1), else the pool template's,
// else 720h. ok is false for "Never".
func expireAfter(nc *karpenter.NodeClaim, np *karpenter.NodePool) (time.Duration, bool) {
	d := nc.Spec.ExpireAfter
	if !d.IsSet() {
		d = np.Spec.Template.Spec.ExpireAfter
	}
	switch {
	case d.IsNever():
		return 0, false
	case d.Duration != nil:
		return *d.Duration, true
	}
	return karpenter.DefaultExpireAfter, true
}

// terminationGracePeriod is the NodeClaim's, else the pool template's; ok is false
// when neither sets one.
func terminationGracePeriod(nc *karpenter.NodeClaim, np *karpenter.NodePool) (time.Duration, bool) {
	if g := nc.Spec.TerminationGracePeriod; g != nil {
		return g.Duration, true
	}
	if g := np.Spec.Template.Spec.TerminationGracePeriod; g != nil {
		return g.Duration, true
	}
	return 0, false
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
