package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/atombender/go-jsonschema/pkg/generator"
)

// Union is a oneOf property: a struct wrapping one of several variant types.
type Union struct {
	Name     string
	Disc     string    // discriminating property
	Variants []*Schema // file roots, in document order
	Doc      string
}

// goStruct is what the generator learns back from go-jsonschema's output:
// for each struct, its fields by JSON name.
type goStruct struct {
	Name   string
	Fields map[string]goField
}

// goDecl is one type declaration of go-jsonschema's output, as the
// encoder generator needs it: a struct's fields in declaration order (the
// order encoding/json writes them), or another declaration's underlying
// type.
type goDecl struct {
	Name   string
	Struct bool
	Fields []goStructField // for a struct
	Type   *goType         // for any other declaration
}

// goStructField is one field of a struct and how encoding/json treats
// it.
type goStructField struct {
	Name      string // Go name
	JSON      string // member name; "" for a field encoding/json skips
	OmitEmpty bool
	OmitZero  bool
	Type      *goType
}

type goField struct {
	Name string
	Type string // Go source of the field's type
}

// typeGen turns the protocol's schema files into Go types with go-jsonschema.
//
// go-jsonschema writes plain structs with encoding/json tags and no runtime
// of its own, which is what we want protocol code to handle. It drops a
// oneOf (it cannot express a union) and knows nothing of our validation needs,
// so the schemas are rewritten before it sees them: each oneOf becomes a
// named union type that this generator writes itself, "any JSON" becomes
// json.RawMessage, and the keywords only the validators need are left out.
type typeGen struct {
	pkg     string
	loader  *loader
	unions  []*Union
	byName  map[string]*Union
	structs map[string]*goStruct
	decls   []*goDecl // in the order go-jsonschema declared them
}

func newTypeGen(pkg string, l *loader) *typeGen {
	return &typeGen{pkg: pkg, loader: l, byName: map[string]*Union{}, structs: map[string]*goStruct{}}
}

// generate returns the source of types_gen.go.
func (g *typeGen) generate() ([]byte, error) {
	files := append([]string(nil), g.loader.order...)
	sort.Strings(files)
	root := commonDir(files)
	tmp, err := os.MkdirTemp("", "asyncapigen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	var rewritten []string
	for _, f := range files {
		s := g.loader.files[f]
		m, err := g.rewrite(s, f, s.Title, true)
		if err != nil {
			return nil, err
		}
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		out := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			return nil, err
		}
		rewritten = append(rewritten, out)
	}

	var warnings []string
	gen, err := generator.New(generator.Config{
		DefaultPackageName:  g.pkg,
		DefaultOutputName:   "types_gen.go",
		StructNameFromTitle: true,
		OnlyModels:          true,
		Tags:                []string{"json"},
		Capitalizations:     []string{"ID", "URL", "JSON", "UI", "API", "HTTP", "UUID", "MS"},
		Warner:              func(w string) { warnings = append(warnings, w) },
	})
	if err != nil {
		return nil, err
	}
	for _, f := range rewritten {
		if err := gen.DoFile(f); err != nil {
			return nil, fmt.Errorf("go-jsonschema: %w", err)
		}
	}
	srcs, err := gen.Sources()
	if err != nil {
		return nil, fmt.Errorf("go-jsonschema: %w", err)
	}
	if len(warnings) > 0 {
		return nil, fmt.Errorf("go-jsonschema warned: %s", strings.Join(warnings, "; "))
	}
	src, ok := srcs["types_gen.go"]
	if !ok || len(srcs) != 1 {
		return nil, fmt.Errorf("go-jsonschema: expected one output file, got %d", len(srcs))
	}
	if err := g.learn(src); err != nil {
		return nil, err
	}
	return src, nil
}

// rewrite returns the JSON Schema that go-jsonschema sees for s. name is the
// Go name s's type will get, used to name unions inside it.
func (g *typeGen) rewrite(s *Schema, file, name string, isRoot bool) (map[string]any, error) {
	m := map[string]any{}
	if isRoot {
		m["$schema"] = "http://json-schema.org/draft-07/schema#"
	}
	if s.Description != "" {
		m["description"] = s.Description
	}
	switch {
	case s.Ref != nil:
		rel, err := filepath.Rel(filepath.Dir(file), s.Ref.File)
		if err != nil {
			return nil, err
		}
		m["$ref"] = filepath.ToSlash(rel)
		return m, nil
	case len(s.OneOf) > 0:
		u, err := g.union(s, name)
		if err != nil {
			return nil, err
		}
		m["goJSONSchema"] = map[string]any{"type": u.Name, "pointer": false}
		return m, nil
	case s.Type() == "":
		m["goJSONSchema"] = map[string]any{"type": "json.RawMessage", "imports": []string{"encoding/json"}, "nillable": true}
		return m, nil
	}
	if s.Title != "" {
		m["title"] = s.Title
		name = s.Title
	}
	m["type"] = s.Type()
	switch s.Type() {
	case "object":
		if s.Values != nil {
			return nil, fmt.Errorf("%s: additionalProperties as a schema is supported in OpenAPI documents only", s.where())
		}
		props := map[string]any{}
		for _, p := range s.Props {
			ps, err := g.rewrite(p.Schema, file, name+exportName(p.Name), false)
			if err != nil {
				return nil, err
			}
			props[p.Name] = ps
		}
		m["properties"] = props
		if len(s.Required) > 0 {
			m["required"] = s.Required
		}
	case "array":
		if s.Items != nil {
			is, err := g.rewrite(s.Items, file, name+"Item", false)
			if err != nil {
				return nil, err
			}
			m["items"] = is
		}
	}
	return m, nil
}

// union records the union type for a oneOf schema s named name.
func (g *typeGen) union(s *Schema, name string) (*Union, error) {
	if s.Title != "" {
		name = s.Title
	}
	if u, ok := g.byName[name]; ok {
		if !reflect.DeepEqual(u.Variants, variantsOf(s)) {
			return nil, fmt.Errorf("two different unions are both named %s", name)
		}
		return u, nil
	}
	disc, err := discriminator(s)
	if err != nil {
		return nil, err
	}
	for _, v := range s.OneOf {
		if v.Ref == nil {
			return nil, fmt.Errorf("union %s: every oneOf variant must be a $ref to a schema file", name)
		}
	}
	u := &Union{Name: name, Disc: disc, Variants: variantsOf(s), Doc: s.Description}
	g.unions = append(g.unions, u)
	g.byName[name] = u
	return u, nil
}

func variantsOf(s *Schema) []*Schema {
	var out []*Schema
	for _, v := range s.OneOf {
		out = append(out, v.Resolve())
	}
	return out
}

// learn reads the struct fields go-jsonschema wrote, by JSON name.
func (g *typeGen) learn(src []byte) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "types_gen.go", src, 0)
	if err != nil {
		return fmt.Errorf("parse go-jsonschema output: %w", err)
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, sp := range gd.Specs {
			ts := sp.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				t, err := parseGoType(ts.Type)
				if err != nil {
					return fmt.Errorf("go-jsonschema output: type %s: %w", ts.Name.Name, err)
				}
				g.decls = append(g.decls, &goDecl{Name: ts.Name.Name, Type: t})
				continue
			}
			gs := &goStruct{Name: ts.Name.Name, Fields: map[string]goField{}}
			decl := &goDecl{Name: ts.Name.Name, Struct: true}
			for _, fl := range st.Fields.List {
				f, err := structField(fl)
				if err != nil {
					return fmt.Errorf("go-jsonschema output: type %s: %w", ts.Name.Name, err)
				}
				decl.Fields = append(decl.Fields, f)
				if fl.Tag == nil || len(fl.Names) != 1 {
					continue
				}
				tag := reflect.StructTag(strings.Trim(fl.Tag.Value, "`")).Get("json")
				jname, _, _ := strings.Cut(tag, ",")
				start, end := fset.Position(fl.Type.Pos()).Offset, fset.Position(fl.Type.End()).Offset
				gs.Fields[jname] = goField{Name: fl.Names[0].Name, Type: string(src[start:end])}
			}
			g.structs[gs.Name] = gs
			g.decls = append(g.decls, decl)
		}
	}
	return nil
}

// commonDir is the deepest directory holding every file.
func commonDir(files []string) string {
	dir := filepath.Dir(files[0])
	for _, f := range files[1:] {
		for !strings.HasPrefix(f, dir+string(filepath.Separator)) {
			dir = filepath.Dir(dir)
		}
	}
	return dir
}

// exportName turns a JSON name (snake_case, camelCase, dotted) into an
// exported Go identifier, with common initialisms upper-cased.
func exportName(s string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '_' || r == '.' || r == '-' || r == ' ' || r == '/' }) {
		if up := strings.ToUpper(part); initialisms[up] {
			b.WriteString(up)
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

var initialisms = map[string]bool{"ID": true, "URL": true, "JSON": true, "UI": true, "API": true, "HTTP": true, "UUID": true, "MS": true}
