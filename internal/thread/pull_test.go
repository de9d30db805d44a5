package thread_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store/memory"
	"github.com/agentwire/agentwire/internal/thread"
)

// puller is one consumer of a Pull, as an SSE stream is: it waits for the
// notification and takes what there is.
type puller struct {
	wake chan struct{}
	pull *thread.Pull
}

func newPuller(t *testing.T, svc *thread.Service, after int64, previews bool) *puller {
	t.Helper()
	p := &puller{wake: make(chan struct{}, 1)}
	c := ctx(t)
	if previews {
		c = bus.WantPreviews(c)
	}
	var err error
	p.pull, err = svc.Pull(c, "t", after, func() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	})
	require.NoError(t, err)
	return p
}

// take waits until n events have come, or the pull ends, and returns them.
func (p *puller) take(t *testing.T, n int) ([]event.Event, error) {
	t.Helper()
	var got []event.Event
	deadline := time.After(wait)
	for {
		for len(got) < n {
			e, ok, err := p.pull.Next()
			if err != nil {
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
		case <-p.wake:
		case <-deadline:
			t.Fatalf("%d of %d events came", len(got), n)
		}
	}
}

func seqsOf(events []event.Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Seq
	}
	return out
}

// TestPullReplaysThenFollows: a Pull hands on the log after its start,
// page by page, then each event as it is appended, once each and in order;
// Next reports nothing (without waiting) when nothing waits.
func TestPullReplaysThenFollows(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{PageSize: 2})
	appendN(t, svc, "t", 5)
	p := newPuller(t, svc, 1, false)
	defer p.pull.Close()
	assert.Equal(t, int64(5), p.pull.Head())
	got, err := p.take(t, 4)
	require.NoError(t, err)
	assert.Equal(t, seqRange(2, 5), seqsOf(got))
	_, ok, err := p.pull.Next()
	require.NoError(t, err)
	assert.False(t, ok, "nothing more waits")

	appendN(t, svc, "t", 2)
	got, err = p.take(t, 2)
	require.NoError(t, err)
	assert.Equal(t, seqRange(6, 7), seqsOf(got))
}

// TestPullOutlivesFallingBehind: a consumer that does not call Next while
// far more events are appended than its queue holds gets every one of them
// once, in order, read from the log, and then goes on live; a bus that
// loses events has its gaps filled from the log the same way.
func TestPullOutlivesFallingBehind(t *testing.T) {
	const queue, n = 4, 60
	for name, b := range map[string]bus.Bus{"slow": local.New(), "lossy": &lossyBus{Bus: local.New()}} {
		t.Run(name, func(t *testing.T) {
			svc := setup(t, nil, b, thread.Options{QueueSize: queue, PageSize: 7})
			p := newPuller(t, svc, 0, false)
			defer p.pull.Close()
			for i := range n {
				_, err := svc.Append(ctx(t), "t", delta(fmt.Sprint(i)))
				require.NoError(t, err, "an append waits for no subscriber")
			}
			got, err := p.take(t, n)
			require.NoError(t, err)
			assert.Equal(t, seqRange(1, n), seqsOf(got))
			for i, e := range got {
				assert.Equal(t, fmt.Sprint(i), e.Payload.(event.MessageDelta).Text)
			}
			appendN(t, svc, "t", 2)
			got, err = p.take(t, 2)
			require.NoError(t, err)
			assert.Equal(t, seqRange(n+1, n+2), seqsOf(got), "and it goes on live")
		})
	}
}

// TestPullPreviewsInTheirPlace: a Pull made with bus.WantPreviews gets a
// preview after the committed event it follows, one made without does
// not.
func TestPullPreviewsInTheirPlace(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 1)
	wanting, plain := newPuller(t, svc, 0, true), newPuller(t, svc, 0, false)
	defer wanting.pull.Close()
	defer plain.pull.Close()
	_, err := wanting.take(t, 1)
	require.NoError(t, err)
	_, err = plain.take(t, 1)
	require.NoError(t, err)
	pv := delta("ahead")
	pv.Preview = 1
	svc.Preview("t", pv)
	appendN(t, svc, "t", 1)
	got, err := wanting.take(t, 2)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 2}, seqsOf(got))
	assert.Equal(t, "ahead", got[0].Payload.(event.MessageDelta).Text)
	got, err = plain.take(t, 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{2}, seqsOf(got))
}

// TestPullHoldsNoGoroutine: a Pull runs on its consumer's goroutine only:
// none of the thread service's exists while it is open.
func TestPullHoldsNoGoroutine(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 2)
	p := newPuller(t, svc, 0, false)
	defer p.pull.Close()
	n := 2
	for range 3 {
		got, err := p.take(t, n)
		require.NoError(t, err)
		require.Len(t, got, n)
		buf := make([]byte, 1<<20)
		assert.NotContains(t, string(buf[:runtime.Stack(buf, true)]), "agentwire/internal/thread.")
		appendN(t, svc, "t", 1)
		n = 1
	}
}

// TestPullEnds: the service's Close notifies the consumer and ends the
// pull with ErrClosed, after what was already handed on; Close ends it
// quietly and lets the service close; a store error ends it with that
// error.
func TestPullEnds(t *testing.T) {
	t.Run("service close", func(t *testing.T) {
		svc := setup(t, nil, nil, thread.Options{})
		p := newPuller(t, svc, 0, false)
		closed := make(chan error, 1)
		go func() { closed <- svc.Close() }()
		select {
		case <-p.wake:
		case <-time.After(wait):
			t.Fatal("the consumer was not told")
		}
		_, err := p.take(t, 1)
		assert.ErrorIs(t, err, thread.ErrClosed)
		require.NoError(t, <-closed, "the service's Close returns once the pull has ended")
		p.pull.Close()
	})
	t.Run("close", func(t *testing.T) {
		svc := setup(t, nil, nil, thread.Options{})
		appendN(t, svc, "t", 3)
		p := newPuller(t, svc, 0, false)
		p.pull.Close()
		p.pull.Close()
		_, _, err := p.pull.Next()
		assert.Error(t, err, "Next after Close")
		require.NoError(t, svc.Close(), "nothing of the pull's is left to wait for")
	})
	t.Run("store error", func(t *testing.T) {
		svc := setup(t, failingReads{memory.New()}, nil, thread.Options{})
		_, err := svc.Append(ctx(t), "t", delta("a"))
		require.NoError(t, err)
		p := newPuller(t, svc, 0, false)
		defer p.pull.Close()
		_, err = p.take(t, 1)
		assert.ErrorIs(t, err, errRead)
		assert.True(t, strings.Contains(err.Error(), "read log"), err.Error())
	})
}
