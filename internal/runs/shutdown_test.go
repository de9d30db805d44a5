package runs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/store"
)

func TestShutdownCancelsWhenGraceEnds(t *testing.T) {
	e := newEnv(t)
	p := e.post("t1", "touch it")
	e.log.waitFor(t, 1, approvalOf(p.Run))
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // no grace at all
	e.m.Shutdown(ctx)
	// Shutdown returns once the run wrote its end.
	evs, err := e.log.Read(t.Context(), "t1", 0, 10000)
	require.NoError(t, err)
	assert.Equal(t, event.RunCancelled{Reason: "cancelled"}, evs[len(evs)-1].Payload)
	assert.Empty(t, e.active("t1"))

	_, err = e.m.Post(t.Context(), "t1", runs.Input{Text: "late"})
	assert.ErrorIs(t, err, runs.ErrShuttingDown)
}

func TestShutdownLetsRunsFinishInTheGrace(t *testing.T) {
	e := newEnv(t)
	p := e.post("t1", "touch it")
	call := e.log.waitFor(t, 1, approvalOf(p.Run)).Payload.(event.ToolApprovalRequested)
	queued := e.post("t1", "queued")
	require.True(t, queued.Queued)

	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.m.Shutdown(ctx)
	}()
	// While the manager waits for its runs, people can still answer them.
	require.Eventually(t, func() bool {
		_, err := e.m.Post(t.Context(), "t2", runs.Input{Text: "x"})
		return err != nil
	}, testTimeout, time.Millisecond, "Shutdown stops taking input")
	require.NoError(t, e.m.Resolve(t.Context(), "t1", event.Command{Kind: event.CommandApprove, ID: call.CallID, Decision: event.DecisionApprove}))
	<-done
	evs, err := e.log.Read(t.Context(), "t1", 0, 10000)
	require.NoError(t, err)
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Made."}, evs[len(evs)-1].Payload)
	assert.Equal(t, []string{"message.user 1", "run.started 1", "tool.approval.requested 1", "tool.approval.resolved 1", "run.completed 1"},
		e.events("t1", map[string]string{p.Run: "1"}), "queued input does not start during shutdown")
}

// TestShutdownWaitsForEveryRunItLetStart posts to many threads while the
// manager shuts down: each post either fails with ErrShuttingDown or starts
// a run that has ended by the time Shutdown returns.
func TestShutdownWaitsForEveryRunItLetStart(t *testing.T) {
	e := newEnv(t)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted = map[string]string{} // run -> thread
	)
	start := make(chan struct{})
	for i := range 8 {
		wg.Go(func() {
			<-start
			for j := 0; ; j++ {
				thread := "t" + string(rune('a'+i)) + string(rune('a'+j%26))
				p, err := e.m.Post(context.Background(), thread, runs.Input{Text: "hello"})
				if err != nil {
					assert.ErrorIs(t, err, runs.ErrShuttingDown)
					return
				}
				mu.Lock()
				accepted[p.Run] = thread
				mu.Unlock()
			}
		})
	}
	close(start)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	e.m.Shutdown(ctx)
	wg.Wait()
	// Every accepted run, queued or not, either never started or has ended.
	for run, thread := range accepted {
		evs, err := e.log.Read(t.Context(), thread, 0, 10000)
		require.NoError(t, err)
		started, ends := false, 0
		for _, ev := range evs {
			if ev.Run != run {
				continue
			}
			switch ev.Payload.(type) {
			case event.RunStarted:
				started = true
			case event.RunCompleted, event.RunFailed, event.RunCancelled:
				ends++
			}
		}
		if started {
			assert.Equal(t, 1, ends, "run %s of %s started but had not ended when Shutdown returned", run, thread)
		}
	}
}

// TestPostRacingShutdown holds a Post between its check that the manager
// runs and its run's joining the runs Shutdown waits for, while Shutdown
// (with no run to wait for) returns: the Post must then fail, not start a
// run nobody waits for. (A Post whose run joined first is waited for:
// TestShutdownWaitsForEveryRunItLetStart.)
func TestPostRacingShutdown(t *testing.T) {
	e := newEnv(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.bus.mu.Lock()
	e.bus.onSend = func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	e.bus.mu.Unlock()

	errc := make(chan error, 1)
	go func() {
		_, err := e.m.Post(context.Background(), "t1", runs.Input{Text: "hello"})
		errc <- err
	}()
	<-entered // Post is about to find the thread has no owner
	e.m.Shutdown(t.Context())
	close(release)
	assert.ErrorIs(t, <-errc, runs.ErrShuttingDown)
	assert.Empty(t, e.active("t1"))
	evs, err := e.log.Read(t.Context(), "t1", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, evs, "nothing was written after Shutdown returned")
}

// TestPostOutlivesItsPoster cancels a Post's context the moment its
// message is committed, as a WebSocket closed by a shutdown does to the
// post of a client that has just seen its message: the post is the
// thread's from that commit on, so its run starts and ends as any other,
// rather than failing to start.
func TestPostOutlivesItsPoster(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	e.log.mu.Lock()
	e.log.afterClaim = cancel
	e.log.mu.Unlock()

	p, err := e.m.Post(ctx, "t1", runs.Input{Text: "hello"})
	require.NoError(t, err)
	require.Error(t, ctx.Err(), "the hook did not run")
	end := e.log.waitFor(t, 1, ended(p.Run))
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Echo: hello"}, end.Payload)
	assert.Equal(t, []string{"message.user 1", "run.started 1", "run.completed 1"}, e.events("t1", map[string]string{p.Run: "1"}))
}

// lettingGo is the store of a node whose claim on a thread goes the moment
// a post's input joins the thread's queue, as when the thread's owner lets
// it go just then; the hook also ends the poster's context.
type lettingGo struct {
	store.Runs
	onEnqueue func()
}

func (l *lettingGo) EnqueueInput(ctx context.Context, thread string, in store.QueuedInput) error {
	err := l.Runs.EnqueueInput(ctx, thread, in)
	if err == nil && l.onEnqueue != nil {
		l.onEnqueue()
	}
	return err
}

// TestQueuedPostOutlivesItsPoster posts to a thread claimed by a node that
// takes no commands (one letting the thread go): the input joins the
// thread's queue, and the claim goes with the poster's context at that
// moment. The post still sees its input run, as the claim is free.
func TestQueuedPostOutlivesItsPoster(t *testing.T) {
	e := newEnv(t)
	held := store.RunClaim{Thread: "t1", Run: event.NewID(), Node: "node-going"}
	require.NoError(t, e.store.ClaimRun(t.Context(), held, time.Minute))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	claims := &lettingGo{Runs: e.store, onEnqueue: func() {
		assert.NoError(t, e.store.ReleaseRun(context.Background(), held))
		cancel()
	}}
	m := runs.New(runs.Config{Log: e.log, Claims: claims, Bus: e.bus, Runner: e.agent, Node: "node-here"})
	t.Cleanup(func() { m.Shutdown(t.Context()) })

	p, err := m.Post(ctx, "t1", runs.Input{Text: "hello"})
	require.NoError(t, err)
	require.True(t, p.Queued, "the thread was claimed: the input waits in its queue")
	require.Error(t, ctx.Err(), "the hook did not run")
	end := e.log.waitFor(t, 1, ended(p.Run))
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Echo: hello"}, end.Payload)
}

// TestCancelRightAfterTheEcho cancels a run the moment its message is
// committed, before its owner takes the thread's commands, as a client
// that answers the echo of its message at once does: the cancel finds
// nobody taking the thread's commands, waits for the owner, and reaches
// the run.
func TestCancelRightAfterTheEcho(t *testing.T) {
	e := newEnv(t)
	refused := make(chan struct{})
	var once sync.Once
	e.bus.mu.Lock()
	e.bus.afterSend = func(cmd event.Command, err error) {
		if cmd.Kind == event.CommandCancel && errors.Is(err, bus.ErrNoHandler) {
			once.Do(func() { close(refused) })
		}
	}
	e.bus.mu.Unlock()
	cancelled := make(chan error, 1)
	e.log.mu.Lock()
	e.log.afterClaim = func() {
		go func() { cancelled <- e.m.Cancel(context.Background(), "t1") }()
		<-refused // the cancel found nobody taking the thread's commands
	}
	e.log.mu.Unlock()

	p := e.post("t1", "touch it") // waits for an approval, so it is still running
	require.NoError(t, <-cancelled)
	end := e.log.waitFor(t, 1, ended(p.Run))
	assert.Equal(t, event.RunCancelled{Reason: "cancelled"}, end.Payload)
}
