package amifamily

import (
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

func TestCheckUserData(t *testing.T) {
	seed002 := "#!/bin/bash\nset -euxo pipefail\nINSTANCE_ID=\"$(curl -s http://169.254.169.254/latest/meta-data/instance-id)\"\nkubeadm join k:6443 --token abcdef.0123456789abcdef --node-name \"${INSTANCE_ID}\"\n"
	class := func(family, tokens, ud string) *karpenter.EC2NodeClass {
		nc := &karpenter.EC2NodeClass{}
		nc.Spec.AMIFamily = &family
		nc.Spec.AMISelectorTerms = []karpenter.AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}
		nc.Spec.UserData = &ud
		if tokens != "" {
			nc.Spec.MetadataOptions = &karpenter.MetadataOptions{HTTPTokens: &tokens}
		}
		return nc
	}
	kinds := func(ps []karpenter.Problem) string {
		var out []string
		for _, p := range ps {
			switch {
			case p.Runtime && !p.Warning:
				out = append(out, "runtime-error")
			case p.Warning:
				out = append(out, "warning")
			default:
				out = append(out, "error")
			}
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name string
		nc   *karpenter.EC2NodeClass
		want string
	}{
		{"seed 002, tokens required by default", class("Custom", "", seed002), "runtime-error,warning"},
		{"seed 002, tokens required", class("Custom", "required", seed002), "runtime-error,warning"},
		{"seed 002, tokens optional", class("Custom", "optional", seed002), "warning"},
		{"AL2 shell part", class("AL2", "", "#!/bin/bash\ncurl http://169.254.169.254/latest/meta-data/local-ipv4\n"), "runtime-error"},
		{"Bottlerocket TOML is not a script", class("Bottlerocket", "", "[settings]\nmotd = 'http://169.254.169.254/latest/meta-data'\n"), ""},
		{"placeholder outside Custom", class("AL2023", "", "#!/bin/bash\necho {{ .ClusterName }}\n"), "warning"},
		{"no user data", class("Custom", "", ""), ""},
	} {
		got := CheckUserData(tc.nc)
		if k := kinds(got); k != tc.want {
			t.Errorf("%s: %s, want %s: %+v", tc.name, k, tc.want, got)
		}
		for _, p := range got {
			if p.Path != "spec.userData" || strings.Contains(p.Message, "abcdef.0123456789abcdef") {
				t.Errorf("%s: %+v", tc.name, p)
			}
			if p.Runtime && (!strings.Contains(p.Message, "httpTokens") || !strings.Contains(p.Message, "httpTokens: optional (trade-off:")) {
				t.Errorf("%s: the error must name httpTokens, the fix and the trade-off: %s", tc.name, p.Message)
			}
		}
	}
}
