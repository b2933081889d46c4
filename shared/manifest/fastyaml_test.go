package manifest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// sameAsSlow checks fastYAML against the slow path on one document: whenever the fast
// parser accepts a text, the slow path must accept it too and give the same tree.
func sameAsSlow(t *testing.T, text string) (fast bool) {
	t.Helper()
	got, ok := fastYAML(text)
	if !ok {
		return false
	}
	want, err := slowYAML(text)
	if err != nil {
		t.Fatalf("fast path accepted what the slow path rejects (%v):\n%s", err, text)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fast and slow paths differ on:\n%s\nfast: %#v\nslow: %#v", text, got, want)
	}
	return true
}

func TestFastYAMLMatchesSlowPath(t *testing.T) {
	for _, c := range []struct {
		text string
		fast bool // whether the fast path must take it
	}{
		{"a: 1\nb: x\n", true},
		{"a:\n  b:\n    c: d\n", true},
		{"a:\n- x\n- y\nb: 2\n", true},
		{"a:\n  - x\n  -   k: v\n      l: w\n  -\n    m: n\n", true},
		{"- a\n- b: c\n  d: e\n-\n- [1, 2]\n", true},
		{"a: {b: c, d: [1, 'x', \"y\"], e: {}}\nf: []\n", true},
		{"a: 'it''s' # c\nb: \"q\\\"\\n\\t\\\\\" # c\n", true},
		{"a: b#c\nd: e # comment\n# whole line\n\n  # indented comment\nf: g:h\n", true},
		{"n1: 0\nn2: -3\nn3: 1_000\nn4: 0x1F\nn5: 0755\nn6: 1.5\nn7: 1e3\nn8: -0\nn9: +7\nn10: 99999999999999999999\nn11: 1.0\n", true},
		{"b1: yes\nb2: Off\nb3: TRUE\nb4: y\nb5: nope\nz1: ~\nz2: null\nz3:\nz4: NULL\n", true},
		{"t1: 2024-01-02\nt2: 2024-01-02T15:04:05Z\nq1: 500m\nq2: 1Gi\nq3: 1.5Gi\nv: 1.2.3\nd: .5\ne: .x\n", true},
		{"\"quoted key\": 1\n'k2': x\nhttp://a: b\nurl: http://x/y?z=1\n", true},
		{"labels: {app: x, tier: web}\nsel: {matchLabels: {a: b}}\n", true},
		{"a: -x\nb: :x\nc: ?x\nd: x - y\n", true},
		{"  a: 1\n  b: 2\n", true},
		{"a: [1.5, 0.000001, 0.0000001, 1e21, 123456789012345678901]\n", true},
		// Left to the slow path: it must not take them, or must agree when it does.
		{"a: &x 1\nb: *x\n", false},
		{"a: !!str 1\n", false},
		{"a: |\n  line\n", false},
		{"a: >\n  folded\n", false},
		{"a: multi\n  line\n", false},
		{"a: \"two\n  lines\"\n", false},
		{"a: 1\na: 2\n", false},
		{"a:\tb\n", false},
		{"a: é\n", false},
		{"1: x\n", false},
		{"yes: x\n", false},
		{"? a\n: b\n", false},
		{"a: b: c\n", false},
		{"a: [1, 2\n", false},
		{"a: {b}\n", false},
		{"a: {b:c}\n", false},
		{"a: [a: b]\n", false},
		{"- - a\n", false},
		{"a: .inf\n", false},
		{"a: .nan\n", false},
		{"<<: {a: 1}\n", false},
		{"a: 0b101\n", false},
		{"just a scalar\n", false},
		{"a: 1\n b: 2\n", false},
		{"a:\n  - x\n  b: y\n", false},
		{"%YAML 1.1\na: b\n", false},
		{"a: 'x'y\n", false},
		{"a: [x]#c\n", false},
		{"a: \"\\x41\"\n", false},
		{"a: {b: 1, b: 2}\n", false},
		{"a: [1,]\n", false},
	} {
		fast := sameAsSlow(t, c.text)
		if c.fast && !fast {
			t.Errorf("fast path did not take:\n%s", c.text)
		}
		if !c.fast && fast {
			t.Logf("fast path takes (and agrees on):\n%s", c.text)
		}
	}
}

// TestFastYAMLOnSeedsAndTestdata runs every YAML document in the seeds and testdata
// through both paths, and requires the fast path to take most of them: if it fell back
// everywhere, reading would silently be slow again.
func TestFastYAMLOnSeedsAndTestdata(t *testing.T) {
	var docs, fast int
	for _, root := range []string{seeds, "../../testdata"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !IsManifestFile(p) || strings.HasSuffix(p, ".json") {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, chunk := range yamlChunks(string(data)) {
				sub, _ := prescan(chunk)
				docs++
				if sameAsSlow(t, sub) {
					fast++
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of %d documents took the fast path", fast, docs)
	if docs == 0 || fast*2 < docs {
		t.Errorf("only %d of %d documents took the fast path", fast, docs)
	}
	var s strings.Builder
	for i := 0; i < 3; i++ {
		s.Write(deployments(1, 3))
	}
	for _, chunk := range yamlChunks(s.String()) {
		if !sameAsSlow(t, chunk) {
			t.Errorf("fast path did not take a benchmark Deployment:\n%s", chunk)
		}
	}
}

// yamlChunks cuts text into its documents as splitYAML does.
func yamlChunks(text string) []string {
	var out []string
	for _, part := range strings.Split("\n"+text, "\n---") {
		if i := strings.IndexByte(part, '\n'); i >= 0 {
			part = part[i+1:]
		}
		if !isBlankYAML(part) {
			out = append(out, part)
		}
	}
	return out
}

// FuzzFastYAML: on any text the fast path takes, it agrees with the slow path.
func FuzzFastYAML(f *testing.F) {
	for _, s := range []string{
		"a: 1\n", "a:\n- x\n- {b: c}\n", "- a: 'x'\n  b: \"y\"\n", "a: [1, 2.5, yes, ~]\n", "k: v # c\n",
		"a: 0x10\nb: 010\nc: 1_0\nd: -0\n", "a: {b: [c, {d: e}]}\n", string(deployments(1, 2)),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		sameAsSlow(t, text)
	})
}

func TestFastYAMLFloatRendering(t *testing.T) {
	for in, want := range map[string]string{"1.0": "1", "1.50": "1.5", "1e3": "1000", "1e21": "1e+21", "1e-7": "1e-7", "0.000001": "0.000001"} {
		got, ok := fastYAML("a: " + in + "\n")
		if !ok {
			t.Errorf("%s: fast path did not take", in)
			continue
		}
		if g := fmt.Sprint(got.(map[string]any)["a"]); g != want {
			t.Errorf("%s: got %s, want %s", in, g, want)
		}
		sameAsSlow(t, "a: "+in+"\n")
	}
}

// typedKinds are the types documents are decoded into, by kind.
var typedKinds = map[string]func() any{
	"Pod": func() any { return new(corev1.Pod) }, "Node": func() any { return new(corev1.Node) },
	"Deployment": func() any { return new(appsv1.Deployment) }, "DaemonSet": func() any { return new(appsv1.DaemonSet) },
	"StatefulSet": func() any { return new(appsv1.StatefulSet) }, "ReplicaSet": func() any { return new(appsv1.ReplicaSet) },
	"Job": func() any { return new(batchv1.Job) }, "PodDisruptionBudget": func() any { return new(policyv1.PodDisruptionBudget) },
	"NodePool": func() any { return new(karpenter.NodePool) }, "NodeClaim": func() any { return new(karpenter.NodeClaim) },
	"EC2NodeClass": func() any { return new(karpenter.EC2NodeClass) }, "AWSNodeClass": func() any { return new(karpenter.EC2NodeClass) },
}

// assignMatchesJSON decodes text's object both ways after the schema walk, and requires
// assign, when it succeeds, to give what encoding/json gives.
func assignMatchesJSON(t *testing.T, text string) bool {
	t.Helper()
	tree, err := slowYAML(text)
	if err != nil {
		return false
	}
	obj, _ := tree.(map[string]any)
	kind, _ := obj["kind"].(string)
	mk := typedKinds[kind]
	if mk == nil {
		return false
	}
	w := &walker{report: func(string, string) {}}
	w.walk(obj, reflect.TypeOf(mk()).Elem(), "")
	direct := mk()
	if assign(obj, reflect.ValueOf(direct).Elem()) != nil {
		return false
	}
	viaJSON := mk()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if err := json.Unmarshal(data, viaJSON); err != nil {
		t.Fatalf("assign decoded what encoding/json rejects (%v):\n%s", err, text)
	}
	if !reflect.DeepEqual(direct, viaJSON) {
		t.Fatalf("assign and encoding/json differ on:\n%s\nassign: %#v\njson:   %#v", text, direct, viaJSON)
	}
	return true
}

func TestAssignMatchesJSON(t *testing.T) {
	var docs, direct int
	for _, root := range []string{seeds, "../../testdata"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !IsManifestFile(p) || strings.HasSuffix(p, ".json") {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, chunk := range yamlChunks(string(data)) {
				sub, _ := prescan(chunk)
				docs++
				if assignMatchesJSON(t, sub) {
					direct++
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, text := range []string{
		string(deployments(1, 2)),
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p, creationTimestamp: \"2024-01-02T15:04:05Z\"}\nspec:\n  containers:\n  - name: c\n    ports: [{containerPort: 80, hostPort: 8080}]\n    readinessProbe: {httpGet: {port: http, path: /}, periodSeconds: 5}\n    resources: {requests: {cpu: 1.5, memory: 1e3}, limits: {nvidia.com/gpu: 1}}\n  overhead: {cpu: 10m}\n  priority: 7\n  nodeSelector: {a: null}\n  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: k, operator: In, values: [a, b]}]}]}}}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 3\n  strategy: {rollingUpdate: {maxSurge: 25%, maxUnavailable: 1}}\n  selector: {matchLabels: {a: b}}\n  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}], terminationGracePeriodSeconds: null}}\n",
		"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n  weight: 10\n  limits: {cpu: 100, memory: 100Gi}\n  disruption: {consolidateAfter: 30s, budgets: [{nodes: 10%}]}\n  template: {spec: {expireAfter: Never, nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}, requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}, {key: k, operator: Gt, values: ['3'], minValues: 2}]}}\n",
	} {
		docs++
		if assignMatchesJSON(t, text) {
			direct++
		}
	}
	t.Logf("%d of %d objects decoded directly", direct, docs)
	if direct*2 < docs {
		t.Errorf("only %d of %d objects decoded directly", direct, docs)
	}
}

// FuzzAssign: whatever assign decodes, it decodes as encoding/json does.
func FuzzAssign(f *testing.F) {
	f.Add(string(deployments(1, 2)))
	f.Add("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: 1.5}}}], priority: 3}\n")
	f.Add("kind: NodePool\nspec: {limits: {cpu: 10}, template: {spec: {expireAfter: 1h}}}\n")
	f.Fuzz(func(t *testing.T, text string) {
		assignMatchesJSON(t, text)
	})
}

// Nesting far past what manifests use goes to the slow path (which reports
// yaml.v2's limit) rather than recursing without bound.
func TestFastYAMLDepthLimit(t *testing.T) {
	deep := "a: " + strings.Repeat("[", 2*maxFastDepth) + strings.Repeat("]", 2*maxFastDepth) + "\n"
	if _, ok := fastYAML(deep); ok {
		t.Error("fastYAML accepted a document nested beyond maxFastDepth")
	}
	var b strings.Builder
	for i := 0; i < 2*maxFastDepth; i++ {
		b.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	b.WriteString(strings.Repeat(" ", 2*maxFastDepth) + "v: 1\n")
	if _, ok := fastYAML(b.String()); ok {
		t.Error("fastYAML accepted block mappings nested beyond maxFastDepth")
	}
	if tree, ok := fastYAML("a: [[1]]\nb:\n  c: d\n"); !ok || tree == nil {
		t.Error("fastYAML refused shallow nesting")
	}
}
