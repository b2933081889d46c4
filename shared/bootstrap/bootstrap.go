// Package bootstrap renders EC2 user data that makes a new instance join the
// cluster, one format per node agent (package amifamily says which AMI family
// uses which):
//
//   - AL2023: a nodeadm NodeConfig (node.eks.aws/v1alpha1) in a MIME multipart
//     document, followed by the class's own user data parts;
//   - Bottlerocket: TOML settings, the class's settings merged under Joiner's;
//   - AL2: the class's user data, then a /etc/eks/bootstrap.sh call, in MIME;
//   - Custom: the class's user data as given, with {{ .ClusterEndpoint }}-style
//     placeholders filled (see [Placeholders]).
//
// Every family passes the node's labels, its taints (always including the
// karpenter.sh/unregistered:NoExecute startup taint that holds pods off the node
// until Joiner has registered it) and the kubelet's max-pods the way that
// family's agent expects. Rendering is pure: no I/O, and the same Options give
// byte-identical output, so launch templates can be keyed by its hash.
//
// The output never carries a bootstrap token: Custom user data reads it on the
// instance (see AnnotationTokenParameter).
package bootstrap

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Options is everything the user data of one launch template depends on.
type Options struct {
	// ClusterName is the cluster's name (EKS name, or the name Joiner is configured with).
	ClusterName string
	// ClusterEndpoint is the API server URL, e.g. https://api.example.com:6443.
	ClusterEndpoint string
	// CABundle is the cluster CA certificate bundle, base64-encoded PEM (as EKS reports it).
	CABundle string
	// ClusterCIDR is the service CIDR; nodeadm (AL2023) requires it.
	ClusterCIDR string
	// Labels are the node labels to register with. Labels the kubelet may not set
	// itself (kubernetes.io and k8s.io namespaces outside the kubelet's allowed set)
	// are left out: Joiner applies them when it registers the node.
	Labels map[string]string
	// Taints are the NodePool's taints and startup taints. The unregistered taint
	// is added when missing.
	Taints []corev1.Taint
	// MaxPods is the kubelet's max-pods; 0 leaves the family's default.
	// Kubelet.MaxPods, when set, takes precedence.
	MaxPods int32
	// Kubelet is the EC2NodeClass's kubelet block, nil when absent.
	Kubelet *karpenter.KubeletConfiguration
	// UserData is the EC2NodeClass's spec.userData ("" when absent).
	UserData string
	// Custom holds the values only the Custom family's placeholders use.
	Custom CustomValues
}

// CustomValues are the self-managed-cluster values the Custom family's
// placeholders can insert.
type CustomValues struct {
	// CACertHash is the kubeadm discovery CA certificate hash, hex, without the
	// "sha256:" prefix (which is stripped when present).
	CACertHash string
	// Token says where the bootstrap token lives (see [TokenSource]).
	Token TokenSource
	// Region is the AWS region, used by the on-instance token fetch command.
	Region string
}

// The user data formats Joiner writes, one per node agent. Which AMI family
// uses which is package amifamily's to say. Each checks the labels and taints
// first: besides being refused by the kubelet, a bad one would end up unquoted in
// shell or TOML.

// EKS renders AL2 user data: the class's own parts, then /etc/eks/bootstrap.sh.
func EKS(o Options) (string, error) { return checked(o, renderAL2) }

// Nodeadm renders AL2023 user data: a nodeadm NodeConfig, then the class's parts.
func Nodeadm(o Options) (string, error) { return checked(o, renderAL2023) }

// Bottlerocket renders Bottlerocket TOML settings, the class's merged under Joiner's.
func Bottlerocket(o Options) (string, error) { return checked(o, renderBottlerocket) }

// Custom renders the class's own user data with its placeholders filled.
func Custom(o Options) (string, error) { return checked(o, renderCustom) }

func checked(o Options, render func(Options) (string, error)) (string, error) {
	if err := validateLabelsAndTaints(o); err != nil {
		return "", err
	}
	return render(o)
}

// UnregisteredTaint is the startup taint every Joiner node registers with.
var UnregisteredTaint = corev1.Taint{Key: karpenter.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}

// NodeTaints returns the taints a node registers with: the unregistered taint
// first (as seed 002's kubeadm user data writes it), then the given taints in
// order, duplicates (same key and effect) dropped.
func NodeTaints(taints []corev1.Taint) []corev1.Taint {
	out := []corev1.Taint{UnregisteredTaint}
	for _, t := range taints {
		if slices.ContainsFunc(out, func(o corev1.Taint) bool { return o.Key == t.Key && o.Effect == t.Effect }) {
			continue
		}
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return out
}

// TaintsFlag renders taints as the kubelet's --register-with-taints value:
// key=value:Effect or key:Effect, comma-separated, in order.
func TaintsFlag(taints []corev1.Taint) string {
	parts := make([]string, 0, len(taints))
	for _, t := range taints {
		if t.Value != "" {
			parts = append(parts, t.Key+"="+t.Value+":"+string(t.Effect))
		} else {
			parts = append(parts, t.Key+":"+string(t.Effect))
		}
	}
	return strings.Join(parts, ",")
}

// LabelsFlag renders labels as the kubelet's --node-labels value: key=value,
// comma-separated, sorted by key.
func LabelsFlag(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// KubeletLabels returns the labels the kubelet accepts in --node-labels. The
// kubelet refuses to start when given a label in the kubernetes.io or k8s.io
// namespaces other than its own (node-role.kubernetes.io/... is the usual
// casualty), so those are left for registration to apply.
func KubeletLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if kubeletMaySet(k) {
			out[k] = v
		}
	}
	return out
}

// kubeletAllowedLabels mirrors the kubelet's own list (pkg/kubelet/apis).
var kubeletAllowedLabels = map[string]bool{
	corev1.LabelHostname:                true,
	corev1.LabelTopologyZone:            true,
	corev1.LabelTopologyRegion:          true,
	corev1.LabelFailureDomainBetaZone:   true,
	corev1.LabelFailureDomainBetaRegion: true,
	corev1.LabelInstanceType:            true,
	corev1.LabelInstanceTypeStable:      true,
	corev1.LabelOSStable:                true,
	corev1.LabelArchStable:              true,
	"beta.kubernetes.io/os":             true,
	"beta.kubernetes.io/arch":           true,
}

func kubeletMaySet(key string) bool {
	if kubeletAllowedLabels[key] {
		return true
	}
	ns, _, found := strings.Cut(key, "/")
	if !found {
		return true
	}
	for _, allowed := range []string{"kubelet.kubernetes.io", "node.kubernetes.io"} {
		if ns == allowed || strings.HasSuffix(ns, "."+allowed) {
			return true
		}
	}
	for _, reserved := range []string{"kubernetes.io", "k8s.io"} {
		if ns == reserved || strings.HasSuffix(ns, "."+reserved) {
			return false
		}
	}
	return true
}

// validateLabelsAndTaints rejects anything that is not a valid Kubernetes label
// or taint: besides being refused by the kubelet, such text would end up
// unquoted in shell and TOML.
func validateLabelsAndTaints(o Options) error {
	for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("node label key %q is invalid: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(o.Labels[k]); len(errs) > 0 {
			return fmt.Errorf("node label %s=%q has an invalid value: %s", k, o.Labels[k], strings.Join(errs, "; "))
		}
	}
	for _, t := range o.Taints {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Errorf("taint key %q is invalid: %s", t.Key, strings.Join(errs, "; "))
		}
		if t.Value != "" {
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				return fmt.Errorf("taint %s has an invalid value %q: %s", t.Key, t.Value, strings.Join(errs, "; "))
			}
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("taint %s has effect %q: want NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect)
		}
	}
	if kc := o.Kubelet; kc != nil {
		for _, m := range []struct {
			name string
			m    map[string]string
		}{{"systemReserved", kc.SystemReserved}, {"kubeReserved", kc.KubeReserved}, {"evictionHard", kc.EvictionHard}, {"evictionSoft", kc.EvictionSoft}} {
			for k, v := range m.m {
				if strings.ContainsAny(k+v, unsafeChars) {
					return fmt.Errorf("kubelet.%s[%q] = %q contains a quote, space, backslash, $ or newline", m.name, k, v)
				}
			}
		}
		for _, ip := range kc.ClusterDNS {
			if strings.ContainsAny(ip, unsafeChars) {
				return fmt.Errorf("kubelet.clusterDNS entry %q contains a quote, space, backslash, $ or newline", ip)
			}
		}
	}
	for _, field := range []struct{ name, value string }{
		{"cluster name", o.ClusterName}, {"cluster endpoint", o.ClusterEndpoint},
		{"CA bundle", o.CABundle}, {"cluster CIDR", o.ClusterCIDR},
	} {
		if strings.ContainsAny(field.value, unsafeChars) {
			return fmt.Errorf("%s %q contains a quote, space, backslash, $ or newline", field.name, field.value)
		}
	}
	return nil
}

// unsafeChars may not appear in values Joiner writes into shell or TOML.
const unsafeChars = "'\"\n\r\t\\`$ "

// maxPods is the max-pods value to pass, 0 for none.
func (o Options) maxPods() int32 {
	if o.Kubelet != nil && o.Kubelet.MaxPods != nil {
		return *o.Kubelet.MaxPods
	}
	return o.MaxPods
}

// sortedPairs renders a map as key<op>value pairs sorted by key, joined by sep.
func sortedPairs(m map[string]string, op, sep string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+op+m[k])
	}
	return strings.Join(parts, sep)
}
