package bootstrap

import (
	"fmt"
	"maps"
	"strconv"

	toml "github.com/pelletier/go-toml/v2"
)

// renderBottlerocket parses the class's user data as Bottlerocket TOML settings
// and sets Joiner's keys under settings.kubernetes over it: cluster-name,
// api-server, cluster-certificate, max-pods and the kubelet block's settings
// replace the user's values; node-labels are merged with Joiner's labels winning;
// node-taints are replaced, since a taint the scheduler does not know about
// would strand pods.
func renderBottlerocket(o Options) (string, error) {
	if o.ClusterName == "" || o.ClusterEndpoint == "" {
		return "", fmt.Errorf("amiFamily Bottlerocket: the cluster name and endpoint are required")
	}
	doc := map[string]any{}
	if o.UserData != "" {
		if err := toml.Unmarshal([]byte(o.UserData), &doc); err != nil {
			return "", fmt.Errorf("amiFamily Bottlerocket: spec.userData is not valid TOML: %w", err)
		}
	}
	settings, err := table(doc, "settings")
	if err != nil {
		return "", err
	}
	k8s, err := table(settings, "kubernetes")
	if err != nil {
		return "", err
	}
	k8s["cluster-name"] = o.ClusterName
	k8s["api-server"] = o.ClusterEndpoint
	if o.CABundle != "" {
		k8s["cluster-certificate"] = o.CABundle
	}
	if mp := o.maxPods(); mp > 0 {
		k8s["max-pods"] = int64(mp)
	}
	labels, err := table(k8s, "node-labels")
	if err != nil {
		return "", err
	}
	for k, v := range KubeletLabels(o.Labels) {
		labels[k] = v
	}
	if len(labels) == 0 {
		delete(k8s, "node-labels")
	}
	taints := map[string]any{}
	for _, t := range NodeTaints(o.Taints) {
		list, _ := taints[t.Key].([]any)
		taints[t.Key] = append(list, t.Value+":"+string(t.Effect))
	}
	k8s["node-taints"] = taints
	if kc := o.Kubelet; kc != nil {
		if len(kc.ClusterDNS) > 0 {
			k8s["cluster-dns-ip"] = kc.ClusterDNS[0]
		}
		for key, m := range map[string]map[string]string{
			"system-reserved": kc.SystemReserved, "kube-reserved": kc.KubeReserved,
			"eviction-hard": kc.EvictionHard, "eviction-soft": kc.EvictionSoft,
		} {
			if len(m) > 0 {
				k8s[key] = stringTable(m)
			}
		}
		if len(kc.EvictionSoftGracePeriod) > 0 {
			g := map[string]any{}
			for k, d := range kc.EvictionSoftGracePeriod {
				g[k] = d.Duration.String()
			}
			k8s["eviction-soft-grace-period"] = g
		}
		if kc.EvictionMaxPodGracePeriod != nil {
			k8s["eviction-max-pod-grace-period"] = int64(*kc.EvictionMaxPodGracePeriod)
		}
		if kc.ImageGCHighThresholdPercent != nil {
			k8s["image-gc-high-threshold-percent"] = strconv.Itoa(int(*kc.ImageGCHighThresholdPercent))
		}
		if kc.ImageGCLowThresholdPercent != nil {
			k8s["image-gc-low-threshold-percent"] = strconv.Itoa(int(*kc.ImageGCLowThresholdPercent))
		}
		if kc.CPUCFSQuota != nil {
			k8s["cpu-cfs-quota-enforced"] = *kc.CPUCFSQuota
		}
	}
	out, err := toml.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("amiFamily Bottlerocket: encoding settings: %w", err)
	}
	return string(out), nil
}

// table returns m[key] as a TOML table, creating it when absent.
func table(m map[string]any, key string) (map[string]any, error) {
	switch v := m[key].(type) {
	case nil:
		t := map[string]any{}
		m[key] = t
		return t, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("amiFamily Bottlerocket: spec.userData: %s is a %T, want a table", key, v)
	}
}

func stringTable(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range maps.All(m) {
		out[k] = v
	}
	return out
}
