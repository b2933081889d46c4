package manifest

import (
	"os"
	"strings"
	"testing"
)

// wantProblem is one expected problem: document, field path, a substring of the
// message, and whether it is a warning.
type wantProblem struct {
	doc     int
	path    string
	msg     string
	warning bool
}

// expectProblems checks that b has exactly the wanted problems (each matched by
// document, path, level and message substring), in any order.
func expectProblems(t *testing.T, b *Bundle, wants []wantProblem) {
	t.Helper()
	if len(b.Problems) != len(wants) {
		t.Errorf("got %d problems, want %d:\n%s", len(b.Problems), len(wants), dump(b))
	}
	used := make([]bool, len(b.Problems))
	for _, w := range wants {
		found := false
		for i, p := range b.Problems {
			if !used[i] && p.Doc == w.doc && p.Path == w.path && p.Warning == w.warning && strings.Contains(p.Message, w.msg) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("missing problem doc %d path %q warning=%v containing %q; got:\n%s", w.doc, w.path, w.warning, w.msg, dump(b))
		}
	}
}

func dump(b *Bundle) string {
	var s strings.Builder
	for _, p := range b.Problems {
		s.WriteString("  " + p.String() + "\n")
	}
	return s.String()
}

func decode(text string) *Bundle { return Decode("test.yaml", []byte(text)) }

func podNames(b *Bundle) []string {
	var out []string
	for _, p := range b.Pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
