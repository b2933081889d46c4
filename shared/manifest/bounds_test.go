package manifest

import (
	"strings"
	"testing"
)

// Quantities past what the engine's int64 vectors hold used to read as 0 ("1e18"
// cores, "1e400" bytes) or wrap negative ("9300000000000000" cores in millicores),
// so `joiner plan` packed such a pod beside seven 4-CPU pods on one 8-CPU node and
// `joiner validate` said ok. Each is now an error at its field, and the pod is not
// kept.
func TestQuantitiesOutOfRange(t *testing.T) {
	pod := func(resources string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i, resources: " + resources + "}]\n"
	}
	tests := []struct {
		name, text string
		want       []wantProblem
	}{
		{"cpu 1e18", pod(`{requests: {cpu: "1e18"}}`),
			[]wantProblem{{1, "spec.containers[0].resources.requests.cpu", "1e18 is out of range: at most 9007199254740", false}}},
		{"memory 1e400", pod(`{requests: {memory: "1e400"}}`),
			[]wantProblem{{1, "spec.containers[0].resources.requests.memory", "is out of range: at most 8Pi", false}}},
		{"cpu wraps negative in millicores", pod(`{requests: {cpu: "9300000000000000"}}`),
			[]wantProblem{{1, "spec.containers[0].resources.requests.cpu", "9300T is out of range", false}}},
		{"negative request", pod(`{requests: {memory: "-1Gi"}}`),
			[]wantProblem{{1, "spec.containers[0].resources.requests.memory", "must not be negative, got -1Gi", false}}},
		{"limit standing in for the request", pod(`{limits: {nvidia.com/gpu: "1e19"}}`),
			[]wantProblem{{1, "spec.containers[0].resources.limits[nvidia.com/gpu]", "is out of range: at most 9007199254740992", false}}},
		{"overhead", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  overhead: {cpu: \"1e18\"}\n  containers: [{name: c}]\n",
			[]wantProblem{{1, "spec.overhead.cpu", "out of range", false}}},
		{"each in range, the sum not", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, resources: {requests: {cpu: \"5e12\"}}}\n  - {name: d, resources: {requests: {cpu: \"5e12\"}}}\n",
			[]wantProblem{{1, "spec", "cpu: the pod's containers together ask for more than 9007199254740", false}}},
		{"workload template", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 3\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: [{name: c, resources: {requests: {memory: 1e400}}}]}\n",
			[]wantProblem{{1, "spec.template.spec.containers[0].resources.requests.memory", "out of range", false}}},
		{"node allocatable", "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\nstatus: {allocatable: {cpu: \"9300000000000000\"}}\n",
			[]wantProblem{{1, "status.allocatable.cpu", "out of range", false}}},
		{"NodePool limit", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  limits: {cpu: \"1e18\"}\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}\n      requirements: []\n",
			[]wantProblem{{1, "spec.limits.cpu", "limit 1e18 is out of range", false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := decode(tc.text)
			expectProblems(t, b, tc.want)
			if len(b.Pods)+len(b.Nodes)+len(b.NodePools) != 0 {
				t.Errorf("an object with an out-of-range quantity was kept")
			}
		})
	}
	// In range, up to the bound.
	b := decode(pod(`{requests: {cpu: "9007199254740", memory: 8Pi}}`))
	expectProblems(t, b, nil)
	if len(b.Pods) != 1 {
		t.Errorf("pods = %d, want the in-range pod", len(b.Pods))
	}
}

// Names, namespaces, labels and annotations the API server would refuse (by
// apimachinery's own validation) are errors, on every kind and on the pods a
// workload makes.
func TestMetadataFollowsKubernetesRules(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name, text string
		want       []wantProblem
	}{
		{"label value too long", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: " + long + "}}\nspec: {containers: [{name: c}]}\n",
			[]wantProblem{{1, "metadata.labels.app", "invalid label value", false}}},
		{"label key name part too long", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {example.com/" + long + ": x}}\nspec: {containers: [{name: c}]}\n",
			[]wantProblem{{1, "metadata.labels[example.com/" + long + "]", "name part must be no more than 63 bytes", false}}},
		{"label key prefix not a DNS subdomain", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {Bad_Prefix/app: x}}\nspec: {containers: [{name: c}]}\n",
			[]wantProblem{{1, "metadata.labels[Bad_Prefix/app]", "prefix part", false}}},
		{"label value with a space", "apiVersion: v1\nkind: Node\nmetadata: {name: node-1, labels: {tier: \"two words\"}}\n",
			[]wantProblem{{1, "metadata.labels.tier", `invalid label value "two words"`, false}}},
		{"pod name with capitals", "apiVersion: v1\nkind: Pod\nmetadata: {name: MyPod}\nspec: {containers: [{name: c}]}\n",
			[]wantProblem{{1, "metadata.name", `invalid name "MyPod"`, false}}},
		{"namespace with a dot", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team.a}\nspec: {containers: [{name: c}]}\n",
			[]wantProblem{{1, "metadata.namespace", `invalid namespace "team.a"`, false}}},
		{"annotation key", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {\"bad key\": x}}\nspec: {containers: [{name: c}]}\n",
			[]wantProblem{{1, "metadata.annotations", "name part must consist of", false}}},
		{"workload template label", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x, v: " + long + "}}\n    spec: {containers: [{name: c}]}\n",
			[]wantProblem{{1, "spec.template.metadata.labels.v", "must be no more than 63 bytes", false}}},
		{"DaemonSet template label", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds}\nspec:\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x, \"a b\": z}}\n    spec: {containers: [{name: c}]}\n",
			[]wantProblem{{1, "spec.template.metadata.labels[a b]", "name part must consist of", false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := decode(tc.text)
			expectProblems(t, b, tc.want)
			if len(b.Pods)+len(b.Nodes)+len(b.DaemonSets) != 0 {
				t.Errorf("an object with invalid metadata was kept")
			}
		})
	}
}
