package bootstrap

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
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

// Placeholders parses Custom user data as a Go text/template and returns the
// placeholders it uses, sorted. It fails on a template syntax error and on any
// placeholder outside the known set, naming it, so a typo is caught before an
// instance boots with a broken script. Callers use it to read the bootstrap
// token only when the user data asks for it.
func Placeholders(userData string) ([]string, error) {
	t, err := template.New("userData").Option("missingkey=error").Parse(userData)
	if err != nil {
		return nil, fmt.Errorf("amiFamily Custom: spec.userData is not a valid template: %w", err)
	}
	used := map[string]bool{}
	var unknown []string
	if t.Tree != nil {
		walk(t.Tree.Root, func(field string) {
			if slices.Contains(knownPlaceholders, field) {
				used[field] = true
			} else if !slices.Contains(unknown, field) {
				unknown = append(unknown, field)
			}
		})
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("amiFamily Custom: spec.userData uses unknown placeholder %s; known placeholders: %s",
			"{{ ."+strings.Join(unknown, " }}, {{ .")+" }}", strings.Join(knownPlaceholders, ", "))
	}
	return slices.Sorted(maps.Keys(used)), nil
}

// walk calls fn with the first field name of every .Field reference in the tree.
func walk(n parse.Node, fn func(string)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walk(c, fn)
		}
	case *parse.ActionNode:
		walk(n.Pipe, fn)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walk(c, fn)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walk(a, fn)
		}
	case *parse.FieldNode:
		if len(n.Ident) > 0 {
			fn(n.Ident[0])
		}
	case *parse.ChainNode:
		walk(n.Node, fn)
	case *parse.IfNode:
		walk(n.Pipe, fn)
		walk(n.List, fn)
		walk(n.ElseList, fn)
	case *parse.RangeNode:
		walk(n.Pipe, fn)
		walk(n.List, fn)
		walk(n.ElseList, fn)
	case *parse.WithNode:
		walk(n.Pipe, fn)
		walk(n.List, fn)
		walk(n.ElseList, fn)
	case *parse.TemplateNode:
		walk(n.Pipe, fn)
	}
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
	token := c.BootstrapToken
	fetch := ""
	if c.Token.OnInstance {
		token = "${" + TokenVariable + "}"
		if fetch, err = c.Token.FetchCommand(c.Region); err != nil {
			return "", err
		}
	}
	data := map[string]any{
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
			return "", fmt.Errorf("amiFamily Custom: spec.userData uses {{ .BootstrapTokenFetch }} but the EC2NodeClass does not ask for an on-instance fetch: annotate it with %s: %s and a token source", AnnotationTokenFetch, TokenFetchInstance)
		case PlaceholderNodeLabels:
			// No labels is a legitimate value.
			continue
		default:
			return "", fmt.Errorf("amiFamily Custom: spec.userData uses {{ .%s }} but Joiner has no value for it (configure the cluster's %s)", name, placeholderSource[name])
		}
	}
	t, err := template.New("userData").Option("missingkey=error").Parse(o.UserData)
	if err != nil {
		return "", fmt.Errorf("amiFamily Custom: spec.userData is not a valid template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("amiFamily Custom: filling spec.userData: %w", err)
	}
	return b.String(), nil
}

var placeholderSource = map[string]string{
	PlaceholderClusterEndpoint: "endpoint",
	PlaceholderClusterName:     "name",
	PlaceholderCABundle:        "CA bundle",
	PlaceholderCACertHash:      "kubeadm CA certificate hash (annotation " + AnnotationCACertHash + ")",
}
