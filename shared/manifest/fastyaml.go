package manifest

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// fastYAML parses the plain subset of YAML that manifests are written in (block
// mappings and sequences, one-line flow collections, plain and one-line quoted
// scalars, comments) straight into the tree the slow path (yaml.v2 → JSON →
// encoding/json with UseNumber) produces: map[string]any, []any, string, bool,
// json.Number, nil. Reading a document through three parsers dominated `joiner
// plan` on large inputs; this reads it once.
//
// It never reports errors: on anything outside the subset (anchors, tags, block or
// multi-line scalars, tabs, non-ASCII text, duplicate keys, malformed input) it
// returns ok=false and the caller takes the slow path, which produces the exact
// value or error message. So every document it accepts must parse to exactly what
// the slow path gives; FuzzFastYAML checks that.
func fastYAML(text string) (tree any, ok bool) {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c >= 0x80 || c == 0x7f || (c < 0x20 && c != '\n') {
			return nil, false
		}
	}
	buf := linePool.Get().(*[]fline)
	p := fastParser{lines: (*buf)[:0]}
	defer func() {
		*buf = p.lines[:0]
		linePool.Put(buf)
	}()
	p.split(text)
	if p.bad || len(p.lines) == 0 {
		return nil, false
	}
	tree = p.block(p.lines[0].indent)
	if p.bad || p.i != len(p.lines) {
		return nil, false
	}
	if _, isMap := tree.(map[string]any); !isMap {
		if _, isList := tree.([]any); !isList {
			return nil, false
		}
	}
	return tree, true
}

// fline is one line holding content: its indentation and its text without the
// indentation, trailing blanks or line break.
type fline struct {
	indent int
	text   string
}

// mapPool recycles the mappings of documents whose tree was consumed whole (see
// recycleTree): allocating a map per YAML mapping was the largest single cost of
// reading a big file, in CPU and in fresh pages.
var mapPool = sync.Pool{New: func() any { return make(map[string]any, 4) }}

// recycleTree returns tree's mappings to mapPool. Only for trees nothing refers
// to any more: the caller must have copied out everything it keeps.
func recycleTree(tree any) {
	switch x := tree.(type) {
	case map[string]any:
		for _, v := range x {
			recycleTree(v)
		}
		clear(x)
		mapPool.Put(x)
	case []any:
		for _, v := range x {
			recycleTree(v)
		}
	}
}

// linePool recycles the line index of each document: the tree keeps substrings
// of the text, never the index.
var linePool = sync.Pool{New: func() any { return new([]fline) }}

type fastParser struct {
	lines []fline
	i     int
	bad   bool
	depth int
}

// maxFastDepth bounds how deeply the fast parser nests (yaml.v2 stops at 10,000):
// a deeper document goes to the slow path, which reports it, instead of growing
// the stack without limit on hostile input.
const maxFastDepth = 1000

// enter descends one level, marking the document bad past maxFastDepth.
func (p *fastParser) enter() bool {
	p.depth++
	if p.depth > maxFastDepth {
		p.bad = true
		return false
	}
	return true
}

func (p *fastParser) leave() { p.depth-- }

func (p *fastParser) split(text string) {
	if n := strings.Count(text, "\n") + 1; cap(p.lines) < n {
		p.lines = make([]fline, 0, n)
	}
	for len(text) > 0 {
		var line string
		if j := strings.IndexByte(text, '\n'); j >= 0 {
			line, text = text[:j], text[j+1:]
		} else {
			line, text = text, ""
		}
		ind := 0
		for ind < len(line) && line[ind] == ' ' {
			ind++
		}
		body := strings.TrimRight(line[ind:], " ")
		if body == "" || body[0] == '#' {
			continue
		}
		if ind == 0 && (body[0] == '%' || strings.HasPrefix(body, "---") || strings.HasPrefix(body, "...")) {
			p.bad = true
			return
		}
		p.lines = append(p.lines, fline{ind, body})
	}
}

// block reads the block node starting at the current line, whose indentation is n.
func (p *fastParser) block(n int) any {
	if !p.enter() {
		return nil
	}
	defer p.leave()
	l := p.lines[p.i]
	if isSeqItem(l.text) {
		return p.sequence(n)
	}
	return p.mapping(n)
}

func isSeqItem(s string) bool { return s[0] == '-' && (len(s) == 1 || s[1] == ' ') }

// mapping reads a block mapping whose keys are indented n.
func (p *fastParser) mapping(n int) any {
	m := mapPool.Get().(map[string]any)
	for !p.bad && p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < n {
			break
		}
		if l.indent > n || isSeqItem(l.text) {
			p.bad = true
			break
		}
		key, rest, isKey := p.key(l.text)
		if p.bad {
			break
		}
		if !isKey {
			p.bad = true
			break
		}
		if _, dup := m[key]; dup {
			p.bad = true
			break
		}
		p.i++
		m[key] = p.value(rest, n, true)
	}
	return m
}

// sequence reads a block sequence whose dashes are indented n.
func (p *fastParser) sequence(n int) any {
	list := make([]any, 0, 2)
	for !p.bad && p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < n {
			break
		}
		if l.indent > n || !isSeqItem(l.text) {
			if l.indent > n {
				p.bad = true
			}
			break
		}
		rest := strings.TrimLeft(l.text[1:], " ")
		col := n + len(l.text) - len(rest)
		if rest == "" || rest[0] == '#' {
			p.i++
			list = append(list, p.nested(n, false))
			continue
		}
		if isSeqItem(rest) {
			p.bad = true // "- - x"
			break
		}
		if _, _, isKey := p.key(rest); isKey && !p.bad {
			// "- key: value" opens a mapping indented at the key's column.
			p.lines[p.i] = fline{col, rest}
			list = append(list, p.mapping(col))
			continue
		}
		if p.bad {
			break
		}
		p.i++
		list = append(list, p.value(rest, n, false))
	}
	return list
}

// value reads what follows "key:" or "- " on the current line (rest, consumed) and,
// when that is empty, the nested block on the lines that follow. n is the
// indentation of the key or dash; inMapping allows a sequence at the same indentation.
func (p *fastParser) value(rest string, n int, inMapping bool) any {
	if rest == "" || rest[0] == '#' {
		return p.nested(n, inMapping)
	}
	var v any
	var after string
	switch rest[0] {
	case '[', '{':
		v, after = p.flow(rest)
	case '"', '\'':
		var s string
		s, after = p.quoted(rest)
		v = s
	default:
		var s string
		// A plain scalar runs to the end of the line or to a " #" comment.
		s, _ = p.plain(rest, false)
		if p.bad {
			return nil
		}
		v = p.resolve(s)
	}
	if p.bad {
		return nil
	}
	// Only a comment, after a blank, may follow a quoted scalar or a flow collection.
	if t := strings.TrimLeft(after, " "); t != "" && (t[0] != '#' || len(t) == len(after)) {
		p.bad = true
		return nil
	}
	// A more indented line after an inline value would continue a multi-line scalar.
	if p.i < len(p.lines) && p.lines[p.i].indent > n {
		p.bad = true
	}
	return v
}

// nested reads the block under a key or dash with nothing after it: a more indented
// block, a sequence at the key's own indentation, or nothing (null).
func (p *fastParser) nested(n int, inMapping bool) any {
	if p.i >= len(p.lines) {
		return nil
	}
	l := p.lines[p.i]
	switch {
	case l.indent > n:
		return p.block(l.indent)
	case l.indent == n && inMapping && isSeqItem(l.text):
		return p.sequence(n)
	}
	return nil
}

// key reads "key:" at the start of s: the key and what follows the colon. isKey is
// false when s holds a value rather than a key.
func (p *fastParser) key(s string) (key, rest string, isKey bool) {
	var after string
	switch s[0] {
	case '"', '\'':
		key, after = p.quoted(s)
		if p.bad {
			return "", "", false
		}
		after = strings.TrimLeft(after, " ")
		if after == "" || after[0] != ':' {
			return "", "", false
		}
		if len(after) > 1 && after[1] != ' ' {
			p.bad = true
			return "", "", false
		}
	case '[', '{', '?', '&', '*', '!', '|', '>', '%', '@', '`', ',', ']', '}', '#':
		return "", "", false
	default:
		j := plainColon(s)
		if j < 0 {
			return "", "", false
		}
		key = strings.TrimRight(s[:j], " ")
		after = s[j:]
		if key == "" || strings.Contains(key, " #") || !plainStartOK(key, false) {
			p.bad = true
			return "", "", false
		}
		if r := p.resolve(key); r != key {
			p.bad = true // a key that reads as a number, bool, null or merge
			return "", "", false
		}
	}
	if len(key) > 1000 {
		p.bad = true
		return "", "", false
	}
	return key, strings.TrimLeft(after[1:], " "), true
}

// plainColon finds the ":" that ends a plain key (followed by a blank or the end),
// or -1; a " #" before it starts a comment, so there is none.
func plainColon(s string) int {
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case ':':
			if j+1 == len(s) || s[j+1] == ' ' {
				return j
			}
		case '#':
			if j > 0 && s[j-1] == ' ' {
				return -1
			}
		}
	}
	return -1
}

// plainStartOK reports whether a plain scalar may start as s does.
func plainStartOK(s string, flow bool) bool {
	switch s[0] {
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	case '-', '?', ':':
		if len(s) == 1 || s[1] == ' ' {
			return false
		}
		if flow && s[0] != '-' {
			return false
		}
	}
	return true
}

// plain reads a plain scalar at the start of s, returning it and the rest of the line.
func (p *fastParser) plain(s string, flow bool) (string, string) {
	if !plainStartOK(s, flow) {
		p.bad = true
		return "", ""
	}
	j := 0
	for ; j < len(s); j++ {
		c := s[j]
		if c == ':' {
			if j+1 == len(s) || s[j+1] == ' ' {
				// "key: a: b" is an error; in flow context ": " ends the key.
				if !flow {
					p.bad = true
					return "", ""
				}
				break
			}
			if flow {
				p.bad = true
				return "", ""
			}
		}
		if c == '#' && j > 0 && s[j-1] == ' ' {
			break
		}
		if flow && (c == ',' || c == '[' || c == ']' || c == '{' || c == '}' || c == '?') {
			if c != ',' && c != ']' && c != '}' {
				p.bad = true
				return "", ""
			}
			break
		}
	}
	return strings.TrimRight(s[:j], " "), s[j:]
}

// quoted reads a one-line single- or double-quoted scalar at the start of s.
func (p *fastParser) quoted(s string) (string, string) {
	q := s[0]
	var b []byte
	start := 1
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case q == '\'' && c == '\'':
			if j+1 < len(s) && s[j+1] == '\'' {
				b = append(b, s[start:j+1]...)
				j++
				start = j + 1
				continue
			}
			return finishQuoted(b, s[start:j]), s[j+1:]
		case q == '"' && c == '"':
			return finishQuoted(b, s[start:j]), s[j+1:]
		case q == '"' && c == '\\':
			if j+1 >= len(s) {
				p.bad = true
				return "", ""
			}
			b = append(b, s[start:j]...)
			j++
			switch s[j] {
			case '\\', '"', '/':
				b = append(b, s[j])
			case 'n':
				b = append(b, '\n')
			case 't':
				b = append(b, '\t')
			case 'r':
				b = append(b, '\r')
			case '0':
				b = append(b, 0)
			default:
				p.bad = true
				return "", ""
			}
			start = j + 1
		}
	}
	p.bad = true // unterminated on this line
	return "", ""
}

func finishQuoted(b []byte, tail string) string {
	if b == nil {
		return tail
	}
	return string(append(b, tail...))
}

// flow reads a one-line flow sequence or mapping at the start of s.
func (p *fastParser) flow(s string) (any, string) {
	if !p.enter() {
		return nil, ""
	}
	defer p.leave()
	open := s[0]
	s = strings.TrimLeft(s[1:], " ")
	if open == '[' {
		list := make([]any, 0, 2)
		if strings.HasPrefix(s, "]") {
			return list, s[1:]
		}
		for !p.bad {
			var v any
			v, s = p.flowNode(s)
			if p.bad {
				break
			}
			list = append(list, v)
			s = strings.TrimLeft(s, " ")
			if s == "" {
				break
			}
			switch s[0] {
			case ']':
				return list, s[1:]
			case ',':
				s = strings.TrimLeft(s[1:], " ")
				if s == "" || s[0] == ']' || s[0] == ',' {
					p.bad = true
				}
				continue
			}
			p.bad = true
		}
		p.bad = true
		return nil, ""
	}
	m := make(map[string]any, 2)
	if strings.HasPrefix(s, "}") {
		return m, s[1:]
	}
	for !p.bad {
		var key string
		switch {
		case s == "":
			p.bad = true
			return nil, ""
		case s[0] == '"' || s[0] == '\'':
			key, s = p.quoted(s)
		default:
			key, s = p.plain(s, true)
			if !p.bad && (key == "" || p.resolve(key) != key) {
				p.bad = true
			}
		}
		if p.bad {
			break
		}
		if _, dup := m[key]; dup || len(key) > 1000 {
			p.bad = true
			break
		}
		s = strings.TrimLeft(s, " ")
		if !strings.HasPrefix(s, ": ") {
			p.bad = true // "{a}", "{a:b}" and "{a:}" are left to the slow path
			break
		}
		s = strings.TrimLeft(s[1:], " ")
		var v any
		v, s = p.flowNode(s)
		if p.bad {
			break
		}
		m[key] = v
		s = strings.TrimLeft(s, " ")
		if s == "" {
			break
		}
		switch s[0] {
		case '}':
			return m, s[1:]
		case ',':
			s = strings.TrimLeft(s[1:], " ")
			if s == "" || s[0] == '}' || s[0] == ',' {
				p.bad = true
			}
			continue
		}
		p.bad = true
	}
	p.bad = true
	return nil, ""
}

// flowNode reads one value inside a flow collection.
func (p *fastParser) flowNode(s string) (any, string) {
	if s == "" {
		p.bad = true
		return nil, ""
	}
	switch s[0] {
	case '[', '{':
		return p.flow(s)
	case '"', '\'':
		v, rest := p.quoted(s)
		if t := strings.TrimLeft(rest, " "); strings.HasPrefix(t, ":") {
			p.bad = true // a single-pair mapping inside a sequence
		}
		return v, rest
	case ',', ']', '}':
		p.bad = true
		return nil, ""
	}
	v, rest := p.plain(s, true)
	if p.bad {
		return nil, ""
	}
	if strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "#") {
		p.bad = true
		return nil, ""
	}
	return p.resolve(v), rest
}

var yamlStyleFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// resolve types a plain scalar as yaml.v2 does and then renders it as encoding/json
// would read its JSON form back (numbers as json.Number). What the slow path would
// reject or turn into something else (NaN, infinities, merge keys, binary) is bad.
func (p *fastParser) resolve(s string) any {
	if s == "" {
		return nil
	}
	switch s[0] {
	case 'y', 'Y', 'n', 'N', 't', 'T', 'f', 'F', 'o', 'O', '~':
		switch s {
		case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
			return true
		case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
			return false
		case "~", "null", "Null", "NULL":
			return nil
		}
		return s
	case '.':
		switch s {
		case ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF":
			p.bad = true
			return nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return p.float(f)
		}
		return s
	case '<':
		if s == "<<" {
			p.bad = true
			return nil
		}
		return s
	case '+', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
	default:
		return s
	}
	switch s {
	case "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF":
		p.bad = true
		return nil
	}
	// Timestamps stay strings (yaml.v2 keeps them as text in an interface{}), and
	// no timestamp reads as a number below, so they need no test of their own.
	if !numeric(s) {
		return s // quantities ("500m", "4Gi") and the like: no parse attempts
	}
	plain := s
	if strings.IndexByte(s, '_') >= 0 {
		plain = strings.ReplaceAll(s, "_", "")
	}
	if isDecimal(plain) {
		return json.Number(plain)
	}
	if v, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return json.Number(strconv.FormatInt(v, 10))
	}
	if v, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return json.Number(strconv.FormatUint(v, 10))
	}
	if yamlStyleFloat.MatchString(plain) {
		if f, err := strconv.ParseFloat(plain, 64); err == nil {
			return p.float(f)
		}
	}
	if strings.HasPrefix(plain, "0b") || strings.HasPrefix(plain, "-0b") {
		p.bad = true
		return nil
	}
	return s
}

// numeric reports whether s holds only characters some YAML or Go number syntax
// uses (digits, signs, '.', '_', exponents, hex digits and base prefixes).
func numeric(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		case c == '+', c == '-', c == '.', c == '_', c == 'x', c == 'X', c == 'o', c == 'O':
		default:
			return false
		}
	}
	return true
}

// isDecimal reports whether s is a decimal integer that yaml.v2 and encoding/json
// both render unchanged: no sign but "-", no leading zero, within int64.
func isDecimal(s string) bool {
	d := s
	if strings.HasPrefix(d, "-") {
		d = d[1:]
	}
	if d == "" || len(d) > 18 || (d[0] == '0' && (len(d) > 1 || len(s) > 1)) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// float renders f as encoding/json does.
func (p *fastParser) float(f float64) any {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		p.bad = true
		return nil
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(nil, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return json.Number(b)
}
