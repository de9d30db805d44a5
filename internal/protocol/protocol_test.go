package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/leaktest"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/store/memory"
	"github.com/agentwire/agentwire/internal/thread"
)

// threadCore is the part of protocol.Core a Follower uses, over a real
// thread service.
type threadCore struct {
	protocol.Core // nil: the other methods are not used
	svc           *thread.Service
}

func (c threadCore) Subscribe(ctx context.Context, t string, after int64) (protocol.Feed, error) {
	sub, err := c.svc.Subscribe(ctx, t, after)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// newService returns a thread service whose subscribers may fall queue
// events behind before they are dropped as slow consumers.
func newService(t *testing.T, queue int) *thread.Service {
	t.Helper()
	leaktest.Check(t, "agentwire/agentwire/internal")
	log, b := memory.New(), local.New()
	svc := thread.New(log, b, nil, thread.Options{QueueSize: queue, PageSize: 3})
	t.Cleanup(func() {
		_ = svc.Close()
		_ = b.Close()
		_ = log.Close()
	})
	return svc
}

func appendN(t *testing.T, svc *thread.Service, th string, n int) {
	t.Helper()
	for i := range n {
		_, err := svc.Append(t.Context(), th, event.Event{Run: "r", Payload: event.MessageDelta{MessageID: "m", Text: fmt.Sprint(i)}})
		require.NoError(t, err)
	}
}

// TestFollowerOutlivesSlowConsumption lets a consumer fall far behind its
// subscription's queue: the follower resubscribes after the last event it
// took, and the consumer sees every seq once, in order.
func TestFollowerOutlivesSlowConsumption(t *testing.T) {
	svc := newService(t, 4)
	core := threadCore{svc: svc}
	appendN(t, svc, "t", 3)
	f, err := protocol.Follow(t.Context(), core, "t", 1, nil)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, int64(3), f.Head())

	var got []int64
	stalled := false
	err = f.Run(t.Context(), func(e event.Event) error {
		got = append(got, e.Seq)
		if !stalled {
			// While the consumer is busy, far more is committed than its
			// queue holds: its subscription ends as a slow consumer.
			stalled = true
			appendN(t, svc, "t", 40)
		}
		if e.Seq == 43 {
			return protocol.ErrStop
		}
		return nil
	})
	require.NoError(t, err)
	want := make([]int64, 0, 42)
	for s := int64(2); s <= 43; s++ {
		want = append(want, s)
	}
	assert.Equal(t, want, got)
}

func TestFollowerRunEnds(t *testing.T) {
	svc := newService(t, 16)
	core := threadCore{svc: svc}
	appendN(t, svc, "t", 2)

	f, err := protocol.Follow(t.Context(), core, "t", 0, nil)
	require.NoError(t, err)
	boom := errors.New("boom")
	assert.ErrorIs(t, f.Run(t.Context(), func(event.Event) error { return boom }), boom, "the callback's error")
	f.Close()

	f, err = protocol.Follow(t.Context(), core, "t", protocol.FromEnd, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	assert.NoError(t, f.Run(ctx, func(e event.Event) error {
		t.Errorf("FromEnd delivered seq %d of the log", e.Seq)
		return nil
	}), "a done context ends Run without an error")
	f.Close()

	f, err = protocol.Follow(t.Context(), core, "t", 0, nil)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, svc.Close())
	err = f.Run(t.Context(), func(event.Event) error { return nil })
	assert.ErrorIs(t, err, thread.ErrClosed, "a feed that ends for any other reason than falling behind ends the follow")

	_, err = protocol.Follow(t.Context(), core, "t", 99, nil)
	assert.Error(t, err, "after the thread's end")
}

func TestAsError(t *testing.T) {
	_, decodeErr := agentchatapi.Decode([]byte(`{"type":"chat","message":5}`))
	_, unknownErr := agentchatapi.Decode([]byte(`{"type":"shout"}`))
	own := protocol.Errorf(protocol.CodeBusy, "busy now")
	for _, tc := range []struct {
		name string
		err  error
		want protocol.Error
	}{
		{"invalid frame", decodeErr, protocol.Error{Code: protocol.CodeInvalid, Message: "/message: must be string", Path: "/message", Type: "chat"}},
		{"unknown type", unknownErr, protocol.Error{Code: protocol.CodeUnknownType, Message: `/type: unknown message type "shout"`, Path: "/type", Type: "shout"}},
		{"own error, wrapped", fmt.Errorf("posting: %w", own), protocol.Error{Code: protocol.CodeBusy, Message: "busy now"}},
		{"anything else", errors.New("disk on fire"), protocol.Error{Code: protocol.CodeInternal, Message: "internal error"}},
	} {
		got := protocol.AsError(tc.err)
		require.NotNil(t, got, tc.name)
		got.Cause = nil
		assert.Equal(t, tc.want, *got, tc.name)
	}
	assert.Nil(t, protocol.AsError(nil))
	cause := errors.New("x")
	assert.ErrorIs(t, protocol.AsError(cause), cause, "the cause stays reachable")
}

func TestVerifier(t *testing.T) {
	validate := func(b []byte) error {
		if string(b) != "ok" {
			return errors.New("bad frame")
		}
		return nil
	}
	assert.Nil(t, protocol.Env{}.Verifier("p", validate), "no checks without Verify")
	var verdicts []string
	env := protocol.Env{Verify: func(proto string, frame []byte, err error) {
		verdicts = append(verdicts, fmt.Sprintf("%s %s %v", proto, frame, err))
	}}
	v := env.Verifier("p", validate)
	v([]byte("ok"))
	v([]byte("no"))
	assert.Equal(t, []string{"p ok <nil>", "p no bad frame"}, verdicts)
}

// watcherCore is threadCore with the thread service's Watch, as the
// server's Core has it.
type watcherCore struct{ threadCore }

func (c watcherCore) Watch(ctx context.Context, t string, after int64, fn func(event.Event) error, end func(error)) (protocol.Watch, error) {
	sub, err := c.svc.Watch(ctx, t, after, fn, end)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// TestWatchThread runs a watch that falls far behind its queue and ends
// with ErrStop, then one stopped from outside, over a Core that can watch
// (the function runs on the subscription's goroutine) and one that cannot
// (a Follower on a goroutine of WatchThread's): both see every seq once, in
// order, end quietly, and say so to end.
func TestWatchThread(t *testing.T) {
	for name, mk := range map[string]func(*thread.Service) protocol.Core{
		"watcher":  func(svc *thread.Service) protocol.Core { return watcherCore{threadCore{svc: svc}} },
		"follower": func(svc *thread.Service) protocol.Core { return threadCore{svc: svc} },
	} {
		t.Run(name, func(t *testing.T) {
			svc := newService(t, 4)
			core := mk(svc)
			_, isWatcher := core.(protocol.Watcher)
			assert.Equal(t, name == "watcher", isWatcher)
			appendN(t, svc, "t", 3)

			var got []int64
			stalled := false
			ended := make(chan error, 1)
			w, err := protocol.WatchThread(t.Context(), core, "t", 1, nil, func(e event.Event) error {
				got = append(got, e.Seq)
				if !stalled {
					stalled = true
					appendN(t, svc, "t", 40) // far more than the queue holds
				}
				if e.Seq == 43 {
					return protocol.ErrStop
				}
				return nil
			}, func(err error) { ended <- err })
			require.NoError(t, err)
			<-w.Done()
			require.NoError(t, <-ended)
			require.NoError(t, w.Err())
			want := make([]int64, 0, 42)
			for s := int64(2); s <= 43; s++ {
				want = append(want, s)
			}
			assert.Equal(t, want, got)

			seen := make(chan int64, 8)
			w, err = protocol.WatchThread(t.Context(), core, "t", protocol.FromEnd, nil, func(e event.Event) error {
				seen <- e.Seq
				return nil
			}, func(err error) { ended <- err })
			require.NoError(t, err)
			appendN(t, svc, "t", 1)
			assert.Equal(t, int64(44), <-seen, "live after the end")
			w.Stop()
			<-w.Done()
			assert.NoError(t, <-ended)
			assert.NoError(t, w.Err())
		})
	}
}

// pullerCore is a threadCore whose pulls run on the thread service's Pull.
type pullerCore struct{ threadCore }

func (c pullerCore) Pull(ctx context.Context, t string, after int64, notify func()) (protocol.Pull, error) {
	return c.svc.Pull(ctx, t, after, notify)
}

// TestPullThread drives a pull as an SSE stream does, waiting on its
// notification alone, over a Puller and over the fallback of a Follower
// and a goroutine: the replay after the start, then live events, every
// seq once in order though the consumer falls far behind its queue; a
// pull from the end gets only what comes after; the service's Close
// wakes the consumer and ends the pull with its error.
func TestPullThread(t *testing.T) {
	for name, mk := range map[string]func(*thread.Service) protocol.Core{
		"puller":   func(svc *thread.Service) protocol.Core { return pullerCore{threadCore{svc: svc}} },
		"follower": func(svc *thread.Service) protocol.Core { return threadCore{svc: svc} },
	} {
		t.Run(name, func(t *testing.T) {
			svc := newService(t, 4)
			core := mk(svc)
			_, isPuller := core.(protocol.Puller)
			assert.Equal(t, name == "puller", isPuller)
			appendN(t, svc, "t", 3)

			wake := make(chan struct{}, 1)
			notify := func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
			// take waits for events until n have come or the pull ends.
			take := func(p protocol.Pull, n int) ([]int64, error) {
				var got []int64
				for len(got) < n {
					e, ok, err := p.Next()
					if err != nil {
						return got, err
					}
					if ok {
						got = append(got, e.Seq)
						continue
					}
					select {
					case <-wake:
					case <-time.After(10 * time.Second):
						t.Fatalf("%d of %d events came", len(got), n)
					}
				}
				return got, nil
			}
			p, err := protocol.PullThread(t.Context(), core, "t", 1, nil, notify)
			require.NoError(t, err)
			assert.Equal(t, int64(3), p.Head())
			got, err := take(p, 2)
			require.NoError(t, err)
			assert.Equal(t, []int64{2, 3}, got)
			appendN(t, svc, "t", 40) // far more than the queue holds
			got, err = take(p, 40)
			require.NoError(t, err)
			want := make([]int64, 0, 40)
			for s := int64(4); s <= 43; s++ {
				want = append(want, s)
			}
			assert.Equal(t, want, got)
			p.Close()
			p.Close()
			_, _, err = p.Next()
			assert.Error(t, err, "Next after Close")

			p, err = protocol.PullThread(t.Context(), core, "t", protocol.FromEnd, nil, notify)
			require.NoError(t, err)
			defer p.Close()
			appendN(t, svc, "t", 1)
			got, err = take(p, 1)
			require.NoError(t, err)
			assert.Equal(t, []int64{44}, got, "live after the end")

			closed := make(chan error, 1)
			go func() { closed <- svc.Close() }()
			got, err = take(p, 1)
			assert.Empty(t, got)
			assert.ErrorIs(t, err, thread.ErrClosed)
			require.NoError(t, <-closed)
		})
	}
}
