// Package typed builds kube.Clients over client-go's typed clientset interface, such
// as the fake clientset that unit tests and the in-memory replay cluster use. It lives
// apart from package kube so the Lambda binaries, which talk to the API server through
// kube.NewClients, never link the typed clientset (whose scheme registers every API group).
package typed

import (
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-autoscaler/joiner/shared/kube"
)

// Clients returns kube.Clients over cs (built-in types) and dyn (Karpenter's CRDs).
func Clients(cs kubernetes.Interface, dyn dynamic.Interface) *kube.Clients {
	c := kube.ClientsOf(cs.CoreV1().Pods, cs.CoreV1().Nodes, cs.AppsV1().DaemonSets, cs.PolicyV1().PodDisruptionBudgets,
		cs.CoordinationV1().Leases, cs.EventsV1().Events, dyn)
	c.Storage = storage{cs}
	return c
}

type storage struct{ cs kubernetes.Interface }

func (s storage) PersistentVolumeClaims(ns string) kube.PersistentVolumeClaimAPI {
	return s.cs.CoreV1().PersistentVolumeClaims(ns)
}
func (s storage) PersistentVolumes() kube.PersistentVolumeAPI {
	return s.cs.CoreV1().PersistentVolumes()
}
func (s storage) StorageClasses() kube.StorageClassAPI { return s.cs.StorageV1().StorageClasses() }
