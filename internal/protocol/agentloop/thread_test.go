package agentloop_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/protocol/threads"
)

// Several sockets share a thread: each sees its frames (the others' input
// as user messages), a socket that joins while an approval is pending is
// sent it, any of them may answer it, the first answer wins, and the
// others are told.
func TestSocketsShareAThread(t *testing.T) {
	h := start(t, testConfig(t))
	a := h.dial("")
	b := h.dial(a.thread)

	a.say("make a file")
	assert.Equal(t, []string{"loading_state/true", "message/assistant", "approval_request"},
		kinds(until[agentloopapi.ApprovalRequestMessage](a)), "no echo of a socket's own input")
	got := until[agentloopapi.ApprovalRequestMessage](b)
	assert.Equal(t, []string{"message/user", "loading_state/true", "message/assistant", "approval_request"}, kinds(got))
	assert.Equal(t, "make a file", messageText(items(got)[0]))

	// A third socket joins while the request is pending: it is sent the
	// conversation so far, the pending request included.
	c := h.dial(strings.ToUpper(a.thread))
	got = until[agentloopapi.ApprovalRequestMessage](c)
	assert.Equal(t, []string{"message/user", "loading_state/true", "message/assistant", "approval_request"}, kinds(got))

	b.review("yes")
	bFrames := b.turn()
	assert.NotContains(t, kinds(bFrames), "message/system", "the answering socket is not told of its own answer")
	aFrames := a.turn()
	assert.Equal(t, "message/system", kinds(aFrames)[0])
	assert.Equal(t, "The approval request for `touch made.txt` was answered from another client, which approved it."+
		" If this client still asks you to approve it, answer once with any choice to go on: that answer is not used.",
		messageText(items(aFrames)[0]), "the notice names the command and says how the original client goes on")
	assert.True(t, h.exists("made.txt"))
	c.turn()

	// A late answer (the original client still asks, and its user answers
	// once) is refused: it was answered from another client.
	for _, late := range []*client{a, c} {
		late.review("no-exit")
		msg, details := late.expectError()
		assert.Equal(t, "The approval request for `touch made.txt` was already answered from another client, which approved it; this answer was not used.", msg)
		assert.Equal(t, "unknown_request", details["code"])
	}
	// The socket that answered finds nothing pending.
	b.review("yes")
	msg, _ := b.expectError()
	assert.Equal(t, "No approval request is pending", msg)
}

// Two sockets answer at once: one answer wins, the other gets an error.
func TestConcurrentAnswers(t *testing.T) {
	h := start(t, testConfig(t))
	a := h.dial("")
	b := h.dial(a.thread)
	a.say("make a file")
	a.expectApproval()
	b.expectApproval()
	a.review("yes")
	b.review("no-exit")
	errs := 0
	count := func(frames []agentloopapi.Outbound) {
		for _, m := range frames {
			if _, ok := m.(agentloopapi.ErrorMessage); ok {
				errs++
			}
		}
	}
	for _, c := range []*client{a, b} {
		count(until[agentloopapi.AgentFinishedMessage](c))
		count(until[agentloopapi.ContextInfoMessage](c)) // the turn's own
		// The refusal is sent when the socket's reader takes the losing
		// answer, which a busy machine may do after the run has ended;
		// the reader takes frames in order, so a get_context_info sent
		// now is answered after it.
		c.send(agentloopapi.GetContextInfoMessage{ID: uuid.NewString(), Type: agentloopapi.TypeGetContextInfo})
		count(until[agentloopapi.ContextInfoMessage](c))
	}
	assert.Equal(t, 1, errs, "exactly one of the two answers is refused")
}

// A user_input while a turn runs is queued: it starts when the turn ends.
func TestQueuedInput(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("make a file")
	c.expectApproval()
	c.say("echo queued")
	c.review("yes")
	first := c.turn()
	assert.NotContains(t, kinds(first), "error")
	second := c.turn()
	assert.Equal(t, []string{"loading_state/true", "message/assistant", "loading_state/false", "agent_finished", "context_info"}, kinds(second))
	assert.Equal(t, "You said: echo queued", messageText(items(second)[0]))
}

// While the agent waits for an answer to its question, the next
// user_input answers it.
func TestQuestionAnsweredByInput(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("ask me something")
	got := until[agentloopapi.ResponseItemMessage](c)
	got = append(got, until[agentloopapi.ResponseItemMessage](c)...)
	its := items(got)
	var question string
	for _, it := range its {
		if m, ok := it.(agentloopapi.MessageItem); ok && m.Role == "assistant" {
			question = messageText(m)
		}
	}
	if question == "" {
		got = append(got, until[agentloopapi.ResponseItemMessage](c)...)
		question = messageText(items(got)[len(items(got))-1])
	}
	assert.Contains(t, question, "What's your name?")
	c.say("Ada")
	frames := c.turn()
	assert.Equal(t, "Hello, Ada!", messageText(items(frames)[len(items(frames))-1]))
	info := frames[len(frames)-1].(agentloopapi.ContextInfoMessage)
	assert.Equal(t, 4, info.Payload.TranscriptLength, "the answer is the call's result, not a new turn")
}

// A thread started over the threads protocol is joined here by its UUID,
// and continued; the threads history shows both turns.
func TestThreadFromAnotherProtocol(t *testing.T) {
	h := start(t, testConfig(t))
	tc, err := threads.NewClient("http://"+h.srv.Addr("main"), http.DefaultClient)
	require.NoError(t, err)
	id := uuid.New()
	s, err := tc.SendMessage(t.Context(), id, "echo from threads")
	require.NoError(t, err)
	for {
		_, err := s.Next(t.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	s.Close()

	c := h.dial(id.String())
	replay := c.turnsReplayed(1)
	assert.Equal(t, []string{"message/user", "loading_state/true", "message/assistant", "loading_state/false", "agent_finished"}, kinds(replay))
	c.say("echo from agentloop")
	c.turn()

	hist, err := tc.History(context.Background(), id)
	require.NoError(t, err)
	var texts []string
	for _, m := range hist.Messages {
		texts = append(texts, m.Content.UserContent.Text+m.Content.AgentContent.Text)
	}
	assert.Equal(t, []string{"echo from threads", "You said: echo from threads", "echo from agentloop", "You said: echo from agentloop"}, texts)
}

// Fifty threads at once, each with its own socket: every socket sees only
// its own thread's frames.
func TestManyThreadsNoCrosstalk(t *testing.T) {
	h := start(t, testConfig(t))
	const n = 50
	for i := range n {
		h.write(fmt.Sprintf("tag %02d.txt", i), fmt.Sprintf("content %02d", i))
	}
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = h.dial("")
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			c.say(fmt.Sprintf("tag %02d", i))
		})
	}
	wg.Wait()
	for i, c := range clients {
		frames := c.turn()
		tag := fmt.Sprintf("tag %02d", i)
		for _, it := range items(frames) {
			switch v := it.(type) {
			case agentloopapi.MessageItem:
				assert.Contains(t, messageText(v), tag)
			case agentloopapi.FunctionCallItem:
				assert.Contains(t, v.Arguments, tag)
			case agentloopapi.FunctionCallOutputItem:
				assert.Contains(t, decodeOutput(t, v.Output).Output, fmt.Sprintf("content %02d", i))
			}
		}
		assert.Equal(t, fmt.Sprintf("Done with %s: content %02d", tag, i), messageText(items(frames)[len(items(frames))-1]))
	}
}
