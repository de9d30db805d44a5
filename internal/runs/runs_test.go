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

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/scripted"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/sqlite"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

const testTimeout = 20 * time.Second

// scenario: "touch" asks for approval under the default policy; anything
// else is echoed.
const scenario = `
name: runs
rules:
  - name: touch
    match: {contains: "touch"}
    steps:
      - tool_calls:
          - {name: bash, arguments: {command: "touch made.txt"}}
      - text: "{{if last_tool_error}}Not run.{{else}}Made.{{end}}"
  - name: echo
    steps:
      - text: "Echo: {{user_message}}"
        chunk: -1
`

// watched is a store as the Manager sees it (runs.Log), remembering what it
// committed so that tests can wait for an event as a subscriber would.
type watched struct {
	store.Store

	mu        sync.Mutex
	committed []event.Event
	changed   chan struct{}
	// together counts the runs claimed with their message in one commit.
	together int
	// beforeMessage, when set, is called before a user's message is
	// committed; an error it returns is the commit's.
	beforeMessage func(msg event.Event) error
	// previewed are the previews runs sent, in order: an agent with
	// LiveDeltas sends its deltas and marks ahead of their commit.
	previewed []event.Event
}

func (w *watched) Preview(thread string, e event.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.previewed = append(w.previewed, e)
}

func (w *watched) Previews() bool              { return true }
func (w *watched) WaitsForCommits(string) bool { return false }

// hold calls beforeMessage when events begin with a user's message.
func (w *watched) hold(events []event.Event) error {
	w.mu.Lock()
	hook := w.beforeMessage
	w.mu.Unlock()
	if hook == nil || len(events) == 0 || events[0].Type() != event.TypeMessageUser {
		return nil
	}
	return hook(events[0])
}

func (w *watched) Append(ctx context.Context, thread string, events ...event.Event) ([]event.Event, error) {
	if err := w.hold(events); err != nil {
		return nil, err
	}
	out, err := w.Store.Append(ctx, thread, events...)
	if err == nil {
		w.saw(out)
	}
	return out, err
}

// ClaimAndAppend is thread.Service's: the store's.
func (w *watched) ClaimAndAppend(ctx context.Context, c store.RunClaim, lease time.Duration, events ...event.Event) ([]event.Event, error) {
	if err := w.hold(events); err != nil {
		return nil, err
	}
	out, err := w.Store.ClaimAndAppend(ctx, c, lease, events...)
	if err == nil {
		w.mu.Lock()
		w.together++
		w.mu.Unlock()
		w.saw(out)
	}
	return out, err
}

func (w *watched) saw(committed []event.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.committed = append(w.committed, committed...)
	close(w.changed)
	w.changed = make(chan struct{})
}

// waitFor waits for the n-th (from 1) committed event that satisfies match.
func (w *watched) waitFor(t *testing.T, n int, match func(event.Event) bool) event.Event {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		seen := 0
		for _, e := range w.committed {
			if match(e) {
				if seen++; seen == n {
					w.mu.Unlock()
					return e
				}
			}
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no event number %d of the kind awaited was committed within %s", n, testTimeout)
		}
	}
}

func ofType(typ event.Type) func(event.Event) bool {
	return func(e event.Event) bool { return e.Type() == typ }
}

// ended matches the last event of run.
func ended(run string) func(event.Event) bool {
	return func(e event.Event) bool {
		switch e.Payload.(type) {
		case event.RunCompleted, event.RunFailed, event.RunCancelled:
			return e.Run == run
		}
		return false
	}
}

type env struct {
	t       *testing.T
	dataDir string
	workdir string
	store   *sqlite.Store
	log     *watched
	bus     *hookedBus
	agent   *agent.Agent
	m       *runs.Manager
	// model and tools are the agent's: the scripted model and the
	// built-in tools in workdir.
	model llm.Model
	tools agent.Toolbox
	// prepare, when set, is the Config.Prepare of the Managers newManager
	// starts; wrap, when set, wraps their runner (the agent).
	prepare func(ctx context.Context, thread string, opts event.RunOptions) (agent.Spec, func(), error)
	wrap    func(runs.Runner) runs.Runner
}

// hookedBus is a bus with a hook before every Send: the moment a Post
// looks for the thread's owner.
type hookedBus struct {
	bus.Bus
	mu     sync.Mutex
	onSend func() // before a command is sent
}

func (h *hookedBus) Send(ctx context.Context, thread string, cmd event.Command) error {
	h.mu.Lock()
	hook := h.onSend
	h.mu.Unlock()
	if hook != nil {
		hook()
	}
	return h.Bus.Send(ctx, thread, cmd)
}

// newEnv opens a SQLite store in a temporary folder and a Manager running
// the real agent with the scripted model and the built-in tools under the
// default (suggest) policy.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dataDir: t.TempDir(), workdir: t.TempDir()}
	e.open()
	root, err := sandbox.Open(e.workdir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = root.Close() })
	scn, err := scripted.Parse("runs.yaml", []byte(scenario))
	require.NoError(t, err)
	e.model = scripted.New(scn, scripted.WithPacing(scripted.Pacing{}))
	e.tools = builtin.New(root, builtin.Options{})
	e.agent = agent.New(agent.Config{Model: e.model, Tools: e.tools, Policy: tools.PolicySuggest})
	e.newManager()
	return e
}

func (e *env) open() {
	st, err := sqlite.Open(e.t.Context(), sqlite.Options{Dir: e.dataDir, Synchronous: "NORMAL"})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = st.Close() })
	e.store = st
	e.log = &watched{Store: st, changed: make(chan struct{})}
}

// newManager starts a Manager, on a bus of its own, that recovers what a
// previous one left; the test shuts it down at its end.
func (e *env) newManager() *runs.Manager {
	b := local.New()
	e.t.Cleanup(func() { _ = b.Close() })
	e.bus = &hookedBus{Bus: b}
	var runner runs.Runner = e.agent
	if e.wrap != nil {
		runner = e.wrap(runner)
	}
	m := runs.New(runs.Config{Log: e.log, Claims: e.store, Bus: e.bus, Runner: runner, Node: "node-" + event.NewID(), Prepare: e.prepare})
	require.NoError(e.t, m.Recover(e.t.Context()))
	e.t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m.Shutdown(ctx)
	})
	e.m = m
	return m
}

func (e *env) post(thread, text string) runs.Posted {
	e.t.Helper()
	p, err := e.m.Post(e.t.Context(), thread, runs.Input{Text: text, Interactive: true})
	require.NoError(e.t, err)
	return p
}

// active is the thread's active run, as the claims say.
func (e *env) active(thread string) string {
	e.t.Helper()
	run, err := e.m.Active(e.t.Context(), thread)
	require.NoError(e.t, err)
	return run
}

// events returns thread's events as "type" or "type run-label" lines, with
// run ids replaced by the labels given.
func (e *env) events(thread string, labels map[string]string) []string {
	e.t.Helper()
	evs, err := e.log.Read(e.t.Context(), thread, 0, 10000)
	require.NoError(e.t, err)
	var out []string
	for _, ev := range evs {
		// Only the run-level skeleton: the agent's own sequence is the
		// agent package's to test.
		switch ev.Type() {
		case event.TypeMessageUser, event.TypeRunStarted, event.TypeRunCompleted, event.TypeRunFailed,
			event.TypeRunCancelled, event.TypeToolApprovalRequested, event.TypeToolApprovalResolved:
			label, ok := labels[ev.Run]
			if !ok {
				label = "?"
			}
			out = append(out, string(ev.Type())+" "+label)
		}
	}
	return out
}

func approvalOf(run string) func(event.Event) bool {
	return func(e event.Event) bool { return e.Run == run && e.Type() == event.TypeToolApprovalRequested }
}

// claimModes runs test, which posts to threads no node owns, and checks
// that their runs were claimed with their user messages in one commit.
func claimModes(t *testing.T, test func(t *testing.T, e *env)) {
	e := newEnv(t)
	test(t, e)
	e.log.mu.Lock()
	together := e.log.together
	e.log.mu.Unlock()
	assert.NotZero(t, together, "no run was claimed with its message in one commit")
}

func TestPostRunsToTheEnd(t *testing.T) {
	claimModes(t, testPostRunsToTheEnd)
}

func testPostRunsToTheEnd(t *testing.T, e *env) {
	p := e.post("t1", "hello")
	assert.False(t, p.Queued)
	// Nothing holds this run, so it may have ended by now: that it is
	// active while it runs is checked where a run waits for an approval
	// (TestQueuedInputRunsInOrder); here, that it stops being active.
	end := e.log.waitFor(t, 1, ended(p.Run))
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Echo: hello"}, end.Payload)
	assert.Eventually(t, func() bool {
		run, err := e.m.Active(t.Context(), "t1")
		return err == nil && run == ""
	}, testTimeout, time.Millisecond, "the run stops being active once it ended")

	evs, err := e.log.Read(t.Context(), "t1", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, event.MessageUser{MessageID: p.MessageID, Text: "hello"}, evs[0].Payload)
	assert.Equal(t, p.Run, evs[0].Run)
}

func TestQueuedInputRunsInOrder(t *testing.T) {
	e := newEnv(t)
	first := e.post("t1", "touch it")
	call := e.log.waitFor(t, 1, approvalOf(first.Run)).Payload.(event.ToolApprovalRequested)

	second := e.post("t1", "second")
	third := e.post("t1", "third")
	assert.True(t, second.Queued)
	assert.True(t, third.Queued)
	assert.Equal(t, first.Run, e.active("t1"))
	// Queued input is not in the log until its run starts.
	assert.Equal(t, []string{"message.user 1", "run.started 1", "tool.approval.requested 1"},
		e.events("t1", map[string]string{first.Run: "1"}))

	require.NoError(t, e.m.Resolve(t.Context(), "t1", event.Command{Kind: event.CommandApprove, ID: call.CallID, Decision: event.DecisionApprove}))
	e.log.waitFor(t, 1, ended(third.Run))
	assert.Equal(t, []string{
		"message.user 1", "run.started 1", "tool.approval.requested 1", "tool.approval.resolved 1", "run.completed 1",
		"message.user 2", "run.started 2", "run.completed 2",
		"message.user 3", "run.started 3", "run.completed 3",
	}, e.events("t1", map[string]string{first.Run: "1", second.Run: "2", third.Run: "3"}))
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Echo: third"}, e.log.waitFor(t, 1, ended(third.Run)).Payload)
}

func TestThreadsRunIndependently(t *testing.T) {
	e := newEnv(t)
	a := e.post("t1", "touch it")
	e.log.waitFor(t, 1, approvalOf(a.Run))
	b := e.post("t2", "hello")
	assert.False(t, b.Queued, "another thread's run does not queue this one")
	e.log.waitFor(t, 1, ended(b.Run))
	assert.Equal(t, a.Run, e.active("t1"))
}

func TestCancel(t *testing.T) {
	e := newEnv(t)
	assert.ErrorIs(t, e.m.Cancel(t.Context(), "t1"), runs.ErrNoRun)

	first := e.post("t1", "touch it")
	e.log.waitFor(t, 1, approvalOf(first.Run))
	queued := e.post("t1", "never runs")
	require.True(t, queued.Queued)
	require.NoError(t, e.m.Cancel(t.Context(), "t1"))
	assert.Equal(t, event.RunCancelled{Reason: "cancelled"}, e.log.waitFor(t, 1, ended(first.Run)).Payload)

	// Cancel dropped the queued input: after the manager stops, nothing of
	// it is in the log.
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	e.m.Shutdown(ctx)
	assert.Equal(t, []string{"message.user 1", "run.started 1", "tool.approval.requested 1", "run.cancelled 1"},
		e.events("t1", map[string]string{first.Run: "1"}))
}

func TestResolve(t *testing.T) {
	e := newEnv(t)
	approval := func(id string, d event.Decision) event.Command {
		return event.Command{Kind: event.CommandApprove, ID: id, Decision: d}
	}
	assert.ErrorIs(t, e.m.Resolve(t.Context(), "t1", approval("call_x", event.DecisionApprove)), runs.ErrUnknownRequest, "no run")

	p := e.post("t1", "touch it")
	call := e.log.waitFor(t, 1, approvalOf(p.Run)).Payload.(event.ToolApprovalRequested)
	assert.ErrorIs(t, e.m.Resolve(t.Context(), "t1", approval("call_x", event.DecisionApprove)), runs.ErrUnknownRequest, "unknown id")
	assert.ErrorIs(t, e.m.Resolve(t.Context(), "t1", event.Command{Kind: event.CommandInput, ID: call.CallID, Text: "yes"}), runs.ErrUnknownRequest, "wrong kind")
	assert.ErrorIs(t, e.m.Resolve(t.Context(), "t2", approval(call.CallID, event.DecisionApprove)), runs.ErrUnknownRequest, "wrong thread")

	// Another caller — another connection to the thread — answers.
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		errc <- e.m.Resolve(ctx, "t1", approval(call.CallID, event.DecisionApprove))
	}()
	require.NoError(t, <-errc)
	resolved := e.log.waitFor(t, 1, ofType(event.TypeToolApprovalResolved)).Payload
	assert.Equal(t, event.ToolApprovalResolved{CallID: call.CallID, Decision: event.DecisionApprove}, resolved)
	// Answered once, the request is no longer pending.
	err := e.m.Resolve(t.Context(), "t1", approval(call.CallID, event.DecisionDenyStop))
	assert.ErrorIs(t, err, runs.ErrUnknownRequest)
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Made."}, e.log.waitFor(t, 1, ended(p.Run)).Payload)
}

func TestNonInteractiveInput(t *testing.T) {
	e := newEnv(t)
	p, err := e.m.Post(t.Context(), "t1", runs.Input{Text: "touch it"})
	require.NoError(t, err)
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Not run."}, e.log.waitFor(t, 1, ended(p.Run)).Payload)
	assert.NotContains(t, e.events("t1", nil), "tool.approval.requested ?")
}

func TestRecoverInterruptedRun(t *testing.T) {
	e := newEnv(t)
	// A previous process finished one run and died in the middle of another.
	_, err := e.log.Append(t.Context(), "t1",
		event.New("t1", "done", event.MessageUser{MessageID: "m0", Text: "hello"}),
		event.New("t1", "done", event.RunStarted{Strategy: "react"}),
		event.New("t1", "done", event.RunCompleted{Reason: "final_answer", Reply: "hi"}),
		event.New("t1", "dead", event.MessageUser{MessageID: "m1", Text: "touch it"}),
		event.New("t1", "dead", event.RunStarted{Strategy: "react"}),
		event.New("t1", "dead", event.ToolCallCompleted{CallID: "call_dead", Name: "bash", Arguments: []byte(`{"command":"touch x"}`)}),
		event.New("t1", "dead", event.ToolApprovalRequested{CallID: "call_dead", Name: "bash", Arguments: []byte(`{"command":"touch x"}`)}),
	)
	require.NoError(t, err)
	require.NoError(t, e.store.ClaimRun(t.Context(), store.RunClaim{Thread: "t1", Run: "dead", Node: "dead-node"}, time.Hour))
	require.NoError(t, e.log.Close())
	e.open()
	e.newManager() // recovers at once, before any input

	failed := e.log.waitFor(t, 1, ended("dead")).Payload.(event.RunFailed)
	assert.Equal(t, "interrupted", failed.Code)
	assert.NotEmpty(t, failed.Message)
	assert.Empty(t, e.active("t1"), "the dead node's claim is released")

	p := e.post("t1", "again")
	e.log.waitFor(t, 1, ended(p.Run))
	labels := map[string]string{"done": "done", "dead": "dead", p.Run: "new"}
	assert.Equal(t, []string{
		"message.user done", "run.started done", "run.completed done",
		"message.user dead", "run.started dead", "tool.approval.requested dead",
		"run.failed dead",
		"message.user new", "run.started new", "run.completed new",
	}, e.events("t1", labels))
	// The dead run's approval is not pending any more.
	assert.ErrorIs(t, e.m.Resolve(t.Context(), "t1", event.Command{Kind: event.CommandApprove, ID: "call_dead", Decision: event.DecisionApprove}), runs.ErrUnknownRequest)
}

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

// specRunner records the spec of every run before running it.
type specRunner struct {
	runs.Runner
	mu    sync.Mutex
	specs []agent.Spec
}

func (s *specRunner) Run(ctx context.Context, spec agent.Spec, j agent.Journal, inbox *agent.Inbox) error {
	s.mu.Lock()
	s.specs = append(s.specs, spec)
	s.mu.Unlock()
	return s.Runner.Run(ctx, spec, j, inbox)
}

// TestPrepareTurnsOptionsIntoTheRunsSpec posts with run options: the
// owner's Prepare turns them into the run's spec, what it cannot honour is
// refused (nothing is committed), and whatever Prepare opened (to check a
// post, or for a run) is released.
func TestPrepareTurnsOptionsIntoTheRunsSpec(t *testing.T) {
	e := newEnv(t)
	var (
		mu               sync.Mutex
		opened, released int
	)
	prepare := func(_ context.Context, thread string, opts event.RunOptions) (agent.Spec, func(), error) {
		if opts.Folder == "../outside" {
			return agent.Spec{}, nil, errors.New("the folder is outside the working folder")
		}
		mu.Lock()
		opened++
		mu.Unlock()
		return agent.Spec{Strategy: opts.Strategy, System: "You work in " + opts.Folder + "."}, func() {
			mu.Lock()
			released++
			mu.Unlock()
		}, nil
	}
	rec := &specRunner{Runner: e.agent}
	m := runs.New(runs.Config{Log: e.log, Claims: e.store, Bus: e.bus, Runner: rec, Node: "node-p", Prepare: prepare})
	t.Cleanup(func() { m.Shutdown(t.Context()) })

	_, err := m.Post(t.Context(), "t1", runs.Input{Text: "hello", Options: event.RunOptions{Folder: "../outside"}})
	require.Error(t, err)
	assert.Empty(t, e.events("t1", nil), "a refused post commits nothing")

	first, err := m.Post(t.Context(), "t1", runs.Input{Text: "touch it", Interactive: true, Options: event.RunOptions{Strategy: "react", Folder: "a"}})
	require.NoError(t, err)
	e.log.waitFor(t, 1, approvalOf(first.Run))
	_, err = m.Post(t.Context(), "t1", runs.Input{Text: "queued", Options: event.RunOptions{Folder: "../outside"}})
	require.Error(t, err, "queued input is prepared when it is taken, and refused then")
	dropped, err := m.Post(t.Context(), "t1", runs.Input{Text: "dropped", Options: event.RunOptions{Folder: "b"}})
	require.NoError(t, err)
	require.True(t, dropped.Queued)
	require.NoError(t, m.Cancel(t.Context(), "t1"), "cancelling drops the queued input")
	e.log.waitFor(t, 1, ended(first.Run))

	rec.mu.Lock()
	require.Len(t, rec.specs, 1)
	assert.Equal(t, "react", rec.specs[0].Strategy)
	assert.Equal(t, "You work in a.", rec.specs[0].System)
	assert.Equal(t, first.Run, rec.specs[0].Run)
	rec.mu.Unlock()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return opened > 0 && released == opened
	}, testTimeout, time.Millisecond, "everything Prepare opened is released")
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

// TestRecoverAtStart finds, at start, a claim and queued input that a
// crashed process left: the dead run is interrupted with its partial
// answer kept, and the queued input runs.
func TestRecoverAtStart(t *testing.T) {
	e := newEnv(t)
	_, err := e.log.Append(t.Context(), "t1",
		event.New("t1", "dead", event.MessageUser{MessageID: "m1", Text: "tell me"}),
		event.New("t1", "dead", event.RunStarted{Strategy: "react"}),
		event.New("t1", "dead", event.MessageStarted{MessageID: "a1", Role: event.RoleAssistant, Agent: "assistant"}),
		event.New("t1", "dead", event.MessageDelta{MessageID: "a1", Text: "The answer "}),
		event.New("t1", "dead", event.MessageDelta{MessageID: "a1", Text: "is"}),
	)
	require.NoError(t, err)
	require.NoError(t, e.store.ClaimRun(t.Context(), store.RunClaim{Thread: "t1", Run: "dead", Node: "crashed"}, time.Hour))
	require.NoError(t, e.store.EnqueueInput(t.Context(), "t1", store.QueuedInput{Run: "next", MessageID: "m2", Text: "and then?"}))
	e.newManager() // recovers at start

	partial := e.log.waitFor(t, 1, func(ev event.Event) bool { return ev.Type() == event.TypeMessageCompleted && ev.Run == "dead" })
	assert.Equal(t, event.MessageCompleted{MessageID: "a1", Role: event.RoleAssistant, Agent: "assistant", Text: "The answer is", Incomplete: true}, partial.Payload)
	assert.Equal(t, event.CodeInterrupted, e.log.waitFor(t, 1, ended("dead")).Payload.(event.RunFailed).Code)
	assert.Equal(t, event.RunCompleted{Reason: "final_answer", Reply: "Echo: and then?"}, e.log.waitFor(t, 1, ended("next")).Payload)
	hist, err := e.log.History(t.Context(), "t1")
	require.NoError(t, err)
	var texts []string
	for _, ev := range hist {
		if m, ok := ev.Payload.(event.MessageCompleted); ok {
			texts = append(texts, m.Text)
		}
	}
	assert.Equal(t, []string{"The answer is", "Echo: and then?"}, texts, "the partial answer stays in the history")
}

// TestRecoverARunThatLoggedNothing: a node that died after logging the
// user's message, but before its run committed anything of its own (its
// clients may have seen text sent ahead of the commit), leaves a claim on
// a run with no start in the log; recovery ends that run too, so its
// clients learn that it was interrupted.
func TestRecoverARunThatLoggedNothing(t *testing.T) {
	e := newEnv(t)
	_, err := e.log.Append(t.Context(), "t1", event.New("t1", "dead", event.MessageUser{MessageID: "m1", Text: "tell me"}))
	require.NoError(t, err)
	require.NoError(t, e.store.ClaimRun(t.Context(), store.RunClaim{Thread: "t1", Run: "dead", Node: "crashed"}, time.Hour))
	e.newManager() // recovers at start
	assert.Equal(t, event.CodeInterrupted, e.log.waitFor(t, 1, ended("dead")).Payload.(event.RunFailed).Code)
	assert.Empty(t, e.active("t1"))
	assert.Equal(t, []string{"message.user dead", "run.failed dead"}, e.events("t1", map[string]string{"dead": "dead"}))
}
