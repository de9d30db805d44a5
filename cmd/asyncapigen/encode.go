package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"strconv"
	"strings"
)

// encoderGen writes encode_gen.go: for every type of the package (go-
// jsonschema's structs and maps, and the unions), an AppendJSON method that
// writes, without reflection, the bytes encoding/json wrote for the value
// through the reflection-based MarshalJSON methods earlier generators
// emitted, and a MarshalJSON that uses it.
//
// What encoding/json does, and so what the encoders do: fields in
// declaration order under their tag names; omitempty omits false, 0, "",
// nil pointers and interfaces, and empty slices, maps and raw messages,
// never a struct; omitzero omits the zero value (a struct whose fields are
// all zero, a union holding nothing); nil slices and maps are null;
// strings are escaped as wire.AppendString does (HTML-safe, U+2028/9,
// invalid UTF-8 as U+FFFD); floats as wire.AppendFloat; raw messages
// compacted as wire.AppendRawJSON; free-form values as wire.AppendAny.
// A required string const of a schema file's root (the message `type`) is
// written as the const whatever the field holds, as the MarshalJSON
// methods did by setting it.
type encoderGen struct {
	decls    map[string]*goDecl
	unions   map[string]*Union
	consts   map[string]map[string]string // type -> member -> const
	fallible map[string]bool
}

func newEncoderGen(tg *typeGen, l *loader) (*encoderGen, error) {
	g := &encoderGen{decls: map[string]*goDecl{}, unions: map[string]*Union{}, fallible: map[string]bool{}}
	for _, d := range tg.decls {
		g.decls[d.Name] = d
	}
	for _, u := range tg.unions {
		if g.decls[u.Name] != nil {
			return nil, fmt.Errorf("union %s has the name of a type go-jsonschema wrote", u.Name)
		}
		g.unions[u.Name] = u
	}
	g.consts = constFields(tg, l)
	return g, nil
}

// constFields returns, for each schema file's root type, the required
// string consts that encoders write whatever the field holds, by member
// name.
func constFields(tg *typeGen, l *loader) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, f := range l.order {
		s := l.files[f]
		st := tg.structs[s.Title]
		if st == nil {
			continue
		}
		for _, prop := range s.Props {
			ps := prop.Schema.Resolve()
			c, ok := ps.Const.(string)
			if !ps.HasConst || !ok || !s.IsRequired(prop.Name) {
				continue
			}
			if fl, ok := st.Fields[prop.Name]; !ok || fl.Type != "string" {
				continue
			}
			if out[s.Title] == nil {
				out[s.Title] = map[string]string{}
			}
			out[s.Title][prop.Name] = c
		}
	}
	return out
}

// encodeFile returns encode_gen.go.
func encodeFile(tg *typeGen, l *loader, pkg, header string) ([]byte, error) {
	g, err := newEncoderGen(tg, l)
	if err != nil {
		return nil, err
	}
	var body bytes.Buffer
	for _, d := range tg.decls {
		if err := g.decl(&body, d); err != nil {
			return nil, fmt.Errorf("encoder of %s: %w", d.Name, err)
		}
	}
	for _, u := range tg.unions {
		if err := g.union(&body, u); err != nil {
			return nil, fmt.Errorf("encoder of %s: %w", u.Name, err)
		}
	}
	var b bytes.Buffer
	b.WriteString(header)
	fmt.Fprintf(&b, "package %s\n\n", pkg)
	b.WriteString("// The JSON encoders of the package's types, written without reflection:\n")
	b.WriteString("// each AppendJSON writes what encoding/json writes for the value (fields\n")
	b.WriteString("// in declaration order, omitempty and omitzero, HTML-safe strings, null\n")
	b.WriteString("// for nil slices and maps), with the constant fields of a message set.\n")
	b.WriteString("// Encode and the MarshalJSON methods use them.\n\n")
	b.WriteString("import (\n")
	if bytes.Contains(body.Bytes(), []byte("strconv.")) {
		b.WriteString("\"strconv\"\n\n")
	}
	b.WriteString("\"github.com/agentwire/agentwire/internal/wire\"\n)\n\n")
	b.Write(body.Bytes())
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("encode_gen.go: %w\n%s", err, b.Bytes())
	}
	return out, nil
}

// canFail reports whether encoding a value of t can fail: only floats
// (NaN, infinities), raw messages (invalid JSON) and free-form values can.
func (g *encoderGen) canFail(t *goType) bool {
	switch t.Kind {
	case kFloat, kRaw, kAny, kMap:
		return true
	case kPtr, kSlice:
		return g.canFail(t.Elem)
	case kNamed:
		return g.namedCanFail(t.Name)
	}
	return false
}

func (g *encoderGen) namedCanFail(name string) bool {
	if f, ok := g.fallible[name]; ok {
		return f
	}
	g.fallible[name] = false // a recursive type is decided by its other parts
	f := false
	if u := g.unions[name]; u != nil {
		for _, v := range u.Variants {
			f = f || g.namedCanFail(v.Title)
		}
	} else if d := g.decls[name]; d != nil {
		if d.Struct {
			for _, fl := range d.Fields {
				_, isConst := g.consts[d.Name][fl.JSON]
				f = f || fl.JSON != "" && !isConst && g.canFail(fl.Type)
			}
		} else {
			f = g.canFail(d.Type)
		}
	}
	g.fallible[name] = f
	return f
}

// decl writes the encoder of one of go-jsonschema's types.
func (g *encoderGen) decl(out *bytes.Buffer, d *goDecl) error {
	fail := g.namedCanFail(d.Name)
	w := &fnWriter{fail: fail}
	if d.Struct {
		if err := g.structBody(w, d); err != nil {
			return err
		}
	} else if err := g.value(w, "m", d.Type, 1); err != nil {
		return err
	}
	what := "m's JSON"
	if len(g.consts[d.Name]) > 0 {
		what = "m's JSON, with its constant fields set,"
	}
	g.methods(out, d.Name, "m", what, w)
	return nil
}

// methods writes AppendJSON (and appendJSON, for a type whose encoding
// cannot fail) with w's body, and MarshalJSON.
func (g *encoderGen) methods(out *bytes.Buffer, name, recv, what string, w *fnWriter) {
	w.flush()
	fmt.Fprintf(out, "// AppendJSON appends %s to b, as encoding/json would write it.\n", what)
	if !w.fail {
		fmt.Fprintf(out, "func (%s %s) AppendJSON(b []byte) ([]byte, error) { return %s.appendJSON(b), nil }\n\n", recv, name, recv)
		fmt.Fprintf(out, "func (%s %s) appendJSON(b []byte) []byte {\n", recv, name)
		out.Write(w.body.Bytes())
		out.WriteString("return b\n}\n\n")
	} else {
		fmt.Fprintf(out, "func (%s %s) AppendJSON(b []byte) ([]byte, error) {\n", recv, name)
		if w.usesErr {
			out.WriteString("n := len(b)\nvar err error\n")
		}
		out.Write(w.body.Bytes())
		out.WriteString("return b, nil\n}\n\n")
	}
	fmt.Fprintf(out, "// MarshalJSON encodes %s with AppendJSON, without reflection.\n", recv)
	fmt.Fprintf(out, "func (%s %s) MarshalJSON() ([]byte, error) { return wire.Marshal(%s) }\n\n", recv, name, recv)
}

// structBody writes the object of struct d, member by member.
func (g *encoderGen) structBody(w *fnWriter, d *goDecl) error {
	w.literal("{")
	// sure: a member has been written before this point whatever the
	// value; maybe: one may have been. With maybe alone, whether a comma
	// is due is known only when the encoder runs: it is, unless the last
	// byte written is the object's opening brace (a member's value never
	// ends with one).
	sure, maybe := false, false
	for _, f := range d.Fields {
		if f.JSON == "" {
			continue
		}
		x := "m." + f.Name
		c, isConst := g.consts[d.Name][f.JSON]
		cond := ""
		if isConst {
			if c == "" && (f.OmitEmpty || f.OmitZero) {
				continue // the const is empty and so always omitted
			}
		} else {
			var err error
			if cond, err = g.present(x, f); err != nil {
				return fmt.Errorf("field %s: %w", f.Name, err)
			}
		}
		if cond != "" {
			w.stmt("if %s {", cond)
		}
		switch {
		case sure:
			w.literal(",")
		case maybe:
			w.stmt("if b[len(b)-1] != '{' {")
			w.literal(",")
			w.stmt("}")
		}
		w.literal(jsonText(f.JSON) + ":")
		if isConst {
			w.literal(jsonText(c))
		} else if err := g.valueOf(w, x, f.Type, 1, strings.HasSuffix(cond, x+" != nil") || strings.HasPrefix(cond, "len("+x+")")); err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		if cond != "" {
			w.stmt("}")
			maybe = true
		} else {
			sure = true
		}
	}
	w.literal("}")
	return nil
}

// present returns the condition under which field f of value x is
// written, "" when it always is.
func (g *encoderGen) present(x string, f goStructField) (string, error) {
	var notEmpty, notZero string
	if f.OmitEmpty {
		notEmpty = g.notEmpty(x, f.Type)
	}
	if f.OmitZero {
		z, err := g.zero(x, f.Type)
		if err != nil {
			return "", err
		}
		notZero = negate(z)
	}
	switch {
	case notEmpty == "":
		return notZero, nil
	case notZero == "" || notZero == notEmpty:
		return notEmpty, nil
	case strings.HasPrefix(notEmpty, "len(") && notZero == x+" != nil":
		return notEmpty, nil // not empty implies not nil
	}
	return "(" + notEmpty + ") && (" + notZero + ")", nil
}

// notEmpty is the condition under which omitempty keeps x.
func (g *encoderGen) notEmpty(x string, t *goType) string {
	switch t.Kind {
	case kString:
		return x + ` != ""`
	case kBool:
		return x
	case kInt, kUint, kFloat:
		return x + " != 0"
	case kPtr, kAny:
		return x + " != nil"
	case kSlice, kMap, kRaw:
		return "len(" + x + ") != 0"
	case kNamed:
		if d := g.decls[t.Name]; d != nil && !d.Struct {
			return g.notEmpty(x, d.Type)
		}
	}
	return "" // a struct or union is never empty
}

// zero is the condition under which x is its type's zero value.
func (g *encoderGen) zero(x string, t *goType) (string, error) {
	switch t.Kind {
	case kString:
		return x + ` == ""`, nil
	case kBool:
		return "!" + x, nil
	case kInt, kUint, kFloat:
		return x + " == 0", nil
	case kPtr, kAny, kSlice, kMap, kRaw:
		return x + " == nil", nil
	case kNamed:
		if g.unions[t.Name] != nil {
			return x + ".Value == nil", nil
		}
		d := g.decls[t.Name]
		if d == nil {
			return "", fmt.Errorf("unknown type %s", t.Name)
		}
		if !d.Struct {
			return g.zero(x, d.Type)
		}
		var all []string
		for _, f := range d.Fields {
			z, err := g.zero(x+"."+f.Name, f.Type)
			if err != nil {
				return "", err
			}
			all = append(all, "("+z+")")
		}
		if len(all) == 0 {
			return "true", nil
		}
		return strings.Join(all, " && "), nil
	}
	return "", fmt.Errorf("no zero test for kind %d", t.Kind)
}

func negate(cond string) string {
	if c, ok := strings.CutPrefix(cond, "!"); ok && !strings.ContainsAny(c, " (") {
		return c
	}
	for _, op := range [][2]string{{" == nil", " != nil"}, {` == ""`, ` != ""`}, {" == 0", " != 0"}} {
		if c, ok := strings.CutSuffix(cond, op[0]); ok && !strings.ContainsAny(c, " (") {
			return c + op[1]
		}
	}
	return "!(" + cond + ")"
}

// value writes the encoding of expression x of type t; depth names the
// loop variables of nested slices.
func (g *encoderGen) value(w *fnWriter, x string, t *goType, depth int) error {
	return g.valueOf(w, x, t, depth, false)
}

// valueOf is value for an x known not to be nil when nonNil is set (an
// omitted nil pointer, slice or map is not encoded at all).
func (g *encoderGen) valueOf(w *fnWriter, x string, t *goType, depth int, nonNil bool) error {
	check := func(call string) {
		w.usesErr = true
		w.stmt("if b, err = %s; err != nil {", call)
		w.stmt("return b[:n], err")
		w.stmt("}")
	}
	switch t.Kind {
	case kString:
		w.stmt("b = wire.AppendString(b, %s)", x)
	case kBool:
		w.stmt("b = strconv.AppendBool(b, %s)", x)
	case kInt:
		if t.Name != "int64" {
			x = "int64(" + x + ")"
		}
		w.stmt("b = strconv.AppendInt(b, %s, 10)", x)
	case kUint:
		if t.Name != "uint64" {
			x = "uint64(" + x + ")"
		}
		w.stmt("b = strconv.AppendUint(b, %s, 10)", x)
	case kFloat:
		check(fmt.Sprintf("wire.AppendFloat(b, %s)", x))
	case kRaw:
		check(fmt.Sprintf("wire.AppendRawJSON(b, %s)", x))
	case kAny:
		check(fmt.Sprintf("wire.AppendAny(b, %s)", x))
	case kMap:
		check(fmt.Sprintf("wire.AppendObject(b, %s)", x))
	case kPtr:
		if !nonNil {
			w.stmt("if %s == nil {", x)
			w.literal("null")
			w.stmt("} else {")
		}
		elem := "*" + x
		if t.Elem.Kind == kNamed {
			elem = x // its methods take the pointer too
		}
		if err := g.value(w, elem, t.Elem, depth); err != nil {
			return err
		}
		if !nonNil {
			w.stmt("}")
		}
	case kSlice:
		i, v := fmt.Sprintf("i%d", depth), fmt.Sprintf("x%d", depth)
		if !nonNil {
			w.stmt("if %s == nil {", x)
			w.literal("null")
			w.stmt("} else {")
		}
		w.literal("[")
		w.stmt("for %s, %s := range %s {", i, v, x)
		w.stmt("if %s > 0 {", i)
		w.literal(",")
		w.stmt("}")
		if err := g.value(w, v, t.Elem, depth+1); err != nil {
			return err
		}
		w.stmt("}")
		w.literal("]")
		if !nonNil {
			w.stmt("}")
		}
	case kNamed:
		if g.decls[t.Name] == nil && g.unions[t.Name] == nil {
			return fmt.Errorf("unknown type %s", t.Name)
		}
		if g.namedCanFail(t.Name) {
			check(x + ".AppendJSON(b)")
		} else {
			w.stmt("b = %s.appendJSON(b)", x)
		}
	default:
		return fmt.Errorf("no encoder for kind %d", t.Kind)
	}
	return nil
}

// union writes the encoder of a union: its variant's, or null when it
// holds none. A variant may be held by value or by pointer.
func (g *encoderGen) union(out *bytes.Buffer, u *Union) error {
	fail := g.namedCanFail(u.Name)
	w := &fnWriter{fail: fail}
	call := func(v string) string {
		if fail {
			return v + ".AppendJSON(b)"
		}
		return v + ".appendJSON(b)"
	}
	w.stmt("switch v := u.Value.(type) {")
	for _, v := range u.Variants {
		if g.decls[v.Title] == nil {
			return fmt.Errorf("variant %s has no type", v.Title)
		}
		w.stmt("case %s:", v.Title)
		w.stmt("return %s", call("v"))
		w.stmt("case *%s:", v.Title)
		w.stmt("if v != nil {")
		w.stmt("return %s", call("v"))
		w.stmt("}")
	}
	w.stmt("}")
	w.literal("null")
	if fail {
		w.stmt("return b, nil")
		w.flush()
		fmt.Fprintf(out, "// AppendJSON appends the JSON of the variant u holds to b, as encoding/json would write it: null when it holds none.\n")
		fmt.Fprintf(out, "func (u %s) AppendJSON(b []byte) ([]byte, error) {\n", u.Name)
		out.Write(w.body.Bytes())
		out.WriteString("}\n\n")
	} else {
		w.stmt("return b")
		w.flush()
		fmt.Fprintf(out, "// AppendJSON appends the JSON of the variant u holds to b, as encoding/json would write it: null when it holds none.\n")
		fmt.Fprintf(out, "func (u %s) AppendJSON(b []byte) ([]byte, error) { return u.appendJSON(b), nil }\n\n", u.Name)
		fmt.Fprintf(out, "func (u %s) appendJSON(b []byte) []byte {\n", u.Name)
		out.Write(w.body.Bytes())
		out.WriteString("}\n\n")
	}
	fmt.Fprintf(out, "// MarshalJSON encodes u with AppendJSON, without reflection.\n")
	fmt.Fprintf(out, "func (u %s) MarshalJSON() ([]byte, error) { return wire.Marshal(u) }\n\n", u.Name)
	return nil
}

// fnWriter collects a function body, joining consecutive constant bytes
// into one append.
type fnWriter struct {
	body    bytes.Buffer
	lit     strings.Builder
	fail    bool // the function returns an error
	usesErr bool // the body checks errors (needs n and err)
}

func (w *fnWriter) literal(s string) { w.lit.WriteString(s) }

func (w *fnWriter) flush() {
	if w.lit.Len() == 0 {
		return
	}
	s := w.lit.String()
	w.lit.Reset()
	if len(s) == 1 && s[0] >= 0x20 && s[0] < 0x7f {
		fmt.Fprintf(&w.body, "b = append(b, %s)\n", strconv.QuoteRune(rune(s[0])))
		return
	}
	fmt.Fprintf(&w.body, "b = append(b, %s...)\n", goString(s))
}

func (w *fnWriter) stmt(format string, args ...any) {
	w.flush()
	fmt.Fprintf(&w.body, format, args...)
	w.body.WriteByte('\n')
}

// goString is a Go literal of s: raw when that reads better.
func goString(s string) string {
	if strconv.CanBackquote(s) && !strings.Contains(s, "`") {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

// jsonText is s as encoding/json writes a string (a member name or a
// const): escaped for HTML as it is.
func jsonText(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always encodes
	}
	return string(b)
}
