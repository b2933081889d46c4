package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/check"
)

// planSeed runs `joiner plan -o json` on a seed folder and checks the plan with the
// independent checker against the same snapshot.
func planSeed(t *testing.T, dir string) *packer.Plan {
	t.Helper()
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"plan", "-f", dir, "-o", "json", "--explain"}, &out, &errb); code != 0 {
		t.Fatalf("joiner plan exited %d: %s", code, errb.String())
	}
	var plan packer.Plan
	if err := json.Unmarshal(out.Bytes(), &plan); err != nil {
		t.Fatalf("plan JSON: %v\n%s", err, out.String())
	}
	snap, _, _, err := loadSnapshot([]string{dir}, "", "", &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range check.Plan(snap, &plan, catalog.Embedded()) {
		t.Errorf("checker: %v", e)
	}
	return &plan
}

func TestPlanSeed002CUDAPodLandsOnL4(t *testing.T) {
	plan := planSeed(t, "../../testdata/seeds/002-kubean-filled")
	if len(plan.Unschedulable) != 0 || len(plan.NewNodes) != 1 {
		t.Fatalf("want one new node and nothing unschedulable, got %+v", plan)
	}
	n := plan.NewNodes[0]
	if !strings.HasPrefix(n.InstanceType, "g6.") || n.Labels["karpenter.k8s.aws/instance-gpu-name"] != "l4" {
		t.Errorf("CUDA pod on %s (gpu %q), want a g6 L4 type", n.InstanceType, n.Labels["karpenter.k8s.aws/instance-gpu-name"])
	}
	if n.NodePool != "workload-gpu-l4" || n.Pods[0] != "default/cuda-vectoradd-test" {
		t.Errorf("pool %s pods %v", n.NodePool, n.Pods)
	}
	tainted := false
	for _, tn := range n.Taints {
		tainted = tainted || (tn.Key == "gpu" && tn.Value == "true" && tn.Effect == "NoSchedule")
	}
	if !tainted {
		t.Errorf("GPU node lacks the pool's gpu=true:NoSchedule taint: %+v", n.Taints)
	}
	if n.Labels["node.accelerator"] != "nvidia-gpu" || n.Allocatable["nvidia.com/gpu"] != "1" {
		t.Errorf("labels %v allocatable %v", n.Labels, n.Allocatable)
	}
	// The device plugin DaemonSet lands there (node.accelerator=nvidia-gpu) and takes a pod slot.
	if n.Allocatable["pods"] != "58" {
		t.Errorf("allocatable pods %s, want g6.xlarge's 58", n.Allocatable["pods"])
	}
}

func TestPlanSeed001HeavyAppOnCheapestNodes(t *testing.T) {
	plan := planSeed(t, "../../testdata/seeds/001-heavy-app-fixed")
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %+v", plan.Unschedulable)
	}
	heavy := 0
	cat := catalog.Embedded()
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			if strings.HasPrefix(p, "default/heavy-app-") {
				heavy++
			}
		}
		// Every option fits, and the chosen one is the cheapest spot offering among them.
		for _, o := range n.Options {
			it, ok := cat.Lookup(o)
			if !ok {
				t.Fatalf("option %s not in catalog", o)
			}
			for _, off := range it.Offerings {
				if off.Zone == n.Zone && off.CapacityType == n.CapacityType && off.Available && off.PricePerHour < n.PricePerHour {
					t.Errorf("node %s: option %s costs %.4f < chosen %.4f", n.Name, o, off.PricePerHour, n.PricePerHour)
				}
			}
		}
	}
	if heavy != 5 {
		t.Errorf("%d heavy-app pods placed, want 5", heavy)
	}
	var sum float64
	for _, n := range plan.NewNodes {
		sum += n.PricePerHour
	}
	if d := sum - plan.TotalPricePerHour; d > 1e-9 || d < -1e-9 {
		t.Errorf("total %.6f != sum %.6f", plan.TotalPricePerHour, sum)
	}
}

func TestPlanUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"plan"}, {"plan", "-f", "x", "-o", "yaml"}, {"plan", "-f", "/nonexistent/path"}} {
		var out, errb bytes.Buffer
		if code := dispatch(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"plan", "-f", "../../testdata/seeds/001-heavy-app-fixed", "--region", "eu-west-1"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "eu-west-1") {
		t.Errorf("region mismatch: exit %d, stderr %q", code, errb.String())
	}
}
