package loom_test

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/loomapi"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
)

// chunk is one Chat Completions stream chunk.
func chunk(delta map[string]any, finish any) string {
	return llmtest.Data(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
}

func usageChunk(prompt, completion int) string {
	return llmtest.Data(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

// textReply streams text word by word, then its usage.
func textReply(text string, prompt, completion int) llmtest.Reply {
	ev := []string{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	for _, w := range strings.SplitAfter(text, " ") {
		ev = append(ev, chunk(map[string]any{"content": w}, nil))
	}
	return llmtest.Reply{Events: append(ev, chunk(map[string]any{}, "stop"), usageChunk(prompt, completion), "data: [DONE]\n\n")}
}

// callReply streams one tool call, its arguments in pieces, then usage.
func callReply(id, name string, args map[string]any, prompt, completion int) llmtest.Reply {
	b, _ := json.Marshal(args)
	ev := []string{chunk(map[string]any{"role": "assistant", "content": nil}, nil),
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": name, "arguments": ""}}}}, nil)}
	for s := string(b); s != ""; {
		n := min(len(s), 6)
		ev = append(ev, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": s[:n]}}}}, nil))
		s = s[n:]
	}
	return llmtest.Reply{Events: append(ev, chunk(map[string]any{}, "tool_calls"), usageChunk(prompt, completion), "data: [DONE]\n\n")}
}

// Loom runs against an OpenAI-compatible upstream: the working folder's
// SOUL.md and AGENTS.md are the system message of every call, the tool
// works in that folder, the stream carries the upstream's chunks and
// run_end its usage; a dup run works the same way.
func TestRunsAgainstOpenAI(t *testing.T) {
	upstream := llmtest.NewServer(t,
		callReply("call_1", "read", map[string]any{"path": "notes.txt"}, 300, 20),
		textReply("Your notes say: remember the milk.", 400, 9),
		textReply(`{"core_goal": "Answer", "key_constraints": [], "relevant_context": ""}`, 100, 10),
		textReply("1. Answer.", 110, 5),
		textReply("Done planning and acting.", 120, 6),
	)
	work := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(work, "team"), 0o755))
	for name, content := range map[string]string{
		"team/SOUL.md":   "You are the Loom tester.",
		"team/AGENTS.md": "Answer in one line.",
		"team/notes.txt": "remember the milk",
		"notes.txt":      "the wrong notes",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(work, name), []byte(content), 0o644))
	}
	env := map[string]string{"OPENAI_BASE_URL": upstream.URL + "/v1"}
	cfg, err := config.Parse([]string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workdir", work,
		"--model", "gpt-4o-mini"}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "openai", cfg.Provider())
	h := start(t, cfg)
	c := h.dial()

	r := runReq("o1", "react", "what do my notes say?")
	r.WorkingFolder = new("team")
	res := c.run(r)
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, "Your notes say: remember the milk.", res.end.Reply)
	assert.Equal(t, "Your notes say: remember the milk.", chunks(res.events))
	assert.Equal(t, &loomapi.TokenUsage{PromptTokens: 400, CompletionTokens: 9, TotalTokens: 409}, res.end.Usage)
	assert.Equal(t, &loomapi.TokenUsage{PromptTokens: 700, CompletionTokens: 29, TotalTokens: 729}, res.end.TotalUsage)
	var ended loomapi.ToolEndEvent
	for _, e := range res.events {
		if v, ok := e.(loomapi.ToolEndEvent); ok {
			ended = v
		}
	}
	assert.Equal(t, "call_1", *ended.CallID)
	assert.Contains(t, ended.Result, "remember the milk", "the tool reads in the run's working folder")

	r = runReq("o2", "dup", "answer me")
	r.WorkingFolder = new("team")
	res = c.run(r)
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, "Done planning and acting.", res.end.Reply)
	assert.Equal(t, &loomapi.TokenUsage{PromptTokens: 330, CompletionTokens: 21, TotalTokens: 351}, res.end.TotalUsage)

	reqs := upstream.Requests()
	require.Len(t, reqs, 5)
	for i, req := range reqs {
		first := req.JSON(t)["messages"].([]any)[0].(map[string]any)
		assert.Equal(t, "system", first["role"], "request %d", i)
		assert.True(t, strings.HasPrefix(first["content"].(string), "You are the Loom tester.\n\nAnswer in one line."),
			"request %d: SOUL.md then AGENTS.md open the system message: %q", i, first["content"])
	}
}
