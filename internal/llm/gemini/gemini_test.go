package gemini

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
)

// frame is one streamGenerateContent?alt=sse frame, with the CRLF line ends
// the API sends.
func frame(v any) string {
	return strings.ReplaceAll(llmtest.Data(v), "\n", "\r\n")
}

// resp is a response frame with one candidate holding parts; finish and
// usage are left out when empty.
func resp(parts []any, finish string, usage map[string]any) string {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	r := map[string]any{"candidates": []any{cand}, "modelVersion": "gemini-2.5-flash", "responseId": "r1"}
	if usage != nil {
		r["usageMetadata"] = usage
	}
	return frame(r)
}

func text(s string) map[string]any    { return map[string]any{"text": s} }
func thought(s string) map[string]any { return map[string]any{"text": s, "thought": true} }
func fcall(name string, args map[string]any) map[string]any {
	return map[string]any{"functionCall": map[string]any{"name": name, "args": args}}
}

func newModel(t *testing.T, srv *llmtest.Server, cfg Config) *Model {
	t.Helper()
	cfg.BaseURL = srv.URL
	cfg.APIKey = "gm-test"
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = -1
	}
	m, err := New(cfg)
	require.NoError(t, err)
	return m
}

var hello = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}

func TestStreamThoughtsAndText(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		resp([]any{thought("Pondering")}, "", nil),
		resp([]any{text("Hel")}, "", map[string]any{"promptTokenCount": 9, "candidatesTokenCount": 1, "totalTokenCount": 10}),
		resp([]any{text("lo")}, "STOP", map[string]any{"promptTokenCount": 9, "candidatesTokenCount": 2, "thoughtsTokenCount": 30, "totalTokenCount": 41}),
	}})
	m := newModel(t, srv, Config{IncludeThoughts: true})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	assert.Equal(t, []llm.Chunk{
		{Type: llm.ChunkReasoning, Text: "Pondering"},
		{Type: llm.ChunkText, Text: "Hel"},
		{Type: llm.ChunkText, Text: "lo"},
		{Type: llm.ChunkUsage, Usage: llm.Usage{PromptTokens: 9, CompletionTokens: 32}},
		{Type: llm.ChunkFinish, Finish: llm.FinishStop},
	}, chunks)
	body := srv.Requests()[0].JSON(t)
	assert.Equal(t, map[string]any{"includeThoughts": true}, body["generationConfig"].(map[string]any)["thinkingConfig"])
}

func TestStreamFunctionCalls(t *testing.T) {
	sig := []byte("opaque-signature")
	first := fcall("read_file", map[string]any{"path": "docs/README.md", "limit": 200})
	first["thoughtSignature"] = base64.StdEncoding.EncodeToString(sig)
	withID := fcall("run", map[string]any{"command": "go test ./..."})
	withID["functionCall"].(map[string]any)["id"] = "fc-7"
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		resp([]any{text("Let me look.")}, "", nil),
		resp([]any{first, withID}, "", nil),
		resp([]any{fcall("list", nil)}, "STOP", map[string]any{"promptTokenCount": 50, "candidatesTokenCount": 20, "totalTokenCount": 70}),
	}})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	turn := llmtest.Assemble(chunks)
	assert.Equal(t, "Let me look.", turn.Text)
	require.Len(t, turn.Calls, 3)
	assert.Equal(t, "read_file", turn.Calls[0].Name)
	assert.JSONEq(t, `{"path":"docs/README.md","limit":200}`, turn.Calls[0].Arguments)
	assert.True(t, strings.HasPrefix(turn.Calls[0].ID, syntheticID), "made-up id %q", turn.Calls[0].ID)
	assert.Equal(t, llm.ToolCall{ID: "fc-7", Name: "run", Arguments: `{"command":"go test ./..."}`}, turn.Calls[1])
	assert.Equal(t, "list", turn.Calls[2].Name)
	assert.Equal(t, "{}", turn.Calls[2].Arguments)
	assert.NotEqual(t, turn.Calls[0].ID, turn.Calls[2].ID)
	assert.Equal(t, base64.StdEncoding.EncodeToString(sig), turn.Signature)
	assert.Equal(t, llm.FinishToolCalls, turn.Finish)
	assert.Equal(t, &llm.Usage{PromptTokens: 50, CompletionTokens: 20}, turn.Usage)
	// Each call comes as start, one delta with the whole arguments, done.
	var types []llm.ChunkType
	for _, c := range chunks {
		if c.Index == 1 && c.Type >= llm.ChunkToolStart && c.Type <= llm.ChunkToolDone {
			types = append(types, c.Type)
		}
	}
	assert.Equal(t, []llm.ChunkType{llm.ChunkToolStart, llm.ChunkToolDelta, llm.ChunkToolDone}, types)
}

func TestFinishReasons(t *testing.T) {
	for _, tc := range []struct {
		wire string
		want llm.FinishReason
	}{
		{"STOP", llm.FinishStop},
		{"MAX_TOKENS", llm.FinishLength},
		{"SAFETY", llm.FinishFiltered},
		{"RECITATION", llm.FinishFiltered},
		{"MALFORMED_FUNCTION_CALL", llm.FinishOther},
	} {
		t.Run(tc.wire, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{resp([]any{text("x")}, tc.wire, nil)}})
			m := newModel(t, srv, Config{})
			chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
			require.NoError(t, err)
			llmtest.CheckStream(t, chunks)
			assert.Equal(t, tc.want, llmtest.Assemble(chunks).Finish)
		})
	}
}

func TestPromptBlocked(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		frame(map[string]any{"promptFeedback": map[string]any{"blockReason": "SAFETY"}, "usageMetadata": map[string]any{"promptTokenCount": 8, "totalTokenCount": 8}}),
	}})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	assert.Equal(t, llm.FinishFiltered, llmtest.Assemble(chunks).Finish)
}

func TestStreamErrorEvent(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		resp([]any{text("partial")}, "", nil),
		frame(map[string]any{"error": map[string]any{"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}}),
	}})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	assert.Equal(t, []llm.Chunk{{Type: llm.ChunkText, Text: "partial"}}, chunks)
	apiErr, ok := errors.AsType[*llm.APIError](err)
	require.True(t, ok, "error %v is not an *llm.APIError", err)
	assert.Equal(t, "gemini: 500 INTERNAL: An internal error has occurred.", apiErr.Error())
}

func TestHTTPError(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Status: http.StatusTooManyRequests,
		Body: `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`})
	m := newModel(t, srv, Config{})
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	assert.Empty(t, chunks)
	apiErr, ok := errors.AsType[*llm.APIError](err)
	require.True(t, ok, "error %v is not an *llm.APIError", err)
	assert.Equal(t, 429, apiErr.StatusCode)
	assert.Equal(t, "gemini: 429 RESOURCE_EXHAUSTED: Resource has been exhausted (e.g. check quota).", apiErr.Error())
	assert.Contains(t, err.Error(), "is limiting requests (429 Resource has been exhausted (e.g. check quota).)")
	assert.Len(t, srv.Requests(), 1, "MaxRetries < 0 retries nothing")
}

func TestHTTPErrorNotJSON(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Status: http.StatusBadGateway, ContentType: "text/html", Body: "<html>bad gateway</html>"})
	m := newModel(t, srv, Config{})
	_, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	apiErr, ok := errors.AsType[*llm.APIError](err)
	require.True(t, ok, "error %v is not an *llm.APIError", err)
	assert.Equal(t, "gemini: 502: <html>bad gateway</html>", apiErr.Error())
	assert.Equal(t, `gemini model "gemini-2.5-flash" at `+srv.URL+` failed (502 <html>bad gateway</html>): the provider's server had a problem: try again in a moment`, err.Error())
}

func TestRetries(t *testing.T) {
	unavailable := llmtest.Reply{Status: http.StatusServiceUnavailable,
		Body: `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`}
	srv := llmtest.NewServer(t, unavailable, llmtest.Reply{Events: []string{resp([]any{text("ok")}, "STOP", nil)}})
	m := newModel(t, srv, Config{MaxRetries: 1})
	delay := 0.001
	m.retry.InitialDelay, m.retry.MaxDelay = &delay, &delay
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	require.NoError(t, err)
	assert.Equal(t, "ok", llmtest.Assemble(chunks).Text)
	assert.Len(t, srv.Requests(), 2)
}

func TestStreamEndsEarly(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{resp([]any{text("cut")}, "", nil)}})
	m := newModel(t, srv, Config{})
	_, err := llmtest.Collect(t, m.Stream(t.Context(), hello))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestCancel(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Hang: true, Events: []string{resp([]any{text("thinking about it")}, "", nil)}})
	m := newModel(t, srv, Config{})
	llmtest.CheckCancel(t, m, srv, hello)
}

func TestRequest(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{resp([]any{text("ok")}, "STOP", nil)}})
	m := newModel(t, srv, Config{Model: "gemini-test", MaxTokens: 256})
	sig := base64.StdEncoding.EncodeToString([]byte("sig-1"))
	req := llm.Request{
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "list and read"},
			{Role: llm.RoleAssistant, Content: "Looking.", Reasoning: "not sent", ReasoningSignature: sig, ToolCalls: []llm.ToolCall{
				{ID: syntheticID + "X", Name: "list", Arguments: ""},
				{ID: "fc-2", Name: "read_file", Arguments: `{"path":"a.txt"}`},
			}},
			{Role: llm.RoleTool, ToolCallID: syntheticID + "X", Content: "a.txt"},
			{Role: llm.RoleTool, ToolCallID: "fc-2", Name: "read_file", Content: "no such file", IsError: true},
			{Role: llm.RoleAssistant, Content: "Nothing there."},
			{Role: llm.RoleUser, Content: "thanks"},
		},
		Tools: []llm.ToolSpec{
			{Name: "read_file", Description: "Reads a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "list", Description: "Lists files."},
		},
	}
	_, err := llmtest.Collect(t, m.Stream(t.Context(), req))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/v1beta/models/gemini-test:streamGenerateContent", reqs[0].Path)
	assert.Equal(t, "sse", reqs[0].Query.Get("alt"))
	assert.Equal(t, "gm-test", reqs[0].Header.Get("X-Goog-Api-Key"))
	assert.JSONEq(t, `{
		"systemInstruction": {"parts": [{"text": "You are terse."}], "role": "user"},
		"generationConfig": {"maxOutputTokens": 256},
		"contents": [
			{"role": "user", "parts": [{"text": "list and read"}]},
			{"role": "model", "parts": [
				{"text": "Looking."},
				{"functionCall": {"name": "list"}, "thoughtSignature": "`+sig+`"},
				{"functionCall": {"id": "fc-2", "name": "read_file", "args": {"path": "a.txt"}}}
			]},
			{"role": "user", "parts": [
				{"functionResponse": {"name": "list", "response": {"output": "a.txt"}}},
				{"functionResponse": {"id": "fc-2", "name": "read_file", "response": {"error": "no such file"}}}
			]},
			{"role": "model", "parts": [{"text": "Nothing there."}]},
			{"role": "user", "parts": [{"text": "thanks"}]}
		],
		"tools": [{"functionDeclarations": [
			{"name": "read_file", "description": "Reads a file.",
				"parametersJsonSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
			{"name": "list", "description": "Lists files."}
		]}]
	}`, string(reqs[0].Body))
}

func TestDefaults(t *testing.T) {
	m, err := New(Config{APIKey: "k"})
	require.NoError(t, err)
	assert.Equal(t, DefaultModel, m.Name())
	require.NotNil(t, m.retry)
	assert.EqualValues(t, DefaultMaxRetries+1, *m.retry.Attempts)
	_, err = New(Config{APIKey: "k", MaxTokens: -1})
	assert.Error(t, err)
}

// A structured request asks for JSON with responseMimeType and the schema
// as responseSchema, its properties in order.
func TestStructuredResponseSchema(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{
		resp([]any{text(`{"done": true, `)}, "", nil),
		resp([]any{text(`"why": null}`)}, "STOP", map[string]any{"promptTokenCount": 9, "candidatesTokenCount": 5, "totalTokenCount": 14}),
	}})
	m := newModel(t, srv, Config{})
	schema := &llm.Schema{Name: "verdict", JSON: json.RawMessage(`{"type":"object",
		"properties":{"why":{"type":["string","null"]},"done":{"type":"boolean","description":"finished"},
			"scores":{"type":"array","items":{"type":"number","minimum":0,"maximum":1},"minItems":1,"maxItems":3},
			"pick":{"type":"string","enum":["a","b"]}},
		"required":["why","done","scores","pick"],"additionalProperties":false}`)}
	req := llm.Request{System: "Judge.", Messages: hello.Messages, Structured: schema}
	chunks, err := llmtest.Collect(t, m.Stream(t.Context(), req))
	require.NoError(t, err)
	llmtest.CheckStream(t, chunks)
	assert.Equal(t, `{"done": true, "why": null}`, llmtest.Assemble(chunks).Text)

	gc := srv.Requests()[0].JSON(t)["generationConfig"].(map[string]any)
	assert.Equal(t, "application/json", gc["responseMimeType"])
	assert.Equal(t, map[string]any{
		"type":             "OBJECT",
		"propertyOrdering": []any{"why", "done", "scores", "pick"},
		"required":         []any{"why", "done", "scores", "pick"},
		"properties": map[string]any{
			"why":    map[string]any{"type": "STRING", "nullable": true},
			"done":   map[string]any{"type": "BOOLEAN", "description": "finished"},
			"scores": map[string]any{"type": "ARRAY", "minItems": float64(1), "maxItems": float64(3), "items": map[string]any{"type": "NUMBER", "minimum": float64(0), "maximum": float64(1)}},
			"pick":   map[string]any{"type": "STRING", "enum": []any{"a", "b"}},
		},
	}, gc["responseSchema"])
	assert.NotContains(t, gc, "responseJsonSchema")
}

// A schema the OpenAPI subset cannot say goes as responseJsonSchema.
func TestStructuredResponseJSONSchema(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{Events: []string{resp([]any{text(`{}`)}, "STOP", nil)}})
	m := newModel(t, srv, Config{})
	schema := &llm.Schema{Name: "x", JSON: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}`)}
	_, err := llmtest.Collect(t, m.Stream(t.Context(), llm.Request{Messages: hello.Messages, Structured: schema}))
	require.NoError(t, err)
	gc := srv.Requests()[0].JSON(t)["generationConfig"].(map[string]any)
	assert.Equal(t, "application/json", gc["responseMimeType"])
	assert.NotContains(t, gc, "responseSchema")
	assert.Contains(t, gc["responseJsonSchema"], "$defs")
}
