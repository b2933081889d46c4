package access

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnvInfersAndValidates(t *testing.T) {
	ca := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"))
	cases := []struct {
		name    string
		env     map[string]string
		mode    Mode
		wantErr []string
	}{
		{"eks by name", map[string]string{EnvClusterName: "c1", EnvRegion: "us-east-1"}, ModeEKS, nil},
		{"eks with endpoint and CA", map[string]string{EnvClusterName: "c1", EnvRegion: "us-east-1", EnvEndpoint: "https://x.eks.amazonaws.com", EnvCAData: ca}, ModeEKS, nil},
		{"self-managed by ARN", map[string]string{EnvSecretARN: "arn:aws:secretsmanager:us-east-1:1:secret:k"}, ModeSelfManaged, nil},
		{"kubeconfig list", map[string]string{EnvKubeconfig: "/a/kc:/b/kc"}, ModeKubeconfig, nil},
		{"nothing", map[string]string{}, "", []string{EnvMode, EnvClusterName, EnvSecretARN, EnvKubeconfig}},
		{"eks missing region", map[string]string{EnvMode: "eks", EnvClusterName: "c1"}, ModeEKS, []string{EnvRegion}},
		{"eks endpoint without CA", map[string]string{EnvClusterName: "c1", EnvRegion: "r", EnvEndpoint: "https://x"}, ModeEKS, []string{EnvCAData}},
		{"eks http endpoint", map[string]string{EnvClusterName: "c1", EnvRegion: "r", EnvEndpoint: "http://x", EnvCAData: ca}, ModeEKS, []string{"https"}},
		{"bad CA", map[string]string{EnvClusterName: "c1", EnvRegion: "r", EnvCAData: "%%%"}, "", []string{EnvCAData, "base64"}},
		{"self-managed without ARN", map[string]string{EnvMode: "self-managed"}, ModeSelfManaged, []string{EnvSecretARN}},
		{"unknown mode", map[string]string{EnvMode: "gke"}, Mode("gke"), []string{"gke", "eks, self-managed, kubeconfig"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromEnv(env(tc.env))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
			} else {
				if err == nil {
					t.Fatalf("want an error naming %v", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
			}
			if tc.mode != "" && c.Mode != tc.mode {
				t.Errorf("mode %q, want %q", c.Mode, tc.mode)
			}
		})
	}
	c, _ := FromEnv(env(map[string]string{EnvKubeconfig: "/a/kc:/b/kc"}))
	if c.Kubeconfig != "/a/kc" {
		t.Errorf("kubeconfig %q, want the first of the list", c.Kubeconfig)
	}
}

func TestKubeconfigRefusesInsecure(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/kc"
	writeFile(t, path, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`)
	_, err := RESTConfig(context.Background(), Config{Mode: ModeKubeconfig, Kubeconfig: path}, Deps{})
	if err == nil || !strings.Contains(err.Error(), "insecure") {
		t.Fatalf("want a refusal of insecure-skip-tls-verify, got %v", err)
	}
}
