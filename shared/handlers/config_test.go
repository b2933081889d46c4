package handlers

import (
	"strings"
	"testing"
)

func TestConfigMode(t *testing.T) {
	base := map[string]string{EnvClusterName: "c", EnvRegion: "us-east-1"}
	for _, tc := range []struct {
		env     map[string]string
		want    string
		problem string
	}{
		{env: map[string]string{}, want: ModeAct},
		{env: map[string]string{EnvMode: "Shadow"}, want: ModeShadow},
		{env: map[string]string{EnvMode: "act"}, want: ModeAct},
		{env: map[string]string{EnvMode: "watch"}, problem: `JOINER_MODE="watch": want act or shadow`},
		{env: map[string]string{EnvMode: "shadow", EnvDryRun: "true"}, problem: "JOINER_MODE=shadow and JOINER_DRY_RUN: pick one"},
	} {
		c, err := ConfigFromEnv(func(k string) string {
			if v, ok := tc.env[k]; ok {
				return v
			}
			return base[k]
		})
		switch {
		case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
			t.Errorf("%v: error %v, want one naming %q", tc.env, err, tc.problem)
		case tc.problem == "" && (err != nil || c.Mode != tc.want):
			t.Errorf("%v: mode %q, error %v; want %q", tc.env, c.Mode, err, tc.want)
		}
	}
}

// TestConfigClusterCIDR: JOINER_CLUSTER_CIDR (the stack's -c serviceCidr) must be a
// network address; a malformed one is an error naming the variable.
func TestConfigClusterCIDR(t *testing.T) {
	for _, tc := range []struct {
		value, want, problem string
	}{
		{value: "", want: ""},
		{value: "10.96.0.0/12", want: "10.96.0.0/12"},
		{value: " fd00:10:96::/108 ", want: "fd00:10:96::/108"},
		{value: "10.96.0.1/12", problem: `JOINER_CLUSTER_CIDR="10.96.0.1/12": not a network address (did you mean 10.96.0.0/12?)`},
		{value: "10.96.0.0", problem: `JOINER_CLUSTER_CIDR="10.96.0.0": want the service CIDR`},
		{value: "services", problem: `JOINER_CLUSTER_CIDR="services"`},
	} {
		c, err := ConfigFromEnv(func(k string) string {
			return map[string]string{EnvClusterName: "c", EnvRegion: "us-east-1", EnvClusterCIDR: tc.value}[k]
		})
		switch {
		case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
			t.Errorf("%q: error %v, want one naming %q", tc.value, err, tc.problem)
		case tc.problem == "" && (err != nil || c.ClusterCIDR != tc.want):
			t.Errorf("%q: CIDR %q, error %v; want %q", tc.value, c.ClusterCIDR, err, tc.want)
		}
	}
}
