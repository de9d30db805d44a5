package agentloop_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/llm"
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

// textReply streams text in pieces, then its usage.
func textReply(text string, prompt int) llmtest.Reply {
	ev := []string{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	for _, w := range strings.SplitAfter(text, " ") {
		ev = append(ev, chunk(map[string]any{"content": w}, nil))
	}
	return llmtest.Reply{Events: append(ev, chunk(map[string]any{}, "stop"), usageChunk(prompt, 20), "data: [DONE]\n\n")}
}

// callReply streams one tool call, its arguments in pieces, then usage.
func callReply(id, name string, args map[string]any, prompt int) llmtest.Reply {
	b, _ := json.Marshal(args)
	ev := []string{chunk(map[string]any{"role": "assistant", "content": nil}, nil),
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": name, "arguments": ""}}}}, nil)}
	for s := string(b); s != ""; {
		n := min(len(s), 7)
		ev = append(ev, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": s[:n]}}}}, nil))
		s = s[n:]
	}
	return llmtest.Reply{Events: append(ev, chunk(map[string]any{}, "tool_calls"), usageChunk(prompt, 30), "data: [DONE]\n\n")}
}

// A coding session against an OpenAI-compatible model: a command asks,
// a second tab has it explained and approves it for good, the first
// denies a patch, the approved program then runs without asking, and when
// a large command output fills the context the conversation is compacted
// before the next call, which is sent the summary instead.
func TestCodingSessionAgainstOpenAI(t *testing.T) {
	const patch = "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch"
	const summary = "## Goals\nMake files.\n## Decisions\nNo patch.\n## Files touched\na.txt, c.txt, big.txt\n## Open tasks\nNone."
	model := llmtest.NewServer(t,
		callReply("call_1", "bash", map[string]any{"command": "touch a.txt"}, 1200),
		textReply("It creates an empty file named a.txt.", 800),
		callReply("call_2", "apply_patch", map[string]any{"patch": patch}, 1300),
		textReply("OK, skipping the patch.", 1400),
		callReply("call_3", "bash", map[string]any{"command": "touch c.txt"}, 1500),
		callReply("call_4", "bash", map[string]any{"command": "cat big.txt"}, 1600),
		textReply(summary, 3000),
		textReply("Done.", 600),
		textReply("Carrying on.", 700),
	)
	env := map[string]string{"OPENAI_BASE_URL": model.URL + "/v1"}
	cfg, err := config.Parse([]string{
		"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workdir", t.TempDir(),
		"--model", "gpt-4o-mini", "--context-window", "10000",
	}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "openai", cfg.Provider())
	h := start(t, cfg)
	var big strings.Builder
	for i := range 800 {
		fmt.Fprintf(&big, "line %d of the big file, with a few more words\n", i)
	}
	h.write("big.txt", big.String())
	a := h.dial("")
	b := h.dial(a.thread)

	a.say("make me some files")
	assert.Equal(t, []string{"touch", "a.txt"}, b.expectApproval().Command)
	a.expectApproval()
	b.review("explain")
	got := until[agentloopapi.ApprovalRequestMessage](b)
	assert.Equal(t, "It creates an empty file named a.txt.", messageText(items(got)[0]))
	b.review("always")

	a.expectApproval()        // asked again after the explanation
	req := a.expectApproval() // the patch, once a.txt is made
	assert.Equal(t, []string{"apply_patch", patch}, req.Command)
	assert.True(t, h.exists("a.txt"))
	deny := reviewMsg("no-continue")
	why := "not now"
	deny.Payload.CustomDenyMessage = &why
	a.send(deny)
	frames := a.turn()
	assert.Equal(t, "OK, skipping the patch.", messageText(items(frames)[len(items(frames))-1]))
	assert.False(t, h.exists("b.txt"))
	info := frames[len(frames)-1].(agentloopapi.ContextInfoMessage).Payload
	tok := llm.TokenizerFor("gpt-4o-mini")
	assert.Equal(t, 1400+tok.Count("OK, skipping the patch.")+4, info.TokenCount,
		"the provider's prompt count of the last call, plus its answer counted with OpenAI's tokenizer")
	assert.Equal(t, 10000, info.MaxTokens)
	assert.Equal(t, 6, info.TranscriptLength, "user, call, result, call, result, answer: the explanation is not part of it")
	b.turn()

	// touch is remembered and cat only reads: nothing asks. The big
	// output passes the threshold: the next call is preceded by a
	// compaction.
	a.say("one more file, and show me big.txt")
	frames = a.turn()
	assert.Equal(t, []string{"loading_state/true", "local_shell_call", "local_shell_call_output", "local_shell_call", "local_shell_call_output",
		"context_compacted", "message/assistant", "loading_state/false", "agent_finished", "context_info"}, kinds(frames))
	assert.True(t, h.exists("c.txt"))
	cp := frames[5].(agentloopapi.ContextCompactedMessage).Payload
	assert.Greater(t, cp.OldTokenCount, 10000)
	assert.Less(t, cp.NewTokenCount, 5000)
	assert.Greater(t, cp.ReductionPercent, 50.0)
	b.turn()

	a.say("keep going")
	frames = a.turn()
	assert.Equal(t, "Carrying on.", messageText(items(frames)[0]))

	reqs := model.Requests()
	require.Len(t, reqs, 9)
	summaryReq := string(reqs[6].Body)
	assert.Contains(t, summaryReq, "compacting the conversation")
	assert.Contains(t, summaryReq, "make me some files")
	assert.Contains(t, summaryReq, "line 0 of the big file")
	assert.Equal(t, []string{summaryPrefix + summary}, userContents(t, reqs[7]), "the call after the compaction is sent the summary")
	assert.NotContains(t, string(reqs[7].Body), "line 0 of the big file")
	assert.Equal(t, []string{summaryPrefix + summary, "keep going"}, userContents(t, reqs[8]))
}

const summaryPrefix = "Summary of the conversation so far:\n\n"

// userContents are the contents of a Chat Completions request's user
// messages.
func userContents(t *testing.T, r llmtest.Request) []string {
	var out []string
	for _, m := range r.JSON(t)["messages"].([]any) {
		if mm := m.(map[string]any); mm["role"] == "user" {
			out = append(out, mm["content"].(string))
		}
	}
	return out
}
