package bus

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
)

func seqEvents(first int64, n int) []event.Event {
	out := make([]event.Event, n)
	for i := range out {
		out[i].Seq = first + int64(i)
	}
	return out
}

// TestQueueNeverDrainedStaysSmall keeps a queue partly full for a long time:
// its memory must stay near its limit rather than grow with the number of
// events that passed through.
func TestQueueNeverDrainedStaysSmall(t *testing.T) {
	const limit = 8
	q := NewQueue(limit)
	ctx := t.Context()
	var next, want int64 = 1, 1
	push := func(n int) {
		require.True(t, q.Push(seqEvents(next, n)), "Push at seq %d", next)
		next += int64(n)
	}
	push(4)
	for range 10000 {
		push(3)
		for range 3 {
			e, err := q.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, want, e.Seq)
			want++
		}
	}
	assert.LessOrEqual(t, cap(q.items), 2*limit, "queue capacity after 30000 events")
}

// TestQueueDrainedLetsBurstGo drains a queue after a burst: an idle
// subscriber (a session between turns) must not keep the space its
// longest burst needed.
func TestQueueDrainedLetsBurstGo(t *testing.T) {
	q := NewQueue(1000)
	require.True(t, q.Push(seqEvents(1, 200)))
	for want := int64(1); want <= 200; want++ {
		e, ok, err := q.TryNext()
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, want, e.Seq)
	}
	assert.LessOrEqual(t, cap(q.items), keptCap, "queue capacity once drained after a burst of 200")
	// A small queue keeps its space: a subscriber that keeps up does not
	// allocate for every event.
	require.True(t, q.Push(seqEvents(201, 2)))
	_, _, _ = q.TryNext()
	_, _, _ = q.TryNext()
	assert.Positive(t, cap(q.items), "queue capacity once drained after 2 events")
}

func TestQueueOverflowEnds(t *testing.T) {
	q := NewQueue(3)
	require.True(t, q.Push(seqEvents(1, 2)))
	assert.False(t, q.Push(seqEvents(3, 2)), "Push past the limit")
	assert.False(t, q.Push(seqEvents(5, 1)), "Push after overflow")
	_, err := q.Next(t.Context())
	assert.ErrorIs(t, err, ErrSlowConsumer)

	q = NewQueue(3)
	require.True(t, q.Push(seqEvents(1, 3)), "Push up to the limit")
}

func TestQueueNextWaits(t *testing.T) {
	q := NewQueue(3)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := q.Next(ctx)
	assert.ErrorIs(t, err, context.Canceled, "Next on an empty queue with a done context")

	got := make(chan int64)
	go func() {
		e, err := q.Next(t.Context())
		assert.NoError(t, err)
		got <- e.Seq
	}()
	q.Push(seqEvents(7, 1))
	assert.Equal(t, int64(7), <-got)

	ended := make(chan error)
	go func() {
		_, err := q.Next(t.Context())
		ended <- err
	}()
	q.End(ErrClosed)
	assert.ErrorIs(t, <-ended, ErrClosed)
}

// TestQueueOfferDropsRatherThanEnds: an offer to a full queue is dropped
// and the queue stays open; one that fits is delivered in its place.
func TestQueueOfferDropsRatherThanEnds(t *testing.T) {
	q := NewQueue(2)
	require.True(t, q.Push(seqEvents(1, 1)))
	q.Offer(event.Event{Preview: 1})
	q.Offer(event.Event{Preview: 1, ID: "dropped"}) // full
	require.True(t, q.Push(nil), "still open")
	for _, want := range []event.Event{{Seq: 1}, {Preview: 1}} {
		e, err := q.Next(t.Context())
		require.NoError(t, err)
		assert.Equal(t, want, e)
	}
	require.True(t, q.Push(seqEvents(2, 2)), "room again")
	assert.False(t, q.Push(seqEvents(4, 1)), "a push that does not fit still ends it")
}

// TestQueueTryNextAndNotify: Notify's function is called for every push,
// offer and the end; TryNext takes what waits without waiting, says when
// nothing does, and once the queue ended returns why.
func TestQueueTryNextAndNotify(t *testing.T) {
	q := NewQueue(4)
	notified := 0
	q.Notify(func() { notified++ })
	_, ok, err := q.TryNext()
	require.NoError(t, err)
	assert.False(t, ok, "an empty queue has nothing")

	q.Push([]event.Event{{Seq: 1}, {Seq: 2}})
	q.Offer(event.Event{Preview: 2})
	assert.Equal(t, 2, notified)
	for _, want := range []event.Event{{Seq: 1}, {Seq: 2}, {Preview: 2}} {
		e, ok, err := q.TryNext()
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, want, e)
	}
	_, ok, err = q.TryNext()
	require.NoError(t, err)
	assert.False(t, ok)

	q.End(ErrSlowConsumer)
	assert.Equal(t, 3, notified)
	_, ok, err = q.TryNext()
	assert.False(t, ok)
	assert.ErrorIs(t, err, ErrSlowConsumer)
}
