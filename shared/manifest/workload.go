package manifest

import (
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// workload reads a Deployment, ReplicaSet, StatefulSet or Job and expands it into the
// pods it would create: <name>-<i> for i below replicas (parallelism for a Job),
// default 1, in the workload's namespace.
func (d *docCtx) workload(o *objCtx, obj map[string]any, kind string) {
	var (
		meta        *metav1.ObjectMeta
		tmpl        *corev1.PodTemplateSpec
		sel         *metav1.LabelSelector
		count       *int32
		countField  = "spec.replicas"
		apiVersion  = "apps/v1"
		selRequired = true
	)
	switch kind {
	case "Deployment":
		x := decodeTyped[appsv1.Deployment](o, obj, nil, false)
		meta, tmpl, sel, count = &x.ObjectMeta, &x.Spec.Template, x.Spec.Selector, x.Spec.Replicas
	case "ReplicaSet":
		x := decodeTyped[appsv1.ReplicaSet](o, obj, nil, false)
		meta, tmpl, sel, count = &x.ObjectMeta, &x.Spec.Template, x.Spec.Selector, x.Spec.Replicas
	case "StatefulSet":
		x := decodeTyped[appsv1.StatefulSet](o, obj, nil, false)
		meta, tmpl, sel, count = &x.ObjectMeta, &x.Spec.Template, x.Spec.Selector, x.Spec.Replicas
	case "Job":
		x := decodeTyped[batchv1.Job](o, obj, nil, false)
		meta, tmpl, sel, count = &x.ObjectMeta, &x.Spec.Template, x.Spec.Selector, x.Spec.Parallelism
		countField, apiVersion, selRequired = "spec.parallelism", "batch/v1", false
	default:
		return
	}
	o.meta(kind, meta, true)
	n := 1
	if count != nil {
		n = int(*count)
	}
	if n < 0 {
		o.errorf(countField, "must not be negative")
	}
	checkSelector(o, sel, tmpl.Labels, selRequired)
	o.checkMeta("spec.template.metadata", &tmpl.ObjectMeta)
	validatePodSpec(o, "spec.template.spec", &tmpl.Spec)
	// Expanding is most of the work on large inputs: do it here, off the bundle,
	// when the object is fine so far and the pods it makes fit in what all the
	// documents being read in parallel have reserved (so a file of several huge
	// workloads does not build them all before the first is refused).
	var pods []*corev1.Pod
	if o.errors == 0 && n <= MaxExpandedPods && d.b.reserve(n) {
		pods = expandPods(kind, apiVersion, meta, tmpl, n)
	}
	d.later(func() {
		if n > 0 && d.b.expanded+n > MaxExpandedPods {
			o.errorf(countField, "%d pods would take this input past %d pods, more than Joiner plans in one run; lower it", n, MaxExpandedPods)
		}
		if !o.keep(kind, meta.Namespace, meta.Name) {
			return
		}
		if pods == nil && n > 0 {
			// Its reservation failed while documents that are dropped after all
			// held theirs; in file order it fits.
			pods = expandPods(kind, apiVersion, meta, tmpl, n)
		}
		d.b.expanded += len(pods)
		d.b.workloadSources[objKey{kind, meta.Namespace, meta.Name}] = d.src
		kept := 0
		for _, p := range pods {
			id := objKey{"Pod", p.Namespace, p.Name}
			if first, dup := d.b.seen[id]; dup {
				o.errorf("metadata.name", "pod %s/%s made from this %s is already defined at %s; rename one", p.Namespace, p.Name, kind, first)
				continue
			}
			d.b.seen[id] = d.src
			d.b.Pods = append(d.b.Pods, p)
			kept++
		}
		d.count(kind, kept)
	})
}

// expandPods makes n pods from a template. Each pod has its own ObjectMeta and PodSpec
// structs, so setting a field such as Spec.NodeName or Name touches one pod; the maps
// and slices inside (labels, annotations, containers, resources, tolerations,
// affinity...) are shared with the template and the workload's other pods, since
// deep-copying them made expanding 20,000 pods ~10x slower (StatefulSet pods get their
// own labels, which differ per pod). The template's slices are clipped so that an
// append on one pod never writes into another's. Treat the shared parts as read-only,
// as the packer does; DeepCopy a pod before changing them.
func expandPods(kind, apiVersion string, meta *metav1.ObjectMeta, tmpl *corev1.PodTemplateSpec, n int) []*corev1.Pod {
	if n <= 0 {
		return nil
	}
	spec := tmpl.Spec
	clipSpec(&spec)
	block := make([]corev1.Pod, n)
	out := make([]*corev1.Pod, n)
	owners := make([]metav1.OwnerReference, n)
	isController := true
	for i := range block {
		p := &block[i]
		p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		p.Name = meta.Name + "-" + strconv.Itoa(i)
		p.Namespace = meta.Namespace
		p.Labels = tmpl.Labels
		p.Annotations = tmpl.Annotations
		if kind == "StatefulSet" {
			p.Labels = maps.Clone(tmpl.Labels)
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[appsv1.StatefulSetPodNameLabel] = p.Name
			p.Labels[appsv1.PodIndexLabel] = strconv.Itoa(i)
		}
		owners[i] = metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: meta.Name, UID: meta.UID, Controller: &isController}
		p.OwnerReferences = owners[i : i+1 : i+1]
		p.Spec = spec
		p.Status.Phase = corev1.PodPending
		out[i] = p
	}
	return out
}

// clipSpec sets the capacity of a spec's top-level slices to their length.
func clipSpec(s *corev1.PodSpec) {
	s.Volumes = slices.Clip(s.Volumes)
	s.InitContainers = slices.Clip(s.InitContainers)
	s.Containers = slices.Clip(s.Containers)
	s.EphemeralContainers = slices.Clip(s.EphemeralContainers)
	s.ImagePullSecrets = slices.Clip(s.ImagePullSecrets)
	s.Tolerations = slices.Clip(s.Tolerations)
	s.HostAliases = slices.Clip(s.HostAliases)
	s.ReadinessGates = slices.Clip(s.ReadinessGates)
	s.TopologySpreadConstraints = slices.Clip(s.TopologySpreadConstraints)
	s.SchedulingGates = slices.Clip(s.SchedulingGates)
	s.ResourceClaims = slices.Clip(s.ResourceClaims)
}
