package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// spending sums the usage events of a principal's threads from each time
// asked, at or after it: other principals' threads, threads nobody owns,
// other events and earlier usage do not count.
func (s *suite) spending(t *testing.T) {
	st := s.open(t)
	ctx := t.Context()
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	usage := func(at time.Duration, tokens int64, cost float64) event.Event {
		return event.Event{Run: "r", Time: t0.Add(at), Payload: event.Usage{PromptTokens: tokens - 1, CompletionTokens: 1,
			TotalTokens: tokens, Cost: cost, Model: "m"}}
	}
	other := func(at time.Duration) event.Event {
		return event.Event{Run: "r", Time: t0.Add(at), Payload: event.MessageDelta{MessageID: "m", Text: "x"}}
	}
	for th, who := range map[string]string{"a1": "alice", "a2": "alice", "b1": "bob"} {
		_, err := st.OwnThread(ctx, th, who)
		require.NoError(t, err)
	}
	for th, evs := range map[string][]event.Event{
		"a1":     {usage(-time.Hour, 7, 0.125), other(0), usage(0, 100, 0.5), other(time.Hour), usage(2*time.Hour, 50, 0)},
		"a2":     {usage(25*time.Hour, 10, 0.25)},
		"b1":     {usage(time.Hour, 1000, 3)},
		"nobody": {usage(time.Hour, 5000, 4)},
	} {
		_, err := st.Append(ctx, th, evs...)
		require.NoError(t, err)
	}

	got, err := st.Spent(ctx, "alice", t0, t0.Add(2*time.Hour), t0.Add(24*time.Hour), t0.Add(30*time.Hour), t0.Add(-2*time.Hour))
	require.NoError(t, err)
	want := []store.Spend{{Tokens: 160, Cost: 0.75}, {Tokens: 60, Cost: 0.25}, {Tokens: 10, Cost: 0.25}, {}, {Tokens: 167, Cost: 0.875}}
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].Tokens, got[i].Tokens, "Spent(alice)[%d].Tokens", i)
		assert.InDelta(t, want[i].Cost, got[i].Cost, 1e-9, "Spent(alice)[%d].Cost", i)
	}

	got, err = st.Spent(ctx, "bob", t0.Add(time.Hour), t0.Add(time.Hour+time.Microsecond))
	require.NoError(t, err)
	assert.Equal(t, []store.Spend{{Tokens: 1000, Cost: 3}, {}}, got, "an event at since counts; one before it does not")

	got, err = st.Spent(ctx, "carol", t0)
	require.NoError(t, err)
	assert.Equal(t, []store.Spend{{}}, got, "a principal without threads spent nothing")

	got, err = st.Spent(ctx, "alice")
	require.NoError(t, err)
	assert.Empty(t, got)

	// Usage appended later counts at once, for the next read.
	_, err = st.Append(ctx, "a2", usage(26*time.Hour, 1, 0.001))
	require.NoError(t, err)
	got, err = st.Spent(ctx, "alice", t0.Add(24*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, int64(11), got[0].Tokens)

	require.NoError(t, st.Close())
	_, err = st.Spent(ctx, "alice", t0)
	assert.ErrorIs(t, err, store.ErrClosed)
}
