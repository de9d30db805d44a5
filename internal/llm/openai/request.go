package openai

import (
	"fmt"
	"slices"
	"strings"

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
	return m.encode(req, req.Structured != nil && !m.formatRefused.Load())
}

// encode encodes req; format asks for req.Structured with response_format,
// else (a server that refuses it) the system prompt asks for it in words.
func (m *Model) encode(req llm.Request, format bool) ([]byte, error) {
	if s := req.Structured; s != nil && !format {
		req.System = strings.TrimSpace(req.System + "\n\n" + s.Instruction())
	}
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
	if s := req.Structured; s != nil && format {
		if err := responseFormat(&e, s); err != nil {
			return nil, err
		}
	}
	e.ObjEnd()
	return e.Bytes(), nil
}

// responseFormat encodes response_format for a structured answer:
// json_schema, strict when the schema allows it.
func responseFormat(e *jx.Encoder, s *llm.Schema) error {
	if !isObject(s.JSON) {
		return fmt.Errorf("openai: schema %q is not a JSON object", s.Name)
	}
	schema, strict := strictSchema(s.JSON)
	e.FieldStart("response_format")
	e.ObjStart()
	e.FieldStart("type")
	e.Str("json_schema")
	e.FieldStart("json_schema")
	e.ObjStart()
	e.FieldStart("name")
	e.Str(s.Name)
	if s.Description != "" {
		e.FieldStart("description")
		e.Str(s.Description)
	}
	e.FieldStart("schema")
	e.Raw(schema)
	e.FieldStart("strict")
	e.Bool(strict)
	e.ObjEnd()
	e.ObjEnd()
	return nil
}

// strictKeywords are the schema keywords strict mode is sure to take.
var strictKeywords = map[string]bool{
	"type": true, "description": true, "enum": true, "const": true, "title": true, "$ref": true,
}

// strictSchema returns schema as strict mode takes it, and whether it
// can: strict mode wants every object closed (additionalProperties
// false) with all its properties required. Keywords it may refuse
// (minItems, maximum, pattern, ...) are left out of a strict schema: the
// caller checks the answer anyway. A schema strict mode cannot take is
// returned as it is.
func strictSchema(schema []byte) ([]byte, bool) {
	var e jx.Encoder
	ok := true
	if err := strictNode(jx.DecodeBytes(schema), &e, &ok); err != nil || !ok {
		return schema, false
	}
	return e.Bytes(), true
}

// strictNode copies one (sub)schema from d to e, as strictSchema says;
// *ok becomes false when strict mode cannot take it.
func strictNode(d *jx.Decoder, e *jx.Encoder, ok *bool) error {
	if d.Next() != jx.Object {
		*ok = false
		return d.Skip()
	}
	var (
		props, required []string
		closed, object  bool
	)
	e.ObjStart()
	err := d.ObjBytes(func(d *jx.Decoder, key []byte) error {
		k := string(key)
		switch k {
		case "properties":
			object = true
			e.FieldStart(k)
			e.ObjStart()
			err := d.ObjBytes(func(d *jx.Decoder, name []byte) error {
				props = append(props, string(name))
				e.FieldStart(string(name))
				return strictNode(d, e, ok)
			})
			e.ObjEnd()
			return err
		case "items":
			e.FieldStart(k)
			return strictNode(d, e, ok)
		case "anyOf":
			e.FieldStart(k)
			e.ArrStart()
			err := d.Arr(func(d *jx.Decoder) error { return strictNode(d, e, ok) })
			e.ArrEnd()
			return err
		case "$defs":
			e.FieldStart(k)
			e.ObjStart()
			err := d.ObjBytes(func(d *jx.Decoder, name []byte) error {
				e.FieldStart(string(name))
				return strictNode(d, e, ok)
			})
			e.ObjEnd()
			return err
		case "required":
			e.FieldStart(k)
			e.ArrStart()
			err := d.Arr(func(d *jx.Decoder) error {
				r, err := d.Str()
				required = append(required, r)
				e.Str(r)
				return err
			})
			e.ArrEnd()
			return err
		case "additionalProperties":
			if d.Next() != jx.Bool {
				*ok = false
				return d.Skip()
			}
			b, err := d.Bool()
			closed = !b
			e.FieldStart(k)
			e.Bool(b)
			return err
		}
		if !strictKeywords[k] {
			return d.Skip()
		}
		raw, err := d.Raw()
		if err != nil {
			return err
		}
		if k == "type" && string(raw) == `"object"` {
			object = true
		}
		e.FieldStart(k)
		e.Raw(raw)
		return nil
	})
	e.ObjEnd()
	if object && (!closed || len(required) != len(props) || !containsAll(required, props)) {
		*ok = false
	}
	return err
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
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
