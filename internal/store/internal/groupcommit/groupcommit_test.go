package groupcommit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

func ev() event.Event { return event.Event{Payload: event.RunCancelled{}} }

// TestBatchesShareOneFlush holds the writer in a flush while many appends
// queue, then checks they were committed together and each got its answer.
func TestBatchesShareOneFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var batches []int // written by the writer goroutine only
		c := New(func(ctx context.Context, batch []*Append) error {
			if len(batches) == 0 {
				<-release
			}
			batches = append(batches, len(batch))
			for _, a := range batch {
				for i := range a.Events {
					a.Events[i].Seq = int64(i + 1)
				}
			}
			return nil
		}, Options{})

		var wg sync.WaitGroup
		wg.Go(func() {
			_, err := c.Append(t.Context(), "first", []event.Event{ev()})
			assert.NoError(t, err)
		})
		synctest.Wait() // the writer holds "first" in its flush
		for range 20 {
			wg.Go(func() {
				got, err := c.Append(t.Context(), "t", []event.Event{ev(), ev()})
				if assert.NoError(t, err) {
					assert.Equal(t, int64(2), got[1].Seq)
				}
			})
		}
		synctest.Wait() // all 20 wait to be taken
		close(release)
		wg.Wait()
		c.Close()
		require.Equal(t, []int{1, 20}, batches)
	})
}

// TestWritesShareTheBatch: writes (Do) join the batch of the appends
// waiting beside them, and a write's own failure (Err) reaches its caller
// alone.
func TestWritesShareTheBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		mine := errors.New("this write failed")
		var batches [][]string // written by the writer goroutine only
		c := New(func(ctx context.Context, batch []*Append) error {
			if len(batches) == 0 {
				<-release
			}
			var kinds []string
			for _, a := range batch {
				switch w := a.Write.(type) {
				case nil:
					kinds = append(kinds, "append")
				case string:
					kinds = append(kinds, w)
					if w == "bad" {
						a.Err = mine
					}
				}
			}
			batches = append(batches, kinds)
			return nil
		}, Options{})

		var wg sync.WaitGroup
		wg.Go(func() {
			_, err := c.Append(t.Context(), "first", []event.Event{ev()})
			assert.NoError(t, err)
		})
		synctest.Wait() // the writer holds "first" in its flush
		wg.Go(func() { assert.NoError(t, c.Do(t.Context(), "good")) })
		synctest.Wait()
		wg.Go(func() { assert.ErrorIs(t, c.Do(t.Context(), "bad"), mine) })
		synctest.Wait()
		wg.Go(func() {
			_, err := c.Append(t.Context(), "t", []event.Event{ev()})
			assert.NoError(t, err)
		})
		synctest.Wait()
		close(release)
		wg.Wait()
		c.Close()
		require.Len(t, batches, 2)
		assert.ElementsMatch(t, []string{"good", "bad", "append"}, batches[1])
		assert.Error(t, c.Do(t.Context(), nil), "nothing to write")
	})
}

func TestFlushErrorReachesEveryCaller(t *testing.T) {
	boom := errors.New("disk full")
	c := New(func(context.Context, []*Append) error { return boom }, Options{})
	defer c.Close()
	_, err := c.Append(t.Context(), "t", []event.Event{ev()})
	require.ErrorIs(t, err, boom)
}

func TestCancelledBeforeBatchIsNotFlushed(t *testing.T) {
	flushed := 0
	c := New(func(_ context.Context, batch []*Append) error { flushed += len(batch); return nil }, Options{})
	defer c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Append(ctx, "t", []event.Event{ev()})
	require.ErrorIs(t, err, context.Canceled)
	c.Close()
	require.Zero(t, flushed)
}

func TestCloseRefusesNewAppends(t *testing.T) {
	c := New(func(context.Context, []*Append) error { return nil }, Options{})
	c.Close()
	c.Close() // twice is fine
	_, err := c.Append(t.Context(), "t", []event.Event{ev()})
	require.ErrorIs(t, err, store.ErrClosed)
}

func TestPrepare(t *testing.T) {
	a, err := Prepare("t", nil)
	require.NoError(t, err)
	require.Nil(t, a)
	_, err = Prepare("", []event.Event{ev()})
	require.Error(t, err)
	_, err = Prepare("t", []event.Event{{Payload: nil}})
	require.Error(t, err)
	_, err = Prepare("t", []event.Event{{Thread: "u", Payload: event.RunCancelled{}}})
	require.Error(t, err)
	a, err = Prepare("t", []event.Event{ev()})
	require.NoError(t, err)
	require.Equal(t, "t", a.Events[0].Thread)
	require.NotEmpty(t, a.Events[0].ID)
	require.JSONEq(t, `{}`, string(a.Data[0]))
}
