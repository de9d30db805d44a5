package agent_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
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
	e.run(a, "a long one please", false)
	e.run(a, "and a long one again", false)
	evs := e.compact(a)
	assert.Equal(t, event.StrategyCompact, only[event.RunStarted](t, evs).Strategy)
	assert.Equal(t, "compacted", only[event.RunCompleted](t, evs).Reason)
	c := only[event.ContextCompacted](t, evs)
	assert.Equal(t, "manual", c.Strategy)
	assert.Equal(t, 2, c.KeptMessages, "the last turn")
	assert.Less(t, c.NewTokens, c.OldTokens)
	assert.Empty(t, payloads[event.MessageUser](evs), "a compaction has no user message")

	evs = e.compact(a)
	assert.Equal(t, event.RunCompleted{Reason: "nothing_to_compact",
		Reply: "There is nothing to compact: the conversation is empty or already a summary."},
		only[event.RunCompleted](t, evs), "the summary and one turn")
}

// The two cases: a conversation too short for a summary to gain
// is not compacted, and the model is not asked for one. Before, a thread
// of one turn on a server that leaves its cached prefix out of the prompt
// tokens it reports went from 80 to 2040 tokens (-2450 %); two short
// turns from 1936 to 2055 (-6.1 %).
func TestCompactionOfAShortConversation(t *testing.T) {
	for _, turns := range [][]string{{"hello, cached"}, {"a short one", "another short one"}} {
		t.Run(turns[0], func(t *testing.T) {
			e := newEnv(t, "compact")
			a := e.agent(agent.Config{})
			for _, text := range turns {
				e.run(a, text, false)
			}
			calls := len(e.model.requests())
			evs := e.compact(a)
			assert.Empty(t, payloads[event.ContextCompacted](evs))
			assert.Equal(t, event.RunCompleted{Reason: "nothing_to_compact",
				Reply: "There is nothing to compact yet: the conversation is too short for a summary to make it smaller."},
				only[event.RunCompleted](t, evs))
			assert.Len(t, e.model.requests(), calls, "no summary was asked for")
		})
	}
}

// A summary that is not smaller than what it would replace is thrown
// away: the history stays as it was, and the run says why.
func TestCompactionKeepsALargerSummaryOut(t *testing.T) {
	e := newEnv(t, "compact")
	a := e.agent(agent.Config{})
	e.run(a, "bloat this medium one", false)
	e.run(a, "and go on", false)
	hist, err := e.store.History(t.Context(), e.thread)
	require.NoError(t, err)
	before := agent.Transcript(hist)

	evs := e.compact(a)
	assert.Empty(t, payloads[event.ContextCompacted](evs))
	done := only[event.RunCompleted](t, evs)
	assert.Equal(t, "nothing_to_compact", done.Reason)
	assert.Regexp(t, `^Nothing was compacted: the summary \(\d+ tokens\) is not smaller than the part of the conversation it would replace \(\d+ tokens\)\.$`, done.Reply)
	assert.Equal(t, event.PurposeSummary, only[event.Usage](t, evs).Purpose, "the summary's cost is counted")

	hist, err = e.store.History(t.Context(), e.thread)
	require.NoError(t, err)
	assert.Equal(t, before, agent.Transcript(hist), "the history stays as it was")
	e.run(a, "once more", false)
	last := e.model.requests()[len(e.model.requests())-1]
	assert.Equal(t, append(before, llm.Message{Role: llm.RoleUser, Content: "once more"}), last.Messages)
}

// Threshold compaction whose summary would not be smaller goes ahead
// uncompacted.
func TestThresholdCompactionKeepsALargerSummaryOut(t *testing.T) {
	e := newEnv(t, "compact")
	a := e.agent(agent.Config{ContextWindow: 20000, CompactThreshold: 0.1})
	e.run(a, "bloat this medium one", false)
	e.run(a, "bloat another medium one", false)
	evs := e.run(a, "bloat a third medium one", false)
	assert.Empty(t, payloads[event.ContextCompacted](evs))
	assert.Equal(t, "final_answer", only[event.RunCompleted](t, evs).Reason)
	assert.Len(t, payloads[event.Usage](evs), 2, "one summary, thrown away, and the answer")
}

// However the provider counts, a compaction never reports more tokens
// after than before: both counts count the same things.
func TestCompactionNeverGrows(t *testing.T) {
	e := newEnv(t, "compact")
	a := e.agent(agent.Config{ContextWindow: 100000})
	e.run(a, "a long cached one", false) // the provider reports 70 prompt tokens
	e.run(a, "and a long one again", false)
	c := only[event.ContextCompacted](t, e.compact(a))
	assert.Positive(t, c.NewTokens)
	assert.Less(t, c.NewTokens, c.OldTokens)
}
