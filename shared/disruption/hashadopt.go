package disruption

import (
	"maps"
	"sort"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// HashStamp is a change of annotations on one object (Kind is NodePool,
// EC2NodeClass or NodeClaim), written as a merge patch of metadata.annotations.
type HashStamp struct {
	Kind, Name  string
	Annotations map[string]string
}

// HashStamps returns the annotation changes that take the cluster's drift hashes over
// to Joiner's hash version, in the order they must be written (NodeClaims before the
// NodePool or EC2NodeClass they belong to).
//
// Joiner does not compute Karpenter's hashes: Karpenter's EC2NodeClass hash folds in
// the CA bundle of Karpenter's own API client and every field of its release's spec,
// so a look-alike would be one small difference away from declaring every node
// drifted. Instead Joiner follows the protocol Karpenter uses between its own hash
// versions (its nodepool.hash and nodeclass.hash controllers): when a NodePool or
// EC2NodeClass does not carry Joiner's hash version, each of its NodeClaims with
// another version is re-stamped with Joiner's version and, unless Karpenter had
// already found it drifted (a Drifted condition), with Joiner's hash of the current
// object; then the object itself is stamped. A node Karpenter launched from the
// current NodePool and EC2NodeClass is therefore not drifted by the switch, a node
// Karpenter had found drifted stays drifted, and from then on every change of the
// objects drifts the nodes as Joiner's own. Going back works the same way round:
// Karpenter sees a version that is not its own on the NodePool and EC2NodeClass and
// re-stamps Joiner's NodeClaims with its hashes. What neither side can see is an
// edit made while no controller ran (between scaling Karpenter down and Joiner's
// first consolidation round): nodes are then taken as matching the edited objects.
func HashStamps(pools []*karpenter.NodePool, classes []*karpenter.EC2NodeClass, claims []*karpenter.NodeClaim) []HashStamp {
	var out []HashStamp
	for _, np := range pools {
		if np.Annotations[NodePoolHashVersionAnnotation] == HashVersion && np.Annotations[NodePoolHashAnnotation] == NodePoolHash(np) {
			continue
		}
		hash := NodePoolHash(np)
		if np.Annotations[NodePoolHashVersionAnnotation] != HashVersion {
			out = append(out, restamp(claims, func(nc *karpenter.NodeClaim) bool { return nc.Labels[karpenter.NodePoolLabelKey] == np.Name },
				NodePoolHashAnnotation, NodePoolHashVersionAnnotation, hash)...)
		}
		out = append(out, HashStamp{Kind: karpenter.NodePoolKind, Name: np.Name,
			Annotations: map[string]string{NodePoolHashAnnotation: hash, NodePoolHashVersionAnnotation: HashVersion}})
	}
	for _, ec := range classes {
		hash := NodeClassHash(ec)
		if ec.Annotations[NodeClassHashVersionAnnotation] == HashVersion && ec.Annotations[NodeClassHashAnnotation] == hash {
			continue
		}
		if ec.Annotations[NodeClassHashVersionAnnotation] != HashVersion {
			out = append(out, restamp(claims, func(nc *karpenter.NodeClaim) bool { return usesClass(nc, ec.Name) },
				NodeClassHashAnnotation, NodeClassHashVersionAnnotation, hash)...)
		}
		out = append(out, HashStamp{Kind: karpenter.NodeClassKind, Name: ec.Name,
			Annotations: map[string]string{NodeClassHashAnnotation: hash, NodeClassHashVersionAnnotation: HashVersion}})
	}
	return mergeStamps(out)
}

// restamp re-stamps the selected live NodeClaims whose hash version is not Joiner's.
func restamp(claims []*karpenter.NodeClaim, selected func(*karpenter.NodeClaim) bool, hashKey, versionKey, hash string) []HashStamp {
	var out []HashStamp
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil || !selected(nc) || nc.Annotations[versionKey] == HashVersion {
			continue
		}
		a := map[string]string{versionKey: HashVersion}
		// A NodeClaim Karpenter found drifted keeps the hash it had: under another
		// version there is no telling whether the drift has gone.
		if findCondition(nc.Status.Conditions, karpenter.ConditionDrifted) == nil {
			a[hashKey] = hash
		}
		out = append(out, HashStamp{Kind: karpenter.NodeClaimKind, Name: nc.Name, Annotations: a})
	}
	return out
}

func usesClass(nc *karpenter.NodeClaim, name string) bool {
	ref := nc.Spec.NodeClassRef
	return ref != nil && ref.Name == name && (ref.Kind == "" || ref.Kind == karpenter.NodeClassKind) && (ref.Group == "" || ref.Group == karpenter.AWSGroup)
}

// mergeStamps folds the NodeClaim stamps of the NodePool and EC2NodeClass passes into
// one per NodeClaim, keeping every NodeClaim ahead of the objects.
func mergeStamps(in []HashStamp) []HashStamp {
	claims := map[string]map[string]string{}
	var objects []HashStamp
	for _, s := range in {
		if s.Kind != karpenter.NodeClaimKind {
			objects = append(objects, s)
			continue
		}
		if claims[s.Name] == nil {
			claims[s.Name] = map[string]string{}
		}
		maps.Copy(claims[s.Name], s.Annotations)
	}
	names := make([]string, 0, len(claims))
	for n := range claims {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]HashStamp, 0, len(names)+len(objects))
	for _, n := range names {
		out = append(out, HashStamp{Kind: karpenter.NodeClaimKind, Name: n, Annotations: claims[n]})
	}
	return append(out, objects...)
}
