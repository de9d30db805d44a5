package runs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
)

// These tests drive the gate of a run started ahead of its commit
// (ahead.go) through each of its transitions, and check what the run sees
// in each state: its context, its previews, its appends (wait) and its
// history.

// testGate is a pending gate of a run whose user message the run's history
// puts at seq 5, with the run's context and what the gate previewed.
type testGate struct {
	*ahead
	ctx context.Context

	mu   sync.Mutex
	sent []event.Event // previews the gate sent to the thread
}

func newTestGate(t *testing.T) *testGate {
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	msg := event.New("t1", "r1", event.MessageUser{MessageID: "m1", Text: "hello"})
	msg.Seq = 5
	g := &testGate{ctx: ctx}
	g.ahead = newAhead(msg, cancel, func(e event.Event) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.sent = append(g.sent, e)
	})
	return g
}

// preview previews e as the run's journal does: held by the gate, or sent.
func (g *testGate) preview(e event.Event) {
	if !g.hold(e) {
		g.ahead.preview(e)
	}
}

func (g *testGate) previewed() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, e := range g.sent {
		out = append(out, e.Payload.(event.MessageDelta).Text)
	}
	return out
}

func (g *testGate) state() aheadState {
	g.ahead.mu.Lock()
	defer g.ahead.mu.Unlock()
	return g.ahead.state
}

func delta(text string) event.Event {
	return event.New("t1", "r1", event.MessageDelta{MessageID: "a1", Text: text})
}

// decided reports whether the gate's decision is out: whether a run
// waiting for it (wait) would go on.
func decided(a *ahead) bool {
	select {
	case <-a.decided:
		return true
	default:
		return false
	}
}

// TestAheadPendingToCommitted commits the run's message at the seq its
// history gave it: the previews held meanwhile are sent, in order, and
// later ones at once; the run goes on.
func TestAheadPendingToCommitted(t *testing.T) {
	g := newTestGate(t)
	g.preview(delta("a"))
	g.preview(delta("b"))
	assert.Empty(t, g.previewed(), "previews sent before the commit")
	assert.False(t, decided(g.ahead), "decided before the commit")

	assert.True(t, g.commit(5), "commit(5) of a message at seq 5")
	assert.Equal(t, aheadCommitted, g.state())
	assert.Equal(t, []string{"a", "b"}, g.previewed(), "the held previews, sent by the commit")
	g.preview(delta("c"))
	assert.Equal(t, []string{"a", "b", "c"}, g.previewed(), "a preview after the commit is sent at once")
	assert.True(t, g.wait(), "the run goes on")
	assert.NoError(t, context.Cause(g.ctx), "the committed run is cancelled")
}

// TestAheadPendingToUndoneByACommitElsewhere commits the run's message at
// another seq than its history gave it: the run is undone.
func TestAheadPendingToUndoneByACommitElsewhere(t *testing.T) {
	g := newTestGate(t)
	g.preview(delta("a"))
	assert.False(t, g.commit(6), "commit(6) of a message the run's history put at 5")
	checkUndone(t, g)
}

// TestAheadPendingToUndone undoes the start: the claim went to another
// node, or the commit failed.
func TestAheadPendingToUndone(t *testing.T) {
	g := newTestGate(t)
	g.preview(delta("a"))
	g.undo()
	checkUndone(t, g)
}

func checkUndone(t *testing.T, g *testGate) {
	t.Helper()
	assert.Equal(t, aheadUndone, g.state())
	cause := context.Cause(g.ctx)
	assert.ErrorIs(t, cause, agent.ErrUndone, "the undone run's cancellation cause")
	assert.False(t, errors.Is(cause, agent.ErrSuperseded), "an undone run is said to be superseded: %v", cause)
	assert.False(t, g.wait(), "the undone run goes on")
	g.preview(delta("b"))
	assert.Empty(t, g.previewed(), "an undone run's previews are sent")
	_, err := g.history(context.Background(), historyLog{})
	assert.ErrorIs(t, err, agent.ErrUndone, "history of an undone run")
}

// TestAheadDecidedStaysDecided decides gates a second time: a decision
// stands, so that a start given up late cannot cancel a run that is the
// thread's, nor a late commit let an undone run's events out.
func TestAheadDecidedStaysDecided(t *testing.T) {
	committed := newTestGate(t)
	require.True(t, committed.commit(5))
	committed.undo()
	assert.False(t, committed.commit(5), "a second commit")
	assert.False(t, committed.commit(6), "a commit elsewhere after the commit")
	assert.Equal(t, aheadCommitted, committed.state())
	assert.NoError(t, context.Cause(committed.ctx), "a committed run was cancelled")
	assert.True(t, committed.wait())

	undone := newTestGate(t)
	undone.preview(delta("a"))
	undone.undo()
	undone.undo()
	assert.False(t, undone.commit(5), "a commit after the start was undone")
	assert.Equal(t, aheadUndone, undone.state())
	assert.Empty(t, undone.previewed(), "a late commit sent an undone run's previews")
	assert.False(t, undone.wait())

	var none *ahead
	none.undo() // a run that did not go ahead has nothing to undo

	assert.Panics(t, func() { newTestGate(t).decide(aheadPending) }, "a transition to pending")
}

// TestAheadWaitHoldsTheRunUntilTheDecision: the run's appends (wait) wait
// while the gate is pending, and go on once it is decided.
func TestAheadWaitHoldsTheRunUntilTheDecision(t *testing.T) {
	for _, decide := range []struct {
		name   string
		decide func(*ahead)
		on     bool
	}{
		{"committed", func(a *ahead) { a.commit(5) }, true},
		{"commit elsewhere", func(a *ahead) { a.commit(6) }, false},
		{"undone", (*ahead).undo, false},
	} {
		t.Run(decide.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newTestGate(t)
				on := make(chan bool, 1)
				go func() { on <- g.wait() }()
				synctest.Wait() // the waiting goroutine is blocked, or has returned
				select {
				case <-on:
					t.Fatal("wait returned while the gate was pending")
				default:
				}
				decide.decide(g.ahead)
				synctest.Wait()
				select {
				case v := <-on:
					assert.Equal(t, decide.on, v)
				default:
					t.Fatal("wait did not return once the gate was decided")
				}
			})
		})
	}
}

// historyLog is a Log whose thread t1 holds hist; only History is used.
type historyLog struct {
	Log
	hist []event.Event
}

func (h historyLog) History(context.Context, string) ([]event.Event, error) { return h.hist, nil }

// TestAheadHistory reads the run's history in each state: pending, the log
// as it stands with the user's message after it (unless the read found it
// committed already); committed, the log's.
func TestAheadHistory(t *testing.T) {
	before := event.New("t1", "r0", event.MessageUser{MessageID: "m0", Text: "earlier"})
	before.Seq = 4
	g := newTestGate(t)
	hist, err := g.history(context.Background(), historyLog{hist: []event.Event{before}})
	require.NoError(t, err)
	assert.Equal(t, []event.Event{before, g.msg}, hist, "pending: the log, then the user's message")

	committedMsg := g.msg // as the log holds it once committed
	hist, err = g.history(context.Background(), historyLog{hist: []event.Event{before, committedMsg}})
	require.NoError(t, err)
	assert.Equal(t, []event.Event{before, committedMsg}, hist, "pending, the message committed meanwhile: the log")

	require.True(t, g.commit(5))
	hist, err = g.history(context.Background(), historyLog{hist: []event.Event{before}})
	require.NoError(t, err)
	assert.Equal(t, []event.Event{before}, hist, "committed: the log's, as it stands")
}
