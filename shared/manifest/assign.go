package manifest

import (
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/resource"
)

// assign decodes a checked document tree (what the schema walker left) straight into
// a typed object, as encoding/json would decode the tree's JSON form, without
// rendering and re-reading that JSON: for manifests of thousands of pods that round
// trip cost more than planning. Whatever it is not sure to decode exactly as
// encoding/json would (custom unmarshalers other than Quantity, interfaces, byte
// slices, nulls into values) goes through encoding/json for that value alone. It
// returns an error whenever encoding/json would fail; the caller then decodes the
// whole object through encoding/json for its exact message.
func assign(v any, rv reflect.Value) error {
	t := rv.Type()
	if v == nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
			rv.SetZero()
			return nil
		}
		return viaJSON(v, rv)
	}
	switch t {
	case quantityType:
		q, direct, err := quantityOf(v)
		if !direct {
			return viaJSON(v, rv)
		}
		if err != nil {
			return err
		}
		rv.Set(reflect.ValueOf(q))
		return nil
	case resourceListType:
		// Requests and limits: built as a typed map, not entry by entry through
		// reflection.
		m, ok := v.(map[string]any)
		if !ok {
			return viaJSON(v, rv)
		}
		if rv.IsNil() {
			rv.Set(reflect.ValueOf(make(corev1.ResourceList, len(m))))
		}
		dst := rv.Interface().(corev1.ResourceList)
		for k, x := range m {
			q, direct, err := quantityOf(x)
			if !direct {
				return errFallback
			}
			if err != nil {
				return err
			}
			dst[corev1.ResourceName(k)] = q
		}
		return nil
	}
	if t.Kind() == reflect.Pointer {
		if rv.IsNil() {
			rv.Set(reflect.New(t.Elem()))
		}
		return assign(v, rv.Elem())
	}
	if customDecoded(t) {
		return viaJSON(v, rv)
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return viaJSON(v, rv)
		}
		fields := fieldsFor(t)
		for k, x := range m {
			f, ok := fields[k]
			if !ok || f.index == nil {
				// encoding/json matches names case-insensitively; the walker reported
				// and removed every key that is not an exact match, so this is not
				// expected: leave it to encoding/json.
				return errFallback
			}
			fv, err := fieldByIndex(rv, f.index)
			if err != nil {
				return err
			}
			if f.quoted {
				if err := viaJSONField(x, rv, k); err != nil {
					return err
				}
				continue
			}
			if err := assign(x, fv); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String || reflect.PointerTo(t.Key()).Implements(textUnmarshalerType) {
			return viaJSON(v, rv)
		}
		if rv.IsNil() {
			rv.Set(reflect.MakeMapWithSize(t, len(m)))
		}
		et := t.Elem()
		// Strings into a map of strings (labels, annotations, nodeSelector) are the
		// common case: no reflection per entry beyond the set.
		if et.Kind() == reflect.String && t.Key() == stringType && et == stringType {
			dst := rv.Interface().(map[string]string)
			for k, x := range m {
				s, ok := x.(string)
				if !ok {
					if x == nil {
						dst[k] = ""
						continue
					}
					return errFallback
				}
				dst[k] = s
			}
			return nil
		}
		for k, x := range m {
			ev := reflect.New(et).Elem()
			if err := assign(x, ev); err != nil {
				return err
			}
			rv.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
		}
		return nil
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok || t.Elem().Kind() == reflect.Uint8 {
			return viaJSON(v, rv)
		}
		s := reflect.MakeSlice(t, len(list), len(list))
		for i, x := range list {
			if err := assign(x, s.Index(i)); err != nil {
				return err
			}
		}
		rv.Set(s)
		return nil
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return viaJSON(v, rv)
		}
		rv.SetString(s)
		return nil
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return viaJSON(v, rv)
		}
		rv.SetBool(b)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return viaJSON(v, rv)
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || rv.OverflowInt(i) {
			return viaJSON(v, rv)
		}
		rv.SetInt(i)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			return viaJSON(v, rv)
		}
		u, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil || rv.OverflowUint(u) {
			return viaJSON(v, rv)
		}
		rv.SetUint(u)
		return nil
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			return viaJSON(v, rv)
		}
		f, err := strconv.ParseFloat(string(n), t.Bits())
		if err != nil || rv.OverflowFloat(f) {
			return viaJSON(v, rv)
		}
		rv.SetFloat(f)
		return nil
	}
	return viaJSON(v, rv)
}

// quantityOf parses a tree value the way Quantity.UnmarshalJSON would; direct is
// false when only encoding/json can say (escaped strings, other types).
func quantityOf(v any) (q resource.Quantity, direct bool, err error) {
	var s string
	switch x := v.(type) {
	case string:
		if jsonEscapes(x) {
			return q, false, nil // Quantity.UnmarshalJSON parses the escaped form
		}
		s = strings.TrimSpace(x)
	case json.Number:
		s = string(x)
	default:
		return q, false, nil
	}
	q, err = resource.ParseQuantity(s)
	return q, true, err
}

var (
	resourceListType    = reflect.TypeOf(corev1.ResourceList{})
	errFallback         = errors.New("not decoded directly")
	stringType          = reflect.TypeOf("")
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// jsonEscapes reports whether encoding/json would escape any byte of s.
func jsonEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return true
		}
	}
	return false
}

// viaJSON decodes one value through encoding/json.
func viaJSON(v any, rv reflect.Value) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, rv.Addr().Interface())
}

// viaJSONField decodes one field of a struct through encoding/json (for fields with
// options such as ",string" that change how the value is read).
func viaJSONField(v any, structVal reflect.Value, name string) error {
	data, err := json.Marshal(map[string]any{name: v})
	if err != nil {
		return err
	}
	return json.Unmarshal(data, structVal.Addr().Interface())
}

// customDecoded reports whether encoding/json reads t with its own UnmarshalJSON or
// UnmarshalText rather than by its kind.
func customDecoded(t reflect.Type) bool {
	if v, ok := customTypes.Load(t); ok {
		return v.(bool)
	}
	pt := reflect.PointerTo(t)
	c := pt.Implements(unmarshalerType) || pt.Implements(textUnmarshalerType) ||
		(t.Kind() == reflect.Interface)
	customTypes.Store(t, c)
	return c
}

var customTypes sync.Map // reflect.Type → bool

// field is how to reach one JSON field of a struct.
type field struct {
	index  []int
	quoted bool // the ",string" option
}

var fieldTables sync.Map // reflect.Type → map[string]field

// fieldsFor lists a struct type's JSON fields by exact name, embedded structs without a
// name of their own flattened, as the schema walker sees them.
func fieldsFor(t reflect.Type) map[string]field {
	if v, ok := fieldTables.Load(t); ok {
		return v.(map[string]field)
	}
	out := map[string]field{}
	var add func(t reflect.Type, prefix []int)
	add = func(t reflect.Type, prefix []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), prefix...), i)
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					add(ft, idx)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := out[name]; dup {
				// encoding/json's rules for names defined twice (depth, tags) are
				// left to encoding/json itself.
				out[name] = field{}
				continue
			}
			quoted := false
			for _, o := range strings.Split(opts, ",") {
				quoted = quoted || o == "string"
			}
			out[name] = field{index: idx, quoted: quoted}
		}
	}
	add(t, nil)
	v, _ := fieldTables.LoadOrStore(t, out)
	return v.(map[string]field)
}

// fieldByIndex returns the field at index, allocating embedded pointers on the way.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, error) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !v.CanSet() {
					return reflect.Value{}, errFallback
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, nil
}
