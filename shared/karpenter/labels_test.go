package karpenter

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestAWSLabelsAsTheNodePoolCRDAdmits reads the karpenter.k8s.aws keys Karpenter
// v1.15's NodePool CRD admits (its CEL rule for requirement keys and template
// labels) and checks validation accepts every one of them and still refuses others.
func TestAWSLabelsAsTheNodePoolCRDAdmits(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/crds/karpenter.sh_nodepools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rules := regexp.MustCompile(`rule: self(?:\.all\(x, x)? in \[([^\]]*"karpenter\.k8s\.aws/[^\]]*)\]`).FindAllSubmatch(raw, -1)
	if len(rules) != 2 {
		t.Fatalf("found %d karpenter.k8s.aws rules in the NodePool CRD, want 2 (template labels and requirement keys)", len(rules))
	}
	admitted := map[string]bool{}
	for _, r := range rules {
		for _, q := range strings.Split(string(r[1]), ",") {
			admitted[strings.Trim(strings.TrimSpace(q), `"`)] = true
		}
	}
	for _, want := range []string{NodeClassLabelKey, LabelInstanceTenancy, LabelCapacityReservationID, LabelCapacityReservationType,
		LabelCapacityReservationInterrupt, LabelPlacementGroupID, LabelPlacementGroupPartition, LabelInstanceFamily} {
		if !admitted[want] {
			t.Errorf("the CRD's list lacks %s: the regexp read the wrong rule", want)
		}
	}
	for k := range admitted {
		if msg := restrictedLabel(k, false); msg != "" {
			t.Errorf("%s, which the v1.15 CRD admits, is refused: %s", k, msg)
		}
	}
	for _, k := range []string{"karpenter.k8s.aws/instance-colour", "karpenter.k8s.aws/ec2nodeclass-hash", "karpenter.k8s.aws/capacity-reservation"} {
		if admitted[k] {
			t.Fatalf("%s is in the CRD's list", k)
		}
		if msg := restrictedLabel(k, false); !strings.Contains(msg, "not a karpenter.k8s.aws instance label") {
			t.Errorf("%s: got %q, want it refused as the CRD refuses it", k, msg)
		}
	}
}
