package nodeboot

import (
	"context"
	"encoding/base64"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/amifamily"
	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
)

// Test cluster values: nothing here is a real credential.
var (
	testCA       = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nTESTDATA\n-----END CERTIFICATE-----\n"))
	testEndpoint = "https://api.kubean-demo.internal:6443"
	testToken    = "abcdef.0123456789abcdef"
	testHash     = strings.Repeat("0123456789abcdef", 4)
)

// needSandbox fails under make test (JOINER_REQUIRE_REAL_PARTS=1) or CI when
// user data cannot be executed here, and skips otherwise, saying why.
func needSandbox(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("JOINER_REQUIRE_REAL_PARTS") == "1" {
			t.Fatalf("user data cannot be executed here: %v", err)
		}
		t.Skipf("user data cannot be executed here: %v", err)
	}
}

type world struct {
	t   *testing.T
	sim *awssim.Sim
	b   *Booter
	n   int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	sim, err := awssim.New(awssim.Config{Clock: awssim.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Apply(awssim.Seed{Parameters: []awssim.Parameter{{Name: "/kubean/bootstrap-token", Value: testToken, Type: "SecureString"}}}); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, sim: sim, b: New(sim, Cluster{Endpoint: testEndpoint, CABundle: testCA})}
}

// launch seeds a running instance with the user data and httpTokens given.
func (w *world) launch(userData, httpTokens string) awssim.Instance {
	w.t.Helper()
	w.n++
	in := awssim.Instance{ID: "i-0a1b2c3d4e5f6070" + string(rune('0'+w.n)), InstanceType: "m6i.large", Zone: []string{"us-east-1a", "us-east-1b"}[w.n%2],
		PrivateIP: "10.0.1." + string(rune('0'+w.n)), UserData: base64.StdEncoding.EncodeToString([]byte(userData)),
		MetadataOptions: &awssim.MetadataOptions{HTTPTokens: httpTokens, HTTPPutResponseHopLimit: 1}}
	if err := w.sim.Apply(awssim.Seed{Instances: []awssim.Instance{in}}); err != nil {
		w.t.Fatal(err)
	}
	got, _ := w.sim.Instance(in.ID)
	return got
}

// options are what the EC2 provider passes for seed 002's GPU pool.
func options(userData string) bootstrap.Options {
	return bootstrap.Options{
		ClusterName: "kubean-demo", ClusterEndpoint: testEndpoint, CABundle: testCA, ClusterCIDR: "10.233.0.0/18", MaxPods: 29,
		Labels:   map[string]string{"node.lifecycle": "karpenter", "node.accelerator": "nvidia-gpu", "karpenter.sh/nodepool": "workload-gpu-l4"},
		Taints:   []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		UserData: userData,
		Custom:   bootstrap.CustomValues{Token: bootstrap.TokenSource{SSMParameter: "/kubean/bootstrap-token"}, Region: "us-east-1", CACertHash: testHash},
	}
}

func render(t *testing.T, family string, o bootstrap.Options) string {
	t.Helper()
	f, err := amifamily.Get(family)
	if err != nil {
		t.Fatal(err)
	}
	ud, err := f.UserData(o)
	if err != nil {
		t.Fatal(err)
	}
	return ud
}

// seed002 is seed 002's Custom user data as the guide writes it, placeholders
// filled: plain curl reads of the metadata service (IMDSv1).
const seed002 = `#!/bin/bash
set -euxo pipefail
INSTANCE_ID="$(curl -s http://169.254.169.254/latest/meta-data/instance-id)"
AWS_AZ="$(curl -s http://169.254.169.254/latest/meta-data/placement/availability-zone)"
PROVIDER_ID="aws:///${AWS_AZ}/${INSTANCE_ID}"
mkdir -p /etc/systemd/system/kubelet.service.d
cat >/etc/systemd/system/kubelet.service.d/20-karpenter.conf <<EOF
[Service]
Environment="KUBELET_EXTRA_ARGS=--cloud-provider=external --provider-id=${PROVIDER_ID} --register-with-taints={{ .NodeTaints }} --node-labels={{ .NodeLabels }}"
EOF
systemctl daemon-reload
systemctl enable containerd
systemctl start containerd
nvidia-smi || true
kubeadm join https://api.kubean-demo.internal:6443 \
  --token {{ .BootstrapToken }} \
  --discovery-token-ca-cert-hash sha256:{{ .CACertHash }} \
  --node-name "${INSTANCE_ID}"
systemctl restart kubelet
`

// seed002v2 is the same with an IMDSv2 session token.
var seed002v2 = strings.Replace(strings.Replace(seed002,
	`INSTANCE_ID="$(curl -s http://169.254.169.254/latest/meta-data/instance-id)"`,
	`IMDS_TOKEN="$(curl -sf -X PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')"
INSTANCE_ID="$(curl -sf -H "X-aws-ec2-metadata-token: ${IMDS_TOKEN}" http://169.254.169.254/latest/meta-data/instance-id)"`, 1),
	`AWS_AZ="$(curl -s http://`, `AWS_AZ="$(curl -sf -H "X-aws-ec2-metadata-token: ${IMDS_TOKEN}" http://`, 1)

// wantJoin checks what every good join of seed 002's GPU pool carries.
func wantJoin(t *testing.T, r Result, in awssim.Instance, agent, nodeName string) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("boot failed: %v\noutput:\n%s\ncalls %+v", r.Err, r.Output, r.Calls)
	}
	j := r.Join
	if j.Agent != agent || j.NodeName != nodeName {
		t.Errorf("agent %s node %q, want %s %q", j.Agent, j.NodeName, agent, nodeName)
	}
	if j.ProviderID != "" && j.ProviderID != "aws:///"+in.Zone+"/"+in.ID {
		t.Errorf("provider ID %q, want aws:///%s/%s", j.ProviderID, in.Zone, in.ID)
	}
	for k, v := range map[string]string{"node.lifecycle": "karpenter", "node.accelerator": "nvidia-gpu", "karpenter.sh/nodepool": "workload-gpu-l4"} {
		if j.Labels[k] != v {
			t.Errorf("label %s=%q, want %q (labels %v)", k, j.Labels[k], v, j.Labels)
		}
	}
	for _, want := range []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}, {Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}} {
		if !slices.ContainsFunc(j.Taints, func(t corev1.Taint) bool { return t == want }) {
			t.Errorf("taints %+v lack %+v", j.Taints, want)
		}
	}
	if !sameEndpoint(j.Endpoint, testEndpoint) || (j.CABundle != "" && j.CABundle != testCA) {
		t.Errorf("endpoint %q CA %q", j.Endpoint, j.CABundle)
	}
}

func TestCustomSeed002IMDSv1FailsWhenTokensRequired(t *testing.T) {
	needSandbox(t)
	w := newWorld(t)
	in := w.launch(render(t, "Custom", options(seed002)), "required")
	r := w.b.Boot(context.Background(), in.ID)
	if r.Err == nil || r.Join != nil {
		t.Fatalf("seed 002 joined with IMDSv1 reads while tokens are required: %+v", r.Join)
	}
	for _, want := range []string{"without an IMDSv2 token", "/latest/meta-data/instance-id", `provider ID "aws:////"`, "aws:///" + in.Zone + "/" + in.ID} {
		if !strings.Contains(r.Err.Error(), want) {
			t.Errorf("cause lacks %q: %v", want, r.Err)
		}
	}
	// The script ran to its end: the join was attempted, with the token read on the node.
	var kubeadm *Call
	for i := range r.Calls {
		if r.Calls[i].Name == "kubeadm" {
			kubeadm = &r.Calls[i]
		}
	}
	if kubeadm == nil || !slices.Contains(kubeadm.Args, testToken) || !slices.Contains(kubeadm.Args, "sha256:"+testHash) {
		t.Fatalf("kubeadm join not recorded with the token read from SSM: %+v", r.Calls)
	}
	if !slices.ContainsFunc(r.Calls, func(c Call) bool { return c.Name == "nvidia-smi" }) || !slices.ContainsFunc(r.Calls, func(c Call) bool { return c.Name == "aws" }) {
		t.Errorf("nvidia-smi and the token read not recorded: %+v", r.Calls)
	}
	if strings.Contains(r.Err.Error(), testToken) {
		t.Errorf("the cause repeats the token: %v", r.Err)
	}
	if _, err := os.Stat("/etc/systemd/system/kubelet.service.d/20-karpenter.conf"); err == nil {
		t.Errorf("the script wrote the host's /etc")
	}
}

func TestCustomSeed002IMDSv1JoinsWhenTokensOptional(t *testing.T) {
	needSandbox(t)
	w := newWorld(t)
	in := w.launch(render(t, "Custom", options(seed002)), "optional")
	r := w.b.Boot(context.Background(), in.ID)
	wantJoin(t, r, in, "kubeadm", in.ID)
	if r.Join.ProviderID != "aws:///"+in.Zone+"/"+in.ID {
		t.Errorf("provider ID %q", r.Join.ProviderID)
	}
}

func TestCustomIMDSv2JoinsWhenTokensRequired(t *testing.T) {
	needSandbox(t)
	w := newWorld(t)
	in := w.launch(render(t, "Custom", options(seed002v2)), "required")
	r := w.b.Boot(context.Background(), in.ID)
	wantJoin(t, r, in, "kubeadm", in.ID)
	for _, q := range r.IMDS {
		if q.Status != 200 {
			t.Errorf("metadata request %+v", q)
		}
	}
	// Each distinct user data runs once; another instance gets its own identity.
	in2 := w.launch(render(t, "Custom", options(seed002v2)), "required")
	r2 := w.b.Boot(context.Background(), in2.ID)
	wantJoin(t, r2, in2, "kubeadm", in2.ID)
	if r2.Join.ProviderID != "aws:///"+in2.Zone+"/"+in2.ID || w.b.Executions() != 1 {
		t.Errorf("second instance: %+v after %d executions", r2.Join, w.b.Executions())
	}
}

func TestAL2BootstrapSh(t *testing.T) {
	needSandbox(t)
	w := newWorld(t)
	o := options("#!/bin/bash\nset -e\nmodprobe br_netfilter\necho 'vm.max_map_count=262144' >> /etc/sysctl.d/99-user.conf\n")
	o.ClusterEndpoint = testEndpoint
	in := w.launch(render(t, "AL2", o), "required")
	r := w.b.Boot(context.Background(), in.ID)
	wantJoin(t, r, in, "bootstrap.sh", in.PrivateDNSName)
	if r.Join.MaxPods != 29 || r.Join.CABundle != testCA {
		t.Errorf("max pods %d CA %q", r.Join.MaxPods, r.Join.CABundle)
	}
	if !slices.ContainsFunc(r.Calls, func(c Call) bool { return c.Name == "modprobe" }) {
		t.Errorf("the class's own part did not run first: %+v", r.Calls)
	}
	// bootstrap.sh's documented options only, values after a space.
	for _, bad := range [][]string{{"c", "--apiserver-endpoint=https://x"}, {"c", "--node-labels", "a=b"}, {"--b64-cluster-ca", "x"}, {"c", "--apiserver-endpoint", "https://x"}} {
		if _, _, err := BootstrapShArgs(bad); err == nil {
			t.Errorf("bootstrap.sh %q accepted", bad)
		}
	}
}

func TestAL2023Nodeadm(t *testing.T) {
	needSandbox(t)
	w := newWorld(t)
	in := w.launch(render(t, "AL2023", options("#!/bin/bash\nsystemctl restart sshd\n")), "required")
	r := w.b.Boot(context.Background(), in.ID)
	wantJoin(t, r, in, "nodeadm", in.PrivateDNSName)
	if r.Join.MaxPods != 29 || r.Join.CABundle != testCA {
		t.Errorf("max pods %d CA %q", r.Join.MaxPods, r.Join.CABundle)
	}
	if !slices.ContainsFunc(r.Calls, func(c Call) bool { return c.Name == "systemctl" && slices.Equal(c.Args, []string{"restart", "sshd"}) }) {
		t.Errorf("the class's shell part did not run: %+v", r.Calls)
	}
	// nodeadm reads its NodeConfig with a token, so required tokens are no obstacle.
	if !slices.ContainsFunc(r.IMDS, func(q awssim.IMDSRequest) bool { return q.Path == "/latest/user-data" && q.Token && q.Status == 200 }) {
		t.Errorf("nodeadm did not read the user data with a token: %+v", r.IMDS)
	}
}

func TestBottlerocketSettings(t *testing.T) {
	w := newWorld(t)
	o := options("[settings.kubernetes]\nallowed-unsafe-sysctls = ['net.core.somaxconn']\n[settings.bootstrap-containers.setup]\nsource = 'public.ecr.aws/example/setup:1'\nmode = 'once'\nessential = true\n")
	in := w.launch(render(t, "Bottlerocket", o), "required")
	r := w.b.Boot(context.Background(), in.ID)
	wantJoin(t, r, in, "bottlerocket", in.PrivateDNSName)
	if r.Join.MaxPods != 29 || r.Join.CABundle != testCA {
		t.Errorf("max pods %d CA %q", r.Join.MaxPods, r.Join.CABundle)
	}
	for ud, want := range map[string]string{
		"[settings.kubernetes]\nmax-pod = 10\n":                                       "settings.kubernetes.max-pod is not a Bottlerocket setting",
		"[settings.kubernetes]\nmax-pods = '10'\n":                                    "settings.kubernetes.max-pods is a string",
		"[settings.kubernetes.node-taints]\ndedicated = ['gpu:Sometimes']\n":          "node-taints",
		"[settings.kubernetes]\n[settings.bootstrap-containers.x]\nmode = 'always'\n": "has no source image",
	} {
		if _, err := CheckBottlerocketSettings(ud); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", ud, err, want)
		}
	}
}
