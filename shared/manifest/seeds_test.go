package manifest

import (
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Every manifest in the three seed guides is a test case (testdata/seeds holds them
// verbatim, plus filled-in and fixed variants).

const seeds = "../../testdata/seeds"

func loadSeed(t *testing.T, dir string) *Bundle {
	t.Helper()
	b, err := Load(filepath.Join(seeds, dir))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fileProblem is an expected problem in a named file of a seed folder.
type fileProblem struct {
	file string
	wantProblem
}

func expectFileProblems(t *testing.T, b *Bundle, dir string, wants []fileProblem) {
	t.Helper()
	if len(b.Problems) != len(wants) {
		t.Errorf("got %d problems, want %d:\n%s", len(b.Problems), len(wants), dump(b))
	}
	for _, w := range wants {
		file := filepath.Join(seeds, dir, w.file)
		found := false
		for _, p := range b.Problems {
			if p.File == file && p.Doc == w.doc && p.Path == w.path && p.Warning == w.warning && strings.Contains(p.Message, w.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing %s:%d: %s: %q (warning=%v); got:\n%s", w.file, w.doc, w.path, w.msg, w.warning, dump(b))
		}
	}
}

func TestSeed001Raw(t *testing.T) {
	b := loadSeed(t, "001-heavy-app")
	const f = "nodepool.yaml"
	expectFileProblems(t, b, "001-heavy-app", []fileProblem{
		// The NodePool is karpenter.sh/v1beta1: what converts unambiguously is a warning...
		{f, wantProblem{1, "apiVersion", "karpenter.sh/v1beta1 NodePool converted to karpenter.sh/v1", true}},
		{f, wantProblem{1, "spec.disruption.expireAfter", "expireAfter moved to spec.template.spec.expireAfter in karpenter.sh/v1 (converted); write it there: expireAfter: 720h", true}},
		{f, wantProblem{1, "spec.disruption.consolidationPolicy", "WhenUnderutilized was renamed in karpenter.sh/v1 (converted); write consolidationPolicy: WhenEmptyOrUnderutilized", true}},
		{f, wantProblem{1, "spec.template.spec.nodeClassRef", "write nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}", true}},
		// ...and each real mistake is an error saying what to write instead.
		{f, wantProblem{1, "spec.template.spec.requirements[2].key", "karpenter.sh/provisioner-name is the old v1alpha5 Provisioner label", false}},
		{f, wantProblem{1, "spec.limits.resources", `write limits: {cpu: "1000", memory: 1000Gi}`, false}},
		{f, wantProblem{2, "kind", "kind AWSNodeClass does not exist; use EC2NodeClass (apiVersion karpenter.k8s.aws/v1)", false}},
		{f, wantProblem{2, "apiVersion", "karpenter.k8s.aws/v1beta1 EC2NodeClass converted to karpenter.k8s.aws/v1", true}},
		{f, wantProblem{2, "spec.amiSelectorTerms", "amiFamily AL2 converted to amiSelectorTerms: [{alias: al2@latest}]", true}},
		{f, wantProblem{2, "spec.securityGroupSelector", `unknown field "securityGroupSelector": securityGroupSelector is the old (v1alpha5) selector map; write securityGroupSelectorTerms: [{tags: {kubernetes.io/cluster/technews-karpenter-eks: owned}}]`, false}},
		{f, wantProblem{2, "spec.subnetSelector", `unknown field "subnetSelector": subnetSelector is the old (v1alpha5) selector map; write subnetSelectorTerms: [{tags: {karpenter.sh/discovery: technews-karpenter-eks}}]`, false}},
		{f, wantProblem{2, "spec.tags[karpenter.sh/nodepool]", "tag karpenter.sh/nodepool is restricted: Joiner sets it on every instance itself", false}},
	})
	for _, p := range b.Problems {
		if p.Path == "spec.template.spec.requirements[2].key" && !strings.Contains(p.Message, "karpenter.sh/nodepool=<pool name>, which Joiner sets itself") {
			t.Errorf("provisioner-name message does not point at karpenter.sh/nodepool: %s", p)
		}
	}
	if len(b.NodePools) != 0 || len(b.NodeClasses) != 0 {
		t.Errorf("objects with errors were kept: %d pools, %d classes", len(b.NodePools), len(b.NodeClasses))
	}
	if got := podNames(b); !reflect.DeepEqual(got, []string{"default/heavy-app-0", "default/heavy-app-1", "default/heavy-app-2", "default/heavy-app-3", "default/heavy-app-4", "default/s3-reader-pod"}) {
		t.Errorf("pods = %v", got)
	}
	if len(b.Skipped) != 1 || b.Skipped[0].Kind != "ClusterConfig" || !strings.Contains(b.Skipped[0].Note, "eksctl") {
		t.Errorf("skipped = %+v", b.Skipped)
	}
}

func TestSeed001Fixed(t *testing.T) {
	b := loadSeed(t, "001-heavy-app-fixed")
	if len(b.Problems) != 0 {
		t.Fatalf("problems:\n%s", dump(b))
	}
	if len(b.NodePools) != 1 || len(b.NodeClasses) != 1 || len(b.Pods) != 6 {
		t.Fatalf("pools %d classes %d pods %d", len(b.NodePools), len(b.NodeClasses), len(b.Pods))
	}
	np, nc := b.NodePools[0], b.NodeClasses[0]
	if np.Spec.Template.Spec.ExpireAfter.String() != "720h0m0s" || np.Spec.Disruption.Budgets[0].Nodes != "10%" {
		t.Errorf("pool = %+v", np.Spec)
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == karpenter.ProvisionerNameLabelKey {
			t.Error("fixed pool still names provisioner-name")
		}
	}
	if nc.Spec.Alias() != "al2023@latest" || nc.Spec.EffectiveAMIFamily() != karpenter.AMIFamilyAL2023 || len(nc.Spec.SubnetSelectorTerms) != 1 || len(nc.Spec.SecurityGroupSelectorTerms) != 1 {
		t.Errorf("class = %+v", nc.Spec)
	}
	heavy := b.Pods[0]
	if heavy.Name != "heavy-app-0" || heavy.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" || heavy.Spec.Containers[0].Resources.Requests.Memory().String() != "1Gi" {
		t.Errorf("heavy-app pod = %+v", heavy.Spec.Containers[0].Resources)
	}
}

// placeholderProblem is an unfilled placeholder expected at a path.
func placeholderProblem(file string, doc int, path, text string) fileProblem {
	return fileProblem{file, wantProblem{doc, path, "unfilled placeholder " + text, false}}
}

func TestSeed002Raw(t *testing.T) {
	b := loadSeed(t, "002-kubean")
	var wants []fileProblem
	for _, c := range []struct{ file, ami string }{{"cpu-nodeclass-nodepool.yaml", "<KARPENTER_CPU_WORKER_AMI_ID>"}, {"gpu.yaml", "<KARPENTER_GPU_WORKER_AMI_ID>"}} {
		wants = append(wants,
			placeholderProblem(c.file, 1, "spec.amiSelectorTerms[0].id", c.ami),
			placeholderProblem(c.file, 1, "spec.subnetSelectorTerms[0].tags[karpenter.sh/discovery]", "<CLUSTER_NAME>"),
			placeholderProblem(c.file, 1, "spec.securityGroupSelectorTerms[0].tags[karpenter.sh/discovery]", "<CLUSTER_NAME>"),
			placeholderProblem(c.file, 1, "spec.role", "<KARPENTER_NODE_IAM_ROLE_NAME>"),
			placeholderProblem(c.file, 1, "spec.userData", "<KUBE_APISERVER_DNS_NAME>"),
			placeholderProblem(c.file, 1, "spec.userData", "<KUBEADM_BOOTSTRAP_TOKEN>"),
			placeholderProblem(c.file, 1, "spec.userData", "<KUBEADM_CA_CERT_HASH>"),
		)
	}
	wants = append(wants, placeholderProblem("gpu.yaml", 3, "spec.template.spec.containers[0].image", "<NVIDIA_DEVICE_PLUGIN_VERSION>"))
	expectFileProblems(t, b, "002-kubean", wants)
	for _, p := range b.Problems {
		if !strings.HasPrefix(p.Message, "unfilled placeholder ") {
			t.Errorf("not a placeholder problem: %s", p)
		}
	}
	var pools []string
	for _, np := range b.NodePools {
		pools = append(pools, np.Name)
	}
	if !reflect.DeepEqual(pools, []string{"workload-general", "workload-gpu-l4"}) || len(b.NodeClasses) != 0 || len(b.DaemonSets) != 0 {
		t.Errorf("pools %v, classes %d, daemonsets %d", pools, len(b.NodeClasses), len(b.DaemonSets))
	}
}

func TestSeed002Filled(t *testing.T) {
	b := loadSeed(t, "002-kubean-filled")
	// As written, seed 002's user data reads instance metadata without an IMDSv2
	// token (an error that keeps the class: the API server accepts it, the node
	// fails) and holds a literal kubeadm token (a warning).
	if len(b.Problems) != 4 {
		t.Fatalf("problems:\n%s", dump(b))
	}
	for i, p := range b.Problems {
		imds := i%2 == 0
		if p.Path != "spec.userData" || p.Runtime != imds || p.Warning == imds ||
			(imds && !strings.Contains(p.Message, "metadataOptions.httpTokens is required")) ||
			(!imds && (!strings.Contains(p.Message, "literal kubeadm bootstrap token") || strings.Contains(p.Message, "abcdef.0123456789abcdef"))) {
			t.Errorf("problem %d: %+v", i, p)
		}
	}
	if len(b.NodeClasses) != 2 || len(b.NodePools) != 2 || len(b.DaemonSets) != 1 || len(b.Pods) != 1 {
		t.Fatalf("classes %d pools %d daemonsets %d pods %d", len(b.NodeClasses), len(b.NodePools), len(b.DaemonSets), len(b.Pods))
	}
	gpuPool := b.NodePools[1]
	if gpuPool.Name != "workload-gpu-l4" || !gpuPool.Spec.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Equal(resource.MustParse("20")) ||
		len(gpuPool.Spec.Template.Spec.Taints) != 1 || gpuPool.Spec.Template.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule ||
		gpuPool.Spec.Disruption.ConsolidationPolicy != karpenter.ConsolidationPolicyWhenEmpty || gpuPool.Spec.Disruption.ConsolidateAfter.String() != "10m0s" {
		t.Errorf("gpu pool = %+v", gpuPool.Spec)
	}
	gpuClass := b.NodeClasses[1]
	if gpuClass.Spec.BlockDeviceMappings[0].EBS.VolumeSize.String() != "200Gi" || gpuClass.Spec.EffectiveAMIFamily() != karpenter.AMIFamilyCustom ||
		gpuClass.Spec.AMISelectorTerms[0].ID != "ami-0fedcba9876543210" {
		t.Errorf("gpu class = %+v", gpuClass.Spec)
	}
	cuda := b.Pods[0]
	if cuda.Name != "cuda-vectoradd-test" || !cuda.Spec.Containers[0].Resources.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Equal(resource.MustParse("1")) || cuda.Spec.NodeSelector["node.accelerator"] != "nvidia-gpu" {
		t.Errorf("cuda pod = %+v", cuda.Spec)
	}
	if ds := b.DaemonSets[0]; ds.Namespace != "kube-system" || !strings.HasSuffix(ds.Spec.Template.Spec.Containers[0].Image, ":v0.17.0") {
		t.Errorf("device plugin = %s/%s %s", ds.Namespace, ds.Name, ds.Spec.Template.Spec.Containers[0].Image)
	}
}

func TestSeed002Fixed(t *testing.T) {
	b := loadSeed(t, "002-kubean-fixed")
	if len(b.Problems) != 0 {
		t.Fatalf("problems:\n%s", dump(b))
	}
	// Joiner's own {{ .Placeholders }} stay in the user data for launch time.
	if len(b.NodeClasses) != 2 || !strings.Contains(*b.NodeClasses[0].Spec.UserData, "--token {{ .BootstrapToken }}") ||
		!strings.Contains(*b.NodeClasses[1].Spec.UserData, "sha256:{{ .CACertHash }}") {
		t.Fatalf("classes %d, user data:\n%s", len(b.NodeClasses), *b.NodeClasses[0].Spec.UserData)
	}
}

func TestSeed004Raw(t *testing.T) {
	b := loadSeed(t, "004-fargate")
	const f = "nodepool.yaml"
	expectFileProblems(t, b, "004-fargate", []fileProblem{
		placeholderProblem(f, 2, "spec.role", "{{ .Values.nodeRole | quote }}"),
		placeholderProblem(f, 2, "spec.subnetSelectorTerms[0].tags[karpenter.sh/discovery]", "{{ .Values.clusterName | quote }}"),
		placeholderProblem(f, 2, "spec.securityGroupSelectorTerms[0].tags[karpenter.sh/discovery]", "{{ .Values.clusterName | quote }}"),
		placeholderProblem(f, 2, "spec.tags[karpenter.sh/discovery]", "{{ .Values.clusterName | quote }}"),
		placeholderProblem(f, 2, "spec.tags.Name", `{{ printf "%s-karpenter-node" .Values.clusterName | quote }}`),
	})
	if len(b.NodePools) != 1 || len(b.NodeClasses) != 0 {
		t.Errorf("pools %d classes %d", len(b.NodePools), len(b.NodeClasses))
	}
}

func TestSeed004Filled(t *testing.T) {
	b := loadSeed(t, "004-fargate-filled")
	if len(b.Problems) != 0 {
		t.Fatalf("problems:\n%s", dump(b))
	}
	np, nc := b.NodePools[0], b.NodeClasses[0]
	var ops []string
	for _, r := range np.Spec.Template.Spec.Requirements {
		ops = append(ops, string(r.Operator))
	}
	sort.Strings(ops)
	if want := []string{"Gt", "Gte", "Gte", "In", "In", "In", "In"}; !reflect.DeepEqual(ops, want) {
		t.Errorf("operators = %v, want %v", ops, want)
	}
	if np.Spec.Limits.Cpu().String() != "50" || np.Spec.Limits.Memory().String() != "128Gi" {
		t.Errorf("limits = %v", np.Spec.Limits)
	}
	if nc.Spec.Role != "KarpenterNodeRole-eks-demo" || nc.Spec.Alias() != "bottlerocket@latest" || nc.Spec.Tags["Name"] != "eks-demo-karpenter-node" {
		t.Errorf("class = %+v", nc.Spec)
	}
}

// TestSeedFilesAreVerbatim guards the extraction: the raw seed folders must keep the
// guides' text (HTML entities of seed 002 unescaped), so the tests above test what
// users copy.
func TestSeedFilesAreVerbatim(t *testing.T) {
	for _, c := range []struct{ file, contains string }{
		{"001-heavy-app/nodepool.yaml", "        - key: karpenter.sh/provisioner-name # This tag is implicit for NodePools, but good to understand\n"},
		{"001-heavy-app/nodepool.yaml", "  securityGroupSelector:\n    kubernetes.io/cluster/technews-karpenter-eks: owned # Selects security groups tagged by eksctl\n"},
		{"002-kubean/cpu-nodeclass-nodepool.yaml", "    cat >/etc/systemd/system/kubelet.service.d/20-karpenter.conf <<EOF\n"},
		{"002-kubean/gpu.yaml", "        - image: nvcr.io/nvidia/k8s-device-plugin:<NVIDIA_DEVICE_PLUGIN_VERSION>\n"},
		{"004-fargate/nodepool.yaml", `    Name: {{ printf "%s-karpenter-node" .Values.clusterName | quote }}` + "\n"},
	} {
		data := readFile(t, filepath.Join(seeds, c.file))
		if !strings.Contains(data, c.contains) {
			t.Errorf("%s lost %q", c.file, c.contains)
		}
		if strings.Contains(data, "&lt;") || strings.Contains(data, "&gt;") {
			t.Errorf("%s still has HTML entities", c.file)
		}
	}
}
