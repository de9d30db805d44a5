package agentloop_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
)

// A user_input resent with the same UUID id, as a client does after a
// reconnect when it cannot tell whether the frame arrived, starts no second
// turn; a hand-typed id that repeats ("1") is a new turn each time.
func TestUserInputResentAfterReconnect(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	frame := userInput("echo once")
	c.send(frame)
	first := c.turn()
	thread := c.thread
	c.close()

	again := h.dial(thread)
	again.turnsReplayed(1)
	again.send(frame) // the resend
	again.say("echo after")
	frames := again.turn()
	var said []string
	for _, it := range items(frames) {
		if m, ok := it.(agentloopapi.MessageItem); ok && m.Role == "assistant" {
			said = append(said, messageText(m))
		}
	}
	assert.Equal(t, []string{"You said: echo after"}, said, "the resent frame ran nothing: %v", kinds(frames))
	require.NotEmpty(t, first)

	typed := userInput("echo typed")
	typed.ID = "1"
	again.send(typed)
	again.turn()
	again.send(typed)
	again.turn()
	info := again.contextInfo()
	assert.Equal(t, 8, info.TranscriptLength, "four turns: once, after, and the typed one twice")
}

// An approval_response resent with the same UUID id after a reconnect is
// acknowledged as the first was (no error, nothing answered twice); a new
// answer to the request already answered still gets its error.
func TestApprovalResponseResentAfterReconnect(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial("")
	c.say("make a file")
	c.expectApproval()
	answer := reviewMsg("yes")
	c.send(answer)
	c.turn()
	require.True(t, h.exists("made.txt"))
	thread := c.thread
	c.close()

	again := h.dial(thread)
	again.turnsReplayed(1)
	again.send(answer) // the resend
	again.say("echo after")
	frames := again.turn()
	assert.NotContains(t, kinds(frames), "error", "the resent answer is acknowledged: %v", kinds(frames))

	again.send(reviewMsg("yes")) // another answer, with an id of its own
	msg, _ := again.expectError()
	assert.Contains(t, msg, "No approval request is pending")
}
