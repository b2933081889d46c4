package nodeboot

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
)

// nodeConfig is the part of nodeadm's NodeConfig (node.eks.aws/v1alpha1) a join
// depends on.
type nodeConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Cluster struct {
			Name                 string `json:"name"`
			APIServerEndpoint    string `json:"apiServerEndpoint"`
			CertificateAuthority string `json:"certificateAuthority"`
			CIDR                 string `json:"cidr"`
		} `json:"cluster"`
		Kubelet struct {
			Config map[string]any `json:"config"`
			Flags  []string       `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

// nodeadm is `nodeadm init` as far as joining goes: it reads the user data from
// the metadata service with a session token, decodes every NodeConfig part and
// merges them in order (later values win; kubelet flags append, as pflag keeps
// the last of a repeated flag), then checks what nodeadm's ValidateNodeConfig
// checks. The node is named after the instance's private DNS name and registers
// the provider ID aws:///<zone>/<instance-id>.
func nodeadm(m *awssim.IMDS, in awssim.Instance) (*Join, error) {
	c := &imdsClient{h: m}
	ud, code := c.get("/latest/user-data")
	if code != http.StatusOK {
		return nil, fmt.Errorf("nodeadm could not read the user data: the metadata service answered %d", code)
	}
	var docs []string
	if bootstrap.IsMIME(ud) {
		parts, err := bootstrap.ParseMIME(ud)
		if err != nil {
			return nil, fmt.Errorf("nodeadm: %w", err)
		}
		for _, p := range parts {
			if p.ContentType() == bootstrap.ContentTypeNodeConfig {
				docs = append(docs, p.Body)
			}
		}
	} else {
		docs = []string{ud}
	}
	if len(docs) == 0 {
		return nil, errors.New("nodeadm: could not find NodeConfig within UserData")
	}
	var merged nodeConfig
	config := map[string]any{}
	for i, d := range docs {
		var nc nodeConfig
		if err := yaml.Unmarshal([]byte(d), &nc); err != nil {
			return nil, fmt.Errorf("nodeadm: NodeConfig %d: %w", i+1, err)
		}
		if nc.Kind != "NodeConfig" || !strings.HasPrefix(nc.APIVersion, "node.eks.aws/") {
			return nil, fmt.Errorf("nodeadm: NodeConfig %d is %s %s, want node.eks.aws/v1alpha1 NodeConfig", i+1, nc.APIVersion, nc.Kind)
		}
		cl, mc := nc.Spec.Cluster, &merged.Spec.Cluster
		mc.Name, mc.APIServerEndpoint, mc.CertificateAuthority, mc.CIDR = or(cl.Name, mc.Name), or(cl.APIServerEndpoint, mc.APIServerEndpoint),
			or(cl.CertificateAuthority, mc.CertificateAuthority), or(cl.CIDR, mc.CIDR)
		merged.Spec.Kubelet.Flags = append(merged.Spec.Kubelet.Flags, nc.Spec.Kubelet.Flags...)
		maps.Copy(config, nc.Spec.Kubelet.Config)
	}
	cl := merged.Spec.Cluster
	switch {
	case cl.Name == "":
		return nil, errors.New("nodeadm: Name is missing in cluster configuration")
	case cl.APIServerEndpoint == "":
		return nil, errors.New("nodeadm: Apiserver endpoint is missing in cluster configuration")
	case cl.CertificateAuthority == "":
		return nil, errors.New("nodeadm: Certificate authority is missing in cluster configuration")
	case cl.CIDR == "":
		return nil, errors.New("nodeadm: CIDR is missing in cluster configuration")
	}
	id, zone, host, err := identityFromIMDS(c)
	if err != nil {
		return nil, fmt.Errorf("nodeadm: %w", err)
	}
	k, err := parseKubeletFlags(merged.Spec.Kubelet.Flags)
	if err != nil {
		return nil, fmt.Errorf("nodeadm: kubelet flags: %w", err)
	}
	j := &Join{Agent: "nodeadm", NodeName: host, ProviderID: "aws:///" + zone + "/" + id, Labels: k.labels, Taints: k.taints,
		Endpoint: cl.APIServerEndpoint, CABundle: cl.CertificateAuthority, MaxPods: k.maxPods}
	if mp, ok := config["maxPods"].(float64); ok {
		j.MaxPods = int32(mp)
	}
	return j, nil
}

// bottlerocketKubernetes are the settings.kubernetes keys Bottlerocket documents
// for its aws-k8s variants (bottlerocket.dev, Settings Reference: kubernetes).
var bottlerocketKubernetes = map[string]string{
	"allowed-unsafe-sysctls": "array", "api-server": "string", "authentication-mode": "string", "bootstrap-token": "string",
	"cloud-provider": "string", "cluster-certificate": "string", "cluster-dns-ip": "any", "cluster-domain": "string",
	"cluster-name": "string", "container-log-max-files": "int", "container-log-max-size": "string", "cpu-cfs-quota-enforced": "bool",
	"cpu-manager-policy": "string", "cpu-manager-policy-options": "array", "cpu-manager-reconcile-period": "string",
	"credential-providers": "table", "device-ownership-from-security-context": "bool", "event-burst": "int", "event-qps": "int",
	"eviction-hard": "table", "eviction-max-pod-grace-period": "int", "eviction-soft": "table", "eviction-soft-grace-period": "table",
	"hostname-override": "string", "hostname-override-source": "string", "image-gc-high-threshold-percent": "any",
	"image-gc-low-threshold-percent": "any", "kube-api-burst": "int", "kube-api-qps": "int", "kube-reserved": "table",
	"log-level": "int", "max-pods": "int", "memory-manager-policy": "string", "memory-manager-reserved-memory": "table",
	"node-labels": "table", "node-taints": "table", "pod-pids-limit": "int", "provider-id": "string",
	"registry-burst": "int", "registry-qps": "int", "seccomp-default": "bool", "server-tls-bootstrap": "bool",
	"shutdown-grace-period": "string", "shutdown-grace-period-for-critical-pods": "string", "standalone-mode": "bool",
	"static-pods": "table", "system-reserved": "table", "topology-manager-policy": "string", "topology-manager-scope": "string",
}

// CheckBottlerocketSettings checks Bottlerocket TOML user data against the
// settings Bottlerocket documents: every settings.kubernetes key known and of
// its type, node-labels valid labels, node-taints "value:Effect" lists,
// bootstrap containers with a source, a mode of always, off or once and
// base64 user-data. It returns the parsed document.
func CheckBottlerocketSettings(userData string) (map[string]any, error) {
	var doc map[string]any
	if err := toml.Unmarshal([]byte(userData), &doc); err != nil {
		return nil, fmt.Errorf("Bottlerocket settings are not valid TOML: %w", err)
	}
	settings, _ := doc["settings"].(map[string]any)
	if settings == nil {
		return nil, errors.New("Bottlerocket user data has no [settings] table")
	}
	k8s, _ := settings["kubernetes"].(map[string]any)
	if k8s == nil {
		return nil, errors.New("Bottlerocket user data has no [settings.kubernetes] table: the kubelet has no cluster to join")
	}
	for _, key := range slices.Sorted(maps.Keys(k8s)) {
		typ, ok := bottlerocketKubernetes[key]
		if !ok {
			return nil, fmt.Errorf("settings.kubernetes.%s is not a Bottlerocket setting: the API server of the node refuses the whole settings document", key)
		}
		if !tomlType(k8s[key], typ) {
			return nil, fmt.Errorf("settings.kubernetes.%s is a %T, Bottlerocket wants a %s", key, k8s[key], typ)
		}
	}
	for k, v := range asTable(k8s["node-labels"]) {
		s, ok := v.(string)
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(s)...); !ok || len(errs) > 0 {
			return nil, fmt.Errorf("settings.kubernetes.node-labels.%q = %v is not a valid label: %s", k, v, strings.Join(errs, "; "))
		}
	}
	for k, v := range asTable(k8s["node-taints"]) {
		var vals []any
		switch x := v.(type) {
		case []any:
			vals = x
		case string:
			vals = []any{x}
		default:
			return nil, fmt.Errorf("settings.kubernetes.node-taints.%q is a %T, want a list of \"value:Effect\"", k, v)
		}
		for _, e := range vals {
			s, _ := e.(string)
			if _, effect, ok := strings.Cut(s, ":"); !ok || !validEffect(effect) {
				return nil, fmt.Errorf("settings.kubernetes.node-taints.%q has %q, want \"value:Effect\" with Effect NoSchedule, PreferNoSchedule or NoExecute", k, e)
			}
		}
	}
	for name, raw := range asTable(settings["bootstrap-containers"]) {
		bc, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("settings.bootstrap-containers.%s is not a table", name)
		}
		if s, _ := bc["source"].(string); s == "" {
			return nil, fmt.Errorf("settings.bootstrap-containers.%s has no source image", name)
		}
		if mode, ok := bc["mode"].(string); ok && mode != "always" && mode != "off" && mode != "once" {
			return nil, fmt.Errorf("settings.bootstrap-containers.%s.mode is %q, want always, off or once", name, mode)
		}
		if ud, ok := bc["user-data"].(string); ok {
			if _, err := base64.StdEncoding.DecodeString(ud); err != nil {
				return nil, fmt.Errorf("settings.bootstrap-containers.%s.user-data is not base64", name)
			}
		}
	}
	return doc, nil
}

func tomlType(v any, typ string) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "int":
		_, ok := v.(int64)
		return ok
	case "bool":
		_, ok := v.(bool)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "table":
		_, ok := v.(map[string]any)
		return ok
	}
	return true
}

func asTable(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func validEffect(e string) bool {
	switch corev1.TaintEffect(e) {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return true
	}
	return false
}

// bottlerocket boots a Bottlerocket node: early-boot-config reads the settings
// from the metadata service with a session token (IMDSv2, whatever httpTokens
// says), checks them, and the kubelet registers as the private DNS name with
// provider ID aws:///<zone>/<instance-id>.
func bottlerocket(m *awssim.IMDS, in awssim.Instance) Result {
	c := &imdsClient{h: m}
	ud, code := c.get("/latest/user-data")
	if code != http.StatusOK {
		return Result{Err: fmt.Errorf("Bottlerocket could not read its settings: the metadata service answered %d", code)}
	}
	doc, err := CheckBottlerocketSettings(ud)
	if err != nil {
		return Result{Err: err}
	}
	k8s := doc["settings"].(map[string]any)["kubernetes"].(map[string]any)
	id, zone, host, err := identityFromIMDS(c)
	if err != nil {
		return Result{Err: fmt.Errorf("Bottlerocket: %w", err)}
	}
	j := &Join{Agent: "bottlerocket", NodeName: host, ProviderID: "aws:///" + zone + "/" + id, Labels: map[string]string{}}
	j.Endpoint, _ = k8s["api-server"].(string)
	j.CABundle, _ = k8s["cluster-certificate"].(string)
	if mp, ok := k8s["max-pods"].(int64); ok {
		j.MaxPods = int32(mp)
	}
	for k, v := range asTable(k8s["node-labels"]) {
		j.Labels[k], _ = v.(string)
	}
	for _, key := range slices.Sorted(maps.Keys(asTable(k8s["node-taints"]))) {
		vals, ok := k8s["node-taints"].(map[string]any)[key].([]any)
		if !ok {
			vals = []any{k8s["node-taints"].(map[string]any)[key]}
		}
		for _, e := range vals {
			value, effect, _ := strings.Cut(e.(string), ":")
			j.Taints = append(j.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
		}
	}
	if name, _ := k8s["cluster-name"].(string); name == "" || j.Endpoint == "" {
		return Result{Err: errors.New("Bottlerocket settings lack settings.kubernetes.cluster-name or api-server: the kubelet has no cluster to join")}
	}
	return Result{Join: j}
}

// kubeletArgs are the kubelet flags a join depends on.
type kubeletArgs struct {
	labels           map[string]string
	taints           []corev1.Taint
	providerID       string
	hostnameOverride string
	maxPods          int32
}

// parseKubeletFlags reads --node-labels (repeats merge), --register-with-taints,
// --provider-id, --hostname-override and --max-pods (last wins), in either
// --flag=value or --flag value form; other flags are left to the kubelet.
func parseKubeletFlags(args []string) (kubeletArgs, error) {
	k := kubeletArgs{labels: map[string]string{}}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		switch name {
		case "--node-labels", "--register-with-taints", "--provider-id", "--hostname-override", "--max-pods":
		default:
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return k, fmt.Errorf("%s has no value", name)
			}
			i++
			value = args[i]
		}
		switch name {
		case "--node-labels":
			for _, kv := range splitList(value) {
				lk, lv, ok := strings.Cut(kv, "=")
				if errs := append(validation.IsQualifiedName(lk), validation.IsValidLabelValue(lv)...); !ok || len(errs) > 0 {
					return k, fmt.Errorf("--node-labels: %q is not a valid label (the kubelet refuses to start)", kv)
				}
				k.labels[lk] = lv
			}
		case "--register-with-taints":
			k.taints = nil
			for _, s := range splitList(value) {
				t, err := parseTaint(s)
				if err != nil {
					return k, fmt.Errorf("--register-with-taints: %w (the kubelet refuses to start)", err)
				}
				k.taints = append(k.taints, t)
			}
		case "--provider-id":
			k.providerID = value
		case "--hostname-override":
			k.hostnameOverride = value
		case "--max-pods":
			n, err := strconv.ParseInt(value, 10, 32)
			if err != nil {
				return k, fmt.Errorf("--max-pods %q is not a number", value)
			}
			k.maxPods = int32(n)
		}
	}
	return k, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseTaint reads key[=value]:Effect.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || !validEffect(effect) {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key[=value]:NoSchedule|PreferNoSchedule|NoExecute", s)
	}
	k, v, _ := strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: %s", s, strings.Join(errs, "; "))
	}
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}, nil
}

func validNodeName(n string) bool { return len(validation.IsDNS1123Subdomain(n)) == 0 }

// sameEndpoint compares API server addresses with or without the https:// scheme
// and the default port.
func sameEndpoint(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://"), "/")
		if !strings.Contains(s, ":") {
			s += ":443"
		}
		return s
	}
	return norm(a) == norm(b)
}
