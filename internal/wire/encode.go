package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Appender is a value that writes its own JSON: every type asyncapigen
// generates. AppendJSON appends to b the bytes json.Marshal writes for the
// value, without reflection, and returns the extended slice; on error it
// returns b as it was and json.Marshal's error for the same value. The
// generated Encode and MarshalJSON methods go through it, so that a
// frame's fields are never walked by reflection.
type Appender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// marshalBufs holds the scratch buffers Marshal appends into, so that a
// frame costs one allocation of its exact size whatever its length.
var marshalBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledBuf is the largest scratch buffer kept: one huge frame should
// not pin its buffer for the frames that follow.
const maxPooledBuf = 64 << 10

// Marshal returns v's JSON as a new slice: the bytes json.Marshal returns
// for v, written by v's AppendJSON into a pooled buffer and copied out.
// It is the generated Encode and MarshalJSON. It is generic so that a
// generated struct passed by value is not copied into an interface.
func Marshal[T Appender](v T) ([]byte, error) {
	p := marshalBufs.Get().(*[]byte)
	b, err := v.AppendJSON((*p)[:0])
	var out []byte
	if err == nil {
		out = bytes.Clone(b)
	}
	if cap(b) <= maxPooledBuf {
		*p = b[:0]
		marshalBufs.Put(p)
	}
	return out, err
}

// safeASCII tells the ASCII bytes AppendString writes as they are from
// those it escapes.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := byte(0x20); c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s as a JSON string, byte for byte as encoding/json
// encodes it: quotes, backslashes and control characters escaped; <, >
// and & too (its HTML-safe default); U+2028 and U+2029; and each byte of
// invalid UTF-8 as U+FFFD, so that the result is always UTF-8. It is the
// string encoder of the generated encoders and of the event log's deltas.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
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
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
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
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendFloat appends f as encoding/json writes a float64: the shortest
// decimal that reads back as f, in exponent form below 1e-6 and from 1e21
// on (as JavaScript writes numbers), with a one-digit negative exponent
// unpadded. NaN and the infinities have no JSON form: they return
// json.Marshal's *json.UnsupportedValueError.
func AppendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, &json.UnsupportedValueError{Value: reflect.ValueOf(f), Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07 -> e-7
		if n := len(b); b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// rawMessageType names json.RawMessage in the error AppendRawJSON returns,
// as encoding/json names it.
var rawMessageType = reflect.TypeFor[json.RawMessage]()

// AppendRawJSON appends raw as encoding/json writes a json.RawMessage:
// null when raw is nil, and otherwise raw compacted (whitespace between
// tokens dropped) with <, >, &, U+2028 and U+2029 in its strings escaped.
// Its other bytes are kept as they are, invalid UTF-8 included. Text that
// is not one JSON value (an empty non-nil raw among them) returns the
// *json.MarshalerError json.Marshal returns for it.
func AppendRawJSON(b []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	if !json.Valid(raw) {
		// The syntax error encoding/json's compaction reports.
		err := json.Compact(new(bytes.Buffer), raw)
		return b, &json.MarshalerError{Type: rawMessageType, Err: err}
	}
	start, inString := 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inString {
			switch c {
			case '"':
				inString = true
			case ' ', '\t', '\n', '\r':
				b = append(b, raw[start:i]...)
				start = i + 1
			}
			continue
		}
		switch {
		case c == '\\':
			i++ // an escape's next byte is ASCII and never special here
		case c == '"':
			inString = false
		case c == '<' || c == '>' || c == '&':
			b = append(b, raw[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			start = i + 1
		case c == 0xe2 && i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xa8:
			b = append(b, raw[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[raw[i+2]&0xf])
			i += 2
			start = i + 1
		}
	}
	return append(b, raw[start:]...), nil
}

// maxAnyDepth is how deep AppendAny nests maps and slices itself before it
// hands the rest to encoding/json, which detects cycles (a value decoded
// from JSON has none) and reports them as json.Marshal does.
const maxAnyDepth = 512

// AppendAny appends v as json.Marshal encodes an interface value. The
// values encoding/json decodes into an any (nil, bool, float64, string,
// []any and map[string]any) are written without reflection; anything else
// is handed to json.Marshal. It is the encoder of the generated types'
// free-form members (map[string]interface{}).
func AppendAny(b []byte, v any) ([]byte, error) {
	return appendAny(b, v, 0)
}

// AppendObject appends m as json.Marshal encodes a map[string]any: null
// when nil, otherwise its members sorted by key, each value as AppendAny
// writes it.
func AppendObject(b []byte, m map[string]any) ([]byte, error) {
	return appendObject(b, m, 0)
}

func appendAny(b []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case float64:
		return AppendFloat(b, x)
	case map[string]any:
		if depth < maxAnyDepth {
			return appendObject(b, x, depth)
		}
	case []any:
		if depth < maxAnyDepth {
			return appendArray(b, x, depth)
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

func appendObject(b []byte, m map[string]any, depth int) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	n := len(b)
	b = append(b, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, k)
		b = append(b, ':')
		if b, err = appendAny(b, m[k], depth+1); err != nil {
			return b[:n], err
		}
	}
	return append(b, '}'), nil
}

func appendArray(b []byte, a []any, depth int) ([]byte, error) {
	if a == nil {
		return append(b, "null"...), nil
	}
	n := len(b)
	b = append(b, '[')
	var err error
	for i, v := range a {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendAny(b, v, depth+1); err != nil {
			return b[:n], err
		}
	}
	return append(b, ']'), nil
}
