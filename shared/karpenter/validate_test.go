package karpenter

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const validNodePool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels:
        team: web
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.k8s.aws/instance-family
          operator: Exists
          minValues: 2
        - key: karpenter.k8s.aws/instance-generation
          operator: Gte
          values: ["5"]
      taints:
        - key: gpu
          value: "true"
          effect: NoSchedule
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  limits:
    cpu: "1000"
    memory: 1000Gi
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets:
      - nodes: "10%"
      - nodes: "0"
        schedule: "0 9 * * mon-fri"
        duration: 8h
        reasons: [Drifted, Underutilized]
  weight: 10
`

const validNodeClass = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: KarpenterNodeRole-demo
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
    - id: subnet-0123456789abcdef0
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
    - name: extra-group
  tags:
    team: web
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs:
        volumeSize: 100Gi
        volumeType: gp3
        throughput: 125
  metadataOptions:
    httpEndpoint: enabled
    httpTokens: required
    httpPutResponseHopLimit: 2
  kubelet:
    maxPods: 110
    systemReserved:
      cpu: 100m
    evictionSoft:
      memory.available: 500Mi
    evictionSoftGracePeriod:
      memory.available: 1m
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
`

func loadNodePool(t *testing.T) *NodePool {
	t.Helper()
	var np NodePool
	if err := yaml.UnmarshalStrict([]byte(validNodePool), &np); err != nil {
		t.Fatal(err)
	}
	return &np
}

func loadNodeClass(t *testing.T) *EC2NodeClass {
	t.Helper()
	var nc EC2NodeClass
	if err := yaml.UnmarshalStrict([]byte(validNodeClass), &nc); err != nil {
		t.Fatal(err)
	}
	return &nc
}

// want is one expected problem: its path, a substring of its message, and its level.
type want struct {
	path    string
	msg     string
	warning bool
}

func checkProblems(t *testing.T, got []Problem, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Errorf("got %d problems, want %d:\n%s", len(got), len(wants), render(got))
	}
	for _, w := range wants {
		found := false
		for _, p := range got {
			if p.Path == w.path && strings.Contains(p.Message, w.msg) && p.Warning == w.warning {
				found = true
			}
		}
		if !found {
			t.Errorf("missing problem at %s containing %q (warning=%v); got:\n%s", w.path, w.msg, w.warning, render(got))
		}
	}
}

func render(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  " + p.String() + "\n")
	}
	return b.String()
}

func TestValidNodePoolAndClassHaveNoProblems(t *testing.T) {
	if ps := loadNodePool(t).Validate(); len(ps) != 0 {
		t.Errorf("valid NodePool: %s", render(ps))
	}
	if ps := loadNodeClass(t).Validate(); len(ps) != 0 {
		t.Errorf("valid EC2NodeClass: %s", render(ps))
	}
}

func req(k string, op corev1.NodeSelectorOperator, values ...string) NodeSelectorRequirementWithMinValues {
	return NodeSelectorRequirementWithMinValues{Key: k, Operator: op, Values: values}
}

func TestNodePoolValidation(t *testing.T) {
	const reqs = "spec.template.spec.requirements"
	tests := []struct {
		name   string
		mutate func(*NodePool)
		want   []want
	}{
		{"unknown operator", func(np *NodePool) { np.Spec.Template.Spec.Requirements[1].Operator = "in" },
			[]want{{reqs + "[1].operator", `unknown operator "in": write one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte (did you mean "In"?)`, false}}},
		{"missing operator", func(np *NodePool) { np.Spec.Template.Spec.Requirements[1].Operator = "" },
			[]want{{reqs + "[1].operator", "operator is required", false}}},
		{"In without values", func(np *NodePool) { np.Spec.Template.Spec.Requirements[1].Values = nil },
			[]want{{reqs + "[1].values", "operator In needs at least one value", false}}},
		{"NotIn without values", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("example.com/x", corev1.NodeSelectorOpNotIn))
		}, []want{{reqs + "[4].values", "operator NotIn needs at least one value", false}}},
		{"Exists with values", func(np *NodePool) { np.Spec.Template.Spec.Requirements[2].Values = []string{"m5"} },
			[]want{{reqs + "[2].values", "operator Exists takes no values", false}}},
		{"DoesNotExist with values", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("example.com/x", corev1.NodeSelectorOpDoesNotExist, "a"))
		}, []want{{reqs + "[4].values", "operator DoesNotExist takes no values", false}}},
		{"Gte with two values", func(np *NodePool) { np.Spec.Template.Spec.Requirements[3].Values = []string{"5", "6"} },
			[]want{{reqs + "[3].values", "operator Gte needs exactly one value", false}}},
		{"Lt with a non-integer", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[3] = req(LabelInstanceCPU, corev1.NodeSelectorOpLt, "4.5")
		}, []want{{reqs + "[3].values[0]", `"4.5" is not a non-negative integer`, false}}},
		{"Gt with a negative", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[3] = req(LabelInstanceCPU, corev1.NodeSelectorOpGt, "-1")
		}, []want{{reqs + "[3].values[0]", "not a non-negative integer", false}}},
		{"Lte without values", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[3] = req(LabelInstanceMemory, NodeSelectorOpLte)
		}, []want{{reqs + "[3].values", "operator Lte needs exactly one value", false}}},
		{"minValues above 50", func(np *NodePool) { np.Spec.Template.Spec.Requirements[2].MinValues = ptr(51) },
			[]want{{reqs + "[2].minValues", "minValues 51 is out of range: write a number from 1 to 50", false}}},
		{"minValues zero", func(np *NodePool) { np.Spec.Template.Spec.Requirements[2].MinValues = ptr(0) },
			[]want{{reqs + "[2].minValues", "out of range", false}}},
		{"minValues above the In values", func(np *NodePool) { np.Spec.Template.Spec.Requirements[0].MinValues = ptr(3) },
			[]want{{reqs + "[0].minValues", "more distinct values than the 2 listed", false}}},
		{"minValues with NotIn is ignored", func(np *NodePool) {
			r := req(LabelInstanceFamily, corev1.NodeSelectorOpNotIn, "t2")
			r.MinValues = ptr(2)
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, r)
		}, []want{{reqs + "[4].minValues", "only takes effect with operator In or Exists", true}}},
		{"dedicated tenancy", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req(LabelInstanceTenancy, corev1.NodeSelectorOpIn, "dedicated"))
		}, []want{{reqs + "[4]", "Joiner launches default-tenancy instances only", true}}},
		{"default tenancy", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req(LabelInstanceTenancy, corev1.NodeSelectorOpIn, "default", "dedicated"))
		}, nil},
		{"unknown tenancy", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req(LabelInstanceTenancy, corev1.NodeSelectorOpIn, "default", "host"))
		}, []want{{reqs + "[4].values[1]", `unknown karpenter.k8s.aws/instance-tenancy value "host"`, false}}},
		{"placement group", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req(LabelPlacementGroupID, corev1.NodeSelectorOpIn, "pg-0123"))
		}, []want{{reqs + "[4]", "Joiner launches into no placement group", true}}},
		{"provisioner-name", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("karpenter.sh/provisioner-name", corev1.NodeSelectorOpExists)
		}, []want{{reqs + "[2].key", "karpenter.sh/nodepool=<pool name>, which Joiner sets itself", false}}},
		{"nodepool label in requirements", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req(NodePoolLabelKey, corev1.NodeSelectorOpIn, "x")
		}, []want{{reqs + "[2].key", "karpenter.sh/nodepool is set by Joiner itself", false}}},
		{"hostname", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("kubernetes.io/hostname", corev1.NodeSelectorOpExists)
		}, []want{{reqs + "[2].key", "kubernetes.io/hostname is restricted", false}}},
		// Karpenter v1.10+ admits the kubernetes.io and k8s.io domains (nodepool_validation_cel_test.go:
		// "should allow kubernetes domains", "should allow kubernetes subdomains exceptions").
		{"kubernetes.io domain is allowed", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("kubernetes.io/team", corev1.NodeSelectorOpExists)
		}, nil},
		{"kubernetes.io subdomain is allowed", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("subdomain.kubernetes.io/team", corev1.NodeSelectorOpIn, "a")
		}, nil},
		{"node-role label is allowed", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("node-role.kubernetes.io/worker", corev1.NodeSelectorOpExists)
		}, nil},
		{"node.kubernetes.io is allowed", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("node.kubernetes.io/instance-type", corev1.NodeSelectorOpIn, "m5.large")
		}, nil},
		{"k8s.io domain is allowed", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("k8s.io/x", corev1.NodeSelectorOpExists)
		}, nil},
		{"k8s.io subdomain is allowed", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("cluster.k8s.io/x", corev1.NodeSelectorOpExists)
		}, nil},
		{"karpenter.sh subdomain", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("sub.karpenter.sh/x", corev1.NodeSelectorOpExists)
		}, []want{{reqs + "[2].key", `label domain "karpenter.sh" is restricted`, false}}},
		{"template label in the kubernetes.io domain is allowed", func(np *NodePool) {
			np.Spec.Template.ObjectMeta.Labels["node-role.kubernetes.io/worker"] = ""
		}, nil},
		{"unknown karpenter.sh label", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("karpenter.sh/initialized", corev1.NodeSelectorOpExists)
		}, []want{{reqs + "[2].key", `label domain "karpenter.sh" is restricted`, false}}},
		{"unknown karpenter.k8s.aws label", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[2] = req("karpenter.k8s.aws/instance-colour", corev1.NodeSelectorOpExists)
		}, []want{{reqs + "[2].key", "not a karpenter.k8s.aws instance label", false}}},
		{"deprecated beta label", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements[1].Key = "beta.kubernetes.io/arch"
		}, []want{{reqs + "[1].key", "write key: kubernetes.io/arch", true}}},
		{"capacity type typo", func(np *NodePool) { np.Spec.Template.Spec.Requirements[0].Values = []string{"spot", "ondemand"} },
			[]want{{reqs + "[0].values[1]", `unknown karpenter.sh/capacity-type value "ondemand": write one of spot, on-demand, reserved (did you mean "on-demand"?)`, false}}},
		{"arch x86_64", func(np *NodePool) { np.Spec.Template.Spec.Requirements[1].Values = []string{"x86_64"} },
			[]want{{reqs + "[1].values[0]", "x86_64 is written amd64", false}}},
		{"invalid value", func(np *NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("example.com/x", corev1.NodeSelectorOpIn, "a b"))
		}, []want{{reqs + "[4].values[0]", `invalid value "a b"`, false}}},
		{"too many requirements", func(np *NodePool) {
			for i := 0; i < 100; i++ {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("example.com/x", corev1.NodeSelectorOpExists))
			}
		}, []want{{reqs, "at most 100", false}}},
		{"template label restricted", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels[NodePoolLabelKey] = "x" },
			[]want{{"spec.template.metadata.labels[karpenter.sh/nodepool]", "set by Joiner itself", false}}},
		{"template label bad value", func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels["team"] = "web team" },
			[]want{{"spec.template.metadata.labels.team", `invalid label value "web team"`, false}}},
		{"taint effect", func(np *NodePool) { np.Spec.Template.Spec.Taints[0].Effect = "NoScheduled" },
			[]want{{"spec.template.spec.taints[0].effect", `unknown taint effect "NoScheduled": write NoSchedule, PreferNoSchedule or NoExecute (did you mean "NoSchedule"?)`, false}}},
		{"taint without effect", func(np *NodePool) { np.Spec.Template.Spec.Taints[0].Effect = "" },
			[]want{{"spec.template.spec.taints[0].effect", "taint effect is required", false}}},
		{"taint without key", func(np *NodePool) { np.Spec.Template.Spec.Taints[0].Key = "" },
			[]want{{"spec.template.spec.taints[0].key", "taint key is required", false}}},
		{"duplicate taint", func(np *NodePool) {
			np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: "gpu", Value: "x", Effect: corev1.TaintEffectNoSchedule})
		}, []want{{"spec.template.spec.taints[1]", "duplicate taint gpu:NoSchedule", false}}},
		{"startup taint effect", func(np *NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "a", Effect: "Never"}}
		}, []want{{"spec.template.spec.startupTaints[0].effect", "unknown taint effect", false}}},
		{"nodeClassRef missing", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef = nil },
			[]want{{"spec.template.spec.nodeClassRef", "nodeClassRef is required: write nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}", false}}},
		{"nodeClassRef name only", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef = &NodeClassReference{Name: "x"} },
			[]want{{"spec.template.spec.nodeClassRef", "needs group and kind in karpenter.sh/v1: write nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}", false}}},
		{"nodeClassRef without kind", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef.Kind = "" },
			[]want{{"spec.template.spec.nodeClassRef.kind", "write kind: EC2NodeClass", false}}},
		{"nodeClassRef other group", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef.Group = "karpenter.azure.com" },
			[]want{{"spec.template.spec.nodeClassRef.group", "Joiner launches EC2 instances only", false}}},
		{"nodeClassRef without name", func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "" },
			[]want{{"spec.template.spec.nodeClassRef.name", "nodeClassRef.name is required", false}}},
		{"WhenUnderutilized in v1", func(np *NodePool) { np.Spec.Disruption.ConsolidationPolicy = "WhenUnderutilized" },
			[]want{{"spec.disruption.consolidationPolicy", "write consolidationPolicy: WhenEmptyOrUnderutilized", false}}},
		{"unknown policy", func(np *NodePool) { np.Spec.Disruption.ConsolidationPolicy = "WhenEmty" },
			[]want{{"spec.disruption.consolidationPolicy", `(did you mean "WhenEmpty"?)`, false}}},
		{"budget nodes percent over 100", func(np *NodePool) { np.Spec.Disruption.Budgets[0].Nodes = "150%" },
			[]want{{"spec.disruption.budgets[0].nodes", `invalid nodes "150%"`, false}}},
		{"budget nodes word", func(np *NodePool) { np.Spec.Disruption.Budgets[0].Nodes = "ten" },
			[]want{{"spec.disruption.budgets[0].nodes", "write a whole count", false}}},
		{"budget nodes empty", func(np *NodePool) { np.Spec.Disruption.Budgets[0].Nodes = "" },
			[]want{{"spec.disruption.budgets[0].nodes", "nodes is required", false}}},
		{"budget schedule without duration", func(np *NodePool) { np.Spec.Disruption.Budgets[1].Duration = nil },
			[]want{{"spec.disruption.budgets[1].duration", "needs a duration", false}}},
		{"budget duration without schedule", func(np *NodePool) { np.Spec.Disruption.Budgets[1].Schedule = nil },
			[]want{{"spec.disruption.budgets[1].schedule", "needs a schedule", false}}},
		{"budget schedule with 6 fields", func(np *NodePool) { np.Spec.Disruption.Budgets[1].Schedule = ptr("0 0 9 * * mon") },
			[]want{{"spec.disruption.budgets[1].schedule", "has 6 fields; write five", false}}},
		{"budget schedule out of range", func(np *NodePool) { np.Spec.Disruption.Budgets[1].Schedule = ptr("0 25 * * *") },
			[]want{{"spec.disruption.budgets[1].schedule", "25 is out of range 0-23", false}}},
		{"budget schedule descriptor", func(np *NodePool) { np.Spec.Disruption.Budgets[1].Schedule = ptr("@daily") }, nil},
		{"budget duration in seconds", func(np *NodePool) {
			np.Spec.Disruption.Budgets[1].Duration = &metav1.Duration{Duration: 90 * time.Second}
		}, []want{{"spec.disruption.budgets[1].duration", "write whole minutes or hours", false}}},
		{"budget reason", func(np *NodePool) { np.Spec.Disruption.Budgets[1].Reasons = []DisruptionReason{"Drift"} },
			[]want{{"spec.disruption.budgets[1].reasons[0]", `unknown reason "Drift": write Underutilized, Empty or Drifted (did you mean "Drifted"?)`, false}}},
		{"negative limit", func(np *NodePool) { np.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("-1") },
			[]want{{"spec.limits.cpu", "must not be negative", false}}},
		{"weight zero", func(np *NodePool) { np.Spec.Weight = ptr(int32(0)) },
			[]want{{"spec.weight", "weight 0 is out of range: write a number from 1 to 100", false}}},
		{"weight 101", func(np *NodePool) { np.Spec.Weight = ptr(int32(101)) },
			[]want{{"spec.weight", "out of range", false}}},
		{"name missing", func(np *NodePool) { np.Name = "" },
			[]want{{"metadata.name", "metadata.name is required", false}}},
		{"name invalid", func(np *NodePool) { np.Name = "Default_Pool" },
			[]want{{"metadata.name", `invalid name "Default_Pool"`, false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np := loadNodePool(t)
			tc.mutate(np)
			checkProblems(t, np.Validate(), tc.want)
		})
	}
}

func TestEC2NodeClassValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*EC2NodeClass)
		want   []want
	}{
		{"no subnet terms", func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms = nil },
			[]want{{"spec.subnetSelectorTerms", "subnetSelectorTerms is required", false}}},
		{"subnet term with tags and id", func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms[1].Tags = map[string]string{"a": "b"} },
			[]want{{"spec.subnetSelectorTerms[1]", "exactly one of tags or id, got 2", false}}},
		{"empty subnet term", func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms[0] = SubnetSelectorTerm{} },
			[]want{{"spec.subnetSelectorTerms[0]", "exactly one of tags or id, got 0", false}}},
		{"bad subnet id", func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms[1].ID = "sn-1" },
			[]want{{"spec.subnetSelectorTerms[1].id", "write an id such as subnet-0123456789abcdef0", false}}},
		{"empty tag value", func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] = "" },
			[]want{{"spec.subnetSelectorTerms[0].tags[karpenter.sh/discovery]", "empty tag values", false}}},
		{"no security group terms", func(nc *EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms = nil },
			[]want{{"spec.securityGroupSelectorTerms", "securityGroupSelectorTerms is required", false}}},
		{"security group term with id and name", func(nc *EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms[1].ID = "sg-0123" },
			[]want{{"spec.securityGroupSelectorTerms[1]", "exactly one of tags, id or name, got 2", false}}},
		{"bad security group id", func(nc *EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms[1] = SecurityGroupSelectorTerm{ID: "group-1"}
		}, []want{{"spec.securityGroupSelectorTerms[1].id", "sg-0123456789abcdef0", false}}},
		{"no AMI terms, no family", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms = nil },
			[]want{{"spec.amiSelectorTerms", "amiSelectorTerms is required: write amiSelectorTerms: [{alias: al2023@latest}]", false}}},
		{"no AMI terms, family implies alias", func(nc *EC2NodeClass) {
			nc.Spec.AMISelectorTerms = nil
			nc.Spec.AMIFamily = ptr(AMIFamilyBottlerocket)
		}, []want{{"spec.amiSelectorTerms", "write amiSelectorTerms: [{alias: bottlerocket@latest}]", true}}},
		{"Custom without AMI terms", func(nc *EC2NodeClass) {
			nc.Spec.AMISelectorTerms = nil
			nc.Spec.AMIFamily = ptr(AMIFamilyCustom)
		}, []want{{"spec.amiSelectorTerms", "amiFamily Custom needs amiSelectorTerms that pick your AMIs", false}}},
		{"Custom with an id", func(nc *EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}
			nc.Spec.AMIFamily = ptr(AMIFamilyCustom)
		}, nil},
		{"id terms without family", func(nc *EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}
		}, []want{{"spec.amiFamily", "amiFamily is required when amiSelectorTerms has no alias", false}}},
		{"alias with other terms", func(nc *EC2NodeClass) {
			nc.Spec.AMISelectorTerms = append(nc.Spec.AMISelectorTerms, AMISelectorTerm{ID: "ami-0123456789abcdef0"})
		}, []want{{"spec.amiSelectorTerms", "an alias term must be the only amiSelectorTerm", false}}},
		{"alias with tags in one term", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Tags = map[string]string{"a": "b"} },
			[]want{{"spec.amiSelectorTerms[0]", "alias can't be combined", false}}},
		{"id with name in one term", func(nc *EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []AMISelectorTerm{{ID: "ami-0123456789abcdef0", Name: "x"}}
			nc.Spec.AMIFamily = ptr(AMIFamilyAL2023)
		}, []want{{"spec.amiSelectorTerms[0]", "id can't be combined", false}}},
		{"alias without version", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Alias = "al2023" },
			[]want{{"spec.amiSelectorTerms[0].alias", "write family@version", false}}},
		{"alias unknown family", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Alias = "ubuntu@latest" },
			[]want{{"spec.amiSelectorTerms[0].alias", `unknown alias family "ubuntu"`, false}}},
		{"alias pinned bottlerocket", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Alias = "bottlerocket@v1.20.3" }, nil},
		{"alias windows pinned", func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Alias = "windows2022@v1" },
			[]want{{"spec.amiSelectorTerms[0].alias", "Windows aliases only support latest", false}}},
		{"alias family mismatch", func(nc *EC2NodeClass) { nc.Spec.AMIFamily = ptr(AMIFamilyBottlerocket) },
			[]want{{"spec.amiFamily", "amiFamily Bottlerocket does not match alias al2023@latest", false}}},
		{"alias family matches", func(nc *EC2NodeClass) { nc.Spec.AMIFamily = ptr(AMIFamilyAL2023) }, nil},
		{"Ubuntu family", func(nc *EC2NodeClass) { nc.Spec.AMIFamily = ptr("Ubuntu") },
			[]want{{"spec.amiFamily", "Ubuntu was dropped in v1", false}}},
		{"bad AMI id", func(nc *EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []AMISelectorTerm{{ID: "ami_123"}}
			nc.Spec.AMIFamily = ptr(AMIFamilyAL2023)
		}, []want{{"spec.amiSelectorTerms[0].id", "ami-0123456789abcdef0", false}}},
		{"role and instance profile", func(nc *EC2NodeClass) { nc.Spec.InstanceProfile = ptr("profile") },
			[]want{{"spec", "role and instanceProfile are mutually exclusive", false}}},
		{"neither role nor instance profile", func(nc *EC2NodeClass) { nc.Spec.Role = "" },
			[]want{{"spec.role", "role is required (or instanceProfile)", false}}},
		{"instance profile alone", func(nc *EC2NodeClass) { nc.Spec.Role = ""; nc.Spec.InstanceProfile = ptr("profile") }, nil},
		{"restricted cluster tag", func(nc *EC2NodeClass) { nc.Spec.Tags["kubernetes.io/cluster/demo"] = "owned" },
			[]want{{"spec.tags[kubernetes.io/cluster/demo]", "tag kubernetes.io/cluster/demo is restricted", false}}},
		{"restricted nodepool tag", func(nc *EC2NodeClass) { nc.Spec.Tags[NodePoolLabelKey] = "default" },
			[]want{{"spec.tags[karpenter.sh/nodepool]", "Joiner sets it on every instance itself", false}}},
		{"volume type", func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[0].EBS.VolumeType = ptr("gp4") },
			[]want{{"spec.blockDeviceMappings[0].ebs.volumeType", `unknown volumeType "gp4"`, false},
				{"spec.blockDeviceMappings[0].ebs.throughput", "only valid with volumeType: gp3", false}}},
		{"volume size too big", func(nc *EC2NodeClass) {
			q := resource.MustParse("65Ti")
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = &q
		}, []want{{"spec.blockDeviceMappings[0].ebs.volumeSize", "volumeSize 65Ti is out of range", false}}},
		{"volume without size", func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = nil },
			[]want{{"spec.blockDeviceMappings[0].ebs", "volumeSize or snapshotID is required", false}}},
		{"two root volumes", func(nc *EC2NodeClass) {
			q := resource.MustParse("20Gi")
			nc.Spec.BlockDeviceMappings = append(nc.Spec.BlockDeviceMappings, &BlockDeviceMapping{RootVolume: true, EBS: &BlockDevice{VolumeSize: &q}})
		}, []want{{"spec.blockDeviceMappings", "2 block devices are marked rootVolume", false}}},
		{"http tokens", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPTokens = ptr("Required") },
			[]want{{"spec.metadataOptions.httpTokens", `unknown httpTokens "Required": write required or optional`, false}}},
		{"http endpoint", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPEndpoint = ptr("on") },
			[]want{{"spec.metadataOptions.httpEndpoint", "write enabled or disabled", false}}},
		{"hop limit", func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPPutResponseHopLimit = ptr(int64(0)) },
			[]want{{"spec.metadataOptions.httpPutResponseHopLimit", "hop limit 0 is out of range", false}}},
		{"instance store policy", func(nc *EC2NodeClass) { nc.Spec.InstanceStorePolicy = ptr("RAID1") },
			[]want{{"spec.instanceStorePolicy", "write RAID0", false}}},
		{"eviction signal", func(nc *EC2NodeClass) { nc.Spec.Kubelet.EvictionHard = map[string]string{"memory.free": "1Gi"} },
			[]want{{"spec.kubelet.evictionHard[memory.free]", "unknown eviction signal", false}}},
		{"soft eviction without grace", func(nc *EC2NodeClass) { nc.Spec.Kubelet.EvictionSoftGracePeriod = nil },
			[]want{{"spec.kubelet.evictionSoftGracePeriod[memory.available]", "needs a grace period", false}}},
		{"image GC thresholds", func(nc *EC2NodeClass) { nc.Spec.Kubelet.ImageGCLowThresholdPercent = ptr(int32(90)) },
			[]want{{"spec.kubelet.imageGCLowThresholdPercent", "must be lower than imageGCHighThresholdPercent", false}}},
		{"reserved resource", func(nc *EC2NodeClass) { nc.Spec.Kubelet.KubeReserved = map[string]string{"gpu": "1"} },
			[]want{{"spec.kubelet.kubeReserved.gpu", `unknown resource "gpu"`, false}}},
		{"cluster DNS", func(nc *EC2NodeClass) { nc.Spec.Kubelet.ClusterDNS = []string{"kube-dns"} },
			[]want{{"spec.kubelet.clusterDNS[0]", "is not an IP address", false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := loadNodeClass(t)
			tc.mutate(nc)
			checkProblems(t, nc.Validate(), tc.want)
		})
	}
}

func TestNodeClaimValidation(t *testing.T) {
	nc := &NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abcde"}, Spec: NodeClaimSpec{
		Requirements: []NodeSelectorRequirementWithMinValues{
			req(NodePoolLabelKey, corev1.NodeSelectorOpIn, "default"),
			req("node.kubernetes.io/instance-type", corev1.NodeSelectorOpIn, "m5.large"),
		},
		NodeClassRef: &NodeClassReference{Group: AWSGroup, Kind: NodeClassKind, Name: "default"},
	}}
	if ps := nc.Validate(); len(ps) != 0 {
		t.Errorf("a NodeClaim may name karpenter.sh/nodepool: %s", render(ps))
	}
	nc.Spec.Requirements = append(nc.Spec.Requirements, req("kubernetes.io/arch", "Between", "1"))
	checkProblems(t, nc.Validate(), []want{{"spec.requirements[2].operator", `unknown operator "Between"`, false}})
}

func TestParseCron(t *testing.T) {
	for _, ok := range []string{"0 9 * * mon-fri", "*/15 0-6 1,15 jan-jun 0", "@hourly", "0 0 * * 7", "30 2 * * SUN"} {
		if err := ParseCron(ok); err != nil {
			t.Errorf("ParseCron(%q) = %v, want nil", ok, err)
		}
	}
	for bad, msg := range map[string]string{
		"0 9 * *":        "has 4 fields",
		"60 * * * *":     "60 is out of range 0-59",
		"* * 0 * *":      "0 is out of range 1-31",
		"* * * 13 *":     "13 is out of range 1-12",
		"* * * * funday": `"funday" is not a number`,
		"*/0 * * * *":    "step",
		"5-1 * * * *":    "ends before it starts",
		"@fortnightly":   "unknown schedule",
	} {
		err := ParseCron(bad)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseCron(%q) = %v, want an error containing %q", bad, err, msg)
		}
	}
}

func TestClosest(t *testing.T) {
	for _, tc := range []struct{ s, want string }{
		{"securityGroupSelectorTerm", "securityGroupSelectorTerms"},
		{"amiselectorterms", "amiSelectorTerms"},
		{"subnetSelector", ""},
		{"xyz", ""},
	} {
		if got := Closest(tc.s, "securityGroupSelectorTerms", "amiSelectorTerms", "subnetSelectorTerms", "role"); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
