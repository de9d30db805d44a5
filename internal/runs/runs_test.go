package runs_test

import (
	"context"
	"sync"
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
	"github.com/agentwire/agentwire/internal/metrics"
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
	// afterClaim, when set, is called when a run's claim and its user's
	// message have been committed together, before the commit returns.
	afterClaim func()
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
		hook := w.afterClaim
		w.mu.Unlock()
		w.saw(out)
		if hook != nil {
			hook()
		}
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
	// metrics count what the Managers newManager starts do.
	metrics *metrics.Metrics
}

// hookedBus is a bus with a hook before every Send: the moment a Post
// looks for the thread's owner.
type hookedBus struct {
	bus.Bus
	mu        sync.Mutex
	onSend    func()                             // before a command is sent
	afterSend func(cmd event.Command, err error) // once it was, with the answer
}

func (h *hookedBus) Send(ctx context.Context, thread string, cmd event.Command) error {
	h.mu.Lock()
	hook, after := h.onSend, h.afterSend
	h.mu.Unlock()
	if hook != nil {
		hook()
	}
	err := h.Bus.Send(ctx, thread, cmd)
	if after != nil {
		after(cmd, err)
	}
	return err
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
	if e.metrics == nil {
		e.metrics = metrics.New()
	}
	m := runs.New(runs.Config{Log: e.log, Claims: e.store, Bus: e.bus, Runner: runner, Node: "node-" + event.NewID(), Prepare: e.prepare, Metrics: e.metrics})
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
