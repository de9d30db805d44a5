package runs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/store"
)

func TestRecoverInterruptedRun(t *testing.T) {
	e := newEnv(t)
	// A previous process finished one run and died in the middle of another.
	_, err := e.log.Append(t.Context(), "t1",
		event.New("t1", "done", event.MessageUser{MessageID: "m0", Text: "hello"}),
		event.New("t1", "done", event.RunStarted{Strategy: "react"}),
		event.New("t1", "done", event.RunCompleted{Reason: "final_answer", Reply: "hi"}),
		event.New("t1", "dead", event.MessageUser{MessageID: "m1", Text: "touch it"}),
		event.New("t1", "dead", event.RunStarted{Strategy: "react"}),
		event.New("t1", "dead", event.ToolCallCompleted{CallID: "call_dead", Name: "bash", Arguments: []byte(`{"command":"touch x"}`)}),
		event.New("t1", "dead", event.ToolApprovalRequested{CallID: "call_dead", Name: "bash", Arguments: []byte(`{"command":"touch x"}`)}),
	)
	require.NoError(t, err)
	require.NoError(t, e.store.ClaimRun(t.Context(), store.RunClaim{Thread: "t1", Run: "dead", Node: "dead-node"}, time.Hour))
	require.NoError(t, e.log.Close())
	e.open()
	e.newManager() // recovers at once, before any input

	failed := e.log.waitFor(t, 1, ended("dead")).Payload.(event.RunFailed)
	assert.Equal(t, "interrupted", failed.Code)
	assert.NotEmpty(t, failed.Message)
	assert.Empty(t, e.active("t1"), "the dead node's claim is released")

	p := e.post("t1", "again")
	e.log.waitFor(t, 1, ended(p.Run))
	labels := map[string]string{"done": "done", "dead": "dead", p.Run: "new"}
	assert.Equal(t, []string{
		"message.user done", "run.started done", "run.completed done",
		"message.user dead", "run.started dead", "tool.approval.requested dead",
		"run.failed dead",
		"message.user new", "run.started new", "run.completed new",
	}, e.events("t1", labels))
	// The dead run's approval is not pending any more.
	assert.ErrorIs(t, e.m.Resolve(t.Context(), "t1", event.Command{Kind: event.CommandApprove, ID: "call_dead", Decision: event.DecisionApprove}), runs.ErrUnknownRequest)
}

// TestRecoverAtStart finds, at start, a claim and queued input that a
// crashed process left: the dead run is interrupted with its partial
// answer kept, and the queued input runs.
func TestRecoverAtStart(t *testing.T) {
	e := newEnv(t)
	_, err := e.log.Append(t.Context(), "t1",
		event.New("t1", "dead", event.MessageUser{MessageID: "m1", Text: "tell me"}),
		event.New("t1", "dead", event.RunStarted{Strategy: "react"}),
		event.New("t1", "dead", event.MessageStarted{MessageID: "a1", Role: event.RoleAssistant, Agent: "assistant"}),
		event.New("t1", "dead", event.MessageDelta{MessageID: "a1", Text: "The answer "}),
		event.New("t1", "dead", event.MessageDelta{MessageID: "a1", Text: "is"}),
	)
	require.NoError(t, err)
	require.NoError(t, e.store.ClaimRun(t.Context(), store.RunClaim{Thread: "t1", Run: "dead", Node: "crashed"}, time.Hour))
	require.NoError(t, e.store.EnqueueInput(t.Context(), "t1", store.QueuedInput{Run: "next", MessageID: "m2", Text: "and then?"}))
	e.newManager() // recovers at start

	partial := e.log.waitFor(t, 1, func(ev event.Event) bool { return ev.Type() == event.TypeMessageCompleted && ev.Run == "dead" })
	assert.Equal(t, event.MessageCompleted{MessageID: "a1", Role: event.RoleAssistant, Agent: "assistant", Text: "The answer is", Incomplete: true}, partial.Payload)
	assert.Equal(t, event.CodeInterrupted, e.log.waitFor(t, 1, ended("dead")).Payload.(event.RunFailed).Code)
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Echo: and then?"}, e.log.waitFor(t, 1, ended("next")).Payload)
	hist, err := e.log.History(t.Context(), "t1")
	require.NoError(t, err)
	var texts []string
	for _, ev := range hist {
		if m, ok := ev.Payload.(event.MessageCompleted); ok {
			texts = append(texts, m.Text)
		}
	}
	assert.Equal(t, []string{"The answer is", "Echo: and then?"}, texts, "the partial answer stays in the history")
}

// TestRecoverARunThatLoggedNothing: a node that died after logging the
// user's message, but before its run committed anything of its own (its
// clients may have seen text sent ahead of the commit), leaves a claim on
// a run with no start in the log; recovery ends that run too, so its
// clients learn that it was interrupted.
func TestRecoverARunThatLoggedNothing(t *testing.T) {
	e := newEnv(t)
	_, err := e.log.Append(t.Context(), "t1", event.New("t1", "dead", event.MessageUser{MessageID: "m1", Text: "tell me"}))
	require.NoError(t, err)
	require.NoError(t, e.store.ClaimRun(t.Context(), store.RunClaim{Thread: "t1", Run: "dead", Node: "crashed"}, time.Hour))
	e.newManager() // recovers at start
	assert.Equal(t, event.CodeInterrupted, e.log.waitFor(t, 1, ended("dead")).Payload.(event.RunFailed).Code)
	assert.Empty(t, e.active("t1"))
	assert.Equal(t, []string{"message.user dead", "run.failed dead"}, e.events("t1", map[string]string{"dead": "dead"}))
}
