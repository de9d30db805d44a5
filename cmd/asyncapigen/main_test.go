package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (relative path -> content) under a temp dir.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const doc = `asyncapi: 3.0.0
info: {title: t, version: 1.0.0, description: d}
channels:
  c:
    address: /c
    messages:
      ping: {$ref: '#/components/messages/Ping'}
      pong: {$ref: '#/components/messages/Pong'}
operations:
  in:
    action: receive
    channel: {$ref: '#/channels/c'}
    messages: [{$ref: '#/channels/c/messages/ping'}]
  out:
    action: send
    channel: {$ref: '#/channels/c'}
    messages: [{$ref: '#/channels/c/messages/pong'}]
components:
  messages:
    Ping: {name: ping, payload: {$ref: 's/ping.json'}}
    Pong: {name: pong, payload: {$ref: 's/pong.json'}}
`

// onlyPing is doc without its server message.
var onlyPing = strings.NewReplacer(
	"      pong: {$ref: '#/components/messages/Pong'}\n", "",
	"  out:\n    action: send\n    channel: {$ref: '#/channels/c'}\n    messages: [{$ref: '#/channels/c/messages/pong'}]\n", "",
	"    Pong: {name: pong, payload: {$ref: 's/pong.json'}}\n", "",
).Replace(doc)

const ping = `{"title": "Ping", "type": "object", "properties": {"type": {"type": "string", "const": "ping"}, "id": {"type": "string"}}, "required": ["type", "id"]}`
const pong = `{"title": "Pong", "type": "object", "properties": {"type": {"type": "string", "const": "pong"}, "id": {"type": "string"}}, "required": ["type", "id"], "additionalProperties": false}`

func gen(t *testing.T, files map[string]string) (map[string][]byte, error) {
	t.Helper()
	dir := writeTree(t, files)
	l := newLoader()
	api, err := loadAPI(filepath.Join(dir, "api.yaml"), l)
	if err != nil {
		return nil, err
	}
	return generate(api, l, "pingapi", "api.yaml")
}

func TestGenerateIsDeterministic(t *testing.T) {
	files := map[string]string{"api.yaml": doc, "s/ping.json": ping, "s/pong.json": pong}
	a, err := gen(t, files)
	if err != nil {
		t.Fatalf("generate = %v", err)
	}
	b, err := gen(t, files)
	if err != nil {
		t.Fatalf("generate = %v", err)
	}
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two runs", name)
		}
	}
	api := string(a["api_gen.go"])
	for _, want := range []string{
		"func Decode(frame []byte) (Inbound, error)", "HandlePing(ctx context.Context, m Ping) error", "func NewPong(id string) Pong", "TypePing = \"ping\"",
		// Validators without decoding, sharing Decode's checks.
		"func ValidateInbound(frame []byte) error", "func ValidateOutbound(frame []byte) error",
		"case TypePing:\n\t\terr = validatePing(\"\", v)", "case TypePong:\n\t\terr = validatePong(\"\", v)",
		"return t, nil, wire.WithMessage(err, t)",
		// An UnimplementedHandler that implements Handler.
		"type UnimplementedHandler struct{}", "var _ Handler = UnimplementedHandler{}",
		"func (UnimplementedHandler) HandlePing(context.Context, Ping) error {\n\treturn &wire.UnimplementedError{Message: TypePing}",
	} {
		if !strings.Contains(api, want) {
			t.Errorf("api_gen.go lacks %q", want)
		}
	}
	if !strings.Contains(string(a["validate_gen.go"]), `wire.Closed(p, o0, "type", "id")`) {
		t.Errorf("the closed Pong schema is not enforced")
	}
	enc := string(a["encode_gen.go"])
	for _, want := range []string{
		// Messages are encoded without reflection, their type const
		// written whatever the struct holds.
		"func (m Pong) AppendJSON(b []byte) ([]byte, error) { return m.appendJSON(b), nil }",
		"b = append(b, `{\"id\":`...)\n\tb = wire.AppendString(b, m.ID)\n\tb = append(b, `,\"type\":\"pong\"}`...)",
		"func (m Ping) MarshalJSON() ([]byte, error) { return wire.Marshal(m) }",
	} {
		if !strings.Contains(enc, want) {
			t.Errorf("encode_gen.go lacks %q", want)
		}
	}
	if !strings.Contains(api, "func Encode(m Message) ([]byte, error) {") || !strings.Contains(api, "return wire.Marshal(m)") {
		t.Errorf("Encode does not use the generated encoders")
	}
}

func TestGenerateRejectsBadDocuments(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"missing title", map[string]string{"api.yaml": doc, "s/ping.json": strings.Replace(ping, `"title": "Ping", `, "", 1), "s/pong.json": pong}, "needs a title"},
		{"unknown keyword", map[string]string{"api.yaml": doc, "s/ping.json": strings.Replace(ping, `"type": "object"`, `"type": "object", "allOf": []`, 1), "s/pong.json": pong}, `unsupported keyword "allOf"`},
		{"missing file", map[string]string{"api.yaml": doc, "s/ping.json": ping}, "pong.json"},
		{"no type const", map[string]string{"api.yaml": doc, "s/ping.json": strings.Replace(ping, `, "const": "ping"`, "", 1), "s/pong.json": pong}, `"type" property with a const`},
		{"undeclared required", map[string]string{"api.yaml": doc, "s/ping.json": strings.Replace(ping, `["type", "id"]`, `["type", "id", "x"]`, 1), "s/pong.json": pong}, `required property "x" is not declared`},
		{"pointer ref", map[string]string{"api.yaml": doc, "s/ping.json": strings.Replace(ping, `"id": {"type": "string"}`, `"id": {"$ref": "pong.json#/properties/id"}`, 1), "s/pong.json": pong}, "whole-file references"},
		{"no server message", map[string]string{"api.yaml": onlyPing, "s/ping.json": ping}, "no message in the outbound direction"},
		{"union without discriminator", map[string]string{"api.yaml": doc, "s/ping.json": strings.Replace(ping, `"id": {"type": "string"}`, `"id": {"oneOf": [{"$ref": "a.json"}, {"$ref": "b.json"}]}`, 1), "s/pong.json": pong,
			"s/a.json": `{"title": "A", "type": "object", "properties": {"k": {"type": "string"}}}`, "s/b.json": `{"title": "B", "type": "object", "properties": {"k": {"type": "string"}}}`}, "discriminator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gen(t, tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("generate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

const openapiDoc = `openapi: 3.1.0
info: {title: Pets, version: "1"}
paths: {}
components:
  schemas:
    Owner:
      type: object
      description: Who owns the pets. More text.
      required: [id, pets]
      properties:
        id: {type: string, format: uuid}
        pets:
          type: array
          items: {$ref: '#/components/schemas/Pet'}
        extra:
          type: object
          additionalProperties: true
    Pet:
      oneOf:
        - $ref: '#/components/schemas/Cat'
        - $ref: '#/components/schemas/Dog'
      discriminator:
        propertyName: kind
        mapping:
          cat: '#/components/schemas/Cat'
          dog: '#/components/schemas/Dog'
    Cat:
      type: object
      required: [kind]
      properties:
        kind: {type: string, const: cat}
        born: {type: string, format: date-time, x-ogen-time-format: '2006-01-02T15:04:05Z07:00'}
    Dog:
      type: object
      required: [kind]
      properties:
        kind: {type: string, const: dog}
`

func genOpenAPI(t *testing.T, doc string) (map[string][]byte, error) {
	t.Helper()
	dir := writeTree(t, map[string]string{"api.yaml": doc})
	api, err := loadOpenAPI(filepath.Join(dir, "api.yaml"), newLoader())
	if err != nil {
		return nil, err
	}
	return generateOpenAPI(api, "petschema", "api.yaml", false)
}

func TestGenerateOpenAPIValidators(t *testing.T) {
	a, err := genOpenAPI(t, openapiDoc)
	if err != nil {
		t.Fatalf("generate = %v", err)
	}
	b, err := genOpenAPI(t, openapiDoc)
	if err != nil {
		t.Fatalf("generate = %v", err)
	}
	if len(a) != 2 || !bytes.Equal(a["validate_gen.go"], b["validate_gen.go"]) || !bytes.Equal(a["schemas_gen.go"], b["schemas_gen.go"]) {
		t.Fatalf("want the same validate_gen.go and schemas_gen.go from two runs, got %d files", len(a))
	}
	if _, ok := a["types_gen.go"]; ok {
		t.Errorf("the OpenAPI mode writes no types")
	}
	entry, val := string(a["schemas_gen.go"]), string(a["validate_gen.go"])
	for _, want := range []string{
		"package petschema",
		"func ValidateOwner(v any) error { return validateOwner(\"\", v) }",
		"func ValidateOwnerJSON(doc []byte) error {",
		"func ValidatePet(v any) error", "func ValidateCat(v any) error", "func ValidateDog(v any) error",
		"// Who owns the pets.\n",
	} {
		if !strings.Contains(entry, want) {
			t.Errorf("schemas_gen.go lacks %q", want)
		}
	}
	for _, want := range []string{
		`wire.Format(wire.Field(p, "id"), s1, "uuid")`, // (the pointer expression of /id)
		"p1 := wire.Index(q1, i1)", "validatePet(p1, x1)",
		`wire.Discriminator(p, o0, "kind")`, `case "cat":`, `return wire.NoVariant(p, "kind", "\"cat\", \"dog\"")`,
		`wire.Format(wire.Field(p, "born"), s1, "date-time")`,
		"against api.yaml#/components/schemas/Owner.",
	} {
		if !strings.Contains(val, want) {
			t.Errorf("validate_gen.go lacks %q", want)
		}
	}
}

func TestGenerateOpenAPIRejectsBadDocuments(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"OpenAPI 3.0", strings.Replace(openapiDoc, "3.1.0", "3.0.3", 1), "only OpenAPI 3.1"},
		{"no schemas", "openapi: 3.1.0\ninfo: {title: x}\ncomponents: {}\n", "no components.schemas"},
		{"file reference", strings.Replace(openapiDoc, "'#/components/schemas/Pet'", "'pet.yaml'", 1), "only references to #/components/schemas/"},
		{"missing component", strings.Replace(openapiDoc, "- $ref: '#/components/schemas/Dog'", "- $ref: '#/components/schemas/Wolf'", 1), `no component schema "Wolf"`},
		{"mapping to the wrong variant", strings.Replace(openapiDoc, "dog: '#/components/schemas/Dog'", "dog: '#/components/schemas/Cat'", 1), `discriminator mapping "dog"`},
		{"mapping a value no variant has", strings.Replace(openapiDoc, "dog: '#/components/schemas/Dog'", "dog: '#/components/schemas/Dog'\n          wolf: '#/components/schemas/Dog'", 1), `no variant has kind "wolf"`},
		{"mapping without a variant's value", strings.Replace(openapiDoc, "          dog: '#/components/schemas/Dog'\n", "", 1), `no entry for kind "dog"`},
		{"discriminator not a property", strings.Replace(openapiDoc, "propertyName: kind", "propertyName: name", 1), `discriminator "name" must be a required property`},
		{"discriminator without oneOf", strings.Replace(openapiDoc, "      required: [kind]\n      properties:\n        kind: {type: string, const: dog}", "      required: [kind]\n      discriminator: {propertyName: kind}\n      properties:\n        kind: {type: string, const: dog}", 1), "discriminator without oneOf"},
		{"unexported name", strings.Replace(openapiDoc, "    Dog:\n", "    dog-2:\n", 1), "exported Go identifier"},
		{"unknown keyword", strings.Replace(openapiDoc, "type: array\n", "type: array\n          uniqueItems: true\n", 1), `unsupported keyword "uniqueItems"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := genOpenAPI(t, tc.doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("generate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestGenerateOpenAPIWithOgen: with -ogen, ogen's files and the validators
// are one package, written in one run that replaces stale generated files
// and leaves the rest alone.
func TestGenerateOpenAPIWithOgen(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"api.yaml":            openapiDoc,
		"ogen.yml":            "generator:\n  features:\n    disable_all: true\n",
		"petapi/oas_x_gen.go": "package petapi\n",
		"petapi/keep.go":      "package petapi\n",
	})
	out := filepath.Join(dir, "petapi")
	if err := runOpenAPI(filepath.Join(dir, "api.yaml"), filepath.Join(dir, "ogen.yml"), out); err != nil {
		t.Fatalf("runOpenAPI = %v", err)
	}
	for _, name := range []string{"oas_schemas_gen.go", "validate_gen.go", "schemas_gen.go", "keep.go"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "oas_x_gen.go")); !os.IsNotExist(err) {
		t.Errorf("a stale generated file is left: %v", err)
	}
	doc, _ := os.ReadFile(filepath.Join(out, "schemas_gen.go"))
	if !strings.Contains(string(doc), "// Package petapi is the wire format of") {
		t.Errorf("schemas_gen.go's package doc does not name ogen's part:\n%s", doc)
	}
	if err := runOpenAPI(filepath.Join(dir, "api.yaml"), filepath.Join(dir, "missing.yml"), out); err == nil {
		t.Errorf("runOpenAPI with a missing ogen config = nil, want an error")
	}
}
