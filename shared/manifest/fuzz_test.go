package manifest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/joiner-autoscaler/joiner/shared/quantity"
)

// FuzzDecode feeds arbitrary bytes through the decoder: bad input must come back as
// problems, never as a panic (decodeDoc's recover turns one into an "internal error"
// problem, which fails the fuzz run as well). The seed manifests are the corpus.
func FuzzDecode(f *testing.F) {
	err := filepath.WalkDir(seeds, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil {
			f.Add(data)
		}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"", "---", "--- |\n  x", "[1, {}]", `{"kind":"List","items":[{"kind":"Pod"}]}`, "apiVersion: v1\nkind: PodList\nitems: [{}]\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 3, template: {spec: {containers: [{name: c}]}}}\n",
		"kind: NodePool\napiVersion: karpenter.sh/v1beta1\nspec: {disruption: {expireAfter: 1h}, template: 5}\n",
		"a: &a [*a, *a]\n", "{{ x }}: {{ y }}\n", "<X>: &lt;Y&gt;\n",
		// Quantities at and past the engine's int64 arithmetic, and metadata the API
		// server would refuse.
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: '9007199254740', memory: 8Pi}, limits: {x/y: 1e400}}}]}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {overhead: {cpu: 1e18}, containers: [{name: c, resources: {requests: {cpu: '5e12'}}}, {name: d, resources: {requests: {cpu: '5e12'}}}]}\n",
		"apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {a/b/c: x}}\nstatus: {allocatable: {cpu: '9300000000000000'}}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: D, namespace: a.b}\nspec: {selector: {matchLabels: {app: x}}, template: {metadata: {labels: {app: x, k: '" + strings.Repeat("v", 64) + "'}}, spec: {containers: [{name: c}]}}}\n",
	} {
		f.Add([]byte(s))
	}
	old := MaxExpandedPods
	MaxExpandedPods = 2000
	defer func() { MaxExpandedPods = old }()
	f.Fuzz(func(t *testing.T, data []byte) {
		b := Decode("fuzz.yaml", data)
		for _, p := range b.Problems {
			if strings.Contains(p.Message, "internal error") {
				t.Fatalf("decoder panicked: %s", p)
			}
			if p.File != "fuzz.yaml" || p.Doc < 0 || p.Message == "" {
				t.Fatalf("malformed problem %+v", p)
			}
		}
		if len(b.Pods) > MaxExpandedPods+len(data) {
			t.Fatalf("%d pods from %d bytes", len(b.Pods), len(data))
		}
		for _, p := range b.Pods {
			if p == nil || p.Name == "" || p.Namespace == "" {
				t.Fatalf("pod without name or namespace: %+v", p)
			}
			// What was kept is what the API server would take and the engine can count.
			if msg := quantity.PodProblem(p); msg != "" {
				t.Fatalf("kept pod %s/%s: %s", p.Namespace, p.Name, msg)
			}
			for k, v := range p.Labels {
				if len(content.IsLabelKey(k)) > 0 || len(content.IsLabelValue(v)) > 0 {
					t.Fatalf("kept pod %s/%s with label %q=%q", p.Namespace, p.Name, k, v)
				}
			}
			if _, ok := b.SourceOf(p); !ok {
				t.Fatalf("pod %s has no source", p.Name)
			}
		}
		for _, n := range b.Nodes {
			if ps := quantity.List(n.Status.Allocatable); len(ps) > 0 {
				t.Fatalf("kept node %s: allocatable %s: %s", n.Name, ps[0].Name, ps[0].Message)
			}
		}
		if !b.HasErrors() && b.Err() != nil {
			t.Fatal("Err disagrees with HasErrors")
		}
	})
}
