package bootstrap

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Placeholder names the Custom family's user data may use as {{ .Name }}.
const (
	PlaceholderClusterEndpoint     = "ClusterEndpoint"
	PlaceholderClusterName         = "ClusterName"
	PlaceholderCABundle            = "CABundle"
	PlaceholderBootstrapToken      = "BootstrapToken"
	PlaceholderCACertHash          = "CACertHash"
	PlaceholderNodeLabels          = "NodeLabels"
	PlaceholderNodeTaints          = "NodeTaints"
	PlaceholderBootstrapTokenFetch = "BootstrapTokenFetch"
)

var knownPlaceholders = []string{
	PlaceholderBootstrapToken, PlaceholderBootstrapTokenFetch, PlaceholderCABundle, PlaceholderCACertHash,
	PlaceholderClusterEndpoint, PlaceholderClusterName, PlaceholderNodeLabels, PlaceholderNodeTaints,
}

// TokenVariable is the shell variable the on-instance fetch line sets; in that
// mode {{ .BootstrapToken }} renders as a reference to it.
const TokenVariable = "JOINER_BOOTSTRAP_TOKEN"

// placeholderAction is the one template action Custom user data may use:
// {{ .Name }}, with optional spaces and Go template trim markers left out.
var placeholderAction = regexp.MustCompile(`^\s*\.([A-Za-z][A-Za-z0-9]*)\s*$`)

// scanPlaceholders finds every {{ ... }} action. Only {{ .Name }} is accepted: a
// full template engine (text/template) would make the linker keep every method of
// every type reachable by reflection, tripling the Lambda binaries' size.
func scanPlaceholders(userData string, fn func(start, end int, name string)) error {
	rest, off := userData, 0
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			return nil
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return fmt.Errorf("unclosed action at byte %d: %q", off+i, clip(rest[i:]))
		}
		body := rest[i+2 : i+2+j]
		m := placeholderAction.FindStringSubmatch(body)
		if m == nil {
			return fmt.Errorf("unsupported action {{%s}} at byte %d: only {{ .Name }} placeholders are filled", body, off+i)
		}
		fn(off+i, off+i+2+j+2, m[1])
		off += i + 2 + j + 2
		rest = userData[off:]
	}
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Placeholders returns the placeholders Custom user data uses, sorted. It fails on
// a malformed action and on any placeholder outside the known set, naming it, so a
// typo is caught before an instance boots with a broken script. Callers use it to
// read the bootstrap token only when the user data asks for it.
func Placeholders(userData string) ([]string, error) {
	used := map[string]bool{}
	var unknown []string
	err := scanPlaceholders(userData, func(_, _ int, field string) {
		if slices.Contains(knownPlaceholders, field) {
			used[field] = true
		} else if !slices.Contains(unknown, field) {
			unknown = append(unknown, field)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("amiFamily Custom: spec.userData is not a valid template: %w", err)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("amiFamily Custom: spec.userData uses unknown placeholder %s; known placeholders: %s",
			"{{ ."+strings.Join(unknown, " }}, {{ .")+" }}", strings.Join(knownPlaceholders, ", "))
	}
	return slices.Sorted(maps.Keys(used)), nil
}

// renderCustom fills the placeholders of the class's user data. User data
// without placeholders comes back unchanged.
func renderCustom(o Options) (string, error) {
	if strings.TrimSpace(o.UserData) == "" {
		return "", fmt.Errorf("amiFamily Custom: spec.userData is empty; a Custom AMI needs user data that joins the node to the cluster")
	}
	used, err := Placeholders(o.UserData)
	if err != nil {
		return "", err
	}
	c := o.Custom
	token, fetch := "", ""
	if c.Token.Configured() {
		token = "${" + TokenVariable + "}"
		if fetch, err = c.Token.FetchCommand(c.Region); err != nil {
			return "", err
		}
	}
	data := map[string]string{
		PlaceholderClusterEndpoint:     o.ClusterEndpoint,
		PlaceholderClusterName:         o.ClusterName,
		PlaceholderCABundle:            o.CABundle,
		PlaceholderBootstrapToken:      token,
		PlaceholderCACertHash:          strings.TrimPrefix(c.CACertHash, "sha256:"),
		PlaceholderNodeLabels:          LabelsFlag(KubeletLabels(o.Labels)),
		PlaceholderNodeTaints:          TaintsFlag(NodeTaints(o.Taints)),
		PlaceholderBootstrapTokenFetch: fetch,
	}
	for _, name := range used {
		if data[name] != "" {
			continue
		}
		switch name {
		case PlaceholderBootstrapToken:
			return "", fmt.Errorf("amiFamily Custom: spec.userData uses {{ .BootstrapToken }} but no bootstrap token source is configured: annotate the EC2NodeClass with %s (SSM SecureString) or %s (Secrets Manager)", AnnotationTokenParameter, AnnotationTokenSecret)
		case PlaceholderBootstrapTokenFetch:
			return "", fmt.Errorf("amiFamily Custom: spec.userData uses {{ .BootstrapTokenFetch }} but no bootstrap token source is configured: annotate the EC2NodeClass with %s (SSM SecureString) or %s (Secrets Manager)", AnnotationTokenParameter, AnnotationTokenSecret)
		case PlaceholderNodeLabels:
			// No labels is a legitimate value.
			continue
		default:
			return "", fmt.Errorf("amiFamily Custom: spec.userData uses {{ .%s }} but Joiner has no value for it (configure the cluster's %s)", name, placeholderSource[name])
		}
	}
	ud := o.UserData
	if slices.Contains(used, PlaceholderBootstrapToken) && !slices.Contains(used, PlaceholderBootstrapTokenFetch) {
		// The token variable must be set before its first use.
		ud = insertBeforeFirstUse(ud, "{{ ."+PlaceholderBootstrapToken, "{{ ."+PlaceholderBootstrapTokenFetch+" }}\n")
	}
	var b strings.Builder
	last := 0
	_ = scanPlaceholders(ud, func(start, end int, name string) { // already validated by Placeholders
		b.WriteString(ud[last:start])
		b.WriteString(data[name])
		last = end
	})
	b.WriteString(ud[last:])
	return b.String(), nil
}

// insertBeforeFirstUse puts line before the command that first contains use:
// before the first line of its backslash-continued command, so set -e and the
// variables set above it apply to the fetch too.
func insertBeforeFirstUse(script, use, line string) string {
	i := strings.Index(script, use)
	if i < 0 {
		return script
	}
	start := strings.LastIndexByte(script[:i], '\n') + 1
	for start > 0 {
		prev := strings.LastIndexByte(script[:start-1], '\n') + 1
		if !strings.HasSuffix(script[prev:start-1], "\\") {
			break
		}
		start = prev
	}
	return script[:start] + line + script[start:]
}

var placeholderSource = map[string]string{
	PlaceholderClusterEndpoint: "endpoint",
	PlaceholderClusterName:     "name",
	PlaceholderCABundle:        "CA bundle",
	PlaceholderCACertHash:      "kubeadm CA certificate hash (annotation " + AnnotationCACertHash + ")",
}
