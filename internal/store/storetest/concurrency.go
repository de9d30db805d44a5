package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// appendResult is one concurrent append's outcome.
type appendResult struct {
	thread string
	events []event.Event // what Append returned, or what was offered
	err    error
}

// checkLog checks a thread against the appends made to it: gapless seqs,
// every acknowledged append present, contiguous and intact, and every failed
// append either wholly present or wholly absent.
func checkLog(t *testing.T, l store.Log, thread string, results []appendResult) {
	t.Helper()
	all := readAll(t, l, thread)
	requireGapless(t, thread, all)
	last, err := l.LastSeq(t.Context(), thread)
	require.NoError(t, err)
	require.Equal(t, int64(len(all)), last, "LastSeq of %q", thread)
	byID := map[string]event.Event{}
	for _, e := range all {
		_, dup := byID[e.ID]
		require.False(t, dup, "thread %q: id %s twice", thread, e.ID)
		byID[e.ID] = e
	}
	found := 0
	for _, r := range results {
		if r.thread != thread {
			continue
		}
		if r.err == nil {
			for i, e := range r.events {
				require.Equal(t, e, all[e.Seq-1], "acknowledged event in the log")
				if i > 0 {
					require.Equal(t, r.events[i-1].Seq+1, e.Seq, "one append's events are contiguous")
				}
			}
			found += len(r.events)
			continue
		}
		// A failed append: all or nothing, and if all, contiguous.
		present := 0
		for _, e := range r.events {
			if _, ok := byID[e.ID]; ok {
				present++
			}
		}
		require.True(t, present == 0 || present == len(r.events),
			"thread %q: failed append (%v) is partly committed: %d of %d events", thread, r.err, present, len(r.events))
		if present > 0 {
			first := byID[r.events[0].ID].Seq
			for i, e := range r.events {
				require.Equal(t, first+int64(i), byID[e.ID].Seq, "failed-but-committed append is contiguous")
			}
			found += present
		}
	}
	require.Equal(t, len(all), found, "thread %q holds events nobody appended", thread)
}

// hammer appends from workers goroutines, each making appends appends of 1 to
// 3 events to thread(worker) through log(worker), with contexts from ctxFor.
// Offered events carry IDs so failed appends can be looked for.
func hammer(t *testing.T, log func(w int) store.Log, workers, appends int, thread func(w int) string,
	ctxFor func(w, i int) (context.Context, context.CancelFunc)) []appendResult {
	t.Helper()
	var (
		mu      sync.Mutex
		results []appendResult
		wg      sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range appends {
				in := make([]event.Event, 1+rng.IntN(3))
				for k := range in {
					in[k] = event.Event{ID: event.NewID(), Run: fmt.Sprintf("w%d-%d", w, i), Payload: delta(k)}
				}
				ctx, cancel := ctxFor(w, i)
				got, err := log(w).Append(ctx, thread(w), in...)
				cancel()
				r := appendResult{thread: thread(w), events: got, err: err}
				if err != nil {
					r.events = in
				}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return results
}

func one(l store.Log) func(int) store.Log { return func(int) store.Log { return l } }

func background(t *testing.T) func(int, int) (context.Context, context.CancelFunc) {
	return func(int, int) (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) }
}

func (s *suite) concurrentOneThread(t *testing.T) {
	l := s.open(t)
	results := hammer(t, one(l), 16, 25, func(int) string { return "shared" }, background(t))
	for _, r := range results {
		require.NoError(t, r.err)
	}
	checkLog(t, l, "shared", results)
}

func (s *suite) concurrentAcrossThreads(t *testing.T) {
	l := s.open(t)
	const workers = 24
	thread := func(w int) string { return fmt.Sprintf("th-%02d", w%12) } // two writers per thread
	results := hammer(t, one(l), workers, 15, thread, background(t))
	for _, r := range results {
		require.NoError(t, r.err)
	}
	for i := range 12 {
		checkLog(t, l, thread(i), results)
	}
	ts, err := l.Threads(t.Context(), "", 100)
	require.NoError(t, err)
	assert.Len(t, ts, 12)
}

// SharedWriters appends through several stores open on the same data, as
// several server processes would, from goroutines goroutines: most to one
// hot thread, the rest spread over a few others so batches lock rows of
// several threads at once. It checks that no seq is duplicated or skipped
// and that every acknowledged append is in the log, intact.
func SharedWriters(t *testing.T, goroutines int, logs ...store.Log) {
	thread := func(w int) string {
		if w%3 == 2 {
			return fmt.Sprintf("shared-%d", w%4)
		}
		return "shared-hot"
	}
	results := hammer(t, func(w int) store.Log { return logs[w%len(logs)] }, goroutines, 20, thread, background(t))
	for _, r := range results {
		require.NoError(t, r.err)
	}
	for _, th := range []string{"shared-hot", "shared-0", "shared-1", "shared-2", "shared-3"} {
		for _, l := range logs {
			checkLog(t, l, th, results)
		}
	}
}

func (s *suite) contextCancellation(t *testing.T) {
	l := s.open(t)
	_, err := l.Append(t.Context(), "c", fresh(1)...)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = l.Append(ctx, "c", fresh(2)...)
	require.ErrorIs(t, err, context.Canceled, "Append with a cancelled context")
	_, err = l.Append(ctx, "c-new", fresh(1)...)
	require.ErrorIs(t, err, context.Canceled)
	_, err = l.Read(ctx, "c", 0, 10)
	assert.ErrorIs(t, err, context.Canceled, "Read")
	_, err = l.LastSeq(ctx, "c")
	assert.ErrorIs(t, err, context.Canceled, "LastSeq")
	_, err = l.Threads(ctx, "", 10)
	assert.ErrorIs(t, err, context.Canceled, "Threads")
	_, err = l.History(ctx, "c")
	assert.ErrorIs(t, err, context.Canceled, "History")

	// Nothing of the cancelled appends was committed.
	last, err := l.LastSeq(t.Context(), "c")
	require.NoError(t, err)
	assert.Equal(t, int64(1), last)
	ts, err := l.Threads(t.Context(), "", 10)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, "c", ts[0].ID)
}

// cancellationUnderLoad cancels appends at random moments while others keep
// committing: the batches they were part of must stay whole and gapless.
func (s *suite) cancellationUnderLoad(t *testing.T) {
	l := s.open(t)
	thread := func(w int) string { return fmt.Sprintf("cl-%d", w%3) }
	ctxFor := func(w, i int) (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(t.Context())
		if (w+i)%2 == 0 {
			// Cancel at a random moment: before, during or after the commit.
			d := time.Duration(rand.IntN(20000)) * time.Microsecond
			timer := time.AfterFunc(d, cancel)
			return ctx, func() { timer.Stop(); cancel() }
		}
		return ctx, cancel
	}
	results := hammer(t, one(l), 12, 20, thread, ctxFor)
	failed := 0
	for _, r := range results {
		if r.err != nil {
			require.ErrorIs(t, r.err, context.Canceled, "the only failure is the caller's own cancellation")
			failed++
		}
	}
	t.Logf("%d of %d appends cancelled", failed, len(results))
	for i := range 3 {
		checkLog(t, l, thread(i), results)
	}
}

func (s *suite) close(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	_, err := l.Append(ctx, "x", fresh(1)...)
	require.NoError(t, err)
	require.NoError(t, l.Close())

	_, err = l.Append(ctx, "x", fresh(1)...)
	assert.ErrorIs(t, err, store.ErrClosed, "Append after Close")
	_, err = l.Read(ctx, "x", 0, 10)
	assert.ErrorIs(t, err, store.ErrClosed, "Read after Close")
	_, err = l.LastSeq(ctx, "x")
	assert.ErrorIs(t, err, store.ErrClosed, "LastSeq after Close")
	_, err = l.Threads(ctx, "", 10)
	assert.ErrorIs(t, err, store.ErrClosed, "Threads after Close")
	_, err = l.History(ctx, "x")
	assert.ErrorIs(t, err, store.ErrClosed, "History after Close")
	assert.NoError(t, l.Close(), "second Close")
}

// closeWithAppendsInFlight closes while appends are running: each either
// commits or fails with ErrClosed, nothing hangs.
func (s *suite) closeWithAppendsInFlight(t *testing.T) {
	l := s.open(t)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, shut int
		started  = make(chan struct{}, 8)
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := l.Append(t.Context(), fmt.Sprintf("cf-%d", w), fresh(2)...)
				if i == 0 {
					started <- struct{}{}
				}
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, store.ErrClosed):
					shut++
				default:
					t.Errorf("Append during Close: %v, want nil or ErrClosed", err)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	for range 8 {
		<-started
	}
	require.NoError(t, l.Close())
	wg.Wait()
	assert.Equal(t, 8, shut, "every writer ends with ErrClosed")
	assert.Positive(t, ok)
}

func (s *suite) reopenKeepsData(t *testing.T) {
	if s.reopen == nil {
		t.Skip("this backend keeps nothing across Close")
	}
	l, again := s.reopen(t)
	ctx := t.Context()
	var in []event.Event
	for _, typ := range event.Types {
		in = append(in, event.Event{Run: "r", Payload: Sample(typ)})
	}
	first, err := l.Append(ctx, "re", in...)
	require.NoError(t, err)
	_, err = l.Append(ctx, "re-2", fresh(3)...)
	require.NoError(t, err)
	threadsBefore, err := l.Threads(ctx, "", 10)
	require.NoError(t, err)
	claim := store.RunClaim{Thread: "re", Run: "r", Node: "node-a"}
	require.NoError(t, l.ClaimRun(ctx, claim, time.Hour))
	queued := store.QueuedInput{Run: "r2", MessageID: "m2", Text: "next", Interactive: true, Options: event.RunOptions{Strategy: "tot"}}
	require.NoError(t, l.EnqueueInput(ctx, "re", queued))
	require.NoError(t, l.Close())

	l2 := again(t)
	got2, ok, err := l2.ActiveRun(ctx, "re")
	require.NoError(t, err)
	require.True(t, ok, "the claim survives a restart")
	assert.Equal(t, claim.Run, got2.Run)
	assert.Equal(t, claim.Node, got2.Node)
	requeued, ok, err := l2.DequeueInput(ctx, "re")
	require.NoError(t, err)
	require.True(t, ok, "queued input survives a restart")
	assert.Equal(t, queued, requeued)
	got := readAll(t, l2, "re")
	assert.Equal(t, first, got)
	threadsAfter, err := l2.Threads(ctx, "", 10)
	require.NoError(t, err)
	assert.Equal(t, threadsBefore, threadsAfter)
	// Appends continue the sequence.
	more, err := l2.Append(ctx, "re", fresh(2)...)
	require.NoError(t, err)
	assert.Equal(t, int64(len(in)+1), more[0].Seq)
	assert.Equal(t, int64(len(in)+2), more[1].Seq)
	require.NoError(t, l2.Close())
}
