// Package llm is the one interface agentwire's agent runtime uses to talk to a
// language model, and the types that cross it. Providers live in
// sub-packages: openai (any Chat Completions server), anthropic, gemini and
// scripted (deterministic and offline).
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
)

// Model streams one model turn. Implementations must stop promptly and yield
// ctx.Err() (possibly wrapped) when ctx is cancelled.
type Model interface {
	// Name is the model name requests go to (for example "gpt-4o-mini").
	Name() string
	// Stream sends req and yields the turn's chunks in order. A non-nil error
	// ends the stream; the iterator yields nothing after it. A stream that ends
	// without error has yielded exactly one ChunkFinish as its last chunk.
	Stream(ctx context.Context, req Request) iter.Seq2[Chunk, error]
	// Check makes the cheapest call that shows the model can be used (the
	// server is reached, the key accepted, the model known) and returns
	// what failed, explained (a *CallError); nil when it can, and for a
	// model with nothing to check. The server calls it at start.
	Check(ctx context.Context) error
}

// Request is one model call: the conversation so far and the tools on offer.
type Request struct {
	// System is the system prompt; empty for none.
	System   string
	Messages []Message
	Tools    []ToolSpec
	// MaxTokens caps the reply; zero leaves the provider's default.
	MaxTokens int
	// Structured, when set, asks for the reply's text to be one JSON
	// object matching a schema, the strongest way the provider offers:
	// OpenAI's response_format (json_schema), Anthropic's forced use of a
	// tool whose input is the object (streamed back as text, not as a
	// tool call), Gemini's responseSchema. Providers with no such means
	// ignore it (the scripted model). The model may still answer
	// otherwise (a server that ignores the request, a model that does not
	// follow it): the caller checks the answer. A request with Structured
	// normally offers no Tools.
	Structured *Schema
}

// Schema is the structure a Request asks its answer to have.
type Schema struct {
	// Name names the structure: letters, digits, "_" and "-", at most 64
	// (the rules of OpenAI's json_schema name and Anthropic's tool names).
	Name string
	// Description says what the answer is for; optional.
	Description string
	// JSON is the JSON Schema of the answer, an object schema. Keep to the
	// keywords every provider knows: type, properties, required,
	// additionalProperties, items, enum, description, minItems, maxItems,
	// minimum and maximum.
	JSON json.RawMessage
}

// Instruction is the schema as words for the system prompt, for a
// provider or server that cannot be asked for it any other way.
func (s *Schema) Instruction() string {
	var b bytes.Buffer
	if err := json.Compact(&b, s.JSON); err != nil {
		b.Reset()
		b.Write(s.JSON)
	}
	return "Reply with only a JSON object that matches this JSON Schema, and nothing else (no prose, no code fence):\n" + b.String()
}

// Role is the author of a Message.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries one tool result, answering ToolCallID.
	RoleTool Role = "tool"
)

// Message is one turn of the conversation as the model sees it.
type Message struct {
	Role Role
	// Content is the text of a user or assistant message, or a tool's result.
	Content string
	// Reasoning is the assistant's reasoning text, where the provider wants it
	// sent back (Anthropic thinking blocks); others ignore it.
	Reasoning string
	// ReasoningSignature is the provider's opaque signature for Reasoning.
	ReasoningSignature string
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID and Name identify the call a RoleTool message answers.
	ToolCallID string
	Name       string
	// IsError marks a tool result as a failure.
	IsError bool
}

// ToolCall is a complete call the model made.
type ToolCall struct {
	ID   string
	Name string
	// Arguments is the JSON object text the model produced.
	Arguments string
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the tool's input (an object schema).
	Parameters json.RawMessage
}

// ChunkType says which fields of a Chunk are set.
type ChunkType int

// Chunk types.
const (
	// ChunkText: Text is a fragment of the reply.
	ChunkText ChunkType = iota + 1
	// ChunkReasoning: Text is a fragment of the model's reasoning.
	ChunkReasoning
	// ChunkReasoningSignature: Signature closes the reasoning block (Anthropic).
	ChunkReasoningSignature
	// ChunkToolStart: a tool call began; Index, CallID and Name are set.
	ChunkToolStart
	// ChunkToolDelta: Arguments is a fragment of call Index's arguments.
	ChunkToolDelta
	// ChunkToolDone: call Index is complete; CallID, Name and the whole
	// Arguments are set.
	ChunkToolDone
	// ChunkUsage: Usage is set. Providers report it once per turn.
	ChunkUsage
	// ChunkFinish: Finish is set; always the last chunk.
	ChunkFinish
)

// Chunk is one piece of a streamed turn.
type Chunk struct {
	Type      ChunkType
	Text      string
	Signature string
	// Index is the position of a tool call within the turn, from 0.
	Index     int
	CallID    string
	Name      string
	Arguments string
	Usage     Usage
	Finish    FinishReason
}

// Usage counts the tokens of one model call.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
}

// Total is PromptTokens + CompletionTokens.
func (u Usage) Total() int64 { return u.PromptTokens + u.CompletionTokens }

// FinishReason is why a turn ended.
type FinishReason string

// Finish reasons, normalised across providers.
const (
	FinishStop      FinishReason = "stop"
	FinishToolCalls FinishReason = "tool_calls"
	FinishLength    FinishReason = "length"
	FinishFiltered  FinishReason = "content_filter"
	FinishOther     FinishReason = "other"
)

// APIError is a failure a provider's API reported: an HTTP error status, or
// an error event inside a stream. It carries the vendor's status and message
// so that people can be told why a call failed ("anthropic: 429
// rate_limit_error: ...") and callers can tell retryable failures apart.
// Unwrap returns the SDK's own error.
type APIError struct {
	// Provider names the API: "openai", "anthropic" or "gemini".
	Provider string
	// StatusCode is the HTTP status, or 0 for an error event in a stream
	// that carried none.
	StatusCode int
	// Type is the vendor's error kind, such as "rate_limit_error" or
	// "RESOURCE_EXHAUSTED"; empty when it sent none.
	Type string
	// Message is the vendor's explanation.
	Message string
	Err     error
}

func (e *APIError) Error() string {
	s := e.Provider + ":"
	if e.StatusCode != 0 {
		s += fmt.Sprintf(" %d", e.StatusCode)
	}
	if e.Type != "" {
		s += " " + e.Type
	}
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	if msg == "" {
		msg = "error"
	}
	return s + ": " + msg
}

func (e *APIError) Unwrap() error { return e.Err }
