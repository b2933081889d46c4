package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func TestNodeClassHash(t *testing.T) {
	base := testClass()
	h := NodeClassHash(base)
	if len(h) != 16 || h != NodeClassHash(testClass()) {
		t.Fatalf("hash %q is not stable", h)
	}
	same := []func(*karpenter.EC2NodeClass){
		func(nc *karpenter.EC2NodeClass) { nc.Spec.Tags = map[string]string{} },              // empty == unset
		func(nc *karpenter.EC2NodeClass) { nc.Status.AMIs = []karpenter.AMI{{ID: "ami-1"}} }, // status is not spec
		func(nc *karpenter.EC2NodeClass) {
			nc.Spec.CapacityReservationSelectorTerms = []karpenter.CapacityReservationSelectorTerm{{ID: "cr-1"}}
		},
		func(nc *karpenter.EC2NodeClass) { nc.Labels = map[string]string{"x": "y"} },
	}
	for i, f := range same {
		nc := testClass()
		f(nc)
		if got := NodeClassHash(nc); got != h {
			t.Errorf("change %d altered the hash", i)
		}
	}
	size := resource.MustParse("100Gi")
	two := int64(2)
	differ := map[string]func(*karpenter.EC2NodeClass){
		"amiSelectorTerms": func(nc *karpenter.EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Alias = "al2023@v20250601" },
		"amiFamily":        func(nc *karpenter.EC2NodeClass) { f := "Bottlerocket"; nc.Spec.AMIFamily = &f },
		"userData":         func(nc *karpenter.EC2NodeClass) { u := "#!/bin/bash"; nc.Spec.UserData = &u },
		"role":             func(nc *karpenter.EC2NodeClass) { nc.Spec.Role = "other" },
		"instanceProfile":  func(nc *karpenter.EC2NodeClass) { p := "prof"; nc.Spec.InstanceProfile = &p },
		"subnets": func(nc *karpenter.EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []karpenter.SubnetSelectorTerm{{ID: "subnet-1"}}
		},
		"securityGroups": func(nc *karpenter.EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []karpenter.SecurityGroupSelectorTerm{{Name: "sg"}}
		},
		"tags": func(nc *karpenter.EC2NodeClass) { nc.Spec.Tags = map[string]string{"team": "a"} },
		"blockDeviceMappings": func(nc *karpenter.EC2NodeClass) {
			nc.Spec.BlockDeviceMappings = []*karpenter.BlockDeviceMapping{{EBS: &karpenter.BlockDevice{VolumeSize: &size}}}
		},
		"metadataOptions": func(nc *karpenter.EC2NodeClass) {
			nc.Spec.MetadataOptions = &karpenter.MetadataOptions{HTTPPutResponseHopLimit: &two}
		},
		"kubelet": func(nc *karpenter.EC2NodeClass) {
			mp := int32(20)
			nc.Spec.Kubelet = &karpenter.KubeletConfiguration{MaxPods: &mp}
		},
	}
	for name, f := range differ {
		nc := testClass()
		f(nc)
		if NodeClassHash(nc) == h {
			t.Errorf("changing %s did not change the hash", name)
		}
	}
	// Tag order cannot matter: maps are hashed with sorted keys.
	a, b := testClass(), testClass()
	a.Spec.Tags = map[string]string{"a": "1", "b": "2", "c": "3"}
	b.Spec.Tags = map[string]string{"c": "3", "b": "2", "a": "1"}
	if NodeClassHash(a) != NodeClassHash(b) {
		t.Error("tag order changed the hash")
	}
}

func TestNodePoolHash(t *testing.T) {
	base := testPool("p", whenUnderused, 0, m5)
	h := NodePoolHash(base)
	same := map[string]func(*karpenter.NodePool){
		"requirements": func(np *karpenter.NodePool) { np.Spec.Template.Spec.Requirements[0].Values = []string{"m5.large"} },
		"budgets":      func(np *karpenter.NodePool) { np.Spec.Disruption.Budgets = []karpenter.Budget{{Nodes: "1"}} },
		"policy":       func(np *karpenter.NodePool) { np.Spec.Disruption.ConsolidationPolicy = whenEmpty },
		"limits": func(np *karpenter.NodePool) {
			np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}
		},
		"weight": func(np *karpenter.NodePool) { w := int32(5); np.Spec.Weight = &w },
		"default expireAfter": func(np *karpenter.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = karpenter.NewDuration(720 * time.Hour)
		},
		"defaulted ref": func(np *karpenter.NodePool) {
			np.Spec.Template.Spec.NodeClassRef = &karpenter.NodeClassReference{Name: "default"}
		},
	}
	for name, f := range same {
		np := testPool("p", whenUnderused, 0, m5)
		f(np)
		if NodePoolHash(np) != h {
			t.Errorf("changing %s altered the hash", name)
		}
	}
	differ := map[string]func(*karpenter.NodePool){
		"labels":      func(np *karpenter.NodePool) { np.Spec.Template.ObjectMeta.Labels = map[string]string{"a": "b"} },
		"annotations": func(np *karpenter.NodePool) { np.Spec.Template.ObjectMeta.Annotations = map[string]string{"a": "b"} },
		"taints": func(np *karpenter.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		},
		"startupTaints": func(np *karpenter.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		},
		"nodeClassRef": func(np *karpenter.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" },
		"expireAfter":  func(np *karpenter.NodePool) { np.Spec.Template.Spec.ExpireAfter = karpenter.NewDuration(time.Hour) },
		"terminationGracePeriod": func(np *karpenter.NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		},
	}
	for name, f := range differ {
		np := testPool("p", whenUnderused, 0, m5)
		f(np)
		if NodePoolHash(np) == h {
			t.Errorf("changing %s did not change the hash", name)
		}
	}
}

func TestRequirementMatches(t *testing.T) {
	cases := []struct {
		r    karpenter.NodeSelectorRequirementWithMinValues
		v    string
		ok   bool
		want bool
	}{
		{req("k", corev1.NodeSelectorOpIn, "a", "b"), "a", true, true},
		{req("k", corev1.NodeSelectorOpIn, "a"), "c", true, false},
		{req("k", corev1.NodeSelectorOpNotIn, "a"), "a", true, false},
		{req("k", corev1.NodeSelectorOpNotIn, "a"), "", false, true},
		{req("k", corev1.NodeSelectorOpExists), "x", true, true},
		{req("k", corev1.NodeSelectorOpDoesNotExist), "x", true, false},
		{req("k", corev1.NodeSelectorOpGt, "4"), "8", true, true},
		{req("k", corev1.NodeSelectorOpLt, "4"), "8", true, false},
		{req("k", karpenter.NodeSelectorOpGte, "4"), "4", true, true},
		{req("k", karpenter.NodeSelectorOpLte, "4"), "5", true, false},
		{req("k", corev1.NodeSelectorOpGt, "4"), "x", true, false},
	}
	for _, tc := range cases {
		if got := tc.r.Matches(tc.v, tc.ok); got != tc.want {
			t.Errorf("%s %s %v on %q: got %v", tc.r.Key, tc.r.Operator, tc.r.Values, tc.v, got)
		}
	}
}
