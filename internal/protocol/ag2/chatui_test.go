package ag2_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
)

// chatUIFrame is a frame as ChatUI reads it: at the top level.
type chatUIFrame struct {
	Type        string  `json:"type"`
	Seq         int     `json:"seq"`
	Success     *bool   `json:"success"`
	TotalTokens *int    `json:"total_tokens"`
	Reason      string  `json:"reason"`
	Message     string  `json:"message"`
	Content     string  `json:"content"`
	RequestID   string  `json:"request_id"`
	Cost        float64 `json:"cost"`
}

func flat(t testing.TB, g got) chatUIFrame {
	t.Helper()
	var f chatUIFrame
	require.NoError(t, json.Unmarshal(g.raw, &f))
	return f
}

// TestChatUIReadsFieldsAtTheTopLevel: what ChatUI showed wrong when the
// fields were only under data ("tokens=undefined", "Tool Failed",
// "Unknown error", no seq to resume from).
func TestChatUIReadsFieldsAtTheTopLevel(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("echo top level")
	frames := c.turn()
	for _, g := range frames {
		f := flat(t, g)
		assert.Equal(t, g.seq, f.Seq, "top-level seq: %s", g.raw)
		assert.Positive(t, f.Seq, "every frame of a run has a seq ChatUI can resume from: %s", g.raw)
	}
	u := flat(t, ofType(frames, ag2api.TypeChatUsageSummary)[0])
	require.NotNil(t, u.TotalTokens)
	assert.Equal(t, 1500, *u.TotalTokens)
	assert.Positive(t, u.Cost)
	assert.Equal(t, "completed", flat(t, frames[len(frames)-1]).Reason)

	c.say("failing tool please")
	frames = c.turn()
	if resp := ofType(frames, ag2api.TypeChatToolResponse); assert.NotEmpty(t, resp) {
		f := flat(t, resp[0])
		require.NotNil(t, f.Success)
		assert.False(t, *f.Success)
	}
}

// TestChatUIErrorMessageAtTheTopLevel: chat.error's message is where
// ChatUI reads it.
func TestChatUIErrorMessageAtTheTopLevel(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.answer("input_never_asked", "x")
	frames := c.until(ag2api.TypeChatError)
	f := flat(t, frames[len(frames)-1])
	assert.Contains(t, f.Message, "input_never_asked")
}

// TestInputRequestIDAlias answers with ChatUI's field name.
func TestInputRequestIDAlias(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("ask me something")
	frames := c.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	c.sendRaw(`{"type":"user.input.submit","input_request_id":"` + req.RequestID + `","text":"Ada"}`)
	texts := ofType(c.turn(), ag2api.TypeChatText)
	require.NotEmpty(t, texts)
	assert.Equal(t, "Hello, Ada!", texts[len(texts)-1].str("content"))

	c.sendRaw(`{"type":"user.input.submit","request_id":"a","input_request_id":"b","text":"x"}`)
	e := c.expectError()
	assert.Equal(t, "SCHEMA_VALIDATION_FAILED", errCode(e))
	assert.Equal(t, "input_request_id", details(t, e)["field"])
}

// TestBareTextAnswersThePendingRequest: text without a request id while a
// question and then an approval are pending answers them, as ChatUI sends
// every turn; the question was also shown as a message.
func TestBareTextAnswersThePendingRequest(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("ask me something")
	frames := c.until(ag2api.TypeChatInputRequest)
	require.GreaterOrEqual(t, len(frames), 2)
	assert.Equal(t, "What's your name?", frames[len(frames)-2].str("content"), "the question as a chat.text: %v", types(frames))
	c.say("Ada")
	frames = c.turn()
	require.Len(t, ofType(frames, ag2api.TypeChatInputAck), 1, "the text answered the question: %v", types(frames))
	texts := ofType(frames, ag2api.TypeChatText)
	assert.Equal(t, "Hello, Ada!", texts[len(texts)-1].str("content"))

	c.say("make a file")
	frames = c.until(ag2api.TypeChatInputRequest)
	assert.Contains(t, frames[len(frames)-2].str("content"), "touch made.txt", "the approval's prompt as a chat.text")
	c.say("y")
	frames = c.turn()
	resp := ofType(frames, ag2api.TypeChatToolResponse)
	require.Len(t, resp, 1)
	assert.True(t, *flat(t, resp[0]).Success, "the typed y approved the command")
}

// TestTextTurnsOption: with --ag2-text-turns, text without a request id is
// a new turn even while a question is pending.
func TestTextTurnsOption(t *testing.T) {
	h := start(t, testConfig(t, "--ag2-text-turns"))
	c := h.dial("")
	c.say("ask me something")
	frames := c.until(ag2api.TypeChatInputRequest)
	req := frames[len(frames)-1].msg.(ag2api.InputRequest).Data
	c.say("echo queued")
	// The question is still pending: answering it now works, and the run
	// it belongs to ends before the queued turn's.
	c.answer(req.RequestID, "Ada")
	frames = c.turn()
	texts := ofType(frames, ag2api.TypeChatText)
	require.NotEmpty(t, texts)
	assert.Equal(t, "Hello, Ada!", texts[len(texts)-1].str("content"))
	texts = ofType(c.turn(), ag2api.TypeChatText)
	require.NotEmpty(t, texts)
	assert.Equal(t, "You said: echo queued", texts[len(texts)-1].str("content"))
}

// TestUIToolResponseOverTheSocket answers a component rendered from its
// ui_tool_event the way ChatUI's WebSocket path does.
func TestUIToolResponseOverTheSocket(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("show form")
	frames := c.until(ag2api.TypeUIToolEvent)
	ev := frames[len(frames)-1].msg.(ag2api.UIToolEvent).Data
	call := frames[len(frames)-2].msg.(ag2api.ToolCall).Data
	assert.Equal(t, call.Seq, ev.Seq)
	require.NotNil(t, call.IsUITool)
	assert.True(t, *call.IsUITool)
	c.sendRaw(`{"type":"ui_tool_response","ui_tool_id":"AgentAPIKeyInput","eventId":"` + ev.EventID + `","workflow_name":"default","payload":{},"response":{"key":"sk-2"}}`)
	resp := ofType(c.turn(), ag2api.TypeChatToolResponse)
	require.Len(t, resp, 1)
	assert.JSONEq(t, `{"key":"sk-2"}`, resp[0].str("content"))
	c.sendRaw(`{"type":"ui_tool_response","eventId":"` + ev.EventID + `","response":{}}`)
	assert.Equal(t, "UNKNOWN_REQUEST", errCode(c.expectError()))
}

// TestChatUIResumeAfterReload follows ChatUI's seq bookkeeping: it keeps
// the highest top-level seq, sends it in client.resume after a reload
// with an empty screen, takes every frame until chat.resume_boundary,
// and otherwise treats a seq below the last but one as a gap (and drops
// the frame). The reload shows the whole conversation, what another
// client said meanwhile included.
func TestChatUIResumeAfterReload(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	last, resuming := 0, false
	track := func(frames []got) {
		for _, g := range frames {
			f := flat(t, g)
			if g.typ == ag2api.TypeChatResumeBoundary {
				resuming = false
			}
			if f.Seq == 0 {
				continue
			}
			require.False(t, f.Seq < last-1 && !resuming, "ChatUI would see a gap at %s (last %d)", g.raw, last)
			last = max(last, f.Seq)
		}
	}
	c.say("echo one")
	track(c.turn())
	seen := last
	c.close()

	// Another client goes on meanwhile.
	other := h.dial(c.chat)
	other.say("echo two")
	other.turn()

	// The reload: ChatUI resumes from the seq it stored.
	r := h.dial(c.chat)
	r.resume(seen)
	resuming = true
	frames := r.until(ag2api.TypeChatResumeBoundary)
	track(frames)
	assert.Equal(t, []string{"user: echo one", "assistant: You said: echo one", "user: echo two", "assistant: You said: echo two"},
		contents(frames))
	for _, g := range frames[:len(frames)-1] {
		assert.True(t, g.replay)
	}
	r.say("echo three")
	track(r.turn())
	assert.Greater(t, last, seen, strconv.Itoa(last))
}
