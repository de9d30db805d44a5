package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Schema is the subset of JSON Schema (draft-07, and the OpenAPI 3.1
// dialect's discriminator) that agentwire's documents use, with property
// order kept as written so generated code follows the document.
type Schema struct {
	File        string // absolute path of the file this schema is the root of; "" for inline schemas
	Pointer     string // for an OpenAPI component, "#/components/schemas/<name>" in File
	Title       string
	Description string
	Types       []string // declared types without "null"
	Nullable    bool     // "null" is among the declared types
	Props       []*Prop
	Required    []string
	Closed      bool    // additionalProperties: false
	Values      *Schema // additionalProperties: a schema (OpenAPI documents only)
	Enum        []any
	Const       any
	HasConst    bool
	MinLength   *int
	MaxLength   *int
	Pattern     string
	Format      string
	Minimum     *float64
	Maximum     *float64
	ExclMinimum *float64
	Items       *Schema
	MinItems    *int
	MaxItems    *int
	OneOf       []*Schema
	Disc        *Discriminator // an OpenAPI discriminator next to OneOf
	Ref         *Schema        // resolved $ref; the other fields are empty when set
}

// Discriminator is an OpenAPI discriminator object: the property that
// tells a oneOf's variants apart and, optionally, the variant (a component
// reference) for each of its values.
type Discriminator struct {
	PropertyName string            `yaml:"propertyName"`
	Mapping      map[string]string `yaml:"mapping"`
}

// where names the schema in generated comments: its file, and its pointer
// when it is an OpenAPI component.
func (s *Schema) where() string {
	return baseName(s.File) + s.Pointer
}

// Prop is one named property of an object schema.
type Prop struct {
	Name   string
	Schema *Schema
}

// Type returns the single non-null type, or "" for "any JSON value".
func (s *Schema) Type() string {
	if len(s.Types) == 0 {
		return ""
	}
	return s.Types[0]
}

// Resolve follows $refs to the schema that carries the constraints.
func (s *Schema) Resolve() *Schema {
	for s.Ref != nil {
		s = s.Ref
	}
	return s
}

// IsRequired reports whether name is listed in required.
func (s *Schema) IsRequired(name string) bool {
	for _, r := range s.Required {
		if r == name {
			return true
		}
	}
	return false
}

// Prop returns the named property's schema, or nil.
func (s *Schema) Prop(name string) *Schema {
	for _, p := range s.Props {
		if p.Name == name {
			return p.Schema
		}
	}
	return nil
}

// loader reads schema files once each, resolving relative $refs.
type loader struct {
	files map[string]*Schema
	nodes map[string]*yaml.Node
	order []string // files in the order they were first loaded

	// The OpenAPI mode's component schemas (see loadOpenAPI), which
	// resolve references into componentsFile.
	components     map[string]*Schema
	componentNodes map[string]*yaml.Node
	componentsFile string
}

func newLoader() *loader {
	return &loader{files: map[string]*Schema{}, nodes: map[string]*yaml.Node{}}
}

// load returns the root schema of file (an absolute path).
func (l *loader) load(file string) (*Schema, error) {
	if s, ok := l.files[file]; ok {
		return s, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fmt.Errorf("%s: not a single document", file)
	}
	s := &Schema{File: file}
	l.files[file] = s // before parsing, so that cycles resolve
	l.nodes[file] = doc.Content[0]
	l.order = append(l.order, file)
	if err := l.parse(s, doc.Content[0], file, ""); err != nil {
		return nil, err
	}
	if s.Title == "" {
		return nil, fmt.Errorf("%s: the root schema needs a title (its Go type name)", file)
	}
	return s, nil
}

// parse fills s from node n, found in file at JSON pointer ptr.
func (l *loader) parse(s *Schema, n *yaml.Node, file, ptr string) error {
	at := func(format string, args ...any) error {
		return fmt.Errorf("%s#%s: %s", file, ptr, fmt.Sprintf(format, args...))
	}
	if n.Kind != yaml.MappingNode {
		return at("a schema must be an object")
	}
	for i := 0; i < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		var err error
		if strings.HasPrefix(key, "x-") {
			continue // extensions (x-go-name, x-ogen-*) are for other tools
		}
		switch key {
		case "$schema", "$comment", "examples", "example", "default":
		case "$ref":
			if file == l.componentsFile {
				name, ok := strings.CutPrefix(val.Value, componentRef)
				if !ok {
					return at("$ref %q: only references to %s<name> are supported", val.Value, componentRef)
				}
				s.Ref, err = l.component(name)
				break
			}
			if strings.Contains(val.Value, "#") {
				return at("$ref %q: only whole-file references are supported", val.Value)
			}
			target := filepath.Join(filepath.Dir(file), val.Value)
			s.Ref, err = l.load(target)
		case "discriminator":
			s.Disc = &Discriminator{}
			if err = val.Decode(s.Disc); err == nil && s.Disc.PropertyName == "" {
				return at("discriminator needs a propertyName")
			}
		case "title":
			s.Title = val.Value
		case "description":
			s.Description = val.Value
		case "type":
			var types []string
			if val.Kind == yaml.SequenceNode {
				err = val.Decode(&types)
			} else {
				types = []string{val.Value}
			}
			for _, t := range types {
				switch t {
				case "null":
					s.Nullable = true
				case "string", "number", "integer", "boolean", "object", "array":
					s.Types = append(s.Types, t)
				default:
					return at("unknown type %q", t)
				}
			}
			if len(s.Types) > 1 {
				return at("only one non-null type is supported, got %v", types)
			}
		case "properties":
			if val.Kind != yaml.MappingNode {
				return at("properties must be an object")
			}
			for j := 0; j < len(val.Content); j += 2 {
				name := val.Content[j].Value
				ps := &Schema{}
				if err := l.parse(ps, val.Content[j+1], file, ptr+"/properties/"+name); err != nil {
					return err
				}
				s.Props = append(s.Props, &Prop{Name: name, Schema: ps})
			}
		case "required":
			err = val.Decode(&s.Required)
		case "additionalProperties":
			if val.Kind == yaml.MappingNode {
				s.Values = &Schema{}
				err = l.parse(s.Values, val, file, ptr+"/additionalProperties")
				break
			}
			var b bool
			if val.Kind != yaml.ScalarNode || val.Decode(&b) != nil {
				return at("additionalProperties must be true, false or a schema")
			}
			s.Closed = !b
		case "enum":
			err = decodeJSON(val, &s.Enum)
		case "const":
			s.HasConst = true
			err = decodeJSON(val, &s.Const)
		case "minLength":
			err = val.Decode(&s.MinLength)
		case "maxLength":
			err = val.Decode(&s.MaxLength)
		case "pattern":
			s.Pattern = val.Value
		case "format":
			s.Format = val.Value
			switch s.Format {
			case "uuid", "date-time", "uri":
			default:
				return at("unsupported format %q", s.Format)
			}
		case "minimum":
			err = val.Decode(&s.Minimum)
		case "maximum":
			err = val.Decode(&s.Maximum)
		case "exclusiveMinimum":
			err = val.Decode(&s.ExclMinimum)
		case "minItems":
			err = val.Decode(&s.MinItems)
		case "maxItems":
			err = val.Decode(&s.MaxItems)
		case "items":
			s.Items = &Schema{}
			err = l.parse(s.Items, val, file, ptr+"/items")
		case "oneOf":
			if val.Kind != yaml.SequenceNode {
				return at("oneOf must be an array")
			}
			for j, v := range val.Content {
				vs := &Schema{}
				if err := l.parse(vs, v, file, fmt.Sprintf("%s/oneOf/%d", ptr, j)); err != nil {
					return err
				}
				s.OneOf = append(s.OneOf, vs)
			}
		default:
			return at("unsupported keyword %q", key)
		}
		if err != nil {
			return at("%s: %v", key, err)
		}
	}
	if s.Ref != nil && (len(s.Types) > 0 || len(s.Props) > 0 || len(s.OneOf) > 0) {
		return at("$ref cannot be combined with other constraints")
	}
	if s.Disc != nil && len(s.OneOf) == 0 {
		return at("discriminator without oneOf")
	}
	if len(s.OneOf) > 0 {
		if _, err := discriminator(s); err != nil {
			return at("%v", err)
		}
	}
	for _, r := range s.Required {
		if s.Prop(r) == nil {
			return at("required property %q is not declared", r)
		}
	}
	return nil
}

// decodeJSON decodes a YAML node into v through JSON, so numbers become
// float64 as they would from encoding/json.
func decodeJSON(n *yaml.Node, v any) error {
	var x any
	if err := n.Decode(&x); err != nil {
		return err
	}
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// discriminator finds the property that tells a union's variants apart: a
// required string property with a const (or enum) in every variant, whose
// values do not overlap. An OpenAPI discriminator names it; its mapping,
// when it has one, must agree with the variants' values.
func discriminator(s *Schema) (string, error) {
	var candidates []string
	if s.Disc != nil {
		candidates = []string{s.Disc.PropertyName}
	} else {
		first := s.OneOf[0].Resolve()
		for _, p := range first.Props {
			candidates = append(candidates, p.Name)
		}
		sort.Strings(candidates)
	}
next:
	for _, name := range candidates {
		seen := map[string]bool{}
		for _, v := range s.OneOf {
			v = v.Resolve()
			p := v.Prop(name)
			if p == nil || !v.IsRequired(name) {
				continue next
			}
			vals := discValues(p.Resolve())
			if len(vals) == 0 {
				continue next
			}
			for _, x := range vals {
				if seen[x] {
					continue next
				}
				seen[x] = true
			}
		}
		if s.Disc != nil {
			if err := checkMapping(s, name); err != nil {
				return "", err
			}
		}
		return name, nil
	}
	if s.Disc != nil {
		return "", fmt.Errorf("discriminator %q must be a required property with a distinct const or enum in every variant", s.Disc.PropertyName)
	}
	return "", fmt.Errorf("oneOf needs a discriminator: a required property with a distinct const or enum in every variant")
}

// checkMapping checks that every value of an OpenAPI discriminator's
// mapping names the variant whose property name takes that value, and that
// the mapping leaves no variant's value out.
func checkMapping(s *Schema, name string) error {
	if len(s.Disc.Mapping) == 0 {
		return nil
	}
	byValue := map[string]*Schema{}
	for _, v := range s.OneOf {
		for _, x := range discValues(v.Resolve().Prop(name).Resolve()) {
			byValue[x] = v
		}
	}
	for _, value := range sortedKeys(s.Disc.Mapping) {
		ref := s.Disc.Mapping[value]
		v, ok := byValue[value]
		if !ok {
			return fmt.Errorf("discriminator mapping %q: no variant has %s %q", value, name, value)
		}
		if v.Ref == nil || v.Ref.Pointer != ref {
			return fmt.Errorf("discriminator mapping %q: %s, but the variant with %s %q is not that reference", value, ref, name, value)
		}
	}
	for _, value := range sortedKeys(byValue) {
		if _, ok := s.Disc.Mapping[value]; !ok {
			return fmt.Errorf("discriminator mapping: no entry for %s %q", name, value)
		}
	}
	return nil
}

// discValues returns the string values a discriminator property may take.
func discValues(p *Schema) []string {
	if p.HasConst {
		if v, ok := p.Const.(string); ok {
			return []string{v}
		}
		return nil
	}
	var out []string
	for _, e := range p.Enum {
		v, ok := e.(string)
		if !ok {
			return nil
		}
		out = append(out, v)
	}
	return out
}
