package main

// The Go types of go-jsonschema's output, read back from its source so
// that the encoder generator (encode.go) knows each field's kind, tag and
// options.

import (
	"fmt"
	"go/ast"
	"go/token"
	"reflect"
	"strconv"
	"strings"
	"unicode"
)

// goKind is the kind of a Go type in go-jsonschema's output, as far as
// encoding/json tells kinds apart.
type goKind int

const (
	kString goKind = iota + 1
	kBool
	kInt   // int, int8 ... int64
	kUint  // uint, uint8 ... uint64
	kFloat // float64
	kRaw   // json.RawMessage
	kAny   // interface{}
	kPtr
	kSlice
	kMap   // map[string]Elem
	kNamed // a type declared in the package: a struct, a union, a map
)

// goType is a field's Go type.
type goType struct {
	Kind goKind
	Name string  // kNamed: the declared name; kInt, kUint: the Go type
	Elem *goType // kPtr, kSlice, kMap
}

// parseGoType reads the Go types go-jsonschema writes: predeclared
// scalars, pointers, slices, maps with string keys, json.RawMessage,
// interface{} and the package's own types. Anything else is an error, so
// that no type gets an encoder that might differ from encoding/json's.
func parseGoType(e ast.Expr) (*goType, error) {
	switch e := e.(type) {
	case *ast.Ident:
		switch n := e.Name; n {
		case "string":
			return &goType{Kind: kString}, nil
		case "bool":
			return &goType{Kind: kBool}, nil
		case "int", "int8", "int16", "int32", "int64":
			return &goType{Kind: kInt, Name: n}, nil
		case "uint", "uint16", "uint32", "uint64":
			return &goType{Kind: kUint, Name: n}, nil
		case "float64":
			return &goType{Kind: kFloat}, nil
		case "any":
			return &goType{Kind: kAny}, nil
		case "float32", "uint8", "byte", "uintptr", "rune", "complex64", "complex128", "error":
			return nil, fmt.Errorf("no generated encoder for %s", n)
		default:
			return &goType{Kind: kNamed, Name: n}, nil
		}
	case *ast.StarExpr:
		elem, err := parseGoType(e.X)
		if err != nil {
			return nil, err
		}
		return &goType{Kind: kPtr, Elem: elem}, nil
	case *ast.ArrayType:
		if e.Len != nil {
			return nil, fmt.Errorf("no generated encoder for arrays")
		}
		elem, err := parseGoType(e.Elt)
		if err != nil {
			return nil, err
		}
		if elem.Kind == kUint && elem.Name == "uint8" {
			return nil, fmt.Errorf("no generated encoder for []byte")
		}
		return &goType{Kind: kSlice, Elem: elem}, nil
	case *ast.MapType:
		if k, ok := e.Key.(*ast.Ident); !ok || k.Name != "string" {
			return nil, fmt.Errorf("no generated encoder for maps whose keys are not strings")
		}
		elem, err := parseGoType(e.Value)
		if err != nil {
			return nil, err
		}
		if elem.Kind != kAny {
			return nil, fmt.Errorf("no generated encoder for maps of other values than interface{}")
		}
		return &goType{Kind: kMap, Elem: elem}, nil
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "json" && e.Sel.Name == "RawMessage" {
			return &goType{Kind: kRaw}, nil
		}
	case *ast.InterfaceType:
		if len(e.Methods.List) == 0 {
			return &goType{Kind: kAny}, nil
		}
	}
	return nil, fmt.Errorf("no generated encoder for %T", e)
}

// structField reads one struct field and its json tag as encoding/json
// reads them.
func structField(fl *ast.Field) (goStructField, error) {
	if len(fl.Names) != 1 {
		return goStructField{}, fmt.Errorf("no generated encoder for embedded or grouped fields")
	}
	t, err := parseGoType(fl.Type)
	if err != nil {
		return goStructField{}, fmt.Errorf("field %s: %w", fl.Names[0].Name, err)
	}
	f := goStructField{Name: fl.Names[0].Name, Type: t}
	if !token.IsExported(f.Name) {
		return f, nil
	}
	var tag string
	if fl.Tag != nil {
		raw, err := strconv.Unquote(fl.Tag.Value)
		if err != nil {
			return goStructField{}, fmt.Errorf("field %s: tag: %w", f.Name, err)
		}
		tag = reflect.StructTag(raw).Get("json")
	}
	if tag == "-" {
		return f, nil
	}
	name, opts, _ := strings.Cut(tag, ",")
	if !validTagName(name) {
		name = ""
	}
	f.JSON = name
	if f.JSON == "" {
		f.JSON = f.Name
	}
	for _, o := range strings.Split(opts, ",") {
		switch o {
		case "omitempty":
			f.OmitEmpty = true
		case "omitzero":
			f.OmitZero = true
		case "string":
			return goStructField{}, fmt.Errorf("field %s: no generated encoder for the string option", f.Name)
		}
	}
	return f, nil
}

// validTagName is encoding/json's test of a tag's name: one it refuses
// leaves the field under its Go name.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
