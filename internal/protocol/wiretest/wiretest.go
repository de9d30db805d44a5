// Package wiretest checks a generated protocol package against the examples
// and the invalid frames kept in a protocol's testdata/wire folder. Every
// WebSocket protocol runs the same three checks: examples round-trip,
// invalid frames are rejected with the expected path and reason, and the
// decoders survive fuzzing.
package wiretest

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/internal/wire"
	"gopkg.in/yaml.v3"
)

// Codec adapts one generated package (its Decode, DecodeOutbound, Encode,
// ValidateInbound and ValidateOutbound).
type Codec struct {
	Decode           func([]byte) (any, error)
	DecodeOutbound   func([]byte) (any, error)
	Encode           func(any) ([]byte, error)
	ValidateInbound  func([]byte) error
	ValidateOutbound func([]byte) error
}

func (c Codec) decoder(direction string) func([]byte) (any, error) {
	switch direction {
	case "inbound":
		return c.Decode
	case "outbound":
		return c.DecodeOutbound
	}
	return nil
}

func (c Codec) validator(direction string) func([]byte) error {
	switch direction {
	case "inbound":
		return c.ValidateInbound
	case "outbound":
		return c.ValidateOutbound
	}
	return nil
}

// Example is one JSON example of a protocol document.
type Example struct {
	Name      string          `json:"name"`
	Where     string          `json:"where"`
	Direction string          `json:"direction"`
	Frame     json.RawMessage `json:"frame"`
	// Wrap, when set, is a frame in which the string "$FRAGMENT" stands
	// where Frame goes (for examples that show part of a frame).
	Wrap json.RawMessage `json:"wrap,omitempty"`
	// Merge, when set, is an object whose members are added to Frame's
	// (Frame's win), for an example that shows a frame without the members
	// the protocol adds on the wire (the Loom reply line becomes run_end).
	Merge json.RawMessage `json:"merge,omitempty"`
}

// Invalid is a frame a decoder must reject.
type Invalid struct {
	Name      string `json:"name"`
	Direction string `json:"direction"`
	Frame     string `json:"frame"`
	Path      string `json:"path"`
	Reason    string `json:"reason"`
	// Kind is the wire.Kind's name ("required", "type", ...).
	Kind string `json:"kind"`
	// Message is the message type the error names, "" when the frame's
	// type is not known.
	Message string `json:"message"`
}

// Load reads a JSON array of test cases from path, failing the test when
// it cannot or the array is empty.
func Load[T any](t testing.TB, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var out []T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no cases", path)
	}
	return out
}

// frame returns the example's whole frame.
func (e Example) frame(t testing.TB) []byte {
	if len(e.Merge) > 0 {
		var base, over map[string]json.RawMessage
		if json.Unmarshal(e.Merge, &base) != nil || json.Unmarshal(e.Frame, &over) != nil {
			t.Fatalf("%s: merge and frame must both be objects", e.Name)
		}
		for k, v := range over {
			base[k] = v
		}
		b, err := json.Marshal(base)
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		return b
	}
	if len(e.Wrap) == 0 {
		return e.Frame
	}
	if !bytes.Contains(e.Wrap, []byte(`"$FRAGMENT"`)) {
		t.Fatalf("%s: wrap has no \"$FRAGMENT\"", e.Name)
	}
	return bytes.Replace(e.Wrap, []byte(`"$FRAGMENT"`), e.Frame, 1)
}

// Examples checks that every example decodes in its direction, and that
// encoding the decoded message gives back semantically equal JSON (equal
// after dropping members whose value is null, which the documents treat as
// absent).
func Examples(t *testing.T, path string, c Codec) {
	for _, e := range Load[Example](t, path) {
		t.Run(e.Name, func(t *testing.T) {
			dec := c.decoder(e.Direction)
			if dec == nil {
				t.Fatalf("%s: direction %q is neither inbound nor outbound", e.Where, e.Direction)
			}
			frame := e.frame(t)
			m, err := dec(frame)
			if err != nil {
				t.Fatalf("%s\nDecode(%s) = %v, want a message", e.Where, frame, err)
			}
			out, err := c.Encode(m)
			if err != nil {
				t.Fatalf("%s\nEncode(%#v) = %v", e.Where, m, err)
			}
			if !SemanticEqual(frame, out) {
				t.Fatalf("%s\nround trip changed the frame:\n in: %s\nout: %s", e.Where, frame, out)
			}
			if validate := c.validator(e.Direction); validate != nil {
				if err := validate(frame); err != nil {
					t.Fatalf("%s\nValidate(%s) = %v, but it decodes", e.Where, frame, err)
				}
				if err := validate(out); err != nil {
					t.Fatalf("%s\nValidate(%s) = %v for the encoded message", e.Where, out, err)
				}
			}
		})
	}
}

// InvalidFrames checks that every invalid frame is rejected with a
// *wire.Error whose kind, message type and path match and whose reason
// starts with the expected one, and that the direction's validator, when
// the codec has one, rejects it with the same error. It adds a 10 MiB
// frame per direction.
func InvalidFrames(t *testing.T, path string, c Codec) {
	cases := Load[Invalid](t, path)
	big := `{"type":"x","pad":"` + strings.Repeat("a", 10<<20) + `"}`
	for _, d := range []string{"inbound", "outbound"} {
		cases = append(cases, Invalid{Name: "10 MiB frame " + d, Direction: d, Frame: big, Path: "", Reason: "frame exceeds 1048576 bytes", Kind: "syntax"})
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			dec := c.decoder(tc.Direction)
			if dec == nil {
				t.Fatalf("direction %q is neither inbound nor outbound", tc.Direction)
			}
			m, err := dec([]byte(tc.Frame))
			if err == nil {
				t.Fatalf("Decode(%.200q) = %#v, want an error at %q", tc.Frame, m, tc.Path)
			}
			we, ok := wire.AsError(err)
			if !ok {
				t.Fatalf("Decode(%.200q) = %v (%T), want a *wire.Error", tc.Frame, err, err)
			}
			if we.Path != tc.Path || !strings.HasPrefix(we.Reason, tc.Reason) {
				t.Fatalf("Decode(%.200q) = {%q %q}, want {%q %q...}", tc.Frame, we.Path, we.Reason, tc.Path, tc.Reason)
			}
			if we.Kind.String() != tc.Kind || we.Message != tc.Message {
				t.Fatalf("Decode(%.200q) = %v: kind %s in message %q, want kind %q in message %q", tc.Frame, we, we.Kind, we.Message, tc.Kind, tc.Message)
			}
			if validate := c.validator(tc.Direction); validate != nil {
				verr := validate([]byte(tc.Frame))
				ve, ok := wire.AsError(verr)
				if !ok || *ve != *we {
					t.Fatalf("Validate(%.200q) = %#v, want Decode's %#v", tc.Frame, verr, we)
				}
			}
		})
	}
}

// Seeds returns the frames of the examples and invalid cases for a
// direction, to seed a fuzz target.
func Seeds(t testing.TB, dir, direction string) [][]byte {
	var out [][]byte
	for _, e := range Load[Example](t, dir+"/examples.json") {
		if e.Direction == direction {
			out = append(out, e.frame(t))
		}
	}
	for _, i := range Load[Invalid](t, dir+"/invalid.json") {
		if i.Direction == direction {
			out = append(out, []byte(i.Frame))
		}
	}
	return out
}

// Fuzz runs a decoder on arbitrary input. It must never panic; anything it
// accepts must encode, and the encoding must decode again to the same JSON.
func Fuzz(f *testing.F, dir, direction string, c Codec) {
	for _, s := range Seeds(f, dir, direction) {
		f.Add(s)
	}
	dec := c.decoder(direction)
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := dec(frame)
		if err != nil {
			if _, ok := wire.AsError(err); !ok {
				t.Fatalf("Decode(%q) = %v (%T), want a *wire.Error", frame, err, err)
			}
			return
		}
		out, err := c.Encode(m)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)) = %v", frame, err)
		}
		m2, err := dec(out)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) = %v; encoded %s", frame, err, out)
		}
		out2, err := c.Encode(m2)
		if err != nil || !SemanticEqual(out, out2) {
			t.Fatalf("encoding is not stable for %q:\n%s\n%s (%v)", frame, out, out2, err)
		}
	})
}

// SemanticEqual reports whether two JSON texts hold the same value once
// object members whose value is null are dropped.
func SemanticEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(dropNulls(x), dropNulls(y))
}

func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			x[k] = dropNulls(e)
		}
	case []any:
		for i, e := range x {
			x[i] = dropNulls(e)
		}
	}
	return v
}

// DocumentExamples decodes and validates every message example of an
// AsyncAPI document in the direction its operation gives (receive: client
// frames, send: server frames), so the examples shown in generated docs are
// known to be valid.
func DocumentExamples(t *testing.T, path string, c Codec) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var doc struct {
		Channels map[string]struct {
			Messages map[string]struct {
				Ref string `yaml:"$ref"`
			} `yaml:"messages"`
		} `yaml:"channels"`
		Operations map[string]struct {
			Action   string `yaml:"action"`
			Messages []struct {
				Ref string `yaml:"$ref"`
			} `yaml:"messages"`
		} `yaml:"operations"`
		Components struct {
			Messages map[string]struct {
				Examples []struct {
					Name    string `yaml:"name"`
					Payload any    `yaml:"payload"`
				} `yaml:"examples"`
			} `yaml:"messages"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	n := 0
	for _, op := range doc.Operations {
		dec, validate := c.Decode, c.ValidateInbound
		if op.Action == "send" {
			dec, validate = c.DecodeOutbound, c.ValidateOutbound
		}
		for _, mr := range op.Messages {
			// #/channels/<ch>/messages/<key> -> #/components/messages/<Name>
			parts := strings.Split(mr.Ref, "/")
			ch := doc.Channels[parts[2]]
			comp := strings.TrimPrefix(ch.Messages[parts[4]].Ref, "#/components/messages/")
			for _, ex := range doc.Components.Messages[comp].Examples {
				frame, err := json.Marshal(ex.Payload)
				if err != nil {
					t.Fatalf("%s: example %s: %v", comp, ex.Name, err)
				}
				if _, err := dec(frame); err != nil {
					t.Errorf("%s: example %q: Decode(%s) = %v", comp, ex.Name, frame, err)
				}
				if validate != nil {
					if err := validate(frame); err != nil {
						t.Errorf("%s: example %q: Validate(%s) = %v", comp, ex.Name, frame, err)
					}
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s has no message examples", path)
	}
}
