// Package typed builds kube.Clients over client-go's typed clientset interface, such
// as the fake clientset that unit tests and the in-memory replay cluster use. It lives
// apart from package kube so the Lambda binaries, which talk to the API server through
// kube.NewClients, never link the full typed clientset.
package typed

import (
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-autoscaler/joiner/shared/kube"
)

// Clients returns kube.Clients over cs (built-in types) and dyn (Karpenter's CRDs).
func Clients(cs kubernetes.Interface, dyn dynamic.Interface) *kube.Clients {
	return &kube.Clients{
		Core:         cs.CoreV1(),
		Apps:         cs.AppsV1(),
		Policy:       cs.PolicyV1(),
		Coordination: cs.CoordinationV1(),
		Events:       cs.EventsV1(),
		Dynamic:      dyn,
	}
}
