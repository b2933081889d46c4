package manifest

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/joiner-autoscaler/joiner/shared/bootstrap"
	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// Guides ship manifests with values left to fill in: <CLUSTER_NAME>, its HTML-escaped
// form &lt;CLUSTER_NAME&gt;, Helm actions {{ .Values.clusterName | quote }}. The last
// breaks YAML parsing outright ({{ opens a flow mapping), so placeholders are found in
// the text before parsing, each replaced by a sentinel word, and reported afterwards at
// the field path where its sentinel ended up.

var (
	placeholderRe = regexp.MustCompile(`\{\{.*?\}\}|<[A-Z][A-Z0-9_]*>|<[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+>|&lt;[A-Za-z][A-Za-z0-9_-]*&gt;`)
	// helmControlRe matches a line holding only Helm actions (if/range/end/include...):
	// they expand to YAML structure, not to a value, so the line is dropped.
	helmControlRe = regexp.MustCompile(`^\s*(\{\{-?.*?-?\}\}\s*)+$`)
	// envVarRe finds ${VAR} left for envsubst, outside scripts (see scriptPath).
	envVarRe   = regexp.MustCompile(`\$\{[A-Z][A-Z0-9_]*\}`)
	sentinelRe = regexp.MustCompile(`__JOINERPH[0-9]+__`)
)

const sentinelPrefix = "__JOINERPH"

// placeholders maps the sentinels of one document to the text they replaced.
type placeholders struct {
	texts []string
	// env is set when the document may hold ${VAR}.
	env bool
	// dropped are Helm control lines removed from the text.
	dropped []string
}

// prescan replaces every placeholder in text by a sentinel and drops Helm control lines.
func prescan(text string) (string, *placeholders) {
	// (An escape sequence may spell "$" too.)
	ph := &placeholders{env: strings.Contains(text, "${") || strings.Contains(text, "\\")}
	if !strings.Contains(text, "<") && !strings.Contains(text, "{{") && !strings.Contains(text, "&lt;") {
		return text, ph
	}
	lines := strings.SplitAfter(text, "\n")
	for i, line := range lines {
		if !strings.Contains(line, "{{") && !strings.Contains(line, "<") && !strings.Contains(line, "&lt;") {
			continue
		}
		body := strings.TrimRight(line, "\r\n")
		if helmControlRe.MatchString(body) && !isValueAction(body) {
			ph.dropped = append(ph.dropped, strings.TrimSpace(body))
			lines[i] = line[len(body):] // keep the line break so line numbers hold
			continue
		}
		lines[i] = placeholderRe.ReplaceAllStringFunc(line, func(m string) string {
			if strings.HasPrefix(m, "&lt;") {
				m = "<" + strings.TrimSuffix(strings.TrimPrefix(m, "&lt;"), "&gt;") + ">"
			}
			ph.texts = append(ph.texts, m)
			return sentinelPrefix + strconv.Itoa(len(ph.texts)-1) + "__"
		})
	}
	return strings.Join(lines, ""), ph
}

// isValueAction reports whether a line holding only a Helm action is a list item or a
// scalar (such as "- {{ .Values.x }}"), which yields a value rather than structure.
func isValueAction(line string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, "- ") && !strings.Contains(t, "{{-")
}

// restore puts the original placeholder text back in place of sentinels.
func (ph *placeholders) restore(s string) string {
	if !strings.Contains(s, sentinelPrefix) {
		return s
	}
	return sentinelRe.ReplaceAllStringFunc(s, func(m string) string {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(m, sentinelPrefix), "__"))
		if err != nil || n < 0 || n >= len(ph.texts) {
			return m
		}
		return ph.texts[n]
	})
}

// found is one placeholder occurrence at a field path.
type found struct {
	path, text string
}

// find walks a decoded document and returns each placeholder (sentinel or ${VAR}) with
// its field path; a path holding the same placeholder twice is listed once. Map keys
// holding sentinels have them restored, so paths read as the author wrote them.
func (ph *placeholders) find(v any) []found {
	if len(ph.texts) == 0 && !ph.env {
		return nil // nothing to find: no sentinel and no ${ in the text
	}
	var out []found
	seen := map[found]bool{}
	add := func(path, text string) {
		f := found{path, text}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	// walk returns v with Joiner's own userData placeholders put back.
	var walk func(v any, path string) any
	walk = func(v any, path string) any {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				val := x[k]
				if strings.Contains(k, sentinelPrefix) {
					rk := ph.restore(k)
					delete(x, k)
					x[rk] = val
					for _, m := range sentinelRe.FindAllString(k, -1) {
						add(karpenter.MapKeyPath(path, rk), ph.restore(m))
					}
					k = rk
				}
				x[k] = walk(val, karpenter.MapKeyPath(path, k))
			}
		case []any:
			for i, item := range x {
				x[i] = walk(item, itemPath(path, i))
			}
		case string:
			ours := 0
			for _, m := range sentinelRe.FindAllString(x, -1) {
				if text := ph.restore(m); joinerPlaceholder(path, text) {
					ours++
				} else {
					add(path, text)
				}
			}
			if ours > 0 && ours == len(sentinelRe.FindAllString(x, -1)) {
				return ph.restore(x)
			}
			if strings.Contains(x, "${") && !scriptPath(path) {
				for _, m := range envVarRe.FindAllString(x, -1) {
					add(path, m)
				}
			}
		}
		return v
	}
	walk(v, "")
	return out
}

// joinerPlaceholder reports whether text is one of the {{ .Name }} placeholders
// Joiner fills in an EC2NodeClass's userData (bootstrap.Placeholders), which are
// meant to stay in the manifest.
func joinerPlaceholder(path, text string) bool {
	if path != "spec.userData" {
		return false
	}
	names, err := bootstrap.Placeholders(text)
	return err == nil && len(names) == 1
}

// scriptPath reports whether a path holds free-form script text (userData, container
// commands and environment), where ${VAR} is shell syntax rather than a placeholder.
func scriptPath(path string) bool {
	for _, s := range []string{"userData", ".command", ".args", ".env[", ".env.", ".script"} {
		if strings.Contains(path, s) {
			return true
		}
	}
	return false
}

// placeholderMessage says what to do about an unfilled placeholder.
func placeholderMessage(text string) string {
	switch {
	case strings.HasPrefix(text, "{{"):
		return "unfilled placeholder " + text + ": render the Helm chart (helm template) or write the value"
	case strings.HasPrefix(text, "${"):
		return "unfilled placeholder " + text + ": substitute it (for example with envsubst) or write the value"
	}
	return "unfilled placeholder " + text + ": replace it with the real value"
}
