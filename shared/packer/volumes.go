package packer

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/joiner-autoscaler/joiner/shared/facts"
)

// Volume topology, as kube-scheduler's VolumeBinding and VolumeZone plugins and
// Karpenter's volume topology judge it: a pod can run only where each of its
// PersistentVolumeClaims can be attached.
//
//   - A claim bound to a PersistentVolume: the volume's required node affinity
//     (an EBS volume lives in one zone), and its legacy zone/region labels.
//   - An unbound claim whose StorageClass binds WaitForFirstConsumer: the
//     class's allowedTopologies (the volume is provisioned where the pod lands).
//   - An unbound claim of an Immediate class waits for its volume: the pod
//     waits too ("unbound immediate PersistentVolumeClaims").
//   - A claim that does not exist, is being deleted, or names a volume that does
//     not exist (lost) leaves the pod unschedulable, with the claim named.
//
// A generic ephemeral volume's claim is <pod>-<volume>; until it exists its
// template's StorageClass says where it can be provisioned.

// volumeIndex looks storage objects up by name.
type volumeIndex struct {
	claims       map[string]*corev1.PersistentVolumeClaim // namespace/name
	volumes      map[string]*corev1.PersistentVolume
	classes      map[string]*storagev1.StorageClass
	defaultClass *storagev1.StorageClass
}

func newVolumeIndex(v *Volumes) *volumeIndex {
	ix := &volumeIndex{claims: map[string]*corev1.PersistentVolumeClaim{}, volumes: map[string]*corev1.PersistentVolume{},
		classes: map[string]*storagev1.StorageClass{}}
	for _, c := range v.Claims {
		ix.claims[c.Namespace+"/"+c.Name] = c
	}
	for _, pv := range v.PersistentVolumes {
		ix.volumes[pv.Name] = pv
	}
	for _, sc := range v.StorageClasses {
		ix.classes[sc.Name] = sc
		if sc.Annotations[defaultClassAnnotation] == "true" && (ix.defaultClass == nil || sc.Name < ix.defaultClass.Name) {
			ix.defaultClass = sc
		}
	}
	return ix
}

const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// volumeTopology returns the node-selector terms (ORed) p's volumes allow, nil
// when they do not restrict it, or why p cannot be placed.
func (ix *volumeIndex) volumeTopology(p *corev1.Pod) ([]corev1.NodeSelectorTerm, string) {
	var terms []corev1.NodeSelectorTerm
	ns := facts.PodNamespace(p)
	for _, v := range p.Spec.Volumes {
		var name, class string
		var classSet bool
		switch {
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			name = p.Name + "-" + v.Name
			if t := v.Ephemeral.VolumeClaimTemplate; t != nil && t.Spec.StorageClassName != nil {
				class, classSet = *t.Spec.StorageClassName, true
			}
		default:
			continue
		}
		claim := ix.claims[ns+"/"+name]
		var allowed []corev1.NodeSelectorTerm
		var why string
		switch {
		case claim == nil && v.Ephemeral != nil:
			// Created with the pod by the ephemeral volume controller.
			allowed, why = ix.provisionable(class, classSet, name)
		case claim == nil:
			return nil, fmt.Sprintf("persistentvolumeclaim %q not found", name)
		case claim.DeletionTimestamp != nil:
			return nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)
		case claim.Spec.VolumeName != "":
			pv := ix.volumes[claim.Spec.VolumeName]
			if pv == nil {
				return nil, fmt.Sprintf("persistentvolumeclaim %q is bound to persistentvolume %q, which does not exist (lost)", name, claim.Spec.VolumeName)
			}
			allowed = volumeNodeTerms(pv)
		default:
			cn, set := "", claim.Spec.StorageClassName != nil
			if set {
				cn = *claim.Spec.StorageClassName
			}
			allowed, why = ix.provisionable(cn, set, name)
		}
		if why != "" {
			return nil, why
		}
		if allowed != nil {
			terms = andTerms(terms, allowed)
		}
	}
	return terms, ""
}

// provisionable returns where an unbound claim of class (the default class when
// unset) can be provisioned, or why the pod must wait.
func (ix *volumeIndex) provisionable(class string, set bool, claim string) ([]corev1.NodeSelectorTerm, string) {
	var sc *storagev1.StorageClass
	switch {
	case set && class == "":
		return nil, fmt.Sprintf("persistentvolumeclaim %q is unbound and names no StorageClass (storageClassName \"\"): it waits for a PersistentVolume made for it", claim)
	case set:
		if sc = ix.classes[class]; sc == nil {
			return nil, fmt.Sprintf("persistentvolumeclaim %q: storageclass %q not found", claim, class)
		}
	default:
		if sc = ix.defaultClass; sc == nil {
			return nil, fmt.Sprintf("persistentvolumeclaim %q is unbound and the cluster has no default StorageClass", claim)
		}
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return nil, fmt.Sprintf("pod has unbound immediate PersistentVolumeClaims: %q (storageclass %q binds Immediate; the pod waits for its volume)", claim, sc.Name)
	}
	if len(sc.AllowedTopologies) == 0 {
		return nil, ""
	}
	terms := make([]corev1.NodeSelectorTerm, 0, len(sc.AllowedTopologies))
	for _, t := range sc.AllowedTopologies {
		var term corev1.NodeSelectorTerm
		for _, e := range t.MatchLabelExpressions {
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: e.Key, Operator: corev1.NodeSelectorOpIn, Values: e.Values})
		}
		terms = append(terms, term)
	}
	return terms, ""
}

// volumeNodeTerms is where a PersistentVolume can be attached: its required node
// affinity, and the zone and region its legacy labels name (VolumeZone; values
// may list several zones joined by "__").
func volumeNodeTerms(pv *corev1.PersistentVolume) []corev1.NodeSelectorTerm {
	var terms []corev1.NodeSelectorTerm
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil && len(a.Required.NodeSelectorTerms) > 0 {
		terms = append(terms, a.Required.NodeSelectorTerms...)
	}
	var labelTerm corev1.NodeSelectorTerm
	for _, k := range []string{corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone, corev1.LabelTopologyRegion, corev1.LabelFailureDomainBetaRegion} {
		if v, ok := pv.Labels[k]; ok && v != "" {
			labelTerm.MatchExpressions = append(labelTerm.MatchExpressions, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: strings.Split(v, "__")})
		}
	}
	if len(labelTerm.MatchExpressions) > 0 {
		terms = andTerms(terms, []corev1.NodeSelectorTerm{labelTerm})
	}
	return terms
}

// andTerms is (a1 OR a2 ...) AND (b1 OR b2 ...) as ORed terms; nil a is no restriction.
func andTerms(a, b []corev1.NodeSelectorTerm) []corev1.NodeSelectorTerm {
	if a == nil {
		return b
	}
	out := make([]corev1.NodeSelectorTerm, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, corev1.NodeSelectorTerm{
				MatchExpressions: append(append([]corev1.NodeSelectorRequirement(nil), x.MatchExpressions...), y.MatchExpressions...),
				MatchFields:      append(append([]corev1.NodeSelectorRequirement(nil), x.MatchFields...), y.MatchFields...),
			})
		}
	}
	return out
}

// withVolumeTopology returns the pods with their volumes' topology added to their
// required node affinity (a copy of each pod changed), and the pods the volumes
// leave unschedulable, with why (by pod key).
func withVolumeTopology(v *Volumes, pods []*corev1.Pod) ([]*corev1.Pod, map[string]string) {
	var ix *volumeIndex
	var out []*corev1.Pod
	var why map[string]string
	for i, p := range pods {
		if len(p.Spec.Volumes) == 0 {
			continue
		}
		if ix == nil {
			ix = newVolumeIndex(v)
		}
		terms, reason := ix.volumeTopology(p)
		if reason != "" {
			if why == nil {
				why = map[string]string{}
			}
			why[facts.PodKey(p)] = reason
			continue
		}
		if terms == nil {
			continue
		}
		if out == nil {
			out = append([]*corev1.Pod(nil), pods...)
		}
		cp := *p
		cp.Spec = *p.Spec.DeepCopy()
		if cp.Spec.Affinity == nil {
			cp.Spec.Affinity = &corev1.Affinity{}
		}
		if cp.Spec.Affinity.NodeAffinity == nil {
			cp.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
		}
		na := cp.Spec.Affinity.NodeAffinity
		var own []corev1.NodeSelectorTerm
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			own = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		}
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: andTerms(nilIfEmpty(own), terms)}
		out[i] = &cp
	}
	if out == nil {
		out = pods
	}
	return out, why
}

func nilIfEmpty(t []corev1.NodeSelectorTerm) []corev1.NodeSelectorTerm {
	if len(t) == 0 {
		return nil
	}
	return t
}
