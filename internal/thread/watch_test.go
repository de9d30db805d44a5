package thread_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/thread"
)

// watched collects what a Watch's function is given.
type watched struct {
	mu     sync.Mutex
	seqs   []int64
	texts  []string
	change chan struct{} // receives after each event
}

func newWatched() *watched { return &watched{change: make(chan struct{}, 1)} }

func (w *watched) take(e event.Event) error {
	w.mu.Lock()
	w.seqs = append(w.seqs, e.Seq)
	w.texts = append(w.texts, e.Payload.(event.MessageDelta).Text)
	w.mu.Unlock()
	select {
	case w.change <- struct{}{}:
	default:
	}
	return nil
}

// waitFor waits until n events have come.
func (w *watched) waitFor(t *testing.T, n int) []int64 {
	t.Helper()
	deadline := time.After(wait)
	for {
		w.mu.Lock()
		if len(w.seqs) >= n {
			seqs := append([]int64(nil), w.seqs...)
			w.mu.Unlock()
			return seqs
		}
		w.mu.Unlock()
		select {
		case <-w.change:
		case <-deadline:
			t.Fatalf("%d of %d events came", len(w.seqs), n)
		}
	}
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// TestWatchReplaysThenFollows: a Watch calls its function with the log
// after the seq it starts after, then with each event as it is appended,
// in order, once each; Stop ends it with no error.
func TestWatchReplaysThenFollows(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 3)
	w := newWatched()
	sub, err := svc.Watch(ctx(t), "t", 1, w.take, nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3}, w.waitFor(t, 2))
	appendN(t, svc, "t", 2)
	assert.Equal(t, seqRange(2, 5), w.waitFor(t, 4))
	sub.Stop()
	<-sub.Done()
	assert.NoError(t, sub.Err())
	assert.Equal(t, int64(5), sub.Last())
}

// TestWatchOutlivesFallingBehind: a Watch whose function is held up while
// far more events are appended than its queue holds is not ended as a slow
// consumer: it reads what it missed from the log and goes on live, every
// event once, in order.
func TestWatchOutlivesFallingBehind(t *testing.T) {
	const queue, n = 4, 60
	svc := setup(t, nil, nil, thread.Options{QueueSize: queue})
	w := newWatched()
	release := make(chan struct{})
	sub, err := svc.Watch(ctx(t), "t", 0, func(e event.Event) error {
		if e.Seq == 1 {
			<-release
		}
		return w.take(e)
	}, nil)
	require.NoError(t, err)
	defer sub.Close()
	for i := range n {
		_, err := svc.Append(ctx(t), "t", delta(fmt.Sprint(i)))
		require.NoError(t, err, "an append waits for no subscriber")
	}
	close(release)
	assert.Equal(t, seqRange(1, n), w.waitFor(t, n))
	appendN(t, svc, "t", 1)
	assert.Equal(t, seqRange(1, n+1), w.waitFor(t, n+1), "and it goes on live")
	for i, text := range w.texts[:n] {
		assert.Equal(t, fmt.Sprint(i), text)
	}
}

// TestWatchEndsOnItsFunctionsError: an error from the function ends the
// watch with that error, which end is given; Stop from inside the function
// ends it quietly.
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
	assert.Equal(t, int64(1), failing.Last())

	var stopping *thread.Subscription
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
	assert.Equal(t, 1, calls, "nothing is delivered after Stop")
	assert.NoError(t, <-ended)
}

// TestPreviewsReachOnlyThoseWhoAskInTheirPlace: a preview reaches the
// live subscribers that asked for previews (bus.WantPreviews), after the
// committed events before it, and never one still short of the event it
// follows; it is never logged, and the consumer's place (Last) stays the
// last committed event's.
func TestPreviewsReachOnlyThoseWhoAskInTheirPlace(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	require.True(t, svc.Previews(), "the local bus carries previews")
	appendN(t, svc, "t", 2)
	wanting, plain := newWatched(), newWatched()
	sub, err := svc.Watch(bus.WantPreviews(ctx(t)), "t", 0, wanting.take, nil)
	require.NoError(t, err)
	defer sub.Close()
	other, err := svc.Watch(ctx(t), "t", 0, plain.take, nil)
	require.NoError(t, err)
	defer other.Close()
	wanting.waitFor(t, 2)
	plain.waitFor(t, 2)

	pv := delta("ahead")
	pv.Preview = 2
	svc.Preview("t", pv)
	early := delta("too early")
	early.Preview = 3 // follows seq 3, which nobody has had
	svc.Preview("t", early)
	appendN(t, svc, "t", 1)
	assert.Equal(t, []int64{1, 2, 0, 3}, wanting.waitFor(t, 4), "the preview, then the next commit")
	assert.Equal(t, "ahead", wanting.texts[2])
	assert.Equal(t, []int64{1, 2, 3}, plain.waitFor(t, 3), "no preview without asking")
	// Last is recorded once the function has returned.
	assert.Eventually(t, func() bool { return sub.Last() == 3 }, wait, time.Millisecond)
	logged, err := svc.Read(ctx(t), "t", 0, 10)
	require.NoError(t, err)
	assert.Len(t, logged, 3, "previews are not logged")
}

// TestIdleWatchHoldsNoGoroutine: once a watch has handed on what there
// was, no goroutine of its is left waiting; the next append starts one,
// and Close ends the watch though none runs.
func TestIdleWatchHoldsNoGoroutine(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 2)
	watching := func() bool {
		buf := make([]byte, 1<<20)
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "agentwire/internal/thread.")
	}
	w := newWatched()
	sub, err := svc.Watch(ctx(t), "t", 0, w.take, nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2}, w.waitFor(t, 2))
	assert.Eventually(t, func() bool { return !watching() }, wait, time.Millisecond,
		"an idle watch still holds a goroutine")
	for round := range 3 {
		appendN(t, svc, "t", 1)
		assert.Equal(t, seqRange(1, int64(3+round)), w.waitFor(t, 3+round))
	}
	assert.Eventually(t, func() bool { return !watching() }, wait, time.Millisecond)
	sub.Close()
	select {
	case <-sub.Done():
	default:
		t.Fatal("Close returned before the watch ended")
	}
	assert.NoError(t, sub.Err())
}
