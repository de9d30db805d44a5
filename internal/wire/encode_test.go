package wire

import (
	"encoding/json"
	"math"
	"testing"
)

// FuzzAppendString: AppendString writes what json.Marshal writes for the
// same string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&amp;</a>", "\x00\x08\x0c\n\r\t\x1f\x7f", "\u2028\u2029", "\xff\xfe\xc3", "日本語 🙂"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %s, json.Marshal = %s", s, got[1:], want)
		}
	})
}

// FuzzAppendFloat: AppendFloat writes what json.Marshal writes for the same
// float64, and fails where it fails.
func FuzzAppendFloat(f *testing.F) {
	for _, x := range []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, 1.0 / 3, 1e-6, 1e-7, 9.99e-7, 1e20, 1e21, 123456789e13, 5e-324, math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1)} {
		f.Add(math.Float64bits(x))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		x := math.Float64frombits(bits)
		want, werr := json.Marshal(x)
		got, gerr := AppendFloat([]byte("x"), x)
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Fatalf("AppendFloat(%v) = %v, json.Marshal = %v", x, gerr, werr)
		}
		if werr == nil && string(got) != "x"+string(want) {
			t.Fatalf("AppendFloat(%v) = %s, json.Marshal = %s", x, got[1:], want)
		}
		if werr != nil && string(got) != "x" {
			t.Fatalf("AppendFloat(%v) = %q on error, want the slice it was given", x, got)
		}
	})
}

// FuzzAppendRawJSON: AppendRawJSON writes what json.Marshal writes for the
// same json.RawMessage, compacted and escaped, and fails where it fails,
// with the same error.
func FuzzAppendRawJSON(f *testing.F) {
	for _, s := range []string{
		"null", " true ", `{ "a" : [ 1 , 2.5e3 , "x" ] }`, `"<a href='x'>&amp;</a>"`, "\"\u2028\u2029\"",
		`"\u003c \\" \\\\<"`, "\"\xff\xfe\xe2\x80\"", "[\n\t{}\r]", `"a" "b"`, "{", "", " ", "nul", `{"a":1,}`,
		"\"\xe2\x80\xa8\xe2\x80\xa9<\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, werr := json.Marshal(json.RawMessage(raw))
		got, gerr := AppendRawJSON([]byte("x"), raw)
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Fatalf("AppendRawJSON(%q) = %v, json.Marshal = %v", raw, gerr, werr)
		}
		if werr == nil && string(got) != "x"+string(want) {
			t.Fatalf("AppendRawJSON(%q) = %s, json.Marshal = %s", raw, got[1:], want)
		}
	})
	if got, err := AppendRawJSON(nil, nil); err != nil || string(got) != "null" {
		f.Fatalf("AppendRawJSON(nil) = %s, %v; want null", got, err)
	}
}

// TestAppendAny: AppendAny writes what json.Marshal writes for the values
// encoding/json decodes into an any, and for others it hands over.
func TestAppendAny(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	deep := any("leaf")
	for range 2 * maxAnyDepth {
		deep = []any{map[string]any{"d": deep}}
	}
	for _, v := range []any{
		nil, "<&>\u2028\xff", true, false, 1.5, 1e21, math.NaN(), []any(nil), map[string]any(nil), []any{}, map[string]any{},
		map[string]any{"b": 1.0, "a": []any{nil, "x", map[string]any{"z<": false, "": 0.0}}, "\xff": "k"},
		map[string]any{"n": math.Inf(1)}, []any{1.0, math.NaN()},
		// Not what encoding/json decodes, handed over.
		int64(42), json.Number("12.5"), json.Number("1x"), []string{"a"}, map[string]int{"b": 2, "a": 1}, json.RawMessage(` {"a" : "<"} `),
		cyclic, deep,
	} {
		want, werr := json.Marshal(v)
		got, gerr := AppendAny([]byte("x"), v)
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Fatalf("AppendAny(%.100v) = %v, json.Marshal = %v", v, gerr, werr)
		}
		if werr == nil && string(got) != "x"+string(want) {
			t.Fatalf("AppendAny(%.100v) = %.200s, json.Marshal = %.200s", v, got[1:], want)
		}
		if werr != nil && string(got) != "x" {
			t.Fatalf("AppendAny(%.100v) = %.200q on error, want the slice it was given", v, got)
		}
	}
}

// point is an Appender for TestMarshal.
type point struct{ x float64 }

func (p point) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"x":`...)
	b, err := AppendFloat(b, p.x)
	if err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

// TestMarshal: Marshal returns a value's AppendJSON in a slice of its own,
// and nothing with its error.
func TestMarshal(t *testing.T) {
	a, err := Marshal(point{1})
	if err != nil || string(a) != `{"x":1}` {
		t.Fatalf("Marshal(point{1}) = %s, %v", a, err)
	}
	b, _ := Marshal(point{2})
	if string(a) != `{"x":1}` || string(b) != `{"x":2}` {
		t.Fatalf("Marshal shares its buffer: %s then %s", a, b)
	}
	if out, err := Marshal(point{math.NaN()}); err == nil || out != nil {
		t.Fatalf("Marshal(point{NaN}) = %s, %v; want nil and an error", out, err)
	}
}
