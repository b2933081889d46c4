package kubesim

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
)

// Apply creates the bundle's objects, or replaces those that exist (pods that exist
// are left as they are). Pods with spec.nodeName start running there; the others
// start pending. Nodes without a Ready condition are taken as Ready: a manifest
// describes a running cluster. Pods of a workload (Deployment, ReplicaSet, StatefulSet,
// Job) are recreated when lost, and Scale changes their count.
func (c *Cluster) Apply(ctx context.Context, b *manifest.Bundle) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range b.NodePools {
		if err := c.applyCRD(ctx, kube.NodePoolGVR, p, karpenter.APIVersion, karpenter.NodePoolKind); err != nil {
			return err
		}
	}
	for _, nc := range b.NodeClasses {
		if err := c.applyCRD(ctx, kube.NodeClassGVR, nc, karpenter.AWSAPIVersion, karpenter.NodeClassKind); err != nil {
			return err
		}
	}
	for _, nc := range b.NodeClaims {
		if err := c.applyCRD(ctx, kube.NodeClaimGVR, nc, karpenter.APIVersion, karpenter.NodeClaimKind); err != nil {
			return err
		}
	}
	for _, n := range b.Nodes {
		if err := c.applyNode(ctx, n); err != nil {
			return err
		}
	}
	for _, ds := range b.DaemonSets {
		ds = ds.DeepCopy()
		ds.Namespace = defaultNS(ds.Namespace)
		if err := c.realNamespace(ctx, ds.Namespace); err != nil {
			return err
		}
		api := c.cs.AppsV1().DaemonSets(ds.Namespace)
		err := upsert(func() error {
			_, err := api.Create(ctx, ds, metav1.CreateOptions{})
			c.trackIf(err, daemonSetsGVR, ds.Namespace, ds.Name)
			return err
		},
			func() error {
				cur, err := api.Get(ctx, ds.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				ds.ResourceVersion = cur.ResourceVersion
				_, err = api.Update(ctx, ds, metav1.UpdateOptions{})
				return err
			})
		if err != nil {
			return errf(err, "apply DaemonSet %s/%s", ds.Namespace, ds.Name)
		}
	}
	for _, pdb := range b.PDBs {
		pdb = pdb.DeepCopy()
		pdb.Namespace = defaultNS(pdb.Namespace)
		if err := c.realNamespace(ctx, pdb.Namespace); err != nil {
			return err
		}
		api := c.cs.PolicyV1().PodDisruptionBudgets(pdb.Namespace)
		err := upsert(func() error {
			_, err := api.Create(ctx, pdb, metav1.CreateOptions{})
			c.trackIf(err, pdbsGVR, pdb.Namespace, pdb.Name)
			return err
		},
			func() error {
				cur, err := api.Get(ctx, pdb.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				pdb.ResourceVersion = cur.ResourceVersion
				_, err = api.Update(ctx, pdb, metav1.UpdateOptions{})
				return err
			})
		if err != nil {
			return errf(err, "apply PodDisruptionBudget %s/%s", pdb.Namespace, pdb.Name)
		}
	}
	if err := c.applyStorage(ctx, b); err != nil {
		return err
	}
	return c.applyPods(ctx, b.Pods)
}

// applyStorage creates the bundle's StorageClasses, PersistentVolumes and
// PersistentVolumeClaims (created once: a replay does not change them).
func (c *Cluster) applyStorage(ctx context.Context, b *manifest.Bundle) error {
	for _, sc := range b.StorageClasses {
		_, err := c.cs.StorageV1().StorageClasses().Create(ctx, sc.DeepCopy(), metav1.CreateOptions{})
		c.trackIf(err, storageClassesGVR, "", sc.Name)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return errf(err, "apply StorageClass %s", sc.Name)
		}
	}
	for _, pv := range b.PersistentVolumes {
		_, err := c.cs.CoreV1().PersistentVolumes().Create(ctx, pv.DeepCopy(), metav1.CreateOptions{})
		c.trackIf(err, volumesGVR, "", pv.Name)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return errf(err, "apply PersistentVolume %s", pv.Name)
		}
	}
	for _, pvc := range b.Claims {
		pvc = pvc.DeepCopy()
		pvc.Namespace = defaultNS(pvc.Namespace)
		if err := c.realNamespace(ctx, pvc.Namespace); err != nil {
			return err
		}
		_, err := c.cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
		c.trackIf(err, claimsGVR, pvc.Namespace, pvc.Name)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return errf(err, "apply PersistentVolumeClaim %s/%s", pvc.Namespace, pvc.Name)
		}
	}
	return nil
}

func (c *Cluster) applyPods(ctx context.Context, pods []*corev1.Pod) error {
	namespaces := map[string]bool{}
	for _, p := range pods {
		p = p.DeepCopy()
		p.Namespace = defaultNS(p.Namespace)
		if p.Spec.NodeName != "" {
			now := metav1.NewTime(c.cfg.Now())
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		} else {
			p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		}
		if !namespaces[p.Namespace] {
			namespaces[p.Namespace] = true
			_, _ = c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}, metav1.CreateOptions{})
		}
		if c.real != nil {
			ownerUIDs(p)
			c.stamp(p)
		}
		out, err := c.cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return errf(err, "create pod %s/%s", p.Namespace, p.Name)
		}
		if c.real != nil {
			c.real.track(podsGVR, out.Namespace, out.Name)
			// A real API server drops the status given on create.
			if p.Spec.NodeName != "" {
				out.Status = p.Status
				if _, err := c.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
					return errf(err, "start pod %s/%s", p.Namespace, p.Name)
				}
			}
		}
		c.adopt(p)
	}
	return nil
}

func (c *Cluster) applyNode(ctx context.Context, n *corev1.Node) error {
	n = n.DeepCopy()
	if !hasCondition(n, corev1.NodeReady) {
		now := metav1.NewTime(c.cfg.Now())
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now})
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if _, ok := n.Labels[corev1.LabelHostname]; !ok {
		n.Labels[corev1.LabelHostname] = n.Name
	}
	if c.real != nil {
		n.OwnerReferences = c.real.owners(n.OwnerReferences)
	}
	// A node whose providerID names a simulated instance is that instance's kubelet
	// (a cluster taken over from Karpenter): it goes when the instance goes.
	if id := facts.InstanceID(n.Spec.ProviderID); id != "" && c.cfg.Instances != nil {
		if _, ok := c.cfg.Instances.Instance(id); ok {
			c.nodes[n.Spec.ProviderID] = n.Name
		}
	}
	api := c.cs.CoreV1().Nodes()
	err := upsert(func() error {
		out, err := api.Create(ctx, n, metav1.CreateOptions{})
		if err == nil && c.real != nil {
			c.real.track(nodesGVR, "", n.Name)
			err = c.writeNodeStatus(ctx, out, n.Status)
		}
		return err
	},
		func() error {
			cur, err := api.Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.ResourceVersion = cur.ResourceVersion
			out, err := api.Update(ctx, n, metav1.UpdateOptions{})
			if err == nil && c.real != nil {
				err = c.writeNodeStatus(ctx, out, n.Status)
			}
			return err
		})
	return errf(err, "apply node %s", n.Name)
}

func hasCondition(n *corev1.Node, t corev1.NodeConditionType) bool {
	for _, cd := range n.Status.Conditions {
		if cd.Type == t {
			return true
		}
	}
	return false
}

// applyCRD creates or replaces a Karpenter object, keeping the stored status.
func (c *Cluster) applyCRD(ctx context.Context, gvr schema.GroupVersionResource, obj any, apiVersion, kind string) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return errf(err, "convert %s", kind)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if c.real != nil {
		if refs := u.GetOwnerReferences(); len(refs) > 0 {
			u.SetOwnerReferences(c.real.owners(refs))
		}
	}
	res := c.dyn.Resource(gvr)
	out, err := res.Create(ctx, u, metav1.CreateOptions{})
	if err == nil && c.real != nil {
		c.real.track(gvr, "", u.GetName())
		c.real.gotUID(kind, u.GetName(), out.GetUID())
		// The CRDs serve status as a subresource: a real API server drops it on create.
		if st, ok := u.Object["status"]; ok && st != nil {
			out.Object["status"] = st
			_, err = res.UpdateStatus(ctx, out, metav1.UpdateOptions{})
		}
	}
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := res.Get(ctx, u.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return errf(gerr, "get %s %s", kind, u.GetName())
		}
		u.SetResourceVersion(cur.GetResourceVersion())
		u.SetUID(cur.GetUID())
		u.SetCreationTimestamp(cur.GetCreationTimestamp())
		u.SetGeneration(cur.GetGeneration() + 1)
		if st, ok := cur.Object["status"]; ok {
			u.Object["status"] = st
		}
		_, err = res.Update(ctx, u, metav1.UpdateOptions{})
	}
	return errf(err, "apply %s %s", kind, u.GetName())
}

// realNamespace creates a namespace on a real API server (the in-memory one needs none).
func (c *Cluster) realNamespace(ctx context.Context, ns string) error {
	if c.real == nil {
		return nil
	}
	return c.ensureNamespace(ctx, ns)
}

// trackIf records an object created on a real API server.
func (c *Cluster) trackIf(err error, gvr schema.GroupVersionResource, ns, name string) {
	if err == nil {
		c.real.track(gvr, ns, name)
	}
}

func upsert(create, update func() error) error {
	err := create()
	if apierrors.IsAlreadyExists(err) {
		err = update()
	}
	return err
}

func defaultNS(ns string) string {
	if ns == "" {
		return metav1.NamespaceDefault
	}
	return ns
}

// Delete deletes one object: kind is Pod, Node, PodDisruptionBudget, DaemonSet,
// NodePool, EC2NodeClass, NodeClaim, or a workload kind (Deployment, ReplicaSet,
// StatefulSet, Job), whose pods go with it. name is namespace/name for namespaced
// kinds (namespace "default" when omitted).
func (c *Cluster) Delete(ctx context.Context, kind, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns, n := metav1.NamespaceDefault, name
	if i := strings.Index(name, "/"); i >= 0 {
		ns, n = name[:i], name[i+1:]
	}
	var err error
	switch kind {
	case "Pod":
		err = c.deletePod(ctx, ns, n)
	case "Node":
		err = c.cs.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
	case "PodDisruptionBudget":
		err = c.cs.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, n, metav1.DeleteOptions{})
	case "DaemonSet":
		err = c.cs.AppsV1().DaemonSets(ns).Delete(ctx, n, metav1.DeleteOptions{})
	case karpenter.NodePoolKind:
		err = c.dyn.Resource(kube.NodePoolGVR).Delete(ctx, n, metav1.DeleteOptions{})
	case karpenter.NodeClassKind:
		err = c.dyn.Resource(kube.NodeClassGVR).Delete(ctx, n, metav1.DeleteOptions{})
	case karpenter.NodeClaimKind:
		err = c.dyn.Resource(kube.NodeClaimGVR).Delete(ctx, n, metav1.DeleteOptions{})
	default:
		if !workloadKinds[kind] {
			return fmt.Errorf("kubesim: delete %s %s: unknown kind", kind, name)
		}
		k := workloadKey{kind, ns, n}
		if c.workloads[k] == nil {
			return fmt.Errorf("kubesim: delete %s: no such workload", k)
		}
		c.workloads[k].replicas = 0
		pods, lerr := c.listPods(ctx)
		if lerr != nil {
			return lerr
		}
		if _, _, err = c.converge(ctx, k, livePodsByOwner(pods)[k]); err == nil {
			delete(c.workloads, k)
		}
	}
	return errf(err, "delete %s %s", kind, name)
}
