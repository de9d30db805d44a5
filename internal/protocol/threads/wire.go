// Package threads is agentwire's adapter for the REST + Server-Sent Events
// "threads" protocol (schemas/openapi/threads.yaml): the server (Handler),
// which projects a thread's canonical events onto the protocol's history
// and streams, the decoders and the encoders of its wire messages, built on
// generated/threadsapi (ogen's types and client, and asyncapigen's
// validators, generated together), and a typed client for its streams.
package threads

import (
	"fmt"
	"time"

	"github.com/go-faster/jx"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/sse"
	"github.com/agentwire/agentwire/internal/wire"
)

// MaxBodyBytes is the largest JSON document the decoders accept: a request
// body, a response body, or one event's data.
const MaxBodyBytes = wire.MaxFrameBytes

// The event names of a thread stream (the SSE event field), which are
// also the values of threadsapi.StreamEventType.
const (
	EventAgentText  = "agent_text"
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
	EventDone       = "done"
	EventError      = "error"
)

// A thread stream's events are threadsapi.StreamEvent values, the sum type
// ogen generates for the document's StreamEvent: Type selects the variant
// (AgentTextSSE, ToolCallSSE, ToolResultSSE, DoneSSE, ErrorSSE), whose ID
// is the SSE id, Event the SSE event name and Data the decoded data.

// DecodeEvent decodes and validates the data of a Server-Sent Event of a
// thread stream according to its name, and returns the event with the
// variant that name selects: its ID and Event are the SSE event's, Retry
// is set when the SSE event carried one. Errors are *wire.Error values
// whose Message is the event name and whose path is a JSON Pointer into
// the data. An event whose name the document does not define is a
// wire.KindUnknownType error at path "" (reason `unknown event "<name>"`);
// streams skip such events.
func DecodeEvent(e sse.Event) (threadsapi.StreamEvent, error) {
	var (
		out   threadsapi.StreamEvent
		err   error
		retry = retryOf(e)
	)
	switch e.Type {
	case EventAgentText:
		var d *threadsapi.AgentTextEvent
		if d, err = decodeData[threadsapi.AgentTextEvent](e, threadsapi.ValidateAgentTextEvent); err == nil {
			out = threadsapi.NewAgentTextSSEStreamEvent(threadsapi.AgentTextSSE{ID: e.ID, Event: e.Type, Data: *d, Retry: retry})
		}
	case EventToolCall:
		var d *threadsapi.ToolCallEvent
		if d, err = decodeData[threadsapi.ToolCallEvent](e, threadsapi.ValidateToolCallEvent); err == nil {
			out = threadsapi.NewToolCallSSEStreamEvent(threadsapi.ToolCallSSE{ID: e.ID, Event: e.Type, Data: *d, Retry: retry})
		}
	case EventToolResult:
		var d *threadsapi.ToolResultEvent
		if d, err = decodeData[threadsapi.ToolResultEvent](e, threadsapi.ValidateToolResultEvent); err == nil {
			out = threadsapi.NewToolResultSSEStreamEvent(threadsapi.ToolResultSSE{ID: e.ID, Event: e.Type, Data: *d, Retry: retry})
		}
	case EventDone:
		var d *threadsapi.DoneEvent
		if d, err = decodeData[threadsapi.DoneEvent](e, threadsapi.ValidateDoneEvent); err == nil {
			out = threadsapi.NewDoneSSEStreamEvent(threadsapi.DoneSSE{ID: e.ID, Event: e.Type, Data: *d, Retry: retry})
		}
	case EventError:
		var d *threadsapi.ErrorEvent
		if d, err = decodeData[threadsapi.ErrorEvent](e, threadsapi.ValidateErrorEvent); err == nil {
			out = threadsapi.NewErrorSSEStreamEvent(threadsapi.ErrorSSE{ID: e.ID, Event: e.Type, Data: *d, Retry: retry})
		}
	default:
		return threadsapi.StreamEvent{}, &wire.Error{Kind: wire.KindUnknownType, Message: e.Type, Reason: fmt.Sprintf("unknown event %q", e.Type)}
	}
	if err != nil {
		return threadsapi.StreamEvent{}, err
	}
	return out, nil
}

// decodeData decodes and validates the data of e, naming e in errors.
func decodeData[T any, P decoded[T]](e sse.Event, validate func(any) error) (*T, error) {
	d, err := decode[T, P]([]byte(e.Data), validate)
	return d, wire.WithMessage(err, e.Type)
}

// retryOf returns an SSE event's retry field as the variants hold it, in
// milliseconds.
func retryOf(e sse.Event) threadsapi.OptInt {
	if e.Retry <= 0 {
		return threadsapi.OptInt{}
	}
	return threadsapi.NewOptInt(int(e.Retry / time.Millisecond))
}

// EncodeEvent returns the Server-Sent Event that carries e: the id of the
// variant that e.Type selects, e.Type as its name, its data as JSON, and
// its retry when set. Data that could break its schema (a tool call's
// arguments, a tool's result) is validated against it with the generated
// validator (threadsapi.Validate<Name>JSON) first, so that a server never
// sends an event its clients would reject: EncodeEvent fails on data that
// does not match (a *wire.Error, as DecodeEvent would report it), on an
// unknown Type, and on a variant whose Event is set to another
// name (an empty Event is taken to be e.Type, as ogen's encoder does).
func EncodeEvent(e threadsapi.StreamEvent) (sse.Event, error) {
	var (
		id, name string
		retry    threadsapi.OptInt
		data     encoder
		validate func([]byte) error
	)
	switch e.Type {
	// The data of agent_text, done and error events is valid whatever
	// its fields hold (strings, and a thread id that is a UUID by its
	// type): checking it again would only cost, so it is not
	// (FuzzAlwaysValidEvents holds this). Tool calls and results carry
	// JSON of their own and are checked.
	case threadsapi.AgentTextSSEStreamEvent:
		v := e.AgentTextSSE
		id, name, retry, data = v.ID, v.Event, v.Retry, &v.Data
	case threadsapi.ToolCallSSEStreamEvent:
		v := e.ToolCallSSE
		id, name, retry, data, validate = v.ID, v.Event, v.Retry, &v.Data, threadsapi.ValidateToolCallEventJSON
	case threadsapi.ToolResultSSEStreamEvent:
		v := e.ToolResultSSE
		id, name, retry, data, validate = v.ID, v.Event, v.Retry, &v.Data, threadsapi.ValidateToolResultEventJSON
	case threadsapi.DoneSSEStreamEvent:
		v := e.DoneSSE
		id, name, retry, data = v.ID, v.Event, v.Retry, &v.Data
	case threadsapi.ErrorSSEStreamEvent:
		v := e.ErrorSSE
		id, name, retry, data = v.ID, v.Event, v.Retry, &v.Data
	default:
		return sse.Event{}, fmt.Errorf("threads: unknown event %q", e.Type)
	}
	if name != "" && name != string(e.Type) {
		return sse.Event{}, fmt.Errorf("threads: %s event whose Event is %q", e.Type, name)
	}
	b, err := encodeChecked(data, validate)
	if err != nil {
		return sse.Event{}, fmt.Errorf("threads: %s event: %w", e.Type, wire.WithMessage(err, string(e.Type)))
	}
	out := sse.Event{ID: id, Type: string(e.Type), Data: string(b)}
	if retry.Set {
		out.Retry = time.Duration(retry.Value) * time.Millisecond
	}
	return out, nil
}

// encodeFrame is EncodeEvent, encoded for the wire once.
func encodeFrame(e threadsapi.StreamEvent) (sse.Frame, error) {
	raw, err := EncodeEvent(e)
	if err != nil {
		return sse.Frame{}, err
	}
	return sse.Encode(raw)
}

// EventID returns the SSE id of e (the id of the variant its Type
// selects): the stream's position, to be sent as Last-Event-ID when
// resuming (the thread's event sequence number in decimal, followed by
// ":message_id:bytes" on text sent ahead of its commit), or "" when the
// server sent none (the original threads server did not).
func EventID(e threadsapi.StreamEvent) string {
	switch e.Type {
	case threadsapi.AgentTextSSEStreamEvent:
		return e.AgentTextSSE.ID
	case threadsapi.ToolCallSSEStreamEvent:
		return e.ToolCallSSE.ID
	case threadsapi.ToolResultSSEStreamEvent:
		return e.ToolResultSSE.ID
	case threadsapi.DoneSSEStreamEvent:
		return e.DoneSSE.ID
	case threadsapi.ErrorSSEStreamEvent:
		return e.ErrorSSE.ID
	}
	return ""
}

// setEventID sets the SSE id of e.
func setEventID(e *threadsapi.StreamEvent, id string) {
	switch e.Type {
	case threadsapi.AgentTextSSEStreamEvent:
		e.AgentTextSSE.ID = id
	case threadsapi.ToolCallSSEStreamEvent:
		e.ToolCallSSE.ID = id
	case threadsapi.ToolResultSSEStreamEvent:
		e.ToolResultSSE.ID = id
	case threadsapi.DoneSSEStreamEvent:
		e.DoneSSE.ID = id
	case threadsapi.ErrorSSEStreamEvent:
		e.ErrorSSE.ID = id
	}
}

// knownEvent reports whether the document defines an event of this name.
func knownEvent(name string) bool {
	switch name {
	case EventAgentText, EventToolCall, EventToolResult, EventDone, EventError:
		return true
	}
	return false
}

type encoder interface{ Encode(*jx.Encoder) }

// encodeChecked encodes v with its generated encoder and checks the JSON
// with validate, when not nil, so that nothing is sent that the document
// does not allow.
func encodeChecked(v encoder, validate func([]byte) error) ([]byte, error) {
	var enc jx.Encoder
	v.Encode(&enc)
	if validate != nil {
		if err := validate(enc.Bytes()); err != nil {
			return nil, err
		}
	}
	return enc.Bytes(), nil
}

// DecodeSendMessageRequest decodes and validates the body of
// POST /api/v1/threads/{threadId}. Errors are *wire.Error values whose path
// is a JSON Pointer into the body.
func DecodeSendMessageRequest(body []byte) (*threadsapi.SendMessageRequest, error) {
	return decode[threadsapi.SendMessageRequest](body, threadsapi.ValidateSendMessageRequest)
}

// DecodeThreadResponse decodes and validates the body of a 200 answer to
// GET /api/v1/threads/{threadId}.
func DecodeThreadResponse(body []byte) (*threadsapi.ThreadResponse, error) {
	return decode[threadsapi.ThreadResponse](body, threadsapi.ValidateThreadResponse)
}

// DecodeError decodes and validates the body of a 400, 404 or 500 answer.
func DecodeError(body []byte) (*threadsapi.Error, error) {
	return decode[threadsapi.Error](body, threadsapi.ValidateError)
}

// decoded is what ogen generates for every schema: a jx decoder.
type decoded[T any] interface {
	*T
	Decode(*jx.Decoder) error
}

// decode checks b in three steps: its size and JSON syntax (wire.Parse),
// then the schema, with the validator generated from the document
// (structured errors: a kind, a JSON Pointer with array positions, a
// reason), and only then decodes it with ogen's generated decoder, which
// is left nothing to reject on schema grounds. Should it still fail, the
// document and the generated code disagree: that is a KindInternal error.
func decode[T any, P decoded[T]](b []byte, validate func(any) error) (*T, error) {
	if len(b) > MaxBodyBytes {
		return nil, &wire.Error{Kind: wire.KindSyntax, Reason: fmt.Sprintf("body exceeds %d bytes", MaxBodyBytes)}
	}
	v, err := wire.Parse(b)
	if err != nil {
		return nil, err
	}
	if err := validate(v); err != nil {
		return nil, err
	}
	out := new(T)
	if err := P(out).Decode(jx.DecodeBytes(b)); err != nil {
		return nil, &wire.Error{Kind: wire.KindInternal, Reason: "cannot decode: " + err.Error()}
	}
	return out, nil
}
