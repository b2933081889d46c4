package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/access"
)

// snapshotCluster writes the cluster's NodePools, EC2NodeClasses, Nodes, Pods,
// DaemonSets and PodDisruptionBudgets to path as manifests a replay starts from. What
// the API server adds (status, managed fields, UIDs, resource versions) is dropped:
// the replay's cluster makes its own, and only what shapes decisions is kept.
func snapshotCluster(ctx context.Context, kubeconfig, kubeContext, path string) (int, error) {
	rest, err := access.RESTConfig(ctx, access.Config{Mode: access.ModeKubeconfig, Kubeconfig: kubeconfig, Context: kubeContext}, access.Deps{})
	if err != nil {
		return 0, err
	}
	cs, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return 0, err
	}
	dyn, err := dynamic.NewForConfig(rest)
	if err != nil {
		return 0, err
	}
	var docs []map[string]any
	for _, k := range []struct {
		gvr        schema.GroupVersionResource
		apiVersion string
		kind       string
	}{
		{kube.NodePoolGVR, karpenter.APIVersion, karpenter.NodePoolKind},
		{kube.NodeClassGVR, karpenter.AWSAPIVersion, karpenter.NodeClassKind},
	} {
		list, err := dyn.Resource(k.gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, fmt.Errorf("list %ss: %w", k.kind, err)
		}
		for _, u := range list.Items {
			docs = append(docs, manifestDoc(k.apiVersion, k.kind, u.Object, false))
		}
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list Nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		doc := manifestDoc("v1", "Node", toMap(n), false)
		// The engine packs onto a node's allocatable; Ready decides whether it counts.
		st := map[string]any{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				st["conditions"] = []map[string]any{{"type": string(c.Type), "status": string(c.Status)}}
			}
		}
		doc["status"] = toJSONMap(st)
		docs = append(docs, doc)
	}
	ds, err := cs.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list DaemonSets: %w", err)
	}
	for i := range ds.Items {
		docs = append(docs, manifestDoc("apps/v1", "DaemonSet", toMap(&ds.Items[i]), true))
	}
	pdbs, err := cs.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	for i := range pdbs.Items {
		docs = append(docs, manifestDoc("policy/v1", "PodDisruptionBudget", toMap(&pdbs.Items[i]), true))
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list Pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		// DaemonSet pods come from their DaemonSet; finished and terminating pods
		// hold no capacity a replay should plan for.
		if facts.IsDaemonSetPod(p) || !facts.IsActive(p) {
			continue
		}
		docs = append(docs, manifestDoc("v1", "Pod", toMap(p), true))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Cluster snapshot by joiner record from %s.\n", kubeconfig)
	for _, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			return 0, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return len(docs), os.WriteFile(path, []byte(b.String()), 0o644)
}

// manifestDoc keeps apiVersion, kind, spec and the metadata a manifest author writes
// (name, namespace, labels, annotations but kubectl's last-applied copy, and for
// namespaced objects the controller references that make pods a workload's).
func manifestDoc(apiVersion, kind string, obj map[string]any, namespaced bool) map[string]any {
	meta, _ := obj["metadata"].(map[string]any)
	m := map[string]any{"name": meta["name"]}
	if namespaced {
		m["namespace"] = meta["namespace"]
	}
	if l, ok := meta["labels"].(map[string]any); ok && len(l) > 0 {
		m["labels"] = l
	}
	if a, ok := meta["annotations"].(map[string]any); ok {
		delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		if len(a) > 0 {
			m["annotations"] = a
		}
	}
	if refs, ok := meta["ownerReferences"].([]any); ok && namespaced {
		m["ownerReferences"] = refs
	}
	doc := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": m}
	if spec, ok := obj["spec"]; ok {
		doc["spec"] = spec
	}
	return doc
}

func toMap(obj runtime.Object) map[string]any {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err) // typed API objects always convert
	}
	return m
}

func toJSONMap(v any) any {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = yaml.Unmarshal(b, &out)
	return out
}
