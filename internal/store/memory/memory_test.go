package memory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/memory"
	"github.com/agentwire/agentwire/internal/store/storetest"
)

// TestLog runs the suite every store.Log passes.
func TestLog(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		l := memory.New()
		t.Cleanup(func() { _ = l.Close() })
		return l
	})
}

func delta(text string) event.Event {
	return event.Event{Run: "r", Payload: event.MessageDelta{MessageID: "m", Text: text}}
}

func seqs(es []event.Event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func TestAppendAssignsSeqIDTime(t *testing.T) {
	ctx := t.Context()
	l := memory.New()
	defer l.Close()

	given := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	first, err := l.Append(ctx, "t", delta("a"), event.Event{ID: "keep", Time: given, Payload: event.MessageDelta{Text: "b"}})
	require.NoError(t, err)
	require.Len(t, first, 2)
	assert.Equal(t, []int64{1, 2}, seqs(first))
	assert.NotEmpty(t, first[0].ID, "ID filled in")
	assert.False(t, first[0].Time.IsZero(), "Time filled in")
	assert.Equal(t, "keep", first[1].ID, "given ID kept")
	assert.True(t, first[1].Time.Equal(given.Truncate(time.Microsecond)), "Time = %v, want %v to the microsecond", first[1].Time, given)
	assert.Equal(t, time.UTC, first[1].Time.Location())
	for _, e := range first {
		assert.Equal(t, "t", e.Thread)
	}

	second, err := l.Append(ctx, "t", delta("c"))
	require.NoError(t, err)
	assert.Equal(t, []int64{3}, seqs(second))
	other, err := l.Append(ctx, "u", delta("x"))
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, seqs(other), "another thread counts from 1")

	got, err := l.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	assert.Equal(t, append(first, second...), got, "Read returns what Append committed")
}

func TestAppendRejectsAndCommitsNothing(t *testing.T) {
	ctx := t.Context()
	l := memory.New()
	defer l.Close()

	cases := map[string][]event.Event{
		"nil payload":  {delta("ok"), {}},
		"other thread": {delta("ok"), {Thread: "u", Payload: event.MessageDelta{}}},
	}
	for name, evs := range cases {
		_, err := l.Append(ctx, "t", evs...)
		assert.Error(t, err, name)
	}
	_, err := l.Append(ctx, "", delta("x"))
	assert.Error(t, err, "empty thread id")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Append(cancelled, "t", delta("x"))
	assert.ErrorIs(t, err, context.Canceled)

	last, err := l.LastSeq(ctx, "t")
	require.NoError(t, err)
	assert.Zero(t, last, "LastSeq after refused appends")

	none, err := l.Append(ctx, "t")
	assert.NoError(t, err)
	assert.Empty(t, none)
}

func TestRead(t *testing.T) {
	ctx := t.Context()
	l := memory.New()
	defer l.Close()
	for i := range 10 {
		_, err := l.Append(ctx, "t", delta(fmt.Sprint(i)))
		require.NoError(t, err)
	}
	tests := []struct {
		after int64
		limit int
		want  []int64
	}{
		{0, 3, []int64{1, 2, 3}},
		{3, 3, []int64{4, 5, 6}},
		{8, 5, []int64{9, 10}},
		{10, 5, []int64{}},
		{50, 5, []int64{}},
		{-4, 2, []int64{1, 2}},
	}
	for _, tt := range tests {
		got, err := l.Read(ctx, "t", tt.after, tt.limit)
		require.NoError(t, err)
		assert.Equal(t, tt.want, seqs(got), "Read(after %d, limit %d)", tt.after, tt.limit)
	}
	got, err := l.Read(ctx, "unknown", 0, 5)
	require.NoError(t, err)
	assert.Empty(t, got, "Read of an unknown thread")
	_, err = l.Read(ctx, "t", 0, 0)
	assert.Error(t, err, "Read with limit 0")
	e, err := l.Read(ctx, "t", 4, 1)
	require.NoError(t, err)
	assert.Equal(t, event.MessageDelta{MessageID: "m", Text: "4"}, e[0].Payload)
}

func TestHistory(t *testing.T) {
	ctx := t.Context()
	l := memory.New()
	defer l.Close()
	_, err := l.Append(ctx, "t",
		event.Event{Payload: event.RunStarted{}},
		event.Event{Payload: event.MessageUser{MessageID: "u", Text: "hi"}},
		delta("he"),
		event.Event{Payload: event.MessageCompleted{MessageID: "m", Role: event.RoleAssistant, Text: "hello"}},
		event.Event{Payload: event.Usage{}},
		event.Event{Payload: event.NodeEntered{Node: "think"}},
	)
	require.NoError(t, err)
	hist, err := l.History(ctx, "t")
	require.NoError(t, err)
	var types []event.Type
	for _, e := range hist {
		types = append(types, e.Type())
	}
	assert.Equal(t, []event.Type{event.TypeRunStarted, event.TypeMessageUser, event.TypeMessageCompleted, event.TypeUsage}, types)
	assert.Equal(t, []int64{1, 2, 4, 5}, seqs(hist))
}

func TestThreads(t *testing.T) {
	ctx := t.Context()
	l := memory.New()
	defer l.Close()
	for _, id := range []string{"c", "a", "b", "a"} {
		_, err := l.Append(ctx, id, delta(id))
		require.NoError(t, err)
	}
	page, err := l.Threads(ctx, "", 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	assert.Equal(t, "a", page[0].ID)
	assert.Equal(t, int64(2), page[0].LastSeq)
	assert.False(t, page[0].Created.After(page[0].Updated), "Created after Updated")
	assert.Equal(t, "b", page[1].ID)
	rest, err := l.Threads(ctx, "b", 2)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	assert.Equal(t, "c", rest[0].ID)
}

func TestConcurrentAppendsAreGapless(t *testing.T) {
	ctx := t.Context()
	l := memory.New()
	defer l.Close()
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				_, err := l.Append(ctx, "t", delta("a"), delta("b"))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	got, err := l.Read(ctx, "t", 0, writers*each*2+1)
	require.NoError(t, err)
	require.Len(t, got, writers*each*2)
	for i, e := range got {
		require.Equal(t, int64(i+1), e.Seq)
		// An append's two events stay together.
		want := "a"
		if i%2 == 1 {
			want = "b"
		}
		require.Equal(t, want, e.Payload.(event.MessageDelta).Text, "seq %d", e.Seq)
	}
}

func TestClose(t *testing.T) {
	ctx := t.Context()
	l := memory.New()
	_, err := l.Append(ctx, "t", delta("a"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "second Close")

	_, err = l.Append(ctx, "t", delta("b"))
	assert.ErrorIs(t, err, store.ErrClosed, "Append")
	_, err = l.Read(ctx, "t", 0, 1)
	assert.ErrorIs(t, err, store.ErrClosed, "Read")
	_, err = l.LastSeq(ctx, "t")
	assert.ErrorIs(t, err, store.ErrClosed, "LastSeq")
	_, err = l.Threads(ctx, "", 1)
	assert.ErrorIs(t, err, store.ErrClosed, "Threads")
	_, err = l.History(ctx, "t")
	assert.ErrorIs(t, err, store.ErrClosed, "History")
}
