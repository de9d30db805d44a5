package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
)

// chunk is one chat.completion.chunk frame with a single choice.
func chunk(delta map[string]any, finish any) string {
	return llmtest.Data(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
}

// usage is the last frame a stream_options.include_usage request gets.
func usage(prompt, completion int) string {
	return llmtest.Data(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
		"choices": []any{},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

const done = "data: [DONE]\n\n"

// toolDelta is a tool_calls delta; id and name only on a call's first.
func toolDelta(index int, id, name, args string) map[string]any {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
		tc["function"].(map[string]any)["name"] = name
	}
	return map[string]any{"tool_calls": []any{tc}}
}

// split cuts s into pieces of n bytes.
func split(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func newModel(t *testing.T, srv *llmtest.Server, cfg Config) *Model {
	t.Helper()
	cfg.BaseURL = srv.URL + "/v1"
	if cfg.APIKey == "" {
		cfg.APIKey = "sk-test"
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = -1
	}
	m, err := New(cfg)
	require.NoError(t, err)
	return m
}

var hello = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}

func TestStreamTextAndReasoning(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		chunk(map[string]any{"role": "assistant", "content": ""}, nil),
		chunk(map[string]any{"reasoning_content": "think"}, nil),
		chunk(map[string]any{"reasoning": "ing"}, nil),
		chunk(map[string]any{"reasoning_content": "\n\"so\" \u00e9"}, nil),
		chunk(map[string]any{"reasoning_content": nil, "content": "Hel"}, nil),
		chunk(map[string]any{"content": "lo"}, nil),
		chunk(map[string]any{}, "stop"),
		usage(12, 3),
		done,
	}})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	assert.Equal(t, []llm.Chunk{
		{Type: llm.ChunkReasoning, Text: "think"},
		{Type: llm.ChunkReasoning, Text: "ing"},
		{Type: llm.ChunkReasoning, Text: "\n\"so\" \u00e9"},
		{Type: llm.ChunkText, Text: "Hel"},
		{Type: llm.ChunkText, Text: "lo"},
		{Type: llm.ChunkUsage, Usage: llm.Usage{PromptTokens: 12, CompletionTokens: 3}},
		{Type: llm.ChunkFinish, Finish: llm.FinishStop},
	}, chunks)
}

// Servers other than OpenAI add fields of their own, some of them not of
// the type another server gives the same name; what can be read is read.
func TestStreamToleratesOtherShapes(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		": keep-alive comment\n\n",
		chunk(map[string]any{"reasoning": map[string]any{"summary": "an object"}, "content": "a"}, nil),
		llmtest.Data(`{"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}],"error":null,"timings":{"predicted_ms":1.5}}`),
		"event: message\r\ndata: {\"choices\":[{\"index\":0,\r\ndata: \"delta\":{\"content\":\"c\"}}]}\r\n\r\n",
		chunk(map[string]any{}, "stop"),
		done,
	}})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	assert.Equal(t, []llm.Chunk{
		{Type: llm.ChunkText, Text: "a"},
		{Type: llm.ChunkText, Text: "b"},
		{Type: llm.ChunkText, Text: "c"},
		{Type: llm.ChunkFinish, Finish: llm.FinishStop},
	}, chunks)
}

// A chunk that is not JSON ends the turn with an error naming it, not with
// a turn cut short in silence.
func TestStreamBadChunk(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		chunk(map[string]any{"content": "a"}, nil),
		"data: {not json\n\n",
		chunk(map[string]any{}, "stop"),
		done,
	}})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	assert.Equal(t, []llm.Chunk{{Type: llm.ChunkText, Text: "a"}}, chunks)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "failed: decode a chunk")
}

func TestStreamToolCalls(t *testing.T) {
	args0 := `{"path":"docs/README.md","limit":200}`
	args1 := `{"command":"go test ./...","timeout_seconds":30}`
	events := []string{chunk(map[string]any{"role": "assistant", "content": nil}, nil)}
	events = append(events, chunk(toolDelta(0, "call_a", "read_file", ""), nil))
	for _, p := range split(args0, 3) {
		events = append(events, chunk(toolDelta(0, "", "", p), nil))
	}
	events = append(events, chunk(toolDelta(1, "call_b", "run", ""), nil))
	for _, p := range split(args1, 4) {
		events = append(events, chunk(toolDelta(1, "", "", p), nil))
	}
	events = append(events, chunk(toolDelta(2, "call_c", "list", ""), nil))
	events = append(events, chunk(map[string]any{}, "tool_calls"), usage(40, 25), done)
	srv := llmtest.NewServer(t, llmtest.Reply{Events: events})
	m := newModel(t, srv, Config{})

	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	turn := llmtest.Assemble(chunks)
	assert.Equal(t, []llm.ToolCall{
		{ID: "call_a", Name: "read_file", Arguments: args0},
		{ID: "call_b", Name: "run", Arguments: args1},
		{ID: "call_c", Name: "list", Arguments: "{}"},
	}, turn.Calls)
	assert.Equal(t, llm.FinishToolCalls, turn.Finish)
	assert.Equal(t, &llm.Usage{PromptTokens: 40, CompletionTokens: 25}, turn.Usage)
	deltas := 0
	for _, c := range chunks {
		if c.Type == llm.ChunkToolDelta {
			deltas++
		}
	}
	assert.Equal(t, len(split(args0, 3))+len(split(args1, 4)), deltas)
}

// Ollama numbers every call 0, sends each whole and finishes with "stop".
func TestStreamToolCallsSameIndex(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		chunk(toolDelta(0, "call_1", "read_file", `{"path":"a"}`), nil),
		chunk(toolDelta(0, "call_2", "read_file", `{"path":"b"}`), nil),
		chunk(map[string]any{}, "stop"),
		done,
	}})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	turn := llmtest.Assemble(chunks)
	assert.Equal(t, []llm.ToolCall{
		{ID: "call_1", Name: "read_file", Arguments: `{"path":"a"}`},
		{ID: "call_2", Name: "read_file", Arguments: `{"path":"b"}`},
	}, turn.Calls)
	assert.Equal(t, llm.FinishToolCalls, turn.Finish)
	assert.Nil(t, turn.Usage, "no usage sent, none reported")
}

// A server that sends no call id gets one made up.
func TestStreamToolCallWithoutID(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"name": "list", "arguments": "{}"}}}}, nil),
		chunk(map[string]any{}, "tool_calls"),
		done,
	}})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	calls := llmtest.Assemble(chunks).Calls
	require.Len(t, calls, 1)
	assert.NotEmpty(t, calls[0].ID)
	assert.Equal(t, "list", calls[0].Name)
}

func TestFinishReasons(t *testing.T) {
	for _, tc := range []struct {
		wire string
		want llm.FinishReason
	}{
		{"stop", llm.FinishStop},
		{"length", llm.FinishLength},
		{"content_filter", llm.FinishFiltered},
		{"tool_calls", llm.FinishToolCalls},
		{"something_new", llm.FinishOther},
	} {
		t.Run(tc.wire, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
				chunk(map[string]any{"content": "x"}, nil),
				chunk(map[string]any{}, tc.wire),
				done,
			}})
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
		chunk(map[string]any{"content": "partial"}, nil),
		llmtest.Data(`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`),
	}})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	assert.Equal(t, []llm.Chunk{{Type: llm.ChunkText, Text: "partial"}}, chunks)
	apiErr, ok := errors.AsType[*llm.APIError](err)
	require.True(t, ok, "error %v is not an *llm.APIError", err)
	assert.Equal(t, "openai", apiErr.Provider)
	assert.Equal(t, "server_error", apiErr.Type)
	assert.Equal(t, "The server had an error while processing your request.", apiErr.Message)
	assert.Equal(t, "openai: server_error: The server had an error while processing your request.", apiErr.Error())
	assert.Contains(t, err.Error(), `openai model "gpt-4o-mini" at `+srv.URL)
	assert.Contains(t, err.Error(), "reported an error (server_error: The server had an error while processing your request.)")
}

func TestStreamErrorEventWithStatus(t *testing.T) {
	// vLLM's shape: the HTTP status in code.
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		llmtest.Data(`{"error":{"object":"error","message":"maximum context length exceeded","type":"BadRequestError","param":null,"code":400}}`),
	}})
	m := newModel(t, srv, Config{})
	_, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	apiErr, ok := errors.AsType[*llm.APIError](err)
	require.True(t, ok, "error %v is not an *llm.APIError", err)
	assert.Equal(t, 400, apiErr.StatusCode)
	assert.Equal(t, "BadRequestError", apiErr.Type)
	assert.Equal(t, "maximum context length exceeded", apiErr.Message)
}

func TestHTTPError(t *testing.T) {
	body := `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	srv := llmtest.NewServer(t, llmtest.Reply{Status: http.StatusTooManyRequests, Body: body})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	assert.Empty(t, chunks)
	apiErr, ok := errors.AsType[*llm.APIError](err)
	require.True(t, ok, "error %v is not an *llm.APIError", err)
	assert.Equal(t, 429, apiErr.StatusCode)
	assert.Equal(t, "rate_limit_exceeded", apiErr.Type)
	assert.Equal(t, "Rate limit reached for gpt-4o-mini", apiErr.Message)
	assert.Equal(t, "openai: 429 rate_limit_exceeded: Rate limit reached for gpt-4o-mini", apiErr.Error())
	assert.Contains(t, err.Error(), "is limiting requests (429 Rate limit reached for gpt-4o-mini): wait a little and try again")
	assert.Len(t, srv.Requests(), 1, "MaxRetries < 0 retries nothing")
}

func TestRetries(t *testing.T) {
	tooMany := llmtest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After-Ms": {"1"}},
		Body: `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`}
	srv := llmtest.NewServer(t, tooMany, llmtest.Reply{Events: []string{
		chunk(map[string]any{"content": "ok"}, nil), chunk(map[string]any{}, "stop"), done,
	}})
	m := newModel(t, srv, Config{MaxRetries: 1})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	assert.Equal(t, "ok", llmtest.Assemble(chunks).Text)
	assert.Len(t, srv.Requests(), 2)
}

func TestStreamEndsEarly(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{chunk(map[string]any{"content": "cut"}, nil)}})
	m := newModel(t, srv, Config{})
	_, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestCancel(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Hang: true, Events: []string{
		chunk(map[string]any{"content": "thinking about it"}, nil),
	}})
	m := newModel(t, srv, Config{})
	llmtest.CheckCancel(t, m, srv, hello)
}

func TestRequest(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{chunk(map[string]any{}, "stop"), done}})
	m := newModel(t, srv, Config{Model: "gpt-test", MaxTokens: 100})
	req := llm.Request{
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "list and read"},
			{Role: llm.RoleAssistant, Content: "Looking.", Reasoning: "not sent", ToolCalls: []llm.ToolCall{
				{ID: "call_1", Name: "list", Arguments: ""},
				{ID: "call_2", Name: "read_file", Arguments: `{"path":"a.txt"}`},
			}},
			{Role: llm.RoleTool, ToolCallID: "call_1", Name: "list", Content: "a.txt"},
			{Role: llm.RoleTool, ToolCallID: "call_2", Name: "read_file", Content: "no such file", IsError: true},
			{Role: llm.RoleAssistant, Content: "Nothing there."},
			{Role: llm.RoleUser, Content: "thanks"},
		},
		Tools: []llm.ToolSpec{
			{Name: "read_file", Description: "Reads a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "list"},
		},
	}
	_, err := llmtest.Collect(t, m.Stream(t.Context(), req))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "POST", reqs[0].Method)
	assert.Equal(t, "/v1/chat/completions", reqs[0].Path)
	assert.Equal(t, "Bearer sk-test", reqs[0].Header.Get("Authorization"))
	assert.JSONEq(t, `{
		"model": "gpt-test",
		"stream": true,
		"stream_options": {"include_usage": true},
		"max_tokens": 100,
		"messages": [
			{"role": "system", "content": "You are terse."},
			{"role": "user", "content": "list and read"},
			{"role": "assistant", "content": "Looking.", "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "list", "arguments": "{}"}},
				{"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}}
			]},
			{"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
			{"role": "tool", "tool_call_id": "call_2", "content": "no such file"},
			{"role": "assistant", "content": "Nothing there."},
			{"role": "user", "content": "thanks"}
		],
		"tools": [
			{"type": "function", "function": {"name": "read_file", "description": "Reads a file.",
				"parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
			{"type": "function", "function": {"name": "list", "parameters": {"type": "object", "properties": {}}}}
		]
	}`, string(reqs[0].Body))
}

// OpenAI itself gets max_completion_tokens, which its reasoning models need.
func TestRequestMaxTokensOpenAI(t *testing.T) {
	m, err := New(Config{APIKey: "k", MaxTokens: 50})
	require.NoError(t, err)
	b, err := m.request(hello)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.EqualValues(t, 50, got["max_completion_tokens"])
	assert.NotContains(t, got, "max_tokens")
	assert.Equal(t, DefaultModel, m.Name())
}

// A local server needs no key, and gets none.
func TestNoAPIKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	require.NoError(t, os.Unsetenv("OPENAI_API_KEY"))
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{chunk(map[string]any{"content": "hi"}, "stop"), done}})
	m, err := New(Config{BaseURL: srv.URL + "/v1", Model: "llama3.2", MaxRetries: -1})
	require.NoError(t, err)
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	assert.Equal(t, "hi", llmtest.Assemble(chunks).Text)
	assert.Empty(t, srv.Requests()[0].Header.Get("Authorization"))
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(Config{BaseURL: "localhost:11434"})
	assert.Error(t, err)
	_, err = New(Config{MaxTokens: -1})
	assert.Error(t, err)
}

func FuzzStreamEventError(f *testing.F) {
	f.Add([]byte(`{"error":{"message":"m","type":"t","code":"c"}}`))
	f.Add([]byte(`{"error":{"message":"m","code":400}}`))
	f.Add([]byte(`{"error":"bare"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e := streamEventError(data, errors.New("x"))
		if e == nil || e.Provider != "openai" {
			t.Fatalf("streamEventError(%q) = %+v", data, e)
		}
		_ = e.Error()
	})
}

// TestRequestMatchesSDK: the request Model.Stream writes is the one the
// SDK's types encode, for every kind of message and tool, and either
// max-tokens field; parameters that are not one JSON object are refused
// by both.
func TestRequestMatchesSDK(t *testing.T) {
	srv := llmtest.NewServer(t)
	full := llm.Request{
		System: "You are <terse> & \"exact\".",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "list and read \u2028 日本"},
			{Role: llm.RoleAssistant, Content: "", ToolCalls: []llm.ToolCall{
				{ID: "call_1", Name: "list", Arguments: ""},
				{ID: "call_2", Name: "read_file", Arguments: `{"path":"a.txt"}`},
			}},
			{Role: llm.RoleTool, ToolCallID: "call_1", Name: "list", Content: ""},
			{Role: llm.RoleAssistant, Content: "Done.", Reasoning: "not sent"},
			{Role: llm.RoleAssistant},
		},
		Tools: []llm.ToolSpec{
			{Name: "read_file", Description: "Reads a file.", Parameters: json.RawMessage(`{ "type": "object",
				"properties": {"path": {"type": "string", "description": "<a path>"}}, "required": ["path"]}`)},
			{Name: "list"},
		},
		MaxTokens: 7,
	}
	for name, c := range map[string]struct {
		cfg Config
		req llm.Request
	}{
		"hello":                 {Config{Model: "m"}, hello},
		"full":                  {Config{Model: "gpt-test", MaxTokens: 100}, full},
		"max_tokens field":      {Config{Model: "m", MaxTokens: 9}, hello},
		"max_completion_tokens": {Config{APIKey: "k", MaxTokens: 9}, hello},
		"structured":            {Config{Model: "m"}, structuredHello},
	} {
		t.Run(name, func(t *testing.T) {
			var m *Model
			if c.cfg.APIKey != "" {
				var err error
				m, err = New(c.cfg)
				require.NoError(t, err)
			} else {
				m = newModel(t, srv, c.cfg)
			}
			want, err := m.sdkRequest(c.req)
			require.NoError(t, err)
			got, err := m.request(c.req)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(got))
		})
	}
	m := newModel(t, srv, Config{Model: "m"})
	for _, bad := range []string{`[]`, `"x"`, `{"a":1} {}`, `{"a":`} {
		req := llm.Request{Messages: hello.Messages, Tools: []llm.ToolSpec{{Name: "t", Parameters: json.RawMessage(bad)}}}
		_, err := m.request(req)
		assert.Error(t, err, "parameters %s", bad)
		_, err = m.sdkRequest(req)
		assert.Error(t, err, "the SDK's path, parameters %s", bad)
	}
	_, err := m.request(llm.Request{Messages: []llm.Message{{Role: "narrator"}}})
	assert.ErrorContains(t, err, "unknown role")
}

// verdictSchema is a schema strict mode takes once its bounds are left out.
var verdictSchema = &llm.Schema{Name: "verdict", Description: "Whether it is done.", JSON: json.RawMessage(`{
	"type": "object",
	"properties": {
		"done": {"type": "boolean"},
		"scores": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}, "minItems": 1, "maxItems": 3}
	},
	"required": ["done", "scores"],
	"additionalProperties": false
}`)}

var structuredHello = llm.Request{System: "Judge.", Messages: hello.Messages, Structured: verdictSchema}

// A structured request carries response_format with a strict json_schema;
// the answer streams as text.
func TestStructuredResponseFormat(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		chunk(map[string]any{"role": "assistant", "content": ""}, nil),
		chunk(map[string]any{"content": `{"done": true, `}, nil),
		chunk(map[string]any{"content": `"scores": [0.5]}`}, nil),
		chunk(map[string]any{}, "stop"),
		usage(30, 9),
		done,
	}})
	m := newModel(t, srv, Config{Model: "gpt-4o-mini"})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), structuredHello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	assert.JSONEq(t, `{"done": true, "scores": [0.5]}`, llmtest.Assemble(chunks).Text)
	body := srv.Requests()[0].JSON(t)
	assert.Equal(t, map[string]any{
		"type": "json_schema",
		"json_schema": map[string]any{
			"name": "verdict", "description": "Whether it is done.", "strict": true,
			"schema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"done":   map[string]any{"type": "boolean"},
					"scores": map[string]any{"type": "array", "items": map[string]any{"type": "number"}},
				},
				"required":             []any{"done", "scores"},
				"additionalProperties": false,
			},
		},
	}, body["response_format"])
	assert.Equal(t, "Judge.", body["messages"].([]any)[0].(map[string]any)["content"], "nothing is added to the instructions")
}

func TestStrictSchema(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		strict       bool
	}{
		{"closed and all required", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`, true},
		{"open", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, false},
		{"optional property", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`, false},
		{"open nested object", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}}},"required":["a"],"additionalProperties":false}`, false},
		{"closed nested object", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}}},"required":["a"],"additionalProperties":false}`, true},
		{"not an object", `[]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, strict := strictSchema([]byte(tc.schema))
			assert.Equal(t, tc.strict, strict)
			if !strict {
				assert.Equal(t, tc.schema, string(got), "a schema strict mode cannot take is sent as it is")
			}
		})
	}
}

// An OpenAI-compatible server that refuses response_format gets the same
// call again with the schema in the instructions, and later calls go
// that way at once.
func TestStructuredRefusedFallsBackToInstructions(t *testing.T) {
	for name, refusal := range map[string]string{
		"llama.cpp": `{"error":{"code":400,"message":"Unsupported param: response_format","type":"invalid_request_error"}}`,
		"vLLM":      `{"object":"error","message":"json_schema response_format is not supported","type":"BadRequestError","param":null,"code":400}`,
	} {
		t.Run(name, func(t *testing.T) { testStructuredRefused(t, refusal) })
	}
}

func testStructuredRefused(t *testing.T, refusal string) {
	text := []string{
		chunk(map[string]any{"role": "assistant", "content": `{"done": false, "scores": [1]}`}, nil),
		chunk(map[string]any{}, "stop"),
		done,
	}
	srv := llmtest.NewServer(t,
		llmtest.Reply{Status: http.StatusBadRequest, Body: refusal},
		llmtest.Reply{Events: text},
		llmtest.Reply{Events: text},
	)
	m := newModel(t, srv, Config{Model: "local"})
	for range 2 {
		chunks, err := llmtest.Collect(t, m.Stream(t.Context(), structuredHello))
		require.NoError(t, err)
		assert.JSONEq(t, `{"done": false, "scores": [1]}`, llmtest.Assemble(chunks).Text)
	}
	reqs := srv.Requests()
	require.Len(t, reqs, 3, "the refusal is paid once")
	assert.Contains(t, reqs[0].JSON(t), "response_format")
	for _, r := range reqs[1:] {
		body := r.JSON(t)
		assert.NotContains(t, body, "response_format")
		system := body["messages"].([]any)[0].(map[string]any)["content"].(string)
		assert.True(t, strings.HasPrefix(system, "Judge.\n\nReply with only a JSON object that matches this JSON Schema"), system)
		assert.Contains(t, system, `"required":["done","scores"]`)
	}
}

// Other 400s are the call's failure, and change nothing.
func TestStructuredOtherBadRequest(t *testing.T) {
	srv := llmtest.NewServer(t,
		llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"maximum context length exceeded","type":"invalid_request_error"}}`},
		llmtest.Reply{Events: []string{chunk(map[string]any{"content": "{}"}, "stop"), done}},
	)
	m := newModel(t, srv, Config{Model: "local"})
	_, err := llmtest.Collect(t, m.Stream(t.Context(), structuredHello))
	require.Error(t, err)
	_, err = llmtest.Collect(t, m.Stream(t.Context(), structuredHello))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Contains(t, reqs[1].JSON(t), "response_format", "still asked for")
}
