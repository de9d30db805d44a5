package thread_test

import (
	"context"
	"errors"
	"fmt"
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

func seqRange(from, to int64) []int64 {
	out := []int64{}
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func seqsOf(events []event.Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Seq
	}
	return out
}

func TestPullRejectsSeqOutsideTheLog(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	appendN(t, svc, "t", 2)
	notify := func() {}
	_, err := svc.Pull(ctx(t), "t", 3, thread.PullOptions{Notify: notify})
	assert.ErrorIs(t, err, thread.ErrAfterEnd, "Pull after seq 3 of 2")
	var ae *thread.AfterEndError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, thread.AfterEndError{Thread: "t", After: 3, Last: 2}, *ae)
	_, err = svc.Pull(ctx(t), "t", -2, thread.PullOptions{Notify: notify})
	assert.Error(t, err, "Pull after seq -2")
	_, err = svc.Pull(ctx(t), "t", 0, thread.PullOptions{})
	assert.Error(t, err, "Pull without a notify")
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

// TestServiceCloseRefusesMore: after Close, nothing is appended and
// nothing can be followed.
func TestServiceCloseRefusesMore(t *testing.T) {
	svc := setup(t, nil, nil, thread.Options{})
	require.NoError(t, svc.Close())
	require.NoError(t, svc.Close(), "second Close")
	_, err := svc.Pull(ctx(t), "t", 0, thread.PullOptions{Notify: func() {}})
	assert.ErrorIs(t, err, thread.ErrClosed, "Pull after Close")
	_, err = svc.Append(ctx(t), "t", delta("x"))
	assert.ErrorIs(t, err, thread.ErrClosed, "Append after Close")
}

// failingReads fails every Read.
type failingReads struct{ thread.Store }

var errRead = errors.New("read failed")

func (failingReads) Read(context.Context, string, int64, int) ([]event.Event, error) {
	return nil, errRead
}

// TestClaimAndAppend claims a thread and appends its first event in one
// commit: followers get the event; a second claim is refused and appends
// nothing.
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
