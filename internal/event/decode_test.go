package event

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// The fast path of DecodePayload (decode.go) must return what encoding/json
// returns, and must be the path taken for what EncodePayload writes.

// viaJSON decodes data as encoding/json does.
func viaJSON(t Type, data []byte) (Payload, error) { return registry[t].json(data) }

// viaFast decodes data on the fast path only.
func viaFast(t Type, data []byte) (Payload, bool) {
	fast := registry[t].fast
	if fast == nil {
		return nil, false
	}
	return fast(string(data))
}

func TestEveryPayloadHasAFastDecoder(t *testing.T) {
	for _, ty := range Types {
		if registry[ty].codec == nil {
			t.Errorf("%s: a field of a kind decode.go does not decode; teach it (payloadCodec)", ty)
		}
	}
}

// randomPayload fills every field of a payload of type ty with random
// values, strings with what needs escaping among them.
func randomPayload(rng *rand.Rand, ty Type) Payload {
	v := reflect.New(registry[ty].codec.typ).Elem()
	texts := []string{"", "plain", "a \"quoted\" <b>&amp;</b>\n\ttab\\", "émoji 🎉 \u2028 \x00\x1f", strings.Repeat("long ", 50),
		strings.Repeat("longer ", 1000)}
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch {
		case v.Type() == rawMessageType:
			raws := []string{`{"a":[1,2.5e3,"x\u0041"],"b":{"c":null,"d":true}}`, `"s"`, `null`, `[]`, `-0.5`}
			v.SetBytes([]byte(raws[rng.IntN(len(raws))]))
		case v.Kind() == reflect.String:
			v.SetString(texts[rng.IntN(len(texts))])
		case v.Kind() == reflect.Bool:
			v.SetBool(rng.IntN(2) == 1)
		case isInt(v.Kind()):
			v.SetInt(rng.Int64N(1<<31) - 1<<30)
		case v.Kind() == reflect.Float64:
			v.SetFloat(rng.NormFloat64() * 1e3)
		case v.Kind() == reflect.Pointer:
			if rng.IntN(3) > 0 {
				p := reflect.New(v.Type().Elem())
				fill(p.Elem())
				v.Set(p)
			}
		case v.Kind() == reflect.Slice:
			if n := rng.IntN(4) - 1; n >= 0 {
				s := reflect.MakeSlice(v.Type(), n, n)
				for i := range n {
					fill(s.Index(i))
				}
				v.Set(s)
			}
		case v.Kind() == reflect.Array:
			for i := range v.Len() {
				fill(v.Index(i))
			}
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					fill(v.Field(i))
				}
			}
		default:
			panic(fmt.Sprintf("randomPayload: %s", v.Type()))
		}
	}
	fill(v)
	return v.Interface().(Payload)
}

func TestFastPathTakesEncodedPayloads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var payloads []Payload
	payloads = append(payloads, samples()...)
	for _, ty := range Types {
		payloads = append(payloads, reflect.New(registry[ty].codec.typ).Elem().Interface().(Payload))
		for range 50 {
			payloads = append(payloads, randomPayload(rng, ty))
		}
	}
	for _, p := range payloads {
		data, err := EncodePayload(p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := viaJSON(p.EventType(), data)
		if err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		got, ok := viaFast(p.EventType(), data)
		if !ok {
			t.Errorf("%s %s: not taken by the fast path", p.EventType(), data)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s:\nfast %#v\njson %#v", p.EventType(), data, got, want)
		}
	}
}

// TestFastPathDefers has the fast path meet what it leaves to encoding/json,
// and DecodePayload return what encoding/json does anyway.
func TestFastPathDefers(t *testing.T) {
	for _, c := range []struct {
		ty   Type
		data string
	}{
		{TypeMessageDelta, `{"Text":"case-insensitive key"}`},
		{TypeMessageDelta, `{"text":"\ud83c\udf89 pair"}`},
		{TypeMessageDelta, `{"text":"\ud800 lone"}`},
		{TypeMessageDelta, "{\"text\":\"\xff invalid\"}"},
		{TypeMessageDelta, `{"te\u0078t":"escaped key"}`},
		{TypeMessageDelta, `{"text":"x","unknown":1}`},
		{TypeMessageDelta, `{"text":1}`},
		{TypeMessageDelta, `{"text":"x"} trailing`},
		{TypeMessageDelta, `{"text":"x",}`},
		{TypeMessageDelta, `null`},
		{TypeMessageDelta, `{"text":"unterminated`},
		{TypeMessageDelta, `{"text":"bad \q escape"}`},
		{TypeAgentSelected, `{"round":1.5}`},
		{TypeAgentSelected, `{"round":99999999999999999999}`},
		{TypeAgentSelected, `{"round":01}`},
		{TypeUsage, `{"cost":1e400}`},
		{TypeTotExpanded, `{"candidates":["a",null]}`},
		{TypeTotExpanded, `{"candidates":["a"],"candidates":[null]}`},
		{TypeGotPlanned, `{"edges":[["a","b","c"]]}`},
		{TypeGotPlanned, `{"edges":[["a"]]}`},
		{TypeToolCallCompleted, `{"arguments":{"a":[1,}}`},
		{TypeToolCallCompleted, `{"arguments":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`},
		{TypeToolExecCompleted, `{"exit_code":1.0}`},
	} {
		want, wantErr := viaJSON(c.ty, []byte(c.data))
		if _, ok := viaFast(c.ty, []byte(c.data)); ok {
			t.Errorf("%s %s: taken by the fast path", c.ty, c.data)
		}
		got, err := DecodePayload(c.ty, []byte(c.data))
		if (err != nil) != (wantErr != nil) || err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s: DecodePayload = %#v, %v; encoding/json: %#v, %v", c.ty, c.data, got, err, want, wantErr)
		}
	}
}

// TestFastPathAgrees checks JSON the fast path takes that EncodePayload
// would not write.
func TestFastPathAgrees(t *testing.T) {
	for _, c := range []struct {
		ty   Type
		data string
	}{
		{TypeMessageDelta, " \n{ \"text\" :\t\"a\\u003cb\\\\\\/\" , \"message_id\":\"m\" }\r\n"},
		{TypeMessageDelta, `{"text":"first","text":"second"}`},
		{TypeMessageDelta, `{"text":null}`},
		{TypeMessageDelta, `{"text":"kept","text":null}`},
		{TypeMessageDelta, `{}`},
		{TypeToolExecCompleted, `{"exit_code":3,"exit_code":null,"is_error":true}`},
		{TypeToolExecCompleted, `{"exit_code":-0}`},
		{TypeTotExpanded, `{"candidates":[]}`},
		{TypeTotExpanded, `{"candidates":null}`},
		{TypeTotEvaluated, `{"scores":[1,-2.5E-3,0]}`},
		{TypeGotPlanned, `{"edges":[ ["a" , "b"] ]}`},
		{TypeToolCallCompleted, `{"arguments": {"x" : [1, "y\u00e9", {}] } }`},
		{TypeUIResolved, `{"data":null}`},
		{TypeUIResolved, `{"data":"\ud800"}`},
	} {
		want, err := viaJSON(c.ty, []byte(c.data))
		if err != nil {
			t.Fatalf("%s: %v", c.data, err)
		}
		got, ok := viaFast(c.ty, []byte(c.data))
		if !ok {
			t.Errorf("%s %s: not taken by the fast path", c.ty, c.data)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s:\nfast %#v\njson %#v", c.ty, c.data, got, want)
		}
	}
}

// TestSharedStrings checks that the strings of a small payload are slices
// of the payload's one copy, and that those of a large one are not, so a
// short field kept does not keep the rest.
func TestSharedStrings(t *testing.T) {
	within := func(s, of string) bool {
		p, q := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(of)))
		return p >= q && p < q+uintptr(len(of))
	}
	for _, size := range []int{100, 10 << 10} {
		data, err := EncodePayload(ToolExecCompleted{CallID: "call-1", Result: strings.Repeat("r", size)})
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		p, err := DecodePayloadString(TypeToolExecCompleted, text)
		if err != nil {
			t.Fatal(err)
		}
		if shared := within(p.(ToolExecCompleted).CallID, text); shared != (size < maxShared) {
			t.Errorf("payload of %d bytes: call id shares its memory: %v", len(text), shared)
		}
	}
}

// TestPlainRun checks the eight-bytes-at-a-time scan against a byte at a
// time, with each kind of byte at each position of a long string.
func TestPlainRun(t *testing.T) {
	slow := func(s string, i int) int {
		for i < len(s) && plain[s[i]] {
			i++
		}
		return i
	}
	base := strings.Repeat("abcdé~\x7f\xff", 5)
	for c := range 256 {
		for at := range len(base) {
			s := base[:at] + string([]byte{byte(c)}) + base[at+1:]
			for _, from := range []int{0, 1, 7, 8} {
				if got, want := plainRun(s, from), slow(s, from); got != want {
					t.Fatalf("plainRun(%q, %d) = %d, want %d", s, from, got, want)
				}
			}
		}
	}
}

func TestParseType(t *testing.T) {
	for _, ty := range Types {
		name := []byte(ty)
		if got := ParseType(name); got != ty {
			t.Errorf("ParseType(%q) = %q", name, got)
		}
		if n := testing.AllocsPerRun(10, func() { ParseType(name) }); n != 0 {
			t.Errorf("ParseType(%q) allocates %v times", name, n)
		}
	}
	if got := ParseType([]byte("no.such")); got != "no.such" {
		t.Errorf("ParseType(no.such) = %q", got)
	}
}

func TestDecodePayloadString(t *testing.T) {
	for _, p := range samples() {
		data, err := EncodePayload(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodePayloadString(p.EventType(), string(data))
		if err != nil || !reflect.DeepEqual(got, p) {
			t.Errorf("DecodePayloadString(%s) = %#v, %v", data, got, err)
		}
	}
	if _, err := DecodePayloadString(TypeUsage, `{"prompt_tokens":"x"}`); err == nil {
		t.Error("DecodePayloadString of a mistyped field succeeded")
	}
}

// BenchmarkDecodePayload decodes a 200-byte message delta, the commonest
// event (the store benchmarks' payload), and every sample payload.
func BenchmarkDecodePayload(b *testing.B) {
	delta, err := EncodePayload(MessageDelta{MessageID: NewID(), Text: strings.Repeat("x", 150)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("delta", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodePayload(TypeMessageDelta, delta); err != nil {
				b.Fatal(err)
			}
		}
	})
	escaped, err := EncodePayload(MessageDelta{MessageID: NewID(), Text: strings.Repeat("if a < b {\n\treturn \"x\"\n}\n", 6)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("delta-escaped", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodePayload(TypeMessageDelta, escaped); err != nil {
				b.Fatal(err)
			}
		}
	})
	var all [][]byte
	var types []Type
	for _, p := range samples() {
		data, err := EncodePayload(p)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, data)
		types = append(types, p.EventType())
	}
	b.Run("samples", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, data := range all {
				if _, err := DecodePayload(types[i], data); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func FuzzDecodePayload(f *testing.F) {
	for i, p := range samples() {
		data, err := EncodePayload(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), data)
	}
	f.Add(uint8(6), []byte(`{"text":"a\u00e9\n\"","message_id":"\u003c"}`))
	f.Add(uint8(12), []byte(`{"arguments":{"a":[1,{"b":null}]},"call_id":"c"}`))
	f.Fuzz(func(t *testing.T, i uint8, data []byte) {
		ty := Types[int(i)%len(Types)]
		got, ok := viaFast(ty, data)
		p, err := DecodePayload(ty, data)
		if !ok {
			return
		}
		want, wantErr := viaJSON(ty, data)
		if wantErr != nil {
			t.Fatalf("fast path took %q, which encoding/json refuses: %v", data, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nfast %#v\njson %#v", data, got, want)
		}
		if err != nil || !reflect.DeepEqual(p, want) {
			t.Fatalf("DecodePayload(%q) = %#v, %v", data, p, err)
		}
	})
}
