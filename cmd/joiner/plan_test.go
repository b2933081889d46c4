package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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

// inFlightManifests is seed 001's pool, a pending pod asking for 1 CPU, and a
// NodeClaim for an m5.large whose Node, when registered, is still starting: tainted
// node.kubernetes.io/not-ready and the pool's startup taint, not yet initialized.
func inFlightManifests(t *testing.T, registered, deleting bool) string {
	t.Helper()
	dir := t.TempDir()
	pool, err := os.ReadFile("../../testdata/seeds/001-heavy-app-fixed/nodepool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	deletion := ""
	if deleting {
		deletion = "\n  deletionTimestamp: \"2026-01-01T00:00:00Z\"\n  finalizers: [karpenter.sh/termination]"
	}
	docs := `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: app, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abcde
  labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.large, topology.kubernetes.io/zone: us-east-1a, karpenter.sh/capacity-type: on-demand, kubernetes.io/arch: amd64}` + deletion + `
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  startupTaints: [{key: example.com/agent-not-ready, effect: NoSchedule}]
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
status:
  providerID: aws:///us-east-1a/i-0123456789abcdef0
  nodeName: ip-10-0-1-1.ec2.internal
  capacity: {cpu: "2", memory: 7910Mi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7220Mi, pods: "29"}
  conditions:
  - {type: Launched, status: "True", reason: Launched, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
  - {type: Initialized, status: Unknown, reason: NotInitialized, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
`
	if registered {
		docs += `---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-1.ec2.internal
  labels: {karpenter.sh/nodepool: default, karpenter.sh/registered: "true", node.kubernetes.io/instance-type: m5.large, topology.kubernetes.io/zone: us-east-1a, karpenter.sh/capacity-type: on-demand, kubernetes.io/arch: amd64, kubernetes.io/os: linux, kubernetes.io/hostname: ip-10-0-1-1.ec2.internal}
spec:
  providerID: aws:///us-east-1a/i-0123456789abcdef0
  taints:
  - {key: node.kubernetes.io/not-ready, effect: NoSchedule}
  - {key: example.com/agent-not-ready, effect: NoSchedule}
status:
  capacity: {cpu: "2", memory: 7910Mi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7220Mi, pods: "29"}
`
	}
	if err := os.WriteFile(filepath.Join(dir, "nodepool.yaml"), pool, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// joiner plan reads a cluster's NodeClaims as the functions do (kube.Assemble), as
// Karpenter's scheduler counts them (scheduling suite_test.go: "should assume pod
// will schedule to a tainted node with a custom startup taint", "should assume pod
// will schedule to a node with ephemeral taint node.kubernetes.io/not-ready:NoExecute
// when the node is uninitialized", "should launch a second node if an in-flight
// node is terminating").
func TestPlanInFlightNodeClaims(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		registered, deleting bool
		inFlight             bool // the pod goes to the claim, else to a new node
	}{
		{"launched, not registered", false, false, true},
		{"registered, startup and not-ready taints", true, false, true},
		{"deleting, not registered", false, true, false},
		{"deleting, registered", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planSeed(t, inFlightManifests(t, tc.registered, tc.deleting))
			onClaim := len(plan.ExistingNodes) == 1 && len(plan.ExistingNodes[0].Pods) == 1
			if onClaim != tc.inFlight || (tc.inFlight && len(plan.NewNodes) != 0) || (!tc.inFlight && len(plan.NewNodes) != 1) {
				t.Errorf("want the pod on the in-flight claim: %v; got existing %+v, new %d, unschedulable %+v",
					tc.inFlight, plan.ExistingNodes, len(plan.NewNodes), plan.Unschedulable)
			}
		})
	}
}

// TestPlanVolumeTopology: joiner plan reads claims, volumes and classes from the
// manifests: a pod whose claim is bound to a volume in us-east-1c gets a node
// there; a pod whose claim is missing is unschedulable, the claim named.
func TestPlanVolumeTopology(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(volumeManifests), 0o600); err != nil {
		t.Fatal(err)
	}
	plan := planSeed(t, dir)
	if len(plan.NewNodes) != 1 || plan.NewNodes[0].Zone != "us-east-1c" || len(plan.NewNodes[0].Pods) != 1 || plan.NewNodes[0].Pods[0] != "default/db" {
		t.Errorf("want db on one new node in us-east-1c, got %+v", plan.NewNodes)
	}
	if len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod != "default/lonely" ||
		!strings.Contains(plan.Unschedulable[0].Reason, `persistentvolumeclaim "nowhere" not found`) {
		t.Errorf("want lonely unschedulable naming its claim, got %+v", plan.Unschedulable)
	}
}

const volumeManifests = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {storageClassName: gp3, volumeName: pv-1, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1c]}]
---
apiVersion: v1
kind: Pod
metadata: {name: db}
spec:
  containers: [{name: db, image: postgres, resources: {requests: {cpu: "1", memory: 2Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
---
apiVersion: v1
kind: Pod
metadata: {name: lonely}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: nowhere}}]
`
