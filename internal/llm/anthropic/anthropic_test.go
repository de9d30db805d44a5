package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
)

// ev is one Messages stream event: its name is also its data's type.
func ev(name string, data map[string]any) string {
	data["type"] = name
	return llmtest.Event(name, data)
}

func messageStart(input int) string {
	return ev("message_start", map[string]any{"message": map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-test",
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": input, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
}

func blockStart(index int, block map[string]any) string {
	return ev("content_block_start", map[string]any{"index": index, "content_block": block})
}

func blockDelta(index int, delta map[string]any) string {
	return ev("content_block_delta", map[string]any{"index": index, "delta": delta})
}

func blockStop(index int) string {
	return ev("content_block_stop", map[string]any{"index": index})
}

func messageEnd(reason string, output int) []string {
	return []string{
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": reason, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": output}}),
		ev("message_stop", map[string]any{}),
	}
}

// toolBlock is a tool_use block whose input arrives in pieces of n bytes.
func toolBlock(index int, id, name, input string, n int) []string {
	out := []string{
		blockStart(index, map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}}),
		blockDelta(index, map[string]any{"type": "input_json_delta", "partial_json": ""}),
	}
	for len(input) > 0 {
		k := min(n, len(input))
		out = append(out, blockDelta(index, map[string]any{"type": "input_json_delta", "partial_json": input[:k]}))
		input = input[k:]
	}
	return append(out, blockStop(index))
}

func newModel(t *testing.T, srv *llmtest.Server, cfg Config) *Model {
	t.Helper()
	cfg.BaseURL = srv.URL
	cfg.APIKey = "sk-ant-test"
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = -1
	}
	m, err := New(cfg)
	require.NoError(t, err)
	return m
}

var hello = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}

func TestStreamThinkingAndText(t *testing.T) {
	events := []string{
		messageStart(25),
		blockStart(0, map[string]any{"type": "thinking", "thinking": "", "signature": ""}),
		llmtest.Event("ping", `{"type": "ping"}`),
		blockDelta(0, map[string]any{"type": "thinking_delta", "thinking": "Let me "}),
		blockDelta(0, map[string]any{"type": "thinking_delta", "thinking": "see."}),
		blockDelta(0, map[string]any{"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}),
		blockStop(0),
		blockStart(1, map[string]any{"type": "text", "text": ""}),
		blockDelta(1, map[string]any{"type": "text_delta", "text": "Hello"}),
		blockDelta(1, map[string]any{"type": "text_delta", "text": " there"}),
		blockStop(1),
	}
	events = append(events, messageEnd("end_turn", 15)...)
	srv := llmtest.NewServer(t, llmtest.Reply{Events: events})
	m := newModel(t, srv, Config{ThinkingBudget: 2048})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	assert.Equal(t, []llm.Chunk{
		{Type: llm.ChunkReasoning, Text: "Let me "},
		{Type: llm.ChunkReasoning, Text: "see."},
		{Type: llm.ChunkReasoningSignature, Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
		{Type: llm.ChunkText, Text: "Hello"},
		{Type: llm.ChunkText, Text: " there"},
		{Type: llm.ChunkUsage, Usage: llm.Usage{PromptTokens: 25, CompletionTokens: 15}},
		{Type: llm.ChunkFinish, Finish: llm.FinishStop},
	}, chunks)
	body := srv.Requests()[0].JSON(t)
	assert.Equal(t, map[string]any{"type": "enabled", "budget_tokens": float64(2048)}, body["thinking"])
}

func TestStreamToolUse(t *testing.T) {
	args0 := `{"location":"San Francisco, CA","unit":"celsius"}`
	args1 := `{"query":"weather alerts","max_results":5}`
	events := []string{
		messageStart(400),
		blockStart(0, map[string]any{"type": "text", "text": ""}),
		blockDelta(0, map[string]any{"type": "text_delta", "text": "Checking."}),
		blockStop(0),
	}
	events = append(events, toolBlock(1, "toolu_01", "get_weather", args0, 5)...)
	events = append(events, toolBlock(2, "toolu_02", "search", args1, 7)...)
	events = append(events, toolBlock(3, "toolu_03", "list", "", 1)...)
	events = append(events, messageEnd("tool_use", 89)...)
	srv := llmtest.NewServer(t, llmtest.Reply{Events: events})
	m := newModel(t, srv, Config{})

	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	turn := llmtest.Assemble(chunks)
	assert.Equal(t, "Checking.", turn.Text)
	assert.Equal(t, []llm.ToolCall{
		{ID: "toolu_01", Name: "get_weather", Arguments: args0},
		{ID: "toolu_02", Name: "search", Arguments: args1},
		{ID: "toolu_03", Name: "list", Arguments: "{}"},
	}, turn.Calls)
	assert.Equal(t, llm.FinishToolCalls, turn.Finish)
	assert.Equal(t, &llm.Usage{PromptTokens: 400, CompletionTokens: 89}, turn.Usage)
	// Calls are numbered within the turn, not by content block.
	for _, c := range chunks {
		if c.Type == llm.ChunkToolStart && c.CallID == "toolu_01" {
			assert.Equal(t, 0, c.Index)
		}
	}
}

func TestFinishReasons(t *testing.T) {
	for _, tc := range []struct {
		wire string
		want llm.FinishReason
	}{
		{"end_turn", llm.FinishStop},
		{"stop_sequence", llm.FinishStop},
		{"max_tokens", llm.FinishLength},
		{"model_context_window_exceeded", llm.FinishLength},
		{"refusal", llm.FinishFiltered},
		{"pause_turn", llm.FinishOther},
	} {
		t.Run(tc.wire, func(t *testing.T) {
			events := append([]string{messageStart(1)}, messageEnd(tc.wire, 1)...)
			srv := llmtest.NewServer(t, llmtest.Reply{Events: events})
			m := newModel(t, srv, Config{})
			chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
			require.NoError(t, err)
			llmtest.CheckStream(t, chunks)
			assert.Equal(t, tc.want, llmtest.Assemble(chunks).Finish)
		})
	}
}

func TestStreamErrorEvent(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		messageStart(10),
		blockStart(0, map[string]any{"type": "text", "text": ""}),
		blockDelta(0, map[string]any{"type": "text_delta", "text": "partial"}),
		llmtest.Event("error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`),
	}})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	assert.Equal(t, []llm.Chunk{{Type: llm.ChunkText, Text: "partial"}}, chunks)
	apiErr, ok := errors.AsType[*llm.APIError](err)
	require.True(t, ok, "error %v is not an *llm.APIError", err)
	assert.Equal(t, llm.APIError{Provider: "anthropic", Type: "overloaded_error", Message: "Overloaded", Err: apiErr.Err}, *apiErr)
	assert.Equal(t, "anthropic: overloaded_error: Overloaded", apiErr.Error())
	assert.Equal(t, `anthropic model "claude-sonnet-4-6" at `+srv.URL+` reported an error (overloaded_error: Overloaded)`, err.Error())
}

func TestHTTPError(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Status: http.StatusTooManyRequests,
		Body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	assert.Empty(t, chunks)
	apiErr, ok := errors.AsType[*llm.APIError](err)
	require.True(t, ok, "error %v is not an *llm.APIError", err)
	assert.Equal(t, 429, apiErr.StatusCode)
	assert.Equal(t, "rate_limit_error", apiErr.Type)
	assert.Equal(t, "anthropic: 429 rate_limit_error: Number of request tokens has exceeded your per-minute rate limit", apiErr.Error())
	assert.Contains(t, err.Error(), "is limiting requests (429 Number of request tokens has exceeded your per-minute rate limit)")
	assert.Len(t, srv.Requests(), 1, "MaxRetries < 0 retries nothing")
}

func TestRetries(t *testing.T) {
	overloaded := llmtest.Reply{Status: 529, Header: http.Header{"Retry-After-Ms": {"1"}},
		Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}
	events := append([]string{messageStart(1)}, messageEnd("end_turn", 1)...)
	srv := llmtest.NewServer(t, overloaded, llmtest.Reply{Events: events})
	m := newModel(t, srv, Config{MaxRetries: 1})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	assert.Len(t, srv.Requests(), 2)
}

func TestStreamEndsEarly(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		messageStart(1),
		blockStart(0, map[string]any{"type": "text", "text": ""}),
		blockDelta(0, map[string]any{"type": "text_delta", "text": "cut"}),
	}})
	m := newModel(t, srv, Config{})
	_, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestCancel(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Hang: true, Events: []string{
		messageStart(1),
		blockStart(0, map[string]any{"type": "text", "text": ""}),
		blockDelta(0, map[string]any{"type": "text_delta", "text": "thinking about it"}),
	}})
	m := newModel(t, srv, Config{})
	llmtest.CheckCancel(t, m, srv, hello)
}

func TestRequest(t *testing.T) {
	events := append([]string{messageStart(1)}, messageEnd("end_turn", 1)...)
	srv := llmtest.NewServer(t, llmtest.Reply{Events: events})
	m := newModel(t, srv, Config{Model: "claude-test", MaxTokens: 1000})
	req := llm.Request{
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "list and read"},
			{Role: llm.RoleAssistant, Content: "Looking.", Reasoning: "Two tools.", ReasoningSignature: "sig-1", ToolCalls: []llm.ToolCall{
				{ID: "toolu_1", Name: "list", Arguments: ""},
				{ID: "toolu_2", Name: "read_file", Arguments: `{"path":"a.txt"}`},
			}},
			{Role: llm.RoleTool, ToolCallID: "toolu_1", Name: "list", Content: "a.txt"},
			{Role: llm.RoleTool, ToolCallID: "toolu_2", Name: "read_file", Content: "no such file", IsError: true},
			{Role: llm.RoleUser, Content: "and?"},
			{Role: llm.RoleAssistant, Content: "Nothing there."},
			{Role: llm.RoleUser, Content: "thanks"},
		},
		Tools: []llm.ToolSpec{
			{Name: "read_file", Description: "Reads a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
			{Name: "list"},
		},
	}
	_, err := llmtest.Collect(t, m.Stream(t.Context(), req))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/v1/messages", reqs[0].Path)
	assert.Equal(t, "sk-ant-test", reqs[0].Header.Get("X-Api-Key"))
	assert.NotEmpty(t, reqs[0].Header.Get("Anthropic-Version"))
	assert.JSONEq(t, `{
		"model": "claude-test",
		"max_tokens": 1000,
		"stream": true,
		"system": [{"type": "text", "text": "You are terse."}],
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "list and read"}]},
			{"role": "assistant", "content": [
				{"type": "thinking", "thinking": "Two tools.", "signature": "sig-1"},
				{"type": "text", "text": "Looking."},
				{"type": "tool_use", "id": "toolu_1", "name": "list", "input": {}},
				{"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "a.txt"}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a.txt"}]},
				{"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "no such file"}], "is_error": true},
				{"type": "text", "text": "and?"}
			]},
			{"role": "assistant", "content": [{"type": "text", "text": "Nothing there."}]},
			{"role": "user", "content": [{"type": "text", "text": "thanks"}]}
		],
		"tools": [
			{"name": "read_file", "description": "Reads a file.", "input_schema": {
				"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false}},
			{"name": "list", "input_schema": {"type": "object", "properties": {}}}
		]
	}`, string(reqs[0].Body))
}

func TestRequestThinking(t *testing.T) {
	m, err := New(Config{APIKey: "k", AdaptiveThinking: true})
	require.NoError(t, err)
	assert.Equal(t, DefaultModel, m.Name())
	p, err := m.params(hello)
	require.NoError(t, err)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"thinking":{"type":"adaptive"}`)
	assert.Contains(t, string(b), `"max_tokens":8192`)

	// A call capped below the budget runs without thinking.
	m, err = New(Config{APIKey: "k", ThinkingBudget: 2000})
	require.NoError(t, err)
	p, err = m.params(llm.Request{MaxTokens: 500, Messages: hello.Messages})
	require.NoError(t, err)
	b, err = json.Marshal(p)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"thinking"`)
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{MaxTokens: -1},
		{ThinkingBudget: 100},
		{ThinkingBudget: 4096, MaxTokens: 4096},
	} {
		_, err := New(cfg)
		assert.Error(t, err, "New(%+v)", cfg)
	}
}

func FuzzErrorBody(f *testing.F) {
	f.Add([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	f.Add([]byte(`{"error":"x"}`))
	f.Add([]byte(`<html>bad gateway</html>`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		typ, msg := errorBody(raw)
		if !json.Valid(raw) && (typ != "" || msg != string(raw)) {
			t.Fatalf("errorBody(%q) = %q, %q, want the body as the message", raw, typ, msg)
		}
	})
}

var verdict = &llm.Schema{Name: "verdict", JSON: json.RawMessage(`{"type":"object","properties":{"done":{"type":"boolean"}},"required":["done"],"additionalProperties":false}`)}

// A structured request forces a tool whose input is the answer; that
// input streams back as text, and thinking is off for the call.
func TestStructuredForcedTool(t *testing.T) {
	events := []string{messageStart(40)}
	events = append(events, toolBlock(0, "toolu_9", "verdict", `{"done": true}`, 4)...)
	events = append(events, messageEnd("tool_use", 7)...)
	srv := llmtest.NewServer(t, llmtest.Reply{Events: events})
	m := newModel(t, srv, Config{ThinkingBudget: 2048})
	req := llm.Request{System: "Judge.", Messages: hello.Messages, Structured: verdict}
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), req))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	turn := llmtest.Assemble(chunks)
	assert.Equal(t, `{"done": true}`, turn.Text)
	assert.Empty(t, turn.Calls, "the answer's tool is not a call")
	assert.Equal(t, llm.FinishStop, turn.Finish)

	body := srv.Requests()[0].JSON(t)
	assert.Equal(t, map[string]any{"type": "tool", "name": "verdict"}, body["tool_choice"])
	assert.Equal(t, []any{map[string]any{
		"name": "verdict", "description": "Give your answer as this tool's input.",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"done": map[string]any{"type": "boolean"}},
			"required": []any{"done"}, "additionalProperties": false},
	}}, body["tools"])
	assert.NotContains(t, body, "thinking", "thinking cannot go with a forced tool")
}
