// Package storetest is the behavioural suite every store.Log must pass. Each
// backend runs the same Run against itself, so "same semantics" is checked,
// not promised. Crash (crash.go) adds the kill -9 durability test for the
// backends that persist.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// Option adds to the suite what only some backends support.
type Option func(*suite)

// WithReopen enables the reopen test. open returns a fresh store and a
// function that opens the same data again once the first store is closed.
func WithReopen(open func(t *testing.T) (store.Store, func(t *testing.T) store.Store)) Option {
	return func(s *suite) { s.reopen = open }
}

type suite struct {
	open   func(t *testing.T) store.Store
	reopen func(t *testing.T) (store.Store, func(t *testing.T) store.Store)
}

// Run runs the suite. open must return a new, empty store for each call and
// close it in t.Cleanup (the suite closes some stores itself; Close must
// tolerate being called again).
func Run(t *testing.T, open func(t *testing.T) store.Store, opts ...Option) {
	s := &suite{open: open}
	for _, o := range opts {
		o(s)
	}
	t.Run("AppendAssignsGaplessSeq", s.appendAssignsGaplessSeq)
	t.Run("AppendKeepsGivenFields", s.appendKeepsGivenFields)
	t.Run("AppendIsAtomic", s.appendIsAtomic)
	t.Run("AppendRejectsBadInput", s.appendRejectsBadInput)
	t.Run("ReadPagination", s.readPagination)
	t.Run("LastSeq", s.lastSeq)
	t.Run("UnknownThread", s.unknownThread)
	t.Run("Threads", s.threads)
	t.Run("History", s.history)
	t.Run("PayloadRoundTrip", s.payloadRoundTrip)
	t.Run("ConcurrentAppendsOneThread", s.concurrentOneThread)
	t.Run("ConcurrentAppendsAcrossThreads", s.concurrentAcrossThreads)
	t.Run("ContextCancellation", s.contextCancellation)
	t.Run("CancellationUnderLoad", s.cancellationUnderLoad)
	t.Run("Close", s.close)
	t.Run("CloseWithAppendsInFlight", s.closeWithAppendsInFlight)
	t.Run("Reopen", s.reopenKeepsData)
	t.Run("RunClaims", s.runClaims)
	t.Run("ClaimAndAppend", s.claimAndAppend)
	t.Run("RunLeases", s.runLeases)
	t.Run("RunClaimsRace", s.runClaimsRace)
	t.Run("RunQueue", s.runQueue)
	t.Run("RunsAfterClose", s.runsAfterClose)
	t.Run("Owners", s.owners)
}

// delta returns a numbered message delta, the most common event.
func delta(i int) event.Payload {
	return event.MessageDelta{MessageID: "m", Text: fmt.Sprintf("chunk %d", i)}
}

// fresh returns n new events without Seq, ID or Time.
func fresh(n int) []event.Event {
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{Run: "run-1", Payload: delta(i)}
	}
	return evs
}

// readAll reads the whole thread in small pages, checking page bounds.
func readAll(t *testing.T, l store.Log, thread string) []event.Event {
	t.Helper()
	const page = 7
	var all []event.Event
	for {
		got, err := l.Read(t.Context(), thread, int64(len(all)), page)
		require.NoError(t, err, "Read(%q, %d, %d)", thread, len(all), page)
		require.LessOrEqual(t, len(got), page, "Read returned more than limit")
		all = append(all, got...)
		if len(got) < page {
			return all
		}
	}
}

// requireGapless checks that evs are the thread's events 1..len(evs).
func requireGapless(t *testing.T, thread string, evs []event.Event) {
	t.Helper()
	for i, e := range evs {
		require.Equal(t, int64(i+1), e.Seq, "thread %q: event %d has seq %d", thread, i, e.Seq)
		require.Equal(t, thread, e.Thread)
	}
}

func (s *suite) appendAssignsGaplessSeq(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	before := time.Now().UTC().Truncate(time.Microsecond)
	var committed []event.Event
	for _, n := range []int{1, 3, 1, 5} {
		in := fresh(n)
		got, err := l.Append(ctx, "t1", in...)
		require.NoError(t, err)
		require.Len(t, got, n)
		for i, e := range got {
			assert.Equal(t, int64(len(committed)+i+1), e.Seq, "seq")
			assert.Equal(t, "t1", e.Thread)
			assert.NotEmpty(t, e.ID, "ID filled in")
			assert.Equal(t, time.UTC, e.Time.Location(), "Time in UTC")
			assert.Equal(t, e.Time, e.Time.Truncate(time.Microsecond), "Time to the microsecond")
			assert.False(t, e.Time.Before(before), "Time %v before the append began (%v)", e.Time, before)
			assert.Equal(t, in[i].Payload, e.Payload)
			assert.Equal(t, "run-1", e.Run)
		}
		// The caller's events are left alone.
		for _, e := range in {
			assert.Zero(t, e.Seq)
			assert.Empty(t, e.ID)
			assert.True(t, e.Time.IsZero())
		}
		committed = append(committed, got...)
	}
	ids := map[string]bool{}
	for _, e := range committed {
		require.False(t, ids[e.ID], "duplicate ID %s", e.ID)
		ids[e.ID] = true
	}
	got := readAll(t, l, "t1")
	requireGapless(t, "t1", got)
	require.Equal(t, committed, got, "Read returns what Append returned")
}

func (s *suite) appendKeepsGivenFields(t *testing.T) {
	l := s.open(t)
	when := time.Date(2024, 2, 29, 23, 59, 58, 123456789, time.FixedZone("x", 5*3600))
	in := event.Event{Thread: "keep", Seq: 99, ID: "01HZZZZZZZZZZZZZZZZZZZZZZZ", Run: "r", Time: when, Payload: delta(1)}
	got, err := l.Append(t.Context(), "keep", in)
	require.NoError(t, err)
	require.Len(t, got, 1)
	want := in
	want.Seq = 1 // the store assigns seq whatever the caller put there
	want.Time = time.Date(2024, 2, 29, 18, 59, 58, 123456000, time.UTC)
	assert.Equal(t, want, got[0])
	read, err := l.Read(t.Context(), "keep", 0, 10)
	require.NoError(t, err)
	assert.Equal(t, []event.Event{want}, read)
}

func (s *suite) appendIsAtomic(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	_, err := l.Append(ctx, "atomic", fresh(2)...)
	require.NoError(t, err)

	// One bad event fails the whole append: nothing of it is committed.
	bad := fresh(4)
	bad[2].Payload = nil
	_, err = l.Append(ctx, "atomic", bad...)
	require.Error(t, err, "Append with a nil payload")
	last, err := l.LastSeq(ctx, "atomic")
	require.NoError(t, err)
	assert.Equal(t, int64(2), last, "a failed append leaves the log as it was")

	// A multi-event append lands contiguous and in order.
	in := make([]event.Event, 50)
	for i := range in {
		in[i] = event.Event{Payload: delta(100 + i)}
	}
	got, err := l.Append(ctx, "atomic", in...)
	require.NoError(t, err)
	all := readAll(t, l, "atomic")
	requireGapless(t, "atomic", all)
	require.Len(t, all, 52)
	assert.Equal(t, got, all[2:])
}

func (s *suite) appendRejectsBadInput(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	_, err := l.Append(ctx, "", fresh(1)...)
	assert.Error(t, err, "Append to an empty thread id")

	other := fresh(1)
	other[0].Thread = "elsewhere"
	_, err = l.Append(ctx, "here", other...)
	assert.Error(t, err, "Append of an event of another thread")

	got, err := l.Append(ctx, "here")
	assert.NoError(t, err, "Append of no events")
	assert.Empty(t, got)

	for _, th := range []string{"here", "elsewhere"} {
		last, err := l.LastSeq(ctx, th)
		require.NoError(t, err)
		assert.Zero(t, last, "thread %q after rejected appends", th)
	}
	threads, err := l.Threads(ctx, "", 10)
	require.NoError(t, err)
	assert.Empty(t, threads, "rejected appends create no thread")
}

func (s *suite) readPagination(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	appended, err := l.Append(ctx, "pages", fresh(25)...)
	require.NoError(t, err)
	_, err = l.Append(ctx, "other", fresh(3)...)
	require.NoError(t, err)

	for _, tc := range []struct {
		after      int64
		limit      int
		wantFirst  int64
		wantLength int
	}{
		{0, 10, 1, 10},
		{10, 10, 11, 10},
		{20, 10, 21, 5},
		{24, 1, 25, 1},
		{25, 10, 0, 0},
		{1000, 10, 0, 0},
		{-5, 3, 1, 3},
		{0, 1000, 1, 25},
	} {
		got, err := l.Read(ctx, "pages", tc.after, tc.limit)
		require.NoError(t, err, "Read(pages, %d, %d)", tc.after, tc.limit)
		require.Len(t, got, tc.wantLength, "Read(pages, %d, %d)", tc.after, tc.limit)
		if tc.wantLength > 0 {
			assert.Equal(t, appended[tc.wantFirst-1:tc.wantFirst-1+int64(tc.wantLength)], got,
				"Read(pages, %d, %d)", tc.after, tc.limit)
		}
	}
	for _, limit := range []int{0, -1} {
		_, err := l.Read(ctx, "pages", 0, limit)
		assert.Error(t, err, "Read with limit %d", limit)
	}
}

func (s *suite) lastSeq(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	for i, n := range []int{1, 4, 2} {
		_, err := l.Append(ctx, "ls", fresh(n)...)
		require.NoError(t, err)
		last, err := l.LastSeq(ctx, "ls")
		require.NoError(t, err)
		assert.Equal(t, int64([]int{1, 5, 7}[i]), last)
	}
	last, err := l.LastSeq(ctx, "ls-other")
	require.NoError(t, err)
	assert.Zero(t, last)
}

func (s *suite) unknownThread(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	_, err := l.Append(ctx, "known", fresh(2)...)
	require.NoError(t, err)
	got, err := l.Read(ctx, "unknown", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = l.History(ctx, "unknown")
	require.NoError(t, err)
	assert.Empty(t, got)
	last, err := l.LastSeq(ctx, "unknown")
	require.NoError(t, err)
	assert.Zero(t, last)
	// A prefix of a known thread is still another thread.
	got, err = l.Read(ctx, "know", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func (s *suite) threads(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	empty, err := l.Threads(ctx, "", 10)
	require.NoError(t, err)
	assert.Empty(t, empty)

	// Ids whose byte order differs from dictionary order.
	ids := []string{"a_2", "B", "aa", "a", "a-1", "Z9", "é", "0", "a b"}
	start := time.Now().UTC().Truncate(time.Microsecond)
	for i, id := range ids {
		_, err := l.Append(ctx, id, fresh(i+1)...)
		require.NoError(t, err)
	}
	want := slices.Clone(ids)
	slices.Sort(want) // Go compares strings byte-wise

	all, err := l.Threads(ctx, "", 100)
	require.NoError(t, err)
	var gotIDs []string
	for _, ti := range all {
		gotIDs = append(gotIDs, ti.ID)
		n := slices.Index(ids, ti.ID) + 1
		assert.Equal(t, int64(n), ti.LastSeq, "LastSeq of %q", ti.ID)
		assert.False(t, ti.Created.Before(start), "Created of %q", ti.ID)
		assert.False(t, ti.Updated.Before(ti.Created), "Updated before Created for %q", ti.ID)
		assert.Equal(t, time.UTC, ti.Created.Location())
	}
	require.Equal(t, want, gotIDs, "Threads order")

	// Paging by the last id seen walks the same list.
	var paged []string
	after := ""
	for {
		page, err := l.Threads(ctx, after, 2)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 2)
		for _, ti := range page {
			paged = append(paged, ti.ID)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID
	}
	assert.Equal(t, want, paged, "paged Threads")

	// Appending moves Updated and LastSeq, not Created.
	before := all[slices.Index(gotIDs, "aa")]
	time.Sleep(2 * time.Millisecond) // so the clock visibly moves; not a timing assertion
	_, err = l.Append(ctx, "aa", fresh(1)...)
	require.NoError(t, err)
	page, err := l.Threads(ctx, "a_2", 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, "aa", page[0].ID)
	assert.Equal(t, before.LastSeq+1, page[0].LastSeq)
	assert.Equal(t, before.Created, page[0].Created)
	assert.True(t, page[0].Updated.After(before.Updated), "Updated %v after %v", page[0].Updated, before.Updated)

	for _, limit := range []int{0, -1} {
		_, err := l.Threads(ctx, "", limit)
		assert.Error(t, err, "Threads with limit %d", limit)
	}
}

func (s *suite) history(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	// A whole run: every type once, in an order a run could produce, plus
	// extra deltas between them.
	var in []event.Event
	for i, typ := range event.Types {
		p := Sample(typ)
		require.NotNil(t, p, "storetest.Sample has no payload for %q: add one", typ)
		in = append(in, event.Event{Run: "r", Payload: p})
		if i%3 == 0 {
			in = append(in, event.Event{Run: "r", Payload: delta(i)})
		}
	}
	// Split over several appends, with another thread interleaved.
	var committed []event.Event
	for chunk := range slices.Chunk(in, 5) {
		got, err := l.Append(ctx, "h", chunk...)
		require.NoError(t, err)
		committed = append(committed, got...)
		_, err = l.Append(ctx, "h-other", event.Event{Payload: event.MessageUser{MessageID: "x", Text: "other"}})
		require.NoError(t, err)
	}
	var want []event.Event
	for _, e := range committed {
		if slices.Contains(store.HistoryTypes, e.Type()) {
			want = append(want, e)
		}
	}
	got, err := l.History(ctx, "h")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	for _, e := range got {
		assert.NotContains(t, []event.Type{event.TypeMessageDelta, event.TypeReasoningDelta, event.TypeToolCallDelta}, e.Type())
	}
}

func (s *suite) payloadRoundTrip(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	var in []event.Event
	for _, typ := range event.Types {
		p := Sample(typ)
		require.NotNil(t, p, "storetest.Sample has no payload for %q: add one", typ)
		require.Equal(t, typ, p.EventType())
		in = append(in, event.Event{Run: "r", Payload: p})
	}
	got, err := l.Append(ctx, "rt", in...)
	require.NoError(t, err)
	read, err := l.Read(ctx, "rt", 0, len(in))
	require.NoError(t, err)
	require.Len(t, read, len(in))
	for i := range in {
		assert.Equal(t, in[i].Payload, read[i].Payload, "round trip of %s", in[i].Type())
		assert.Equal(t, got[i], read[i], "round trip of %s", in[i].Type())
	}
}

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

// lease is long enough that no claim of the tests below expires unless
// the test means it to.
const lease = time.Hour

// runClaims walks a thread's claim through the life of its runs: claimed
// by one node, refused to every other claim, moved to the next run by its
// owner only, released only by the claim that holds it.
func (s *suite) runClaims(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	active := func(thread string) (store.RunClaim, bool) {
		t.Helper()
		c, ok, err := l.ActiveRun(ctx, thread)
		require.NoError(t, err, "ActiveRun(%q)", thread)
		return c, ok
	}
	_, ok := active("t1")
	assert.False(t, ok, "no claim before any run")

	before := time.Now().UTC().Add(-time.Second)
	a1 := store.RunClaim{Thread: "t1", Run: "r1", Node: "node-a"}
	require.NoError(t, l.ClaimRun(ctx, a1, lease))
	got, ok := active("t1")
	require.True(t, ok)
	assert.Equal(t, a1.Run, got.Run)
	assert.Equal(t, a1.Node, got.Node)
	assert.Equal(t, time.UTC, got.Since.Location())
	assert.False(t, got.Since.Before(before), "Since %v is before the claim", got.Since)
	assert.True(t, got.Expires.After(got.Since.Add(lease/2)), "the lease runs from the claim: %v to %v", got.Since, got.Expires)
	assert.False(t, got.Expired)

	assert.ErrorIs(t, l.ClaimRun(ctx, store.RunClaim{Thread: "t1", Run: "r9", Node: "node-b"}, lease), store.ErrRunClaimed,
		"another node's claim")
	assert.ErrorIs(t, l.ClaimRun(ctx, store.RunClaim{Thread: "t1", Run: "r9", Node: "node-a"}, lease), store.ErrRunClaimed,
		"a second claim of the same node")
	a2 := store.RunClaim{Thread: "t1", Run: "r2", Node: "node-a"}
	assert.ErrorIs(t, l.MoveRun(ctx, store.RunClaim{Thread: "t1", Run: "r2", Node: "node-b"}, "r1", lease), store.ErrRunClaimed,
		"another node moving the claim")
	assert.ErrorIs(t, l.MoveRun(ctx, a2, "r0", lease), store.ErrRunClaimed, "moving from a run the claim does not name")
	require.NoError(t, l.MoveRun(ctx, a2, "r1", lease), "the owner moves its claim to its next run")
	got, _ = active("t1")
	assert.Equal(t, "r2", got.Run)

	require.NoError(t, l.ReleaseRun(ctx, a1), "releasing a run the claim no longer names")
	require.NoError(t, l.ReleaseRun(ctx, store.RunClaim{Thread: "t1", Run: "r2", Node: "node-b"}), "another node releasing")
	got, ok = active("t1")
	require.True(t, ok, "neither release removed the claim")
	assert.Equal(t, "r2", got.Run)

	require.NoError(t, l.ClaimRun(ctx, store.RunClaim{Thread: "t0", Run: "r0", Node: "node-b"}, lease))
	claims, err := l.RunClaims(ctx)
	require.NoError(t, err)
	require.Len(t, claims, 2)
	assert.Equal(t, []string{"t0", "t1"}, []string{claims[0].Thread, claims[1].Thread}, "ordered by thread")
	assert.Equal(t, "r2", claims[1].Run)

	require.NoError(t, l.ReleaseRun(ctx, a2))
	_, ok = active("t1")
	assert.False(t, ok, "released")
	require.NoError(t, l.ClaimRun(ctx, store.RunClaim{Thread: "t1", Run: "r3", Node: "node-b"}, lease), "a free thread can be claimed by anyone")

	for _, bad := range []store.RunClaim{{Run: "r", Node: "n"}, {Thread: "t", Node: "n"}, {Thread: "t", Run: "r"}} {
		assert.Error(t, l.ClaimRun(ctx, bad, lease), "ClaimRun(%+v)", bad)
	}
}

// claimAndAppend claims threads and appends their first events in one
// commit: on a new thread, on a thread with events, and on one another
// claim holds (nothing is appended), with plain appends before and after
// that must number on from where the claimed append left the thread.
func (s *suite) claimAndAppend(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	c := store.RunClaim{Thread: "t1", Run: "r1", Node: "node-a"}
	got, err := l.ClaimAndAppend(ctx, c, lease, fresh(2)...)
	require.NoError(t, err)
	requireGapless(t, "t1", got)
	claim, ok, err := l.ActiveRun(ctx, "t1")
	require.NoError(t, err)
	require.True(t, ok, "claimed")
	assert.Equal(t, "r1", claim.Run)

	_, err = l.ClaimAndAppend(ctx, store.RunClaim{Thread: "t1", Run: "r2", Node: "node-b"}, lease, fresh(1)...)
	assert.ErrorIs(t, err, store.ErrRunClaimed)
	last, err := l.LastSeq(ctx, "t1")
	require.NoError(t, err)
	assert.Equal(t, int64(2), last, "a refused claim appended its events")

	// Appends before and after the next claimed append number on without
	// a gap or a clash, whatever a backend's writer remembered of the
	// thread.
	_, err = l.Append(ctx, "t1", fresh(3)...)
	require.NoError(t, err)
	require.NoError(t, l.ReleaseRun(ctx, c))
	got, err = l.ClaimAndAppend(ctx, store.RunClaim{Thread: "t1", Run: "r3", Node: "node-a"}, lease, fresh(1)...)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, int64(6), got[0].Seq)
	_, err = l.Append(ctx, "t1", fresh(2)...)
	require.NoError(t, err)
	requireGapless(t, "t1", readAll(t, l, "t1"))

	// A claim with no events is a claim.
	got, err = l.ClaimAndAppend(ctx, store.RunClaim{Thread: "t2", Run: "r4", Node: "node-a"}, lease)
	require.NoError(t, err)
	assert.Empty(t, got)
	_, ok, err = l.ActiveRun(ctx, "t2")
	require.NoError(t, err)
	assert.True(t, ok)

	_, err = l.ClaimAndAppend(ctx, store.RunClaim{Thread: "t3", Node: "n"}, lease, fresh(1)...)
	assert.Error(t, err, "a claim without a run")
}

// runLeases lets a claim's lease run out: renewing keeps a node's claims,
// an expired claim is taken over by one node, and a live one by none.
func (s *suite) runLeases(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	require.NoError(t, l.ClaimRun(ctx, store.RunClaim{Thread: "live", Run: "r1", Node: "node-a"}, lease))
	dying := store.RunClaim{Thread: "dying", Run: "r2", Node: "node-a"}
	require.NoError(t, l.ClaimRun(ctx, dying, time.Millisecond))
	require.NoError(t, l.ClaimRun(ctx, store.RunClaim{Thread: "other", Run: "r3", Node: "node-b"}, lease))

	assert.ErrorIs(t, l.TakeOverRun(ctx, store.RunClaim{Thread: "live", Run: "r1", Node: "node-a"}, "node-c", lease),
		store.ErrRunClaimed, "a live claim is not taken over")
	var expired store.RunClaim
	require.Eventually(t, func() bool {
		c, ok, err := l.ActiveRun(ctx, "dying")
		expired = c
		return err == nil && ok && c.Expired
	}, 10*time.Second, time.Millisecond, "the lease of a millisecond runs out")
	claims, err := l.RunClaims(ctx)
	require.NoError(t, err)
	for _, c := range claims {
		assert.Equal(t, c.Thread == "dying", c.Expired, "claim %+v", c)
	}

	assert.ErrorIs(t, l.TakeOverRun(ctx, store.RunClaim{Thread: "dying", Run: "r9", Node: "node-a"}, "node-c", lease),
		store.ErrRunClaimed, "a claim read before it changed")
	require.NoError(t, l.TakeOverRun(ctx, expired, "node-c", lease))
	assert.ErrorIs(t, l.TakeOverRun(ctx, expired, "node-d", lease), store.ErrRunClaimed, "taken over once")
	got, ok, err := l.ActiveRun(ctx, "dying")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "node-c", got.Node)
	assert.Equal(t, "r2", got.Run, "the run stays the dead one's until the new owner ends it")
	assert.False(t, got.Expired)

	renewed, err := l.RenewRuns(ctx, "node-a", 2*lease)
	require.NoError(t, err)
	require.Len(t, renewed, 1, "node-a holds only the live claim now")
	assert.Equal(t, "live", renewed[0].Thread)
	assert.True(t, renewed[0].Expires.After(time.Now().Add(lease)), "renewed for the new lease: %v", renewed[0].Expires)
	none, err := l.RenewRuns(ctx, "node-z", lease)
	require.NoError(t, err)
	assert.Empty(t, none)
}

// runClaimsRace has many nodes claim one thread, and take over one expired
// claim, at once: exactly one wins each time.
func (s *suite) runClaimsRace(t *testing.T) {
	l := s.open(t)
	const nodes = 16
	race := func(name string, try func(node string) error) string {
		t.Helper()
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			won  []string
			lost int
		)
		for n := range nodes {
			wg.Go(func() {
				node := fmt.Sprintf("node-%d", n)
				err := try(node)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, node)
				case errors.Is(err, store.ErrRunClaimed):
					lost++
				default:
					t.Errorf("%s: %v", name, err)
				}
			})
		}
		wg.Wait()
		require.Len(t, won, 1, "%s: winners %v", name, won)
		assert.Equal(t, nodes-1, lost, name)
		return won[0]
	}
	for round := range 4 {
		thread := fmt.Sprintf("race-%d", round)
		winner := race("ClaimRun", func(node string) error {
			return l.ClaimRun(t.Context(), store.RunClaim{Thread: thread, Run: "run-" + node, Node: node}, time.Millisecond)
		})
		var c store.RunClaim
		require.Eventually(t, func() bool {
			var ok bool
			var err error
			c, ok, err = l.ActiveRun(t.Context(), thread)
			return err == nil && ok && c.Expired
		}, 10*time.Second, time.Millisecond)
		assert.Equal(t, winner, c.Node, "the claim names the winner")
		heir := race("TakeOverRun", func(node string) error { return l.TakeOverRun(t.Context(), c, node, lease) })
		c, _, err := l.ActiveRun(t.Context(), thread)
		require.NoError(t, err)
		assert.Equal(t, heir, c.Node)
	}
}

// runQueue queues input per thread, first in first out, whatever runs
// take it.
func (s *suite) runQueue(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	_, ok, err := l.DequeueInput(ctx, "q")
	require.NoError(t, err)
	assert.False(t, ok, "an empty queue")
	want := []store.QueuedInput{
		{Run: "r1", MessageID: "m1", Text: "first"},
		{Run: "r2", MessageID: "m2", Text: "second", Interactive: true, Options: event.RunOptions{Strategy: "got", Folder: "p", Workflow: "w", Verbose: true}},
		{Run: "r3", MessageID: "m3", Text: "third"},
	}
	for _, in := range want {
		require.NoError(t, l.EnqueueInput(ctx, "q", in))
	}
	require.NoError(t, l.EnqueueInput(ctx, "other", store.QueuedInput{Run: "x", MessageID: "x", Text: "x"}))
	n, err := l.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	for i, w := range want[:2] {
		got, ok, err := l.DequeueInput(ctx, "q")
		require.NoError(t, err)
		require.True(t, ok, "input %d", i)
		assert.Equal(t, w, got)
	}
	n, err = l.DropQueue(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, ok, err = l.DequeueInput(ctx, "q")
	require.NoError(t, err)
	assert.False(t, ok, "dropped")
	n, err = l.DropQueue(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n)
	got, ok, err := l.DequeueInput(ctx, "other")
	require.NoError(t, err)
	require.True(t, ok, "another thread's queue is its own")
	assert.Equal(t, "x", got.Run)

	// Concurrent takers get each input once.
	const inputs = 40
	for i := range inputs {
		require.NoError(t, l.EnqueueInput(ctx, "busy", store.QueuedInput{Run: fmt.Sprint(i), MessageID: "m", Text: "t"}))
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		taken = map[string]int{}
	)
	for range 4 {
		wg.Go(func() {
			for {
				in, ok, err := l.DequeueInput(ctx, "busy")
				if !assert.NoError(t, err) || !ok {
					return
				}
				mu.Lock()
				taken[in.Run]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Len(t, taken, inputs)
	for run, n := range taken {
		assert.Equal(t, 1, n, "input %s taken %d times", run, n)
	}
}

func (s *suite) runsAfterClose(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	require.NoError(t, l.Close())
	c := store.RunClaim{Thread: "t", Run: "r", Node: "n"}
	assert.ErrorIs(t, l.ClaimRun(ctx, c, lease), store.ErrClosed)
	assert.ErrorIs(t, l.MoveRun(ctx, c, "r0", lease), store.ErrClosed)
	_, err := l.RenewRuns(ctx, "n", lease)
	assert.ErrorIs(t, err, store.ErrClosed)
	assert.ErrorIs(t, l.TakeOverRun(ctx, c, "m", lease), store.ErrClosed)
	assert.ErrorIs(t, l.ReleaseRun(ctx, c), store.ErrClosed)
	_, _, err = l.ActiveRun(ctx, "t")
	assert.ErrorIs(t, err, store.ErrClosed)
	_, err = l.RunClaims(ctx)
	assert.ErrorIs(t, err, store.ErrClosed)
	assert.ErrorIs(t, l.EnqueueInput(ctx, "t", store.QueuedInput{}), store.ErrClosed)
	_, _, err = l.DequeueInput(ctx, "t")
	assert.ErrorIs(t, err, store.ErrClosed)
	_, err = l.DropQueue(ctx, "t")
	assert.ErrorIs(t, err, store.ErrClosed)
	_, err = l.QueueLen(ctx, "t")
	assert.ErrorIs(t, err, store.ErrClosed)
}

// owners gives each thread the first principal that claims it, once, even
// when many claim it at once.
func (s *suite) owners(t *testing.T) {
	l := s.open(t)
	ctx := t.Context()
	_, ok, err := l.ThreadOwner(ctx, "t1")
	require.NoError(t, err)
	assert.False(t, ok, "a thread nobody wrote to has no owner")
	owner, err := l.OwnThread(ctx, "t1", "alice")
	require.NoError(t, err)
	assert.Equal(t, "alice", owner)
	owner, err = l.OwnThread(ctx, "t1", "bob")
	require.NoError(t, err)
	assert.Equal(t, "alice", owner, "the first owner stays")
	got, ok, err := l.ThreadOwner(ctx, "t1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "alice", got)
	_, err = l.OwnThread(ctx, "", "bob")
	assert.Error(t, err)

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		owners = map[string]int{}
	)
	for i := range 12 {
		wg.Go(func() {
			o, err := l.OwnThread(ctx, "contested", fmt.Sprintf("p%d", i))
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			owners[o]++
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Len(t, owners, 1, "every claimer is told the same owner: %v", owners)

	require.NoError(t, l.Close())
	_, err = l.OwnThread(ctx, "t2", "alice")
	assert.ErrorIs(t, err, store.ErrClosed)
	_, _, err = l.ThreadOwner(ctx, "t1")
	assert.ErrorIs(t, err, store.ErrClosed)
}
