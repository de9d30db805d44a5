package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/scripted"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/sqlite"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// testTimeout bounds every wait of a test, so that a broken run fails the
// test instead of hanging it.
const testTimeout = 20 * time.Second

// notes is the content of notes.txt in every test's working folder.
const notes = "remember the milk"

// openStore opens a SQLite store in dir; the test closes it at its end.
func openStore(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Dir: dir, Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// workdir returns a fresh working folder holding notes.txt, opened as a
// sandbox, and the built-in tools confined to it, their commands run in
// the OS sandbox at the level of their call; where the machine cannot
// build one, unconfined (the tests here are about the agent).
func workdir(t *testing.T) (string, *tools.Registry) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(notes), 0o644))
	root, err := sandbox.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = root.Close() })
	return dir, builtin.New(root, builtin.Options{CommandTimeout: time.Minute, Sandbox: commandBox(t)})
}

var (
	boxOnce sync.Once
	box     *sandbox.Sandbox
)

// commandBox is the OS sandbox, probed once for the package, or the
// sandbox off where the machine has none.
func commandBox(t *testing.T) *sandbox.Sandbox {
	boxOnce.Do(func() {
		b, err := sandbox.New(sandbox.Config{})
		if err == nil && b.Kind() == sandbox.KindOS {
			box = b
			return
		}
		box = sandbox.Off()
	})
	if box.Kind() != sandbox.KindOS {
		t.Log("no OS sandbox here: commands run unconfined")
	}
	return box
}

// scenario loads testdata/name.yaml.
func scenario(t *testing.T, name string) *scripted.Scenario {
	t.Helper()
	scn, err := scripted.Load(filepath.Join("testdata", name+".yaml"))
	require.NoError(t, err)
	return scn
}

// recorder is an llm.Model that records every Request before passing it to
// the model it wraps.
type recorder struct {
	llm.Model
	mu   sync.Mutex
	reqs []llm.Request
}

func (r *recorder) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	r.mu.Lock()
	req.Messages = slices.Clone(req.Messages)
	req.Tools = slices.Clone(req.Tools)
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Model.Stream(ctx, req)
}

func (r *recorder) requests() []llm.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// journal is a thread of a store as a run sees it. It remembers what it
// committed, so that a test can wait for an event to be in the log before
// it acts, as a client subscribed to the thread would.
type journal struct {
	log    store.Log
	thread string

	mu        sync.Mutex
	committed []event.Event
	changed   chan struct{} // closed and replaced on every commit
}

func newJournal(log store.Log, thread string) *journal {
	return &journal{log: log, thread: thread, changed: make(chan struct{})}
}

func (j *journal) Append(ctx context.Context, events ...event.Event) ([]event.Event, error) {
	out, err := j.log.Append(ctx, j.thread, events...)
	if err == nil {
		j.mu.Lock()
		j.committed = append(j.committed, out...)
		close(j.changed)
		j.changed = make(chan struct{})
		j.mu.Unlock()
	}
	return out, err
}

func (j *journal) History(ctx context.Context) ([]event.Event, error) {
	return j.log.History(ctx, j.thread)
}

// A journal sends no previews: its runs commit deltas as they come.
func (j *journal) Preview(event.Event)   {}
func (j *journal) Previews() bool        { return false }
func (j *journal) WaitsForCommits() bool { return true }

// waitFor returns the n-th (from 1) committed event that satisfies match,
// waiting for it to be committed.
func (j *journal) waitFor(t *testing.T, n int, match func(event.Event) bool) event.Event {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		j.mu.Lock()
		seen := 0
		for _, e := range j.committed {
			if match(e) {
				if seen++; seen == n {
					j.mu.Unlock()
					return e
				}
			}
		}
		changed := j.changed
		j.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no event number %d of the kind awaited was committed within %s", n, testTimeout)
		}
	}
}

// ofType matches events of type typ.
func ofType(typ event.Type) func(event.Event) bool {
	return func(e event.Event) bool { return e.Type() == typ }
}

// env is one test's world: a SQLite store, a working folder with the
// built-in tools, and a recorded scripted model.
type env struct {
	t       *testing.T
	dataDir string
	workdir string
	store   *sqlite.Store
	tools   *tools.Registry
	model   *recorder
	thread  string
}

func newEnv(t *testing.T, scn string) *env {
	t.Helper()
	e := &env{t: t, dataDir: t.TempDir(), thread: "thread-" + strings.ToLower(t.Name())}
	e.store = openStore(t, e.dataDir)
	e.workdir, e.tools = workdir(t)
	e.model = &recorder{Model: scripted.New(scenario(t, scn), scripted.WithPacing(scripted.Pacing{}))}
	return e
}

// reopen closes the store and opens it again, as a restarted server would,
// with a fresh recorder around the same model.
func (e *env) reopen() {
	e.t.Helper()
	require.NoError(e.t, e.store.Close())
	e.store = openStore(e.t, e.dataDir)
	e.model = &recorder{Model: e.model.Model}
}

// agent returns an Agent over the env's model and tools; cfg fills in the
// rest.
func (e *env) agent(cfg agent.Config) *agent.Agent {
	if cfg.Model == nil {
		cfg.Model = e.model
	}
	if cfg.Tools == nil {
		cfg.Tools = e.tools
	}
	return agent.New(cfg)
}

// running is a run going on in the background.
type running struct {
	j      *journal
	inbox  *agent.Inbox
	cancel context.CancelFunc
	done   chan error
	spec   agent.Spec
}

// start commits the user's message and starts a run of a on it.
func (e *env) start(a *agent.Agent, text string, interactive bool) *running {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Input: text, Interactive: interactive}
	j := newJournal(e.store, e.thread)
	_, err := e.store.Append(ctx, e.thread, event.New(e.thread, spec.Run, event.MessageUser{MessageID: event.NewID(), Text: text}))
	require.NoError(e.t, err)
	r := &running{j: j, inbox: agent.NewInbox(), cancel: cancel, done: make(chan error, 1), spec: spec}
	go func() { r.done <- a.Run(ctx, spec, j, r.inbox) }()
	return r
}

// wait waits for the run to end and returns its events as the store holds
// them (after the user's message).
func (e *env) wait(r *running) []event.Event {
	e.t.Helper()
	select {
	case err := <-r.done:
		require.NoError(e.t, err, "Run")
	case <-time.After(testTimeout):
		e.t.Fatalf("the run did not end within %s", testTimeout)
	}
	return e.runEvents(r.spec.Run)
}

// run runs a to its end on text without anyone to answer it.
func (e *env) run(a *agent.Agent, text string, interactive bool) []event.Event {
	e.t.Helper()
	return e.wait(e.start(a, text, interactive))
}

// runEvents returns the events of run, in log order, checking that seqs
// are gapless.
func (e *env) runEvents(run string) []event.Event {
	e.t.Helper()
	all, err := e.store.Read(e.t.Context(), e.thread, 0, 10000)
	require.NoError(e.t, err)
	var out []event.Event
	for i, ev := range all {
		require.Equal(e.t, int64(i+1), ev.Seq, "seq of event %d", i)
		if ev.Run == run && ev.Type() != event.TypeMessageUser {
			out = append(out, ev)
		}
	}
	return out
}

// answer sends a person's answer to the run, which must be waiting for it.
func (r *running) answer(t *testing.T, cmd event.Command) {
	t.Helper()
	require.NoError(t, r.inbox.Deliver(cmd), "Deliver(%+v)", cmd)
}

// line describes an event by its type and the fields a test cares about.
// Call ids and message ids are left out: they are checked for consistency
// by checkIDs.
func line(e event.Event) string {
	s := string(e.Type())
	add := func(parts ...string) {
		for _, p := range parts {
			if p != "" {
				s += " " + p
			}
		}
	}
	switch p := e.Payload.(type) {
	case event.RunStarted:
		add(p.Strategy)
	case event.RunCompleted:
		add(p.Reason)
	case event.RunFailed:
		add(p.Code)
	case event.RunCancelled:
		add(p.Reason)
	case event.MessageStarted:
		add(string(p.Role), p.Purpose)
	case event.MessageDelta:
		add(fmt.Sprintf("%q", p.Text))
	case event.MessageCompleted:
		add(string(p.Role), p.Purpose)
	case event.ToolCallStarted:
		add(p.Name)
	case event.ToolCallDelta:
		add(fmt.Sprintf("%q", p.ArgumentsDelta))
	case event.ToolCallCompleted:
		add(p.Name)
	case event.ToolApprovalRequested:
		add(p.Name)
	case event.ToolApprovalResolved:
		add(string(p.Decision))
	case event.ToolExecStarted:
		add(p.Name)
	case event.ToolExecOutput:
		add(p.Name)
	case event.ToolExecCompleted:
		add(p.Name)
		if p.IsError {
			add("error")
		}
	case event.NodeEntered:
		add(p.Node)
	case event.NodeExited:
		add(p.Node)
		if p.Error != "" {
			add("error")
		}
	}
	return s
}

// lines describes events with line, folding a run of tool.exec.output
// events of one tool into one line: how a command's output is cut into
// chunks depends on the pipe.
func lines(evs []event.Event) []string {
	var out []string
	for _, e := range evs {
		l := line(e)
		if e.Type() == event.TypeToolExecOutput && len(out) > 0 && out[len(out)-1] == l {
			continue
		}
		out = append(out, l)
	}
	return out
}

// checkIDs checks what every run's events must satisfy: one run id, the
// run.started first and exactly one end last, message deltas and ends
// naming a started message, tool events naming a completed call and every
// completed call getting exactly one tool.exec.completed.
func checkIDs(t *testing.T, evs []event.Event) {
	t.Helper()
	require.NotEmpty(t, evs)
	require.Equal(t, event.TypeRunStarted, evs[0].Type(), "first event")
	ends := 0
	messages := map[string]bool{}
	calls := map[string]string{}
	results := map[string]int{}
	for i, e := range evs {
		require.Equal(t, evs[0].Run, e.Run, "run id of event %d (%s)", i, e.Type())
		switch p := e.Payload.(type) {
		case event.RunCompleted, event.RunFailed, event.RunCancelled:
			ends++
			require.Equal(t, len(evs)-1, i, "the run's end must be its last event")
		case event.MessageStarted:
			messages[p.MessageID] = true
		case event.MessageDelta:
			require.True(t, messages[p.MessageID], "delta of an unstarted message")
		case event.MessageCompleted:
			require.True(t, messages[p.MessageID], "end of an unstarted message")
		case event.ToolCallCompleted:
			calls[p.CallID] = p.Name
			require.True(t, json.Valid(p.Arguments))
		case event.ToolApprovalRequested:
			require.Equal(t, calls[p.CallID], p.Name, "approval of an unknown call")
		case event.ToolExecStarted:
			require.Equal(t, calls[p.CallID], p.Name, "exec of an unknown call")
		case event.ToolExecCompleted:
			require.Equal(t, calls[p.CallID], p.Name, "result of an unknown call")
			results[p.CallID]++
		}
	}
	require.Equal(t, 1, ends, "run ends")
	for id := range calls {
		require.Equal(t, 1, results[id], "results of call %s", id)
	}
}

// payloads returns the payloads of type T among evs.
func payloads[T event.Payload](evs []event.Event) []T {
	var out []T
	for _, e := range evs {
		if p, ok := e.Payload.(T); ok {
			out = append(out, p)
		}
	}
	return out
}

// only returns the one payload of type T among evs.
func only[T event.Payload](t *testing.T, evs []event.Event) T {
	t.Helper()
	ps := payloads[T](evs)
	require.Len(t, ps, 1, "events of type %T", *new(T))
	return ps[0]
}

// toolMessages returns the tool results a request carries, in order.
func toolMessages(req llm.Request) []llm.Message {
	var out []llm.Message
	for _, m := range req.Messages {
		if m.Role == llm.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// scriptedModel returns the scripted model of testdata/name.yaml, playing
// at the scenario's own pace.
func scriptedModel(t *testing.T, name string) llm.Model {
	t.Helper()
	return scripted.New(scenario(t, name))
}

// compact runs a compaction-only run (Spec.Compact) to its end.
func (e *env) compact(a *agent.Agent) []event.Event {
	e.t.Helper()
	spec := agent.Spec{Thread: e.thread, Run: event.NewID(), Compact: true}
	j := newJournal(e.store, e.thread)
	require.NoError(e.t, a.Run(e.t.Context(), spec, j, nil))
	return e.runEvents(spec.Run)
}
