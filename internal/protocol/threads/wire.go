// Package threads is agentwire's adapter for the REST + Server-Sent Events
// "threads" protocol (schemas/openapi/threads.yaml): the server (Handler),
// which projects a thread's canonical events onto the protocol's history
// and streams, the decoders and the encoder of its wire messages, built on
// the types ogen generates in generated/threadsapi, and a typed client for
// its streams.
package threads

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-faster/jx"
	"github.com/ogen-go/ogen/validate"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/sse"
	"github.com/agentwire/agentwire/internal/wire"
)

// MaxBodyBytes is the largest JSON document the decoders accept: a request
// body, a response body, or one event's data.
const MaxBodyBytes = 1 << 20

// The event names of a thread stream (the SSE event field).
const (
	EventAgentText  = "agent_text"
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
	EventDone       = "done"
	EventError      = "error"
)

// Event is one event of a thread stream with its data decoded and
// validated. The payload field that Name selects is set; the others are nil.
type Event struct {
	// ID is the SSE id: the thread's event sequence number in decimal, to be
	// sent as Last-Event-ID when resuming. It is "" if the server sent none
	// (the original threads server did not).
	ID   string
	Name string

	AgentText  *threadsapi.AgentTextEvent
	ToolCall   *threadsapi.ToolCallEvent
	ToolResult *threadsapi.ToolResultEvent
	Done       *threadsapi.DoneEvent
	Error      *threadsapi.ErrorEvent
}

// DecodeEvent decodes and validates the data of a Server-Sent Event of a
// thread stream according to its name. An event whose name the document
// does not define is an error at path "" whose reason starts with
// "unknown event"; streams skip such events.
func DecodeEvent(e sse.Event) (Event, error) {
	out := Event{ID: e.ID, Name: e.Type}
	data := []byte(e.Data)
	var err error
	switch e.Type {
	case EventAgentText:
		out.AgentText, err = decode[threadsapi.AgentTextEvent](data)
	case EventToolCall:
		out.ToolCall, err = decode[threadsapi.ToolCallEvent](data)
	case EventToolResult:
		out.ToolResult, err = decode[threadsapi.ToolResultEvent](data)
	case EventDone:
		out.Done, err = decode[threadsapi.DoneEvent](data)
	case EventError:
		out.Error, err = decode[threadsapi.ErrorEvent](data)
	default:
		return Event{}, &wire.Error{Reason: fmt.Sprintf("unknown event %q", e.Type)}
	}
	if err != nil {
		return Event{}, err
	}
	return out, nil
}

// Encode returns the Server-Sent Event that carries e: its id, its name and
// its data as one line of JSON. It fails when the payload that e.Name
// selects is missing or does not validate, so that a server never sends an
// event its clients would reject.
func (e Event) Encode() (sse.Event, error) {
	var (
		v  encoder
		ok bool
	)
	switch e.Name {
	case EventAgentText:
		v, ok = e.AgentText, e.AgentText != nil
	case EventToolCall:
		v, ok = e.ToolCall, e.ToolCall != nil
	case EventToolResult:
		v, ok = e.ToolResult, e.ToolResult != nil
	case EventDone:
		v, ok = e.Done, e.Done != nil
	case EventError:
		v, ok = e.Error, e.Error != nil
	default:
		return sse.Event{}, fmt.Errorf("threads: unknown event %q", e.Name)
	}
	if !ok {
		return sse.Event{}, fmt.Errorf("threads: %s event without its data", e.Name)
	}
	if val, can := v.(interface{ Validate() error }); can {
		if err := val.Validate(); err != nil {
			return sse.Event{}, fmt.Errorf("threads: %s event: %w", e.Name, toWireError(err))
		}
	}
	var enc jx.Encoder
	v.Encode(&enc)
	return sse.Event{ID: e.ID, Type: e.Name, Data: string(enc.Bytes())}, nil
}

type encoder interface{ Encode(*jx.Encoder) }

// knownEvent reports whether the document defines an event of this name.
func knownEvent(name string) bool {
	switch name {
	case EventAgentText, EventToolCall, EventToolResult, EventDone, EventError:
		return true
	}
	return false
}

// DecodeSendMessageRequest decodes and validates the body of
// POST /api/v1/threads/{threadId}. Errors are *wire.Error values whose path
// is a JSON Pointer into the body.
func DecodeSendMessageRequest(body []byte) (*threadsapi.SendMessageRequest, error) {
	return decode[threadsapi.SendMessageRequest](body)
}

// DecodeThreadResponse decodes and validates the body of a 200 answer to
// GET /api/v1/threads/{threadId}.
func DecodeThreadResponse(body []byte) (*threadsapi.ThreadResponse, error) {
	v, err := decode[threadsapi.ThreadResponse](body)
	if err != nil {
		return nil, locateMessage(body, err)
	}
	return v, nil
}

// DecodeError decodes and validates the body of a 400, 404 or 500 answer.
func DecodeError(body []byte) (*threadsapi.Error, error) {
	return decode[threadsapi.Error](body)
}

// decoded is what ogen generates for every schema: a jx decoder.
type decoded[T any] interface {
	*T
	Decode(*jx.Decoder) error
}

// decode checks size and syntax first (so that ogen's decoder only ever
// reports schema violations), then decodes with the generated decoder and
// runs the generated validator when the type has one.
func decode[T any, P decoded[T]](b []byte) (*T, error) {
	if len(b) > MaxBodyBytes {
		return nil, &wire.Error{Reason: fmt.Sprintf("body exceeds %d bytes", MaxBodyBytes)}
	}
	if err := checkSyntax(b); err != nil {
		return nil, err
	}
	v := new(T)
	if err := P(v).Decode(jx.DecodeBytes(b)); err != nil {
		return nil, toWireError(err)
	}
	if val, ok := any(v).(interface{ Validate() error }); ok {
		if err := val.Validate(); err != nil {
			return nil, toWireError(err)
		}
	}
	return v, nil
}

// checkSyntax accepts exactly one JSON object.
func checkSyntax(b []byte) error {
	v, err := wire.Parse(b)
	if err != nil {
		return err
	}
	if _, ok := v.(map[string]any); !ok {
		return &wire.Error{Reason: "must be object, got " + jsonType(v)}
	}
	return nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "number"
}

var (
	fieldPrefix = regexp.MustCompile(`^(?:callback: )?decode field "((?:[^"\\]|\\.)*)"$`)
	badToken    = regexp.MustCompile(`^unexpected byte (\d+) '.*' at \d+$`)
	expected    = regexp.MustCompile(`"(.)" expected$`)
)

// toWireError turns an error of ogen's generated decoders or validators
// into a *wire.Error: the fields it passed through become a JSON Pointer,
// its innermost error the reason. Array positions appear where ogen reports
// them (validators do, decoders do not; see locateMessage).
func toWireError(err error) *wire.Error {
	var path []string
	want := "" // the JSON type a wrapper said it expected, if any
	for err != nil {
		if ve, ok := err.(*validate.Error); ok && len(ve.Fields) > 0 {
			f := ve.Fields[0]
			if f.Error == validate.ErrFieldRequired {
				return &wire.Error{Path: pointer(append(path, f.Name)), Reason: "is required"}
			}
			path = append(path, f.Name)
			err = f.Error
			continue
		}
		next := errors.Unwrap(err)
		if next == nil {
			reason := leafReason(err, want, &path)
			return &wire.Error{Path: pointer(path), Reason: reason}
		}
		prefix := strings.TrimSuffix(err.Error(), ": "+next.Error())
		if m := fieldPrefix.FindStringSubmatch(prefix); m != nil {
			name, uerr := strconv.Unquote(`"` + m[1] + `"`)
			if uerr != nil {
				name = m[1]
			}
			path = append(path, name)
			want = ""
		} else if m := expected.FindStringSubmatch(prefix); m != nil {
			want = m[1]
		}
		err = next
	}
	return &wire.Error{Path: pointer(path), Reason: "invalid"}
}

// leafReason words the innermost error of a chain. It may extend path when
// the error concerns a member below it (a sum type's tag).
func leafReason(err error, want string, path *[]string) string {
	msg := err.Error()
	var (
		minLen *validate.MinLengthError
		perr   *time.ParseError
	)
	switch {
	case errors.As(err, &minLen):
		if minLen.MinLength == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters long", minLen.MinLength)
	case errors.As(err, &perr):
		return "must be an RFC 3339 date-time"
	case strings.HasPrefix(msg, "invalid UUID"):
		return "must be a UUID"
	case strings.HasPrefix(msg, "invalid value: "):
		return fmt.Sprintf("unknown value %q", strings.TrimPrefix(msg, "invalid value: "))
	case strings.HasPrefix(msg, "unknown type "):
		*path = append(*path, "type")
		return fmt.Sprintf("unknown type %q", strings.TrimPrefix(msg, "unknown type "))
	case msg == "unable to detect sum type variant":
		*path = append(*path, "type")
		return "is required"
	case strings.HasPrefix(msg, "unexpected json type "):
		got, _ := strconv.Unquote(strings.TrimPrefix(msg, "unexpected json type "))
		return "must be object, got " + got
	case msg == "nil is invalid value":
		return "must not be null"
	}
	if m := badToken.FindStringSubmatch(msg); m != nil {
		b, _ := strconv.Atoi(m[1])
		got := tokenType(byte(b))
		switch want {
		case "{":
			return "must be object, got " + got
		case "[":
			return "must be array, got " + got
		}
		// Every scalar of threads.yaml is a string, so a value of another
		// type where no object or array was expected is a misplaced scalar.
		return "must be string, got " + got
	}
	return msg
}

// tokenType names the JSON type that starts with b.
func tokenType(b byte) string {
	switch b {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func pointer(path []string) string {
	var b strings.Builder
	for _, p := range path {
		if strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]") {
			p = p[1 : len(p)-1] // ogen names array positions "[3]"
		}
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	return b.String()
}

// locateMessage adds the array position to an error inside "messages",
// which ogen's decoders do not report: it decodes the messages one by one
// and reports the first that fails.
func locateMessage(body []byte, err error) error {
	we, ok := wire.AsError(err)
	if !ok || !strings.HasPrefix(we.Path, "/messages/") {
		return err
	}
	if rest := strings.TrimPrefix(we.Path, "/messages/"); rest != "" && rest[0] >= '0' && rest[0] <= '9' {
		return err // a validator's error: it has the position already
	}
	var located error
	_ = jx.DecodeBytes(body).ObjBytes(func(d *jx.Decoder, key []byte) error {
		if string(key) != "messages" {
			return d.Skip()
		}
		i := 0
		return d.Arr(func(d *jx.Decoder) error {
			raw, rerr := d.Raw()
			if rerr != nil || located != nil {
				return rerr
			}
			var m threadsapi.Message
			if merr := m.Decode(jx.DecodeBytes(raw)); merr != nil {
				me := toWireError(merr)
				located = &wire.Error{Path: "/messages/" + strconv.Itoa(i) + me.Path, Reason: me.Reason}
			}
			i++
			return nil
		})
	})
	if located != nil {
		return located
	}
	return err
}
