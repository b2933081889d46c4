package kubesim

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/facts"
)

// workloadKinds are the controllers whose pods come back when they are lost.
var workloadKinds = map[string]bool{"Deployment": true, "ReplicaSet": true, "StatefulSet": true, "Job": true}

// workloadKey names a workload.
type workloadKey struct {
	Kind, Namespace, Name string
}

func (k workloadKey) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// workload is what its controller keeps: a pod template and the replica count.
type workload struct {
	template *corev1.Pod
	replicas int
	// next numbers the pods made to replace lost ones (name-<next>), as a
	// ReplicaSet's generated names differ from the pods they replace.
	next int
}

func controllerOf(p *corev1.Pod) (workloadKey, bool) {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && workloadKinds[o.Kind] {
			return workloadKey{o.Kind, p.Namespace, o.Name}, true
		}
	}
	return workloadKey{}, false
}

// adopt records the workload of a pod applied to the cluster.
func (c *Cluster) adopt(p *corev1.Pod) {
	k, ok := controllerOf(p)
	if !ok {
		return
	}
	w := c.workloads[k]
	if w == nil {
		t := p.DeepCopy()
		t.Name, t.UID, t.ResourceVersion, t.CreationTimestamp = "", "", "", metav1.Time{}
		t.Spec.NodeName = ""
		t.Status = corev1.PodStatus{Phase: corev1.PodPending}
		w = &workload{template: t}
		c.workloads[k] = w
	}
	w.replicas++
	if i, err := strconv.Atoi(strings.TrimPrefix(p.Name, k.Name+"-")); err == nil && i >= w.next {
		w.next = i + 1
	}
}

// reconcileWorkloads brings every workload back to its replica count; pods it
// creates join the step's list and pods it deletes leave it.
func (c *Cluster) reconcileWorkloads(ctx context.Context, r *Report, pods *[]*corev1.Pod) error {
	if len(c.workloads) == 0 {
		return nil
	}
	byOwner := livePodsByOwner(*pods)
	for _, k := range sortedKeys(c.workloads) {
		created, deleted, err := c.converge(ctx, k, byOwner[k])
		if err != nil {
			return err
		}
		r.Recreated += len(created)
		*pods = append(slices.DeleteFunc(*pods, func(p *corev1.Pod) bool { return deleted[p.UID] }), created...)
	}
	return nil
}

func livePodsByOwner(pods []*corev1.Pod) map[workloadKey][]*corev1.Pod {
	out := map[workloadKey][]*corev1.Pod{}
	for _, p := range pods {
		if k, ok := controllerOf(p); ok && facts.IsActive(p) {
			out[k] = append(out[k], p)
		}
	}
	return out
}

// converge creates or deletes pods of a workload until it has its replicas.
func (c *Cluster) converge(ctx context.Context, k workloadKey, pods []*corev1.Pod) (created []*corev1.Pod, deleted map[types.UID]bool, err error) {
	w := c.workloads[k]
	have := map[string]bool{}
	for _, p := range pods {
		have[p.Name] = true
	}
	for len(pods)+len(created) < w.replicas {
		p := w.template.DeepCopy()
		p.Name = c.nextName(k, w, have)
		have[p.Name] = true
		c.stamp(p)
		out, err := c.cs.CoreV1().Pods(k.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return created, deleted, errf(err, "%s: create pod %s", k, p.Name)
		}
		c.real.track(podsGVR, out.Namespace, out.Name)
		created = append(created, out)
	}
	deleted = map[types.UID]bool{}
	if extra := len(pods) - w.replicas; extra > 0 {
		// Newest first, as a ReplicaSet scales down.
		sort.SliceStable(pods, func(i, j int) bool {
			if ci, cj := createdAt(pods[i]), createdAt(pods[j]); !ci.Equal(cj) {
				return cj.Before(ci)
			}
			return pods[i].Name > pods[j].Name
		})
		for _, p := range pods[:extra] {
			err := c.deletePod(ctx, p.Namespace, p.Name)
			if err != nil && !apierrors.IsNotFound(err) {
				return created, deleted, errf(err, "%s: delete pod %s", k, p.Name)
			}
			deleted[p.UID] = true
		}
	}
	return created, deleted, nil
}

// nextName is a StatefulSet's lowest free ordinal, or any other workload's next number.
func (c *Cluster) nextName(k workloadKey, w *workload, have map[string]bool) string {
	if k.Kind == "StatefulSet" {
		for i := 0; ; i++ {
			if n := fmt.Sprintf("%s-%d", k.Name, i); !have[n] {
				return n
			}
		}
	}
	for {
		n := fmt.Sprintf("%s-%d", k.Name, w.next)
		w.next++
		if !have[n] {
			return n
		}
	}
}

// MaxReplicas caps one workload's replicas in the in-memory cluster. It holds every
// pod, its Events and the scheduler simulation's view of them: a 10,000-replica
// Deployment replays in about 12 s of CPU and 630 MB (BenchmarkReplay10000Replicas
// in shared/replay), so twice that still fits a laptop, and a stray extra zero is a
// clear error instead of an exhausted machine. Larger clusters are the real API
// server's (joiner replay --kubeconfig) or the scale benchmark's.
const MaxReplicas = 20_000

// ReplicasError says why replicas is refused for the workload named what, or is nil.
func ReplicasError(what string, replicas int) error {
	switch {
	case replicas < 0:
		return fmt.Errorf("%s: replicas %d is negative", what, replicas)
	case replicas > MaxReplicas:
		return fmt.Errorf("%s: %d replicas is over the in-memory cluster's cap of %d per workload (a 10,000-replica Deployment takes about 630 MB to replay); lower it, or replay against a real API server (--kubeconfig)",
			what, replicas, MaxReplicas)
	}
	return nil
}

// Scale sets the replicas of the workload namespace/name (any kind) and creates or
// deletes its pods at once, as its controller would.
func (c *Cluster) Scale(ctx context.Context, namespace, name string, replicas int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ReplicasError(fmt.Sprintf("kubesim: scale %s/%s", namespace, name), replicas); err != nil {
		return err
	}
	k, ok := c.findWorkload(namespace, name)
	if !ok {
		return fmt.Errorf("kubesim: scale %s/%s: no Deployment, ReplicaSet, StatefulSet or Job of that name", namespace, name)
	}
	c.workloads[k].replicas = replicas
	pods, err := c.listPods(ctx)
	if err != nil {
		return err
	}
	_, _, err = c.converge(ctx, k, livePodsByOwner(pods)[k])
	return err
}

func (c *Cluster) findWorkload(namespace, name string) (workloadKey, bool) {
	for k := range c.workloads {
		if k.Namespace == namespace && k.Name == name {
			return k, true
		}
	}
	return workloadKey{}, false
}

func sortedKeys[K interface{ comparable }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
	return keys
}
