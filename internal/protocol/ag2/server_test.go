package ag2_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
)

func TestTurnStreamsPrintTextUsageAndRunComplete(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("echo hello there")
	frames := c.turn()
	checkSeqs(t, frames)
	prints := ofType(frames, ag2api.TypeChatPrint)
	require.NotEmpty(t, prints, "the reply streams: %v", types(frames))
	var streamed strings.Builder
	for _, p := range prints {
		d := p.msg.(ag2api.Print).Data
		assert.Equal(t, "assistant", d.Agent)
		assert.Equal(t, c.chat, d.ChatID)
		require.NotNil(t, d.Corr, "a chunk names its message")
		streamed.WriteString(d.Content)
	}
	texts := ofType(frames, ag2api.TypeChatText)
	require.Len(t, texts, 1, "the user's own message is not echoed to the socket that sent it: %v", types(frames))
	text := texts[0].msg.(ag2api.Text).Data
	assert.Equal(t, "You said: echo hello there", text.Content)
	assert.Equal(t, text.Content, streamed.String(), "the chunks add up to the text")
	assert.Equal(t, "assistant", text.Agent)

	usage := ofType(frames, ag2api.TypeChatUsageSummary)
	require.Len(t, usage, 1)
	u := usage[0].msg.(ag2api.UsageSummary).Data
	assert.Equal(t, 1000, u.PromptTokens)
	assert.Equal(t, 500, u.CompletionTokens)
	assert.Equal(t, 1500, u.TotalTokens)
	require.NotNil(t, u.Cost, "the scripted model has a price in the built-in table")
	assert.InDelta(t, 1000*1.0/1e6+500*2.0/1e6, *u.Cost, 1e-9)

	end := frames[len(frames)-1].msg.(ag2api.RunComplete).Data
	assert.Equal(t, "completed", end.Reason)
	for _, f := range frames {
		assert.False(t, f.replay, "live frames are not marked replay")
	}
}

func TestPricesFileOverridesAndUnknownModelHasNoCost(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.yaml")
	require.NoError(t, os.WriteFile(file, []byte("models:\n  gpt-4o: {prompt: 1, completion: 1}\n"), 0o644))
	h := start(t, testConfig(t, "--prices", file))
	c := h.dial("")
	c.say("echo cost")
	usage := ofType(c.turn(), ag2api.TypeChatUsageSummary)
	require.Len(t, usage, 1)
	assert.Nil(t, usage[0].msg.(ag2api.UsageSummary).Data.Cost, "a model the table does not price has no cost")
	assert.NotContains(t, string(usage[0].raw), `"cost"`)
}

func TestInputRequestIsAnsweredAndAcknowledged(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("ask me something")
	frames := c.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	assert.Equal(t, "What's your name?", req.Prompt)
	assert.Equal(t, req.RequestID, req.Corr, "corr is the request_id")
	require.NotNil(t, req.Password)
	assert.False(t, *req.Password)
	require.NotNil(t, req.TimeoutSeconds, "--input-timeout bounds the wait")
	assert.Equal(t, 600, *req.TimeoutSeconds)

	c.answer(req.RequestID, "Ada")
	frames = c.turn()
	checkSeqs(t, frames)
	acks := ofType(frames, ag2api.TypeChatInputAck)
	require.Len(t, acks, 1)
	ack := acks[0].msg.(ag2api.InputAck).Data
	assert.Equal(t, req.RequestID, ack.RequestID)
	assert.Equal(t, req.RequestID, ack.Corr)
	texts := ofType(frames, ag2api.TypeChatText)
	require.NotEmpty(t, texts)
	assert.Equal(t, "Hello, Ada!", texts[len(texts)-1].msg.(ag2api.Text).Data.Content)

	// Answered already.
	c.answer(req.RequestID, "Bob")
	e := c.expectError()
	assert.Equal(t, "UNKNOWN_REQUEST", errCode(e))
	c.answer("input_never_asked", "x")
	assert.Equal(t, "UNKNOWN_REQUEST", errCode(c.expectError()))
}

func TestSecretInputRequestIsMarkedPassword(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("api key please")
	frames := c.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	require.NotNil(t, req.Password)
	assert.True(t, *req.Password)
	c.answer(req.RequestID, "sk-123")
	texts := ofType(c.turn(), ag2api.TypeChatText)
	assert.Equal(t, "Key received.", texts[len(texts)-1].msg.(ag2api.Text).Data.Content)
}

func TestInputTimeoutThenLateAnswerIsUnknown(t *testing.T) {
	h := start(t, testConfig(t, "--input-timeout", "1s"))
	c := h.dial("")
	c.say("ask me please")
	frames := c.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	frames = c.until(ag2api.TypeChatInputTimeout)
	to := frames[len(frames)-1].msg.(ag2api.InputTimeout).Data
	assert.Equal(t, req.RequestID, to.RequestID)
	assert.Equal(t, req.RequestID, to.Corr)
	assert.Equal(t, 1, to.TimeoutSeconds)
	// The run goes on: the tool got a timeout result.
	frames = c.turn()
	texts := ofType(frames, ag2api.TypeChatText)
	require.NotEmpty(t, texts)
	assert.Contains(t, texts[len(texts)-1].msg.(ag2api.Text).Data.Content, "No answer")
	assert.Equal(t, "completed", frames[len(frames)-1].msg.(ag2api.RunComplete).Data.Reason)

	c.answer(req.RequestID, "too late")
	assert.Equal(t, "UNKNOWN_REQUEST", errCode(c.expectError()))
}

func TestApprovalThroughInputRequest(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("make a file")
	frames := c.until(ag2api.TypeChatInputRequest)
	calls := ofType(frames, ag2api.TypeChatToolCall)
	require.Len(t, calls, 1)
	call := calls[0].msg.(ag2api.ToolCall).Data
	assert.Equal(t, "bash", call.ToolName)
	assert.False(t, call.AwaitingResponse)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	assert.Contains(t, req.Prompt, "touch made.txt && echo done", "the prompt shows what will run")
	assert.Contains(t, req.Prompt, "approve")
	assert.Contains(t, req.Prompt, "deny and stop")
	assert.Equal(t, call.Corr, req.RequestID, "the request is the tool call's")

	// Not an answer: the request stays pending.
	c.answer(req.RequestID, "maybe later")
	e := c.expectError()
	assert.Equal(t, "SCHEMA_VALIDATION_FAILED", errCode(e))
	assert.Contains(t, e.Message, "still pending")
	require.NotNil(t, e.Recoverable)
	assert.True(t, *e.Recoverable)

	c.answer(req.RequestID, "  YES ")
	frames = c.turn()
	checkSeqs(t, frames)
	require.Len(t, ofType(frames, ag2api.TypeChatInputAck), 1)
	resp := ofType(frames, ag2api.TypeChatToolResponse)
	require.Len(t, resp, 1)
	r := resp[0].msg.(ag2api.ToolResponse).Data
	assert.True(t, r.Success)
	assert.Equal(t, call.Corr, r.Corr)
	assert.Contains(t, r.Content, "done")
	_, err := os.Stat(filepath.Join(h.cfg.Workdir, "made.txt"))
	assert.NoError(t, err, "the approved command ran")
}

func TestApprovalDeniedAndStopped(t *testing.T) {
	for _, tc := range []struct{ answer, reason string }{{"n", "completed"}, {"Deny and STOP", "terminated"}} {
		t.Run(tc.answer, func(t *testing.T) {
			h := start(t, testConfig(t))
			c := h.dial("")
			c.say("make a file")
			frames := c.until(ag2api.TypeChatInputRequest)
			req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
			c.answer(req.RequestID, tc.answer)
			frames = c.turn()
			resp := ofType(frames, ag2api.TypeChatToolResponse)
			require.Len(t, resp, 1)
			assert.False(t, resp[0].msg.(ag2api.ToolResponse).Data.Success)
			assert.Equal(t, tc.reason, frames[len(frames)-1].msg.(ag2api.RunComplete).Data.Reason)
			_, err := os.Stat(filepath.Join(h.cfg.Workdir, "made.txt"))
			assert.True(t, os.IsNotExist(err), "a denied command does not run")
		})
	}
}

func TestUIToolAnsweredInline(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("show form")
	frames := c.until(ag2api.TypeChatToolCall)
	call := frames[len(frames)-1].msg.(ag2api.ToolCall).Data
	assert.True(t, call.AwaitingResponse)
	assert.Equal(t, "AgentAPIKeyInput", call.ComponentType)
	assert.Equal(t, "ui", call.ToolName)
	require.NotNil(t, call.Display)
	assert.Equal(t, "inline", *call.Display)
	assert.JSONEq(t, `{"service":"openai","description":"I need your API key"}`, string(call.Payload))

	c.send(ag2api.InlineComponentResult{Type: ag2api.TypeInlineComponentResult, Corr: call.Corr, Data: json.RawMessage(`{"key":"sk-1"}`)})
	frames = c.turn()
	resp := ofType(frames, ag2api.TypeChatToolResponse)
	require.Len(t, resp, 1)
	r := resp[0].msg.(ag2api.ToolResponse).Data
	assert.Equal(t, call.Corr, r.Corr, "the response carries the UI tool's corr")
	assert.True(t, r.Success)
	assert.JSONEq(t, `{"key":"sk-1"}`, r.Content, "the component's data is the tool's result")
	texts := ofType(frames, ag2api.TypeChatText)
	assert.Equal(t, `Got {"key":"sk-1"}`, texts[len(texts)-1].msg.(ag2api.Text).Data.Content)

	c.send(ag2api.InlineComponentResult{Type: ag2api.TypeInlineComponentResult, Corr: call.Corr, Data: json.RawMessage(`1`)})
	assert.Equal(t, "UNKNOWN_REQUEST", errCode(c.expectError()))
}

func TestUIToolTimesOut(t *testing.T) {
	h := start(t, testConfig(t, "--input-timeout", "1s"))
	c := h.dial("")
	c.say("show form")
	frames := c.until(ag2api.TypeChatToolCall)
	call := frames[len(frames)-1].msg.(ag2api.ToolCall).Data
	e := c.expectError()
	assert.Equal(t, "UI_TOOL_TIMEOUT", errCode(e))
	assert.Equal(t, call.Corr, details(t, e)["corr"])
	frames = c.turn()
	resp := ofType(frames, ag2api.TypeChatToolResponse)
	require.Len(t, resp, 1)
	assert.False(t, resp[0].msg.(ag2api.ToolResponse).Data.Success)
	assert.Equal(t, "completed", frames[len(frames)-1].msg.(ag2api.RunComplete).Data.Reason)
}

func TestArtifactPatchIsAppliedPersistedAndReplayed(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("show artifact")
	frames := c.until(ag2api.TypeChatToolCall)
	call := frames[len(frames)-1].msg.(ag2api.ToolCall).Data
	require.NotNil(t, call.Display)
	assert.Equal(t, "artifact", *call.Display)

	patch := []json.RawMessage{
		json.RawMessage(`{"op":"add","path":"/files/-","value":{"name":"b.txt"}}`),
		json.RawMessage(`{"op":"replace","path":"/title","value":"Your files"}`),
	}
	c.send(ag2api.ArtifactPatch{Type: ag2api.TypeArtifactPatch, Corr: call.Corr, Patch: patch})
	frames = c.until(ag2api.TypeChatToolCall)
	patched := frames[len(frames)-1]
	pd := patched.msg.(ag2api.ToolCall).Data
	assert.Equal(t, call.Corr, pd.Corr)
	assert.True(t, pd.AwaitingResponse, "the artifact still waits for its answer")
	assert.JSONEq(t, `{"title":"Your files","files":[{"name":"a.txt"},{"name":"b.txt"}]}`, string(pd.Payload))

	// A patch that does not apply changes nothing.
	bad := []json.RawMessage{
		json.RawMessage(`{"op":"replace","path":"/title","value":"X"}`),
		json.RawMessage(`{"op":"remove","path":"/nothing/here"}`),
	}
	c.send(ag2api.ArtifactPatch{Type: ag2api.TypeArtifactPatch, Corr: call.Corr, Patch: bad})
	e := c.expectError()
	assert.Equal(t, "SCHEMA_VALIDATION_FAILED", errCode(e))
	d := details(t, e)
	assert.Equal(t, "/patch/1", d["field"])
	assert.Equal(t, map[string]any{"op": "remove", "path": "/nothing/here"}, d["op"])
	c.send(ag2api.ArtifactPatch{Type: ag2api.TypeArtifactPatch, Corr: "ui_unknown", Patch: patch[:1]})
	assert.Equal(t, "UNKNOWN_REQUEST", errCode(c.expectError()))

	c.send(ag2api.InlineComponentResult{Type: ag2api.TypeInlineComponentResult, Corr: call.Corr, Data: json.RawMessage(`"closed"`)})
	c.turn()

	// A new socket resumes: the artifact comes back patched.
	c2 := h.dial(c.chat)
	c2.resume(0)
	replayed := c2.until(ag2api.TypeChatResumeBoundary)
	var last ag2api.ToolCallData
	for _, f := range ofType(replayed, ag2api.TypeChatToolCall) {
		if d := f.msg.(ag2api.ToolCall).Data; d.Corr == call.Corr {
			last = d
		}
	}
	assert.JSONEq(t, `{"title":"Your files","files":[{"name":"a.txt"},{"name":"b.txt"}]}`, string(last.Payload))
}

func TestToolProgressFromShellOutput(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("show progress")
	frames := c.turn()
	progress := ofType(frames, ag2api.TypeChatToolProgress)
	require.NotEmpty(t, progress, "%v", types(frames))
	var pcts []float64
	var statuses []string
	for _, p := range progress {
		d := p.msg.(ag2api.ToolProgress).Data
		assert.Equal(t, "bash", d.ToolName)
		pcts = append(pcts, d.ProgressPercent)
		statuses = append(statuses, d.StatusMessage)
	}
	assert.Equal(t, 100.0, pcts[len(pcts)-1], "250%% is clamped to 100")
	assert.Equal(t, "step two 250%", statuses[len(statuses)-1], "the status is the output's last line")
}

func TestFailingToolIsAToolExecutionError(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("failing tool")
	frames := c.turn()
	errs := ofType(frames, ag2api.TypeChatError)
	require.Len(t, errs, 1, "%v", types(frames))
	assert.Equal(t, "TOOL_EXECUTION_ERROR", errCode(errs[0].msg.(ag2api.ChatError).Data))
	resp := ofType(frames, ag2api.TypeChatToolResponse)
	require.Len(t, resp, 1)
	assert.False(t, resp[0].msg.(ag2api.ToolResponse).Data.Success)
}

func TestFailedRunIsAnErrorThenRunCompleteError(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("fail now")
	frames := c.turn()
	require.GreaterOrEqual(t, len(frames), 2)
	e := frames[len(frames)-2]
	require.Equal(t, ag2api.TypeChatError, e.typ, "%v", types(frames))
	assert.Contains(t, e.msg.(ag2api.ChatError).Data.Message, "upstream unavailable")
	assert.Equal(t, "TRANSPORT_ERROR", errCode(e.msg.(ag2api.ChatError).Data), "a model failure")
	assert.Zero(t, e.seq, "the error comes with chat.run_complete, which has the event's seq")
	assert.Equal(t, "error", frames[len(frames)-1].msg.(ag2api.RunComplete).Data.Reason)
}

func TestMalformedFramesKeepTheSocketOpen(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	for _, tc := range []struct{ frame, field string }{
		{`{"type":"user.input.submit"`, "(frame)"},
		{`{"type":"no.such.type"}`, "type"},
		{`{"type":"user.input.submit","text":5}`, "text"},
		{`{"type":"inline_component.result","data":{}}`, ""},
		{`{"type":"user.input.submit","text":"   "}`, "text"},
		{`{"type":"user.input.submit","text":"hi","chat_id":"another-chat"}`, "chat_id"},
	} {
		c.sendRaw(tc.frame)
		e := c.expectError()
		assert.Equal(t, "SCHEMA_VALIDATION_FAILED", errCode(e), tc.frame)
		require.NotNil(t, e.Recoverable)
		assert.True(t, *e.Recoverable)
		d := details(t, e)
		require.NotNil(t, d["field"], "details name the field: %s", tc.frame)
		if tc.field != "" {
			assert.Equal(t, tc.field, d["field"], tc.frame)
		}
	}
	c.say("echo still here")
	texts := ofType(c.turn(), ag2api.TypeChatText)
	assert.Equal(t, "You said: echo still here", texts[0].msg.(ag2api.Text).Data.Content)
}

func TestUnknownWorkflowIsAnErrorThenClose(t *testing.T) {
	h := start(t, testConfig(t))
	c := dialURL(t, h.url("no-such-workflow", "e1", "chat-1", "u1"))
	frames := c.expectClosed(websocket.StatusPolicyViolation)
	require.Len(t, frames, 1)
	e := frames[0].msg.(ag2api.ChatError).Data
	assert.Equal(t, "WORKFLOW_NOT_FOUND", errCode(e))
	assert.Contains(t, details(t, e)["available"], "dev-team", "the error lists the workflows on offer")
}

func TestChatBelongsToItsEnterpriseAndUser(t *testing.T) {
	h := start(t, testConfig(t))
	owner := h.dialAs("shared-chat", "acme", "alice")
	owner.say("echo mine")
	owner.turn()
	for _, who := range [][2]string{{"other", "alice"}, {"acme", "bob"}} {
		// Refused at once (a client write could then fail: it sends nothing).
		c := h.dialAs("shared-chat", who[0], who[1])
		frames := c.expectClosed(websocket.StatusPolicyViolation)
		assert.Empty(t, frames, "nothing of the chat is sent to %v", who)
	}
	// The owner may come back.
	again := h.dialAs("shared-chat", "acme", "alice")
	again.resume(0)
	replayed := again.until(ag2api.TypeChatResumeBoundary)
	assert.NotEmpty(t, ofType(replayed, ag2api.TypeChatText))
}

func TestRateLimitDropsTheMessageAndKeepsTheSocket(t *testing.T) {
	h := start(t, testConfig(t, "--ag2-rate", "0.001", "--ag2-burst", "2"))
	c := h.dial("")
	c.resume(0)
	c.until(ag2api.TypeChatResumeBoundary)
	c.resume(0)
	c.until(ag2api.TypeChatResumeBoundary)
	c.say("echo dropped")
	e := c.expectError()
	assert.Equal(t, "RATE_LIMIT_EXCEEDED", errCode(e))
	require.NotNil(t, e.Recoverable)
	assert.True(t, *e.Recoverable)
	// The user's bucket is shared by the user's other sockets.
	c2 := h.dial("")
	c2.say("echo also dropped")
	assert.Equal(t, "RATE_LIMIT_EXCEEDED", errCode(c2.expectError()))
}

func TestLegacyTypesAreDuplicated(t *testing.T) {
	h := start(t, testConfig(t, "--ag2-legacy-types"))
	c := h.dial("")
	c.say("echo legacy")
	var seen []string
	for {
		ctx, cancel := contextTimeout()
		_, b, err := c.ws.Read(ctx)
		cancel()
		require.NoError(t, err)
		var env struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal(b, &env))
		seen = append(seen, env.Type)
		if env.Type == "run_complete" {
			break
		}
	}
	assert.Contains(t, seen, "chat.text")
	assert.Contains(t, seen, "text")
	assert.Contains(t, seen, "chat.run_complete")
	assert.Less(t, indexOf(seen, "chat.text"), indexOf(seen, "text"), "each legacy duplicate follows its chat.* frame")
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// A run the server cancels as it shuts down ends with run_complete
// "cancelled": the socket is closed going away at once, and a client that
// resumes after the restart gets the rest of the run and its end.
func TestShutdownCancelsTheRunAndResumeShowsIt(t *testing.T) {
	cfg := testConfig(t, "--shutdown-grace", "0s")
	h := startNoLeakCheck(t, cfg)
	c := h.dial("")
	c.say("a story to cut short")
	first := c.until(ag2api.TypeChatPrint)
	done := make(chan error, 1)
	go func() { done <- h.srv.Shutdown(context.Background()) }()
	first = append(first, c.expectClosed(websocket.StatusGoingAway)...)
	require.NoError(t, <-done)

	h2 := startNoLeakCheck(t, cfg)
	c2 := h2.dial(c.chat)
	c2.resumeKeeping(first[len(first)-1].seq)
	rest := c2.until(ag2api.TypeChatResumeBoundary)
	all := append(first, rest[:len(rest)-1]...)
	checkSeqs(t, all)
	ends := ofType(all, ag2api.TypeChatRunComplete)
	require.Len(t, ends, 1, "%v", types(all))
	assert.Equal(t, "cancelled", ends[0].msg.(ag2api.RunComplete).Data.Reason)
}
