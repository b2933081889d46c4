package karpenter

import (
	"fmt"
	"regexp"
	"strings"
)

// Problem is one thing wrong with an object (or, when Warning is set, one thing Joiner
// changed or doubts), at a field path such as spec.template.spec.requirements[2].operator.
// Message says what to write instead.
type Problem struct {
	Path    string
	Message string
	Warning bool
	// Runtime marks an error the API server and Karpenter's admission accept
	// but that fails once a node boots (user data that cannot join): joiner
	// validate counts it as an error, while replay and plan keep the object,
	// as a cluster would.
	Runtime bool
}

// String renders "path: message", with a "warning: " prefix for warnings.
func (p Problem) String() string {
	s := p.Message
	if p.Path != "" {
		s = p.Path + ": " + s
	}
	if p.Warning {
		s = "warning: " + s
	}
	return s
}

// problems collects Problems while validating one object.
type problems struct{ list []Problem }

func (ps *problems) errorf(path, format string, args ...any) {
	ps.list = append(ps.list, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (ps *problems) warnf(path, format string, args ...any) {
	ps.list = append(ps.list, Problem{Path: path, Message: fmt.Sprintf(format, args...), Warning: true})
}

// HasErrors reports whether any problem in list is an error rather than a warning.
func HasErrors(list []Problem) bool {
	for _, p := range list {
		if !p.Warning {
			return true
		}
	}
	return false
}

// idx renders path[i].
func idx(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// key renders a map entry's path: path.key for plain identifiers, path[key] for keys
// holding dots or slashes (label and tag keys), so the path stays unambiguous.
func key(path, k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) < 0 {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	return path + "[" + k + "]"
}

// MapKeyPath renders the path of map entry k under path, the way validation does
// (path.key for identifiers, path[key] otherwise), so decoders can report the same paths.
func MapKeyPath(path, k string) string { return key(path, k) }

// quoteYAML renders s as a YAML scalar, quoting it when a plain scalar would be read
// as something else (a number, a bool, null) or would break flow syntax.
func quoteYAML(s string) string {
	if s == "" {
		return `""`
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~":
		return fmt.Sprintf("%q", s)
	}
	if strings.ContainsAny(s, ",[]{}\"\n\t") || strings.Contains(s, ": ") || strings.Contains(s, " #") ||
		strings.HasSuffix(s, ":") || strings.TrimSpace(s) != s || strings.ContainsRune("-?:#&*!|>'%@`", rune(s[0])) {
		return fmt.Sprintf("%q", s)
	}
	if yamlNumberRe.MatchString(s) || yamlDateRe.MatchString(s) {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// Plain scalars YAML would read as numbers (including 1.1 forms: octal, hex, .inf) or
// timestamps.
var (
	yamlNumberRe = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$|^0[xXoObB][0-9a-fA-F_]+$|^[-+]?\.(inf|Inf|INF|nan|NaN|NAN)$`)
	yamlDateRe   = regexp.MustCompile(`^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}`)
)

// QuoteYAML is quoteYAML for other packages that print replacement YAML.
func QuoteYAML(s string) string { return quoteYAML(s) }
