package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/manifest"
)

const seedDir = "../../testdata/seeds"

func validateCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = runValidate(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestValidateRegistered(t *testing.T) {
	c, ok := commands.Lookup("validate")
	if !ok || c.Summary == "" {
		t.Fatal("validate is not registered")
	}
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"validate", "-f", filepath.Join(seedDir, "004-fargate-filled")}, &out, &errb); code != 0 {
		t.Errorf("dispatch: exit %d\n%s%s", code, out.String(), errb.String())
	}
}

func TestValidateValidSeeds(t *testing.T) {
	// Two -f paths form one input (one cluster); 004 reuses 001's names, so it is
	// validated on its own.
	code, out, errs := validateCmd("-f", filepath.Join(seedDir, "001-heavy-app-fixed"), "-f", filepath.Join(seedDir, "002-kubean-fixed"))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	want := []string{
		filepath.Join(seedDir, "001-heavy-app-fixed", "heavy-app.yaml") + ": ok: 1 document: 1 Deployment (5 pods)",
		filepath.Join(seedDir, "001-heavy-app-fixed", "nodepool.yaml") + ": ok: 2 documents: 1 NodePool, 1 EC2NodeClass",
		filepath.Join(seedDir, "001-heavy-app-fixed", "s3-reader-pod.yaml") + ": ok: 1 document: 1 Pod",
		filepath.Join(seedDir, "002-kubean-fixed", "cpu-nodeclass-nodepool.yaml") + ": ok: 2 documents: 1 EC2NodeClass, 1 NodePool",
		filepath.Join(seedDir, "002-kubean-fixed", "gpu.yaml") + ": ok: 4 documents: 1 EC2NodeClass, 1 NodePool, 1 DaemonSet, 1 Pod",
	}
	if got := lines(out); !reflect.DeepEqual(got, want) {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	if errs != "" {
		t.Errorf("stderr: %s", errs)
	}
	f := filepath.Join(seedDir, "004-fargate-filled", "nodepool.yaml")
	code, out, _ = validateCmd("-f", f)
	if code != 0 || out != f+": ok: 2 documents: 1 NodePool, 1 EC2NodeClass\n" {
		t.Errorf("004 filled: exit %d\n%s", code, out)
	}
	// The same objects given twice are duplicates: one cluster can't hold both.
	code, out, _ = validateCmd("-f", f, "-f", f)
	if code != 1 || !strings.Contains(out, `duplicate NodePool "default": already defined at `+f+":1") {
		t.Errorf("duplicate input: exit %d\n%s", code, out)
	}
}

func TestValidateSeed001Problems(t *testing.T) {
	code, out, _ := validateCmd("-f", filepath.Join(seedDir, "001-heavy-app"))
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	np := filepath.Join(seedDir, "001-heavy-app", "nodepool.yaml")
	got := lines(out)
	if len(got) != 12 {
		t.Errorf("%d lines, want 12 (one per problem):\n%s", len(got), out)
	}
	for _, prefix := range []string{
		np + ":2: kind: kind AWSNodeClass does not exist; use EC2NodeClass (apiVersion karpenter.k8s.aws/v1)",
		np + ":1: spec.template.spec.requirements[2].key: karpenter.sh/provisioner-name",
		np + ":2: spec.securityGroupSelector: unknown field",
		np + ":2: spec.subnetSelector: unknown field",
		"warning: " + np + ":1: spec.disruption.consolidationPolicy: WhenUnderutilized was renamed",
		"warning: " + np + ":1: spec.disruption.expireAfter: expireAfter moved to spec.template.spec.expireAfter",
	} {
		found := false
		for _, l := range got {
			found = found || strings.HasPrefix(l, prefix)
		}
		if !found {
			t.Errorf("no line starting %q in:\n%s", prefix, out)
		}
	}
	// The eksctl ClusterConfig is skipped, not a problem; no summary lines on failure.
	if strings.Contains(out, "eks-cluster.yaml") || strings.Contains(out, ": ok:") {
		t.Errorf("unexpected lines:\n%s", out)
	}
}

func TestValidatePlaceholderSeeds(t *testing.T) {
	code, out, _ := validateCmd("-f", filepath.Join(seedDir, "004-fargate"))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	f := filepath.Join(seedDir, "004-fargate", "nodepool.yaml")
	want := []string{
		f + ":2: spec.role: unfilled placeholder {{ .Values.nodeRole | quote }}: render the Helm chart (helm template) or write the value",
		f + ":2: spec.securityGroupSelectorTerms[0].tags[karpenter.sh/discovery]: unfilled placeholder {{ .Values.clusterName | quote }}: render the Helm chart (helm template) or write the value",
		f + ":2: spec.subnetSelectorTerms[0].tags[karpenter.sh/discovery]: unfilled placeholder {{ .Values.clusterName | quote }}: render the Helm chart (helm template) or write the value",
		f + `:2: spec.tags.Name: unfilled placeholder {{ printf "%s-karpenter-node" .Values.clusterName | quote }}: render the Helm chart (helm template) or write the value`,
		f + ":2: spec.tags[karpenter.sh/discovery]: unfilled placeholder {{ .Values.clusterName | quote }}: render the Helm chart (helm template) or write the value",
	}
	if got := lines(out); !reflect.DeepEqual(got, want) {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	code, out, _ = validateCmd("-f", filepath.Join(seedDir, "002-kubean"))
	if code != 1 || len(lines(out)) != 15 || strings.Count(out, "unfilled placeholder <") != 15 {
		t.Errorf("002: exit %d, %d lines:\n%s", code, len(lines(out)), out)
	}
}

// TestValidateSeed002IMDSv1 is issue 14's check: seed 002's Custom user data as
// written (placeholders filled) reads instance metadata with a plain curl while
// httpTokens defaults to required, so it never joins: exit 1, naming httpTokens,
// the fix and the trade-off; its literal kubeadm token is a warning naming the
// SSM and Secrets Manager annotations, without repeating the token.
func TestValidateSeed002IMDSv1(t *testing.T) {
	code, out, _ := validateCmd("-f", filepath.Join(seedDir, "002-kubean-filled", "cpu-nodeclass-nodepool.yaml"))
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	got := lines(out)
	if len(got) != 2 {
		t.Fatalf("want one error and one warning:\n%s", out)
	}
	for _, want := range []string{"cpu-nodeclass-nodepool.yaml:1: spec.userData: ", "without an IMDSv2 token at line 3", "httpTokens", "api/token", "httpTokens: optional", "trade-off"} {
		if !strings.Contains(got[0], want) || strings.HasPrefix(got[0], "warning:") {
			t.Errorf("error line lacks %q: %s", want, got[0])
		}
	}
	for _, want := range []string{"warning: ", "spec.userData: line 14 holds a literal kubeadm bootstrap token", "joiner.dev/bootstrap-token-parameter", "joiner.dev/bootstrap-token-secret", "{{ .BootstrapToken }}"} {
		if !strings.Contains(got[1], want) {
			t.Errorf("warning lacks %q: %s", want, got[1])
		}
	}
	if strings.Contains(out, "abcdef.0123456789abcdef") {
		t.Errorf("the output repeats the token:\n%s", out)
	}
	// With httpTokens: optional the reads work: only the warning remains.
	raw, err := os.ReadFile(filepath.Join(seedDir, "002-kubean-filled", "cpu-nodeclass-nodepool.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	optional := strings.Replace(string(raw), "  role: KarpenterNodeRole-kubean-demo\n", "  role: KarpenterNodeRole-kubean-demo\n  metadataOptions:\n    httpTokens: optional\n", 1)
	f := filepath.Join(t.TempDir(), "optional.yaml")
	if err := os.WriteFile(f, []byte(optional), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := validateCmd("-f", f); code != 0 || strings.Contains(out, "httpTokens is required") || !strings.Contains(out, "literal kubeadm bootstrap token") {
		t.Errorf("httpTokens optional: exit %d\n%s", code, out)
	}
}

func TestValidateWarningsDoNotFail(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pool.yaml")
	text := `apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: old}
spec:
  template:
    spec:
      requirements: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]
      nodeClassRef: {name: default}
`
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := validateCmd("-f", p)
	got := lines(out)
	if code != 0 || len(got) != 3 || !strings.HasPrefix(got[0], "warning: "+p+":1: apiVersion: ") ||
		!strings.HasPrefix(got[1], "warning: "+p+":1: spec.template.spec.nodeClassRef: ") || got[2] != p+": ok: 1 document: 1 NodePool (2 warnings)" {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestValidateUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no -f", nil, "-f PATH is required"},
		{"stray argument", []string{"-f", seedDir, "extra"}, `unexpected argument "extra"`},
		{"unknown flag", []string{"-x"}, "flag provided but not defined"},
		{"missing path", []string{"-f", filepath.Join(t.TempDir(), "nope.yaml")}, "no such file"},
		{"empty folder", []string{"-f", t.TempDir()}, "no *.yaml, *.yml or *.json files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := validateCmd(tc.args...)
			if code != 2 || !strings.Contains(errs, tc.want) || out != "" {
				t.Errorf("exit %d stdout %q stderr %q, want exit 2 and %q", code, out, errs, tc.want)
			}
		})
	}
	if code, _, errs := validateCmd("-h"); code != 0 || !strings.Contains(errs, "usage: joiner validate") {
		t.Errorf("-h: exit %d %s", code, errs)
	}
}

func TestSummaryLine(t *testing.T) {
	f := manifest.FileSummary{File: "x.yaml", Documents: 5, Kinds: []manifest.KindCount{
		{Kind: "EC2NodeClass", Count: 2}, {Kind: "Pod", Count: 1}, {Kind: "Job", Count: 2, Pods: 0}, {Kind: "Deployment", Count: 1, Pods: 3},
	}, Skipped: 1, Warnings: 2}
	want := "x.yaml: ok: 5 documents: 2 EC2NodeClasses, 1 Pod, 2 Jobs (0 pods), 1 Deployment (3 pods), 1 skipped (2 warnings)"
	if got := summaryLine(f, nil); got != want {
		t.Errorf("summaryLine =\n%s\nwant\n%s", got, want)
	}
}
