package bootstrap

import (
	"encoding/base64"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// Test cluster values: nothing here is a real credential.
var (
	testCA         = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nTESTDATA\n-----END CERTIFICATE-----\n"))
	testToken      = "abcdef.0123456789abcdef"
	testCACertHash = "sha256:" + strings.Repeat("0123456789abcdef", 4)
)

// fixture is an EC2NodeClass and the NodePool that uses it, from one testdata file.
type fixture struct {
	class *karpenter.EC2NodeClass
	pool  *karpenter.NodePool
}

func loadFixture(t *testing.T, name string) fixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	for _, doc := range strings.Split(string(data), "\n---\n") {
		// The separator took the document's last newline; block scalars keep it.
		doc += "\n"
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch meta.Kind {
		case karpenter.NodeClassKind:
			f.class = &karpenter.EC2NodeClass{}
			if err := yaml.UnmarshalStrict([]byte(doc), f.class); err != nil {
				t.Fatalf("%s: EC2NodeClass: %v", name, err)
			}
		case karpenter.NodePoolKind:
			f.pool = &karpenter.NodePool{}
			if err := yaml.UnmarshalStrict([]byte(doc), f.pool); err != nil {
				t.Fatalf("%s: NodePool: %v", name, err)
			}
		default:
			t.Fatalf("%s: unexpected kind %q", name, meta.Kind)
		}
	}
	if f.class == nil || f.pool == nil {
		t.Fatalf("%s: want one EC2NodeClass and one NodePool", name)
	}
	return f
}

type cluster struct {
	name, endpoint, cidr, region string
}

var (
	eksTechnews = cluster{"technews-karpenter-eks", "https://ABCDEF0123456789.gr7.us-east-1.eks.amazonaws.com", "10.100.0.0/16", "us-east-1"}
	eksDemo     = cluster{"eks-demo", "https://0123456789ABCDEF.yl4.eu-west-1.eks.amazonaws.com", "172.20.0.0/16", "eu-west-1"}
	kubean      = cluster{"kubean-demo", "https://api.kubean.example:6443", "10.233.0.0/18", "us-east-1"}
)

// options builds the Options the EC2 provider would for this class and pool.
func (f fixture) options(t *testing.T, c cluster, maxPods int32) Options {
	t.Helper()
	labels := maps.Clone(f.pool.Spec.Template.ObjectMeta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[karpenter.NodePoolLabelKey] = f.pool.Name
	taints := slices.Concat(f.pool.Spec.Template.Spec.Taints, f.pool.Spec.Template.Spec.StartupTaints)
	src, err := TokenSourceFromAnnotations(f.class.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		ClusterName: c.name, ClusterEndpoint: c.endpoint, CABundle: testCA, ClusterCIDR: c.cidr,
		Labels: labels, Taints: taints, MaxPods: maxPods, Kubelet: f.class.Spec.Kubelet,
		Custom: CustomValues{CACertHash: testCACertHash, Token: src, Region: c.region},
	}
	if f.class.Spec.UserData != nil {
		o.UserData = *f.class.Spec.UserData
	}
	return o
}

func TestGolden(t *testing.T) {
	cases := []struct {
		golden, fixture string
		cluster         cluster
		maxPods         int32
		render          func(Options) (string, error)
	}{
		{"seed002-cpu-custom.txt", "seed002-cpu.yaml", kubean, 29, Custom},
		{"seed002-gpu-custom.txt", "seed002-gpu.yaml", kubean, 58, Custom},
		{"seed004-bottlerocket.toml", "seed004-bottlerocket.yaml", eksDemo, 58, Bottlerocket},
		{"bottlerocket-user-settings.toml", "bottlerocket-user-settings.yaml", eksDemo, 29, Bottlerocket},
		{"al2023-shell.mime", "al2023-shell.yaml", eksTechnews, 29, Nodeadm},
		{"al2023-nodeconfig.mime", "al2023-nodeconfig.yaml", eksTechnews, 58, Nodeadm},
		{"al2023-mime.mime", "al2023-mime.yaml", eksTechnews, 29, Nodeadm},
		{"al2.mime", "al2.yaml", eksTechnews, 17, EKS},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			f := loadFixture(t, tc.fixture)
			o := f.options(t, tc.cluster, tc.maxPods)
			got, err := tc.render(o)
			if err != nil {
				t.Fatal(err)
			}
			again, err := tc.render(o)
			if err != nil || again != got {
				t.Fatalf("second render differs (err %v): user data must be deterministic", err)
			}
			path := filepath.Join("testdata", "golden", tc.golden)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("user data differs from %s (run with -update after checking the change):\n--- got\n%s\n--- want\n%s", path, got, want)
			}
		})
	}
}

func TestSeed002CustomFillsEveryPlaceholder(t *testing.T) {
	f := loadFixture(t, "seed002-gpu.yaml")
	got, err := Custom(f.options(t, kubean, 58))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"--register-with-taints=karpenter.sh/unregistered:NoExecute,gpu=true:NoSchedule ",
		"--node-labels=gpu.workload=inference,karpenter.sh/nodepool=workload-gpu-l4,node.accelerator=nvidia-gpu,node.lifecycle=karpenter\"",
		"kubeadm join https://api.kubean.example:6443 \\",
		"--token ${JOINER_BOOTSTRAP_TOKEN} \\",
		"--discovery-token-ca-cert-hash sha256:" + strings.Repeat("0123456789abcdef", 4) + " \\",
		`JOINER_BOOTSTRAP_TOKEN="$(aws ssm get-parameter --region 'us-east-1' --name '/kubean/bootstrap-token' --with-decryption --query Parameter.Value --output text)"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered GPU user data lacks %q", want)
		}
	}
	if strings.Contains(got, "{{") || strings.Contains(got, testToken) {
		t.Errorf("rendered user data still has a placeholder or carries the token although it is fetched on the instance:\n%s", got)
	}
}

// TestSeed002CPUFetchesTokenBeforeUse: without {{ .BootstrapTokenFetch }} in
// the script, the line that reads the token on the instance goes before the
// command that first uses it (before its first continued line), under the
// script's own set -e.
func TestSeed002CPUFetchesTokenBeforeUse(t *testing.T) {
	f := loadFixture(t, "seed002-cpu.yaml")
	got, err := Custom(f.options(t, kubean, 29))
	if err != nil {
		t.Fatal(err)
	}
	fetch := `JOINER_BOOTSTRAP_TOKEN="$(aws ssm get-parameter --region 'us-east-1' --name '/kubean/bootstrap-token' --with-decryption --query Parameter.Value --output text)" || { echo "joiner: cannot read the bootstrap token from SSM parameter /kubean/bootstrap-token" >&2; exit 1; }`
	if !strings.Contains(got, "systemctl start containerd\n"+fetch+"\nkubeadm join https://api.kubean.example:6443 \\\n  --token ${JOINER_BOOTSTRAP_TOKEN} \\") || strings.Count(got, "aws ssm") != 1 {
		t.Errorf("token fetch not first, or token not referenced:\n%s", got)
	}
	if !strings.Contains(got, "--register-with-taints=karpenter.sh/unregistered:NoExecute --node-labels=karpenter.sh/nodepool=workload-general,node.lifecycle=karpenter,workload-tier=general\"") {
		t.Errorf("CPU user data lacks the seed's taint and label flags:\n%s", got)
	}
}

func TestAL2023NodeConfigContent(t *testing.T) {
	f := loadFixture(t, "al2023-shell.yaml")
	got, err := Nodeadm(f.options(t, eksTechnews, 29))
	if err != nil {
		t.Fatal(err)
	}
	parts, err := ParseMIME(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 || parts[0].ContentType() != "application/node.eks.aws" || parts[1].ContentType() != "text/x-shellscript" {
		t.Fatalf("want NodeConfig then shell part, got %d parts: %+v", len(parts), parts)
	}
	var nc struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Cluster struct {
				Name, APIServerEndpoint, CertificateAuthority, CIDR string
			} `json:"cluster"`
			Kubelet struct {
				Config map[string]any `json:"config"`
				Flags  []string       `json:"flags"`
			} `json:"kubelet"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(parts[0].Body), &nc); err != nil {
		t.Fatal(err)
	}
	if nc.APIVersion != NodeConfigAPIVersion || nc.Kind != "NodeConfig" {
		t.Errorf("NodeConfig header: %s %s", nc.APIVersion, nc.Kind)
	}
	c := nc.Spec.Cluster
	if c.Name != eksTechnews.name || c.APIServerEndpoint != eksTechnews.endpoint || c.CertificateAuthority != testCA || c.CIDR != eksTechnews.cidr {
		t.Errorf("cluster block: %+v", c)
	}
	// kubelet.maxPods from the class (110) wins over the per-type value (29).
	if nc.Spec.Kubelet.Config["maxPods"] != float64(110) {
		t.Errorf("maxPods = %v, want 110", nc.Spec.Kubelet.Config["maxPods"])
	}
	wantFlags := []string{
		"--node-labels=environment=development,karpenter.sh/nodepool=default",
		"--register-with-taints=karpenter.sh/unregistered:NoExecute,dedicated=web:NoSchedule",
	}
	if !slices.Equal(nc.Spec.Kubelet.Flags, wantFlags) {
		t.Errorf("flags = %q, want %q (node-role.kubernetes.io/worker must be left out)", nc.Spec.Kubelet.Flags, wantFlags)
	}
	if !strings.Contains(parts[1].Body, "hello from the node class") {
		t.Errorf("user's shell part lost: %q", parts[1].Body)
	}
}

func TestAL2023MergesUserNodeConfig(t *testing.T) {
	f := loadFixture(t, "al2023-nodeconfig.yaml")
	got, err := Nodeadm(f.options(t, eksTechnews, 58))
	if err != nil {
		t.Fatal(err)
	}
	parts, err := ParseMIME(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 {
		t.Fatalf("a NodeConfig user data must merge into one part, got %d", len(parts))
	}
	var nc map[string]any
	if err := yaml.Unmarshal([]byte(parts[0].Body), &nc); err != nil {
		t.Fatal(err)
	}
	if v := dig(nc, "spec", "cluster", "name"); v != eksTechnews.name {
		t.Errorf("cluster name %v: Joiner's must win", v)
	}
	if v := dig(nc, "spec", "kubelet", "config", "maxPods"); v != float64(58) {
		t.Errorf("maxPods %v: Joiner's must win", v)
	}
	if v := dig(nc, "spec", "kubelet", "config", "shutdownGracePeriod"); v != "30s" {
		t.Errorf("user's kubelet setting lost: %v", v)
	}
	if v := dig(nc, "spec", "instance", "localStorage", "strategy"); v != "RAID0" {
		t.Errorf("user's instance block lost: %v", v)
	}
	flags, _ := dig(nc, "spec", "kubelet", "flags").([]any)
	if len(flags) != 3 || flags[0] != "--v=2" {
		t.Errorf("flags = %v: want the user's --v=2 first, then Joiner's two", flags)
	}
}

func TestAL2023KeepsUserMIMEParts(t *testing.T) {
	f := loadFixture(t, "al2023-mime.yaml")
	got, err := Nodeadm(f.options(t, eksTechnews, 29))
	if err != nil {
		t.Fatal(err)
	}
	parts, err := ParseMIME(got)
	if err != nil {
		t.Fatal(err)
	}
	types := []string{}
	for _, p := range parts {
		types = append(types, p.ContentType())
	}
	want := []string{"application/node.eks.aws", "application/node.eks.aws", "text/x-shellscript"}
	if !slices.Equal(types, want) {
		t.Fatalf("parts %v, want %v", types, want)
	}
	if !strings.Contains(parts[1].Body, "shutdownGracePeriod: 30s") || !strings.Contains(parts[2].Body, `echo "user part"`) {
		t.Errorf("user parts changed: %+v", parts[1:])
	}
}

func TestBottlerocketJoinerKeysWin(t *testing.T) {
	f := loadFixture(t, "bottlerocket-user-settings.yaml")
	got, err := Bottlerocket(f.options(t, eksDemo, 29))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Settings struct {
			Kubernetes struct {
				ClusterName        string              `toml:"cluster-name"`
				APIServer          string              `toml:"api-server"`
				ClusterCertificate string              `toml:"cluster-certificate"`
				MaxPods            int                 `toml:"max-pods"`
				ClusterDNSIP       string              `toml:"cluster-dns-ip"`
				NodeLabels         map[string]string   `toml:"node-labels"`
				NodeTaints         map[string][]string `toml:"node-taints"`
				SystemReserved     map[string]string   `toml:"system-reserved"`
			} `toml:"kubernetes"`
			HostContainers map[string]map[string]any `toml:"host-containers"`
			Kernel         struct {
				Sysctl map[string]string `toml:"sysctl"`
			} `toml:"kernel"`
		} `toml:"settings"`
	}
	if err := toml.Unmarshal([]byte(got), &doc); err != nil {
		t.Fatalf("output is not TOML: %v\n%s", err, got)
	}
	k := doc.Settings.Kubernetes
	if k.ClusterName != "eks-demo" || k.APIServer != eksDemo.endpoint || k.ClusterCertificate != testCA || k.MaxPods != 29 {
		t.Errorf("Joiner's cluster keys must win: %+v", k)
	}
	wantLabels := map[string]string{"team": "platform", karpenter.NodePoolLabelKey: "data"}
	if !maps.Equal(k.NodeLabels, wantLabels) {
		t.Errorf("node-labels = %v, want %v", k.NodeLabels, wantLabels)
	}
	wantTaints := map[string][]string{
		karpenter.UnregisteredTaintKey:   {":NoExecute"},
		"node.cilium.io/agent-not-ready": {"true:NoExecute"},
	}
	if !maps.EqualFunc(k.NodeTaints, wantTaints, slices.Equal) {
		t.Errorf("node-taints = %v, want %v (the user's own taints are replaced)", k.NodeTaints, wantTaints)
	}
	if k.ClusterDNSIP != "10.100.0.10" || k.SystemReserved["cpu"] != "100m" {
		t.Errorf("kubelet block not applied: %+v", k)
	}
	if doc.Settings.HostContainers["admin"]["enabled"] != true || doc.Settings.Kernel.Sysctl["net.core.somaxconn"] != "4096" {
		t.Errorf("user's other settings lost:\n%s", got)
	}
}

func TestAL2BootstrapAfterUserPart(t *testing.T) {
	f := loadFixture(t, "al2.yaml")
	got, err := EKS(f.options(t, eksTechnews, 17))
	if err != nil {
		t.Fatal(err)
	}
	parts, err := ParseMIME(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 || !strings.Contains(parts[0].Body, "amazon-ssm-agent") {
		t.Fatalf("user's part must come first: %+v", parts)
	}
	want := "/etc/eks/bootstrap.sh 'technews-karpenter-eks' --apiserver-endpoint '" + eksTechnews.endpoint + "' --b64-cluster-ca '" + testCA + "'"
	if !strings.Contains(parts[1].Body, want) {
		t.Errorf("bootstrap line missing %q:\n%s", want, parts[1].Body)
	}
	if !strings.Contains(parts[1].Body, "--kubelet-extra-args '--node-labels=karpenter.sh/nodepool=default --register-with-taints=karpenter.sh/unregistered:NoExecute --max-pods=17 --system-reserved=cpu=100m,memory=100Mi --eviction-hard=memory.available<5%'") {
		t.Errorf("kubelet extra args wrong:\n%s", parts[1].Body)
	}
}

func TestRenderErrors(t *testing.T) {
	base := Options{ClusterName: "c", ClusterEndpoint: "https://k.example.com", CABundle: testCA, ClusterCIDR: "10.0.0.0/16"}
	with := func(mod func(*Options)) Options {
		o := base
		mod(&o)
		return o
	}
	cases := []struct {
		name   string
		render func(Options) (string, error)
		o      Options
		want   string
	}{
		{"unknown placeholder", Custom, with(func(o *Options) { o.UserData = "kubeadm join {{ .ClusterEndpont }}" }), "unknown placeholder {{ .ClusterEndpont }}"},
		{"template syntax", Custom, with(func(o *Options) { o.UserData = "kubeadm join {{ .ClusterEndpoint " }), "not a valid template"},
		{"token without source", Custom, with(func(o *Options) { o.UserData = "--token {{ .BootstrapToken }}" }), AnnotationTokenParameter},
		{"fetch without annotation", Custom, with(func(o *Options) { o.UserData = "{{ .BootstrapTokenFetch }}" }), AnnotationTokenParameter},
		{"hash missing", Custom, with(func(o *Options) { o.UserData = "sha256:{{ .CACertHash }}" }), AnnotationCACertHash},
		{"empty custom", Custom, base, "spec.userData is empty"},
		{"al2023 without cidr", Nodeadm, with(func(o *Options) { o.ClusterCIDR = "" }), "cluster service CIDR"},
		{"al2023 bad ca", Nodeadm, with(func(o *Options) { o.CABundle = "%%%" }), "not base64"},
		{"bad label value", Nodeadm, with(func(o *Options) { o.Labels = map[string]string{"team": "a b"} }), "node label team=\"a b\""},
		{"shell in label key", EKS, with(func(o *Options) { o.Labels = map[string]string{"x';rm -rf /": "1"} }), "node label key"},
		{"bad taint effect", EKS, with(func(o *Options) { o.Taints = []corev1.Taint{{Key: "k", Effect: "Sometimes"}} }), `effect "Sometimes"`},
		{"quote in endpoint", EKS, with(func(o *Options) { o.ClusterEndpoint = "https://x'y" }), "cluster endpoint"},
		{"bad toml", Bottlerocket, with(func(o *Options) { o.UserData = "[settings\nx=" }), "not valid TOML"},
		{"settings not a table", Bottlerocket, with(func(o *Options) { o.UserData = "settings = 3" }), "settings is a int64, want a table"},
		{"broken MIME", Nodeadm, with(func(o *Options) { o.UserData = "MIME-Version: 1.0\nContent-Type: text/plain\n\nhi" }), "want multipart/mixed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.render(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestCustomWithoutPlaceholdersUnchanged(t *testing.T) {
	// Seed 002's user data exactly as the guide prints it (with its own <...>
	// markers): no template actions, so it must pass through byte for byte.
	ud := "#!/bin/bash\nkubeadm join https://<KUBE_APISERVER_DNS_NAME>:6443 \\\n  --token <KUBEADM_BOOTSTRAP_TOKEN>\n"
	got, err := Custom(Options{UserData: ud})
	if err != nil {
		t.Fatal(err)
	}
	if got != ud {
		t.Fatalf("got %q, want the input unchanged", got)
	}
}

func TestPlaceholders(t *testing.T) {
	got, err := Placeholders("{{ .ClusterName }} {{.BootstrapToken}} {{ .BootstrapToken }} {{  .NodeLabels  }}")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"BootstrapToken", "ClusterName", "NodeLabels"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Only {{ .Name }} is a placeholder: anything else is refused, naming the action.
	for _, bad := range []string{"{{ if .BootstrapToken }}x{{ end }}", "{{ .NodeLabels | printf \"%s\" }}", "a {{ .ClusterName"} {
		if _, err := Placeholders(bad); err == nil || !strings.Contains(err.Error(), "not a valid template") {
			t.Errorf("%q: err %v, want a template error", bad, err)
		}
	}
}

func TestKubeletLabels(t *testing.T) {
	in := map[string]string{
		"team":                             "a",
		"node-role.kubernetes.io/worker":   "",
		"kubernetes.io/hostname":           "h",
		"node.kubernetes.io/instance-type": "m5.large",
		"example.k8s.io/x":                 "y",
		"karpenter.sh/nodepool":            "p",
		"kubelet.kubernetes.io/foo":        "1",
		"topology.kubernetes.io/zone":      "z",
		"custom.kubernetes.io/thing":       "no",
	}
	got := KubeletLabels(in)
	want := map[string]string{
		"team": "a", "kubernetes.io/hostname": "h", "node.kubernetes.io/instance-type": "m5.large",
		"karpenter.sh/nodepool": "p", "kubelet.kubernetes.io/foo": "1", "topology.kubernetes.io/zone": "z",
	}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestNodeTaintsUnregisteredOnceAndFirst(t *testing.T) {
	got := NodeTaints([]corev1.Taint{
		{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: karpenter.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute},
	})
	if TaintsFlag(got) != "karpenter.sh/unregistered:NoExecute,gpu=true:NoSchedule" {
		t.Fatalf("got %s", TaintsFlag(got))
	}
}

func TestTokenSourceFromAnnotations(t *testing.T) {
	s, err := TokenSourceFromAnnotations(map[string]string{AnnotationTokenSecret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeadm-AbCdEf", AnnotationTokenFetch: "instance"})
	if err != nil || s.SecretID == "" {
		t.Fatalf("s=%+v err=%v", s, err)
	}
	cmd, err := s.FetchCommand("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	if cmd != `JOINER_BOOTSTRAP_TOKEN="$(aws secretsmanager get-secret-value --region 'us-east-1' --secret-id 'arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeadm-AbCdEf' --query SecretString --output text)" || { echo "joiner: cannot read the bootstrap token from secret arn:aws:secretsmanager:us-east-1:123456789012:secret:kubeadm-AbCdEf" >&2; exit 1; }` {
		t.Fatalf("fetch command: %s", cmd)
	}
	for _, bad := range []map[string]string{
		{AnnotationTokenParameter: "/a", AnnotationTokenSecret: "b"},
		{AnnotationTokenFetch: "instance"},
		{AnnotationTokenFetch: "sometimes", AnnotationTokenParameter: "/a"},
		{AnnotationTokenParameter: "/a'; curl evil"},
		// The removed mode that put the token into launch templates.
		{AnnotationTokenFetch: "launch", AnnotationTokenParameter: "/a"},
	} {
		if _, err := TokenSourceFromAnnotations(bad); err == nil {
			t.Errorf("annotations %v accepted", bad)
		}
	}
}

func TestMIMERoundTrip(t *testing.T) {
	in := []Part{newPart(ContentTypeShell, "#!/bin/bash\necho 1\n"), {Header: map[string][]string{"Content-Type": {"text/cloud-config"}, "Content-Transfer-Encoding": {"7bit"}}, Body: "runcmd: []\n"}}
	doc, err := WriteMIME(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseMIME(doc)
	if err != nil {
		t.Fatal(err)
	}
	again, err := WriteMIME(out)
	if err != nil || again != doc {
		t.Fatalf("round trip changed the document (err %v):\n%s\n---\n%s", err, doc, again)
	}
	if out[1].Header.Get("Content-Transfer-Encoding") != "7bit" {
		t.Errorf("extra header lost")
	}
	if _, err := WriteMIME([]Part{newPart(ContentTypeShell, "a\n--//\nb")}); err == nil {
		t.Errorf("a part containing the boundary must be refused")
	}
}
