package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/yuin/goldmark"
	"gopkg.in/yaml.v3"
)

// page is one protocol's rendered reference.
type page struct {
	Name  string // the file name without .html: the document's base name
	Title string
	Kind  string // "AsyncAPI" or "OpenAPI"
	HTML  []byte
}

// A message is one message of an AsyncAPI document, or one schema of an
// OpenAPI one, as the page shows it.
type message struct {
	Name, Title, Direction string
	Summary, Description   template.HTML
	Fields                 []field
	Examples               []string
}

// A field is one row of a message's table: its path (a.b for nested
// fields), its type and whether it is required.
type field struct {
	Path, Type  string
	Required    bool
	Description template.HTML
}

// An operation is one HTTP operation of an OpenAPI document.
type operation struct {
	Method, Path         string
	Summary, Description template.HTML
	Request              string
	Responses            []response
}

type response struct{ Code, Description, Schema string }

type pageData struct {
	Title, Kind, Source, Version string
	Description                  template.HTML
	Messages                     []message
	Operations                   []operation
}

// render renders the document at rel (relative to root).
func render(root, rel string) (page, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return page{}, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return page{}, err
	}
	d := doc.Content[0]
	r := &resolver{root: root, files: map[string]any{}}
	data := pageData{
		Title:       scalar(get(d, "info", "title")),
		Version:     scalar(get(d, "info", "version")),
		Description: markdown(scalar(get(d, "info", "description"))),
		Source:      "/" + rel,
	}
	name := strings.TrimSuffix(path.Base(rel), path.Ext(rel))
	if get(d, "openapi") != nil {
		data.Kind = "OpenAPI"
		data.Operations = operations(d)
		for _, kv := range pairs(get(d, "components", "schemas")) {
			var schema any
			if err := kv[1].Decode(&schema); err != nil {
				return page{}, err
			}
			m := message{Name: kv[0].Value, Title: str(schema, "title"), Description: markdown(str(schema, "description"))}
			m.Fields = r.fields(rel, schema, "", 0)
			data.Messages = append(data.Messages, m)
		}
	} else {
		data.Kind = "AsyncAPI"
		dirs := directions(d)
		for _, kv := range pairs(get(d, "components", "messages")) {
			m, err := r.message(rel, kv[0].Value, kv[1], dirs)
			if err != nil {
				return page{}, err
			}
			data.Messages = append(data.Messages, m)
		}
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, data); err != nil {
		return page{}, err
	}
	return page{Name: name, Title: data.Title, Kind: data.Kind, HTML: buf.Bytes()}, nil
}

// directions maps each component message to the way it travels, from
// the operations: the server receives client frames and sends its own.
func directions(d *yaml.Node) map[string]string {
	channelMsg := map[string]string{} // "#/channels/c/messages/m" -> component name
	for _, ch := range pairs(get(d, "channels")) {
		for _, m := range pairs(get(ch[1], "messages")) {
			ref := scalar(get(m[1], "$ref"))
			channelMsg["#/channels/"+ch[0].Value+"/messages/"+m[0].Value] = path.Base(ref)
		}
	}
	out := map[string]string{}
	for _, op := range pairs(get(d, "operations")) {
		dir := "client → server"
		if scalar(get(op[1], "action")) == "send" {
			dir = "server → client"
		}
		if ms := get(op[1], "messages"); ms != nil {
			for _, m := range ms.Content {
				if name := channelMsg[scalar(get(m, "$ref"))]; name != "" {
					if prev := out[name]; prev != "" && prev != dir {
						dir = "both ways"
					}
					out[name] = dir
				}
			}
		}
	}
	return out
}

func (r *resolver) message(rel, key string, n *yaml.Node, dirs map[string]string) (message, error) {
	m := message{
		Name: scalar(get(n, "name")), Title: scalar(get(n, "title")), Direction: dirs[key],
		Summary: markdown(scalar(get(n, "summary"))), Description: markdown(scalar(get(n, "description"))),
	}
	if m.Name == "" {
		m.Name = key
	}
	var payload any
	if p := get(n, "payload"); p != nil {
		if err := p.Decode(&payload); err != nil {
			return m, err
		}
	}
	m.Fields = r.fields(rel, payload, "", 0)
	if m.Description == "" {
		s, _ := r.deref(rel, payload)
		m.Description = markdown(str(s, "description"))
	}
	for _, ex := range seq(get(n, "examples")) {
		var v any
		if p := get(ex, "payload"); p != nil {
			if err := p.Decode(&v); err != nil {
				return m, err
			}
			b, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				return m, err
			}
			m.Examples = append(m.Examples, string(b))
		}
	}
	return m, nil
}

func operations(d *yaml.Node) []operation {
	var ops []operation
	for _, p := range pairs(get(d, "paths")) {
		for _, mo := range pairs(p[1]) {
			method := strings.ToUpper(mo[0].Value)
			switch method {
			case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS":
			default:
				continue
			}
			op := operation{Method: method, Path: p[0].Value,
				Summary: markdown(scalar(get(mo[1], "summary"))), Description: markdown(scalar(get(mo[1], "description")))}
			for _, ct := range pairs(get(mo[1], "requestBody", "content")) {
				op.Request = ct[0].Value + " " + refName(get(ct[1], "schema"))
			}
			for _, rs := range pairs(get(mo[1], "responses")) {
				res := response{Code: rs[0].Value, Description: scalar(get(rs[1], "description"))}
				for _, ct := range pairs(get(rs[1], "content")) {
					res.Schema = strings.TrimSpace(res.Schema + " " + ct[0].Value + " " + refName(get(ct[1], "schema")))
				}
				op.Responses = append(op.Responses, res)
			}
			ops = append(ops, op)
		}
	}
	return ops
}

func refName(n *yaml.Node) string {
	if ref := scalar(get(n, "$ref")); ref != "" {
		return path.Base(ref)
	}
	return scalar(get(n, "type"))
}

// resolver reads the JSON Schema files a document refers to.
type resolver struct {
	root  string
	files map[string]any
}

// load returns the schema at ref, relative to the file at from (both
// relative to the root), with the file it is in.
func (r *resolver) load(from, ref string) (any, string) {
	file, frag, _ := strings.Cut(ref, "#")
	at := from
	if file != "" {
		at = path.Join(path.Dir(from), file)
	}
	doc, ok := r.files[at]
	if !ok {
		b, err := os.ReadFile(filepath.Join(r.root, filepath.FromSlash(at)))
		if err == nil {
			if strings.HasSuffix(at, ".json") {
				err = json.Unmarshal(b, &doc)
			} else {
				err = yaml.Unmarshal(b, &doc)
			}
		}
		if err != nil {
			doc = nil
		}
		r.files[at] = doc
	}
	v := doc
	for _, part := range strings.Split(strings.Trim(frag, "/"), "/") {
		if part == "" {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, at
		}
		v = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
	}
	return v, at
}

// fields lists the properties of schema (in the file at), nested ones
// under their parent's path, to a depth of three.
func (r *resolver) fields(at string, schema any, prefix string, depth int) []field {
	s, at := r.deref(at, schema)
	m, ok := s.(map[string]any)
	if !ok || depth > 3 {
		return nil
	}
	props, _ := m["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := m["required"].([]any); ok {
		for _, x := range req {
			if s, ok := x.(string); ok {
				required[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.SliceStable(names, func(i, j int) bool {
		if required[names[i]] != required[names[j]] {
			return required[names[i]]
		}
		return names[i] < names[j]
	})
	var out []field
	for _, k := range names {
		ps, pat := r.deref(at, props[k])
		out = append(out, field{Path: prefix + k, Type: r.typeOf(pat, ps), Required: required[k], Description: markdown(str(ps, "description"))})
		out = append(out, r.fields(pat, ps, prefix+k+".", depth+1)...)
	}
	return out
}

// deref follows $ref until a schema without one.
func (r *resolver) deref(at string, schema any) (any, string) {
	for range 8 {
		m, ok := schema.(map[string]any)
		if !ok {
			return schema, at
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return schema, at
		}
		schema, at = r.load(at, ref)
	}
	return schema, at
}

// typeOf says a schema's type in a few words.
func (r *resolver) typeOf(at string, schema any) string {
	m, ok := schema.(map[string]any)
	if !ok {
		return "any"
	}
	if c, ok := m["const"]; ok {
		b, _ := json.Marshal(c)
		return string(b)
	}
	if e, ok := m["enum"].([]any); ok {
		var parts []string
		for _, v := range e {
			b, _ := json.Marshal(v)
			parts = append(parts, string(b))
		}
		return strings.Join(parts, " | ")
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if alts, ok := m[k].([]any); ok {
			var parts []string
			for _, a := range alts {
				if am, ok := a.(map[string]any); ok {
					if ref, ok := am["$ref"].(string); ok {
						parts = append(parts, strings.TrimSuffix(path.Base(ref), ".json"))
						continue
					}
				}
				s, sat := r.deref(at, a)
				parts = append(parts, r.typeOf(sat, s))
			}
			return strings.Join(parts, " | ")
		}
	}
	t := ""
	switch v := m["type"].(type) {
	case string:
		t = v
	case []any:
		var parts []string
		for _, x := range v {
			parts = append(parts, fmt.Sprint(x))
		}
		t = strings.Join(parts, " | ")
	}
	if t == "array" {
		if items, ok := m["items"]; ok {
			s, sat := r.deref(at, items)
			return "array of " + r.typeOf(sat, s)
		}
	}
	if f, ok := m["format"].(string); ok && t != "" {
		t += " (" + f + ")"
	}
	if t == "" {
		t = "any"
	}
	return t
}

func str(v any, key string) string {
	if m, ok := v.(map[string]any); ok {
		s, _ := m[key].(string)
		return s
	}
	return ""
}

var md = goldmark.New()

// markdown renders s, Markdown as the documents write it; raw HTML in it
// is left out (goldmark's default).
func markdown(s string) template.HTML {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	var buf bytes.Buffer
	if err := md.Convert([]byte(s), &buf); err != nil {
		return template.HTML(template.HTMLEscapeString(s))
	}
	return template.HTML(buf.String()) // goldmark escapes text and drops raw HTML
}

// get walks a YAML mapping by keys; nil when a key is missing.
func get(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	return n
}

// pairs returns a mapping's key-value pairs in document order.
func pairs(n *yaml.Node) [][2]*yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([][2]*yaml.Node, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, [2]*yaml.Node{n.Content[i], n.Content[i+1]})
	}
	return out
}

func seq(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// index is the page that lists the references.
func index(pages []page) []byte {
	var buf bytes.Buffer
	if err := indexTemplate.Execute(&buf, pages); err != nil {
		panic(err) // the template and its data are fixed
	}
	return buf.Bytes()
}

const style = `body{font:15px/1.5 system-ui,sans-serif;max-width:64rem;margin:2rem auto;padding:0 1rem;color:#222}
code,pre{font:13px/1.4 ui-monospace,monospace}pre{background:#f5f5f5;padding:.6rem;overflow:auto}
table{border-collapse:collapse;width:100%;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#fafafa}h2{border-bottom:1px solid #ddd;margin-top:2.5rem}.dir{color:#666;font-size:90%}.req{font-weight:600}`

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>` + style + `</style></head><body>
<p><a href="/reference/">All protocols</a> · source: <a href="{{.Source}}">{{.Source}}</a> ({{.Kind}}, version {{.Version}})</p>
<h1>{{.Title}}</h1>
{{.Description}}
{{if .Operations}}<h2>Operations</h2>
{{range .Operations}}<h3 id="{{.Method}} {{.Path}}"><code>{{.Method}} {{.Path}}</code></h3>
{{.Summary}}{{.Description}}
{{if .Request}}<p>Request body: <code>{{.Request}}</code></p>{{end}}
<table><tr><th>status</th><th>meaning</th><th>body</th></tr>
{{range .Responses}}<tr><td>{{.Code}}</td><td>{{.Description}}</td><td><code>{{.Schema}}</code></td></tr>
{{end}}</table>
{{end}}{{end}}
<h2>{{if .Operations}}Schemas{{else}}Messages{{end}}</h2>
<ul>{{range .Messages}}<li><a href="#{{.Name}}">{{.Name}}</a>{{if .Direction}} <span class="dir">({{.Direction}})</span>{{end}}</li>{{end}}</ul>
{{range .Messages}}<h3 id="{{.Name}}"><code>{{.Name}}</code>{{if .Title}} — {{.Title}}{{end}}</h3>
{{if .Direction}}<p class="dir">{{.Direction}}</p>{{end}}
{{.Summary}}{{.Description}}
{{if .Fields}}<table><tr><th>field</th><th>type</th><th>description</th></tr>
{{range .Fields}}<tr><td><code{{if .Required}} class="req"{{end}}>{{.Path}}</code>{{if .Required}} (required){{end}}</td><td><code>{{.Type}}</code></td><td>{{.Description}}</td></tr>
{{end}}</table>{{end}}
{{range .Examples}}<pre>{{.}}</pre>
{{end}}{{end}}
</body></html>
`))

var indexTemplate = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>agentwire protocol reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>` + style + `</style></head><body>
<h1>agentwire protocol reference</h1>
<p>The documents agentwire is generated from, rendered. The documents themselves:
<a href="/openapi.yaml">/openapi.yaml</a> (<a href="/openapi.json">JSON</a>),
<code>/asyncapi/{protocol}.yaml</code> and <code>/schemas/{protocol}/{name}.json</code>.</p>
<ul>{{range .}}<li><a href="/reference/{{.Name}}.html">{{.Title}}</a> ({{.Kind}})</li>
{{end}}</ul>
</body></html>
`))
