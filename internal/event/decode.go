package event

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Payloads are decoded on every read of a log, so DecodePayload has a fast
// path: a decoder for the JSON that EncodePayload writes (one flat object
// whose keys are the payload's fields), built per payload type from its
// struct tags. It gives up, and encoding/json decodes instead, on anything
// else: an unknown or escaped key, a JSON null where encoding/json would
// keep a previous value, an invalid or lone-surrogate string, a number its
// field cannot hold, malformed JSON. So what it returns is what
// encoding/json would return (FuzzDecodePayload holds it to that), only
// sooner: a sixth of the time for a message delta, in a quarter of the
// allocations.

// fieldKind is what a payload field holds, as the fast path decodes it.
type fieldKind uint8

const (
	kindString  fieldKind = iota // a string kind
	kindInt                      // an int kind
	kindFloat                    // float64
	kindBool                     // bool
	kindIntPtr                   // a pointer to an int kind
	kindRaw                      // json.RawMessage
	kindStrings                  // []string
	kindFloats                   // []float64
	kindPairs                    // [][2]string
)

// payloadField is one field of a payload struct: its JSON key and where it
// is.
type payloadField struct {
	key   string
	index int
	kind  fieldKind
}

// payloadCodec is the fast decoder of one payload type.
type payloadCodec struct {
	typ    reflect.Type
	fields []payloadField
	// scalars says every field is a string, an int, a float or a bool.
	scalars bool
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	stringsType    = reflect.TypeFor[[]string]()
	floatsType     = reflect.TypeFor[[]float64]()
	pairsType      = reflect.TypeFor[[][2]string]()
)

// newPayloadCodec returns the fast decoder of struct type t, or nil if a
// field is one it does not decode (the type then always goes through
// encoding/json).
func newPayloadCodec(t reflect.Type) *payloadCodec {
	if t.Kind() != reflect.Struct {
		return nil
	}
	c := &payloadCodec{typ: t}
	seen := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil // encoding/json's embedding rules: not here
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		for opt := range strings.SplitSeq(opts, ",") {
			if opt == "string" {
				return nil
			}
		}
		if name == "" {
			name = f.Name
		}
		if seen[name] {
			return nil
		}
		seen[name] = true
		var kind fieldKind
		switch ft := f.Type; {
		case ft == rawMessageType:
			kind = kindRaw
		case ft == stringsType:
			kind = kindStrings
		case ft == floatsType:
			kind = kindFloats
		case ft == pairsType:
			kind = kindPairs
		case ft.Kind() == reflect.String:
			kind = kindString
		case ft.Kind() == reflect.Float64:
			kind = kindFloat
		case ft.Kind() == reflect.Bool:
			kind = kindBool
		case isInt(ft.Kind()):
			kind = kindInt
		case ft.Kind() == reflect.Pointer && isInt(ft.Elem().Kind()):
			kind = kindIntPtr
		default:
			return nil
		}
		c.fields = append(c.fields, payloadField{key: name, index: i, kind: kind})
	}
	c.scalars = !slices.ContainsFunc(c.fields, func(f payloadField) bool { return f.kind > kindBool })
	return c
}

func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}

// decodeFast decodes data as a T, or reports false if it is not JSON the
// fast path takes. In a payload of up to maxShared bytes, unescaped strings
// are slices of data, so they cost no allocation of their own; in a larger
// one each is a copy, so that keeping a short field does not keep the
// payload.
//
// A payload whose fields are all scalars is decoded into a T on the stack,
// so that returning it is its only allocation. Setting a pointer or slice
// field through reflect makes the value escape, so any other payload is
// decoded into a new T, and copied into the interface.
func decodeFast[T Payload](c *payloadCodec, data string) (Payload, bool) {
	d := scanner{s: data, clone: len(data) > maxShared}
	if c.scalars {
		var v T
		if !c.decodeScalars(&d, reflect.ValueOf(&v).Elem()) {
			return nil, false
		}
		return v, true
	}
	v := reflect.New(c.typ).Elem()
	if !c.decode(&d, v) {
		return nil, false
	}
	return v.Interface().(Payload), true
}

// decodeScalars reads an object into v, whose fields are all scalars.
func (c *payloadCodec) decodeScalars(d *scanner, v reflect.Value) bool {
	more, ok := d.open()
	for ; ok && more; more, ok = d.more() {
		f := c.member(d)
		if f == nil || !d.scalar(v.Field(f.index), f.kind) {
			return false
		}
	}
	return ok && d.end()
}

// decode reads an object into v.
func (c *payloadCodec) decode(d *scanner, v reflect.Value) bool {
	more, ok := d.open()
	for ; ok && more; more, ok = d.more() {
		f := c.member(d)
		if f == nil || !d.value(v.Field(f.index), f.kind) {
			return false
		}
	}
	return ok && d.end()
}

// member reads the key of an object member, and the colon after it, and
// returns its field; nil if there is none.
func (c *payloadCodec) member(d *scanner) *payloadField {
	key, ok := d.key()
	if !ok || !d.next(':') {
		return nil
	}
	return c.field(key)
}

func (c *payloadCodec) field(key string) *payloadField {
	for i := range c.fields {
		if c.fields[i].key == key {
			return &c.fields[i]
		}
	}
	return nil
}
