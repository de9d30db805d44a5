package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/tools"
)

// TestInboxTakesOneAnswerPerRequest answers a pending approval with a
// command of the wrong kind, with an unknown id, with the right answer and
// then again: only the right answer is taken, once.
func TestInboxTakesOneAnswerPerRequest(t *testing.T) {
	e := newEnv(t, "approval")
	r := e.start(e.agent(agent.Config{Policy: tools.PolicySuggest}), "touch a file", true)
	req := r.j.waitFor(t, 1, ofType(event.TypeToolApprovalRequested)).Payload.(event.ToolApprovalRequested)

	assert.ErrorIs(t, r.inbox.Deliver(event.Command{Kind: event.CommandInput, ID: req.CallID, Text: "yes"}),
		agent.ErrUnknownRequest, "an answer of another kind")
	assert.ErrorIs(t, r.inbox.Deliver(event.Command{Kind: event.CommandApprove, ID: "call_nobody", Decision: event.DecisionApprove}),
		agent.ErrUnknownRequest, "an unknown id")
	require.NoError(t, r.inbox.Deliver(event.Command{Kind: event.CommandApprove, ID: req.CallID, Decision: event.DecisionApprove}))
	assert.ErrorIs(t, r.inbox.Deliver(event.Command{Kind: event.CommandApprove, ID: req.CallID, Decision: event.DecisionDenyStop}),
		agent.ErrUnknownRequest, "a second answer")

	evs := e.wait(r)
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Done."}, evs[len(evs)-1].Payload)
	assert.True(t, exists(t, e.workdir, "touched.txt"), "the approved command ran")
}

// failingJournal fails the appends that match fail.
type failingJournal struct {
	*journal
	mu     sync.Mutex
	fail   func(events []event.Event) bool
	failed int
}

var errDiskFull = errors.New("disk full")

func (f *failingJournal) Append(ctx context.Context, events ...event.Event) ([]event.Event, error) {
	f.mu.Lock()
	fail := f.fail(events)
	if fail {
		f.failed++
	}
	f.mu.Unlock()
	if fail {
		// Fail slowly, as a disk that is filling up does: a run that
		// went on without waiting for its journal would act meanwhile.
		time.Sleep(300 * time.Millisecond)
		return nil, errDiskFull
	}
	return f.journal.Append(ctx, events...)
}

// TestJournalFailureStopsTheRun fails the append that records a tool's
// start: the tool must not run unrecorded, the run stops, and its end is
// recorded once the journal works again.
func TestJournalFailureStopsTheRun(t *testing.T) {
	e := newEnv(t, "approval")
	a := e.agent(agent.Config{}) // full-auto: the command would run unasked
	spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Input: "touch a file"}
	_, err := e.store.Append(t.Context(), e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: spec.Input}))
	require.NoError(t, err)
	once := false
	j := &failingJournal{journal: newJournal(e.store, e.thread), fail: func(evs []event.Event) bool {
		for _, ev := range evs {
			if ev.Type() == event.TypeToolExecStarted && !once {
				once = true
				return true
			}
		}
		return false
	}}

	err = a.Run(t.Context(), spec, j, nil)
	require.ErrorIs(t, err, errDiskFull, "Run reports the journal's failure")
	assert.Equal(t, 1, j.failed)
	assert.False(t, exists(t, e.workdir, "touched.txt"), "the command ran although its start was not recorded")
	evs := e.runEvents(spec.Run)
	assert.Equal(t, event.RunFailed{Code: event.CodeStoreError, Message: "The run stopped: its events could not be stored."},
		evs[len(evs)-1].Payload, "the run's end, recorded by the last attempt")
	for _, ev := range evs {
		assert.NotEqual(t, event.TypeToolExecCompleted, ev.Type(), "nothing after the failure is recorded as if it ran")
	}
}
