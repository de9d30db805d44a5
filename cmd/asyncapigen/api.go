package main

import (
	"bytes"
	"fmt"
	"go/token"
	"strings"
)

// apiFile writes api_gen.go: constants, message interfaces, Decode,
// DecodeOutbound, Encode, Handler, Dispatch, constructors and union types
// (their encoders are in encode_gen.go, see encoderGen).
func apiFile(api *API, tg *typeGen, pkg, header string) ([]byte, error) {
	var b bytes.Buffer
	p := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	b.WriteString(header)
	p("// Package %s is the wire format of %s: typed messages, validating", pkg, api.Title)
	p("// decoders, an encoder, a handler interface and constructors.")
	p("//")
	for _, line := range strings.Split(strings.TrimSpace(api.Description), "\n") {
		p("// %s", strings.TrimRight(line, " "))
	}
	p("package %s", pkg)
	p("")
	p("import (")
	p("\"context\"")
	p("\"fmt\"")
	p("")
	p("\"github.com/agentwire/agentwire/internal/wire\"")
	p(")")
	p("")
	p("// Address is the channel's path on agentwire's listener.")
	p("const Address = %q", api.Address)
	p("")

	// Type constants, one per distinct wire type.
	p("// Message types, the values of each frame's \"type\".")
	p("const (")
	seen := map[string]bool{}
	for _, m := range api.Messages {
		if seen[m.WireType] {
			continue
		}
		seen[m.WireType] = true
		p("Type%s = %q", exportName(m.WireType), m.WireType)
	}
	p(")")
	p("")

	p("// Message is any message of the protocol.")
	p("type Message interface {")
	p("// MessageType is the frame's \"type\".")
	p("MessageType() string")
	p("// AppendJSON appends the message's frame to b: the bytes json.Marshal")
	p("// writes for it, with its constant fields set, written without")
	p("// reflection (encode_gen.go). Encode uses it.")
	p("AppendJSON(b []byte) ([]byte, error)")
	p("}")
	p("")
	p("// Inbound is a message a client sends to the server.")
	p("type Inbound interface {")
	p("Message")
	p("isInbound()")
	p("}")
	p("")
	p("// Outbound is a message the server sends to a client.")
	p("type Outbound interface {")
	p("Message")
	p("isOutbound()")
	p("}")
	p("")
	for _, m := range api.Messages {
		t := m.Payload.Title
		p("// MessageType implements Message.")
		p("func (%s) MessageType() string { return Type%s }", t, exportName(m.WireType))
		if m.Direction == Inbound {
			p("func (%s) isInbound() {}", t)
		} else {
			p("func (%s) isOutbound() {}", t)
		}
		p("")
	}

	for _, dir := range []Direction{Inbound, Outbound} {
		name, check, validate, iface, who := "Decode", "checkInbound", "ValidateInbound", "Inbound", "a client"
		if dir == Outbound {
			name, check, validate, iface, who = "DecodeOutbound", "checkOutbound", "ValidateOutbound", "Outbound", "the server"
		}
		var msgs []*Message
		for _, m := range api.Messages {
			if m.Direction == dir {
				msgs = append(msgs, m)
			}
		}
		if len(msgs) == 0 {
			return nil, fmt.Errorf("no message in the %s direction", strings.ToLower(iface))
		}
		p("// %s parses a frame sent by %s, checks it against its schema and", name, who)
		p("// returns the typed message. A frame that does not match returns a")
		p("// *wire.Error with the kind of violation, the message type once it is")
		p("// known, the JSON Pointer of the offending value and the reason.")
		p("func %s(frame []byte) (%s, error) {", name, iface)
		p("t, v, err := %s(frame)", check)
		p("if err != nil { return nil, err }")
		p("var m %s", iface)
		p("switch t {")
		for _, m := range msgs {
			p("case Type%s:", exportName(m.WireType))
			p("var x %s", m.Payload.Title)
			p("err = wire.UnmarshalParsed(frame, v, &x)")
			p("m = x")
		}
		p("default:")
		p("return nil, wire.UnknownType(t)")
		p("}")
		p("if err != nil { return nil, wire.WithMessage(err, t) }")
		p("return m, nil")
		p("}")
		p("")
		p("// %s checks a frame sent by %s against its schema: the checks", validate, who)
		p("// that %s makes, with the same errors, without building the typed", name)
		if dir == Outbound {
			p("// message. Servers check what they send with it in tests.")
		} else {
			p("// message. Clients check what they send with it in tests.")
		}
		p("func %s(frame []byte) error {", validate)
		p("_, _, err := %s(frame)", check)
		p("return err")
		p("}")
		p("")
		p("// %s parses and validates a frame sent by %s; it returns the", check, who)
		p("// frame's type and parsed value.")
		p("func %s(frame []byte) (string, any, error) {", check)
		p("v, err := wire.Parse(frame)")
		p("if err != nil { return \"\", nil, err }")
		p("t, err := wire.MessageType(v)")
		p("if err != nil { return \"\", nil, err }")
		p("switch t {")
		for _, m := range msgs {
			p("case Type%s:", exportName(m.WireType))
			p("err = validate%s(\"\", v)", m.Payload.Title)
		}
		p("default:")
		p("return t, nil, wire.UnknownType(t)")
		p("}")
		p("if err != nil { return t, nil, wire.WithMessage(err, t) }")
		p("return t, v, nil")
		p("}")
		p("")
	}

	p("// Encode returns the JSON frame of m, written by its AppendJSON: what")
	p("// json.Marshal returns for m, without reflection.")
	p("func Encode(m Message) ([]byte, error) {")
	p("if m == nil { return nil, fmt.Errorf(\"encode: nil message\") }")
	p("return wire.Marshal(m)")
	p("}")
	p("")

	p("// Handler handles every message a client can send; Dispatch calls it.")
	p("type Handler interface {")
	for _, m := range api.Messages {
		if m.Direction != Inbound {
			continue
		}
		p("// Handle%s handles %q: %s", exportName(m.Key), m.WireType, strings.TrimSuffix(m.Summary, "."))
		p("Handle%s(ctx context.Context, m %s) error", exportName(m.Key), m.Payload.Title)
	}
	p("}")
	p("")
	p("// Dispatch calls the Handler method for m's type.")
	p("func Dispatch(ctx context.Context, h Handler, m Inbound) error {")
	p("switch m := m.(type) {")
	for _, m := range api.Messages {
		if m.Direction != Inbound {
			continue
		}
		p("case %s:", m.Payload.Title)
		p("return h.Handle%s(ctx, m)", exportName(m.Key))
	}
	p("}")
	p("return fmt.Errorf(\"dispatch: unexpected message %%T\", m)")
	p("}")
	p("")

	p("// UnimplementedHandler answers every client message with a")
	p("// *wire.UnimplementedError, which errors.Is matches to")
	p("// wire.ErrUnimplemented. A Handler that embeds it keeps compiling when")
	p("// the document adds a message: the new message is answered as")
	p("// unimplemented until the Handler gets a method for it.")
	p("type UnimplementedHandler struct{}")
	p("")
	p("var _ Handler = UnimplementedHandler{}")
	p("")
	for _, m := range api.Messages {
		if m.Direction != Inbound {
			continue
		}
		p("// Handle%s implements Handler.", exportName(m.Key))
		p("func (UnimplementedHandler) Handle%s(context.Context, %s) error {", exportName(m.Key), m.Payload.Title)
		p("return &wire.UnimplementedError{Message: Type%s}", exportName(m.WireType))
		p("}")
		p("")
	}

	// Constructors for outbound messages: required fields as parameters.
	for _, m := range api.Messages {
		if m.Direction != Outbound {
			continue
		}
		s := m.Payload
		st := tg.structs[s.Title]
		var params, assigns []string
		var names []string
		for _, prop := range s.Props {
			ps := prop.Schema.Resolve()
			if !s.IsRequired(prop.Name) || ps.HasConst {
				continue
			}
			f, ok := st.Fields[prop.Name]
			if !ok {
				return nil, fmt.Errorf("%s: no Go field for %q", s.Title, prop.Name)
			}
			arg := paramName(f.Name)
			params = append(params, arg+" "+f.Type)
			assigns = append(assigns, fmt.Sprintf("%s: %s", f.Name, arg))
			names = append(names, prop.Name)
		}
		typeField := st.Fields["type"].Name
		assigns = append([]string{fmt.Sprintf("%s: Type%s", typeField, exportName(m.WireType))}, assigns...)
		p("// New%s returns a %q message with its required fields%s.", s.Title, m.WireType, fieldList(names))
		p("func New%s(%s) %s {", s.Title, strings.Join(params, ", "), s.Title)
		p("return %s{%s}", s.Title, strings.Join(assigns, ", "))
		p("}")
		p("")
	}

	// Union types.
	for _, u := range tg.unions {
		var names []string
		for _, v := range u.Variants {
			names = append(names, v.Title)
		}
		if u.Doc != "" {
			p("// %s: %s", u.Name, oneLine(u.Doc))
			p("//")
		}
		p("// %s holds one of %s, told apart by %q.", u.Name, strings.Join(names, ", "), u.Disc)
		p("type %s struct {", u.Name)
		p("Value %sValue", u.Name)
		p("}")
		p("")
		p("// %sValue is implemented by the variants of %s.", u.Name, u.Name)
		p("type %sValue interface {", u.Name)
		p("is%s()", u.Name)
		p("}")
		p("")
		for _, n := range names {
			p("func (%s) is%s() {}", n, u.Name)
		}
		p("")
		p("// UnmarshalJSON decodes the variant that %q names.", u.Disc)
		p("func (u *%s) UnmarshalJSON(b []byte) error {", u.Name)
		p("var probe struct { D string `json:%q` }", u.Disc)
		p("if err := wire.Unmarshal(b, &probe); err != nil { return err }")
		p("switch probe.D {")
		for _, v := range u.Variants {
			var quoted []string
			for _, x := range discValues(v.Prop(u.Disc).Resolve()) {
				quoted = append(quoted, fmt.Sprintf("%q", x))
			}
			p("case %s:", strings.Join(quoted, ", "))
			p("var v %s", v.Title)
			p("if err := wire.Unmarshal(b, &v); err != nil { return err }")
			p("u.Value = v")
			p("return nil")
		}
		p("}")
		p("return fmt.Errorf(\"%s: unknown %s %%q\", probe.D)", u.Name, u.Disc)
		p("}")
		p("")
	}

	return b.Bytes(), nil
}

// paramName turns an exported field name into a parameter name.
func paramName(field string) string {
	n := strings.ToLower(field[:1]) + field[1:]
	// Leading initialisms: "ID" -> "id", "URLPath" -> "urlPath".
	upper := 0
	for upper < len(field) && field[upper] >= 'A' && field[upper] <= 'Z' {
		upper++
	}
	if upper > 1 {
		if upper == len(field) {
			n = strings.ToLower(field)
		} else {
			n = strings.ToLower(field[:upper-1]) + field[upper-1:]
		}
	}
	if token.IsKeyword(n) {
		n += "_"
	}
	return n
}

func fieldList(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
