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
