// Package jsonerr words encoding/json's errors for the people who wrote the input.
//
// encoding/json describes a mismatch in Go's terms ("cannot unmarshal object into
// Go struct field FaultScript.ice of type []awssim.Offering", "Go value of type
// struct { Region *string ... }"): the reader wrote JSON or YAML and knows neither
// the struct nor its package. Describe says the field path and the JSON shape that
// was expected instead ("ice: want a list, got an object"), and where a syntax
// error is.
package jsonerr

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// Describe returns err reworded for people; data, when given, is the document, so
// a syntax error can say its line and column. Errors that are not encoding/json's
// are returned unchanged.
func Describe(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &syn):
		if strings.HasSuffix(syn.Error(), "unexpected end of JSON input") {
			if data != nil && len(bytes.TrimSpace(data)) == 0 {
				return errors.New("empty document")
			}
			return errors.New("invalid JSON: unexpected end of input")
		}
		if data == nil {
			return fmt.Errorf("invalid JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
		}
		// Offset counts the offending byte as read; point at that byte.
		line, col := LineCol(data, max(syn.Offset-1, 0))
		return fmt.Errorf("invalid JSON at line %d, column %d: %s", line, col, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the document"
		}
		return fmt.Errorf("%s: want %s, got %s", field, Shape(typ.Type), got(typ.Value))
	case errors.Is(err, io.EOF):
		return errors.New("empty document")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON: unexpected end of input")
	}
	var perr *time.ParseError
	if errors.As(err, &perr) {
		return fmt.Errorf("invalid time %q: want %s", perr.Value, Shape(timeType))
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "Time.UnmarshalJSON: ") {
		return fmt.Errorf("want %s", Shape(timeType))
	}
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", rest)
	}
	return err
}

// LineCol converts a byte offset of data into a 1-based line and column.
func LineCol(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

// Shape names the JSON a Go type reads, as a person would write it: "a list", "an
// object", "a string", "a whole number", ...
func Shape(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return "a time such as \"2026-12-01T09:00:00Z\""
	case reflect.PointerTo(t).Implements(textUnmarshaler) && t.Kind() != reflect.Slice && t.Kind() != reflect.Map:
		return "a string"
	}
	switch t.Kind() {
	case reflect.Struct:
		return "an object"
	case reflect.Map:
		return "an object (a mapping)"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("a whole number from %d to %d", -(int64(1) << (t.Bits() - 1)), int64(1)<<(t.Bits()-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if t.Bits() == 64 {
			return "a whole number from 0 to 18446744073709551615"
		}
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<t.Bits()-1)
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Interface:
		return "a value"
	}
	return "a value"
}

// got names what encoding/json found ("object", "array", "number 1.5", ...).
func got(v string) string {
	kind, detail, _ := strings.Cut(v, " ")
	switch kind {
	case "object":
		return "an object"
	case "array":
		return "a list"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "number":
		if detail != "" {
			return "the number " + detail
		}
		return "a number"
	case "null":
		return "null"
	}
	return v
}
