package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/facts"
	"github.com/joiner-autoscaler/joiner/shared/manifest"
	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// GroupLabel is added to the pods of a generated Deployment whose pods carry no
// label to select them by. No generated selector names it, so it changes no
// placement.
const GroupLabel = "workload.joiner.dev/group"

// WriteYAML renders snap as the manifests `joiner plan -f DIR` reads, in dir:
// pools.yaml (NodePools, EC2NodeClasses), daemonsets.yaml, nodes.yaml (Nodes and
// the Pods running on them), inflight.yaml (NodeClaims) and workloads.yaml
// (a Deployment per group of identical pending pods, a Pod for each pod that has no
// twin). The catalog is not written; pass it with --catalog. It returns the
// number of pending pods the manifests expand to, which equals len(snap.Pods).
func WriteYAML(dir string, snap *packer.Snapshot) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	var pools, daemons, nodes, inflight, workloads bytes.Buffer
	for _, np := range snap.NodePools {
		if err := writeDoc(&pools, np, "NodePool", "karpenter.sh/v1", false); err != nil {
			return 0, err
		}
	}
	for _, nc := range snap.NodeClasses {
		if err := writeDoc(&pools, nc, "EC2NodeClass", "karpenter.k8s.aws/v1", false); err != nil {
			return 0, err
		}
	}
	for _, d := range snap.DaemonSets {
		if err := writeDoc(&daemons, d, "DaemonSet", "apps/v1", false); err != nil {
			return 0, err
		}
	}
	for _, ns := range snap.Nodes {
		if err := writeDoc(&nodes, ns.Node, "Node", "v1", true); err != nil {
			return 0, err
		}
		for _, p := range ns.Pods {
			if err := writeDoc(&nodes, p, "Pod", "v1", false); err != nil {
				return 0, err
			}
		}
	}
	for _, nc := range snap.InFlight {
		if err := writeDoc(&inflight, nc, "NodeClaim", "karpenter.sh/v1", true); err != nil {
			return 0, err
		}
	}
	expanded, err := writeWorkloads(&workloads, snap.Pods)
	if err != nil {
		return 0, err
	}
	for name, buf := range map[string]*bytes.Buffer{"pools.yaml": &pools, "daemonsets.yaml": &daemons, "nodes.yaml": &nodes, "inflight.yaml": &inflight, "workloads.yaml": &workloads} {
		if buf.Len() == 0 {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			return 0, err
		}
	}
	return expanded, nil
}

// ReadYAML is the snapshot `joiner plan -f DIR` plans from what WriteYAML wrote
// in dir, on cat: the manifests decoded and assembled as joiner plan does
// (every unbound pod pending). It is not snap itself: pods of a Deployment are
// named after it, and pods without labels carry GroupLabel, so the engine's
// tie-breaks by pod name may order them differently; packbench plans this
// snapshot in-process so that its figures and the process's are of one input.
func ReadYAML(dir string, cat *catalog.Catalog) (*packer.Snapshot, error) {
	b, err := manifest.Load(dir)
	if err != nil {
		return nil, err
	}
	if len(b.Problems) > 0 {
		return nil, fmt.Errorf("%s: %s", dir, b.Problems[0].String())
	}
	unbound := func(p *corev1.Pod) bool { return p.Spec.NodeName == "" && !facts.IsTerminal(p) }
	as, _, _ := packer.Assemble(b.Nodes, b.Pods, b.NodeClaims, unbound)
	return &packer.Snapshot{Pods: as.Pods, Nodes: as.Nodes, InFlight: as.InFlight,
		NodePools: b.NodePools, NodeClasses: b.NodeClasses, DaemonSets: b.DaemonSets, Catalog: cat}, nil
}

var indexSuffix = regexp.MustCompile(`-\d+$`)

// writeWorkloads groups identical pending pods (same namespace, labels and spec)
// into Deployments, keeping the first pod's order.
func writeWorkloads(buf *bytes.Buffer, pods []*corev1.Pod) (int, error) {
	type group struct {
		pods []*corev1.Pod
	}
	byKey := map[string]*group{}
	var order []string
	for _, p := range pods {
		spec, err := json.Marshal(struct {
			NS     string
			Labels map[string]string
			Spec   corev1.PodSpec
		}{p.Namespace, p.Labels, p.Spec})
		if err != nil {
			return 0, err
		}
		k := string(spec)
		g := byKey[k]
		if g == nil {
			g = &group{}
			byKey[k] = g
			order = append(order, k)
		}
		g.pods = append(g.pods, p)
	}
	used := map[string]int{}
	expanded := 0
	for _, k := range order {
		g := byKey[k]
		first := g.pods[0]
		if len(g.pods) == 1 {
			if err := writeDoc(buf, first, "Pod", "v1", false); err != nil {
				return 0, err
			}
			expanded++
			continue
		}
		base := indexSuffix.ReplaceAllString(first.Name, "")
		used[base]++
		name := fmt.Sprintf("%s-x%d", base, used[base])
		lbl := map[string]string{}
		for k, v := range first.Labels {
			lbl[k] = v
		}
		if len(lbl) == 0 {
			lbl[GroupLabel] = name
		}
		n := int32(len(g.pods))
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: first.Namespace},
			Spec: appsv1.DeploymentSpec{
				Replicas: &n,
				Selector: &metav1.LabelSelector{MatchLabels: lbl},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: first.Spec},
			},
		}
		if err := writeDoc(buf, d, "Deployment", "apps/v1", false); err != nil {
			return 0, err
		}
		expanded += len(g.pods)
	}
	return expanded, nil
}

// writeDoc appends obj as one YAML document with kind and apiVersion set, empty
// fields pruned; status is kept only when keepStatus (Nodes, NodeClaims).
func writeDoc(buf *bytes.Buffer, obj any, kind, apiVersion string, keepStatus bool) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	m["kind"] = kind
	m["apiVersion"] = apiVersion
	if !keepStatus {
		delete(m, "status")
	}
	pruned, _ := prune(m).(map[string]any)
	out, err := yaml.Marshal(pruned)
	if err != nil {
		return err
	}
	buf.WriteString("---\n")
	buf.Write(out)
	return nil
}

// prune drops nulls, empty maps and empty lists (creationTimestamp: null, status: {},
// resources: {}) so the manifests read like hand-written ones.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := prune(t[k])
			if p == nil {
				delete(t, k)
				continue
			}
			t[k] = p
		}
		if len(t) == 0 {
			return nil
		}
		return t
	case []any:
		out := t[:0]
		for _, e := range t {
			if p := prune(e); p != nil {
				out = append(out, p)
			} else {
				out = append(out, map[string]any{})
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}
