package karpenter

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func decodeMap(t *testing.T, y string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestConvertNodePoolV1beta1(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// want is the v1 object the conversion must produce.
		want  string
		probs []want
	}{
		{
			name: "seed 001 shape",
			in: `
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
      nodeClassRef: {name: default}
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: 720h
`,
			want: `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 720h
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
`,
			probs: []want{
				{"apiVersion", "write apiVersion: karpenter.sh/v1", true},
				{"spec.disruption.expireAfter", "moved to spec.template.spec.expireAfter", true},
				{"spec.disruption.consolidationPolicy", "write consolidationPolicy: WhenEmptyOrUnderutilized", true},
				{"spec.template.spec.nodeClassRef", "group karpenter.k8s.aws added, kind EC2NodeClass added", true},
			},
		},
		{
			name: "nodeClassRef with apiVersion; WhenEmpty kept",
			in: `
apiVersion: karpenter.sh/v1beta1
kind: NodePool
spec:
  template:
    spec:
      nodeClassRef: {apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: gpu}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}
`,
			want: `
apiVersion: karpenter.sh/v1
kind: NodePool
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}
`,
			probs: []want{
				{"apiVersion", "converted to karpenter.sh/v1", true},
				{"spec.template.spec.nodeClassRef", "apiVersion karpenter.k8s.aws/v1beta1 became group karpenter.k8s.aws", true},
			},
		},
		{
			name: "expireAfter in both places is ambiguous",
			in: `
apiVersion: karpenter.sh/v1beta1
kind: NodePool
spec:
  template: {spec: {expireAfter: 24h, nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}}}
  disruption: {expireAfter: 720h}
`,
			want: `
apiVersion: karpenter.sh/v1
kind: NodePool
spec:
  template: {spec: {expireAfter: 24h, nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}}}
  disruption: {}
`,
			probs: []want{
				{"apiVersion", "converted", true},
				{"spec.disruption.expireAfter", "which is also set; delete this one", false},
			},
		},
		{
			name: "kubelet has no single v1 home",
			in: `
apiVersion: karpenter.sh/v1beta1
kind: NodePool
spec:
  template: {spec: {kubelet: {maxPods: 20}, nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}}}
`,
			want: `
apiVersion: karpenter.sh/v1
kind: NodePool
spec:
  template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}}}
`,
			probs: []want{
				{"apiVersion", "converted", true},
				{"spec.template.spec.kubelet", "move them to the EC2NodeClass", false},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := decodeMap(t, tc.in)
			ps := ConvertNodePoolV1beta1(obj)
			if want := decodeMap(t, tc.want); !reflect.DeepEqual(obj, want) {
				got, _ := json.Marshal(obj)
				exp, _ := json.Marshal(want)
				t.Errorf("converted object:\n got %s\nwant %s", got, exp)
			}
			checkProblems(t, ps, tc.probs)
		})
	}
}

func TestConvertEC2NodeClassV1beta1(t *testing.T) {
	tests := []struct {
		name, in, wantAlias, wantFamily string
		probs                           []want
	}{
		{"family becomes alias", `{"apiVersion":"karpenter.k8s.aws/v1beta1","spec":{"amiFamily":"AL2"}}`, "al2@latest", "AL2",
			[]want{{"apiVersion", "converted", true}, {"spec.amiSelectorTerms", "amiFamily AL2 converted to amiSelectorTerms: [{alias: al2@latest}]", true}}},
		{"no family means AL2", `{"apiVersion":"karpenter.k8s.aws/v1beta1","spec":{}}`, "al2@latest", "",
			[]want{{"apiVersion", "converted", true}, {"spec.amiSelectorTerms", "the v1beta1 default amiFamily AL2", true}}},
		{"terms without family get AL2", `{"apiVersion":"karpenter.k8s.aws/v1beta1","spec":{"amiSelectorTerms":[{"id":"ami-1"}]}}`, "", "AL2",
			[]want{{"apiVersion", "converted", true}, {"spec.amiFamily", "converted to amiFamily: AL2", true}}},
		{"Custom without terms stays for validation", `{"apiVersion":"karpenter.k8s.aws/v1beta1","spec":{"amiFamily":"Custom"}}`, "", "Custom",
			[]want{{"apiVersion", "converted", true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := decodeMap(t, tc.in)
			ps := ConvertEC2NodeClassV1beta1(obj)
			checkProblems(t, ps, tc.probs)
			if obj["apiVersion"] != AWSAPIVersion {
				t.Errorf("apiVersion = %v", obj["apiVersion"])
			}
			b, _ := json.Marshal(obj)
			var nc EC2NodeClass
			if err := json.Unmarshal(b, &nc); err != nil {
				t.Fatal(err)
			}
			if got := nc.Spec.Alias(); got != tc.wantAlias {
				t.Errorf("alias = %q, want %q", got, tc.wantAlias)
			}
			fam := ""
			if nc.Spec.AMIFamily != nil {
				fam = *nc.Spec.AMIFamily
			}
			if fam != tc.wantFamily {
				t.Errorf("amiFamily = %q, want %q", fam, tc.wantFamily)
			}
		})
	}
}

func TestConvertNodeClaimV1beta1(t *testing.T) {
	obj := decodeMap(t, `{"apiVersion":"karpenter.sh/v1beta1","kind":"NodeClaim","spec":{"nodeClassRef":{"name":"default"}}}`)
	ps := ConvertNodeClaimV1beta1(obj)
	ref := obj["spec"].(map[string]any)["nodeClassRef"].(map[string]any)
	if ref["group"] != AWSGroup || ref["kind"] != NodeClassKind || obj["apiVersion"] != APIVersion {
		t.Errorf("converted = %v", obj)
	}
	if len(ps) != 2 || !strings.Contains(ps[1].Message, "group karpenter.k8s.aws added") {
		t.Errorf("problems = %s", render(ps))
	}
}
