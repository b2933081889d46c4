package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

// TestReplayKubeconfig runs `joiner replay 004-nodeless --kubeconfig FILE` against a
// real kube-apiserver: every expectation met (exit 0), the steps and summary printed,
// nothing left behind; and a cluster with a Node it did not create is refused
// (exit 1, naming the problem) unless --force.
func TestReplayKubeconfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real kube-apiserver")
	}
	env := kubetest.Shared(t)
	ctx := context.Background()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kubetest.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	// The flag's wiring is what this test is for; shared/replay's TestScenariosRealAPIServer
	// replays whole scenarios against the real server, so three simulated minutes of seed
	// 004's bootstrap are enough here.
	dir := shortNodeless(t)
	var stdout, stderr bytes.Buffer
	code := runReplay(ctx, []string{"short", "--dir", dir, "--kubeconfig", kubeconfig}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	// The summary's columns widen with its longest label: compare with runs of
	// spaces collapsed.
	out := strings.Join(strings.Fields(stdout.String()), " ")
	for _, want := range []string{"kubelet 1 node(s) registered", "expectations 3 of 3 met", "pods placed 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 0 {
		t.Errorf("%d node(s) left behind", len(nodes.Items))
	}

	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-ours"}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), other.Name, metav1.DeleteOptions{}) }()
	stdout.Reset()
	stderr.Reset()
	code = runReplay(ctx, []string{"short", "--dir", dir, "--kubeconfig", kubeconfig, "-q"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "not empty: it has 1 nodes") || !strings.Contains(stderr.String(), "--force") {
		t.Errorf("non-scratch cluster: exit %d, stderr %q", code, stderr.String())
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, other.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the refused replay touched a node it did not create: %v", err)
	}
}

// shortNodeless writes a scenario folder "short": seed 004's nodeless cluster for three
// simulated minutes, in which the sweep brings the first node for CoreDNS and the forwarder.
func shortNodeless(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	sc := fmt.Sprintf(`description: seed 004's nodeless bootstrap, three minutes
cluster: eks-demo
duration: 3m
manifests:
  - %s
  - %s
settings:
  forwarder: false
expect:
  - allPodsRunning: true
  - noOrphans: true
  - errors: {max: 0}
`, abs("../../testdata/seeds/004-fargate-filled"), abs("../../testdata/scenarios/004-nodeless/pending.yaml"))
	if err := os.MkdirAll(filepath.Join(root, "short"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "short", "scenario.yaml"), []byte(sc), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}
