package manifest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/joiner-autoscaler/joiner/shared/karpenter"
)

// The schema walker checks a decoded document (JSON-shaped: map[string]any, []any,
// string, json.Number, bool, nil) against the Go type it will be decoded into, the way
// encoding/json would read it, but reporting every unknown field and every mistyped
// value at its field path instead of stopping at the first. Whatever it reports it also
// removes from the document, so the typed decode that follows always succeeds and the
// semantic checks still see the rest of the object.

var (
	quantityType    = reflect.TypeOf(resource.Quantity{})
	intOrStringType = reflect.TypeOf(intstr.IntOrString{})
	timeType        = reflect.TypeOf(metav1.Time{})
	microTimeType   = reflect.TypeOf(metav1.MicroTime{})
	metaDuration    = reflect.TypeOf(metav1.Duration{})
	unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
)

// structInfo is a struct type's JSON field table, with embedded (inline) structs flattened.
type structInfo struct {
	fields map[string]reflect.Type
	names  []string
}

var structInfos sync.Map // reflect.Type → *structInfo

func infoFor(t reflect.Type) *structInfo {
	if v, ok := structInfos.Load(t); ok {
		return v.(*structInfo)
	}
	si := &structInfo{fields: map[string]reflect.Type{}}
	addFields(si, t)
	for n := range si.fields {
		si.names = append(si.names, n)
	}
	sort.Strings(si.names)
	v, _ := structInfos.LoadOrStore(t, si)
	return v.(*structInfo)
}

func addFields(si *structInfo, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(si, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		si.fields[name] = f.Type
	}
}

// walker carries one document's walk.
type walker struct {
	// report records an error at path (the caller decides whether it is suppressed).
	report func(path, msg string)
	// unknown explains an unknown field at path (whose parent struct knows names), or
	// returns "" for the generic message.
	unknown func(path, field string, value any, parent map[string]any, names []string) string
	// lenient reports whether unknown fields under path are to be ignored (status).
	lenient func(path string) bool
	// pruned is set when anything was removed from the document.
	pruned bool
	// quick makes a walk that only answers whether the document is clean: it stops
	// at the first problem (setting failed), reports nothing, removes nothing, and
	// builds no paths. Nearly every document is clean, and then the full walk, with
	// its sorted keys and paths, is not needed.
	quick, failed bool
}

// fail records a problem: reported, or in a quick walk, noted.
func (w *walker) fail(path, msg string) {
	if w.quick {
		w.failed = true
		return
	}
	w.report(path, msg)
}

func (w *walker) item(path string, i int) string {
	if w.quick {
		return ""
	}
	return itemPath(path, i)
}

// implementsUnmarshaler caches whether *t implements json.Unmarshaler.
func implementsUnmarshaler(t reflect.Type) bool {
	if v, ok := unmarshalerTypes.Load(t); ok {
		return v.(bool)
	}
	ok := reflect.PointerTo(t).Implements(unmarshalerType)
	unmarshalerTypes.Store(t, ok)
	return ok
}

var unmarshalerTypes sync.Map // reflect.Type → bool

func childPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func itemPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// walk checks v against t and reports whether v may stay in the document.
func (w *walker) walk(v any, t reflect.Type, path string) bool {
	if v == nil || w.failed {
		return true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case quantityType:
		return w.quantity(v, path)
	case intOrStringType:
		switch x := v.(type) {
		case string:
			return true
		case json.Number:
			if _, err := strconv.ParseInt(x.String(), 10, 32); err == nil {
				return true
			}
		}
		w.fail(path, fmt.Sprintf("must be a whole number or a string such as \"25%%\", got %s", describe(v)))
		return false
	case metaDuration:
		s, ok := v.(string)
		if !ok {
			w.fail(path, fmt.Sprintf("must be a duration string such as \"1h\" or \"30m\", got %s", describe(v)))
			return false
		}
		if _, err := time.ParseDuration(s); err != nil {
			w.fail(path, fmt.Sprintf("invalid duration %q: write a value such as 30s, 5m or 1h30m", s))
			return false
		}
		return true
	case timeType, microTimeType:
		s, ok := v.(string)
		if !ok {
			w.fail(path, fmt.Sprintf("must be an RFC 3339 time such as \"2024-01-02T15:04:05Z\", got %s", describe(v)))
			return false
		}
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			w.fail(path, fmt.Sprintf("invalid time %q: write an RFC 3339 time such as \"2024-01-02T15:04:05Z\"", s))
			return false
		}
		return true
	}
	if t.Kind() != reflect.Map && t.Kind() != reflect.Slice && implementsUnmarshaler(t) {
		b, err := json.Marshal(v)
		if err == nil {
			err = reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(b)
		}
		if err != nil {
			w.fail(path, err.Error())
			return false
		}
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			w.fail(path, fmt.Sprintf("must be a mapping (key: value), got %s", describe(v)))
			return false
		}
		si := infoFor(t)
		if w.quick {
			// Nothing is removed in a quick walk: the map can be ranged over as is.
			for k, v := range m {
				ft, known := si.fields[k]
				if !known {
					w.failed = true
					return true
				}
				if !w.walk(v, ft, "") {
					return false
				}
			}
			return true
		}
		for _, k := range sortedKeys(m) { // problems come in a stable order
			p := childPath(path, k)
			ft, known := si.fields[k]
			if !known {
				if w.lenient != nil && w.lenient(p) {
					delete(m, k)
					w.pruned = true
					continue
				}
				msg := ""
				if w.unknown != nil {
					msg = w.unknown(path, k, m[k], m, si.names)
				}
				if msg == "" {
					msg = genericUnknown(k, si.names)
				}
				w.report(p, msg)
				delete(m, k)
				w.pruned = true
				continue
			}
			if !w.walk(m[k], ft, p) {
				delete(m, k)
				w.pruned = true
			}
		}
		return true
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			w.fail(path, fmt.Sprintf("must be a mapping (key: value), got %s", describe(v)))
			return false
		}
		if w.quick {
			for _, v := range m {
				if !w.walk(v, t.Elem(), "") {
					return false
				}
			}
			return true
		}
		for _, k := range sortedKeys(m) { // problems come in a stable order
			if !w.walk(m[k], t.Elem(), karpenter.MapKeyPath(path, k)) {
				delete(m, k)
				w.pruned = true
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			if _, ok := v.(string); !ok {
				w.fail(path, fmt.Sprintf("must be a base64 string, got %s", describe(v)))
				return false
			}
			return true
		}
		list, ok := v.([]any)
		if !ok {
			w.fail(path, fmt.Sprintf("must be a list (each entry on its own line starting with \"- \", or [a, b]), got %s", describe(v)))
			return false
		}
		for i, item := range list {
			if !w.walk(item, t.Elem(), w.item(path, i)) {
				if w.quick {
					return false
				}
				list[i] = nil
				w.pruned = true
			}
		}
		return true
	case reflect.String:
		switch x := v.(type) {
		case string:
			return true
		case json.Number:
			w.fail(path, fmt.Sprintf("must be a string; quote it: \"%s\"", x.String()))
		case bool:
			w.fail(path, fmt.Sprintf("must be a string; quote it: \"%t\"", x))
		default:
			w.fail(path, fmt.Sprintf("must be a string, got %s", describe(v)))
		}
		return false
	case reflect.Bool:
		if _, ok := v.(bool); ok {
			return true
		}
		if s, ok := v.(string); ok && (s == "true" || s == "false") {
			w.fail(path, fmt.Sprintf("must be true or false without quotes: write %s", s))
		} else {
			w.fail(path, fmt.Sprintf("must be true or false, got %s", describe(v)))
		}
		return false
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return w.integer(v, path, func(s string) error { _, err := strconv.ParseInt(s, 10, t.Bits()); return err })
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return w.integer(v, path, func(s string) error { _, err := strconv.ParseUint(s, 10, t.Bits()); return err })
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); ok {
			return true
		}
		w.fail(path, fmt.Sprintf("must be a number, got %s", describe(v)))
		return false
	case reflect.Interface:
		return true
	}
	w.fail(path, fmt.Sprintf("cannot read %s here", describe(v)))
	return false
}

func (w *walker) integer(v any, path string, parse func(string) error) bool {
	switch x := v.(type) {
	case json.Number:
		if parse(x.String()) == nil {
			return true
		}
		w.fail(path, fmt.Sprintf("must be a whole number in range, got %s", x.String()))
	case string:
		if parse(strings.TrimSpace(x)) == nil {
			w.fail(path, fmt.Sprintf("must be a number, not a string: write %s without quotes", strings.TrimSpace(x)))
		} else {
			w.fail(path, fmt.Sprintf("must be a whole number, got %q", x))
		}
	default:
		w.fail(path, fmt.Sprintf("must be a whole number, got %s", describe(v)))
	}
	return false
}

func (w *walker) quantity(v any, path string) bool {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	default:
		w.fail(path, fmt.Sprintf("must be a quantity such as 500m, 2, 512Mi or 1Gi, got %s", describe(v)))
		return false
	}
	if _, err := resource.ParseQuantity(strings.TrimSpace(s)); err != nil {
		w.fail(path, fmt.Sprintf("invalid quantity %q: write a number with an optional unit, such as 500m, 2, 512Mi or 1Gi", s))
		return false
	}
	return true
}

// describe names a JSON value's shape for messages.
func describe(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return fmt.Sprintf("the string %q", x)
	case json.Number:
		return "the number " + x.String()
	case bool:
		return fmt.Sprintf("%t", x)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func genericUnknown(field string, names []string) string {
	msg := fmt.Sprintf("unknown field %q", field)
	if c := karpenter.Closest(field, names...); c != "" {
		return msg + fmt.Sprintf("; did you mean %q?", c)
	}
	if len(names) <= 12 {
		return msg + "; delete it (fields here: " + strings.Join(names, ", ") + ")"
	}
	return msg + "; delete it or check its spelling and indentation"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
