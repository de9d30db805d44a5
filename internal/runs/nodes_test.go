package runs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/store"
)

// recordingBus records the commands sent over it.
type recordingBus struct {
	bus.Bus
	mu   sync.Mutex
	sent []event.CommandKind
}

func (r *recordingBus) Send(ctx context.Context, thread string, cmd event.Command) error {
	r.mu.Lock()
	r.sent = append(r.sent, cmd.Kind)
	r.mu.Unlock()
	return r.Bus.Send(ctx, thread, cmd)
}

func (r *recordingBus) kinds() []event.CommandKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event.CommandKind(nil), r.sent...)
}

// TestTwoManagersShareThreadsOverTheBus runs two Managers on one store and
// one bus, as two nodes would: input and answers given to the one that does
// not own the thread travel over the bus to the one that does.
func TestTwoManagersShareThreadsOverTheBus(t *testing.T) {
	e := newEnv(t)
	rec := &recordingBus{Bus: e.bus}
	other := runs.New(runs.Config{Log: e.log, Claims: e.store, Bus: rec, Runner: e.agent, Node: "node-b"})
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		other.Shutdown(ctx)
	})

	first := e.post("t1", "touch it") // e.m owns t1
	call := e.log.waitFor(t, 1, approvalOf(first.Run)).Payload.(event.ToolApprovalRequested)
	run, err := other.Active(t.Context(), "t1")
	require.NoError(t, err)
	assert.Equal(t, first.Run, run, "the other node reads the claim")

	second, err := other.Post(t.Context(), "t1", runs.Input{Text: "second"})
	require.NoError(t, err)
	assert.True(t, second.Queued, "queued at the owner, not run beside it")
	require.NoError(t, other.Resolve(t.Context(), "t1", event.Command{Kind: event.CommandApprove, ID: call.CallID, Decision: event.DecisionApprove}))
	e.log.waitFor(t, 1, ended(second.Run))
	assert.Equal(t, []string{
		"message.user 1", "run.started 1", "tool.approval.requested 1", "tool.approval.resolved 1", "run.completed 1",
		"message.user 2", "run.started 2", "run.completed 2",
	}, e.events("t1", map[string]string{first.Run: "1", second.Run: "2"}))
	assert.Equal(t, []event.CommandKind{event.CommandPost, event.CommandApprove}, rec.kinds())
	require.Eventually(t, func() bool { return e.active("t1") == "" }, testTimeout, time.Millisecond,
		"the claim is released after the last queued run")

	// Now the other Manager owns the thread's next run, and a cancel given
	// to the first reaches it.
	third, err := other.Post(t.Context(), "t1", runs.Input{Text: "touch it", Interactive: true})
	require.NoError(t, err)
	assert.False(t, third.Queued)
	e.log.waitFor(t, 1, approvalOf(third.Run))
	require.NoError(t, e.m.Cancel(t.Context(), "t1"))
	assert.Equal(t, event.RunCancelled{Reason: "cancelled"}, e.log.waitFor(t, 1, ended(third.Run)).Payload)
}

// TestConcurrentPostsRunOneAtATime posts to one idle thread from many
// goroutines through two Managers: every input runs, never two at once.
func TestConcurrentPostsRunOneAtATime(t *testing.T) {
	claimModes(t, testConcurrentPostsRunOneAtATime)
}

func testConcurrentPostsRunOneAtATime(t *testing.T, e *env) {
	other := runs.New(runs.Config{Log: e.log, Claims: e.store, Bus: e.bus, Runner: e.agent, Node: "node-b"})
	t.Cleanup(func() { other.Shutdown(t.Context()) })
	const posts = 24
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids []string
	)
	for i := range posts {
		wg.Go(func() {
			m := e.m
			if i%2 == 1 {
				m = other
			}
			p, err := m.Post(t.Context(), "t1", runs.Input{Text: "hello"})
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			ids = append(ids, p.Run)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, ids, posts)
	for _, id := range ids {
		e.log.waitFor(t, 1, ended(id))
	}
	evs, err := e.log.Read(t.Context(), "t1", 0, 100000)
	require.NoError(t, err)
	running := ""
	for _, ev := range evs {
		switch ev.Payload.(type) {
		case event.MessageUser:
			require.Empty(t, running, "a run started while run %s was going on", running)
			running = ev.Run
		case event.RunCompleted, event.RunFailed, event.RunCancelled:
			require.Equal(t, running, ev.Run)
			running = ""
		}
	}
}

// mortal is one node's view of the store and the bus, which the test can
// kill: its claims stop being renewed and its command handlers stop
// answering, as when its process dies, while the process itself (the test)
// goes on. Reviving it lets it renew again, as a node cut off for a while.
type mortal struct {
	store.Runs
	bus.Bus
	dead atomic.Bool

	mu    sync.Mutex
	stops []func()
}

var errDead = errors.New("the node is dead")

func (n *mortal) RenewRuns(ctx context.Context, node string, lease time.Duration) ([]store.RunClaim, error) {
	if n.dead.Load() {
		return nil, errDead
	}
	return n.Runs.RenewRuns(ctx, node, lease)
}

func (n *mortal) HandleCommands(ctx context.Context, thread string, fn bus.Handler) (func(), error) {
	stop, err := n.Bus.HandleCommands(ctx, thread, fn)
	if err == nil {
		n.mu.Lock()
		n.stops = append(n.stops, stop)
		n.mu.Unlock()
	}
	return stop, err
}

func (n *mortal) kill() {
	n.dead.Store(true)
	n.mu.Lock()
	stops := n.stops
	n.stops = nil
	n.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// TestDeadNodesThreadIsTakenOver kills the node running a thread's run
// while input waits behind it: once its lease runs out another node ends
// the dead run as interrupted and runs the queued input; and the dead node,
// should it come back, stops its old run without writing to the thread.
func TestDeadNodesThreadIsTakenOver(t *testing.T) {
	e := newEnv(t)
	const lease = 300 * time.Millisecond
	a := &mortal{Runs: e.store, Bus: e.bus}
	nodeA := runs.New(runs.Config{Log: e.log, Claims: a, Bus: a, Runner: e.agent, Node: "node-a", Lease: lease, Shared: true})
	nodeB := runs.New(runs.Config{Log: e.log, Claims: e.store, Bus: e.bus, Runner: e.agent, Node: "node-b", Lease: lease, Shared: true})
	for _, m := range []*runs.Manager{nodeA, nodeB} {
		t.Cleanup(func() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			m.Shutdown(ctx)
		})
	}

	first, err := nodeA.Post(t.Context(), "t1", runs.Input{Text: "touch it", Interactive: true})
	require.NoError(t, err)
	e.log.waitFor(t, 1, approvalOf(first.Run))
	a.kill()

	// Input posted meanwhile finds the thread claimed and nobody
	// answering: it waits in the store.
	queued, err := nodeB.Post(t.Context(), "t1", runs.Input{Text: "after the crash"})
	require.NoError(t, err)
	assert.True(t, queued.Queued)

	failed := e.log.waitFor(t, 1, ended(first.Run)).Payload
	assert.Equal(t, event.RunFailed{Code: event.CodeInterrupted, Message: "The server stopped while this run was going on."}, failed)
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Echo: after the crash"}, e.log.waitFor(t, 1, ended(queued.Run)).Payload)
	require.Eventually(t, func() bool { return e.active("t1") == "" }, testTimeout, time.Millisecond)

	// Node A comes back: finding its claim gone, it cancels its old run,
	// which records nothing more.
	a.dead.Store(false)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	nodeA.Shutdown(ctx)
	ends := 0
	for _, line := range e.events("t1", map[string]string{first.Run: "1"}) {
		if strings.HasPrefix(line, "run.") && strings.HasSuffix(line, " 1") && line != "run.started 1" {
			ends++
		}
	}
	assert.Equal(t, 1, ends, "the interrupted run has exactly one end: %v", e.events("t1", map[string]string{first.Run: "1"}))
}

// stalledRenew is a node's store whose renewal, once armed, reads the
// claims and then waits for the test before it answers: a renewal slowed
// by a busy machine, while a post claims a thread.
type stalledRenew struct {
	store.Runs
	renewals atomic.Int32
	armed    atomic.Bool
	read     chan struct{} // closed once the armed renewal has read the claims
	release  chan struct{} // closed by the test: the armed renewal answers
}

func (s *stalledRenew) RenewRuns(ctx context.Context, node string, lease time.Duration) ([]store.RunClaim, error) {
	claims, err := s.Runs.RenewRuns(ctx, node, lease)
	if s.armed.CompareAndSwap(true, false) {
		close(s.read)
		select {
		case <-s.release:
		case <-ctx.Done():
		}
	}
	s.renewals.Add(1)
	return claims, err
}

// TestPostDuringSlowRenewalKeepsItsRun posts to a thread while the node
// renews its claims (read, not yet answered): the new claim is not in the
// answer, and its run must not be taken for one whose claim another node
// took over. (It was cancelled, and its thread hung with a claim renewed
// for nobody, when this happened to TestClusterRaceToStart on a busy
// machine.)
func TestPostDuringSlowRenewalKeepsItsRun(t *testing.T) {
	e := newEnv(t)
	st := &stalledRenew{Runs: e.store, read: make(chan struct{}), release: make(chan struct{})}
	st.armed.Store(true)
	m := runs.New(runs.Config{Log: e.log, Claims: st, Bus: e.bus, Runner: e.agent, Node: "node-a", Lease: 300 * time.Millisecond, Shared: true})
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m.Shutdown(ctx)
	})
	select {
	case <-st.read:
	case <-time.After(testTimeout):
		t.Fatal("the node never renewed its claims")
	}

	posted, err := m.Post(t.Context(), "t1", runs.Input{Text: "touch it", Interactive: true})
	require.NoError(t, err)
	call := e.log.waitFor(t, 1, approvalOf(posted.Run)).Payload.(event.ToolApprovalRequested)
	close(st.release)
	// The stalled renewal answers without the new claim; two more renew
	// it.
	n := st.renewals.Load()
	require.Eventually(t, func() bool { return st.renewals.Load() >= n+2 }, testTimeout, time.Millisecond)

	require.NoError(t, m.Resolve(t.Context(), "t1", event.Command{Kind: event.CommandApprove, ID: call.CallID, Decision: event.DecisionApprove}))
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Made."}, e.log.waitFor(t, 1, ended(posted.Run)).Payload,
		"the run goes on to its end")
}
