package packer

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"
)

// WriteJSON writes the plan as encoding/json would (compact, one trailing newline,
// the same bytes), but streaming: on plans of thousands of nodes encoding/json's
// reflection over every label map and pod name cost as much as planning. Nodes of one
// offering share their Labels and Allocatable maps, so each shared map is rendered
// once.
func (p *Plan) WriteJSON(w io.Writer) error {
	bw, ok := w.(*bufio.Writer)
	if !ok {
		bw = bufio.NewWriterSize(w, 1<<16)
	}
	e := planEncoder{w: bw, maps: map[uintptr][]byte{}}
	e.raw(`{"region":`)
	e.str(p.Region)
	e.raw(`,"newNodes":`)
	if p.NewNodes == nil {
		e.raw("null")
	} else {
		e.byte('[')
		for i := range p.NewNodes {
			if i > 0 {
				e.byte(',')
			}
			e.newNode(&p.NewNodes[i])
		}
		e.byte(']')
	}
	e.raw(`,"existingNodes":`)
	if p.ExistingNodes == nil {
		e.raw("null")
	} else {
		e.byte('[')
		for i, n := range p.ExistingNodes {
			if i > 0 {
				e.byte(',')
			}
			e.raw(`{"name":`)
			e.str(n.Name)
			if n.InFlight {
				e.raw(`,"inFlight":true`)
			}
			e.raw(`,"pods":`)
			e.strs(n.Pods)
			e.byte('}')
		}
		e.byte(']')
	}
	e.raw(`,"unschedulable":`)
	if p.Unschedulable == nil {
		e.raw("null")
	} else {
		e.byte('[')
		for i, u := range p.Unschedulable {
			if i > 0 {
				e.byte(',')
			}
			e.raw(`{"pod":`)
			e.str(u.Pod)
			e.raw(`,"reason":`)
			e.str(u.Reason)
			e.byte('}')
		}
		e.byte(']')
	}
	e.raw(`,"totalPricePerHour":`)
	e.float(p.TotalPricePerHour)
	e.raw("}\n")
	if e.err != nil {
		return e.err
	}
	return bw.Flush()
}

type planEncoder struct {
	w   *bufio.Writer
	buf []byte
	err error
	// maps holds the rendering of each shared map, by its address.
	maps map[uintptr][]byte
}

func (e *planEncoder) raw(s string) { e.w.WriteString(s) }
func (e *planEncoder) byte(c byte)  { e.w.WriteByte(c) }

func (e *planEncoder) newNode(n *NewNode) {
	e.raw(`{"name":`)
	e.str(n.Name)
	e.raw(`,"nodePool":`)
	e.str(n.NodePool)
	e.raw(`,"nodeClass":`)
	e.str(n.NodeClass)
	e.raw(`,"instanceType":`)
	e.str(n.InstanceType)
	e.raw(`,"capacityType":`)
	e.str(n.CapacityType)
	if n.CapacityReservationID != "" {
		e.raw(`,"capacityReservationID":`)
		e.str(n.CapacityReservationID)
	}
	e.raw(`,"zone":`)
	e.str(n.Zone)
	e.raw(`,"pricePerHour":`)
	e.float(n.PricePerHour)
	e.raw(`,"options":`)
	e.strs(n.Options)
	e.raw(`,"labels":`)
	e.stringMap(n.Labels)
	if len(n.Taints) > 0 {
		e.raw(`,"taints":`)
		e.marshal(n.Taints)
	}
	e.raw(`,"allocatable":`)
	e.stringMap(n.Allocatable)
	e.raw(`,"pods":`)
	e.strs(n.Pods)
	if len(n.Requirements) > 0 {
		e.raw(`,"requirements":[`)
		for i, r := range n.Requirements {
			if i > 0 {
				e.byte(',')
			}
			e.raw(`{"key":`)
			e.str(r.Key)
			e.raw(`,"operator":`)
			e.str(string(r.Operator))
			if len(r.Values) > 0 {
				e.raw(`,"values":`)
				e.strs(r.Values)
			}
			if r.MinValues != nil {
				e.raw(`,"minValues":`)
				e.w.WriteString(strconv.Itoa(*r.MinValues))
			}
			e.byte('}')
		}
		e.byte(']')
	}
	if n.Explain != "" {
		e.raw(`,"explain":`)
		e.str(n.Explain)
	}
	e.byte('}')
}

// marshal writes a rarely present or small value with encoding/json.
func (e *planEncoder) marshal(v any) {
	b, err := json.Marshal(v)
	if err != nil && e.err == nil {
		e.err = err
	}
	e.w.Write(b)
}

func (e *planEncoder) strs(ss []string) {
	if ss == nil {
		e.raw("null")
		return
	}
	e.byte('[')
	for i, s := range ss {
		if i > 0 {
			e.byte(',')
		}
		e.str(s)
	}
	e.byte(']')
}

// stringMap writes a map with sorted keys, rendering each shared map once.
func (e *planEncoder) stringMap(m map[string]string) {
	if m == nil {
		e.raw("null")
		return
	}
	ptr := uintptr(reflect.ValueOf(m).UnsafePointer())
	if b, ok := e.maps[ptr]; ok {
		e.w.Write(b)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	b = append(b, '}')
	e.maps[ptr] = b
	e.w.Write(b)
}

func (e *planEncoder) str(s string) {
	e.buf = appendJSONString(e.buf[:0], s)
	e.w.Write(e.buf)
}

// float writes f as encoding/json does.
func (e *planEncoder) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		if e.err == nil {
			e.err = &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
		}
		return
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(e.buf[:0], f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	e.buf = b
	e.w.Write(b)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes it (HTML characters,
// U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
