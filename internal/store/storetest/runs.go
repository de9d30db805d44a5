package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

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
