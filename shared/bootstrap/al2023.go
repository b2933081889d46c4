package bootstrap

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// NodeConfigAPIVersion is nodeadm's configuration API version.
const NodeConfigAPIVersion = "node.eks.aws/v1alpha1"

// renderAL2023 writes Joiner's NodeConfig as the first MIME part, then the
// class's user data: its parts when it is MIME (nodeadm merges NodeConfig parts
// itself, in order), merged into Joiner's NodeConfig when it is a bare
// NodeConfig, or as a shell part otherwise.
func renderAL2023(o Options) (string, error) {
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"cluster name", o.ClusterName}, {"cluster endpoint", o.ClusterEndpoint},
		{"cluster CA bundle", o.CABundle}, {"cluster service CIDR", o.ClusterCIDR},
	} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("amiFamily AL2023: nodeadm needs the %s", strings.Join(missing, ", "))
	}
	if _, err := base64.StdEncoding.DecodeString(o.CABundle); err != nil {
		return "", fmt.Errorf("amiFamily AL2023: cluster CA bundle is not base64: %w", err)
	}
	config, err := joinerNodeConfig(o)
	if err != nil {
		return "", err
	}
	var rest []Part
	switch ud := o.UserData; {
	case strings.TrimSpace(ud) == "":
	case IsMIME(ud):
		if rest, err = ParseMIME(ud); err != nil {
			return "", fmt.Errorf("amiFamily AL2023: spec.userData: %w", err)
		}
	default:
		user, isNodeConfig, err := parseNodeConfig(ud)
		if err != nil {
			return "", fmt.Errorf("amiFamily AL2023: spec.userData: %w", err)
		}
		if isNodeConfig {
			config = mergeNodeConfig(user, config)
		} else {
			rest = []Part{newPart(ContentTypeShell, ud)}
		}
	}
	body, err := yaml.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("amiFamily AL2023: encoding NodeConfig: %w", err)
	}
	parts := append([]Part{newPart(ContentTypeNodeConfig, "# Joiner generated NodeConfig\n"+string(body))}, rest...)
	return WriteMIME(parts)
}

// joinerNodeConfig is the NodeConfig as a generic map, so it can be merged with
// a user's NodeConfig field by field.
func joinerNodeConfig(o Options) (map[string]any, error) {
	kubeletConfig := map[string]any{}
	if o.Kubelet != nil {
		raw, err := json.Marshal(o.Kubelet)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &kubeletConfig); err != nil {
			return nil, err
		}
	}
	if mp := o.maxPods(); mp > 0 {
		kubeletConfig["maxPods"] = mp
	}
	flags := []any{}
	if labels := KubeletLabels(o.Labels); len(labels) > 0 {
		flags = append(flags, "--node-labels="+LabelsFlag(labels))
	}
	flags = append(flags, "--register-with-taints="+TaintsFlag(NodeTaints(o.Taints)))
	kubelet := map[string]any{"flags": flags}
	if len(kubeletConfig) > 0 {
		kubelet["config"] = kubeletConfig
	}
	return map[string]any{
		"apiVersion": NodeConfigAPIVersion,
		"kind":       "NodeConfig",
		"spec": map[string]any{
			"cluster": map[string]any{
				"name":                 o.ClusterName,
				"apiServerEndpoint":    o.ClusterEndpoint,
				"certificateAuthority": o.CABundle,
				"cidr":                 o.ClusterCIDR,
			},
			"kubelet": kubelet,
		},
	}, nil
}

// parseNodeConfig reports whether user data is a single NodeConfig document.
func parseNodeConfig(ud string) (map[string]any, bool, error) {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(ud), &m); err != nil || m == nil {
		// Not a YAML mapping: a shell script or similar.
		return nil, false, nil
	}
	if m["kind"] != "NodeConfig" {
		return nil, false, nil
	}
	if v, _ := m["apiVersion"].(string); !strings.HasPrefix(v, "node.eks.aws/") {
		return nil, false, fmt.Errorf("NodeConfig has apiVersion %q, want %s", v, NodeConfigAPIVersion)
	}
	if _, ok := m["spec"].(map[string]any); m["spec"] != nil && !ok {
		return nil, false, errors.New("NodeConfig spec is not a mapping")
	}
	return m, true, nil
}

// mergeNodeConfig lays Joiner's NodeConfig over the user's: Joiner's scalars and
// maps win key by key, and kubelet flags are the user's followed by Joiner's
// (the kubelet keeps the last value of a repeated flag).
func mergeNodeConfig(user, joiner map[string]any) map[string]any {
	out := deepMerge(user, joiner)
	uf := dig(user, "spec", "kubelet", "flags")
	jf := dig(joiner, "spec", "kubelet", "flags")
	if ul, ok := uf.([]any); ok {
		jl, _ := jf.([]any)
		kubelet := dig(out, "spec", "kubelet").(map[string]any)
		kubelet["flags"] = append(append([]any{}, ul...), jl...)
	}
	return out
}

func deepMerge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if om, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = deepMerge(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

func dig(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}
