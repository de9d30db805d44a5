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

// threadCore is the part of protocol.Core the follow views use, over a
// real thread service.
type threadCore struct {
	protocol.Core // nil: the other methods are not used
	svc           *thread.Service
}

func (c threadCore) Pull(ctx context.Context, t string, after int64, notify func()) (*thread.Pull, error) {
	return c.svc.Pull(ctx, t, after, thread.PullOptions{Notify: notify})
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

// TestViewsOverCore follows a thread through Core.Pull with each of the
// package's views, with a consumer that falls far behind its queue: every
// seq once, in order, and the view ends as its consumer says. (The engine
// and every view are tested in depth in internal/thread.)
func TestViewsOverCore(t *testing.T) {
	want := make([]int64, 0, 42)
	for s := int64(2); s <= 43; s++ {
		want = append(want, s)
	}
	// consume takes each event until seq 43, appending 40 more events
	// (far more than the queue holds) while it handles the first.
	consume := func(svc *thread.Service, got *[]int64) func(event.Event) error {
		stalled := false
		return func(e event.Event) error {
			*got = append(*got, e.Seq)
			if !stalled {
				stalled = true
				appendN(t, svc, "t", 40)
			}
			if e.Seq == 43 {
				return protocol.ErrStop
			}
			return nil
		}
	}
	t.Run("follow", func(t *testing.T) {
		svc := newService(t, 4)
		appendN(t, svc, "t", 3)
		f, err := protocol.Follow(t.Context(), threadCore{svc: svc}, "t", 1)
		require.NoError(t, err)
		defer f.Close()
		assert.Equal(t, int64(3), f.Head())
		var got []int64
		require.NoError(t, f.Run(t.Context(), consume(svc, &got)))
		assert.Equal(t, want, got)
	})
	t.Run("watch", func(t *testing.T) {
		svc := newService(t, 4)
		appendN(t, svc, "t", 3)
		var got []int64
		ended := make(chan error, 1)
		w, err := protocol.WatchThread(t.Context(), threadCore{svc: svc}, "t", 1, consume(svc, &got), func(err error) { ended <- err })
		require.NoError(t, err)
		<-w.Done()
		require.NoError(t, <-ended)
		assert.Equal(t, want, got)
	})
	t.Run("pull", func(t *testing.T) {
		svc := newService(t, 4)
		appendN(t, svc, "t", 3)
		wake := make(chan struct{}, 1)
		p, err := protocol.PullThread(t.Context(), threadCore{svc: svc}, "t", 1, func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		require.NoError(t, err)
		defer p.Close()
		var got []int64
		fn := consume(svc, &got)
		for done := false; !done; {
			e, ok, err := p.Next()
			require.NoError(t, err)
			if !ok {
				select {
				case <-wake:
				case <-time.After(10 * time.Second):
					t.Fatalf("%d events came", len(got))
				}
				continue
			}
			done = errors.Is(fn(e), protocol.ErrStop)
		}
		assert.Equal(t, want, got)
	})
	t.Run("subscribe", func(t *testing.T) {
		svc := newService(t, 4)
		appendN(t, svc, "t", 3)
		sub, err := protocol.Subscribe(t.Context(), threadCore{svc: svc}, "t", 1)
		require.NoError(t, err)
		defer sub.Close()
		var got []int64
		fn := consume(svc, &got)
		for e := range sub.Events() {
			if errors.Is(fn(e), protocol.ErrStop) {
				break
			}
		}
		assert.Equal(t, want, got)
	})
	t.Run("after the end", func(t *testing.T) {
		svc := newService(t, 4)
		_, err := protocol.Follow(t.Context(), threadCore{svc: svc}, "t", 99)
		assert.ErrorIs(t, err, thread.ErrAfterEnd)
	})
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
