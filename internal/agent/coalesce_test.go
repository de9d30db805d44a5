package agent_test

import (
	"context"
	"iter"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

// finishing is a model that says when its stream has ended.
type finishing struct {
	llm.Model
	streamed chan struct{}
}

func (m finishing) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		defer close(m.streamed)
		for c, err := range m.Model.Stream(ctx, req) {
			if !yield(c, err) {
				return
			}
		}
	}
}

// heldJournal commits nothing until the model has streamed its whole
// reply, as a journal does whose commits are slow under load.
type heldJournal struct {
	*journal
	streamed chan struct{}
}

func (j heldJournal) Append(ctx context.Context, events ...event.Event) ([]event.Event, error) {
	<-j.streamed
	return j.journal.Append(ctx, events...)
}

// TestDeltasCoalesceWhileACommitIsSlow holds the run's first commit until
// the model has streamed its reply: with CoalesceDeltas the three chunks
// that gathered meanwhile reach the log as fewer deltas that still spell
// the message, in order; without it, as three.
func TestDeltasCoalesceWhileACommitIsSlow(t *testing.T) {
	for _, coalesce := range []bool{true, false} {
		e := newEnv(t, "text")
		e.thread += map[bool]string{true: "-on", false: "-off"}[coalesce]
		streamed := make(chan struct{})
		a := e.agent(agent.Config{Model: finishing{Model: e.model, streamed: streamed}, CoalesceDeltas: coalesce})
		spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Input: "say hello"}
		_, err := e.store.Append(t.Context(), e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: "say hello"}))
		require.NoError(t, err)
		j := heldJournal{journal: newJournal(e.store, e.thread), streamed: streamed}
		require.NoError(t, a.Run(t.Context(), spec, j, agent.NewInbox()))

		evs := e.runEvents(spec.Run)
		deltas := payloads[event.MessageDelta](evs)
		var text strings.Builder
		for _, d := range deltas {
			text.WriteString(d.Text)
		}
		assert.Equal(t, "Hello there.", text.String(), "coalesce=%v", coalesce)
		assert.Equal(t, "Hello there.", only[event.MessageCompleted](t, evs).Text)
		if coalesce {
			assert.Less(t, len(deltas), 3, "at most the first commit's and the rest")
		} else {
			assert.Len(t, deltas, 3, "one per chunk")
		}
		checkIDs(t, evs)
	}
}
