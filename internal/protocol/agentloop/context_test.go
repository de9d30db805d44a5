package agentloop_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/protocol/threads"
)

func (c *client) contextInfo() agentloopapi.ContextInfoMessagePayload {
	c.t.Helper()
	c.send(agentloopapi.GetContextInfoMessage{ID: uuid.NewString(), Type: agentloopapi.TypeGetContextInfo})
	m, ok := c.next().(agentloopapi.ContextInfoMessage)
	require.True(c.t, ok, "get_context_info is answered with context_info")
	return m.Payload
}

func (c *client) compact() {
	c.t.Helper()
	c.send(agentloopapi.ManualCompactMessage{ID: uuid.NewString(), Type: agentloopapi.TypeManualCompact})
}

// get_context_info reports the window from the model table (or the flag)
// and a token count that grows with the conversation.
func TestContextInfo(t *testing.T) {
	h := start(t, testConfig(t, "--context-window", "50000"))
	c := h.dial("")
	empty := c.contextInfo()
	assert.Equal(t, agentloopapi.ContextInfoMessagePayload{MaxTokens: 50000, Strategy: "ThresholdContextManager"}, empty)

	c.say("echo one")
	c.turn()
	one := c.contextInfo()
	assert.Equal(t, 2, one.TranscriptLength)
	assert.Positive(t, one.TokenCount)
	assert.InDelta(t, float64(one.TokenCount)/500, one.UsagePercent, 0.05)

	c.say("tell me a long story")
	c.turn()
	two := c.contextInfo()
	assert.Equal(t, 4, two.TranscriptLength)
	// 40,000 characters of reply are about 10,000 tokens.
	assert.Greater(t, two.TokenCount, one.TokenCount+9000)
	assert.Less(t, two.TokenCount, one.TokenCount+25000)
}

// manual_compact summarises the conversation: context_compacted reports
// the counts, later calls see the summary and the last turn, and every
// history view still shows every message.
func TestManualCompact(t *testing.T) {
	h := start(t, testConfig(t, "--context-window", "50000"))
	c := h.dial("")

	// On an empty thread there is nothing to compact: the answer says
	// why and reports no change.
	c.compact()
	frames := until[agentloopapi.ContextCompactedMessage](c)
	require.Len(t, frames, 2, "%v", kinds(frames))
	why, ok := frames[0].(agentloopapi.ResponseItemMessage)
	require.True(t, ok, "the reason comes first, as a system message: %v", kinds(frames))
	assert.Contains(t, messageText(why.Payload.Value), "nothing to compact")
	unchanged := frames[1].(agentloopapi.ContextCompactedMessage).Payload
	assert.Equal(t, agentloopapi.ContextCompactedMessagePayload{Strategy: "ThresholdContextManager"}, unchanged)

	c.say("tell me a long story")
	c.turn()
	c.say("echo after the story")
	c.turn()
	before := c.contextInfo()
	require.Equal(t, 4, before.TranscriptLength)

	c.compact()
	m, ok := c.next().(agentloopapi.ContextCompactedMessage)
	require.True(t, ok, "manual_compact is answered with context_compacted")
	p := m.Payload
	assert.Equal(t, "ThresholdContextManager", p.Strategy)
	assert.Equal(t, before.TokenCount, p.OldTokenCount)
	assert.Less(t, p.NewTokenCount, p.OldTokenCount/2)
	assert.InDelta(t, 100*float64(p.OldTokenCount-p.NewTokenCount)/float64(p.OldTokenCount), p.ReductionPercent, 0.1)

	after := c.contextInfo()
	assert.Equal(t, 3, after.TranscriptLength, "the summary, then the last turn kept")
	assert.Equal(t, p.NewTokenCount, after.TokenCount)

	c.say("echo once compacted")
	frames = c.turn()
	assert.Equal(t, "You said: echo once compacted", messageText(items(frames)[0]))
	assert.Equal(t, 5, frames[len(frames)-1].(agentloopapi.ContextInfoMessage).Payload.TranscriptLength)

	// The threads protocol's history still shows every message.
	tc, err := threads.NewClient("http://"+h.srv.Addr("main"), http.DefaultClient)
	require.NoError(t, err)
	res, err := tc.History(t.Context(), uuid.MustParse(c.thread))
	require.NoError(t, err)
	assert.Len(t, res.Messages, 6)
}

// A turn that would pass the threshold compacts first: context_compacted
// comes inside the turn, and the turn goes on.
func TestThresholdCompaction(t *testing.T) {
	h := start(t, testConfig(t, "--context-window", "20000", "--compact-threshold", "0.5"))
	c := h.dial("")
	c.say("tell me a long story")
	frames := c.turn()
	assert.NotContains(t, kinds(frames), "context_compacted", "the first call fits")
	full := frames[len(frames)-1].(agentloopapi.ContextInfoMessage).Payload
	require.Greater(t, full.UsagePercent, 50.0)

	c.say("echo and go on")
	frames = c.turn()
	assert.Equal(t, []string{"loading_state/true", "context_compacted", "message/assistant",
		"loading_state/false", "agent_finished", "context_info"}, kinds(frames))
	p := frames[1].(agentloopapi.ContextCompactedMessage).Payload
	assert.Greater(t, p.OldTokenCount, 10000)
	assert.Less(t, p.NewTokenCount, 5000)
	assert.Greater(t, p.ReductionPercent, 50.0)
	assert.Equal(t, "You said: echo and go on", messageText(items(frames)[0]))
	info := frames[len(frames)-1].(agentloopapi.ContextInfoMessage).Payload
	assert.Less(t, info.UsagePercent, 50.0)
	assert.Equal(t, 3, info.TranscriptLength, "the summary, the user's message and the reply")

	// Nothing was lost from the log: a socket that joins sees it all.
	d := h.dial(c.thread)
	replay := d.turnsReplayed(2)
	var users []string
	for _, it := range items(replay) {
		if m, ok := it.(agentloopapi.MessageItem); ok && m.Role == "user" {
			users = append(users, messageText(m))
		}
	}
	assert.Equal(t, []string{"tell me a long story", "echo and go on"}, users)
	assert.True(t, strings.HasSuffix(messageText(items(replay)[1]), "The end."))
}

// A conversation too short for a summary to make it smaller is left as it
// is: manual_compact says why and reports the count unchanged, never a
// negative reduction.
func TestManualCompactTooShort(t *testing.T) {
	h := start(t, testConfig(t, "--context-window", "50000"))
	c := h.dial("")
	c.say("echo one")
	c.turn()
	before := c.contextInfo()
	require.Positive(t, before.TokenCount)

	c.compact()
	frames := until[agentloopapi.ContextCompactedMessage](c)
	why, ok := frames[0].(agentloopapi.ResponseItemMessage)
	require.True(t, ok, "the reason comes first, as a system message: %v", kinds(frames))
	assert.Contains(t, messageText(why.Payload.Value), "too short")
	p := frames[len(frames)-1].(agentloopapi.ContextCompactedMessage).Payload
	assert.Equal(t, before.TokenCount, p.OldTokenCount)
	assert.Equal(t, before.TokenCount, p.NewTokenCount)
	assert.Zero(t, p.ReductionPercent)
	assert.Equal(t, before, c.contextInfo(), "nothing changed")
}
