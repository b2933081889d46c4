package handlers

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/cloud"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/kube"
	"github.com/joiner-autoscaler/joiner/shared/kube/kubetest"
)

// TestConsolidatorWritesNodeClassStatusAndDriftsOnResolvedAMIs: on the real API
// server, a class carrying the status another controller left (Karpenter's last
// status.amis, which names none of the images Joiner launches) is re-resolved
// before drift is judged: the node Joiner launched is not drifted, the status is
// rewritten as Karpenter writes it (amis, subnets, security groups, instance
// profile, conditions with Ready) and kubectl shows READY True. Once a new AMI is
// released behind the alias, the same node is drifted.
func TestConsolidatorWritesNodeClassStatusAndDriftsOnResolvedAMIs(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	stale := `{"status":{"amis":[{"id":"ami-0karpenterstale1","name":"karpenter-last","requirements":[{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]}]}],` +
		`"instanceProfile":"karpenter-made","conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"},` +
		`{"type":"ValidationSucceeded","status":"True","reason":"ValidationSucceeded","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	if _, err := w.clients.Dynamic.Resource(kube.NodeClassGVR).Patch(ctx, "default", types.MergePatchType, []byte(stale), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	w.pending(t, "app", 1, "1")
	if s := invoke(t, w.function(t, Provisioner), "../../events/scheduled-rule.json"); len(s.NodesLaunched) != 1 {
		t.Fatalf("provisioner: %+v", s)
	}
	nodes := w.register(t)
	if len(nodes) != 1 {
		t.Fatalf("registered %v", nodes)
	}
	inst, _ := w.sim.Instance(nodes[0])

	s := invoke(t, w.function(t, Consolidator), "../../events/scheduler.json")
	if len(s.NodesTerminated) != 0 || strings.Contains(s.Action, "Drifted") {
		t.Fatalf("a node launched from the alias's current image was disrupted on another controller's status.amis: %+v", s)
	}
	nc := w.nodeClass(t)
	ids := make([]string, 0, len(nc.Status.AMIs))
	for _, a := range nc.Status.AMIs {
		ids = append(ids, a.ID)
		if len(a.Requirements) == 0 {
			t.Errorf("status.amis %s has no requirements", a.ID)
		}
	}
	if !slices.Contains(ids, inst.ImageID) || slices.Contains(ids, "ami-0karpenterstale1") {
		t.Errorf("status.amis %v: want the alias's images (the node's %s among them) and not the stale one", ids, inst.ImageID)
	}
	if want := cloud.InstanceProfileName("e2e", "us-east-1", "default"); nc.Status.InstanceProfile != want {
		t.Errorf("status.instanceProfile %q, want %q", nc.Status.InstanceProfile, want)
	}
	if len(nc.Status.Subnets) == 0 || len(nc.Status.SecurityGroups) == 0 || nc.Status.Subnets[0].Zone == "" {
		t.Errorf("status subnets %+v security groups %+v", nc.Status.Subnets, nc.Status.SecurityGroups)
	}
	types := map[string]metav1.Condition{}
	for _, c := range nc.Status.Conditions {
		types[c.Type] = c
		if c.ObservedGeneration != nc.Generation || c.LastTransitionTime.IsZero() {
			t.Errorf("condition %s: observedGeneration %d (generation %d), lastTransitionTime %v", c.Type, c.ObservedGeneration, nc.Generation, c.LastTransitionTime)
		}
	}
	for _, want := range []string{cloud.ConditionSubnetsReady, cloud.ConditionSecurityGroupsReady, cloud.ConditionAMIsReady, cloud.ConditionInstanceProfileReady, karpenter.ConditionReady} {
		if types[want].Status != metav1.ConditionTrue {
			t.Errorf("condition %s = %+v, want True", want, types[want])
		}
	}
	if _, ok := types["ValidationSucceeded"]; ok {
		t.Errorf("another controller's condition survived: %+v", nc.Status.Conditions)
	}
	if ready := types[karpenter.ConditionReady].LastTransitionTime; !ready.Equal(&metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}) {
		t.Errorf("Ready stayed True but its lastTransitionTime moved to %v", ready)
	}
	out, err := kubetest.Shared(t).Kubectl("get", "ec2nodeclasses")
	if err != nil {
		t.Fatalf("kubectl get ec2nodeclasses: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0])[:2], " ") != "NAME READY" || strings.Join(strings.Fields(lines[1])[:2], " ") != "default True" {
		t.Errorf("kubectl get ec2nodeclasses:\n%s", out)
	}
	rv := nc.ResourceVersion
	invoke(t, w.function(t, Consolidator), "../../events/scheduler.json")
	if again := w.nodeClass(t); again.ResourceVersion != rv {
		t.Errorf("an unchanged status was written again (resourceVersion %s → %s)", rv, again.ResourceVersion)
	}

	// A new AL2023 release: the node's image is no longer among the class's AMIs.
	if _, err := w.sim.ReleaseFamily("al2023", awssim.DefaultKubernetesVersions[len(awssim.DefaultKubernetesVersions)-1], "v20270101"); err != nil {
		t.Fatal(err)
	}
	dry := w.dryRunConsolidator(t)
	raw, _ := os.ReadFile("../../events/scheduler.json")
	out2, err := dry.Invoke(ctx, []byte(strings.Replace(string(raw), `"id": "`, `"id": "release-`, 1)))
	if err != nil {
		t.Fatalf("consolidator: %v", err)
	}
	var s2 Summary
	_ = json.Unmarshal(out2, &s2)
	// The test's pod is not bound, so the node is empty: deleted rather than replaced.
	if !strings.Contains(s2.Action, "would delete "+nodes[0]+" (Drifted") {
		t.Errorf("after the release: %q, want %s disrupted as Drifted", s2.Action, nodes[0])
	}
}

// nodeClass reads the EC2NodeClass "default" from the API server.
func (w *world) nodeClass(t *testing.T) *karpenter.EC2NodeClass {
	t.Helper()
	u, err := w.clients.Dynamic.Resource(kube.NodeClassGVR).Get(context.Background(), "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := kube.NodeClassFromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// dryRunConsolidator decides without writing: the decision is visible in the summary.
func (w *world) dryRunConsolidator(t *testing.T) *Function {
	t.Helper()
	cfg := Config{ClusterName: "e2e", Region: "us-east-1", Rebalance: RebalanceIgnore, LeaseDuration: time.Minute, LeaseWait: time.Second,
		MinSavingsFraction: 0.1, DryRun: true}
	fn, err := NewFunction(Consolidator, func(ctx context.Context) (*Deps, error) {
		prov, err := cloud.New(cloud.Config{ClusterName: "e2e", Region: "us-east-1", Unavailable: cloud.NewUnavailableOfferings(time.Now), DryRun: true}, w.cloud)
		if err != nil {
			return nil, err
		}
		return &Deps{Config: cfg, Cloud: prov, Identity: "consolidator/dry",
			Cluster: kube.New(w.clients, kube.Options{ClusterName: "e2e", Identity: "consolidator/dry"})}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fn.MetricsOut = &strings.Builder{}
	return fn
}
