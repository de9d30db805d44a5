package thread_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/store/memory"
	"github.com/agentwire/agentwire/internal/thread"
)

// The delivery tests run once for every way the adapters consume a thread:
// a Pull driven by its consumer (the threads SSE stream), a Watch calling a
// function (agentchat), a Follower's Run loop (AgentLoop, AG2, Loom) and a
// Subscription's channel. Each is a view over the one engine, and each
// must deliver every event once, in order, with previews in their place.

// consumer is one consumer of a thread, in one style.
type consumer interface {
	// take waits until n more events have come, or the consumer ended,
	// and returns them, and why it ended once it has.
	take(t *testing.T, n int) ([]event.Event, error)
	// hold makes the consumer stop taking events until release; a pull's
	// consumer is held anyway between takes.
	hold()
	release()
	// last is the seq to resume after.
	last() int64
	// stop ends the consumer quietly and waits for it.
	stop()
}

type style struct {
	name string
	open func(t *testing.T, open thread.Open) (consumer, error)
}

var styles = []style{
	{"pull", openPull},
	{"watch", openWatch},
	{"follower", openFollower},
	{"subscription", openSubscription},
}

// forEachStyle runs test for every style.
func forEachStyle(t *testing.T, test func(t *testing.T, st style)) {
	for _, st := range styles {
		t.Run(st.name, func(t *testing.T) { test(t, st) })
	}
}

// follow opens a consumer of thread after seq after on svc, with previews
// when asked.
func follow(t *testing.T, st style, svc *thread.Service, th string, after int64, previews bool) consumer {
	t.Helper()
	c := ctx(t)
	if previews {
		c = bus.WantPreviews(c)
	}
	cons, err := st.open(t, svc.Opener(c, th, after))
	require.NoError(t, err)
	t.Cleanup(cons.stop)
	return cons
}

// collector gathers what a consumer's callback is given.
type collector struct {
	mu     sync.Mutex
	got    []event.Event
	taken  int // events returned by take so far
	ended  bool
	err    error
	change chan struct{}
	gate   chan struct{} // while not nil, the callback waits for it to close
}

func newCollector() *collector { return &collector{change: make(chan struct{}, 1)} }

func (c *collector) signal() {
	select {
	case c.change <- struct{}{}:
	default:
	}
}

func (c *collector) add(e event.Event) error {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		<-gate
	}
	c.mu.Lock()
	c.got = append(c.got, e)
	c.mu.Unlock()
	c.signal()
	return nil
}

func (c *collector) end(err error) {
	c.mu.Lock()
	c.ended, c.err = true, err
	c.mu.Unlock()
	c.signal()
}

func (c *collector) hold() {
	c.mu.Lock()
	c.gate = make(chan struct{})
	c.mu.Unlock()
}

func (c *collector) release() {
	c.mu.Lock()
	gate := c.gate
	c.gate = nil
	c.mu.Unlock()
	if gate != nil {
		close(gate)
	}
}

// take returns the next n events, or fewer and the end's error once the
// consumer has ended.
func (c *collector) take(t *testing.T, n int) ([]event.Event, error) {
	t.Helper()
	deadline := time.After(wait)
	for {
		c.mu.Lock()
		if len(c.got)-c.taken >= n || c.ended {
			k := min(n, len(c.got)-c.taken)
			out := append([]event.Event(nil), c.got[c.taken:c.taken+k]...)
			c.taken += k
			ended, err := c.ended && len(out) < n, c.err
			c.mu.Unlock()
			if ended {
				return out, endErr(err)
			}
			return out, nil
		}
		have := len(c.got) - c.taken
		c.mu.Unlock()
		select {
		case <-c.change:
		case <-deadline:
			t.Fatalf("%d of %d events came", have, n)
		}
	}
}

// errEnded stands for a consumer that ended without an error.
var errEnded = errors.New("ended without an error")

func endErr(err error) error {
	if err == nil {
		return errEnded
	}
	return err
}

// pullConsumer takes events from a Pull on the test's goroutine, in take.
type pullConsumer struct {
	p    *thread.Pull
	wake chan struct{}
}

func openPull(_ *testing.T, open thread.Open) (consumer, error) {
	c := &pullConsumer{wake: make(chan struct{}, 1)}
	p, err := open(func() {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	})
	c.p = p
	return c, err
}

func (c *pullConsumer) take(t *testing.T, n int) ([]event.Event, error) {
	t.Helper()
	var got []event.Event
	deadline := time.After(wait)
	for {
		for len(got) < n {
			e, ok, err := c.p.Next()
			if err != nil {
				if strings.Contains(err.Error(), "has ended") {
					err = errEnded
				}
				return got, err
			}
			if !ok {
				break
			}
			got = append(got, e)
		}
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-c.wake:
		case <-deadline:
			t.Fatalf("%d of %d events came", len(got), n)
		}
	}
}

func (c *pullConsumer) hold()       {}
func (c *pullConsumer) release()    {}
func (c *pullConsumer) last() int64 { return c.p.Last() }
func (c *pullConsumer) stop()       { c.p.Close() }

type watchConsumer struct {
	*collector
	w *thread.Watch
}

func openWatch(_ *testing.T, open thread.Open) (consumer, error) {
	c := &watchConsumer{collector: newCollector()}
	w, err := thread.NewWatch(open, c.add, c.end)
	c.w = w
	return c, err
}

func (c *watchConsumer) last() int64 { c.w.Stop(); return c.w.Last() }
func (c *watchConsumer) stop()       { c.release(); c.w.Close() }

type followerConsumer struct {
	*collector
	f      *thread.Follower
	cancel context.CancelFunc
	done   chan struct{}
}

func openFollower(t *testing.T, open thread.Open) (consumer, error) {
	c := &followerConsumer{collector: newCollector(), done: make(chan struct{})}
	f, err := thread.NewFollower(open)
	if err != nil {
		return nil, err
	}
	c.f = f
	rctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		c.end(f.Run(rctx, c.add))
	}()
	return c, nil
}

func (c *followerConsumer) last() int64 { c.halt(); return c.f.Last() }

// halt ends Run and waits for it.
func (c *followerConsumer) halt() {
	c.release()
	c.cancel()
	<-c.done
}

func (c *followerConsumer) stop() {
	c.halt()
	c.f.Close()
}

type subscriptionConsumer struct {
	*collector
	s    *thread.Subscription
	done chan struct{}
}

func openSubscription(t *testing.T, open thread.Open) (consumer, error) {
	c := &subscriptionConsumer{collector: newCollector(), done: make(chan struct{})}
	s, err := thread.NewSubscription(open)
	if err != nil {
		return nil, err
	}
	c.s = s
	go func() {
		defer close(c.done)
		for e := range s.Events() {
			c.add(e)
		}
		c.end(s.Err())
	}()
	return c, nil
}

func (c *subscriptionConsumer) last() int64 { c.stop(); return c.s.Last() }

func (c *subscriptionConsumer) stop() {
	c.release()
	c.s.Close()
	<-c.done
}

// TestReplayThenLive: the log after the seq a consumer starts after, page
// by page, then each event as it is appended, once each, in order, with
// its payload.
func TestReplayThenLive(t *testing.T) {
	forEachStyle(t, func(t *testing.T, st style) {
		svc := setup(t, nil, nil, thread.Options{PageSize: 4})
		appendN(t, svc, "t", 10)
		appendN(t, svc, "other", 3)
		c := follow(t, st, svc, "t", 3, false)
		got, err := c.take(t, 7)
		require.NoError(t, err)
		assert.Equal(t, seqRange(4, 10), seqsOf(got))

		appendN(t, svc, "other", 3)
		committed, err := svc.Append(ctx(t), "t", delta("a"), delta("b"))
		require.NoError(t, err)
		got, err = c.take(t, 2)
		require.NoError(t, err)
		for i, want := range committed {
			assert.Equal(t, want.ID, got[i].ID)
			assert.Equal(t, want.Payload, got[i].Payload)
			assert.Equal(t, "t", got[i].Thread)
		}
		assert.Equal(t, int64(12), c.last(), "the seq to resume after")
	})
}

// TestFromTheEndAndEmpty: a consumer from the thread's end, or of a thread
// with no events, gets only what is appended afterwards.
func TestFromTheEndAndEmpty(t *testing.T) {
	forEachStyle(t, func(t *testing.T, st style) {
		svc := setup(t, nil, nil, thread.Options{})
		empty := follow(t, st, svc, "new", 0, false)
		appendN(t, svc, "t", 5)
		atEnd := follow(t, st, svc, "t", thread.FromEnd, false)
		appendN(t, svc, "new", 1)
		appendN(t, svc, "t", 1)
		got, err := empty.take(t, 1)
		require.NoError(t, err)
		assert.Equal(t, []int64{1}, seqsOf(got))
		got, err = atEnd.take(t, 1)
		require.NoError(t, err)
		assert.Equal(t, []int64{6}, seqsOf(got))
	})
}

// TestSeam races appends against new consumers: whenever a consumer
// starts relative to the appends, it must see exactly the seqs after its
// start, in order, once each, and nothing more.
func TestSeam(t *testing.T) {
	const (
		rounds    = 150
		appenders = 2
		perAppend = 5
	)
	forEachStyle(t, func(t *testing.T, st style) {
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
			// One consumer from a position inside the existing log, one
			// from wherever the log has got to when it starts.
			afters := []int64{rng.Int64N(int64(pre) + 1), 0}
			cons := make([]consumer, 2)
			wg.Go(func() {
				<-start
				c, err := st.open(t, svc.Opener(ctx(t), th, afters[0]))
				if assert.NoError(t, err) {
					t.Cleanup(c.stop)
				}
				cons[0] = c
			})
			wg.Go(func() {
				<-start
				last, err := svc.LastSeq(ctx(t), th)
				assert.NoError(t, err)
				afters[1] = last
				c, err := st.open(t, svc.Opener(ctx(t), th, last))
				if assert.NoError(t, err) {
					t.Cleanup(c.stop)
				}
				cons[1] = c
			})
			close(start)
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			for i, c := range cons {
				got, err := c.take(t, int(total-afters[i]))
				require.NoError(t, err)
				require.Equal(t, seqRange(afters[i]+1, total), seqsOf(got), "round %d: consumer after %d", round, afters[i])
			}
			// A marker must be the very next event: nothing extra came
			// after the last seq.
			_, err := svc.Append(ctx(t), th, delta("marker"))
			require.NoError(t, err)
			for i, c := range cons {
				got, err := c.take(t, 1)
				require.NoError(t, err)
				require.Equal(t, []int64{total + 1}, seqsOf(got), "round %d: consumer after %d, after the last", round, afters[i])
				c.stop()
			}
		}
	})
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

// TestOutlivesFallingBehind: a consumer held up while far more events are
// appended than its queue holds holds up no append, then gets every one
// of them once, in order (read from the log), and goes on live; a bus
// that loses events has its gaps filled from the log the same way.
func TestOutlivesFallingBehind(t *testing.T) {
	const queue, n = 4, 60
	forEachStyle(t, func(t *testing.T, st style) {
		for _, name := range []string{"slow", "lossy"} {
			t.Run(name, func(t *testing.T) {
				var b bus.Bus = local.New()
				if name == "lossy" {
					b = &lossyBus{Bus: b}
				}
				m := metrics.New()
				svc := setup(t, nil, b, thread.Options{QueueSize: queue, PageSize: 7, Metrics: m})
				c := follow(t, st, svc, "t", 0, false)
				c.hold()
				for i := range n {
					_, err := svc.Append(ctx(t), "t", delta(fmt.Sprint(i)))
					require.NoError(t, err, "an append waits for no consumer")
				}
				c.release()
				got, err := c.take(t, n)
				require.NoError(t, err)
				require.Equal(t, seqRange(1, n), seqsOf(got))
				for i, e := range got {
					assert.Equal(t, fmt.Sprint(i), e.Payload.(event.MessageDelta).Text)
				}
				appendN(t, svc, "t", 2)
				got, err = c.take(t, 2)
				require.NoError(t, err)
				assert.Equal(t, seqRange(n+1, n+2), seqsOf(got), "and it goes on live")
				caughtUp, _ := m.Sample("agentwire_resubscribes_total", map[string]string{"reason": "slow"})
				if name == "slow" {
					assert.Positive(t, caughtUp, "the slow consumer's catching up is counted")
				}
			})
		}
	})
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

// checkingBus counts events published before the log committed them.
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

// TestOnlyCommittedEvents: with appends that fail, racing each other, a
// consumer gets exactly the committed events, in seq order.
func TestOnlyCommittedEvents(t *testing.T) {
	forEachStyle(t, func(t *testing.T, st style) {
		log := &flakyLog{Store: memory.New()}
		b := &checkingBus{Bus: local.New(), log: log}
		svc := setup(t, log, b, thread.Options{})
		c := follow(t, st, svc, "t", 0, false)

		const appenders, each = 4, 30
		var committed, failed atomic.Int64
		var wg sync.WaitGroup
		for a := range appenders {
			wg.Go(func() {
				for i := range each {
					_, err := svc.Append(ctx(t), "t", delta(fmt.Sprint(a, "-", i)))
					switch {
					case errors.Is(err, errFlaky):
						failed.Add(1)
					case assert.NoError(t, err):
						committed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		require.Positive(t, failed.Load(), "the flaky log refused no append")
		got, err := c.take(t, int(committed.Load()))
		require.NoError(t, err)
		require.Equal(t, seqRange(1, committed.Load()), seqsOf(got))
		for _, e := range got {
			require.True(t, log.isCommitted(e.ID), "seq %d delivered but never committed", e.Seq)
		}
		assert.Zero(t, b.premature.Load(), "events published before they were committed")

		// Nothing more is queued: the next event is the next append's.
		_, err = svc.Append(ctx(t), "t", delta("last"))
		if errors.Is(err, errFlaky) {
			_, err = svc.Append(ctx(t), "t", delta("last"))
		}
		require.NoError(t, err)
		got, err = c.take(t, 1)
		require.NoError(t, err)
		assert.Equal(t, []int64{committed.Load() + 1}, seqsOf(got))
	})
}

// TestPreviewsInTheirPlace: a preview reaches the consumers that asked for
// previews (bus.WantPreviews), after the committed event it follows, and
// never one still short of that event; it is not logged, and a
// consumer's place stays the last committed event's.
func TestPreviewsInTheirPlace(t *testing.T) {
	forEachStyle(t, func(t *testing.T, st style) {
		svc := setup(t, nil, nil, thread.Options{})
		require.True(t, svc.Previews(), "the local bus carries previews")
		appendN(t, svc, "t", 2)
		wanting := follow(t, st, svc, "t", 0, true)
		plain := follow(t, st, svc, "t", 0, false)
		_, err := wanting.take(t, 2)
		require.NoError(t, err)
		_, err = plain.take(t, 2)
		require.NoError(t, err)

		pv := delta("ahead")
		pv.Preview = 2
		svc.Preview("t", pv)
		early := delta("too early")
		early.Preview = 3 // follows seq 3, which nobody has had
		svc.Preview("t", early)
		appendN(t, svc, "t", 1)
		got, err := wanting.take(t, 2)
		require.NoError(t, err)
		assert.Equal(t, []int64{0, 3}, seqsOf(got), "the preview, then the next commit")
		assert.Equal(t, "ahead", got[0].Payload.(event.MessageDelta).Text)
		got, err = plain.take(t, 1)
		require.NoError(t, err)
		assert.Equal(t, []int64{3}, seqsOf(got), "no preview without asking")
		assert.Equal(t, int64(3), wanting.last())
		logged, err := svc.Read(ctx(t), "t", 0, 10)
		require.NoError(t, err)
		assert.Len(t, logged, 3, "previews are not logged")
	})
}

// TestStoreErrorEnds: a log that cannot be read ends the consumer with
// the store's error.
func TestStoreErrorEnds(t *testing.T) {
	forEachStyle(t, func(t *testing.T, st style) {
		svc := setup(t, failingReads{memory.New()}, nil, thread.Options{})
		_, err := svc.Append(ctx(t), "t", delta("a"))
		require.NoError(t, err)
		c := follow(t, st, svc, "t", 0, false)
		got, err := c.take(t, 1)
		assert.Empty(t, got)
		assert.ErrorIs(t, err, errRead)
		assert.Contains(t, err.Error(), "read log")
	})
}

// TestServiceCloseEnds: the service's Close ends every consumer, idle or
// not, with ErrClosed, and returns once they have ended.
func TestServiceCloseEnds(t *testing.T) {
	forEachStyle(t, func(t *testing.T, st style) {
		svc := setup(t, nil, nil, thread.Options{})
		appendN(t, svc, "t", 3)
		c := follow(t, st, svc, "t", 0, false)
		_, err := c.take(t, 3)
		require.NoError(t, err)
		closed := make(chan error, 1)
		go func() { closed <- svc.Close() }()
		_, err = c.take(t, 1)
		assert.ErrorIs(t, err, thread.ErrClosed)
		require.NoError(t, <-closed, "the service's Close returns once the consumer has ended")
	})
}

// TestStopEndsQuietly: a consumer stopped gets nothing more, reports no
// error, and leaves nothing for the service to wait for; the others go on.
func TestStopEndsQuietly(t *testing.T) {
	forEachStyle(t, func(t *testing.T, st style) {
		svc := setup(t, nil, nil, thread.Options{})
		appendN(t, svc, "t", 5)
		c := follow(t, st, svc, "t", 0, false)
		other := follow(t, st, svc, "t", 5, false)
		c.stop()
		c.stop()
		appendN(t, svc, "t", 1)
		got, err := other.take(t, 1)
		require.NoError(t, err)
		assert.Equal(t, []int64{6}, seqsOf(got))
		other.stop()
		require.NoError(t, svc.Close(), "nothing of the consumers is left to wait for")
	})
}

// TestAdmit: a pull's Admit is asked once, before the first event; its
// error ends the pull instead of the event.
func TestAdmit(t *testing.T) {
	forEachStyle(t, func(t *testing.T, st style) {
		svc := setup(t, nil, nil, thread.Options{})
		refused := errors.New("not yours")
		var asked atomic.Int32
		open := func(verdict error) thread.Open {
			return func(notify func()) (*thread.Pull, error) {
				return svc.Pull(ctx(t), "t", 0, thread.PullOptions{Notify: notify, Admit: func(context.Context) error {
					asked.Add(1)
					return verdict
				}})
			}
		}
		no, err := st.open(t, open(refused))
		require.NoError(t, err)
		t.Cleanup(no.stop)
		yes, err := st.open(t, open(nil))
		require.NoError(t, err)
		t.Cleanup(yes.stop)
		assert.Zero(t, asked.Load(), "asked before any event")
		appendN(t, svc, "t", 2)
		got, err := no.take(t, 1)
		assert.Empty(t, got)
		assert.ErrorIs(t, err, refused)
		got, err = yes.take(t, 2)
		require.NoError(t, err)
		assert.Equal(t, []int64{1, 2}, seqsOf(got))
		assert.Equal(t, int32(2), asked.Load(), "once per pull")
	})
}

// inThread reports whether a goroutine of the thread package runs.
func inThread() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "agentwire/internal/thread.")
}

// TestIdleHoldsNoGoroutine: an idle Pull or Watch holds no goroutine of
// the thread service's; a Watch starts one while there is something to
// hand on.
func TestIdleHoldsNoGoroutine(t *testing.T) {
	for _, st := range styles[:2] {
		t.Run(st.name, func(t *testing.T) {
			svc := setup(t, nil, nil, thread.Options{})
			appendN(t, svc, "t", 2)
			c := follow(t, st, svc, "t", 0, false)
			n := 2
			for range 3 {
				got, err := c.take(t, n)
				require.NoError(t, err)
				require.Len(t, got, n)
				assert.Eventually(t, func() bool { return !inThread() }, wait, time.Millisecond,
					"an idle consumer holds a goroutine")
				appendN(t, svc, "t", 1)
				n = 1
			}
		})
	}
}

// TestWatchEndsOnItsFunctionsError: an error from a Watch's function ends
// it with that error, which end is told; ErrStop, or Stop from inside the
// function, ends it quietly.
func TestWatchEndsOnItsFunctionsError(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 3)
	boom := errors.New("boom")
	ended := make(chan error, 1)
	failing, err := svc.Watch(ctx(t), "t", 0, func(e event.Event) error {
		if e.Seq == 2 {
			return boom
		}
		return nil
	}, func(err error) { ended <- err })
	require.NoError(t, err)
	<-failing.Done()
	assert.ErrorIs(t, failing.Err(), boom)
	assert.ErrorIs(t, <-ended, boom, "end is told why")
	assert.Equal(t, int64(2), failing.Last(), "the event the function failed on was handed to it")

	quitting, err := svc.Watch(ctx(t), "t", 0, func(e event.Event) error {
		if e.Seq == 2 {
			return thread.ErrStop
		}
		return nil
	}, func(err error) { ended <- err })
	require.NoError(t, err)
	<-quitting.Done()
	assert.NoError(t, quitting.Err())
	assert.NoError(t, <-ended)

	var stopping *thread.Watch
	var calls int
	ready := make(chan struct{})
	stopping, err = svc.Watch(ctx(t), "t", 0, func(event.Event) error {
		<-ready
		calls++
		stopping.Stop()
		return nil
	}, func(err error) { ended <- err })
	require.NoError(t, err)
	close(ready)
	<-stopping.Done()
	assert.NoError(t, stopping.Err())
	assert.Equal(t, 1, calls, "nothing is handed on after Stop")
	assert.NoError(t, <-ended)
}

// TestSubscriptionCloseFromManyGoroutines: Close is safe to call at once
// from several goroutines, and Events is closed with no event after it.
func TestSubscriptionCloseFromManyGoroutines(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 5)
	sub, err := svc.Subscribe(ctx(t), "t", 0)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(sub.Close)
	}
	wg.Wait()
	for e := range sub.Events() {
		t.Fatalf("event %d after Close returned", e.Seq)
	}
	assert.NoError(t, sub.Err(), "Err after Close")
}

// TestFollowerIsReadyForItsReplay: a consumer that selects on Ready before
// it takes anything is woken for the replay.
func TestFollowerIsReadyForItsReplay(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 2)
	f, err := svc.Follow(ctx(t), "t", 0)
	require.NoError(t, err)
	defer f.Close()
	select {
	case <-f.Ready():
	case <-time.After(wait):
		t.Fatal("not ready for the replay")
	}
	e, ok, err := f.Next()
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(1), e.Seq)
}
