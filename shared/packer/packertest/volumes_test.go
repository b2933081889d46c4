package packertest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/packer"
)

// TestVolumeTopology: a pod runs only where its PersistentVolumeClaims can be
// attached, as kube-scheduler's VolumeBinding/VolumeZone and Karpenter's volume
// topology decide: a bound volume's node affinity (an EBS volume's zone) or
// legacy zone label, an unbound WaitForFirstConsumer claim's StorageClass
// allowedTopologies, a generic ephemeral volume's template class; a missing,
// deleting or lost claim, or an unbound Immediate one, leaves the pod waiting
// with the claim named.
func TestVolumeTopology(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	immediate := storagev1.VolumeBindingImmediate
	class := func(name string, mode *storagev1.VolumeBindingMode, zones ...string) *storagev1.StorageClass {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: mode}
		if len(zones) > 0 {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: zones}}}}
		}
		return sc
	}
	claim := func(name, volume string, class *string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume, StorageClassName: class}}
	}
	pvIn := func(name, zone string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}}}
	}
	mounting := func(claimName string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}})
		}
	}
	ephemeral := func(class string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}}}}})
		}
	}
	gp3, io2 := "gp3", "io2"
	legacy := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-old", Labels: map[string]string{corev1.LabelFailureDomainBetaZone: "us-east-1c"}}}
	cases := []struct {
		name    string
		vols    *packer.Volumes
		opts    []podOpt
		zone    string // where the pod must land
		unsched string // or why it waits
	}{
		{name: "bound volume's node affinity", vols: &packer.Volumes{Claims: []*corev1.PersistentVolumeClaim{claim("data", "pv-b", &gp3)},
			PersistentVolumes: []*corev1.PersistentVolume{pvIn("pv-b", "us-east-1b")}}, opts: []podOpt{mounting("data")}, zone: "us-east-1b"},
		{name: "bound volume's legacy zone label", vols: &packer.Volumes{Claims: []*corev1.PersistentVolumeClaim{claim("data", "pv-old", nil)},
			PersistentVolumes: []*corev1.PersistentVolume{legacy}}, opts: []podOpt{mounting("data")}, zone: "us-east-1c"},
		{name: "volume and selector agree", vols: &packer.Volumes{Claims: []*corev1.PersistentVolumeClaim{claim("data", "pv-b", &gp3)},
			PersistentVolumes: []*corev1.PersistentVolume{pvIn("pv-b", "us-east-1b")}},
			opts: []podOpt{mounting("data"), withSelector(corev1.LabelArchStable, "amd64")}, zone: "us-east-1b"},
		{name: "volume and selector disagree", vols: &packer.Volumes{Claims: []*corev1.PersistentVolumeClaim{claim("data", "pv-b", &gp3)},
			PersistentVolumes: []*corev1.PersistentVolume{pvIn("pv-b", "us-east-1b")}},
			opts: []podOpt{mounting("data"), withSelector(corev1.LabelTopologyZone, "us-east-1a")}, unsched: "no instance type offering matches"},
		{name: "unbound WaitForFirstConsumer claim's allowed topologies", vols: &packer.Volumes{Claims: []*corev1.PersistentVolumeClaim{claim("data", "", &gp3)},
			StorageClasses: []*storagev1.StorageClass{class("gp3", &wffc, "us-east-1a")}}, opts: []podOpt{mounting("data")}, zone: "us-east-1a"},
		{name: "unbound claim of the default class", vols: &packer.Volumes{Claims: []*corev1.PersistentVolumeClaim{claim("data", "", nil)},
			StorageClasses: []*storagev1.StorageClass{func() *storagev1.StorageClass {
				sc := class("standard", &wffc, "us-east-1c")
				sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
				return sc
			}()}}, opts: []podOpt{mounting("data")}, zone: "us-east-1c"},
		{name: "ephemeral volume's template class", vols: &packer.Volumes{StorageClasses: []*storagev1.StorageClass{class("gp3", &wffc, "us-east-1b")}},
			opts: []podOpt{ephemeral("gp3")}, zone: "us-east-1b"},
		{name: "unbound Immediate claim", vols: &packer.Volumes{Claims: []*corev1.PersistentVolumeClaim{claim("data", "", &io2)},
			StorageClasses: []*storagev1.StorageClass{class("io2", &immediate)}}, opts: []podOpt{mounting("data")},
			unsched: `pod has unbound immediate PersistentVolumeClaims: "data"`},
		{name: "missing claim", vols: &packer.Volumes{}, opts: []podOpt{mounting("data")}, unsched: `persistentvolumeclaim "data" not found`},
		{name: "lost volume", vols: &packer.Volumes{Claims: []*corev1.PersistentVolumeClaim{claim("data", "pv-gone", &gp3)}},
			opts: []podOpt{mounting("data")}, unsched: `bound to persistentvolume "pv-gone", which does not exist (lost)`},
		{name: "missing StorageClass", vols: &packer.Volumes{Claims: []*corev1.PersistentVolumeClaim{claim("data", "", &gp3)}},
			opts: []podOpt{mounting("data")}, unsched: `storageclass "gp3" not found`},
		{name: "volumes not looked at", vols: nil, opts: []podOpt{mounting("data")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot(t, []*corev1.Pod{pod("db-0", "500m", "1Gi", tc.opts...)})
			snap.Volumes = tc.vols
			s := solve(t, snap)
			if tc.unsched != "" {
				if r := s.unschedulable("db-0"); !strings.Contains(r, tc.unsched) {
					t.Fatalf("want db-0 unschedulable saying %q, got %q:%s", tc.unsched, r, s.dump())
				}
				return
			}
			n := s.node("db-0")
			if tc.zone != "" && n.Zone != tc.zone {
				t.Errorf("db-0 in %s, want %s:%s", n.Zone, tc.zone, s.dump())
			}
		})
	}
}
