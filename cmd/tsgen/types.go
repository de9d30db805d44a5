package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// gen writes the types of one document.
type gen struct {
	root, doc string
	files     map[string]any    // parsed schema files by path relative to root
	names     map[string]string // schema key (file#fragment) -> type name
	taken     map[string]bool
	order     []string          // schema keys in the order their types are written
	decls     map[string]string // schema key -> declaration
	client    []string          // type names of client frames
	server    []string          // type names of server frames
	examples  []example
}

func newGen(root, doc string) *gen {
	return &gen{root: root, doc: doc, files: map[string]any{}, names: map[string]string{}, taken: map[string]bool{}, decls: map[string]string{}}
}

// document reads the AsyncAPI or OpenAPI document and declares its types.
func (g *gen) document() error {
	d, ok := g.load(g.doc).(map[string]any)
	if !ok {
		return fmt.Errorf("not a document")
	}
	if _, ok := d["openapi"]; ok {
		schemas, _ := dig(d, "components", "schemas").(map[string]any)
		for _, k := range sortedKeys(schemas) {
			g.named(g.doc, "#/components/schemas/"+k)
		}
		return nil
	}
	dirs := directions(d)
	messages, _ := dig(d, "components", "messages").(map[string]any)
	for _, k := range sortedKeys(messages) {
		m, _ := messages[k].(map[string]any)
		payload, ok := m["payload"].(map[string]any)
		if !ok {
			continue
		}
		var typ string
		if ref, ok := payload["$ref"].(string); ok {
			typ = g.named(g.doc, ref)
		} else {
			typ = g.declare(g.doc+"#/components/messages/"+k+"/payload", pascal(k), payload, g.doc)
		}
		switch dirs[k] {
		case "receive":
			g.client = append(g.client, typ)
		case "send":
			g.server = append(g.server, typ)
		case "both":
			g.client = append(g.client, typ)
			g.server = append(g.server, typ)
		}
		exs, _ := m["examples"].([]any)
		for _, ex := range exs {
			if p, ok := ex.(map[string]any)["payload"]; ok {
				b, err := json.MarshalIndent(p, "", "  ")
				if err != nil {
					return err
				}
				g.examples = append(g.examples, example{typ, string(b)})
			}
		}
	}
	return nil
}

// directions maps each component message to how the server handles it:
// "receive" (client frames), "send" (server frames) or "both".
func directions(d map[string]any) map[string]string {
	channelMsg := map[string]string{}
	channels, _ := d["channels"].(map[string]any)
	for cn, c := range channels {
		msgs, _ := dig(c, "messages").(map[string]any)
		for mn, m := range msgs {
			ref, _ := dig(m, "$ref").(string)
			channelMsg["#/channels/"+cn+"/messages/"+mn] = path.Base(ref)
		}
	}
	out := map[string]string{}
	ops, _ := d["operations"].(map[string]any)
	for _, op := range ops {
		action, _ := dig(op, "action").(string)
		msgs, _ := dig(op, "messages").([]any)
		for _, m := range msgs {
			ref, _ := dig(m, "$ref").(string)
			name := channelMsg[ref]
			if name == "" {
				continue
			}
			if prev := out[name]; prev != "" && prev != action {
				action = "both"
			}
			out[name] = action
		}
	}
	return out
}

// load parses the file at rel (JSON or YAML), once.
func (g *gen) load(rel string) any {
	if v, ok := g.files[rel]; ok {
		return v
	}
	var v any
	b, err := os.ReadFile(filepath.Join(g.root, filepath.FromSlash(rel)))
	if err == nil {
		if strings.HasSuffix(rel, ".json") {
			err = json.Unmarshal(b, &v)
		} else {
			err = yaml.Unmarshal(b, &v)
		}
	}
	if err != nil {
		v = nil
	}
	g.files[rel] = v
	return v
}

// resolve returns the schema at ref from the file at from, with its key
// (file#fragment) and the file it is in.
func (g *gen) resolve(from, ref string) (schema any, key, file string) {
	f, frag, _ := strings.Cut(ref, "#")
	file = from
	if f != "" {
		file = path.Join(path.Dir(from), f)
	}
	v := g.load(file)
	for _, part := range strings.Split(strings.Trim(frag, "/"), "/") {
		if part == "" {
			continue
		}
		v = dig(v, strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~"))
	}
	return v, file + "#" + frag, file
}

// named returns the type name of the schema at ref, declaring it first.
func (g *gen) named(from, ref string) string {
	schema, key, file := g.resolve(from, ref)
	if name, ok := g.names[key]; ok {
		return name
	}
	base := ""
	if m, ok := schema.(map[string]any); ok {
		base, _ = m["title"].(string)
	}
	if base == "" {
		_, frag, _ := strings.Cut(key, "#")
		base = path.Base(frag)
		if frag == "" || base == "/" || base == "." {
			base = strings.TrimSuffix(path.Base(file), path.Ext(file))
		}
	}
	return g.declare(key, pascal(base), schema, file)
}

// declare writes a named type for schema, known by key.
func (g *gen) declare(key, base string, schema any, file string) string {
	name := base
	for i := 2; g.taken[name]; i++ {
		name = base + strconv.Itoa(i)
	}
	g.taken[name] = true
	g.names[key] = name
	g.order = append(g.order, key)
	doc := comment(schema, "")
	if m, ok := schema.(map[string]any); ok && isObject(m) {
		g.decls[key] = doc + "export interface " + name + " " + g.object(m, file, "") + "\n"
	} else {
		g.decls[key] = doc + "export type " + name + " = " + g.typ(schema, file, "") + ";\n"
	}
	return name
}

func isObject(m map[string]any) bool {
	if _, ok := m["properties"]; ok {
		_, one := m["oneOf"]
		_, any := m["anyOf"]
		return !one && !any
	}
	return m["type"] == "object" && m["oneOf"] == nil && m["anyOf"] == nil
}

// typ is the TypeScript type of schema, in the file at file.
func (g *gen) typ(schema any, file, indent string) string {
	m, ok := schema.(map[string]any)
	if !ok {
		if b, ok := schema.(bool); ok && !b {
			return "never"
		}
		return "unknown"
	}
	if ref, ok := m["$ref"].(string); ok {
		return g.named(file, ref)
	}
	if c, ok := m["const"]; ok {
		return literal(c)
	}
	if e, ok := m["enum"].([]any); ok {
		parts := make([]string, len(e))
		for i, v := range e {
			parts[i] = literal(v)
		}
		return strings.Join(parts, " | ")
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if alts, ok := m[k].([]any); ok {
			parts := make([]string, len(alts))
			for i, a := range alts {
				parts[i] = g.typ(a, file, indent)
			}
			return strings.Join(parts, " | ")
		}
	}
	var kinds []string
	switch t := m["type"].(type) {
	case string:
		kinds = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				kinds = append(kinds, s)
			}
		}
	}
	if len(kinds) == 0 {
		if _, ok := m["properties"]; ok {
			kinds = []string{"object"}
		} else {
			return "unknown"
		}
	}
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		switch k {
		case "string":
			parts = append(parts, "string")
		case "integer", "number":
			parts = append(parts, "number")
		case "boolean":
			parts = append(parts, "boolean")
		case "null":
			parts = append(parts, "null")
		case "array":
			item := "unknown"
			if it, ok := m["items"]; ok {
				item = g.typ(it, file, indent)
			}
			if strings.ContainsAny(item, "|&") {
				item = "(" + item + ")"
			}
			parts = append(parts, item+"[]")
		case "object":
			parts = append(parts, g.object(m, file, indent))
		}
	}
	return strings.Join(parts, " | ")
}

// object is the type literal of an object schema.
func (g *gen) object(m map[string]any, file, indent string) string {
	props, _ := m["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	var b strings.Builder
	b.WriteString("{\n")
	inner := indent + "  "
	for _, k := range sortedKeys(props) {
		b.WriteString(comment(props[k], inner))
		opt := "?"
		if required[k] {
			opt = ""
		}
		fmt.Fprintf(&b, "%s%s%s: %s;\n", inner, propName(k), opt, g.typ(props[k], file, inner))
	}
	switch ap := m["additionalProperties"].(type) {
	case bool:
		if ap {
			fmt.Fprintf(&b, "%s[key: string]: unknown;\n", inner)
		}
	case map[string]any:
		fmt.Fprintf(&b, "%s[key: string]: %s;\n", inner, g.typ(ap, file, inner))
	case nil: // JSON Schema's default: other properties are allowed
		fmt.Fprintf(&b, "%s[key: string]: unknown;\n", inner)
	}
	b.WriteString(indent + "}")
	return b.String()
}

// source is the file of the document's types.
func (g *gen) source(rel string) []byte {
	var b bytes.Buffer
	b.WriteString(header(rel))
	for _, k := range g.order {
		b.WriteString(g.decls[k])
		b.WriteString("\n")
	}
	union := func(doc, name string, members []string) {
		if len(members) == 0 {
			return
		}
		slices.Sort(members)
		members = slices.Compact(members)
		fmt.Fprintf(&b, "/** %s */\nexport type %s =\n  | %s;\n\n", doc, name, strings.Join(members, "\n  | "))
	}
	union("Every frame a client sends.", "ClientMessage", g.client)
	union("Every frame the server sends.", "ServerMessage", g.server)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// comment is a JSDoc comment of the schema's description.
func comment(schema any, indent string) string {
	m, ok := schema.(map[string]any)
	if !ok {
		return ""
	}
	d, _ := m["description"].(string)
	d = strings.TrimSpace(strings.ReplaceAll(d, "*/", "* /"))
	if d == "" {
		return ""
	}
	lines := strings.Split(d, "\n")
	if len(lines) == 1 {
		return indent + "/** " + d + " */\n"
	}
	var b strings.Builder
	b.WriteString(indent + "/**\n")
	for _, l := range lines {
		b.WriteString(strings.TrimRight(indent+" * "+l, " ") + "\n")
	}
	b.WriteString(indent + " */\n")
	return b.String()
}

func literal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func propName(k string) string {
	for i, r := range k {
		if !(unicode.IsLetter(r) || r == '_' || r == '$' || (i > 0 && unicode.IsDigit(r))) {
			return strconv.Quote(k)
		}
	}
	return k
}

// pascal turns a name (snake, kebab, dotted or spaced) into PascalCase.
func pascal(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	out := b.String()
	if out == "" || unicode.IsDigit(rune(out[0])) {
		out = "T" + out
	}
	return out
}

// ident is a protocol's name as a TypeScript namespace.
func ident(s string) string {
	p := pascal(s)
	return strings.ToLower(p[:1]) + p[1:]
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
