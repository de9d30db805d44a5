package threads

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-faster/jx"
	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/protocol/wiretest"
	"github.com/agentwire/agentwire/internal/sse"
	"github.com/agentwire/agentwire/internal/wire"
)

// example is one JSON example of threads-rest-sse.md; where says where in
// the document it stands.
type example struct {
	Name    string          `json:"name"`
	Where   string          `json:"where"`
	Message string          `json:"message"`
	Event   string          `json:"event"`
	JSON    json.RawMessage `json:"json"`
}

// invalid is an input a decoder must reject with this kind of error (a
// wire.Kind's name), naming this message type (the event name, for events),
// at this path, with a reason that starts with this reason.
type invalid struct {
	Name        string `json:"name"`
	Message     string `json:"message"`
	Event       string `json:"event"`
	Input       string `json:"input"`
	Path        string `json:"path"`
	Reason      string `json:"reason"`
	Kind        string `json:"kind"`
	MessageType string `json:"message_type"`
}

// codec decodes and encodes one kind of message.
type codec struct {
	decode func([]byte) (any, error)
	encode func(any) ([]byte, error)
}

func jsonOf(v interface{ Encode(*jx.Encoder) }) ([]byte, error) {
	var e jx.Encoder
	v.Encode(&e)
	return e.Bytes(), nil
}

func codecFor(t testing.TB, message, event string) codec {
	switch message {
	case "SendMessageRequest":
		return codec{
			decode: func(b []byte) (any, error) { return DecodeSendMessageRequest(b) },
			encode: func(v any) ([]byte, error) { return jsonOf(v.(*threadsapi.SendMessageRequest)) },
		}
	case "ThreadResponse":
		return codec{
			decode: func(b []byte) (any, error) { return DecodeThreadResponse(b) },
			encode: func(v any) ([]byte, error) { return jsonOf(v.(*threadsapi.ThreadResponse)) },
		}
	case "Error":
		return codec{
			decode: func(b []byte) (any, error) { return DecodeError(b) },
			encode: func(v any) ([]byte, error) { return jsonOf(v.(*threadsapi.Error)) },
		}
	case "Event":
		return codec{
			decode: func(b []byte) (any, error) { return DecodeEvent(sse.Event{ID: "7", Type: event, Data: string(b)}) },
			encode: func(v any) ([]byte, error) {
				e, err := EncodeEvent(v.(threadsapi.StreamEvent))
				if err != nil {
					return nil, err
				}
				if e.Type != event || e.ID != "7" {
					t.Fatalf("Encode() = event %q id %q, want %q %q", e.Type, e.ID, event, "7")
				}
				return []byte(e.Data), nil
			},
		}
	}
	t.Fatalf("unknown message kind %q", message)
	return codec{}
}

// TestExamples checks that every JSON example of the document decodes,
// validates and encodes back to semantically equal JSON.
func TestExamples(t *testing.T) {
	for _, ex := range wiretest.Load[example](t, "testdata/examples.json") {
		t.Run(ex.Name, func(t *testing.T) {
			c := codecFor(t, ex.Message, ex.Event)
			v, err := c.decode(ex.JSON)
			if err != nil {
				t.Fatalf("%s\nDecode(%s) = %v, want a %s", ex.Where, ex.JSON, err, ex.Message)
			}
			out, err := c.encode(v)
			if err != nil {
				t.Fatalf("%s\nEncode(%#v) = %v", ex.Where, v, err)
			}
			if !wiretest.SemanticEqual(ex.JSON, out) {
				t.Fatalf("%s\nround trip changed the JSON:\n in: %s\nout: %s", ex.Where, ex.JSON, out)
			}
		})
	}
}

// invalidCases returns the table plus a 10 MiB input per decoder.
func invalidCases(t testing.TB) []invalid {
	cases := wiretest.Load[invalid](t, "testdata/invalid.json")
	big := `{"text":"` + strings.Repeat("a", 10<<20) + `"}`
	for _, k := range []struct{ message, event string }{
		{"SendMessageRequest", ""}, {"ThreadResponse", ""}, {"Error", ""}, {"Event", EventAgentText},
	} {
		cases = append(cases, invalid{Name: "10 MiB " + k.message, Message: k.message, Event: k.event, Input: big, Reason: "body exceeds 1048576 bytes", Kind: "syntax", MessageType: k.event})
	}
	return cases
}

func TestInvalid(t *testing.T) {
	for _, tc := range invalidCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			v, err := codecFor(t, tc.Message, tc.Event).decode([]byte(tc.Input))
			if err == nil {
				t.Fatalf("Decode(%.200q) = %#v, want an error at %q", tc.Input, v, tc.Path)
			}
			we, ok := wire.AsError(err)
			if !ok {
				t.Fatalf("Decode(%.200q) = %v (%T), want a *wire.Error", tc.Input, err, err)
			}
			if we.Path != tc.Path || !strings.HasPrefix(we.Reason, tc.Reason) {
				t.Fatalf("Decode(%.200q) = {%q %q}, want {%q %q...}", tc.Input, we.Path, we.Reason, tc.Path, tc.Reason)
			}
			if we.Kind.String() != tc.Kind || we.Message != tc.MessageType {
				t.Fatalf("Decode(%.200q) = %v: kind %s in message %q, want kind %q in message %q", tc.Input, we, we.Kind, we.Message, tc.Kind, tc.MessageType)
			}
		})
	}
}

func TestEncodeEventRefusesWhatClientsReject(t *testing.T) {
	for _, e := range []threadsapi.StreamEvent{
		{},
		{Type: "thinking", DoneSSE: threadsapi.DoneSSE{Event: "thinking"}},
		threadsapi.NewDoneSSEStreamEvent(threadsapi.DoneSSE{ID: "1", Event: EventError}),
	} {
		if got, err := EncodeEvent(e); err == nil {
			t.Errorf("EncodeEvent(%+v) = %+v, want an error", e, got)
		}
	}

	// Data that does not match its schema is a *wire.Error, as the
	// client's DecodeEvent would report it.
	bad := toolCallEvent("1", threadsapi.ToolCallEvent{ToolCallID: "c", ToolName: "t", Arguments: threadsapi.JSONObject{"x": jx.Raw("{")}})
	got, err := EncodeEvent(bad)
	we, ok := wire.AsError(err)
	if !ok || we.Kind != wire.KindSyntax || we.Message != EventToolCall {
		t.Errorf("EncodeEvent(%+v) = %+v, %v; want a syntax *wire.Error of %s", bad, got, err, EventToolCall)
	}
}

// EncodeEvent and DecodeEvent carry the id, the name and the retry.
func TestEventEnvelope(t *testing.T) {
	e := errorEvent(41, "model unavailable")
	e.ErrorSSE.Retry = threadsapi.NewOptInt(2500)
	raw, err := EncodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	want := sse.Event{ID: "41", Type: EventError, Data: `{"error":"model unavailable"}`, Retry: 2500 * time.Millisecond}
	if raw != want {
		t.Fatalf("EncodeEvent = %+v, want %+v", raw, want)
	}
	back, err := DecodeEvent(raw)
	if err != nil || !reflect.DeepEqual(back, e) {
		t.Fatalf("DecodeEvent(%+v) = %+v, %v; want %+v", raw, back, err, e)
	}
	if EventID(back) != "41" || EventID(threadsapi.StreamEvent{}) != "" {
		t.Fatalf("EventID = %q", EventID(back))
	}
	// An empty Event is the name Type selects.
	raw, err = EncodeEvent(threadsapi.NewDoneSSEStreamEvent(threadsapi.DoneSSE{ID: "3"}))
	if err != nil || raw != (sse.Event{ID: "3", Type: EventDone, Data: "{}"}) {
		t.Fatalf("EncodeEvent(done without Event) = %+v, %v", raw, err)
	}
}

// fuzzDecoder checks that a decoder never panics, rejects only with a
// *wire.Error, and that whatever it accepts encodes to JSON it accepts
// again and encodes the same way.
func fuzzDecoder(t *testing.T, c codec, in []byte) {
	v, err := c.decode(in)
	if err != nil {
		if _, ok := wire.AsError(err); !ok {
			t.Fatalf("Decode(%q) = %v (%T), want a *wire.Error", in, err, err)
		}
		return
	}
	out, err := c.encode(v)
	if err != nil {
		t.Fatalf("Encode(Decode(%q)) = %v", in, err)
	}
	v2, err := c.decode(out)
	if err != nil {
		t.Fatalf("Decode(Encode(Decode(%q))) = %v; encoded %s", in, err, out)
	}
	out2, err := c.encode(v2)
	if err != nil || !wiretest.SemanticEqual(out, out2) {
		t.Fatalf("encoding is not stable for %q:\n%s\n%s (%v)", in, out, out2, err)
	}
}

// seeds returns the examples and invalid inputs of one message kind.
func seeds(t testing.TB, message string) (out []invalid) {
	for _, ex := range wiretest.Load[example](t, "testdata/examples.json") {
		if ex.Message == message {
			out = append(out, invalid{Event: ex.Event, Input: string(ex.JSON)})
		}
	}
	for _, tc := range wiretest.Load[invalid](t, "testdata/invalid.json") {
		if tc.Message == message {
			out = append(out, tc)
		}
	}
	return out
}

func fuzzMessage(f *testing.F, message string) {
	for _, s := range seeds(f, message) {
		f.Add([]byte(s.Input))
	}
	c := codecFor(f, message, "")
	f.Fuzz(func(t *testing.T, in []byte) { fuzzDecoder(t, c, in) })
}

func FuzzDecodeSendMessageRequest(f *testing.F) { fuzzMessage(f, "SendMessageRequest") }

func FuzzDecodeThreadResponse(f *testing.F) { fuzzMessage(f, "ThreadResponse") }

func FuzzDecodeError(f *testing.F) { fuzzMessage(f, "Error") }

func FuzzDecodeEvent(f *testing.F) {
	for _, s := range seeds(f, "Event") {
		f.Add(s.Event, []byte(s.Input))
	}
	f.Fuzz(func(t *testing.T, name string, in []byte) {
		if strings.ContainsAny(name, "\r\n") {
			return // cannot be an SSE event name
		}
		fuzzDecoder(t, codecFor(t, "Event", name), in)
	})
}

// FuzzAlwaysValidEvents holds what EncodeEvent relies on when it does not
// validate agent_text, done and error events: whatever their fields hold,
// the data matches its schema, and DecodeEvent reads back what was sent.
func FuzzAlwaysValidEvents(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), "msg_1", "Hello", "model unavailable", "7")
	f.Add([]byte{}, "", "", "", "")
	f.Add([]byte("\xff\x00"), "\x00\"\\", "line\nbreak\r\u2028", "\xff\xfe", "1:m:5")
	f.Fuzz(func(t *testing.T, thread []byte, messageID, chunk, msg, id string) {
		var tid uuid.UUID
		copy(tid[:], thread)
		if strings.ContainsAny(id, "\r\n\x00") {
			id = "1" // an id the SSE writer refuses never reaches EncodeEvent's data
		}
		for _, e := range []threadsapi.StreamEvent{
			agentTextEvent(id, threadsapi.AgentTextEvent{ThreadID: tid, MessageID: messageID, Chunk: chunk}),
			threadsapi.NewDoneSSEStreamEvent(threadsapi.DoneSSE{ID: id, Event: EventDone}),
			threadsapi.NewErrorSSEStreamEvent(threadsapi.ErrorSSE{ID: id, Event: EventError, Data: threadsapi.ErrorEvent{Error: msg}}),
		} {
			raw, err := EncodeEvent(e)
			if err != nil {
				t.Fatalf("EncodeEvent(%+v): %v", e, err)
			}
			var check func([]byte) error
			switch e.Type {
			case threadsapi.AgentTextSSEStreamEvent:
				check = threadsapi.ValidateAgentTextEventJSON
			case threadsapi.DoneSSEStreamEvent:
				check = threadsapi.ValidateDoneEventJSON
			default:
				check = threadsapi.ValidateErrorEventJSON
			}
			if err := check([]byte(raw.Data)); err != nil {
				t.Fatalf("%s data %s does not match its schema: %v", e.Type, raw.Data, err)
			}
			back, err := DecodeEvent(raw)
			if err != nil {
				t.Fatalf("DecodeEvent(%+v): %v", raw, err)
			}
			if e.Type == threadsapi.AgentTextSSEStreamEvent && utf8.ValidString(messageID+chunk) {
				// (Text that is not UTF-8 never comes: the model's
				// stream readers hand on UTF-8 only.)
				got := back.AgentTextSSE.Data
				if got.ThreadID != tid || got.MessageID != messageID || got.Chunk != chunk {
					t.Fatalf("read back %+v, sent thread %s, message %q, chunk %q", got, tid, messageID, chunk)
				}
			}
		}
	})
}
