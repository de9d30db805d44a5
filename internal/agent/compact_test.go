package agent_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
)

// A run whose next call would pass the threshold compacts first: the
// model is sent the summary, and the log keeps every message.
func TestThresholdCompaction(t *testing.T) {
	e := newEnv(t, "compact")
	a := e.agent(agent.Config{ContextWindow: 8000, CompactThreshold: 0.5})
	e.run(a, "a long one please", false)
	evs := e.run(a, "and then?", false)
	c := only[event.ContextCompacted](t, evs)
	assert.Equal(t, "threshold", c.Strategy)
	assert.Greater(t, c.OldTokens, 4000)
	assert.Less(t, c.NewTokens, c.OldTokens/2)
	assert.Equal(t, 1, c.KeptMessages, "the new question")
	assert.Contains(t, c.Summary, "## Goals")

	reqs := e.model.requests()
	last := reqs[len(reqs)-1]
	require.Len(t, last.Messages, 2)
	assert.True(t, strings.HasPrefix(last.Messages[0].Content, "Summary of the conversation so far:\n\n## Goals"))
	assert.Equal(t, "and then?", last.Messages[1].Content)

	hist, err := e.store.History(t.Context(), e.thread)
	require.NoError(t, err)
	assert.Len(t, payloads[event.MessageUser](hist), 2, "the log keeps every message")
	assert.Equal(t, last.Messages, agent.Transcript(hist)[:2], "a later run rebuilds the same transcript")
}

// A summary that fails leaves the conversation as it was: the call goes
// ahead, and the run does not try again.
func TestCompactionFailureIsNotFatal(t *testing.T) {
	e := newEnv(t, "compact")
	a := e.agent(agent.Config{ContextWindow: 8000, CompactThreshold: 0.5})
	e.run(a, "a long one, and the summary fails", false)
	evs := e.run(a, "next", false)
	assert.Empty(t, payloads[event.ContextCompacted](evs))
	assert.Equal(t, "final_answer", only[event.RunCompleted](t, evs).Reason)
}

// A compaction run (Spec.Compact) compacts at once, and says when there
// is nothing to compact.
func TestCompactionRun(t *testing.T) {
	e := newEnv(t, "compact")
	a := e.agent(agent.Config{ContextWindow: 100000})
	e.run(a, "hello", false)
	e.run(a, "hello again", false)
	evs := e.compact(a)
	assert.Equal(t, event.StrategyCompact, only[event.RunStarted](t, evs).Strategy)
	assert.Equal(t, "compacted", only[event.RunCompleted](t, evs).Reason)
	c := only[event.ContextCompacted](t, evs)
	assert.Equal(t, "manual", c.Strategy)
	assert.Equal(t, 2, c.KeptMessages, "the last turn")
	assert.Empty(t, payloads[event.MessageUser](evs), "a compaction has no user message")

	evs = e.compact(a)
	assert.Equal(t, "nothing_to_compact", only[event.RunCompleted](t, evs).Reason)
}
