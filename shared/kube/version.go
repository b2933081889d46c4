package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// minorVersion is the major.minor prefix of a gitVersion such as v1.37.2 or
// v1.30.4-eks-a737599.
var minorVersion = regexp.MustCompile(`^v?([0-9]+)\.([0-9]+)(\.|$|[-+])`)

// ServerVersion reads the API server's /version and returns its Kubernetes minor
// version ("1.37"), the form AMI aliases and user data take. It is how a
// self-managed cluster's version is learned (an EKS cluster's comes from
// DescribeCluster): one GET with the functions' own credentials, which every
// authenticated identity may make (system:discovery).
func ServerVersion(ctx context.Context, cfg *rest.Config) (string, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return "", fmt.Errorf("API server version: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.Host, "/")+"/version", nil)
	if err != nil {
		return "", fmt.Errorf("API server version: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("API server version: GET %s/version: %w", cfg.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("API server version: GET %s/version: %w", cfg.Host, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("API server version: GET %s/version: HTTP %d: %.200s", cfg.Host, resp.StatusCode, body)
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return "", fmt.Errorf("API server version: %s/version is not a version document: %v", cfg.Host, err)
	}
	return MinorVersion(info)
}

// MinorVersion is info's "major.minor", from gitVersion or else the major and
// minor fields (EKS's minor carries a "+"). A build without version stamping
// reports gitVersion v0.0.0-master: that is no version.
func MinorVersion(info version.Info) (string, error) {
	if m := minorVersion.FindStringSubmatch(info.GitVersion); m != nil && m[1] != "0" {
		return m[1] + "." + m[2], nil
	}
	major, minor := strings.TrimRight(info.Major, "+"), strings.TrimRight(info.Minor, "+")
	if m := minorVersion.FindStringSubmatch(major + "." + minor); m != nil && m[1] != "0" {
		return m[1] + "." + m[2], nil
	}
	return "", fmt.Errorf("API server version: gitVersion %q, major %q, minor %q: no Kubernetes version in it", info.GitVersion, info.Major, info.Minor)
}
