package packertest

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
	"github.com/joiner-autoscaler/joiner/shared/packer"
	"github.com/joiner-autoscaler/joiner/shared/packer/workload"
)

// allowed is the In values of a node's requirement on key.
func allowed(n *packer.NewNode, key string) []string {
	for _, r := range n.Requirements {
		if r.Key == key && r.Operator == corev1.NodeSelectorOpIn {
			return r.Values
		}
	}
	return nil
}

// TestLaunchFallbackOfferings: a new node's requirements carry every zone and
// capacity type its launch may fall back to when EC2 has no capacity for the
// plan's choice (which stays NewNode.Zone and CapacityType, and among them):
// every zone its pods and pool allow, and on-demand beside spot, as a
// Karpenter NodeClaim's requirements do. What the plan counted in the chosen
// domain pins it: zone-level spread or pod (anti-)affinity (also on the zone
// ID, and of a pod another pod's term counts), a bound zonal volume, a spread
// on the capacity type; a pod's node selection narrows the sets.
func TestLaunchFallbackOfferings(t *testing.T) {
	all := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	both := []string{"spot", "on-demand"}
	withZoneIDs := func(snap *packer.Snapshot) {
		nc := *snap.NodeClasses[0]
		for i, z := range all {
			nc.Status.Subnets = append(nc.Status.Subnets, karpenter.Subnet{ID: "subnet-" + z, Zone: z, ZoneID: []string{"use1-az1", "use1-az2", "use1-az4"}[i]})
		}
		snap.NodeClasses[0] = &nc
	}
	cases := []struct {
		name      string
		pods      []*corev1.Pod
		pools     []*karpenter.NodePool
		edit      func(*packer.Snapshot)
		zones     []string // nil: the node's own zone only
		capacity  []string
		checkPods []string // pods whose nodes are judged (default p-0)
	}{
		{name: "free pods", pods: pods("p", 2, "500m", "1Gi"), zones: all, capacity: both},
		{name: "zone spread pins the zone, not the capacity type",
			pods:     pods("p", 3, "1500m", "1Gi", withLabel("app", "web"), spreadOn(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, "web")),
			capacity: both, checkPods: []string{"p-0", "p-1", "p-2"}},
		{name: "a preferred zone spread pins it too, as Karpenter's kept preference does",
			pods:     pods("p", 3, "1500m", "1Gi", withLabel("app", "web"), spreadOn(corev1.LabelTopologyZone, 1, corev1.ScheduleAnyway, "web")),
			capacity: both},
		{name: "zone anti-affinity pins its owner and the pods it counts",
			pods: append(pods("p", 1, "1500m", "1Gi", withLabel("app", "a"), podAntiAffinity(corev1.LabelTopologyZone, "b")),
				pods("q", 1, "1500m", "1Gi", withLabel("app", "b"))...),
			capacity: both, checkPods: []string{"p-0", "q-0"}},
		{name: "zone-ID spread pins the zone", edit: withZoneIDs,
			pods:     pods("p", 3, "1500m", "1Gi", withLabel("app", "web"), spreadOn(karpenter.LabelTopologyZoneID, 1, corev1.DoNotSchedule, "web")),
			capacity: both},
		{name: "zone selection narrows the zones",
			pods:  pods("p", 1, "500m", "1Gi", requiredNodeAffinity(nodeTerm(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1c"))),
			zones: []string{"us-east-1a", "us-east-1c"}, capacity: both},
		{name: "zone-ID selection narrows the zones", edit: withZoneIDs,
			pods:  pods("p", 1, "500m", "1Gi", requiredNodeAffinity(nodeTerm(karpenter.LabelTopologyZoneID, corev1.NodeSelectorOpNotIn, "use1-az2"))),
			zones: []string{"us-east-1a", "us-east-1c"}, capacity: both},
		{name: "the class's subnets bound the zones",
			edit: func(snap *packer.Snapshot) {
				nc := *snap.NodeClasses[0]
				nc.Status.Subnets = []karpenter.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}, {ID: "subnet-b", Zone: "us-east-1b"}}
				snap.NodeClasses[0] = &nc
			},
			pods:  pods("p", 1, "500m", "1Gi"),
			zones: []string{"us-east-1a", "us-east-1b"}, capacity: both},
		{name: "a pod asking for spot keeps the node spot", pods: pods("p", 1, "500m", "1Gi", withSelector(karpenter.CapacityTypeLabelKey, "spot")),
			zones: all, capacity: []string{"spot"}},
		{name: "capacity-type spread pins the capacity type",
			pods:  pods("p", 2, "1500m", "1Gi", withLabel("app", "web"), spreadOn(karpenter.CapacityTypeLabelKey, 1, corev1.DoNotSchedule, "web")),
			zones: all, capacity: []string{"spot"}},
		{name: "an on-demand pool", pools: []*karpenter.NodePool{poolOf("default", 0, workload.Req(karpenter.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"))},
			pods:  pods("p", 1, "500m", "1Gi"),
			zones: all, capacity: []string{"on-demand"}},
		{name: "a bound zonal volume pins the zone", pods: pods("p", 1, "500m", "1Gi", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		}), edit: func(snap *packer.Snapshot) {
			snap.Volumes = &packer.Volumes{
				Claims: []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
					Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-b"}}},
				PersistentVolumes: []*corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv-b"}, Spec: corev1.PersistentVolumeSpec{
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
						nodeTerm(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b")}}}}}}}
		}, zones: []string{"us-east-1b"}, capacity: both},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot(t, tc.pods, tc.pools...)
			if tc.edit != nil {
				tc.edit(snap)
			}
			s := solve(t, snap)
			check := tc.checkPods
			if check == nil {
				check = []string{"p-0"}
			}
			for _, name := range check {
				n := s.node(name)
				want := tc.zones
				if want == nil {
					want = []string{n.Zone}
				}
				if got := allowed(n, corev1.LabelTopologyZone); !slices.Equal(got, want) || !slices.Contains(got, n.Zone) {
					t.Errorf("pod %s's node %s (planned in %s): zones %v, want %v%s", name, n.Name, n.Zone, got, want, s.dump())
				}
				if got := allowed(n, karpenter.CapacityTypeLabelKey); !slices.Equal(got, tc.capacity) || got[0] != n.CapacityType {
					t.Errorf("pod %s's node %s (planned %s): capacity types %v, want %v", name, n.Name, n.CapacityType, got, tc.capacity)
				}
			}
		})
	}
}
