package catalog

import (
	"maps"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func offering(it *InstanceType, zone, ct string) Offering {
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			return o
		}
	}
	panic("no offering " + zone + " " + ct + " for " + it.Name)
}

func diffLabels(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: %s = %q (present %v), want %q", what, k, g, ok, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected label %s=%q", what, k, g)
		}
	}
}

func TestLabelsGPU(t *testing.T) {
	it, _ := Embedded().Lookup("g6.xlarge")
	got := Labels(it, offering(it, "us-east-1b", karpenter.CapacityTypeSpot))
	diffLabels(t, "g6.xlarge", got, map[string]string{
		"node.kubernetes.io/instance-type":             "g6.xlarge",
		"kubernetes.io/arch":                           "amd64",
		"kubernetes.io/os":                             "linux",
		"karpenter.k8s.aws/instance-tenancy":           "default",
		"topology.kubernetes.io/zone":                  "us-east-1b",
		"topology.kubernetes.io/region":                "us-east-1",
		"karpenter.sh/capacity-type":                   "spot",
		"karpenter.k8s.aws/instance-category":          "g",
		"karpenter.k8s.aws/instance-family":            "g6",
		"karpenter.k8s.aws/instance-generation":        "6",
		"karpenter.k8s.aws/instance-size":              "xlarge",
		"karpenter.k8s.aws/instance-cpu":               "4",
		"karpenter.k8s.aws/instance-memory":            "16384",
		"karpenter.k8s.aws/instance-gpu-name":          "l4",
		"karpenter.k8s.aws/instance-gpu-manufacturer":  "nvidia",
		"karpenter.k8s.aws/instance-gpu-count":         "1",
		"karpenter.k8s.aws/instance-gpu-memory":        "22888",
		"karpenter.k8s.aws/instance-network-bandwidth": "2500",
	})
}

func TestLabelsGraviton(t *testing.T) {
	it, _ := Embedded().Lookup("m6g.large")
	got := Labels(it, offering(it, "us-east-1c", karpenter.CapacityTypeOnDemand))
	diffLabels(t, "m6g.large", got, map[string]string{
		"node.kubernetes.io/instance-type":             "m6g.large",
		"kubernetes.io/arch":                           "arm64",
		"kubernetes.io/os":                             "linux",
		"karpenter.k8s.aws/instance-tenancy":           "default",
		"topology.kubernetes.io/zone":                  "us-east-1c",
		"topology.kubernetes.io/region":                "us-east-1",
		"karpenter.sh/capacity-type":                   "on-demand",
		"karpenter.k8s.aws/instance-category":          "m",
		"karpenter.k8s.aws/instance-family":            "m6g",
		"karpenter.k8s.aws/instance-generation":        "6",
		"karpenter.k8s.aws/instance-size":              "large",
		"karpenter.k8s.aws/instance-cpu":               "2",
		"karpenter.k8s.aws/instance-memory":            "8192",
		"karpenter.k8s.aws/instance-network-bandwidth": "750",
	})
}

func TestLabelsAccelerator(t *testing.T) {
	it, _ := Embedded().Lookup("inf2.24xlarge")
	got := InstanceLabels(it)
	for k, w := range map[string]string{
		"karpenter.k8s.aws/instance-category":                 "inf",
		"karpenter.k8s.aws/instance-generation":               "2",
		"karpenter.k8s.aws/instance-accelerator-name":         "inferentia2",
		"karpenter.k8s.aws/instance-accelerator-manufacturer": "aws",
		"karpenter.k8s.aws/instance-accelerator-count":        "6",
		"karpenter.k8s.aws/instance-network-bandwidth":        "50000",
	} {
		if got[k] != w {
			t.Errorf("inf2.24xlarge: %s = %q, want %q", k, got[k], w)
		}
	}
	if _, ok := got["karpenter.k8s.aws/instance-gpu-count"]; ok {
		t.Error("inf2 carries GPU labels")
	}
	for _, k := range []string{"topology.kubernetes.io/zone", "karpenter.sh/capacity-type", "topology.kubernetes.io/region"} {
		if _, ok := got[k]; ok {
			t.Errorf("InstanceLabels carries offering label %s", k)
		}
	}
}

func TestLabelsFractionalGPU(t *testing.T) {
	// Karpenter labels g6f with gpu-count 0: the GPU entry exists, the count is fractional.
	it, _ := Embedded().Lookup("g6f.large")
	got := InstanceLabels(it)
	if got["karpenter.k8s.aws/instance-gpu-count"] != "0" || got["karpenter.k8s.aws/instance-gpu-name"] != "l4" {
		t.Errorf("g6f.large labels %v", got)
	}
}

func TestWithOfferingMatchesLabels(t *testing.T) {
	c := Embedded()
	for i := range c.InstanceTypes {
		it := &c.InstanceTypes[i]
		base := InstanceLabels(it)
		for _, o := range it.Offerings {
			if !maps.Equal(WithOffering(base, o), Labels(it, o)) {
				t.Fatalf("%s %s %s: WithOffering differs from Labels", it.Name, o.Zone, o.CapacityType)
			}
		}
		if _, ok := base["topology.kubernetes.io/zone"]; ok {
			t.Fatal("WithOffering modified its input")
		}
	}
}

func TestRegionOfZone(t *testing.T) {
	for zone, want := range map[string]string{
		"us-east-1a":       "us-east-1",
		"eu-central-2c":    "eu-central-2",
		"ap-southeast-4b":  "ap-southeast-4",
		"us-gov-west-1a":   "us-gov-west-1",
		"us-east-1-bos-1a": "",
		"use1-az1":         "",
		"zone-a":           "",
		"us-east-1":        "",
		"":                 "",
		"a":                "",
	} {
		if got := RegionOfZone(zone); got != want {
			t.Errorf("RegionOfZone(%q) = %q, want %q", zone, got, want)
		}
	}
}
