package main

import (
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/joiner-autoscaler/joiner/events"
	"github.com/joiner-autoscaler/joiner/shared/facts"
)

// unboundPods selects pods no node was assigned to; bound pods are most of a
// cluster and the forwarder never needs them, so the server filters them out.
var unboundPods = fields.OneTermEqualSelector("spec.nodeName", "").String()

// coreV1Client is a REST client for the core/v1 group with a scheme that knows only
// that group. client-go's typed core/v1 client registers every built-in API group
// (k8s.io/client-go/kubernetes/scheme), which alone made the binary 31 MB.
func coreV1Client(cfg *rest.Config) (rest.Interface, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	// Protobuf decodes a list of a thousand pods in a fraction of JSON's garbage,
	// which is most of the forwarder's peak memory.
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

// newPodInformer watches unbound pods and feeds pending ones to b.
func newPodInformer(core rest.Interface, resync time.Duration, b *Batcher, log *slog.Logger) (cache.SharedIndexInformer, error) {
	lw := cache.NewFilteredListWatchFromClient(core, "pods", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.FieldSelector = unboundPods })
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, resync, cache.Indexers{})
	// The cache keeps every unbound pod; dropping what the forwarder never reads keeps
	// it inside its memory limit with thousands of pending pods.
	if err := inf.SetTransform(slimPod); err != nil {
		return nil, err
	}
	h := &podHandler{batcher: b, log: log}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.observe(obj) },
		UpdateFunc: func(_, obj any) { h.observe(obj) },
		DeleteFunc: h.deleted,
	}); err != nil {
		return nil, err
	}
	return inf, nil
}

func slimPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
		p.Annotations = nil
		p.Status.ContainerStatuses = nil
		p.Status.InitContainerStatuses = nil
		for i := range p.Spec.Containers {
			c := &p.Spec.Containers[i]
			c.Env, c.EnvFrom, c.VolumeMounts, c.Command, c.Args = nil, nil, nil, nil, nil
		}
		p.Spec.Volumes = nil
	}
	return obj, nil
}

type podHandler struct {
	batcher *Batcher
	log     *slog.Logger
}

// observe adds a pod that is pending and removes one that no longer is (scheduled,
// terminating). A panic on one odd pod is logged, not allowed to stop the watch.
func (h *podHandler) observe(obj any) {
	defer h.recover(obj)
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod == nil {
		h.log.Warn("ignoring a watched object that is not a pod", "type", fmt.Sprintf("%T", obj))
		return
	}
	if !facts.IsPending(pod) {
		h.batcher.Remove(pod.UID)
		return
	}
	p := events.FromPod(pod)
	if err := p.Validate(); err != nil {
		// The provisioner would reject it too; better it never takes a batch's room.
		h.log.Warn("skipping a pending pod that cannot be described", "pod", p.Key(), "err", err)
		return
	}
	h.batcher.Add(p)
}

func (h *podHandler) deleted(obj any) {
	defer h.recover(obj)
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		h.batcher.Remove(pod.UID)
	}
}

func (h *podHandler) recover(obj any) {
	if r := recover(); r != nil {
		// Only the type: reading the object's metadata could panic again.
		h.log.Error("pod handler panicked; object skipped", "type", fmt.Sprintf("%T", obj), "panic", fmt.Sprint(r))
	}
}
