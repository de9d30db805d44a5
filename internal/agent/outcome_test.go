package agent_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/tools"
)

// outcomes are the outcome of each call of a run, by tool name and order.
func outcomes(evs []event.Event) []string {
	var out []string
	for _, c := range payloads[event.ToolExecCompleted](evs) {
		out = append(out, c.Name+" "+string(c.Outcome))
	}
	return out
}

// TestToolOutcomes: every tool.exec.completed says what became of its
// call, whatever its result's text: ran and succeeded, ran and failed,
// could not be run as called, refused by the policy or by a person,
// cancelled when the person stopped the run, and timed out.
func TestToolOutcomes(t *testing.T) {
	t.Run("ran", func(t *testing.T) {
		e := newEnv(t, "outcomes")
		evs := e.run(e.agent(agent.Config{Policy: tools.PolicySuggest}), "calls that run", false)
		assert.ElementsMatch(t, []string{"ls ok", "read failed", "no_such_tool failed", "read failed"}, outcomes(evs))
	})
	t.Run("refused by the policy", func(t *testing.T) {
		e := newEnv(t, "outcomes")
		evs := e.run(e.agent(agent.Config{Policy: tools.PolicyReadOnly}), "calls that ask", false)
		assert.Equal(t, []string{"write_file refused", "write_file refused"}, outcomes(evs))
	})
	t.Run("not asked without anyone to ask", func(t *testing.T) {
		e := newEnv(t, "outcomes")
		evs := e.run(e.agent(agent.Config{Policy: tools.PolicySuggest}), "calls that ask", false)
		assert.Equal(t, []string{"write_file refused", "write_file refused"}, outcomes(evs))
	})
	t.Run("denied, then stopped", func(t *testing.T) {
		e := newEnv(t, "outcomes")
		r := e.start(e.agent(agent.Config{Policy: tools.PolicySuggest}), "calls that ask", true)
		first := r.j.waitFor(t, 1, ofType(event.TypeToolApprovalRequested)).Payload.(event.ToolApprovalRequested)
		r.answer(t, event.Command{Kind: event.CommandApprove, ID: first.CallID, Decision: event.DecisionDenyContinue})
		second := r.j.waitFor(t, 2, ofType(event.TypeToolApprovalRequested)).Payload.(event.ToolApprovalRequested)
		r.answer(t, event.Command{Kind: event.CommandApprove, ID: second.CallID, Decision: event.DecisionDenyStop})
		evs := e.wait(r)
		assert.Equal(t, []string{"write_file refused", "write_file refused"}, outcomes(evs))
	})
	t.Run("stopped before it ran", func(t *testing.T) {
		e := newEnv(t, "outcomes")
		r := e.start(e.agent(agent.Config{Policy: tools.PolicySuggest}), "calls that ask", true)
		first := r.j.waitFor(t, 1, ofType(event.TypeToolApprovalRequested)).Payload.(event.ToolApprovalRequested)
		r.answer(t, event.Command{Kind: event.CommandApprove, ID: first.CallID, Decision: event.DecisionDenyStop})
		evs := e.wait(r)
		assert.Equal(t, []string{"write_file refused", "write_file cancelled"}, outcomes(evs))
	})
	t.Run("timed out", func(t *testing.T) {
		e := newEnv(t, "outcomes")
		evs := e.run(e.agent(agent.Config{Policy: tools.PolicySuggest}), "a question nobody answers", true)
		got := payloads[event.ToolExecCompleted](evs)
		require.Len(t, got, 1)
		assert.Equal(t, event.OutcomeTimedOut, got[0].Outcome)
		assert.True(t, got[0].IsError)
	})
}

// TestOutcomeOfOlderEvents: an event logged before outcomes were has the
// outcome its IsError implies.
func TestOutcomeOfOlderEvents(t *testing.T) {
	assert.Equal(t, event.OutcomeOK, event.OutcomeOf(event.ToolExecCompleted{}))
	assert.Equal(t, event.OutcomeFailed, event.OutcomeOf(event.ToolExecCompleted{IsError: true}))
	assert.Equal(t, event.OutcomeRefused, event.OutcomeOf(event.ToolExecCompleted{IsError: true, Outcome: event.OutcomeRefused}))
}
