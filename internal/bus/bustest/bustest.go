// Package bustest is the behavioural suite every bus.Bus must pass. A
// backend's test calls Run with a function that returns a fresh, empty bus;
// Run closes it.
package bustest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
)

// wait bounds how long the suite waits for something that should happen; a
// working bus takes microseconds, a broken one is reported instead of hung.
const wait = 10 * time.Second

// Run runs the suite against the buses newBus returns.
func Run(t *testing.T, newBus func(t *testing.T) bus.Bus) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b bus.Bus)
	}{
		{"PublishReachesThreadSubscribers", testPublish},
		{"SubscribeSeesOnlyLaterEvents", testSubscribeLater},
		{"SlowConsumerIsDropped", testSlowConsumer},
		{"SubscriptionClose", testSubscriptionClose},
		{"SubscribeRejectsBadQueue", testBadQueue},
		{"SendWithoutHandler", testSendWithoutHandler},
		{"SendReachesHandler", testSendReachesHandler},
		{"OneHandlerPerThread", testOneHandlerPerThread},
		{"StopWaitsForHandler", testStopWaits},
		{"ConcurrentUse", testConcurrent},
		{"Close", testClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBus(t)
			t.Cleanup(func() { _ = b.Close() })
			tt.fn(t, b)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), wait)
	t.Cleanup(cancel)
	return c
}

// events returns n committed-looking events of thread with seqs from first.
func events(thread string, first int64, n int) []event.Event {
	out := make([]event.Event, n)
	for i := range out {
		e := event.New(thread, "run", event.MessageDelta{MessageID: "m", Text: fmt.Sprint(first + int64(i))})
		e.Seq = first + int64(i)
		out[i] = e
	}
	return out
}

// receive takes n events from s, failing if they do not come.
func receive(t *testing.T, s bus.Subscription, n int) []event.Event {
	t.Helper()
	c := ctx(t)
	got := make([]event.Event, 0, n)
	for len(got) < n {
		e, err := s.Next(c)
		if err != nil {
			t.Fatalf("Next after %d of %d events: %v", len(got), n, err)
		}
		got = append(got, e)
	}
	return got
}

// endErr returns the error s ended with, failing if Next returns an event
// instead or nothing comes.
func endErr(t *testing.T, s bus.Subscription) error {
	t.Helper()
	e, err := s.Next(ctx(t))
	if err == nil {
		t.Fatalf("Next = event seq %d, want the subscription ended", e.Seq)
	}
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the subscription did not end")
	return err
}

func seqs(es []event.Event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func testPublish(t *testing.T, b bus.Bus) {
	a1, err := b.Subscribe(ctx(t), "a", 64)
	require.NoError(t, err)
	defer a1.Close()
	a2, err := b.Subscribe(ctx(t), "a", 64)
	require.NoError(t, err)
	defer a2.Close()
	other, err := b.Subscribe(ctx(t), "b", 64)
	require.NoError(t, err)
	defer other.Close()

	sent := events("a", 1, 5)
	require.NoError(t, b.Publish(ctx(t), "a", sent[:2]))
	require.NoError(t, b.Publish(ctx(t), "a", sent[2:]))
	marker := events("b", 1, 1)
	require.NoError(t, b.Publish(ctx(t), "b", marker))

	for _, s := range []bus.Subscription{a1, a2} {
		got := receive(t, s, len(sent))
		assert.Equal(t, seqs(sent), seqs(got))
		for i := range got {
			assert.Equal(t, sent[i].ID, got[i].ID)
			assert.Equal(t, sent[i].Payload, got[i].Payload)
		}
	}
	// Thread b's subscriber gets b's event and none of a's.
	got := receive(t, other, 1)
	assert.Equal(t, marker[0].ID, got[0].ID)
}

func testSubscribeLater(t *testing.T, b bus.Bus) {
	require.NoError(t, b.Publish(ctx(t), "t", events("t", 1, 3)))
	s, err := b.Subscribe(ctx(t), "t", 64)
	require.NoError(t, err)
	defer s.Close()
	// The subscriber is already waiting when the event is published.
	got := make(chan []event.Event, 1)
	go func() { got <- receive(t, s, 1) }()
	require.NoError(t, b.Publish(ctx(t), "t", events("t", 4, 1)))
	assert.Equal(t, int64(4), (<-got)[0].Seq, "Subscribe then Publish: first event")
}

func testSlowConsumer(t *testing.T, b bus.Bus) {
	const queue = 4
	slow, err := b.Subscribe(ctx(t), "t", queue)
	require.NoError(t, err)
	defer slow.Close()
	fast, err := b.Subscribe(ctx(t), "t", 1024)
	require.NoError(t, err)
	defer fast.Close()

	// Publish far more than the slow queue holds while nobody reads: every
	// Publish must return without waiting for either subscriber.
	const n = 50
	done := make(chan error, 1)
	go func() {
		for _, e := range events("t", 1, n) {
			if err := b.Publish(ctx(t), "t", []event.Event{e}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}

	got := receive(t, fast, n)
	assert.Equal(t, seqs(events("t", 1, n)), seqs(got), "the fast subscriber's events")

	assert.ErrorIs(t, endErr(t, slow), bus.ErrSlowConsumer, "the slow subscriber's Next")
	assert.ErrorIs(t, endErr(t, slow), bus.ErrSlowConsumer, "Next again")

	// The fast subscription is unaffected and still live.
	require.NoError(t, b.Publish(ctx(t), "t", events("t", n+1, 1)))
	assert.Equal(t, int64(n+1), receive(t, fast, 1)[0].Seq)
}

func testSubscriptionClose(t *testing.T, b bus.Bus) {
	s, err := b.Subscribe(ctx(t), "t", 8)
	require.NoError(t, err)
	keep, err := b.Subscribe(ctx(t), "t", 8)
	require.NoError(t, err)
	defer keep.Close()

	s.Close()
	s.Close() // idempotent
	assert.ErrorIs(t, endErr(t, s), bus.ErrClosed, "Next after Close")

	require.NoError(t, b.Publish(ctx(t), "t", events("t", 1, 1)))
	assert.Equal(t, int64(1), receive(t, keep, 1)[0].Seq)
}

func testBadQueue(t *testing.T, b bus.Bus) {
	for _, q := range []int{0, -1} {
		s, err := b.Subscribe(ctx(t), "t", q)
		assert.Error(t, err, "Subscribe(queue %d)", q)
		if s != nil {
			s.Close()
		}
	}
}

func testSendWithoutHandler(t *testing.T, b bus.Bus) {
	err := b.Send(ctx(t), "nobody", event.Command{Kind: event.CommandCancel})
	assert.ErrorIs(t, err, bus.ErrNoHandler)
}

func testSendReachesHandler(t *testing.T, b bus.Bus) {
	var mu sync.Mutex
	var got []event.Command
	refuse := errors.New("no pending request has that id")
	stop, err := b.HandleCommands(ctx(t), "t", func(_ context.Context, cmd event.Command) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, cmd)
		if cmd.Kind == event.CommandInput {
			return refuse
		}
		return nil
	})
	require.NoError(t, err)
	defer stop()

	approve := event.Command{Kind: event.CommandApprove, Run: "r1", ID: "c1", Decision: event.DecisionApprove, Data: json.RawMessage(`{"a":1}`)}
	require.NoError(t, b.Send(ctx(t), "t", approve))
	err = b.Send(ctx(t), "t", event.Command{Kind: event.CommandInput, Run: "r1"})
	require.Error(t, err, "Send of a command the handler refuses")
	assert.Contains(t, err.Error(), refuse.Error())
	assert.ErrorIs(t, b.Send(ctx(t), "other", approve), bus.ErrNoHandler, "Send to another thread")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 2)
	assert.Equal(t, approve.Kind, got[0].Kind)
	assert.Equal(t, approve.Run, got[0].Run)
	assert.Equal(t, approve.ID, got[0].ID)
	assert.Equal(t, approve.Decision, got[0].Decision)
	assert.JSONEq(t, string(approve.Data), string(got[0].Data))
	assert.Equal(t, event.CommandInput, got[1].Kind)
}

func testOneHandlerPerThread(t *testing.T, b bus.Bus) {
	nop := func(context.Context, event.Command) error { return nil }
	stop, err := b.HandleCommands(ctx(t), "t", nop)
	require.NoError(t, err)
	_, err = b.HandleCommands(ctx(t), "t", nop)
	assert.ErrorIs(t, err, bus.ErrHandlerExists)

	stop()
	stop() // idempotent
	assert.ErrorIs(t, b.Send(ctx(t), "t", event.Command{Kind: event.CommandCancel}), bus.ErrNoHandler, "Send after stop")

	// The thread can be owned again, and the old stop does not remove the
	// new handler.
	stop2, err := b.HandleCommands(ctx(t), "t", nop)
	require.NoError(t, err)
	defer stop2()
	stop()
	assert.NoError(t, b.Send(ctx(t), "t", event.Command{Kind: event.CommandCancel}), "Send to the new owner")
}

func testStopWaits(t *testing.T, b bus.Bus) {
	entered, release := make(chan struct{}), make(chan struct{})
	var running atomic.Bool
	stop, err := b.HandleCommands(ctx(t), "t", func(context.Context, event.Command) error {
		running.Store(true)
		close(entered)
		<-release
		running.Store(false)
		return nil
	})
	require.NoError(t, err)

	sent := make(chan error, 1)
	go func() { sent <- b.Send(ctx(t), "t", event.Command{Kind: event.CommandCancel}) }()
	<-entered
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while the handler was running")
	case <-time.After(10 * time.Millisecond):
	}
	close(release)
	<-stopped
	assert.False(t, running.Load(), "handler running after stop returned")
	require.NoError(t, <-sent)
}

func testClose(t *testing.T, b bus.Bus) {
	s, err := b.Subscribe(ctx(t), "t", 8)
	require.NoError(t, err)
	defer s.Close()
	_, err = b.HandleCommands(ctx(t), "h", func(context.Context, event.Command) error { return nil })
	require.NoError(t, err)

	require.NoError(t, b.Close())
	assert.ErrorIs(t, endErr(t, s), bus.ErrClosed, "Next after bus Close")
	assert.NoError(t, b.Close(), "second Close")

	assert.ErrorIs(t, b.Publish(ctx(t), "t", events("t", 1, 1)), bus.ErrClosed)
	_, err = b.Subscribe(ctx(t), "t", 8)
	assert.ErrorIs(t, err, bus.ErrClosed)
	assert.ErrorIs(t, b.Send(ctx(t), "h", event.Command{Kind: event.CommandCancel}), bus.ErrClosed)
	_, err = b.HandleCommands(ctx(t), "h", func(context.Context, event.Command) error { return nil })
	assert.ErrorIs(t, err, bus.ErrClosed)
}

// testConcurrent publishes from several goroutines while others subscribe,
// read and close, so the race detector sees every path at once. Each
// subscriber that stays open must see every publisher's events in that
// publisher's order.
func testConcurrent(t *testing.T, b bus.Bus) {
	const publishers, perPublisher = 4, 100
	watch, err := b.Subscribe(ctx(t), "t", publishers*perPublisher)
	require.NoError(t, err)
	defer watch.Close()

	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range perPublisher {
				e := events("t", int64(p*perPublisher+i+1), 1)
				assert.NoError(t, b.Publish(ctx(t), "t", e))
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for range 20 {
				s, err := b.Subscribe(ctx(t), "t", 2)
				if !assert.NoError(t, err) {
					return
				}
				// Read whatever is there, without waiting.
				c, cancel := context.WithCancel(ctx(t))
				cancel()
				_, _ = s.Next(c)
				s.Close()
			}
		})
	}
	wg.Wait()

	got := receive(t, watch, publishers*perPublisher)
	next := make([]int64, publishers)
	for p := range next {
		next[p] = int64(p*perPublisher + 1)
	}
	for _, e := range got {
		p := (e.Seq - 1) / perPublisher
		require.Equal(t, next[p], e.Seq, "publisher %d's events out of order", p)
		next[p]++
	}
}
