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
	for _, want := range []string{"func Decode(frame []byte) (Inbound, error)", "HandlePing(ctx context.Context, m Ping) error", "func NewPong(id string) Pong", "TypePing = \"ping\""} {
		if !strings.Contains(api, want) {
			t.Errorf("api_gen.go lacks %q", want)
		}
	}
	if !strings.Contains(string(a["validate_gen.go"]), `wire.Closed(p, o0, "type", "id")`) {
		t.Errorf("the closed Pong schema is not enforced")
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
