package nodeadmcheck

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/amazon-eks-ami/nodeadm/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/joiner-autoscaler/joiner/shared/amifamily"
	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/nodeboot"
)

// Test cluster values: nothing here is a real credential.
var (
	testCAPEM    = "-----BEGIN CERTIFICATE-----\nTESTDATA\n-----END CERTIFICATE-----\n"
	testCA       = base64.StdEncoding.EncodeToString([]byte(testCAPEM))
	testEndpoint = "https://ABCDEF0123456789.gr7.us-east-1.eks.amazonaws.com"
)

// decoder decodes as nodeadm's bridge.DecodeNodeConfig does (a scheme holding
// node.eks.aws/v1alpha1, JSON or YAML), strictly: a field nodeadm does not know
// would be silently dropped by nodeadm, so it is an error here.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

func decode(doc string) (*v1alpha1.NodeConfig, error) {
	obj, gvk, err := decoder.Decode([]byte(doc), nil, nil)
	if err != nil {
		return nil, err
	}
	nc, ok := obj.(*v1alpha1.NodeConfig)
	if !ok || gvk.Kind != "NodeConfig" {
		return nil, fmt.Errorf("decoded %s, want NodeConfig", gvk)
	}
	return nc, nil
}

// merge folds the NodeConfig parts in order as nodeadm does (internal/api
// Merge: later values override, kubelet flags append, kubelet config keys merge).
func merge(parts []*v1alpha1.NodeConfig) *v1alpha1.NodeConfig {
	out := &v1alpha1.NodeConfig{}
	for _, p := range parts {
		c, mc := p.Spec.Cluster, &out.Spec.Cluster
		if c.Name != "" {
			mc.Name = c.Name
		}
		if c.APIServerEndpoint != "" {
			mc.APIServerEndpoint = c.APIServerEndpoint
		}
		if c.CertificateAuthority != nil {
			mc.CertificateAuthority = c.CertificateAuthority
		}
		if c.CIDR != "" {
			mc.CIDR = c.CIDR
		}
		out.Spec.Kubelet.Flags = append(out.Spec.Kubelet.Flags, p.Spec.Kubelet.Flags...)
		if out.Spec.Kubelet.Config == nil && p.Spec.Kubelet.Config != nil {
			out.Spec.Kubelet.Config = map[string]runtime.RawExtension{}
		}
		for k, v := range p.Spec.Kubelet.Config {
			out.Spec.Kubelet.Config[k] = v
		}
	}
	return out
}

// validate makes nodeadm's ValidateNodeConfig checks (internal/api/validation.go).
func validate(nc *v1alpha1.NodeConfig) error {
	c := nc.Spec.Cluster
	switch {
	case c.Name == "":
		return fmt.Errorf("Name is missing in cluster configuration")
	case c.APIServerEndpoint == "":
		return fmt.Errorf("Apiserver endpoint is missing in cluster configuration")
	case c.CertificateAuthority == nil:
		return fmt.Errorf("Certificate authority is missing in cluster configuration")
	case c.CIDR == "":
		return fmt.Errorf("CIDR is missing in cluster configuration")
	}
	return nil
}

// nodeConfigs reads the NodeConfig documents of AL2023 user data (a MIME
// multi-part document, as Karpenter writes it) with nodeadm's types.
func nodeConfigs(t *testing.T, userData string) []*v1alpha1.NodeConfig {
	t.Helper()
	parts, err := bootstrap.ParseMIME(userData)
	if err != nil {
		t.Fatalf("not MIME multi-part: %v\n%s", err, userData)
	}
	var out []*v1alpha1.NodeConfig
	for i, p := range parts {
		if p.ContentType() != bootstrap.ContentTypeNodeConfig {
			continue
		}
		nc, err := decode(p.Body)
		if err != nil {
			t.Fatalf("part %d: nodeadm cannot decode it: %v\n%s", i+1, err, p.Body)
		}
		out = append(out, nc)
	}
	if len(out) == 0 {
		t.Fatalf("no NodeConfig part:\n%s", userData)
	}
	return out
}

func options(userData string) bootstrap.Options {
	return bootstrap.Options{
		ClusterName: "technews-karpenter-eks", ClusterEndpoint: testEndpoint, CABundle: testCA, ClusterCIDR: "172.20.0.0/16", MaxPods: 58,
		Labels:   map[string]string{"karpenter.sh/nodepool": "default", "team": "news"},
		Taints:   []corev1.Taint{{Key: "dedicated", Value: "news", Effect: corev1.TaintEffectNoSchedule}},
		UserData: userData,
	}
}

// User data a user may give an AL2023 EC2NodeClass, as Karpenter accepts it: a
// shell script, a NodeConfig of their own, or a MIME document holding both.
var userUserData = map[string]string{
	"none":  "",
	"shell": "#!/bin/bash\necho 'vm.max_map_count=262144' >> /etc/sysctl.d/99-user.conf\n",
	"nodeconfig": `apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      shutdownGracePeriod: 30s
    flags:
      - --node-labels=extra=yes
`,
	"mime": "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\n" +
		"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      imageGCHighThresholdPercent: 80\n" +
		"\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hello\n\n--BOUNDARY--\n",
}

// TestAL2023UserDataDecodesWithNodeadmTypes renders Joiner's AL2023 user data
// with each kind of user data merged in, decodes every NodeConfig part with
// nodeadm's v1alpha1 types and validates the merge as nodeadm does.
func TestAL2023UserDataDecodesWithNodeadmTypes(t *testing.T) {
	fam, err := amifamily.Get("AL2023")
	if err != nil {
		t.Fatal(err)
	}
	for name, ud := range userUserData {
		t.Run(name, func(t *testing.T) {
			out, err := fam.UserData(options(ud))
			if err != nil {
				t.Fatal(err)
			}
			parts := nodeConfigs(t, out)
			nc := merge(parts)
			if err := validate(nc); err != nil {
				t.Fatalf("nodeadm would refuse it: %v\n%s", err, out)
			}
			c := nc.Spec.Cluster
			if c.Name != "technews-karpenter-eks" || c.APIServerEndpoint != testEndpoint || string(c.CertificateAuthority) != testCAPEM || c.CIDR != "172.20.0.0/16" {
				t.Errorf("cluster %+v", c)
			}
			flags := strings.Join(nc.Spec.Kubelet.Flags, " ")
			for _, want := range []string{"karpenter.sh/nodepool=default", "team=news", "--register-with-taints=karpenter.sh/unregistered:NoExecute", "dedicated=news:NoSchedule"} {
				if !strings.Contains(flags, want) {
					t.Errorf("kubelet flags %q lack %q", flags, want)
				}
			}
			if raw, ok := nc.Spec.Kubelet.Config["maxPods"]; !ok || string(raw.Raw) != "58" {
				t.Errorf("kubelet config maxPods %s", raw.Raw)
			}
			switch name {
			case "nodeconfig":
				if !strings.Contains(flags, "--node-labels=extra=yes") || nc.Spec.Kubelet.Config["shutdownGracePeriod"].Raw == nil {
					t.Errorf("the user's NodeConfig was not merged: %+v", nc.Spec.Kubelet)
				}
			case "mime":
				if nc.Spec.Kubelet.Config["imageGCHighThresholdPercent"].Raw == nil || !strings.Contains(out, "echo hello") {
					t.Errorf("the user's MIME parts were not kept:\n%s", out)
				}
			case "shell":
				if !strings.Contains(out, "vm.max_map_count") {
					t.Errorf("the user's script was not kept:\n%s", out)
				}
			}
		})
	}
}

// TestNodeadmRefuses: what nodeadm's decoding and validation refuse, refused here.
func TestNodeadmRefuses(t *testing.T) {
	for doc, want := range map[string]string{
		"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    nmae: x\n":                     "unknown field",
		"apiVersion: node.eks.aws/v1alpha2\nkind: NodeConfig\nspec: {}\n":                                           "no kind",
		"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    certificateAuthority: '%%%'\n": "illegal base64",
	} {
		if _, err := decode(doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
	nc, err := decode("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: c\n    apiServerEndpoint: https://x\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(nc); err == nil || !strings.Contains(err.Error(), "Certificate authority") {
		t.Errorf("validate: %v", err)
	}
}

// TestNodebootAgreesWithNodeadm: the join nodeboot reads from AL2023 user data
// (what the replay registers) is what nodeadm's types say the node joins with.
func TestNodebootAgreesWithNodeadm(t *testing.T) {
	fam, err := amifamily.Get("AL2023")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := awssim.New(awssim.Config{Clock: awssim.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	b := nodeboot.New(sim, nodeboot.Cluster{Endpoint: testEndpoint, CABundle: testCA})
	for i, name := range []string{"none", "nodeconfig"} {
		ud, err := fam.UserData(options(userUserData[name]))
		if err != nil {
			t.Fatal(err)
		}
		in := awssim.Instance{ID: fmt.Sprintf("i-0a1b2c3d4e5f6070%d", i), InstanceType: "m6i.large", Zone: "us-east-1a", PrivateIP: fmt.Sprintf("10.0.1.%d", 10+i),
			UserData: base64.StdEncoding.EncodeToString([]byte(ud)), MetadataOptions: &awssim.MetadataOptions{HTTPTokens: "required", HTTPPutResponseHopLimit: 1}}
		if err := sim.Apply(awssim.Seed{Instances: []awssim.Instance{in}}); err != nil {
			t.Fatal(err)
		}
		got, _ := sim.Instance(in.ID)
		r := b.Boot(context.Background(), in.ID)
		if r.Err != nil {
			t.Fatalf("%s: %v", name, r.Err)
		}
		nc := merge(nodeConfigs(t, ud))
		j := r.Join
		if j.Endpoint != nc.Spec.Cluster.APIServerEndpoint || j.CABundle != base64.StdEncoding.EncodeToString(nc.Spec.Cluster.CertificateAuthority) ||
			j.ProviderID != "aws:///us-east-1a/"+in.ID || j.NodeName != got.PrivateDNSName || j.MaxPods != 58 {
			t.Errorf("%s: join %+v, nodeadm config %+v", name, j, nc.Spec.Cluster)
		}
		for _, f := range nc.Spec.Kubelet.Flags {
			if v, ok := strings.CutPrefix(f, "--node-labels="); ok {
				for _, kv := range strings.Split(v, ",") {
					k, val, _ := strings.Cut(kv, "=")
					if j.Labels[k] != val {
						t.Errorf("%s: label %s=%s not in the join's %v", name, k, val, j.Labels)
					}
				}
			}
		}
		if !slices.ContainsFunc(j.Taints, func(t corev1.Taint) bool {
			return t.Key == "karpenter.sh/unregistered" && t.Effect == corev1.TaintEffectNoExecute
		}) {
			t.Errorf("%s: taints %+v", name, j.Taints)
		}
	}
}
