package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// A training pool allowing only reserved capacity, on a class whose status lists
// a p5 reservation, and three 8-GPU trainers.
const reservedManifests = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: training
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-demo
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  capacityReservationSelectorTerms: [{tags: {purpose: training}}]
status:
  capacityReservations:
    - {id: cr-0a1b2c3d4e5f60718, instanceType: p5.48xlarge, availabilityZone: us-east-1b, ownerID: "123456789012", instanceMatchCriteria: targeted, reservationType: default, state: active}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: training
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: training}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [reserved]}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer
  namespace: default
spec:
  replicas: 3
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec:
      containers:
        - name: trainer
          image: trainer
          resources:
            requests: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "8"}
            limits: {nvidia.com/gpu: "8"}
`

// TestPlanOfflineReservations: joiner plan takes a reservation's available
// count from --reservation (offline nothing else knows it; the class's status
// names the reservation): with 2, two trainers are planned into it and the
// third waits saying the reservation is full; without a count the reservation
// is planned as full, said on stderr; a count for a reservation no class lists
// is a usage error.
func TestPlanOfflineReservations(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "training.yaml"), []byte(reservedManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, *packer.Plan, string) {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), append([]string{"plan", "-f", dir, "-o", "json"}, args...), &out, &errb)
		var plan packer.Plan
		if code == 0 {
			if err := json.Unmarshal(out.Bytes(), &plan); err != nil {
				t.Fatalf("plan JSON: %v\n%s", err, out.String())
			}
		}
		return code, &plan, errb.String()
	}
	code, plan, stderr := run("--reservation", "cr-0a1b2c3d4e5f60718=2")
	if code != 0 || len(plan.NewNodes) != 2 || len(plan.Unschedulable) != 1 {
		t.Fatalf("exit %d, plan %+v, stderr %s: want 2 reserved nodes and 1 pod waiting", code, plan, stderr)
	}
	for _, n := range plan.NewNodes {
		if n.CapacityType != "reserved" || n.CapacityReservationID != "cr-0a1b2c3d4e5f60718" || n.InstanceType != "p5.48xlarge" || n.Zone != "us-east-1b" {
			t.Errorf("node %+v: want reserved p5.48xlarge in us-east-1b in the reservation", n)
		}
	}
	if why := plan.Unschedulable[0].Reason; !strings.Contains(why, "capacity reservations that would hold it are full") {
		t.Errorf("reason %q", why)
	}
	code, plan, stderr = run()
	if code != 0 || len(plan.NewNodes) != 0 || !strings.Contains(stderr, "has no available count here; planned as full (pass --reservation cr-0a1b2c3d4e5f60718=N)") {
		t.Errorf("no count: exit %d, %d node(s), stderr %q", code, len(plan.NewNodes), stderr)
	}
	for _, bad := range []string{"cr-0ffffffffffffffff=1", "cr-0a1b2c3d4e5f60718=-1", "p5=2", "cr-0a1b2c3d4e5f60718"} {
		if code, _, stderr := run("--reservation", bad); code != 2 || stderr == "" {
			t.Errorf("--reservation %s: exit %d (%s), want 2 with a message", bad, code, stderr)
		}
	}
}

// TestValidateReservedOnlyPoolWithoutReservations: a pool that allows only
// reserved capacity on a class selecting no reservation can launch nothing:
// validate warns, naming the fix; with the class's terms it says nothing.
func TestValidateReservedOnlyPoolWithoutReservations(t *testing.T) {
	validate := func(manifests string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "training.yaml"), []byte(manifests), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		dispatch(context.Background(), []string{"validate", "-f", dir}, &out, &errb)
		return out.String() + errb.String()
	}
	const warning = `spec.template.spec.requirements: the pool allows only reserved capacity (karpenter.sh/capacity-type In [reserved]), but EC2NodeClass "training" selects no capacity reservation`
	if got := validate(reservedManifests); strings.Contains(got, warning) {
		t.Errorf("the class selects reservations, yet: %s", got)
	}
	without := strings.Replace(reservedManifests, "  capacityReservationSelectorTerms: [{tags: {purpose: training}}]\n", "", 1)
	if got := validate(without); !strings.Contains(got, warning) || !strings.Contains(got, "or allow on-demand") {
		t.Errorf("want the warning %q, got:\n%s", warning, got)
	}
}
