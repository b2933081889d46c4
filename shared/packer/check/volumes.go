package check

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// volumeCheck judges a placed pod's volumes against its node as kube-scheduler's
// VolumeBinding and VolumeZone do: a bound claim's PersistentVolume must be
// attachable there (its required node affinity, its legacy zone and region
// labels); an unbound WaitForFirstConsumer claim's StorageClass must allow the
// node's topology. It returns what the node breaks, or "".
func (c *checker) volumeCheck(p *corev1.Pod, node *corev1.Node) string {
	if c.snap.Volumes == nil {
		return ""
	}
	ns := p.Namespace
	if ns == "" {
		ns = "default"
	}
	for _, v := range p.Spec.Volumes {
		var name string
		var tmplClass *string
		switch {
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			name = p.Name + "-" + v.Name
			if v.Ephemeral.VolumeClaimTemplate != nil {
				tmplClass = v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName
			}
		default:
			continue
		}
		var claim *corev1.PersistentVolumeClaim
		for _, cl := range c.snap.Volumes.Claims {
			if cl.Namespace == ns && cl.Name == name {
				claim = cl
			}
		}
		if claim == nil && v.Ephemeral == nil {
			return fmt.Sprintf("claim %s does not exist", name)
		}
		if claim != nil && claim.Spec.VolumeName != "" {
			var pv *corev1.PersistentVolume
			for _, x := range c.snap.Volumes.PersistentVolumes {
				if x.Name == claim.Spec.VolumeName {
					pv = x
				}
			}
			if pv == nil {
				return fmt.Sprintf("claim %s's volume %s does not exist", name, claim.Spec.VolumeName)
			}
			if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
				if ok, err := nodeaffinity.NewLazyErrorNodeSelector(a.Required).Match(node); err != nil || !ok {
					return fmt.Sprintf("volume %s of claim %s cannot attach there (its node affinity)", pv.Name, name)
				}
			}
			for _, k := range []string{corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone, corev1.LabelTopologyRegion, corev1.LabelFailureDomainBetaRegion} {
				want, ok := pv.Labels[k]
				if !ok {
					continue
				}
				got := node.Labels[k]
				if got == "" {
					got = node.Labels[legacyOrStable(k)]
				}
				if !containsString(strings.Split(want, "__"), got) {
					return fmt.Sprintf("volume %s of claim %s is in %s %s, the node in %q", pv.Name, name, k, want, got)
				}
			}
			continue
		}
		class := tmplClass
		if claim != nil {
			class = claim.Spec.StorageClassName
		}
		var sc *storagev1.StorageClass
		for _, x := range c.snap.Volumes.StorageClasses {
			if class != nil && x.Name == *class || class == nil && x.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
				sc = x
				break
			}
		}
		if sc == nil || sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
			return fmt.Sprintf("claim %s is unbound and cannot be provisioned for the pod (no WaitForFirstConsumer StorageClass)", name)
		}
		if len(sc.AllowedTopologies) == 0 {
			continue
		}
		allowed := false
		for _, t := range sc.AllowedTopologies {
			all := true
			for _, e := range t.MatchLabelExpressions {
				if !containsString(e.Values, node.Labels[e.Key]) {
					all = false
				}
			}
			allowed = allowed || all
		}
		if !allowed {
			return fmt.Sprintf("claim %s's StorageClass %s does not allow the node's topology", name, sc.Name)
		}
	}
	return ""
}

// hasClaims reports whether a pod mounts a PersistentVolumeClaim (or an
// ephemeral one): then volumes, which the checker's hypothetical nodes do not
// model, may be why it waits.
func hasClaims(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

func legacyOrStable(k string) string {
	for stable, legacy := range legacyLabels {
		switch k {
		case stable:
			return legacy
		case legacy:
			return stable
		}
	}
	return k
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
