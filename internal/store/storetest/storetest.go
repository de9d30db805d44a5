// Package storetest is the behavioural suite every store.Log must pass. Each
// backend runs the same Run against itself, so "same semantics" is checked,
// not promised. Crash (crash.go) adds the kill -9 durability test for the
// backends that persist.
package storetest

import (
	"fmt"
	"slices"
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
	t.Run("Spending", s.spending)
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
