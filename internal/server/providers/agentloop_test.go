package providers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
	"github.com/agentwire/agentwire/internal/server/servertest"
)

// completionChunk is one Chat Completions stream chunk.
func completionChunk(delta map[string]any, finish any) string {
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
	ev := []string{completionChunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	for _, w := range strings.SplitAfter(text, " ") {
		ev = append(ev, completionChunk(map[string]any{"content": w}, nil))
	}
	return llmtest.Reply{Events: append(ev, completionChunk(map[string]any{}, "stop"), usageChunk(prompt, completion), "data: [DONE]\n\n")}
}

// callReply streams one tool call, its arguments in pieces of size
// piece, then usage.
func callReply(id, name string, args map[string]any, piece, prompt, completion int) llmtest.Reply {
	b, _ := json.Marshal(args)
	ev := []string{completionChunk(map[string]any{"role": "assistant", "content": nil}, nil),
		completionChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": name, "arguments": ""}}}}, nil)}
	for s := string(b); s != ""; {
		n := min(len(s), piece)
		ev = append(ev, completionChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": s[:n]}}}}, nil))
		s = s[n:]
	}
	return llmtest.Reply{Events: append(ev, completionChunk(map[string]any{}, "tool_calls"), usageChunk(prompt, completion), "data: [DONE]\n\n")}
}

// openAIConfig is a server's configuration with an OpenAI-compatible
// model at upstream (as OPENAI_BASE_URL sets it), on fresh folders or
// the working folder work.
func openAIConfig(t *testing.T, upstream, work string, args ...string) config.Config {
	t.Helper()
	if work == "" {
		work = t.TempDir()
	}
	env := map[string]string{"OPENAI_BASE_URL": upstream + "/v1"}
	cfg, err := config.Parse(append([]string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workdir", work,
		"--model", "gpt-4o-mini"}, args...), func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "openai", cfg.Provider())
	return cfg
}

// A coding session over AgentLoop against an OpenAI-compatible model: a
// command asks, a second tab has it explained and approves it for good,
// the first denies a patch, the approved program then runs without
// asking, and when a large command output fills the context the
// conversation is compacted before the next call, which is sent the
// summary instead.
func TestAgentLoopCodingSessionAgainstOpenAI(t *testing.T) {
	const patch = "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch"
	const summary = "## Goals\nMake files.\n## Decisions\nNo patch.\n## Files touched\na.txt, c.txt, big.txt\n## Open tasks\nNone."
	model := llmtest.NewServer(t,
		callReply("call_1", "bash", map[string]any{"command": "touch a.txt"}, 7, 1200, 30),
		textReply("It creates an empty file named a.txt.", 800, 20),
		callReply("call_2", "apply_patch", map[string]any{"patch": patch}, 7, 1300, 30),
		textReply("OK, skipping the patch.", 1400, 20),
		callReply("call_3", "bash", map[string]any{"command": "touch c.txt"}, 7, 1500, 30),
		callReply("call_4", "bash", map[string]any{"command": "cat big.txt"}, 7, 1600, 30),
		textReply(summary, 3000, 20),
		textReply("Done.", 600, 20),
		textReply("Carrying on.", 700, 20),
	)
	cfg := openAIConfig(t, model.URL, "", "--context-window", "10000")
	srv := start(t, cfg, servertest.Options{})
	work := func(name string) string { return filepath.Join(cfg.Workdir, name) }
	exists := func(name string) bool { _, err := os.Stat(work(name)); return err == nil }
	var big strings.Builder
	for i := range 800 {
		fmt.Fprintf(&big, "line %d of the big file, with a few more words\n", i)
	}
	require.NoError(t, os.WriteFile(work("big.txt"), []byte(big.String()), 0o644))
	a := dialAgentLoop(t, srv, "")
	b := dialAgentLoop(t, srv, a.thread)

	a.say("make me some files")
	assert.Equal(t, []string{"touch", "a.txt"}, b.expectApproval().Command)
	a.expectApproval()
	b.review("explain")
	got := b.until(agentloopapi.TypeApprovalRequest)
	assert.Equal(t, "It creates an empty file named a.txt.", messageText(items(got)[0]))
	b.review("always")

	a.expectApproval()        // asked again after the explanation
	req := a.expectApproval() // the patch, once a.txt is made
	assert.Equal(t, []string{"apply_patch", patch}, req.Command)
	assert.True(t, exists("a.txt"))
	deny := reviewMsg("no-continue")
	why := "not now"
	deny.Payload.CustomDenyMessage = &why
	a.send(deny)
	frames := a.turn()
	assert.Equal(t, "OK, skipping the patch.", messageText(items(frames)[len(items(frames))-1]))
	assert.False(t, exists("b.txt"))
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
	assert.True(t, exists("c.txt"))
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

// agentLoopClient is an AgentLoop client: it checks every frame it sends
// and receives against the document.
type agentLoopClient struct {
	socket
	thread string // from the first frame
}

// dialAgentLoop connects to the thread (a new one when thread is "") and
// reads the first frame, which names the thread.
func dialAgentLoop(t *testing.T, srv *servertest.Server, thread string) *agentLoopClient {
	t.Helper()
	u := "ws://" + srv.Addr("main") + "/agentloop"
	if thread != "" {
		u += "?thread_id=" + url.QueryEscape(thread)
	}
	c := &agentLoopClient{socket: dial(t, u)}
	first, ok := c.next().(agentloopapi.ContextInfoMessage)
	require.True(t, ok, "the first frame is a context_info")
	require.NotNil(t, first.Payload.ThreadID, "the first context_info names the thread")
	c.thread = *first.Payload.ThreadID
	return c
}

func (c *agentLoopClient) send(m agentloopapi.Message) {
	c.t.Helper()
	b, err := agentloopapi.Encode(m)
	require.NoError(c.t, err)
	c.write(b, agentloopapi.ValidateInbound)
}

func (c *agentLoopClient) say(text string) {
	c.t.Helper()
	c.send(agentloopapi.UserInputMessage{ID: uuid.NewString(), Type: agentloopapi.TypeUserInput,
		Payload: agentloopapi.UserInputMessagePayload{Input: []agentloopapi.ResponseInputItem{{
			Type: new("message"), Role: new("user"), Content: inputText(text),
		}}}})
}

func (c *agentLoopClient) review(review string) {
	c.t.Helper()
	c.send(reviewMsg(review))
}

func reviewMsg(review string) agentloopapi.ApprovalResponseMessage {
	return agentloopapi.ApprovalResponseMessage{ID: uuid.NewString(), Type: agentloopapi.TypeApprovalResponse,
		Payload: agentloopapi.ApprovalResponseMessagePayload{Review: review}}
}

// next reads and decodes the next frame.
func (c *agentLoopClient) next() agentloopapi.Outbound {
	c.t.Helper()
	b, err := c.read()
	require.NoError(c.t, err)
	m, err := agentloopapi.DecodeOutbound(b)
	require.NoError(c.t, err, "DecodeOutbound(%s)", b)
	return m
}

// until reads frames up to and including the first of type typ, and
// returns every frame read.
func (c *agentLoopClient) until(typ string) []agentloopapi.Outbound {
	c.t.Helper()
	var got []agentloopapi.Outbound
	for {
		m := c.next()
		got = append(got, m)
		if m.MessageType() == typ {
			return got
		}
	}
}

// turn reads the frames of one turn, through agent_finished and the
// context_info after it.
func (c *agentLoopClient) turn() []agentloopapi.Outbound {
	c.t.Helper()
	got := c.until(agentloopapi.TypeAgentFinished)
	info, ok := c.next().(agentloopapi.ContextInfoMessage)
	require.True(c.t, ok, "agent_finished is followed by context_info")
	return append(got, info)
}

// expectApproval reads frames up to the next approval_request.
func (c *agentLoopClient) expectApproval() agentloopapi.ApprovalRequestMessagePayload {
	c.t.Helper()
	got := c.until(agentloopapi.TypeApprovalRequest)
	return got[len(got)-1].(agentloopapi.ApprovalRequestMessage).Payload
}

// items returns the response items among frames.
func items(frames []agentloopapi.Outbound) []agentloopapi.ResponseItemValue {
	var out []agentloopapi.ResponseItemValue
	for _, f := range frames {
		if r, ok := f.(agentloopapi.ResponseItemMessage); ok {
			out = append(out, r.Payload.Value)
		}
	}
	return out
}

// kinds names frames for comparing sequences: the frame type, with the
// item type and role, or the loading state.
func kinds(frames []agentloopapi.Outbound) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = f.MessageType()
		switch m := f.(type) {
		case agentloopapi.ResponseItemMessage:
			switch v := m.Payload.Value.(type) {
			case agentloopapi.MessageItem:
				out[i] = "message/" + v.Role
			case agentloopapi.LocalShellCallItem:
				out[i] = "local_shell_call"
			case agentloopapi.LocalShellCallOutputItem:
				out[i] = "local_shell_call_output"
			}
		case agentloopapi.LoadingStateMessage:
			out[i] = fmt.Sprintf("loading_state/%v", m.Payload.Loading)
		}
	}
	return out
}

// messageText is a message item's text.
func messageText(v agentloopapi.ResponseItemValue) string {
	m, ok := v.(agentloopapi.MessageItem)
	if !ok {
		return ""
	}
	var b strings.Builder
	for _, p := range m.Content {
		b.WriteString(p.Text)
	}
	return b.String()
}

// inputText is a message item's content: one input_text part.
func inputText(text string) json.RawMessage {
	b, _ := json.Marshal([]map[string]string{{"type": "input_text", "text": text}})
	return b
}
