package kube

import (
	"encoding/binary"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A snapshot of 100,000 pods and 10,000 nodes must fit a Lambda's memory next to the
// decision, so the read keeps only what scheduling, disruption and lifecycle
// decisions read. Objects in a ClusterState are therefore partial: Joiner patches
// what it changes and never writes one back whole.

// slimMeta drops what no decision reads from any object: managedFields (often a
// third of an object) and kubectl's copy of the last applied manifest.
func slimMeta(m metav1.Object) {
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
			delete(a, corev1.LastAppliedConfigAnnotation)
		}
	}
}

// slimPod drops a pod's process-level detail (command, environment, probes, mounts)
// and the volumes that only carry files into it (Secrets, ConfigMaps, projected
// service-account tokens, the downward API); claims, ephemeral, host and every other
// volume stay, since volume topology and limits may depend on them. Container
// statuses keep their name, resources and termination time (the disruption code's
// last pod event; in-place resizes).
func slimPod(p *corev1.Pod) {
	slimMeta(p)
	slimContainers(p.Spec.Containers)
	slimContainers(p.Spec.InitContainers)
	p.Spec.EphemeralContainers = nil
	vols := p.Spec.Volumes[:0]
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil || v.ConfigMap != nil || v.Projected != nil || v.DownwardAPI != nil {
			continue
		}
		vols = append(vols, v)
	}
	clear(p.Spec.Volumes[len(vols):])
	p.Spec.Volumes = vols
	// Nothing decides by a pod's addresses, DNS, pull secrets or pod-level
	// security context.
	p.Spec.ImagePullSecrets, p.Spec.HostAliases, p.Spec.DNSConfig, p.Spec.SecurityContext = nil, nil, nil, nil
	p.Spec.ReadinessGates, p.Spec.Hostname, p.Spec.Subdomain = nil, "", ""
	p.Status.PodIP, p.Status.PodIPs, p.Status.HostIP, p.Status.HostIPs = "", nil, "", nil
	p.Status.ContainerStatuses = slimStatuses(p.Status.ContainerStatuses)
	p.Status.InitContainerStatuses = slimStatuses(p.Status.InitContainerStatuses)
	p.Status.EphemeralContainerStatuses = nil
}

func slimContainers(cs []corev1.Container) {
	for i := range cs {
		c := &cs[i]
		c.Command, c.Args, c.WorkingDir = nil, nil, ""
		c.Env, c.EnvFrom, c.VolumeMounts, c.VolumeDevices = nil, nil, nil, nil
		c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
		c.TerminationMessagePath, c.TerminationMessagePolicy, c.Image = "", "", ""
		c.SecurityContext = nil
	}
}

func slimStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	for i := range ss {
		s := &ss[i]
		var term *corev1.ContainerStateTerminated
		if t := s.State.Terminated; t != nil {
			term = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, FinishedAt: t.FinishedAt}
		}
		*s = corev1.ContainerStatus{Name: s.Name, State: corev1.ContainerState{Terminated: term},
			AllocatedResources: s.AllocatedResources, Resources: s.Resources, Ready: s.Ready, RestartCount: s.RestartCount}
	}
	return ss
}

// slimNode drops the node's image list (up to 50 images with their digests, the
// largest part of a node's status), which Joiner does not score by.
func slimNode(n *corev1.Node) {
	slimMeta(n)
	n.Status.Images = nil
}

// sharer makes the pods of one read share what replicas of a workload hold alike:
// their containers (with the requests and limits maps, a fifth of a slimmed pod),
// tolerations, affinity, spread constraints, owner references, labels and
// annotations, and the strings many pods repeat (namespace, node name). At
// 100,000 pods the snapshot's live heap, which the collector scans again and again
// while the invocation runs, is most of a function's CPU; replicas are most pods.
// Shared values are read-only like the rest of the snapshot; shared slices are
// clipped, so an append copies instead of writing into a neighbour's.
type sharer struct {
	strs        map[string]string
	containers  map[string][]corev1.Container
	tolerations map[string][]corev1.Toleration
	maps        map[string]map[string]string
	owners      map[string][]metav1.OwnerReference
	affinity    map[string]*corev1.Affinity
	spread      map[string][]corev1.TopologySpreadConstraint
	key         []byte
}

func newSharer() *sharer {
	return &sharer{strs: map[string]string{}, containers: map[string][]corev1.Container{},
		tolerations: map[string][]corev1.Toleration{}, maps: map[string]map[string]string{},
		owners: map[string][]metav1.OwnerReference{}, affinity: map[string]*corev1.Affinity{},
		spread: map[string][]corev1.TopologySpreadConstraint{}}
}

// protoMessage is what the API types' generated protobuf code gives each type:
// its encoding is the content key of a value.
type protoMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// keyOf encodes items into s.key and returns it (valid until the next call).
func keyOf[T any, P interface {
	*T
	protoMessage
}](s *sharer, items []T) []byte {
	s.key = s.key[:0]
	for i := range items {
		m := P(&items[i])
		n := m.Size()
		s.key = binary.AppendUvarint(s.key, uint64(n))
		start := len(s.key)
		s.key = slices.Grow(s.key, n)[:start+n]
		if _, err := m.MarshalToSizedBuffer(s.key[start:]); err != nil {
			// Not shared then: a key that cannot be built matches nothing.
			return nil
		}
	}
	return s.key
}

// share returns the value table holds under items' content, storing items
// there first if none is held.
func share[T any, P interface {
	*T
	protoMessage
}](s *sharer, table map[string][]T, items []T) []T {
	if len(items) == 0 {
		return items
	}
	k := keyOf[T, P](s, items)
	if k == nil {
		return items
	}
	if v, ok := table[string(k)]; ok {
		return v
	}
	items = slices.Clip(items)
	table[string(k)] = items
	return items
}

// str returns the read's one copy of v.
func (s *sharer) str(v string) string {
	if v == "" {
		return v
	}
	if c, ok := s.strs[v]; ok {
		return c
	}
	s.strs[v] = v
	return v
}

// stringMap returns the read's one copy of a map with m's entries.
func (s *sharer) stringMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s.key = s.key[:0]
	for _, k := range keys {
		s.key = append(append(append(append(s.key, k...), 0), m[k]...), 0)
	}
	if c, ok := s.maps[string(s.key)]; ok {
		return c
	}
	s.maps[string(s.key)] = m
	return m
}

// pod makes p share what an earlier pod of the read holds alike.
func (s *sharer) pod(p *corev1.Pod) {
	p.Namespace, p.GenerateName = s.str(p.Namespace), s.str(p.GenerateName)
	p.Labels, p.Annotations = s.stringMap(p.Labels), s.stringMap(p.Annotations)
	p.OwnerReferences = share(s, s.owners, p.OwnerReferences)
	spec := &p.Spec
	spec.Containers = share(s, s.containers, spec.Containers)
	spec.InitContainers = share(s, s.containers, spec.InitContainers)
	spec.Tolerations = share(s, s.tolerations, spec.Tolerations)
	spec.TopologySpreadConstraints = share(s, s.spread, spec.TopologySpreadConstraints)
	spec.NodeSelector = s.stringMap(spec.NodeSelector)
	if a := spec.Affinity; a != nil {
		if k := keyOf(s, []corev1.Affinity{*a}); k != nil {
			if c, ok := s.affinity[string(k)]; ok {
				spec.Affinity = c
			} else {
				s.affinity[string(k)] = a
			}
		}
	}
	spec.NodeName, spec.SchedulerName = s.str(spec.NodeName), s.str(spec.SchedulerName)
	spec.ServiceAccountName, spec.DeprecatedServiceAccount = s.str(spec.ServiceAccountName), s.str(spec.DeprecatedServiceAccount)
	spec.PriorityClassName = s.str(spec.PriorityClassName)
	st := &p.Status
	st.NominatedNodeName = s.str(st.NominatedNodeName)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Reason, c.Message = s.str(c.Reason), s.str(c.Message)
	}
	for i := range st.ContainerStatuses {
		st.ContainerStatuses[i].Name = s.str(st.ContainerStatuses[i].Name)
	}
}
