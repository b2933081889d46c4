package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"sigs.k8s.io/yaml"
)

// rawDoc is one document of a file before it is read as an object.
type rawDoc struct {
	index int
	// line is the file line the document starts on, for YAML error messages.
	line int
	tree any
	ph   *placeholders
	err  string
}

// AddFile reads one file's content into the bundle; name is how problems refer to it.
func (b *Bundle) AddFile(name string, data []byte) {
	b.Files = append(b.Files, FileSummary{File: name})
	text := strings.TrimPrefix(string(data), "\ufeff")
	var docs []rawDoc
	var chunks []string
	if docs = splitJSON(text); docs == nil {
		docs, chunks = splitYAML(text)
	}
	// Documents are independent until they meet the bundle: parse, check and decode
	// each on every core, buffering what it would do to the bundle, then apply those
	// effects document by document in file order, so that problems, duplicates and
	// the order of objects are exactly as if they had been read one after another.
	ctxs := make([]*docCtx, len(docs))
	parallel(len(docs), func(i int) {
		if chunks != nil {
			parseYAMLDoc(&docs[i], chunks[i])
		}
		ctxs[i] = b.decodeDoc(name, docs[i])
		if recycleTrees && !ctxs[i].retains {
			recycleTree(docs[i].tree)
			docs[i].tree = nil
		}
	})
	for _, d := range ctxs {
		b.Files[len(b.Files)-1].Documents++
		d.apply()
	}
}

// recycleTrees is off only in the test that compares both ways.
var recycleTrees = true

// looksJSON reports whether text starts (after blanks) with { or [.
func looksJSON(text string) bool {
	t := strings.TrimLeft(text, " \t\r\n")
	return t != "" && (t[0] == '{' || t[0] == '[')
}

// splitJSON reads text as a sequence of JSON values, one document each. It returns nil
// when the text is not JSON, so that it is read as YAML instead (YAML's flow style
// accepts most near-JSON, such as a Helm action left unquoted).
func splitJSON(text string) []rawDoc {
	if !looksJSON(text) {
		return nil
	}
	sub, ph := prescan(text)
	dec := json.NewDecoder(strings.NewReader(sub))
	dec.UseNumber()
	var docs []rawDoc
	for {
		var v any
		err := dec.Decode(&v)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil
		}
		docs = append(docs, rawDoc{index: len(docs) + 1, line: 1, tree: v, ph: ph})
	}
	if len(docs) == 0 {
		return nil
	}
	return docs
}

var yamlLineRe = regexp.MustCompile(`line (\d+)`)

// splitYAML cuts text at "---" lines into its non-empty documents, to be parsed by
// parseYAMLDoc. Documents holding only blanks and comments are not counted. The
// documents are substrings of text (only a "--- value" line is rewritten): a
// large file is not copied line by line.
func splitYAML(text string) ([]rawDoc, []string) {
	var docs []rawDoc
	var chunks []string
	start, startLine := 0, 1 // where the current document starts
	lead := ""               // the value of a "--- value" line that opened it
	flush := func(end int) {
		chunk := text[start:end]
		if lead != "" {
			chunk = lead + chunk
		}
		if chunk == "" || isBlankYAML(chunk) {
			return
		}
		docs = append(docs, rawDoc{index: len(docs) + 1, line: startLine})
		chunks = append(chunks, chunk)
	}
	line := 0
	for off := 0; off < len(text); {
		line++
		end := len(text)
		if nl := strings.IndexByte(text[off:], '\n'); nl >= 0 {
			end = off + nl + 1
		}
		t := strings.TrimRight(text[off:end], " \t\r\n")
		if t == "---" || strings.HasPrefix(t, "--- ") || strings.HasPrefix(t, "---\t") || t == "..." {
			flush(off)
			start, startLine, lead = end, line+1, ""
			if rest := strings.TrimSpace(strings.TrimPrefix(t, "---")); rest != "" && rest != "..." && !strings.HasPrefix(rest, "#") {
				// "--- value" starts the document on the separator line itself.
				lead, startLine = rest+"\n", line
			}
		}
		off = end
	}
	flush(len(text))
	return docs, chunks
}

// parseYAMLDoc fills a document's tree (or error) from its text.
func parseYAMLDoc(rd *rawDoc, chunk string) {
	sub, ph := prescan(chunk)
	rd.ph = ph
	if tree, ok := fastYAML(sub); ok {
		rd.tree = tree
		return
	}
	tree, err := slowYAML(sub)
	var jerr reparseError
	switch {
	case errors.As(err, &jerr):
		rd.err = "invalid YAML: " + jerr.Error()
		return
	case err != nil:
		rd.err = yamlError(err, rd.line)
		return
	}
	rd.tree = tree
}

// slowYAML parses any YAML document the way Kubernetes tools do (yaml.v2, strict,
// through JSON), into the tree fastYAML also produces.
func slowYAML(text string) (any, error) {
	j, err := yaml.YAMLToJSONStrict([]byte(text))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, reparseError{err}
	}
	return tree, nil
}

// reparseError is the JSON that YAML was converted to failing to parse back.
type reparseError struct{ error }

// parallel runs fn(0..n-1) on up to GOMAXPROCS goroutines.
func parallel(n int, fn func(i int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

func isBlankYAML(chunk string) bool {
	for l := range strings.Lines(chunk) {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

// yamlError makes a parser error one line, with line numbers counted in the file.
func yamlError(err error, firstLine int) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = yamlLineRe.ReplaceAllStringFunc(msg, func(m string) string {
		n, err := strconv.Atoi(strings.TrimPrefix(m, "line "))
		if err != nil {
			return m
		}
		return "line " + strconv.Itoa(n+firstLine-1)
	})
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
	return "invalid YAML: " + msg
}

// decodeDoc reads one document, recovering from any panic so that one document can
// never take the others down (the fuzz test makes sure this never fires). It may run
// concurrently with other documents: what it does to the bundle is buffered in the
// returned context until apply.
func (b *Bundle) decodeDoc(file string, rd rawDoc) (d *docCtx) {
	d = &docCtx{b: b, src: Source{File: file, Doc: rd.index}, ph: rd.ph, buffer: true}
	defer func() {
		if r := recover(); r != nil {
			d.root().errorf("", "internal error while reading this document (please report it): %v", r)
		}
	}()
	if rd.err != "" {
		o := d.root()
		o.errorf("", "%s", rd.err)
		for _, t := range rd.ph.texts {
			o.errorf("", "%s", placeholderMessage(t))
		}
		return
	}
	for _, l := range rd.ph.dropped {
		d.root().errorf("", "Helm template line %s must be rendered first: run helm template and validate its output", l)
	}
	d.tree(rd.tree, "")
	return d
}

// docCtx is one document being read.
type docCtx struct {
	b   *Bundle
	src Source
	ph  *placeholders
	// buffer is set while the document is read off the bundle's goroutine: effects
	// on the bundle wait in effects for apply.
	buffer  bool
	effects []func()
	// retains is set when a kind other than Pods and workloads was read: their
	// decoders are not audited for references into the tree. Pods and workloads
	// (by far the most numerous) and documents that failed or were skipped keep
	// only copies, so their trees are recycled.
	retains bool
}

// later runs f, which touches the bundle, now or, while buffering, in apply.
func (d *docCtx) later(f func()) {
	if d.buffer {
		d.effects = append(d.effects, f)
		return
	}
	f()
}

// apply performs the buffered effects in order; effects that report problems report
// them directly from now on.
func (d *docCtx) apply() {
	d.buffer = false
	defer func() {
		if r := recover(); r != nil {
			d.root().errorf("", "internal error while reading this document (please report it): %v", r)
		}
	}()
	for _, f := range d.effects {
		f()
	}
	d.effects = nil
}

func (d *docCtx) root() *objCtx { return &objCtx{d: d} }

// objCtx is one object being read: problems go to the bundle with the object's path
// prefix (set for List items), and a path already reported (a placeholder, an unknown
// field) suppresses further problems at or below it, so each mistake is told once.
type objCtx struct {
	d          *docCtx
	prefix     string
	suppressed map[string]bool
	errors     int
}

// path is a field path under the object's prefix.
func (o *objCtx) path(path string) string {
	if o.prefix == "" {
		return path
	}
	if path == "" {
		return o.prefix
	}
	return o.prefix + "." + path
}

func (o *objCtx) add(path, msg string, warning bool) {
	if o.isSuppressed(path) {
		return
	}
	p := Problem{File: o.d.src.File, Doc: o.d.src.Doc, Path: o.path(path), Message: msg, Warning: warning}
	b := o.d.b
	o.d.later(func() { b.addProblem(p) })
	if !warning {
		o.errors++
	}
}

// addRuntime records an error that keeps the object (see Problem.Runtime).
func (o *objCtx) addRuntime(path, msg string) {
	if o.isSuppressed(path) {
		return
	}
	p := Problem{File: o.d.src.File, Doc: o.d.src.Doc, Path: o.path(path), Message: msg, Runtime: true}
	b := o.d.b
	o.d.later(func() { b.addProblem(p) })
}

func (o *objCtx) errorf(path, format string, args ...any) {
	o.add(path, fmt.Sprintf(format, args...), false)
}
func (o *objCtx) warnf(path, format string, args ...any) {
	o.add(path, fmt.Sprintf(format, args...), true)
}

func (o *objCtx) suppress(path string) {
	if o.suppressed == nil {
		o.suppressed = map[string]bool{}
	}
	o.suppressed[path] = true
}

func (o *objCtx) isSuppressed(path string) bool {
	if len(o.suppressed) == 0 {
		return false
	}
	for p := path; ; {
		if o.suppressed[p] {
			return true
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			return false
		}
		p = p[:i]
	}
}

// tree reads a decoded document: an object, a List of objects, or (in JSON) an array.
func (d *docCtx) tree(v any, prefix string) {
	switch x := v.(type) {
	case nil:
	case []any:
		for i, item := range x {
			d.tree(item, itemPath(prefix, i))
		}
	case map[string]any:
		d.object(x, prefix)
	default:
		o := &objCtx{d: d, prefix: prefix}
		o.errorf("", "not a Kubernetes object: expected a mapping with apiVersion and kind, got %s", describe(v))
	}
}

// decodeTyped checks obj strictly against T's schema, reporting and dropping what does
// not fit, then decodes what is left.
func decodeTyped[T any](o *objCtx, obj map[string]any, hints map[string]hint, lenientStatus bool) *T {
	out := new(T)
	rt := reflect.TypeOf(out).Elem()
	if q := (&walker{quick: true}); q.walk(obj, rt, "") && !q.failed {
		if assign(obj, reflect.ValueOf(out).Elem()) == nil {
			return out
		}
		out = new(T)
	}
	// What the walker reports it drops, so checks that follow would only repeat it.
	w := &walker{report: func(p, m string) { o.errorf(p, "%s", m); o.suppress(p) }}
	w.unknown = func(parent, field string, value any, m map[string]any, names []string) string {
		if h, ok := hints[normalizePath(childPath(parent, field))]; ok {
			msg, related := h(value, m)
			for _, r := range related {
				o.suppress(r)
			}
			return fmt.Sprintf("unknown field %q: %s", field, msg)
		}
		return ""
	}
	if lenientStatus {
		w.lenient = func(p string) bool {
			return p == "status" || strings.HasPrefix(p, "status.") || strings.HasPrefix(p, "status[")
		}
	}
	w.walk(obj, rt, "")
	if assign(obj, reflect.ValueOf(out).Elem()) == nil {
		return out
	}
	// encoding/json has the last word, and the exact message.
	out = new(T)
	data, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		o.errorf("", "cannot decode this object: %v", err)
	}
	return out
}
