// Package facts answers the questions every part of Joiner asks about a pod or a
// node: what a pod requests, whether it is finished, a DaemonSet's or a mirror
// pod, whether it must find a new home when its node goes; whether a node is
// Ready or protected, whether do-not-disrupt holds. Each has one definition here,
// so the provisioner, the disruption decision, the interruption handler, the
// forwarder and the simulator cannot disagree about them, as they did when each
// kept its own copy.
//
// The rules follow Kubernetes (k8s.io/component-helpers for requests) and
// Karpenter's pod and node utilities, which Joiner must match. The package is pure:
// it imports only the API types, apimachinery and component-helpers, so the
// packing engine and the small forwarder binary can use it without linking any
// client.
//
// shared/packer/check deliberately does not use it: it is the independent checker
// of the engine's plans and states the same rules a second time, so that a bug in
// one implementation shows up as a disagreement with the other.
package facts
