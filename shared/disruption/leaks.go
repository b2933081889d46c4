package disruption

import (
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Tags Joiner puts on every instance it launches.
const (
	// ClusterTagPrefix + cluster name = "owned" marks the cluster's instances.
	ClusterTagPrefix = "kubernetes.io/cluster/"
	NodePoolTag      = karpenter.NodePoolLabelKey
	NodeClaimTag     = karpenter.NodeClaimLabelKey
)

// OwnedInstance is an EC2 instance as the executor listed it.
type OwnedInstance struct {
	ID         string
	State      string // EC2 state name: pending, running, stopping, stopped, shutting-down, terminated
	LaunchTime time.Time
	Tags       map[string]string
}

// LeakKind says what to clean up.
type LeakKind string

// Leak kinds.
const (
	// TerminateInstance: an instance of this cluster's pools that no NodeClaim owns.
	TerminateInstance LeakKind = "TerminateInstance"
	// DeleteNodeClaim: a NodeClaim launched long ago whose node never registered;
	// the executor deletes it, terminating its instance.
	DeleteNodeClaim LeakKind = "DeleteNodeClaim"
)

// LeakAction is one clean-up step.
type LeakAction struct {
	Kind       LeakKind `json:"kind"`
	InstanceID string   `json:"instanceID,omitempty"`
	NodeClaim  string   `json:"nodeClaim,omitempty"`
	NodePool   string   `json:"nodePool,omitempty"`
	Reason     string   `json:"reason"`
}

// Leaks finds what the cluster's launches left behind. An instance is terminated
// only when it carries this cluster's ownership tag (kubernetes.io/cluster/<cluster>
// = owned) and a karpenter.sh/nodepool tag, no NodeClaim names it (by the instance
// id in its providerID, or by its karpenter.sh/nodeclaim tag), and it is older than
// grace (DefaultLeakGrace when zero or less): the provisioner creates the
// NodeClaim before it launches, so younger instances may be launches in flight.
// A NodeClaim that is Launched but not Registered RegistrationTTL after its launch
// is deleted. Instances already shutting down or terminated, and NodeClaims
// already being deleted, are left alone. The result is sorted, so the same input
// gives the same list.
func Leaks(cluster string, instances []OwnedInstance, claims []*karpenter.NodeClaim, now time.Time, grace time.Duration) []LeakAction {
	if grace <= 0 {
		grace = DefaultLeakGrace
	}
	out := []LeakAction{}
	if cluster == "" {
		return out // without the cluster's name no instance can be shown to be ours
	}
	byInstance := map[string]bool{}
	byName := map[string]bool{}
	for _, nc := range claims {
		if nc == nil {
			continue
		}
		byName[nc.Name] = true
		if id := facts.InstanceID(nc.Status.ProviderID); id != "" {
			byInstance[id] = true
		}
	}
	ownerKey := ClusterTagPrefix + cluster
	for _, in := range instances {
		switch {
		case in.ID == "", in.Tags[ownerKey] != "owned", in.Tags[NodePoolTag] == "":
			continue
		case in.State == "shutting-down" || in.State == "terminated":
			continue
		case byInstance[in.ID]:
			continue
		case in.Tags[NodeClaimTag] != "" && byName[in.Tags[NodeClaimTag]]:
			continue
		case in.LaunchTime.IsZero() || now.Sub(in.LaunchTime) < grace:
			continue
		}
		reason := fmt.Sprintf("instance of NodePool %s launched %s (%s ago) and no NodeClaim owns it", in.Tags[NodePoolTag],
			in.LaunchTime.UTC().Format(time.RFC3339), now.Sub(in.LaunchTime).Round(time.Second))
		if name := in.Tags[NodeClaimTag]; name != "" {
			reason += fmt.Sprintf(" (its NodeClaim %s is gone)", name)
		}
		out = append(out, LeakAction{Kind: TerminateInstance, InstanceID: in.ID, NodePool: in.Tags[NodePoolTag], Reason: reason})
	}
	for _, nc := range claims {
		if nc == nil || nc.DeletionTimestamp != nil {
			continue
		}
		launched := findCondition(nc.Status.Conditions, karpenter.ConditionLaunched)
		if launched == nil || launched.Status != metav1.ConditionTrue || conditionTrue(nc.Status.Conditions, karpenter.ConditionRegistered) {
			continue
		}
		since := launched.LastTransitionTime.Time
		if since.IsZero() {
			since = nc.CreationTimestamp.Time
		}
		if since.IsZero() || now.Sub(since) < RegistrationTTL {
			continue
		}
		out = append(out, LeakAction{Kind: DeleteNodeClaim, NodeClaim: nc.Name, InstanceID: facts.InstanceID(nc.Status.ProviderID),
			NodePool: nc.Labels[karpenter.NodePoolLabelKey],
			Reason: fmt.Sprintf("launched %s but its node has not registered within %s",
				since.UTC().Format(time.RFC3339), RegistrationTTL)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind > b.Kind // terminate orphans first
		}
		if a.InstanceID != b.InstanceID {
			return a.InstanceID < b.InstanceID
		}
		return a.NodeClaim < b.NodeClaim
	})
	return out
}
