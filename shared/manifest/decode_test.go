package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

const pool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %s
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`

const class = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-demo
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
`

func poolYAML(name string) string { return strings.Replace(pool, "%s", name, 1) }

func TestMultiDocumentNumbering(t *testing.T) {
	text := "# leading comment\n---\n" + poolYAML("a") + "---\n# only a comment\n---\n" + class + "--- # trailing comment\n" +
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x, resources: {requests: {cpu: nope}}}]}\n"
	b := decode(text)
	if len(b.NodePools) != 1 || len(b.NodeClasses) != 1 {
		t.Fatalf("pools %d classes %d, want 1 and 1:\n%s", len(b.NodePools), len(b.NodeClasses), dump(b))
	}
	if s, _ := b.SourceOf(b.NodePools[0]); s != (Source{"test.yaml", 1}) {
		t.Errorf("pool source = %v, want test.yaml:1", s)
	}
	if s, _ := b.SourceOf(b.NodeClasses[0]); s != (Source{"test.yaml", 2}) {
		t.Errorf("class source = %v, want test.yaml:2 (comment-only documents are not counted)", s)
	}
	expectProblems(t, b, []wantProblem{{3, "spec.containers[0].resources.requests.cpu", `invalid quantity "nope"`, false}})
	if b.Files[0].Documents != 3 {
		t.Errorf("documents = %d, want 3", b.Files[0].Documents)
	}
}

func TestLoadFolder(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b/pool.yml", poolYAML("from-yml"))
	write("a/deep/er/class.yaml", class)
	write("c.json", `{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"from-json"},"spec":{"template":{"spec":{"requirements":[],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}}}}}`)
	write("README.md", "apiVersion: v1\nkind: Pod\n")
	write("notes.txt", "not yaml: [")
	write("a/pool.YAML", poolYAML("upper-ext"))
	b, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range b.Files {
		rel, _ := filepath.Rel(dir, f.File)
		files = append(files, rel)
	}
	wantFiles := []string{"a/deep/er/class.yaml", "a/pool.YAML", "b/pool.yml", "c.json"}
	if !reflect.DeepEqual(files, wantFiles) {
		t.Errorf("files = %v, want %v", files, wantFiles)
	}
	var pools []string
	for _, p := range b.NodePools {
		pools = append(pools, p.Name)
	}
	if want := []string{"upper-ext", "from-yml", "from-json"}; !reflect.DeepEqual(pools, want) {
		t.Errorf("pools = %v, want %v", pools, want)
	}
	if len(b.Problems) != 0 {
		t.Errorf("problems:\n%s", dump(b))
	}
	// A single file is read whatever its extension.
	b, err = Load(filepath.Join(dir, "notes.txt"))
	if err != nil || len(b.Problems) != 1 || !strings.Contains(b.Problems[0].Message, "invalid YAML") {
		t.Errorf("notes.txt: err %v problems:\n%s", err, dump(b))
	}
}

func TestLoadUsageErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("missing file: no error")
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no *.yaml") {
		t.Errorf("empty folder: err = %v", err)
	}
	if _, err := Load(); err == nil {
		t.Error("no paths: no error")
	}
}

func TestJSONDocuments(t *testing.T) {
	t.Run("concatenated values are documents", func(t *testing.T) {
		b := Decode("x.json", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}}
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"i"}],"nodeName":7}}`))
		if got := podNames(b); !reflect.DeepEqual(got, []string{"default/a"}) {
			t.Errorf("pods = %v", got)
		}
		expectProblems(t, b, []wantProblem{{2, "spec.nodeName", `must be a string; quote it: "7"`, false}})
	})
	t.Run("typed list items inherit kind", func(t *testing.T) {
		b := Decode("nodes.json", []byte(`{"apiVersion":"v1","kind":"NodeList","items":[
			{"metadata":{"name":"n1","labels":{"kubernetes.io/arch":"amd64"}},"status":{"allocatable":{"cpu":"2","memory":"8Gi","pods":"29"}}},
			{"metadata":{"name":"n2"},"spec":{"taints":[{"key":"a","effect":"Sometimes"}]}}]}`))
		if len(b.Nodes) != 1 || b.Nodes[0].Name != "n1" || b.Nodes[0].Status.Allocatable.Cpu().String() != "2" {
			t.Errorf("nodes = %v", b.Nodes)
		}
		expectProblems(t, b, []wantProblem{{1, "items[1].spec.taints[0].effect", `unknown taint effect "Sometimes"`, false}})
	})
	t.Run("kind List", func(t *testing.T) {
		b := Decode("list.yaml", []byte("apiVersion: v1\nkind: List\nitems:\n- "+strings.ReplaceAll(poolYAML("l1"), "\n", "\n  ")+"\n- apiVersion: v1\n  kind: Service\n  metadata: {name: s}\n"))
		if len(b.NodePools) != 1 || len(b.Skipped) != 1 || len(b.Problems) != 0 {
			t.Errorf("pools %d skipped %d:\n%s", len(b.NodePools), len(b.Skipped), dump(b))
		}
	})
	t.Run("top-level array", func(t *testing.T) {
		b := Decode("arr.json", []byte(`[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c"}]}}, 5]`))
		if len(b.Pods) != 1 {
			t.Errorf("pods = %v", podNames(b))
		}
		expectProblems(t, b, []wantProblem{{1, "[1]", "not a Kubernetes object", false}})
	})
	t.Run("near-JSON falls back to YAML", func(t *testing.T) {
		b := Decode("h.json", []byte(`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": {{ .Values.name }}}, "spec": {"containers": [{"name": "c"}]}}`))
		expectProblems(t, b, []wantProblem{{1, "metadata.name", "unfilled placeholder {{ .Values.name }}", false}})
	})
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {a: b}
    spec:
      containers:
        - name: c
          image: nginx
          resources:
            requests: {cpu: 500m, memory: 1Gi}
`

func TestDeploymentExpansion(t *testing.T) {
	b := decode(deployment)
	if len(b.Problems) != 0 {
		t.Fatalf("problems:\n%s", dump(b))
	}
	if got, want := podNames(b), []string{"shop/web-0", "shop/web-1", "shop/web-2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("pods = %v, want %v", got, want)
	}
	p0, p1 := b.Pods[0], b.Pods[1]
	if p0.Labels["app"] != "web" || p0.Annotations["a"] != "b" || p0.Kind != "Pod" || p0.Status.Phase != corev1.PodPending {
		t.Errorf("pod 0 = %+v", p0.ObjectMeta)
	}
	if len(p0.OwnerReferences) != 1 || p0.OwnerReferences[0].Kind != "Deployment" || p0.OwnerReferences[0].Name != "web" || !*p0.OwnerReferences[0].Controller {
		t.Errorf("owner = %+v", p0.OwnerReferences)
	}
	if q := p0.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("cpu request = %s", q.String())
	}
	// Each pod owns its metadata and spec structs: setting a field or appending a
	// container on one pod leaves the others alone (maps and slices inside are shared
	// read-only, see expandPods).
	p0.Spec.NodeName = "node-1"
	p0.Name = "renamed"
	p0.Spec.Containers = append(p0.Spec.Containers, corev1.Container{Name: "extra"})
	p1.Spec.Containers = append(p1.Spec.Containers, corev1.Container{Name: "other"})
	if p1.Spec.NodeName != "" || p1.Name != "web-1" || len(p1.Spec.Containers) != 2 || p0.Spec.Containers[1].Name != "extra" {
		t.Errorf("pods share state: pod 1 node %q name %q; pod 0 second container %q", p1.Spec.NodeName, p1.Name, p0.Spec.Containers[1].Name)
	}
	// A deep copy is independent all the way down.
	c := p1.DeepCopy()
	c.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
	if q := b.Pods[2].Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("deep copy leaked: %s", q.String())
	}
	if s, ok := b.SourceOf(b.Pods[2]); !ok || s.Doc != 1 {
		t.Errorf("source of expanded pod = %v %v", s, ok)
	}
	if k := b.Files[0].Kinds; len(k) != 1 || k[0] != (KindCount{Kind: "Deployment", Count: 1, Pods: 3}) {
		t.Errorf("kinds = %+v", k)
	}
}

func TestWorkloadExpansionKinds(t *testing.T) {
	tmpl := "  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: [{name: c, image: i}]}\n"
	sel := "  selector: {matchLabels: {app: x}}\n"
	tests := []struct {
		name, text string
		want       []string
	}{
		{"replicas default 1", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n" + sel + tmpl, []string{"default/d-0"}},
		{"replicas 0", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 0\n" + sel + tmpl, nil},
		{"ReplicaSet", "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs}\nspec:\n  replicas: 2\n" + sel + tmpl, []string{"default/rs-0", "default/rs-1"}},
		{"StatefulSet", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, namespace: data}\nspec:\n  replicas: 2\n  serviceName: db\n" + sel + tmpl, []string{"data/db-0", "data/db-1"}},
		{"Job parallelism default 1", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  completions: 5\n" + tmpl, []string{"default/j-0"}},
		{"Job parallelism 3", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 3\n" + tmpl, []string{"default/j-0", "default/j-1", "default/j-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := decode(tc.text)
			if len(b.Problems) != 0 {
				t.Fatalf("problems:\n%s", dump(b))
			}
			if got := podNames(b); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("pods = %v, want %v", got, tc.want)
			}
		})
	}
	b := decode("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: 2\n" + sel + tmpl)
	if l := b.Pods[1].Labels; l["statefulset.kubernetes.io/pod-name"] != "db-1" || l["app"] != "x" {
		t.Errorf("statefulset pod labels = %v", l)
	}
}

func TestWorkloadProblems(t *testing.T) {
	tmpl := "  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: [{name: c, image: i}]}\n"
	tests := []struct {
		name, text string
		want       []wantProblem
	}{
		{"selector mismatch", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: other}}\n" + tmpl,
			[]wantProblem{{1, "spec.selector", "does not match spec.template.metadata.labels", false}}},
		{"selector missing", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n" + tmpl,
			[]wantProblem{{1, "spec.selector", "spec.selector is required: write selector: {matchLabels: {app: x}}", false}}},
		{"replicas as a string", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: \"3\"\n  selector: {matchLabels: {app: x}}\n" + tmpl,
			[]wantProblem{{1, "spec.replicas", "must be a number, not a string: write 3 without quotes", false}}},
		{"negative parallelism", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: -1\n" + tmpl,
			[]wantProblem{{1, "spec.parallelism", "must not be negative", false}}},
		{"no containers", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: []}\n",
			[]wantProblem{{1, "spec.template.spec.containers", "a pod needs at least one container", false}}},
		{"old apiVersion", "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: x}}\n" + tmpl,
			[]wantProblem{{1, "apiVersion", "extensions/v1beta1 Deployment is not served any more: write apiVersion: apps/v1", false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := decode(tc.text)
			expectProblems(t, b, tc.want)
			if len(b.Pods) != 0 {
				t.Errorf("invalid workload expanded into %v", podNames(b))
			}
		})
	}
}

func TestExpansionCap(t *testing.T) {
	old := MaxExpandedPods
	MaxExpandedPods = 10
	defer func() { MaxExpandedPods = old }()
	b := decode("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 2000000000\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: [{name: c}]}\n")
	expectProblems(t, b, []wantProblem{{1, "spec.replicas", "more than Joiner plans in one run", false}})
	if len(b.Pods) != 0 {
		t.Errorf("pods = %d", len(b.Pods))
	}
}

func TestNamespacesAndBinding(t *testing.T) {
	b := decode(`apiVersion: v1
kind: Pod
metadata: {name: pending}
spec: {containers: [{name: c}]}
---
apiVersion: v1
kind: Pod
metadata: {name: running, namespace: kube-system}
spec: {nodeName: node-1, containers: [{name: c}]}
---
` + strings.Replace(poolYAML("p"), "name: p", "name: p\n  namespace: default", 1))
	if got := podNames(b); !reflect.DeepEqual(got, []string{"default/pending", "kube-system/running"}) {
		t.Errorf("pods = %v", got)
	}
	if pp := b.PendingPods(); len(pp) != 1 || pp[0].Name != "pending" {
		t.Errorf("pending = %v", pp)
	}
	if bp := b.BoundPods(); len(bp["node-1"]) != 1 || bp["node-1"][0].Name != "running" {
		t.Errorf("bound = %v", bp)
	}
	expectProblems(t, b, []wantProblem{{3, "metadata.namespace", "NodePool is cluster-scoped", true}})
	if len(b.NodePools) != 1 || b.NodePools[0].Namespace != "" {
		t.Errorf("pool kept with namespace cleared: %v", b.NodePools)
	}
}

func TestSkippedKinds(t *testing.T) {
	b := decode(`apiVersion: v1
kind: Service
metadata: {name: s, namespace: web}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {a: "<NOT_A_PLACEHOLDER_WE_READ>"}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: cj}
---
apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: demo}
---
apiVersion: example.com/v1
kind: Pod
metadata: {name: not-core}
---
{"Version": "2012-10-17", "Statement": []}
`)
	if len(b.Problems) != 0 {
		t.Errorf("problems:\n%s", dump(b))
	}
	var got []string
	for _, s := range b.Skipped {
		got = append(got, s.Kind+"/"+s.Name+"@"+s.Source.String())
	}
	want := []string{"Service/s@test.yaml:1", "ConfigMap/cm@test.yaml:2", "CronJob/cj@test.yaml:3", "ClusterConfig/demo@test.yaml:4", "Pod/not-core@test.yaml:5", "/@test.yaml:6"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("skipped = %v, want %v", got, want)
	}
	if !strings.Contains(b.Skipped[3].Note, "eksctl") || b.Skipped[0].Note != "" || !strings.Contains(b.Skipped[5].Note, "IAM policy") {
		t.Errorf("notes = %q / %q / %q", b.Skipped[3].Note, b.Skipped[0].Note, b.Skipped[5].Note)
	}
	if b.Skipped[0].Namespace != "web" {
		t.Errorf("skipped namespace = %q", b.Skipped[0].Namespace)
	}
}

func TestKindAndVersionMistakes(t *testing.T) {
	tests := []struct {
		name, text string
		want       []wantProblem
	}{
		{"kind typo in karpenter group", strings.Replace(poolYAML("p"), "kind: NodePool", "kind: Nodepool", 1),
			[]wantProblem{{1, "kind", `unknown kind "Nodepool"; did you mean NodePool (apiVersion karpenter.sh/v1)?`, false}}},
		{"unknown karpenter kind", "apiVersion: karpenter.sh/v1\nkind: Budget\nmetadata: {name: x}\n",
			[]wantProblem{{1, "kind", "Joiner does not read kind Budget", false}}},
		{"NodePool in the AWS group", strings.Replace(poolYAML("p"), "karpenter.sh/v1", "karpenter.k8s.aws/v1", 1),
			[]wantProblem{{1, "apiVersion", "NodePool belongs to karpenter.sh: write apiVersion: karpenter.sh/v1", false}}},
		{"missing apiVersion", strings.Replace(poolYAML("p"), "apiVersion: karpenter.sh/v1\n", "", 1),
			[]wantProblem{{1, "apiVersion", "apiVersion is missing: write apiVersion: karpenter.sh/v1", false}}},
		{"missing kind", "apiVersion: karpenter.sh/v1\nmetadata: {name: x}\n",
			[]wantProblem{{1, "kind", "kind is missing", false}}},
		{"not an object", "apiVersion: 1\nkind: Pod\n",
			[]wantProblem{{1, "apiVersion", "must be a string", false}}},
		{"neither", "settings: {clusterName: x}\n",
			[]wantProblem{{1, "", "apiVersion and kind are missing", false}}},
		{"core kind case", "apiVersion: v1\nkind: pod\nmetadata: {name: x}\nspec: {containers: [{name: c}]}\n",
			[]wantProblem{{1, "kind", `did you mean Pod`, false}}},
		{"Machine", "apiVersion: karpenter.sh/v1alpha5\nkind: Machine\nmetadata: {name: x}\n",
			[]wantProblem{{1, "kind", "Machine (karpenter.sh/v1alpha5) was replaced by NodeClaim", false}}},
		{"PDB v1beta1", "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nspec: {minAvailable: 1, maxUnavailable: 1}\n",
			[]wantProblem{{1, "apiVersion", "write apiVersion: policy/v1", false}, {1, "spec", "mutually exclusive", false}}},
		{"NodePool v1alpha5", strings.Replace(poolYAML("p"), "karpenter.sh/v1", "karpenter.sh/v1alpha5", 1),
			[]wantProblem{{1, "apiVersion", "karpenter.sh/v1alpha5 NodePool is not served any more: write apiVersion: karpenter.sh/v1", false}}},
		{"Provisioner", `apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
  providerRef: {name: default}
  ttlSecondsAfterEmpty: 30
  ttlSecondsUntilExpired: 2592000
  limits: {resources: {cpu: 100}}
`, []wantProblem{
			{1, "kind", "Provisioner (karpenter.sh/v1alpha5) was replaced by NodePool", false},
			{1, "spec.limits.resources", "write limits: {cpu: \"100\"}", false},
			{1, "spec.providerRef", "write spec.template.spec.nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}", false},
			{1, "spec.requirements", "write them at spec.template.spec.requirements", false},
			{1, "spec.ttlSecondsAfterEmpty", "write spec.disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}", false},
			{1, "spec.ttlSecondsUntilExpired", "write spec.template.spec.expireAfter: 2592000s", false},
		}},
		{"AWSNodeTemplate", `apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {aws-ids: "subnet-1, subnet-2"}
  securityGroupSelector: {karpenter.sh/discovery: demo, aws::name: extra}
  amiSelector: {aws::name: my-ami-*, aws::owners: "123456789012"}
  instanceProfile: KarpenterNodeInstanceProfile
`, []wantProblem{
			{1, "kind", "AWSNodeTemplate (karpenter.k8s.aws/v1alpha1) was replaced by EC2NodeClass", false},
			{1, "spec.subnetSelector", "write subnetSelectorTerms: [{id: subnet-1}, {id: subnet-2}]", false},
			{1, "spec.securityGroupSelector", "write securityGroupSelectorTerms: [{name: extra}, {tags: {karpenter.sh/discovery: demo}}]", false},
			{1, "spec.amiSelector", `write amiSelectorTerms: [{name: my-ami-*, owner: "123456789012"}]`, false},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expectProblems(t, decode(tc.text), tc.want)
		})
	}
}

func TestUnknownFieldsAndTypes(t *testing.T) {
	tests := []struct {
		name, text string
		want       []wantProblem
	}{
		{"did you mean", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: c, resource: {requests: {cpu: 1}}}]\n",
			[]wantProblem{{1, "spec.containers[0].resource", `unknown field "resource"; did you mean "resources"?`, false}}},
		{"case mismatch", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  NodeSelector: {a: b}\n  containers: [{name: c}]\n",
			[]wantProblem{{1, "spec.NodeSelector", `did you mean "nodeSelector"?`, false}}},
		{"small struct lists fields", strings.Replace(poolYAML("p"), "name: default}", "name: default, namespace: x}", 1),
			[]wantProblem{{1, "spec.template.spec.nodeClassRef.namespace", "delete it (fields here: group, kind, name)", false}}},
		{"v1 securityGroupSelector", strings.Replace(class, "  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n", "  securityGroupSelector: {karpenter.sh/discovery: demo}\n", 1),
			[]wantProblem{{1, "spec.securityGroupSelector", "write securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]", false}}},
		{"v1 disruption.expireAfter", poolYAML("p") + "  disruption: {expireAfter: 720h}\n",
			[]wantProblem{{1, "spec.disruption.expireAfter", "write it there: expireAfter: 720h", false}}},
		{"v1 WhenUnderutilized", poolYAML("p") + "  disruption: {consolidationPolicy: WhenUnderutilized}\n",
			[]wantProblem{{1, "spec.disruption.consolidationPolicy", "write consolidationPolicy: WhenEmptyOrUnderutilized", false}}},
		{"v1 name-only nodeClassRef", strings.Replace(poolYAML("p"), "{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}", "{name: default}", 1),
			[]wantProblem{{1, "spec.template.spec.nodeClassRef", "write nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}", false}}},
		{"v1 nodeClassRef apiVersion", strings.Replace(poolYAML("p"), "{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}", "{apiVersion: karpenter.k8s.aws/v1, kind: EC2NodeClass, name: default}", 1),
			[]wantProblem{{1, "spec.template.spec.nodeClassRef.apiVersion", "write group: karpenter.k8s.aws", false},
				{1, "spec.template.spec.nodeClassRef.group", "nodeClassRef.group is required", false}}},
		{"unquoted bool in a string", poolYAML("p") + "      taints: [{key: gpu, value: true, effect: NoSchedule}]\n",
			[]wantProblem{{1, "spec.template.spec.taints[0].value", `must be a string; quote it: "true"`, false}}},
		{"budget nodes as a number", poolYAML("p") + "  disruption: {budgets: [{nodes: 5}]}\n",
			[]wantProblem{{1, "spec.disruption.budgets[0].nodes", `must be a string; quote it: "5"`, false}}},
		{"bad quantity", poolYAML("p") + "  limits: {cpu: lots, nvidia.com/gpu: 4}\n",
			[]wantProblem{{1, "spec.limits.cpu", `invalid quantity "lots"`, false}}},
		{"bad duration", poolYAML("p") + "  disruption: {consolidateAfter: 5 minutes}\n",
			[]wantProblem{{1, "spec.disruption.consolidateAfter", `invalid duration "5 minutes"`, false}}},
		{"bool as string", strings.Replace(class, "role:", "associatePublicIPAddress: \"false\"\n  role:", 1),
			[]wantProblem{{1, "spec.associatePublicIPAddress", "must be true or false without quotes: write false", false}}},
		{"list expected", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: {name: c}\n",
			[]wantProblem{{1, "spec.containers", "must be a list", false}}},
		{"status is not checked", poolYAML("p") + "status: {someFutureField: 1, resources: {cpu: 4}}\n", nil},
		{"metadata typo", "apiVersion: v1\nkind: Pod\nmetadata: {name: x, label: {a: b}}\nspec: {containers: [{name: c}]}\n",
			[]wantProblem{{1, "metadata.label", `did you mean "labels"?`, false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			expectProblems(t, decode(tc.text), tc.want)
		})
	}
}

func TestPlaceholders(t *testing.T) {
	tests := []struct {
		name, text string
		want       []wantProblem
	}{
		{"angle brackets", strings.Replace(class, "role: KarpenterNodeRole-demo", "role: <NODE_ROLE>", 1),
			[]wantProblem{{1, "spec.role", "unfilled placeholder <NODE_ROLE>", false}}},
		{"html escaped", strings.Replace(class, "role: KarpenterNodeRole-demo", "role: KarpenterNodeRole-&lt;CLUSTER&gt;", 1),
			[]wantProblem{{1, "spec.role", "unfilled placeholder <CLUSTER>", false}}},
		{"lower-case with dashes", strings.Replace(class, "role: KarpenterNodeRole-demo", "role: <your-role-name>", 1),
			[]wantProblem{{1, "spec.role", "unfilled placeholder <your-role-name>", false}}},
		{"helm in a key", strings.Replace(class, "{karpenter.sh/discovery: demo}}]\n  securityGroup", "{\"kubernetes.io/cluster/{{ .Values.cluster }}\": owned}}]\n  securityGroup", 1),
			[]wantProblem{{1, "spec.subnetSelectorTerms[0].tags[kubernetes.io/cluster/{{ .Values.cluster }}]", "unfilled placeholder {{ .Values.cluster }}", false}}},
		{"helm in an integer field is not also a type error", poolYAML("p") + "  weight: {{ .Values.weight }}\n",
			[]wantProblem{{1, "spec.weight", "unfilled placeholder {{ .Values.weight }}: render the Helm chart", false}}},
		{"helm in a quantity", poolYAML("p") + "  limits:\n    cpu: {{ .Values.cpu }}\n",
			[]wantProblem{{1, "spec.limits.cpu", "unfilled placeholder {{ .Values.cpu }}", false}}},
		{"helm control lines", "{{- if .Values.enabled }}\n" + poolYAML("p") + "{{- end }}\n",
			[]wantProblem{{1, "", "Helm template line {{- if .Values.enabled }} must be rendered first", false},
				{1, "", "Helm template line {{- end }} must be rendered first", false}}},
		{"envsubst", strings.Replace(class, "role: KarpenterNodeRole-demo", "role: KarpenterNodeRole-${CLUSTER_NAME}", 1),
			[]wantProblem{{1, "spec.role", "unfilled placeholder ${CLUSTER_NAME}: substitute it", false}}},
		{"shell variables in userData are not placeholders", class + "  userData: |\n    echo ${INSTANCE_ID} >/tmp/x <<EOF\n", nil},
		{"same placeholder twice in one field is told once", strings.Replace(class, "role: KarpenterNodeRole-demo", "role: <A>-<A>-<B>", 1),
			[]wantProblem{{1, "spec.role", "<A>", false}, {1, "spec.role", "<B>", false}}},
		{"placeholder breaking YAML", "apiVersion: v1\nkind: Pod\nmetadata: {name: x\nspec: <SPEC>\n",
			[]wantProblem{{1, "", "invalid YAML", false}, {1, "", "unfilled placeholder <SPEC>", false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := decode(tc.text)
			expectProblems(t, b, tc.want)
		})
	}
}

func TestYAMLErrorsNameFileLines(t *testing.T) {
	b := decode(poolYAML("ok") + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   bad: indent\n")
	expectProblems(t, b, []wantProblem{{2, "", "invalid YAML: line 16:", false}})
	b = decode("apiVersion: v1\nkind: Pod\nkind: Pod\n")
	expectProblems(t, b, []wantProblem{{1, "", `line 3: key "kind" already set in map`, false}})
	if len(b.NodePools)+len(b.Pods) != 0 {
		t.Error("objects from an unreadable document")
	}
}

func TestDuplicatesAndReferences(t *testing.T) {
	b := decode(poolYAML("a") + "---\n" + poolYAML("a") + "---\n" + strings.Replace(poolYAML("b"), "name: default}", "name: missing}", 1) +
		"---\napiVersion: v1\nkind: Pod\nmetadata: {name: web-1}\nspec: {containers: [{name: c}]}\n---\n" +
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 3\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: [{name: c}]}\n" +
		"---\n" + class + "---\n" + strings.Replace(poolYAML("c"), "name: default}", "name: defualt}", 1))
	expectProblems(t, b, []wantProblem{
		{2, "metadata.name", `duplicate NodePool "a": already defined at test.yaml:1`, false},
		{3, "spec.template.spec.nodeClassRef.name", `EC2NodeClass "missing" is not among the EC2NodeClasses given (default); it must exist in the cluster`, true},
		{5, "metadata.name", "pod default/web-1 made from this Deployment is already defined at test.yaml:4", false},
		{7, "spec.template.spec.nodeClassRef.name", `EC2NodeClass "defualt" is not among the EC2NodeClasses given (default); did you mean "default"?`, true},
	})
	if got := podNames(b); !reflect.DeepEqual(got, []string{"default/web-1", "default/web-0", "default/web-2"}) {
		t.Errorf("pods = %v", got)
	}
	if len(b.NodePools) != 3 {
		t.Errorf("pools = %d, want 3 (a, b, c)", len(b.NodePools))
	}
	// Pools validated without any EC2NodeClass are not told theirs is missing.
	if b := decode(poolYAML("a")); len(b.Problems) != 0 {
		t.Errorf("lone pool:\n%s", dump(b))
	}
}

func TestPodChecks(t *testing.T) {
	b := decode(`apiVersion: v1
kind: Pod
metadata: {name: x}
spec:
  containers:
    - name: c
      resources: {requests: {cpu: "2"}, limits: {cpu: "1"}}
  tolerations:
    - {key: a, operator: Exists, value: b}
    - {operator: Equal, value: b}
    - {key: a, operator: Equals}
    - {key: a, effect: NoScheduled}
  nodeSelector: {"bad key!": x}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: a, operator: Gt, values: ["x"]}]
  topologySpreadConstraints:
    - {maxSkew: 0, topologyKey: "", whenUnsatisfiable: Never}
`)
	expectProblems(t, b, []wantProblem{
		{1, "spec.containers[0].resources.requests.cpu", "request 2 is above the limit 1", false},
		{1, "spec.tolerations[0].value", "operator Exists takes no value", false},
		{1, "spec.tolerations[1].operator", "a toleration without a key must use operator: Exists", false},
		{1, "spec.tolerations[2].operator", `unknown operator "Equals"`, false},
		{1, "spec.tolerations[3].effect", `unknown effect "NoScheduled"`, false},
		{1, "spec.nodeSelector[bad key!]", `invalid label key "bad key!"`, false},
		{1, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]", `"x" is not one`, false},
		{1, "spec.topologySpreadConstraints[0].maxSkew", "at least 1", false},
		{1, "spec.topologySpreadConstraints[0].topologyKey", "topologyKey is required", false},
		{1, "spec.topologySpreadConstraints[0].whenUnsatisfiable", "write DoNotSchedule or ScheduleAnyway", false},
	})
	if len(b.Pods) != 0 {
		t.Error("invalid pod kept")
	}
}

func TestDefaultsAppliedToKeptObjects(t *testing.T) {
	b := decode(poolYAML("p") + "---\n" + class)
	if len(b.Problems) != 0 {
		t.Fatalf("problems:\n%s", dump(b))
	}
	np, nc := b.NodePools[0], b.NodeClasses[0]
	if np.Spec.Template.Spec.ExpireAfter.String() != "720h0m0s" || np.Spec.Disruption.ConsolidationPolicy != karpenter.ConsolidationPolicyWhenEmptyOrUnderutilized ||
		np.Spec.Disruption.ConsolidateAfter.String() != "0s" || len(np.Spec.Disruption.Budgets) != 1 || np.Spec.Disruption.Budgets[0].Nodes != "10%" {
		t.Errorf("pool defaults: %+v", np.Spec)
	}
	if nc.Spec.EffectiveAMIFamily() != karpenter.AMIFamilyAL2023 || *nc.Spec.MetadataOptions.HTTPTokens != "required" {
		t.Errorf("class defaults: %+v", nc.Spec)
	}
}

func TestProblemString(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{File: "a.yaml", Doc: 2, Path: "spec.x", Message: "bad"}, "a.yaml:2: spec.x: bad"},
		{Problem{File: "a.yaml", Doc: 2, Path: "spec.x", Message: "converted", Warning: true}, "warning: a.yaml:2: spec.x: converted"},
		{Problem{File: "a.yaml", Doc: 1, Message: "invalid YAML"}, "a.yaml:1: invalid YAML"},
		{Problem{File: "a.yaml", Message: "empty"}, "a.yaml: empty"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

func TestErr(t *testing.T) {
	b := decode(poolYAML("p"))
	if b.Err() != nil || b.HasErrors() {
		t.Errorf("warnings only: Err = %v", b.Err())
	}
	b = decode("apiVersion: v1\nkind: Pod\n")
	if b.Err() == nil || !b.HasErrors() || !strings.Contains(b.Err().Error(), "test.yaml:1: metadata.name: metadata.name is required") {
		t.Errorf("Err = %v", b.Err())
	}
}

// Documents are read in parallel, but the cap holds in file order: the first and
// third Deployments (6 + 4 pods) are expanded, the second (6 more) is refused,
// whichever document reserved room first.
func TestExpansionCapAcrossDocuments(t *testing.T) {
	old := MaxExpandedPods
	MaxExpandedPods = 10
	defer func() { MaxExpandedPods = old }()
	dep := func(name string, n int) string {
		return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s}\nspec:\n  replicas: %d\n  selector: {matchLabels: {app: %s}}\n  template:\n    metadata: {labels: {app: %s}}\n    spec: {containers: [{name: c}]}\n", name, n, name, name)
	}
	for i := 0; i < 20; i++ {
		b := decode(dep("a", 6) + "---\n" + dep("b", 6) + "---\n" + dep("c", 4))
		expectProblems(t, b, []wantProblem{{2, "spec.replicas", "more than Joiner plans in one run", false}})
		if len(b.Pods) != 10 || b.Pods[0].Name != "a-0" || b.Pods[9].Name != "c-3" {
			t.Fatalf("pods = %v", podNames(b))
		}
	}
}

// TestStorageObjects: PersistentVolumeClaims, PersistentVolumes and
// StorageClasses are read (where pods' volumes attach bounds where they run),
// a claim namespaced, volumes and classes cluster-scoped, and a binding mode
// the API server refuses is an error.
func TestStorageObjects(t *testing.T) {
	b := decode(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-0}
spec: {storageClassName: gp3, volumeName: pv-1, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
status: {phase: Bound}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: bad}
provisioner: ebs.csi.aws.com
volumeBindingMode: Later
`)
	if len(b.Claims) != 1 || b.Claims[0].Namespace != "default" || b.Claims[0].Spec.VolumeName != "pv-1" {
		t.Errorf("claims = %+v", b.Claims)
	}
	if len(b.PersistentVolumes) != 1 || b.PersistentVolumes[0].Spec.NodeAffinity == nil {
		t.Errorf("volumes = %+v", b.PersistentVolumes)
	}
	if len(b.StorageClasses) != 1 || b.StorageClasses[0].Name != "gp3" {
		t.Errorf("classes = %+v", b.StorageClasses)
	}
	expectProblems(t, b, []wantProblem{{4, "volumeBindingMode", `unknown volumeBindingMode "Later"`, false}})
}
