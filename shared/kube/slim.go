package kube

import (
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
