package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/llm/llmtest"
	"github.com/agentwire/agentwire/internal/protocol/threads"
)

// The launch contract's promise: point OPENAI_BASE_URL at an
// OpenAI-compatible server (here a fake one speaking the Chat Completions
// streaming format, with no API key, as Ollama runs) and the server gives
// tool-using answers over both protocols, on one shared thread.
func TestRunServesAnOpenAICompatibleModel(t *testing.T) {
	work := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(work, "notes.txt"), []byte("buy milk\n"), 0o644))

	// Two turns, each a tool call (arguments split across chunks) and then
	// an answer that streams in pieces.
	var replies []llmtest.Reply
	for _, answer := range []string{"The folder holds notes.txt.", "Still just notes.txt."} {
		call := []string{completionChunk(map[string]any{"role": "assistant", "content": nil}, nil)}
		call = append(call, completionChunk(toolCallDelta("call_ls", "ls", ""), nil))
		for _, p := range []string{`{"pa`, `th":`, `"."}`} {
			call = append(call, completionChunk(toolCallDelta("", "", p), nil))
		}
		call = append(call, completionChunk(map[string]any{}, "tool_calls"), "data: [DONE]\n\n")
		text := []string{completionChunk(map[string]any{"role": "assistant", "content": ""}, nil)}
		for _, w := range strings.SplitAfter(answer, " ") {
			text = append(text, completionChunk(map[string]any{"content": w}, nil))
		}
		text = append(text, completionChunk(map[string]any{}, "stop"), "data: [DONE]\n\n")
		replies = append(replies, llmtest.Reply{Events: call}, llmtest.Reply{Events: text})
	}
	// First the start-up check lists the server's models.
	models := llmtest.Reply{Body: `{"object":"list","data":[{"id":"llama3.1","object":"model","created":0,"owned_by":"local"}]}`}
	model := llmtest.NewServer(t, append([]llmtest.Reply{models}, replies...)...)

	env := map[string]string{
		"OPENAI_BASE_URL":    model.URL + "/v1",
		"AGENTWIRE_MODEL":    "llama3.1",
		"AGENTWIRE_DATA_DIR": t.TempDir(),
		"AGENTWIRE_WORKDIR":  work,
	}
	addr := startRun(t, env)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	thread := uuid.New()

	// Turn one over agentchat.
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", nil)
	require.NoError(t, err)
	defer ws.CloseNow()
	chat, _ := json.Marshal(map[string]any{"type": "chat", "message": "what is in the folder?", "session_id": thread.String()})
	require.NoError(t, ws.Write(ctx, websocket.MessageText, chat))
	var frames []map[string]any
	for {
		_, b, err := ws.Read(ctx)
		require.NoError(t, err)
		var f map[string]any
		require.NoError(t, json.Unmarshal(b, &f))
		frames = append(frames, f)
		if f["type"] == "agent_message" || f["type"] == "error" {
			break
		}
	}
	require.Len(t, frames, 4, "frames: %v", frames)
	assert.Equal(t, map[string]any{"type": "user_message", "message": "what is in the folder?"}, frames[0])
	assert.Equal(t, "tool_call", frames[1]["type"])
	assert.Equal(t, "ls", frames[1]["tool_name"])
	assert.JSONEq(t, `{"path":"."}`, frames[1]["tool_args"].(string))
	assert.Equal(t, "tool_result", frames[2]["type"])
	assert.Equal(t, true, frames[2]["success"])
	assert.Contains(t, frames[2]["result"], "notes.txt", "the ls tool really ran in the working folder")
	assert.Equal(t, map[string]any{"type": "agent_message", "message": "The folder holds notes.txt."}, frames[3])

	// Turn two over threads, on the same conversation.
	client, err := threads.NewClient("http://"+addr, nil)
	require.NoError(t, err)
	stream, err := client.SendMessage(ctx, thread, "and now?")
	require.NoError(t, err)
	defer stream.Close()
	var names []string
	var text strings.Builder
	for {
		e, err := stream.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names = append(names, string(e.Type))
		if v, ok := e.GetAgentTextSSE(); ok {
			text.WriteString(v.Data.Chunk)
		}
		if v, ok := e.GetToolResultSSE(); ok {
			assert.Equal(t, "result-call_ls", v.Data.ToolResultID)
		}
	}
	require.GreaterOrEqual(t, len(names), 3, "events: %v", names)
	assert.Equal(t, []string{threads.EventToolCall, threads.EventToolResult}, names[:2])
	assert.Equal(t, threads.EventDone, names[len(names)-1])
	assert.Equal(t, "Still just notes.txt.", text.String())

	// What the model was sent: the named model, streaming with usage, the
	// tools, and on the second turn the first turn's conversation.
	reqs := model.Requests()
	require.Len(t, reqs, 5)
	assert.Equal(t, "GET /v1/models", reqs[0].Method+" "+reqs[0].Path, "the start-up check")
	reqs = reqs[1:]
	for _, r := range reqs {
		assert.Equal(t, "/v1/chat/completions", r.Path)
	}
	first := reqs[0].JSON(t)
	assert.Equal(t, "llama3.1", first["model"])
	assert.Equal(t, true, first["stream"])
	assert.Equal(t, map[string]any{"include_usage": true}, first["stream_options"])
	assert.Contains(t, string(reqs[0].Body), `"name":"ls"`)
	third := string(reqs[2].Body)
	for _, want := range []string{"what is in the folder?", "The folder holds notes.txt.", "call_ls", "and now?"} {
		assert.Contains(t, third, want, "the second turn's request carries the thread's history")
	}
}

// startRun runs the server on a free port until the test ends and returns
// its address, read from the banner.
func startRun(t *testing.T, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "stderr: %s", stderr.String())
	})
	banner := regexp.MustCompile(`agentchat\s+ws://(127\.0\.0\.1:\d+)/ws`)
	var addr string
	require.Eventually(t, func() bool {
		m := banner.FindStringSubmatch(stdout.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 30*time.Second, 10*time.Millisecond, "no banner; stderr: %s", stderr.String())
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, stdout.String(), "model: openai llama3.1 at "+env["OPENAI_BASE_URL"])
	return addr
}

// completionChunk is one chat.completion.chunk frame with a single choice.
func completionChunk(delta map[string]any, finish any) string {
	return llmtest.Data(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "llama3.1",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
}

// toolCallDelta is a tool_calls delta of call 0; id and name only on its
// first.
func toolCallDelta(id, name, args string) map[string]any {
	tc := map[string]any{"index": 0, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
		tc["function"].(map[string]any)["name"] = name
	}
	return map[string]any{"tool_calls": []any{tc}}
}

// lockedBuffer is a bytes.Buffer safe for the server goroutine's writes
// and the test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
