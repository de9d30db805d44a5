package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/generated/loomapi"
	"github.com/agentwire/agentwire/internal/protocol/wiretest"
	"github.com/agentwire/agentwire/internal/wire"
)

// The generated encoders are pinned to encoding/json here: every value
// built below, of every message type of every WebSocket protocol, must
// encode through Encode, through json.Marshal (which calls MarshalJSON)
// and through AppendJSON to the bytes encoding/json writes, by reflection
// alone, for the same value with its constant fields set (reference); and
// both must fail on the same values. The values come from the documents'
// and the adapters' examples, the same examples with every string
// replaced by a fuzzed one, and values of every type filled from fuzzed
// bytes (filler).

// wireProtocol is one generated package under test.
type wireProtocol struct {
	name     string
	doc      string // the AsyncAPI document
	testdata string // the adapter's wire examples
	// messages holds a value of every message type; TestEncoders checks
	// that it names every message of the document.
	messages         []any
	decode           func([]byte) (any, error)
	decodeOutbound   func([]byte) (any, error)
	encode           func(any) ([]byte, error)
	validateInbound  func([]byte) error
	validateOutbound func([]byte) error
}

var wireProtocols = []wireProtocol{
	{
		name: "agentchat", doc: "../../asyncapi/agentchat.yaml", testdata: "../../internal/protocol/agentchat/testdata/wire",
		messages: []any{
			agentchatapi.ChatRequest{}, agentchatapi.UserMessageEvent{}, agentchatapi.AgentMessageEvent{}, agentchatapi.ToolCallEvent{},
			agentchatapi.ToolResultEvent{}, agentchatapi.AgentThinkingEvent{}, agentchatapi.ErrorEvent{},
		},
		decode:           func(b []byte) (any, error) { return agentchatapi.Decode(b) },
		decodeOutbound:   func(b []byte) (any, error) { return agentchatapi.DecodeOutbound(b) },
		encode:           func(m any) ([]byte, error) { return agentchatapi.Encode(m.(agentchatapi.Message)) },
		validateInbound:  agentchatapi.ValidateInbound,
		validateOutbound: agentchatapi.ValidateOutbound,
	},
	{
		name: "ag2", doc: "../../asyncapi/ag2.yaml", testdata: "../../internal/protocol/ag2/testdata/wire",
		messages: []any{
			ag2api.UserInputSubmit{}, ag2api.InlineComponentResult{}, ag2api.ArtifactPatch{}, ag2api.ClientResume{},
			ag2api.ResumeBoundary{}, ag2api.SelectSpeaker{}, ag2api.Print{}, ag2api.Text{}, ag2api.InputRequest{},
			ag2api.InputTimeout{}, ag2api.InputAck{}, ag2api.ToolCall{}, ag2api.ToolResponse{}, ag2api.ToolProgress{},
			ag2api.UsageSummary{}, ag2api.RunComplete{}, ag2api.ChatError{}, ag2api.UIToolResponse{}, ag2api.UIToolEvent{},
		},
		decode:           func(b []byte) (any, error) { return ag2api.Decode(b) },
		decodeOutbound:   func(b []byte) (any, error) { return ag2api.DecodeOutbound(b) },
		encode:           func(m any) ([]byte, error) { return ag2api.Encode(m.(ag2api.Message)) },
		validateInbound:  ag2api.ValidateInbound,
		validateOutbound: ag2api.ValidateOutbound,
	},
	{
		name: "loom", doc: "../../asyncapi/loom.yaml", testdata: "../../internal/protocol/loom/testdata/wire",
		messages: []any{
			loomapi.RunRequest{}, loomapi.ToolsListRequest{}, loomapi.ToolShowRequest{}, loomapi.UserMessagesRequest{},
			loomapi.PingRequest{}, loomapi.ToolApprovalResponseRequest{}, loomapi.CancelRequest{}, loomapi.InputResponseRequest{},
			loomapi.RunStreamEventResponse{}, loomapi.RunEndResponse{}, loomapi.ToolsListResponse{}, loomapi.ToolShowResponse{},
			loomapi.UserMessagesResponse{}, loomapi.PongResponse{}, loomapi.ErrorResponse{},
		},
		decode:           func(b []byte) (any, error) { return loomapi.Decode(b) },
		decodeOutbound:   func(b []byte) (any, error) { return loomapi.DecodeOutbound(b) },
		encode:           func(m any) ([]byte, error) { return loomapi.Encode(m.(loomapi.Message)) },
		validateInbound:  loomapi.ValidateInbound,
		validateOutbound: loomapi.ValidateOutbound,
	},
	{
		name: "agentloop", doc: "../../asyncapi/agentloop.yaml", testdata: "../../internal/protocol/agentloop/testdata/wire",
		messages: []any{
			agentloopapi.UserInputMessage{}, agentloopapi.ApprovalResponseMessage{}, agentloopapi.GetContextInfoMessage{},
			agentloopapi.ManualCompactMessage{}, agentloopapi.ResponseItemMessage{}, agentloopapi.LoadingStateMessage{},
			agentloopapi.ApprovalRequestMessage{}, agentloopapi.AgentFinishedMessage{}, agentloopapi.ContextInfoMessage{},
			agentloopapi.ContextCompactedMessage{}, agentloopapi.ErrorMessage{},
		},
		decode:           func(b []byte) (any, error) { return agentloopapi.Decode(b) },
		decodeOutbound:   func(b []byte) (any, error) { return agentloopapi.DecodeOutbound(b) },
		encode:           func(m any) ([]byte, error) { return agentloopapi.Encode(m.(agentloopapi.Message)) },
		validateInbound:  agentloopapi.ValidateInbound,
		validateOutbound: agentloopapi.ValidateOutbound,
	},
}

// encodeEnv is what the checks know of one protocol: its document, the
// reference encoder, and its examples decoded.
type encodeEnv struct {
	p        wireProtocol
	api      *API
	tg       *typeGen
	ref      *reference
	examples []example
}

// example is a decoded example message and the validator of its
// direction.
type example struct {
	m        any
	validate func([]byte) error
}

var (
	envsMu sync.Mutex
	envs   = map[string]*encodeEnv{}
)

// loadEnv reads p's document (running go-jsonschema, for its unions) and
// examples once per test binary.
func loadEnv(t testing.TB, p wireProtocol) *encodeEnv {
	t.Helper()
	envsMu.Lock()
	defer envsMu.Unlock()
	if e := envs[p.name]; e != nil {
		return e
	}
	abs, err := filepath.Abs(p.doc)
	if err != nil {
		t.Fatal(err)
	}
	l := newLoader()
	api, err := loadAPI(abs, l)
	if err != nil {
		t.Fatalf("load %s: %v", p.doc, err)
	}
	tg := newTypeGen(p.name+"api", l)
	if _, err := tg.generate(); err != nil {
		t.Fatalf("go-jsonschema on %s: %v", p.doc, err)
	}
	e := &encodeEnv{p: p, api: api, tg: tg, ref: newReference(l, tg)}
	for _, dir := range []string{"inbound", "outbound"} {
		decode, validate := p.decode, p.validateInbound
		if dir == "outbound" {
			decode, validate = p.decodeOutbound, p.validateOutbound
		}
		frames := wiretest.Seeds(t, p.testdata, dir) // examples, and invalid frames that do not decode
		frames = append(frames, documentExamples(t, p.doc)...)
		for _, f := range frames {
			if m, err := decode(f); err == nil {
				e.examples = append(e.examples, example{m, validate})
			}
		}
	}
	envs[p.name] = e
	return e
}

// documentExamples returns the payloads of every message example of an
// AsyncAPI document, as JSON.
func documentExamples(t testing.TB, path string) [][]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Messages map[string]struct {
				Examples []struct {
					Payload any `yaml:"payload"`
				} `yaml:"examples"`
			} `yaml:"messages"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out [][]byte
	for _, m := range doc.Components.Messages {
		for _, ex := range m.Examples {
			frame, err := json.Marshal(ex.Payload)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out = append(out, frame)
		}
	}
	return out
}

// TestEncodersMatchEncodingJSON checks every protocol's encoders on its
// examples and on values of every type filled from a fixed sequence of
// random bytes, and that encoded examples still pass their validators.
func TestEncodersMatchEncodingJSON(t *testing.T) {
	for _, p := range wireProtocols {
		t.Run(p.name, func(t *testing.T) {
			e := loadEnv(t, p)
			// The message list names every message of the document.
			listed := map[string]bool{}
			for _, m := range p.messages {
				listed[reflect.TypeOf(m).Name()] = true
			}
			for _, m := range e.api.Messages {
				if !listed[m.Payload.Title] {
					t.Errorf("%s: message %s (%q) is not in wireProtocols' list", p.doc, m.Payload.Title, m.WireType)
				}
				delete(listed, m.Payload.Title)
			}
			for name := range listed {
				t.Errorf("%s has no message %s", p.doc, name)
			}
			if len(e.examples) == 0 {
				t.Fatalf("no example of %s decodes", p.name)
			}
			for _, ex := range e.examples {
				frame := e.check(t, ex.m)
				if err := ex.validate(frame); err != nil {
					t.Errorf("Validate(Encode(%#v)) = %v; encoded %s", ex.m, err, frame)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			seen := map[string]bool{}
			for i := range 400 {
				data := make([]byte, 16+i%512)
				for j := range data {
					data[j] = byte(rng.Uint32())
				}
				s := fuzzStrings[i%len(fuzzStrings)]
				for _, m := range p.messages {
					e.check(t, e.fill(reflect.TypeOf(m), s, data, seen))
				}
				for _, ex := range e.examples {
					e.check(t, withStrings(reflect.ValueOf(ex.m), s).Interface())
				}
			}
			// Every type the package declares was encoded, filled.
			for _, d := range e.tg.decls {
				if !seen[d.Name] {
					t.Errorf("no value of %s was filled", d.Name)
				}
			}
			for _, u := range e.tg.unions {
				if !seen[u.Name] {
					t.Errorf("no value of %s was filled", u.Name)
				}
			}
		})
	}
}

func FuzzEncodeAgentchat(f *testing.F) { fuzzEncode(f, wireProtocols[0]) }
func FuzzEncodeAG2(f *testing.F)       { fuzzEncode(f, wireProtocols[1]) }
func FuzzEncodeLoom(f *testing.F)      { fuzzEncode(f, wireProtocols[2]) }
func FuzzEncodeAgentloop(f *testing.F) { fuzzEncode(f, wireProtocols[3]) }

// fuzzEncode checks p's encoders on values filled from fuzzed bytes and on
// its examples with every string replaced by a fuzzed one.
func fuzzEncode(f *testing.F, p wireProtocol) {
	e := loadEnv(f, p)
	for i, s := range fuzzStrings {
		f.Add(s, bytes.Repeat([]byte{byte(i * 37)}, 64))
	}
	f.Add("", []byte{})
	f.Add("x", []byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8"))
	f.Fuzz(func(t *testing.T, s string, data []byte) {
		for _, m := range p.messages {
			e.check(t, e.fill(reflect.TypeOf(m), s, data, nil))
		}
		for _, ex := range e.examples {
			e.check(t, withStrings(reflect.ValueOf(ex.m), s).Interface())
		}
	})
}

// check compares the encodings of m, returning the frame.
func (e *encodeEnv) check(t testing.TB, m any) []byte {
	t.Helper()
	want, werr := e.ref.marshal(m)
	got, gerr := e.p.encode(m)
	if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("Encode(%#v) = %s, %v\nencoding/json: %s, %v", m, got, gerr, want, werr)
	}
	viaJSON, jerr := json.Marshal(m)
	if (werr == nil) != (jerr == nil) || !bytes.Equal(viaJSON, want) {
		t.Fatalf("json.Marshal(%#v) = %s, %v\nencoding/json by reflection: %s, %v", m, viaJSON, jerr, want, werr)
	}
	appended, aerr := m.(wire.Appender).AppendJSON([]byte("prefix"))
	wantAppended := "prefix" + string(want)
	if werr != nil {
		wantAppended = "prefix"
	}
	if (werr == nil) != (aerr == nil) || string(appended) != wantAppended {
		t.Fatalf("AppendJSON(%q, %#v) = %q, %v; want %q", "prefix", m, appended, aerr, wantAppended)
	}
	return got
}

// reference encodes a value of a generated package with encoding/json by
// reflection alone: the value is copied into types built with
// reflect.StructOf and friends, which have the same fields and tags but no
// methods, the constant fields the document declares set (as the
// MarshalJSON methods before the generated encoders set them), and each
// union replaced by the reference encoding of the variant it holds (as its
// MarshalJSON did).
type reference struct {
	// inlineUnions, for the benchmarks' baseline, puts a union's variant
	// itself in the copy, in an interface, rather than its encoding: the
	// copy is then encoded by reflection alone.
	inlineUnions bool
	consts       map[string]map[string]string // type -> member -> const
	unions       map[string]*Union
	mu           sync.Mutex
	types        map[reflect.Type]reflect.Type
	variants     map[reflect.Type][]reflect.Type
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func newReference(l *loader, tg *typeGen) *reference {
	r := &reference{consts: map[string]map[string]string{}, unions: map[string]*Union{},
		types: map[reflect.Type]reflect.Type{}, variants: map[reflect.Type][]reflect.Type{}}
	// The document's rule, read from the schema files rather than from
	// the generator: a required string const of a file's root schema.
	for _, f := range l.order {
		s := l.files[f]
		for _, p := range s.Props {
			ps := p.Schema.Resolve()
			if c, ok := ps.Const.(string); ok && ps.HasConst && s.IsRequired(p.Name) {
				if r.consts[s.Title] == nil {
					r.consts[s.Title] = map[string]string{}
				}
				r.consts[s.Title][p.Name] = c
			}
		}
	}
	for _, u := range tg.unions {
		r.unions[u.Name] = u
	}
	return r
}

// inlined returns a reference like r whose copies hold unions' variants
// themselves (see inlineUnions).
func (r *reference) inlined() *reference {
	return &reference{inlineUnions: true, consts: r.consts, unions: r.unions,
		types: map[reflect.Type]reflect.Type{}, variants: map[reflect.Type][]reflect.Type{}}
}

func (r *reference) marshal(v any) ([]byte, error) {
	pv, err := r.plain(reflect.ValueOf(v))
	if err != nil {
		return nil, err
	}
	return json.Marshal(pv.Interface())
}

func (r *reference) isUnion(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && r.unions[t.Name()] != nil && t.NumField() == 1 && t.Field(0).Name == "Value"
}

var basicTypes = map[reflect.Kind]reflect.Type{
	reflect.String: reflect.TypeFor[string](), reflect.Bool: reflect.TypeFor[bool](),
	reflect.Int: reflect.TypeFor[int](), reflect.Int64: reflect.TypeFor[int64](), reflect.Float64: reflect.TypeFor[float64](),
}

// plainType returns t's twin without methods.
func (r *reference) plainType(t reflect.Type) reflect.Type {
	r.mu.Lock()
	pt, ok := r.types[t]
	r.mu.Unlock()
	if ok {
		return pt
	}
	switch {
	case r.isUnion(t) && r.inlineUnions:
		pt = reflect.TypeFor[any]()
	case t == rawMessageType, r.isUnion(t):
		pt = rawMessageType
	case t.Kind() == reflect.Struct:
		fields := make([]reflect.StructField, t.NumField())
		for i := range fields {
			f := t.Field(i)
			fields[i] = reflect.StructField{Name: f.Name, Type: r.plainType(f.Type), Tag: f.Tag}
		}
		pt = reflect.StructOf(fields)
	case t.Kind() == reflect.Pointer:
		pt = reflect.PointerTo(r.plainType(t.Elem()))
	case t.Kind() == reflect.Slice:
		pt = reflect.SliceOf(r.plainType(t.Elem()))
	case t.Kind() == reflect.Map:
		pt = reflect.MapOf(t.Key(), r.plainType(t.Elem()))
	case t.Kind() == reflect.Interface:
		pt = t
	default:
		if pt = basicTypes[t.Kind()]; pt == nil {
			panic("reference: no plain type for " + t.String())
		}
	}
	r.mu.Lock()
	r.types[t] = pt
	r.mu.Unlock()
	return pt
}

// plain returns v copied into its plain type.
func (r *reference) plain(v reflect.Value) (reflect.Value, error) {
	t := v.Type()
	pt := r.plainType(t)
	switch {
	case t == rawMessageType:
		return v, nil
	case r.isUnion(t):
		held := v.Field(0)
		if held.IsNil() {
			return reflect.Zero(pt), nil
		}
		if r.inlineUnions {
			return r.plain(held.Elem())
		}
		b, err := r.marshal(held.Elem().Interface())
		return reflect.ValueOf(json.RawMessage(b)), err
	}
	switch t.Kind() {
	case reflect.Struct:
		out := reflect.New(pt).Elem()
		for i := range t.NumField() {
			f := t.Field(i)
			fv, err := r.plain(v.Field(i))
			if err != nil {
				return fv, err
			}
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if r.isUnion(f.Type) && v.Field(i).Field(0).IsNil() && !strings.Contains(opts, "omitzero") {
				// A union holding nothing is never empty: its MarshalJSON
				// wrote null.
				fv = reflect.ValueOf(json.RawMessage("null"))
			}
			out.Field(i).Set(fv)
			if c, ok := r.consts[t.Name()][name]; ok && f.Type.Kind() == reflect.String {
				out.Field(i).SetString(c)
			}
		}
		return out, nil
	case reflect.Pointer:
		if v.IsNil() {
			return reflect.Zero(pt), nil
		}
		ev, err := r.plain(v.Elem())
		p := reflect.New(pt.Elem())
		p.Elem().Set(ev)
		return p, err
	case reflect.Slice:
		if v.IsNil() {
			return reflect.Zero(pt), nil
		}
		out := reflect.MakeSlice(pt, v.Len(), v.Len())
		for i := range v.Len() {
			ev, err := r.plain(v.Index(i))
			if err != nil {
				return out, err
			}
			out.Index(i).Set(ev)
		}
		return out, nil
	case reflect.Map:
		if v.IsNil() {
			return reflect.Zero(pt), nil
		}
		out := reflect.MakeMapWithSize(pt, v.Len())
		for it := v.MapRange(); it.Next(); {
			ev, err := r.plain(it.Value())
			if err != nil {
				return out, err
			}
			out.SetMapIndex(it.Key(), ev)
		}
		return out, nil
	case reflect.Interface:
		return v, nil
	}
	return v.Convert(pt), nil
}

// variantTypes returns the Go types of union t's variants, found by
// decoding a member that names each (its UnmarshalJSON builds the variant
// by the discriminator alone).
func (r *reference) variantTypes(t reflect.Type) []reflect.Type {
	r.mu.Lock()
	defer r.mu.Unlock()
	if vs, ok := r.variants[t]; ok {
		return vs
	}
	u := r.unions[t.Name()]
	var out []reflect.Type
	for _, v := range u.Variants {
		vals := discValues(v.Prop(u.Disc).Resolve())
		b, _ := json.Marshal(map[string]string{u.Disc: vals[0]})
		p := reflect.New(t)
		if err := p.Interface().(json.Unmarshaler).UnmarshalJSON(b); err != nil {
			panic("union " + u.Name + ": " + err.Error())
		}
		out = append(out, p.Elem().Field(0).Elem().Type())
	}
	r.variants[t] = out
	return out
}

// fuzzStrings are strings that encoding/json treats with care: HTML
// characters, line and paragraph separators, control characters, invalid
// UTF-8, quotes and backslashes.
var fuzzStrings = []string{
	"", "plain", `<a href="x">&amp;</a>`, "\u2028\u2029", "\xff\xfe\xc3", "\x00\x1f\x7f\t\n\r\b\f",
	"日本語 🙂", `"quoted" \ back\slash`, "\xe2\x80\xa8<\xe2\x80", " ",
}

var fuzzFloats = []float64{
	0, math.Copysign(0, -1), 1, -1.5, 0.1, 1.0 / 3, 1e-6, 1e-7, 1e20, 1e21, 123456789e13, 5e-324, math.MaxFloat64,
	math.NaN(), math.Inf(1), math.Inf(-1),
}

var fuzzRaw = []string{
	"null", " true ", `{ "a" : [ 1 , 2.5e3 , "<&>" ] }`, "\"\u2028\xff\"", "[\n\t{}\r]", "-0", "{", "nul", `"a" "b"`, "",
}

// filler builds a value of a type from bytes: each choice (nil or not,
// how many items, which string, which variant) takes the next byte, and
// zeros once they run out, so any input gives a value.
type filler struct {
	e    *encodeEnv
	s    string
	data []byte
	seen map[string]bool // the named types filled, when not nil
}

func (e *encodeEnv) fill(t reflect.Type, s string, data []byte, seen map[string]bool) any {
	f := &filler{e: e, s: s, data: data, seen: seen}
	return f.value(t, 0).Interface()
}

func (f *filler) next() byte {
	if len(f.data) == 0 {
		return 0
	}
	c := f.data[0]
	f.data = f.data[1:]
	return c
}

func (f *filler) str() string {
	c := f.next()
	switch {
	case c < 64:
		return f.s
	case c < 160:
		return fuzzStrings[int(c)%len(fuzzStrings)]
	}
	n := int(f.next()) % 12
	n = min(n, len(f.data))
	s := string(f.data[:n])
	f.data = f.data[n:]
	return s
}

func (f *filler) value(t reflect.Type, depth int) reflect.Value {
	if f.seen != nil && t.Name() != "" && t.PkgPath() != "" {
		f.seen[t.Name()] = true
	}
	v := reflect.New(t).Elem()
	deep := depth > 5
	switch {
	case t == rawMessageType:
		c := f.next()
		switch {
		case c < 32:
			// nil
		case c < 200:
			v.SetBytes([]byte(fuzzRaw[int(c)%len(fuzzRaw)]))
		default:
			v.SetBytes([]byte(f.str()))
		}
		return v
	case f.e.ref.isUnion(t):
		vs := f.e.ref.variantTypes(t)
		c := int(f.next())
		if c == 255 || deep {
			return v
		}
		vt := vs[c%len(vs)]
		held := f.value(vt, depth+1)
		if c%7 == 3 {
			p := reflect.New(vt)
			p.Elem().Set(held)
			held = p
		}
		v.Field(0).Set(held)
		return v
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(f.next()&1 == 1)
	case reflect.Int, reflect.Int64:
		x := int64(f.next())<<56>>56 | int64(f.next())<<8 | int64(f.next())<<40
		if f.next()&1 == 1 {
			x = math.MinInt64 + x
		}
		v.SetInt(x)
	case reflect.Float64:
		c := f.next()
		if c < 128 {
			v.SetFloat(fuzzFloats[int(c)%len(fuzzFloats)])
		} else {
			var bits uint64
			for range 8 {
				bits = bits<<8 | uint64(f.next())
			}
			v.SetFloat(math.Float64frombits(bits))
		}
	case reflect.Pointer:
		if c := f.next(); c%3 != 0 && !deep {
			p := reflect.New(t.Elem())
			p.Elem().Set(f.value(t.Elem(), depth+1))
			v.Set(p)
		}
	case reflect.Slice:
		c := f.next()
		if c%4 == 0 || deep {
			break
		}
		n := int(c % 4)
		v.Set(reflect.MakeSlice(t, n-1, n-1))
		for i := range n - 1 {
			v.Index(i).Set(f.value(t.Elem(), depth+1))
		}
	case reflect.Map:
		c := f.next()
		if c%4 == 0 || deep {
			break
		}
		v.Set(reflect.MakeMap(t))
		for range int(c%4) - 1 {
			v.SetMapIndex(reflect.ValueOf(f.str()), f.value(t.Elem(), depth+1))
		}
	case reflect.Interface:
		if x := f.anyValue(depth); x != nil {
			v.Set(reflect.ValueOf(x))
		}
	case reflect.Struct:
		for i := range t.NumField() {
			v.Field(i).Set(f.value(t.Field(i).Type, depth+1))
		}
	default:
		panic("filler: no value for " + t.String())
	}
	return v
}

// anyValue returns a free-form value: mostly what encoding/json decodes
// into an any, sometimes a value only json.Marshal's reflection takes.
func (f *filler) anyValue(depth int) any {
	c := f.next()
	if depth > 5 {
		c %= 4
	}
	switch c % 11 {
	case 0:
		return nil
	case 1:
		return f.str()
	case 2:
		return f.next()&1 == 1
	case 3:
		return fuzzFloats[int(f.next())%len(fuzzFloats)]
	case 4, 5:
		m := map[string]any{}
		for range int(f.next() % 4) {
			m[f.str()] = f.anyValue(depth + 1)
		}
		return m
	case 6, 7:
		var a []any
		if f.next()%5 != 0 {
			a = []any{}
		}
		for range int(f.next() % 4) {
			a = append(a, f.anyValue(depth+1))
		}
		return a
	case 8:
		return json.Number([]string{"12.5", "-0", "1x", ""}[f.next()%4])
	case 9:
		return map[string]any(nil)
	}
	return int(f.next()) - 128
}

// withStrings returns a copy of v with every string in it set to s.
func withStrings(v reflect.Value, s string) reflect.Value {
	out := reflect.New(v.Type()).Elem()
	switch v.Kind() {
	case reflect.String:
		out.SetString(s)
	case reflect.Struct:
		for i := range v.NumField() {
			out.Field(i).Set(withStrings(v.Field(i), s))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			p := reflect.New(v.Type().Elem())
			p.Elem().Set(withStrings(v.Elem(), s))
			out.Set(p)
		}
	case reflect.Slice:
		if !v.IsNil() && v.Type() != rawMessageType {
			out.Set(reflect.MakeSlice(v.Type(), v.Len(), v.Len()))
			for i := range v.Len() {
				out.Index(i).Set(withStrings(v.Index(i), s))
			}
		} else {
			out.Set(v)
		}
	case reflect.Map:
		if !v.IsNil() {
			out.Set(reflect.MakeMap(v.Type()))
			for it := v.MapRange(); it.Next(); {
				out.SetMapIndex(it.Key(), withStrings(it.Value(), s))
			}
		}
	case reflect.Interface:
		if !v.IsNil() {
			out.Set(withStrings(v.Elem(), s))
		}
	default:
		out.Set(v)
	}
	return out
}
