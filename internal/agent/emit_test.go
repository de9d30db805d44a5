package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
)

// windowJournal commits what it is given in memory, counting the events,
// and takes previews; waiting says whether a subscriber waits for commits.
type windowJournal struct {
	mu        sync.Mutex
	seq       int64
	committed int
	waiting   atomic.Bool
}

func (j *windowJournal) Append(_ context.Context, events ...event.Event) ([]event.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]event.Event, len(events))
	for i, e := range events {
		j.seq++
		e.Seq = j.seq
		out[i] = e
	}
	j.committed += len(events)
	return out, nil
}

func (j *windowJournal) History(context.Context) ([]event.Event, error) { return nil, nil }
func (j *windowJournal) Preview(event.Event)                            {}
func (j *windowJournal) Previews() bool                                 { return true }
func (j *windowJournal) WaitsForCommits() bool                          { return j.waiting.Load() }

func (j *windowJournal) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.committed
}

// armed is the window the emitter's loop is waiting out, or 0.
func (e *emitter) armedWindow() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.armed
}

// TestEmitterWakesOnlyWhenItMust: deltas previewed inside the window of
// an unwatched thread wait for it without waking the emitter's loop; a
// subscriber that waits for commits joining meanwhile cuts the wait short
// at the next delta, and an event that is not a delta commits at once.
func TestEmitterWakesOnlyWhenItMust(t *testing.T) {
	j := &windowJournal{}
	e := newEmitter(t.Context(), j, "t", "r", true, nil)
	defer func() { require.NoError(t, e.close()) }()
	e.previewing(j, time.Nanosecond, time.Hour, 1)
	delta := func(text string) event.Payload { return event.MessageDelta{MessageID: "m", Text: text} }

	require.NoError(t, e.emit(delta("a")))
	require.Eventually(t, func() bool { return e.armedWindow() == time.Hour }, 10*time.Second, time.Millisecond,
		"the loop waits out the unwatched window")
	e.mu.Lock()
	assert.False(t, e.mustLook(), "another delta inside the window")
	j.waiting.Store(true)
	assert.True(t, e.mustLook(), "a subscriber that waits for commits joined")
	e.mu.Unlock()

	require.NoError(t, e.emit(delta("b")))
	require.Eventually(t, func() bool { return j.count() == 1 }, 10*time.Second, time.Millisecond,
		"the join cut the hour's wait short: both deltas committed, coalesced")
	require.NoError(t, e.emit(event.MessageCompleted{MessageID: "m", Text: "ab"}))
	require.Eventually(t, func() bool { return j.count() == 2 }, 10*time.Second, time.Millisecond,
		"an event that is not a delta commits at once")
}
