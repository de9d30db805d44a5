package thread_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/leaktest"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/memory"
	"github.com/agentwire/agentwire/internal/store/sqlite"
	"github.com/agentwire/agentwire/internal/thread"
)

// wait bounds how long a test waits for something that should happen; a
// working service takes microseconds, a broken one fails instead of hanging.
const wait = 10 * time.Second

// setup returns a service over log and b, closed (with the bus) when the
// test ends, and checked for leaked goroutines.
func setup(t *testing.T, log thread.Store, b bus.Bus, opts thread.Options) *thread.Service {
	t.Helper()
	leaktest.Check(t, "github.com/agentwire/agentwire/")
	if log == nil {
		log = memory.New()
	}
	if b == nil {
		b = local.New()
	}
	svc := thread.New(log, b, nil, opts)
	t.Cleanup(func() {
		assert.NoError(t, svc.Close())
		assert.NoError(t, b.Close())
		assert.NoError(t, log.Close())
	})
	return svc
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), wait)
	t.Cleanup(cancel)
	return c
}

func delta(text string) event.Event {
	return event.Event{Run: "r", Payload: event.MessageDelta{MessageID: "m", Text: text}}
}

func appendN(t *testing.T, svc *thread.Service, th string, n int) {
	t.Helper()
	for i := range n {
		_, err := svc.Append(ctx(t), th, delta(fmt.Sprint(i)))
		require.NoError(t, err)
	}
}

// next returns the subscription's next event, failing if it ends or none
// comes.
func next(t *testing.T, sub *thread.Subscription) event.Event {
	t.Helper()
	select {
	case e, ok := <-sub.Events():
		if !ok {
			t.Fatalf("subscription ended: %v", sub.Err())
		}
		return e
	case <-time.After(wait):
		t.Fatal("no event")
	}
	panic("unreachable")
}

// expect receives seqs from..to in order.
func expect(t *testing.T, sub *thread.Subscription, from, to int64) {
	t.Helper()
	for want := from; want <= to; want++ {
		e := next(t, sub)
		require.Equal(t, want, e.Seq, "seq")
	}
}

// drain reads sub until Events closes and returns what it read.
func drain(t *testing.T, sub *thread.Subscription) []event.Event {
	t.Helper()
	var got []event.Event
	timeout := time.After(wait)
	for {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				return got
			}
			got = append(got, e)
		case <-timeout:
			t.Fatalf("subscription did not end (%d events read)", len(got))
		}
	}
}

func TestReplayThenLive(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{PageSize: 4})
	appendN(t, svc, "t", 10)
	appendN(t, svc, "other", 3)

	sub, err := svc.Subscribe(ctx(t), "t", 3)
	require.NoError(t, err)
	defer sub.Close()
	expect(t, sub, 4, 10)

	appendN(t, svc, "other", 3)
	committed, err := svc.Append(ctx(t), "t", delta("a"), delta("b"))
	require.NoError(t, err)
	for _, want := range committed {
		got := next(t, sub)
		assert.Equal(t, want.ID, got.ID)
		assert.Equal(t, want.Payload, got.Payload)
		assert.Equal(t, "t", got.Thread)
	}
	assert.NoError(t, sub.Err())
}

func TestSubscribeFromTheEndAndEmpty(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	empty, err := svc.Subscribe(ctx(t), "new", 0)
	require.NoError(t, err)
	defer empty.Close()
	appendN(t, svc, "t", 5)
	atEnd, err := svc.Subscribe(ctx(t), "t", 5)
	require.NoError(t, err)
	defer atEnd.Close()

	appendN(t, svc, "new", 1)
	appendN(t, svc, "t", 1)
	expect(t, empty, 1, 1)
	expect(t, atEnd, 6, 6)
}

func TestSubscribeRejectsSeqOutsideTheLog(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 2)
	_, err := svc.Subscribe(ctx(t), "t", 3)
	assert.ErrorIs(t, err, thread.ErrAfterEnd, "Subscribe after seq 3 of 2")
	var ae *thread.AfterEndError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, thread.AfterEndError{Thread: "t", After: 3, Last: 2}, *ae)
	_, err = svc.Subscribe(ctx(t), "t", -2)
	assert.Error(t, err, "Subscribe after seq -2")
}

// TestSubscribeFromEnd subscribes from the thread's end: nothing of the log
// is replayed, every later event is delivered, and Head and Last say where
// the subscription stands.
func TestSubscribeFromEnd(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 3)
	sub, err := svc.Subscribe(ctx(t), "t", thread.FromEnd)
	require.NoError(t, err)
	defer sub.Close()
	assert.Equal(t, int64(3), sub.Head())
	assert.Equal(t, int64(3), sub.Last(), "nothing taken yet")
	appendN(t, svc, "t", 2)
	expect(t, sub, 4, 5)
	sub.Close()
	assert.Equal(t, int64(5), sub.Last(), "once closed, Last is the seq to resume after")

	empty, err := svc.Subscribe(ctx(t), "none", thread.FromEnd)
	require.NoError(t, err)
	defer empty.Close()
	assert.Equal(t, int64(0), empty.Head(), "a thread with no events")
}

// TestSeam races appends against new subscriptions: whenever a subscription
// starts relative to the appends, it must see exactly the seqs after its
// start, in order, once each.
func TestSeam(t *testing.T) {
	const (
		rounds    = 1000
		appenders = 2
		perAppend = 5
	)
	svc := setup(t, nil, nil, thread.Options{PageSize: 2})
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range rounds {
		th := fmt.Sprint("seam-", round)
		pre := round % 5
		appendN(t, svc, th, pre)
		total := int64(pre + appenders*perAppend)

		var wg sync.WaitGroup
		start := make(chan struct{})
		for range appenders {
			wg.Go(func() {
				<-start
				for i := range perAppend {
					_, err := svc.Append(ctx(t), th, delta(fmt.Sprint(i)))
					assert.NoError(t, err)
				}
			})
		}
		// One subscriber from a position inside the existing log, one from
		// wherever the log has got to when it subscribes.
		afters := make([]int64, 2)
		subs := make([]*thread.Subscription, 2)
		wg.Go(func() {
			<-start
			afters[0] = rng.Int64N(int64(pre) + 1)
			sub, err := svc.Subscribe(ctx(t), th, afters[0])
			assert.NoError(t, err)
			subs[0] = sub
		})
		wg.Go(func() {
			<-start
			last, err := svc.LastSeq(ctx(t), th)
			assert.NoError(t, err)
			afters[1] = last
			sub, err := svc.Subscribe(ctx(t), th, last)
			assert.NoError(t, err)
			subs[1] = sub
		})
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}

		// Every subscriber gets exactly its seqs with no further append to
		// prompt it; then a marker must be the very next event, so nothing
		// extra came after the last seq.
		for i, sub := range subs {
			for want := afters[i] + 1; want <= total; want++ {
				if e := next(t, sub); e.Seq != want {
					t.Fatalf("round %d: subscriber after %d: got seq %d, want %d", round, afters[i], e.Seq, want)
				}
			}
		}
		_, err := svc.Append(ctx(t), th, delta("marker"))
		require.NoError(t, err)
		for i, sub := range subs {
			if e := next(t, sub); e.Seq != total+1 {
				t.Fatalf("round %d: subscriber after %d: got seq %d after the last, want the marker %d", round, afters[i], e.Seq, total+1)
			}
			sub.Close()
		}
	}
}

func TestSlowConsumerEndsOnlyItsOwnSubscription(t *testing.T) {
	const queue, n = 4, 50
	svc := setup(t, nil, nil, thread.Options{QueueSize: queue})
	slow, err := svc.Subscribe(ctx(t), "t", 0)
	require.NoError(t, err)
	defer slow.Close()
	fast, err := svc.Subscribe(ctx(t), "t", 0)
	require.NoError(t, err)
	defer fast.Close()

	// Nobody reads slow; every Append must still return. fast keeps up:
	// it takes each event before the next append.
	type result struct {
		got []event.Event
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() { done <- r }()
		for i := range n {
			if _, r.err = svc.Append(ctx(t), "t", delta(fmt.Sprint(i))); r.err != nil {
				return
			}
			select {
			case e, ok := <-fast.Events():
				if !ok {
					r.err = fmt.Errorf("fast subscription ended: %w", fast.Err())
					return
				}
				r.got = append(r.got, e)
			case <-time.After(wait):
				r.err = errors.New("fast subscription: no event")
				return
			}
		}
	}()
	var r result
	select {
	case r = <-done:
		require.NoError(t, r.err)
	case <-time.After(2 * wait):
		t.Fatal("Append blocked on a subscriber that does not read")
	}
	require.Len(t, r.got, n, "the fast subscriber's events")
	for i, e := range r.got {
		require.Equal(t, int64(i+1), e.Seq)
	}
	assert.NoError(t, fast.Err())

	held := drain(t, slow)
	require.ErrorIs(t, slow.Err(), thread.ErrSlowConsumer)
	require.Less(t, len(held), n, "the slow subscriber cannot have everything")
	for i, e := range held {
		require.Equal(t, int64(i+1), e.Seq, "the slow subscriber's events are a prefix")
	}

	// It resumes from its last seq and misses nothing.
	resumed, err := svc.Subscribe(ctx(t), "t", int64(len(held)))
	require.NoError(t, err)
	defer resumed.Close()
	expect(t, resumed, int64(len(held))+1, n)
	appendN(t, svc, "t", 1)
	expect(t, resumed, n+1, n+1)
}

// flakyLog commits appends, except every third one, which fails without
// committing anything; it remembers the ids it committed.
type flakyLog struct {
	thread.Store
	calls     atomic.Int64
	committed sync.Map // event id → struct{}
}

var errFlaky = errors.New("flaky log: append failed")

func (l *flakyLog) Append(ctx context.Context, th string, events ...event.Event) ([]event.Event, error) {
	if l.calls.Add(1)%3 == 0 {
		return nil, errFlaky
	}
	out, err := l.Store.Append(ctx, th, events...)
	for _, e := range out {
		l.committed.Store(e.ID, struct{}{})
	}
	return out, err
}

func (l *flakyLog) isCommitted(id string) bool {
	_, ok := l.committed.Load(id)
	return ok
}

// checkingBus records events published before the log committed them.
type checkingBus struct {
	bus.Bus
	log       *flakyLog
	premature atomic.Int64
}

func (b *checkingBus) Publish(ctx context.Context, th string, events []event.Event) error {
	for _, e := range events {
		if !b.log.isCommitted(e.ID) {
			b.premature.Add(1)
		}
	}
	return b.Bus.Publish(ctx, th, events)
}

func TestSubscribersSeeOnlyCommittedEvents(t *testing.T) {
	log := &flakyLog{Store: memory.New()}
	b := &checkingBus{Bus: local.New(), log: log}
	svc := setup(t, log, b, thread.Options{})

	sub, err := svc.Subscribe(ctx(t), "t", 0)
	require.NoError(t, err)
	defer sub.Close()

	const appenders, each = 4, 30
	var committed, failed atomic.Int64
	var failedIDs sync.Map
	var wg sync.WaitGroup
	for a := range appenders {
		wg.Go(func() {
			for i := range each {
				e := delta(fmt.Sprint(a, "-", i))
				e.ID = event.NewID()
				_, err := svc.Append(ctx(t), "t", e)
				switch {
				case errors.Is(err, errFlaky):
					failed.Add(1)
					failedIDs.Store(e.ID, struct{}{})
				case assert.NoError(t, err):
					committed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.Positive(t, failed.Load(), "the flaky log refused no append")

	for want := int64(1); want <= committed.Load(); want++ {
		e := next(t, sub)
		require.Equal(t, want, e.Seq)
		require.True(t, log.isCommitted(e.ID), "seq %d delivered but never committed", e.Seq)
		_, wasFailed := failedIDs.Load(e.ID)
		require.False(t, wasFailed, "seq %d is from a failed append", e.Seq)
	}
	assert.Zero(t, b.premature.Load(), "events published before they were committed")

	// Nothing more is queued: the next event is the next append's.
	_, err = svc.Append(ctx(t), "t", delta("last"))
	if errors.Is(err, errFlaky) {
		_, err = svc.Append(ctx(t), "t", delta("last"))
	}
	require.NoError(t, err)
	assert.Equal(t, committed.Load()+1, next(t, sub).Seq)
}

// lossyBus drops every other Publish, as a bus between nodes might.
type lossyBus struct {
	bus.Bus
	calls atomic.Int64
}

func (b *lossyBus) Publish(ctx context.Context, th string, events []event.Event) error {
	if b.calls.Add(1)%2 == 1 {
		return nil
	}
	return b.Bus.Publish(ctx, th, events)
}

func TestGapsAreFilledFromTheLog(t *testing.T) {
	svc := setup(t, nil, &lossyBus{Bus: local.New()}, thread.Options{PageSize: 3})
	sub, err := svc.Subscribe(ctx(t), "t", 0)
	require.NoError(t, err)
	defer sub.Close()
	appendN(t, svc, "t", 10) // publishes 2, 4, ..., 10 only
	expect(t, sub, 1, 10)
}

func TestAppendSucceedsWhenPublishFails(t *testing.T) {
	b := local.New()
	svc := setup(t, nil, b, thread.Options{})
	require.NoError(t, b.Close())
	committed, err := svc.Append(ctx(t), "t", delta("a"))
	require.NoError(t, err, "Append after the bus closed")
	require.Len(t, committed, 1)
	last, err := svc.LastSeq(ctx(t), "t")
	require.NoError(t, err)
	assert.Equal(t, int64(1), last)
}

func TestSubscriptionClose(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 5)

	// Closed while its pump waits for the consumer to take seq 1.
	sub, err := svc.Subscribe(ctx(t), "t", 0)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(sub.Close) // concurrent and repeated Close
	}
	wg.Wait()
	sub.Close()
	for e := range sub.Events() {
		t.Fatalf("event %d after Close returned", e.Seq)
	}
	assert.NoError(t, sub.Err(), "Err after Close")

	// The others go on.
	other, err := svc.Subscribe(ctx(t), "t", 5)
	require.NoError(t, err)
	defer other.Close()
	appendN(t, svc, "t", 1)
	expect(t, other, 6, 6)
}

func TestServiceClose(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 3)
	reading, err := svc.Subscribe(ctx(t), "t", 3)
	require.NoError(t, err)
	stuck, err := svc.Subscribe(ctx(t), "t", 0) // never read
	require.NoError(t, err)

	require.NoError(t, svc.Close())
	drain(t, reading)
	drain(t, stuck)
	assert.ErrorIs(t, reading.Err(), thread.ErrClosed)
	assert.ErrorIs(t, stuck.Err(), thread.ErrClosed)
	reading.Close()
	stuck.Close()

	require.NoError(t, svc.Close(), "second Close")
	_, err = svc.Subscribe(ctx(t), "t", 0)
	assert.ErrorIs(t, err, thread.ErrClosed, "Subscribe after Close")
	_, err = svc.Append(ctx(t), "t", delta("x"))
	assert.ErrorIs(t, err, thread.ErrClosed, "Append after Close")
}

// failingReads fails every Read.
type failingReads struct{ thread.Store }

var errRead = errors.New("read failed")

func (failingReads) Read(context.Context, string, int64, int) ([]event.Event, error) {
	return nil, errRead
}

func TestStoreErrorEndsSubscription(t *testing.T) {
	log := failingReads{memory.New()}
	svc := setup(t, log, nil, thread.Options{})
	_, err := svc.Append(ctx(t), "t", delta("a"))
	require.NoError(t, err)
	sub, err := svc.Subscribe(ctx(t), "t", 0)
	require.NoError(t, err)
	defer sub.Close()
	assert.Empty(t, drain(t, sub))
	assert.ErrorIs(t, sub.Err(), errRead)
}

// TestClaimAndAppend claims a thread and appends its first event in one
// commit: subscribers get the event; a second claim is refused and
// appends nothing.
func TestClaimAndAppend(t *testing.T) {
	st, err := sqlite.Open(t.Context(), sqlite.Options{Dir: t.TempDir(), Synchronous: "NORMAL"})
	require.NoError(t, err)
	svc := setup(t, st, nil, thread.Options{})
	sub, err := svc.Subscribe(ctx(t), "t", thread.FromEnd)
	require.NoError(t, err)
	defer sub.Close()

	user := event.Event{Run: "r1", Payload: event.MessageUser{MessageID: "m1", Text: "hi"}}
	committed, err := svc.ClaimAndAppend(ctx(t), store.RunClaim{Thread: "t", Run: "r1", Node: "n"}, time.Hour, user)
	require.NoError(t, err)
	require.Len(t, committed, 1)
	select {
	case e := <-sub.Events():
		assert.Equal(t, committed[0].ID, e.ID)
		assert.Equal(t, int64(1), e.Seq)
	case <-time.After(wait):
		t.Fatal("the subscriber did not get the event")
	}
	claim, held, err := st.ActiveRun(ctx(t), "t")
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, "r1", claim.Run)

	_, err = svc.ClaimAndAppend(ctx(t), store.RunClaim{Thread: "t", Run: "r2", Node: "n"}, time.Hour,
		event.Event{Run: "r2", Payload: event.MessageUser{MessageID: "m2", Text: "again"}})
	require.ErrorIs(t, err, store.ErrRunClaimed)
	last, err := svc.LastSeq(ctx(t), "t")
	require.NoError(t, err)
	assert.Equal(t, int64(1), last, "a refused claim appends nothing")
}
