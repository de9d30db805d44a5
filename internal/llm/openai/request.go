package openai

import (
	"fmt"

	"github.com/go-faster/jx"

	"github.com/agentwire/agentwire/internal/llm"
)

// request encodes the streamed Chat Completions request for req. It writes
// the JSON itself, as readStream reads the stream itself: the SDK's
// encoding of its request types (reflection over every optional field,
// each tool's schema decoded into a map and encoded again) was the largest
// part of the CPU between a post and the model call (BenchmarkRequest).
// TestRequestMatchesSDK holds it to the SDK's encoding.
func (m *Model) request(req llm.Request) ([]byte, error) {
	var e jx.Encoder
	e.ObjStart()
	e.FieldStart("model")
	e.Str(m.model)
	e.FieldStart("stream")
	e.Bool(true)
	e.FieldStart("stream_options")
	e.ObjStart()
	e.FieldStart("include_usage")
	e.Bool(true)
	e.ObjEnd()
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = m.maxTokens
	}
	if maxTokens > 0 {
		if m.maxTokensField {
			e.FieldStart("max_tokens")
		} else {
			e.FieldStart("max_completion_tokens")
		}
		e.Int(maxTokens)
	}
	e.FieldStart("messages")
	if err := encodeMessages(&e, req); err != nil {
		return nil, err
	}
	if len(req.Tools) > 0 {
		e.FieldStart("tools")
		if err := encodeTools(&e, req.Tools); err != nil {
			return nil, err
		}
	}
	e.ObjEnd()
	return e.Bytes(), nil
}

// encodeMessages encodes the system prompt and req's messages.
func encodeMessages(e *jx.Encoder, req llm.Request) error {
	e.ArrStart()
	if req.System != "" {
		message(e, "system", req.System, true)
		e.ObjEnd()
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleUser:
			message(e, "user", msg.Content, true)
		case llm.RoleAssistant:
			// Reasoning is not sent back: Chat Completions has no field
			// for it.
			message(e, "assistant", msg.Content, msg.Content != "" || len(msg.ToolCalls) == 0)
			if len(msg.ToolCalls) > 0 {
				e.FieldStart("tool_calls")
				e.ArrStart()
				for _, c := range msg.ToolCalls {
					toolCall(e, c)
				}
				e.ArrEnd()
			}
		case llm.RoleTool:
			message(e, "tool", msg.Content, true)
			e.FieldStart("tool_call_id")
			e.Str(msg.ToolCallID)
		default:
			return fmt.Errorf("openai: message %d has unknown role %q", i, msg.Role)
		}
		e.ObjEnd()
	}
	e.ArrEnd()
	return nil
}

// message opens a message object with its role and, when withContent, its
// content; the caller adds the rest and closes it.
func message(e *jx.Encoder, role, content string, withContent bool) {
	e.ObjStart()
	e.FieldStart("role")
	e.Str(role)
	if withContent {
		e.FieldStart("content")
		e.Str(content)
	}
}

// toolCall encodes one of an assistant message's tool calls; a call
// without arguments gets an empty object.
func toolCall(e *jx.Encoder, c llm.ToolCall) {
	args := c.Arguments
	if args == "" {
		args = "{}"
	}
	e.ObjStart()
	e.FieldStart("id")
	e.Str(c.ID)
	e.FieldStart("type")
	e.Str("function")
	e.FieldStart("function")
	e.ObjStart()
	e.FieldStart("name")
	e.Str(c.Name)
	e.FieldStart("arguments")
	e.Str(args)
	e.ObjEnd()
	e.ObjEnd()
}

// emptyParameters is the schema of a tool that gives none.
var emptyParameters = []byte(`{"type":"object","properties":{}}`)

// encodeTools encodes the tools offered. A tool's parameters must be one
// JSON object, which is sent as it is.
func encodeTools(e *jx.Encoder, tools []llm.ToolSpec) error {
	e.ArrStart()
	for _, t := range tools {
		schema := emptyParameters
		if len(t.Parameters) > 0 {
			if !isObject(t.Parameters) {
				return fmt.Errorf("openai: tool %q: parameters are not a JSON object", t.Name)
			}
			schema = t.Parameters
		}
		e.ObjStart()
		e.FieldStart("type")
		e.Str("function")
		e.FieldStart("function")
		e.ObjStart()
		e.FieldStart("name")
		e.Str(t.Name)
		if t.Description != "" {
			e.FieldStart("description")
			e.Str(t.Description)
		}
		e.FieldStart("parameters")
		e.Raw(schema)
		e.ObjEnd()
		e.ObjEnd()
	}
	e.ArrEnd()
	return nil
}

// isObject reports whether b is one JSON object and nothing else.
func isObject(b []byte) bool {
	return jx.DecodeBytes(b).Next() == jx.Object && jx.DecodeBytes(b).Validate() == nil
}
