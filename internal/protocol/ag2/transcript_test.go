package ag2_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
)

// What a ChatUI page shows again after a reload: it keeps the highest seq
// in localStorage, starts with an empty screen, opens a new socket and
// sends client.resume with that seq first.

// highest is the highest seq of frames, as ChatUI keeps it.
func highest(frames []got) int {
	n := 0
	for _, f := range frames {
		n = max(n, f.seq)
	}
	return n
}

// reload opens a new socket on chat and resumes from last, the way ChatUI
// does on a page reload; it returns the replay and the boundary.
func reload(h *harness, chat string, last int) (*client, []got, ag2api.ResumeBoundaryData) {
	h.t.Helper()
	r := h.dial(chat)
	r.resume(last)
	frames := r.until(ag2api.TypeChatResumeBoundary)
	b := frames[len(frames)-1].msg.(ag2api.ResumeBoundary).Data
	return r, frames[:len(frames)-1], b
}

// contents is the agent and content of every chat.text of frames.
func contents(frames []got) []string {
	var out []string
	for _, f := range ofType(frames, ag2api.TypeChatText) {
		d := f.msg.(ag2api.Text).Data
		out = append(out, d.Agent+": "+d.Content)
	}
	return out
}

// withoutHeld is what a client that kept what it showed keeps of a
// replay from last: the frames whose seq is above last.
func withoutHeld(frames []got, last int) []got {
	var out []got
	for _, f := range frames {
		if !f.replay || f.seq > last {
			out = append(out, f)
		}
	}
	return out
}

func TestReloadReplaysTheTranscript(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("echo one")
	first := c.turn()
	c.say("echo two")
	last := highest(append(first, c.turn()...))
	c.close()

	r, replayed, b := reload(h, c.chat, last)
	checkSeqs(t, replayed)
	for _, f := range replayed {
		assert.True(t, f.replay, "marked as replayed: %s", f.raw)
		assert.LessOrEqual(t, f.seq, last)
	}
	assert.Equal(t, []string{"user: echo one", "assistant: You said: echo one", "user: echo two", "assistant: You said: echo two"},
		contents(replayed), "the conversation, the user's turns as ChatUI shows its own")
	require.Len(t, ofType(replayed, ag2api.TypeChatRunComplete), 2)
	assert.Equal(t, last, *b.LastMessageIndex)
	assert.Equal(t, len(ofSeq(replayed)), *b.ReplayedMessages)
	assert.Equal(t, *b.TotalMessages, *b.ReplayedMessages)

	// Live after the boundary, after the seq the page keeps.
	r.say("echo three")
	live := r.turn()
	assert.Greater(t, live[0].seq, last)
	assert.Equal(t, []string{"assistant: You said: echo three"}, contents(live))

	// The same page resuming again on the same socket (ChatUI's gap
	// check) gets only what it has not had: nothing.
	r.resume(highest(live))
	f := r.next()
	require.Equal(t, ag2api.TypeChatResumeBoundary, f.typ, "%s", f.raw)
	assert.Zero(t, *f.msg.(ag2api.ResumeBoundary).Data.ReplayedMessages)
}

// TestAfterSeqOption: with --ag2-resume=after-seq the reload gets only the
// frames after the seq, the document's reading: nothing.
func TestAfterSeqOption(t *testing.T) {
	h := start(t, testConfig(t, "--ag2-resume=after-seq"))
	c := h.dial("")
	c.say("echo one")
	last := highest(c.turn())
	c.close()

	r, replayed, b := reload(h, c.chat, last)
	assert.Empty(t, replayed)
	assert.Zero(t, *b.ReplayedMessages)
	assert.Positive(t, *b.TotalMessages)

	// From an earlier seq: what follows it, not the transcript.
	r2, replayed, _ := reload(h, c.chat, 1)
	require.NotEmpty(t, replayed)
	for _, f := range replayed {
		if f.seq > 0 {
			assert.Greater(t, f.seq, 1)
		}
	}
	assert.NotContains(t, contents(replayed), "user: echo one", "the turn was at seq 1")
	r.close()
	r2.close()
}

// TestTranscriptAsksOnlyWhatIsPending: a reload shows an answered
// question with its answer as the user's text and does not ask it again,
// shows the approval's answer, and asks again only the component still
// waiting; once that is answered, a reload asks nothing.
func TestTranscriptAsksOnlyWhatIsPending(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("ask me something")
	frames := c.until(ag2api.TypeChatInputRequest)
	c.say("Ada")
	frames = append(frames, c.turn()...)
	c.say("api key please")
	frames = append(frames, c.until(ag2api.TypeChatInputRequest)...)
	c.say("sk-secret-1")
	frames = append(frames, c.turn()...)
	c.say("make a file")
	frames = append(frames, c.until(ag2api.TypeChatInputRequest)...)
	c.say("y")
	frames = append(frames, c.turn()...)
	c.say("show form")
	frames = append(frames, c.until(ag2api.TypeUIToolEvent)...)
	form := frames[len(frames)-1].msg.(ag2api.UIToolEvent).Data
	last := highest(frames)
	c.close()

	r, replayed, _ := reload(h, c.chat, last)
	checkSeqs(t, replayed)
	texts := contents(replayed)
	assert.Subset(t, texts, []string{"user: ask me something", "assistant: What's your name?", "user: Ada", "assistant: Hello, Ada!",
		"assistant: Your API key?", "assistant: Key received.", "user: approve", "assistant: made.txt exists now.", "user: show form"})
	for _, s := range texts {
		assert.NotContains(t, s, "sk-secret-1", "a secret answer is not shown")
	}
	assert.Empty(t, ofType(replayed, ag2api.TypeChatInputRequest), "no answered question or approval is asked again: %v", types(replayed))
	assert.Len(t, ofType(replayed, ag2api.TypeChatInputAck), 3)
	events := ofType(replayed, ag2api.TypeUIToolEvent)
	require.Len(t, events, 1, "the form still waits: it is shown again")
	assert.Equal(t, form.EventID, events[0].msg.(ag2api.UIToolEvent).Data.EventID)
	calls := ofType(replayed, ag2api.TypeChatToolCall)
	require.NotEmpty(t, calls)
	assert.True(t, calls[len(calls)-1].msg.(ag2api.ToolCall).Data.AwaitingResponse)

	// The reloaded page answers the form it was shown again.
	r.sendRaw(`{"type":"ui_tool_response","eventId":"` + form.EventID + `","response":{"key":"sk-2"}}`)
	done := r.turn()
	r.close()

	_, replayed, _ = reload(h, c.chat, highest(done))
	assert.Empty(t, ofType(replayed, ag2api.TypeUIToolEvent), "the answered form is not shown again: %v", types(replayed))
	assert.Empty(t, ofType(replayed, ag2api.TypeChatInputRequest))
	for _, f := range ofType(replayed, ag2api.TypeChatToolCall) {
		assert.False(t, f.msg.(ag2api.ToolCall).Data.AwaitingResponse, "nothing awaits a response: %s", f.raw)
	}
	resp := ofType(replayed, ag2api.TypeChatToolResponse)
	require.NotEmpty(t, resp)
	assert.JSONEq(t, `{"key":"sk-2"}`, resp[len(resp)-1].str("content"), "the form's answer is in the transcript")
}

// TestTranscriptOfAPendingQuestion: a question still waiting is asked
// again after a reload, and the reloaded page's answer goes on with the
// run.
func TestTranscriptOfAPendingQuestion(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("ask me something")
	frames := c.until(ag2api.TypeChatInputRequest)
	c.close()

	r, replayed, _ := reload(h, c.chat, highest(frames))
	reqs := ofType(replayed, ag2api.TypeChatInputRequest)
	require.Len(t, reqs, 1)
	assert.Equal(t, "What's your name?", reqs[0].msg.(ag2api.InputRequest).Data.Prompt)
	r.say("Grace")
	texts := contents(r.turn())
	assert.Equal(t, "assistant: Hello, Grace!", texts[len(texts)-1])
}

// TestNoDuplicatesMidStream: a socket that joins while a reply streams
// and resumes from the last seq it holds gets the transcript, whose
// frames up to that seq come first; dropping those, it has every frame
// once, the same as a socket that watched from the start.
func TestNoDuplicatesMidStream(t *testing.T) {
	h := start(t, testConfig(t))
	watcher := h.dial("")
	watcher.resume(0)
	watcher.until(ag2api.TypeChatResumeBoundary)
	c := h.dial(watcher.chat)
	c.say("tell me a long story")
	var held []got
	for len(ofType(held, ag2api.TypeChatPrint)) < 3 {
		held = append(held, c.next())
	}
	last := highest(held)
	c.close()

	r := h.dial(watcher.chat)
	r.resume(last)
	frames := r.turn()
	var replayed []got
	for _, f := range frames {
		if f.replay {
			replayed = append(replayed, f)
		}
	}
	require.NotEmpty(t, replayed)
	seenAbove := false
	for _, f := range replayed {
		if f.seq > last {
			seenAbove = true
		} else {
			assert.False(t, seenAbove, "the frames held come first: %s", f.raw)
		}
	}
	kept := append(append([]got(nil), held...), withoutHeld(frames, last)...)
	whole := watcher.turn()
	assert.Equal(t, text(whole), text(kept), "nothing lost, nothing doubled")
	assert.Equal(t, len(ofType(whole, ag2api.TypeChatRunComplete)), len(ofType(kept, ag2api.TypeChatRunComplete)))
}

// text is the reply that frames stream: their chat.print deltas joined.
func text(frames []got) string {
	s := ""
	for _, f := range ofType(frames, ag2api.TypeChatPrint) {
		s += f.msg.(ag2api.Print).Data.Content
	}
	return s
}
