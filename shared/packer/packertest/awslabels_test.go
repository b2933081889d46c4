package packertest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// classWithZoneIDs is the default EC2NodeClass with a resolved status naming
// the zone IDs of us-east-1a and us-east-1b (not 1c: no subnet there).
func classWithZoneIDs() *karpenter.EC2NodeClass {
	nc := workload.DefaultNodeClass()
	nc.Status.Subnets = []karpenter.Subnet{
		{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az4"},
		{ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az6"},
	}
	return nc
}

// TestAWSNodeLabels: the labels Karpenter's AWS provider derives from the
// EC2NodeClass and the launch, not the instance type. topology.k8s.aws/zone-id
// comes from status.subnets[].zoneID and is selected, required and spread on
// like the zone; karpenter.k8s.aws/instance-tenancy is default on every node;
// what Joiner cannot launch (dedicated tenancy, placement groups, a zone ID the
// class's status does not name) fails with a reason naming the key.
func TestAWSNodeLabels(t *testing.T) {
	zoneIDReq := workload.Req(karpenter.LabelTopologyZoneID, corev1.NodeSelectorOpIn, "use1-az6")
	cases := []struct {
		name    string
		pool    *karpenter.NodePool
		class   *karpenter.EC2NodeClass
		pods    []*corev1.Pod
		zone    string // every placed pod's node zone, when set
		labels  map[string]string
		unsched string // every pod unschedulable, the reason containing this
	}{
		{name: "zone-id label from status.subnets", class: classWithZoneIDs(),
			pods:   []*corev1.Pod{pod("a", "500m", "1Gi", withSelector(corev1.LabelTopologyZone, "us-east-1a"))},
			labels: map[string]string{karpenter.LabelTopologyZoneID: "use1-az4", karpenter.LabelInstanceTenancy: "default"}},
		{name: "pod selects a zone ID", class: classWithZoneIDs(),
			pods: []*corev1.Pod{pod("a", "500m", "1Gi", withSelector(karpenter.LabelTopologyZoneID, "use1-az6"))},
			zone: "us-east-1b", labels: map[string]string{karpenter.LabelTopologyZoneID: "use1-az6"}},
		{name: "pool requires a zone ID", class: classWithZoneIDs(), pool: poolOf("default", 0, bothCapacityTypes(), zoneIDReq),
			pods: []*corev1.Pod{pod("a", "500m", "1Gi")}, zone: "us-east-1b"},
		{name: "zone ID of a zone without a subnet", class: classWithZoneIDs(),
			pods: []*corev1.Pod{pod("a", "500m", "1Gi", withSelector(corev1.LabelTopologyZone, "us-east-1c"))},
			zone: "us-east-1c", labels: map[string]string{karpenter.LabelTopologyZoneID: ""}},
		{name: "zone ID the status does not name", class: workload.DefaultNodeClass(),
			pods:    []*corev1.Pod{pod("a", "500m", "1Gi", withSelector(karpenter.LabelTopologyZoneID, "use1-az6"))},
			unsched: "status.subnets name no zone IDs"},
		{name: "spread over zone IDs", class: classWithZoneIDs(),
			pool: poolOf("default", 0, bothCapacityTypes(), workload.Req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b")),
			pods: pods("s", 4, "500m", "1Gi", withLabel("app", "s"), spreadOn(karpenter.LabelTopologyZoneID, 1, corev1.DoNotSchedule, "s"))},
		{name: "default tenancy asked", pods: []*corev1.Pod{pod("a", "500m", "1Gi", withSelector(karpenter.LabelInstanceTenancy, "default"))},
			labels: map[string]string{karpenter.LabelInstanceTenancy: "default"}},
		{name: "dedicated tenancy asked by a pod", pods: []*corev1.Pod{pod("a", "500m", "1Gi", withSelector(karpenter.LabelInstanceTenancy, "dedicated"))},
			unsched: "karpenter.k8s.aws/instance-tenancy In [dedicated]: Joiner launches default-tenancy instances only"},
		{name: "dedicated tenancy required by the pool",
			pool:    poolOf("default", 0, bothCapacityTypes(), workload.Req(karpenter.LabelInstanceTenancy, corev1.NodeSelectorOpIn, "dedicated")),
			pods:    []*corev1.Pod{pod("a", "500m", "1Gi")},
			unsched: "requires karpenter.k8s.aws/instance-tenancy In [dedicated]"},
		{name: "placement group required by the pool",
			pool:    poolOf("default", 0, bothCapacityTypes(), workload.Req(karpenter.LabelPlacementGroupID, corev1.NodeSelectorOpExists)),
			pods:    []*corev1.Pod{pod("a", "500m", "1Gi")},
			unsched: "karpenter.k8s.aws/placement-group-id Exists []: Joiner launches into no placement group"},
		{name: "placement group excluded by the pool is fine",
			pool: poolOf("default", 0, bothCapacityTypes(), workload.Req(karpenter.LabelPlacementGroupID, corev1.NodeSelectorOpDoesNotExist)),
			pods: []*corev1.Pod{pod("a", "500m", "1Gi")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pools []*karpenter.NodePool
			if tc.pool != nil {
				pools = append(pools, tc.pool)
			}
			snap := snapshot(t, tc.pods, pools...)
			if tc.class != nil {
				snap.NodeClasses = []*karpenter.EC2NodeClass{tc.class}
			}
			s := solve(t, snap)
			if tc.unsched != "" {
				if len(s.plan.Unschedulable) != len(tc.pods) {
					t.Fatalf("want every pod unschedulable, plan: %s", s.dump())
				}
				for _, u := range s.plan.Unschedulable {
					if !strings.Contains(u.Reason, tc.unsched) {
						t.Errorf("%s: reason %q does not say %q", u.Pod, u.Reason, tc.unsched)
					}
				}
				return
			}
			if len(s.plan.Unschedulable) > 0 {
				t.Fatalf("unschedulable: %+v", s.plan.Unschedulable)
			}
			zoneIDs := map[string]int{}
			for _, p := range tc.pods {
				n := s.node(p.Name)
				if tc.zone != "" && n.Zone != tc.zone {
					t.Errorf("%s on zone %s, want %s", p.Name, n.Zone, tc.zone)
				}
				for k, want := range tc.labels {
					if got := n.Labels[k]; got != want {
						t.Errorf("%s: node label %s=%q, want %q", p.Name, k, got, want)
					}
				}
				zoneIDs[n.Labels[karpenter.LabelTopologyZoneID]]++
			}
			if tc.name == "spread over zone IDs" && (zoneIDs["use1-az4"] != 2 || zoneIDs["use1-az6"] != 2) {
				t.Errorf("want 2 pods per zone ID, got %v", zoneIDs)
			}
		})
	}
}
