package runs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/runs"
)

// A post retried with the same key starts nothing: it gets the first
// post's run, from memory while the first waits in the queue, and from
// the log on a Manager that never saw it (a restart, another node).
func TestPostWithAKeyRunsOnce(t *testing.T) {
	e := newEnv(t)
	post := func(text, key string) runs.Posted {
		t.Helper()
		p, err := e.m.Post(t.Context(), "t1", runs.Input{Text: text, Interactive: true, Key: key})
		require.NoError(t, err)
		return p
	}
	first := post("touch it", "k1")
	call := e.log.waitFor(t, 1, approvalOf(first.Run)).Payload.(event.ToolApprovalRequested)

	// Queued behind the first run, then retried.
	second := post("second", "k2")
	require.True(t, second.Queued)
	again := post("second", "k2")
	assert.Equal(t, runs.Posted{Run: second.Run, MessageID: second.MessageID, Queued: true, Duplicate: true}, again)
	retried := post("touch it", "k1")
	assert.Equal(t, first.Run, retried.Run)
	assert.True(t, retried.Duplicate)

	// An answer retried with its key answers once, and says so quietly.
	answer := event.Command{Kind: event.CommandApprove, ID: call.CallID, Decision: event.DecisionApprove, Key: "a1"}
	require.NoError(t, e.m.Resolve(t.Context(), "t1", answer))
	require.NoError(t, e.m.Resolve(t.Context(), "t1", answer), "a retried answer is not an error")
	other := answer
	other.Key = "a2"
	assert.ErrorIs(t, e.m.Resolve(t.Context(), "t1", other), runs.ErrUnknownRequest, "another answer to it is")

	e.log.waitFor(t, 1, ended(second.Run))
	// A new Manager knows only the log: the user message carries the key.
	e.newManager()
	fromLog := post("second", "k2")
	assert.Equal(t, second.Run, fromLog.Run)
	assert.Equal(t, second.MessageID, fromLog.MessageID)
	assert.True(t, fromLog.Duplicate)
	evs, err := e.log.Read(t.Context(), "t1", fromLog.Seq-1, 1)
	require.NoError(t, err)
	assert.Equal(t, event.MessageUser{MessageID: second.MessageID, Text: "second", Key: "k2"}, evs[0].Payload, "Seq is the user message's")

	var users int
	for _, l := range e.events("t1", nil) {
		if l == "message.user ?" {
			users++
		}
	}
	assert.Equal(t, 2, users, "two posts, two user messages")
	// A post without a key, or with a new one, runs.
	assert.False(t, post("second", "k3").Duplicate)
	assert.False(t, post("second", "").Duplicate)
}
