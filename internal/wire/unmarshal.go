package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// Unmarshal decodes an already validated frame into v, a pointer to a
// generated message type. An error here means the schema and the Go types
// disagree, which generation should prevent.
//
// Members are matched to fields by their exact names, as JSON Schema and
// the validators match them. encoding/json alone would also fill a field
// from a member whose name differs only in case ("Limit" for "limit"), so
// a frame whose "limit" passed validation could still decode with the
// value of an unvalidated "LIMIT". Unmarshal therefore drops every member
// that names no field before decoding; types that decode themselves (the
// generated unions) call Unmarshal in turn for their variants.
func Unmarshal(frame []byte, v any) error {
	parsed, err := Parse(frame)
	if err != nil {
		return err
	}
	return UnmarshalParsed(frame, parsed, v)
}

// UnmarshalParsed is Unmarshal for a frame already parsed with Parse, as
// the generated decoders have it after validating. It may modify parsed.
func UnmarshalParsed(frame []byte, parsed any, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fail(KindInternal, "", "cannot decode into %T", v)
	}
	var err error
	if dropUnnamed(parsed, rv.Type().Elem()) {
		if frame, err = json.Marshal(parsed); err != nil {
			return fail(KindInternal, "", "cannot decode: %v", err)
		}
	}
	if err := json.Unmarshal(frame, v); err != nil {
		return fail(KindInternal, "", "cannot decode: %v", err)
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// dropUnnamed removes, throughout the parsed value v, the object members
// that no field of the matching Go type t is named for exactly. It reports
// whether it removed any.
func dropUnnamed(v any, t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return false // it decodes itself, through Unmarshal where generated
	}
	dropped := false
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		fields := fieldsOf(t)
		for name, member := range obj {
			ft, ok := fields[name]
			if !ok {
				delete(obj, name)
				dropped = true
				continue
			}
			if dropUnnamed(member, ft) {
				dropped = true
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return false
		}
		for _, item := range arr {
			if dropUnnamed(item, t.Elem()) {
				dropped = true
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for _, member := range obj {
			if dropUnnamed(member, t.Elem()) {
				dropped = true
			}
		}
	}
	return dropped
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// fieldsOf returns the JSON member names of struct type t with their
// types, including those of embedded structs without a name of their own.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := make(map[string]reflect.Type)
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && tag == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for n, ft := range fieldsOf(et) {
					if _, taken := fields[n]; !taken {
						fields[n] = ft
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if !hasTag || name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	fieldCache.Store(t, fields)
	return fields
}
