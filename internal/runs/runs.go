// Package runs owns agent runs: it turns user input into runs of the agent,
// one active run per thread with later input queued behind it, routes
// people's answers (approvals, input, UI results) to the run that waits for
// them, cancels runs on request, and stops them on shutdown. Runs belong to
// the server, not to connections: a client that goes away does not stop its
// run.
package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
)

// Errors the protocols turn into their own error frames.
var (
	// ErrUnknownRequest: no pending approval, input or UI request has the id.
	ErrUnknownRequest = errors.New("no pending request has that id")
	// ErrNoRun: the thread has no active run.
	ErrNoRun = errors.New("the thread has no active run")
	// ErrShuttingDown: the server is stopping and takes no new input.
	ErrShuttingDown = errors.New("the server is shutting down")
)

// Log is the part of the thread service a Manager uses: committed,
// published appends and the thread's history.
type Log interface {
	Append(ctx context.Context, thread string, events ...event.Event) ([]event.Event, error)
	History(ctx context.Context, thread string) ([]event.Event, error)
}

// Runner runs one run (agent.Agent.Run).
type Runner interface {
	Run(ctx context.Context, spec agent.Spec, j agent.Journal, inbox <-chan agent.Command) error
}

// Manager owns the runs of every thread.
type Manager struct {
	log    Log
	runner Runner
	logger *slog.Logger

	ctx    context.Context // parent of every run; cancelled by Shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	threads  map[string]*threadState
	stopping bool
}

type threadState struct {
	mu        sync.Mutex
	recovered bool
	active    *active
	queue     []Input
}

type active struct {
	id     string
	cancel context.CancelFunc
	inbox  chan agent.Command
}

// Input is a user message for a thread.
type Input struct {
	Text string
	// Interactive runs can ask a person for approvals and input (see
	// agent.Spec.Interactive).
	Interactive bool
	// run and message ids, assigned by Post.
	runID, messageID string
}

// Posted says what became of an input.
type Posted struct {
	// Run is the id of the run the input starts (now or when it is dequeued).
	Run string
	// MessageID is the id of the user's message.
	MessageID string
	// Queued is true when another run was active and the input waits.
	Queued bool
}

// New returns a Manager. Call Shutdown to stop it.
func New(log Log, runner Runner, logger *slog.Logger) *Manager {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{log: log, runner: runner, logger: logger, ctx: ctx, cancel: cancel, threads: map[string]*threadState{}}
}

func (m *Manager) state(thread string) (*threadState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping {
		return nil, ErrShuttingDown
	}
	st, ok := m.threads[thread]
	if !ok {
		st = &threadState{}
		m.threads[thread] = st
	}
	return st, nil
}

// existing returns the thread's state, or nil if it never had input. Unlike
// state it works while the manager stops: runs that are finishing in the
// shutdown grace can still be answered and cancelled.
func (m *Manager) existing(thread string) *threadState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.threads[thread]
}

// Post gives the thread a user message: the message is committed and a run
// starts, or, while a run is active, the input is queued and its message is
// committed when its run starts. Queued input lives in memory.
func (m *Manager) Post(ctx context.Context, thread string, in Input) (Posted, error) {
	st, err := m.state(thread)
	if err != nil {
		return Posted{}, err
	}
	in.runID, in.messageID = event.NewID(), event.NewID()
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.recovered {
		if err := m.recover(ctx, thread); err != nil {
			return Posted{}, err
		}
		st.recovered = true
	}
	if st.active != nil {
		st.queue = append(st.queue, in)
		return Posted{Run: in.runID, MessageID: in.messageID, Queued: true}, nil
	}
	if err := m.start(ctx, thread, st, in); err != nil {
		return Posted{}, err
	}
	return Posted{Run: in.runID, MessageID: in.messageID}, nil
}

// start commits the user's message and launches its run. st.mu is held.
func (m *Manager) start(ctx context.Context, thread string, st *threadState, in Input) error {
	// Join the runs Shutdown waits for, unless it already began: a Post
	// that passed its check before Shutdown must not start a run after
	// Shutdown stopped waiting.
	m.mu.Lock()
	if m.stopping {
		m.mu.Unlock()
		return ErrShuttingDown
	}
	m.wg.Add(1)
	m.mu.Unlock()
	user := event.New(thread, in.runID, event.MessageUser{MessageID: in.messageID, Text: in.Text})
	if _, err := m.log.Append(ctx, thread, user); err != nil {
		m.wg.Done()
		return fmt.Errorf("record the user's message: %w", err)
	}
	runCtx, cancel := context.WithCancel(m.ctx)
	a := &active{id: in.runID, cancel: cancel, inbox: make(chan agent.Command, 16)}
	st.active = a
	go func() {
		defer m.wg.Done()
		defer cancel()
		spec := agent.Spec{Thread: thread, Run: in.runID, Input: in.Text, Interactive: in.Interactive}
		if err := m.runner.Run(runCtx, spec, journal{m.log, thread}, a.inbox); err != nil {
			m.logger.Error("run lost its journal", "thread", thread, "run", in.runID, "err", err)
		}
		m.finish(thread, st, a)
	}()
	return nil
}

// finish starts the next queued input, if any.
func (m *Manager) finish(thread string, st *threadState, a *active) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.active == a {
		st.active = nil
	}
	m.mu.Lock()
	stopping := m.stopping
	m.mu.Unlock()
	for len(st.queue) > 0 && !stopping {
		next := st.queue[0]
		st.queue = st.queue[1:]
		if err := m.start(m.ctx, thread, st, next); err != nil {
			if errors.Is(err, ErrShuttingDown) {
				return
			}
			m.logger.Error("start queued run", "thread", thread, "err", err)
			continue
		}
		return
	}
}

// recover ends runs that a previous server process left unfinished, so the
// log never shows a run that will not end.
func (m *Manager) recover(ctx context.Context, thread string) error {
	hist, err := m.log.History(ctx, thread)
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	open := map[string]bool{}
	var order []string
	for _, e := range hist {
		switch e.Payload.(type) {
		case event.RunStarted:
			open[e.Run] = true
			order = append(order, e.Run)
		case event.RunCompleted, event.RunFailed, event.RunCancelled:
			delete(open, e.Run)
		}
	}
	var ends []event.Event
	for _, run := range order {
		if open[run] {
			ends = append(ends, event.New(thread, run, event.RunFailed{Code: event.CodeInterrupted, Message: "The server stopped while this run was going on."}))
		}
	}
	if len(ends) == 0 {
		return nil
	}
	_, err = m.log.Append(ctx, thread, ends...)
	return err
}

// Cancel cancels the thread's active run and drops its queued input.
func (m *Manager) Cancel(thread string) error {
	st := m.existing(thread)
	if st == nil {
		return ErrNoRun
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.queue = nil
	if st.active == nil {
		return ErrNoRun
	}
	st.active.cancel()
	return nil
}

// Active returns the id of the thread's active run, or "".
func (m *Manager) Active(thread string) string {
	st := m.existing(thread)
	if st == nil {
		return ""
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.active == nil {
		return ""
	}
	return st.active.id
}

// Resolve delivers a person's answer to the run waiting for it. The id must
// name a request of the active run that is still pending in the log.
func (m *Manager) Resolve(ctx context.Context, thread string, cmd agent.Command) error {
	st := m.existing(thread)
	if st == nil {
		return ErrUnknownRequest
	}
	st.mu.Lock()
	a := st.active
	st.mu.Unlock()
	if a == nil {
		return ErrUnknownRequest
	}
	hist, err := m.log.History(ctx, thread)
	if err != nil {
		return err
	}
	if kind, ok := Pending(hist, a.id)[cmd.ID]; !ok || kind != cmd.Kind {
		return ErrUnknownRequest
	}
	select {
	case a.inbox <- cmd:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pending returns the requests of run that wait for a person, by id.
func Pending(hist []event.Event, run string) map[string]agent.CommandKind {
	out := map[string]agent.CommandKind{}
	for _, e := range hist {
		if e.Run != run {
			continue
		}
		switch p := e.Payload.(type) {
		case event.ToolApprovalRequested:
			out[p.CallID] = agent.CommandApproval
		case event.ToolApprovalResolved:
			delete(out, p.CallID)
		case event.InputRequested:
			out[p.RequestID] = agent.CommandInput
		case event.InputProvided:
			delete(out, p.RequestID)
		case event.InputTimedOut:
			delete(out, p.RequestID)
		case event.UIRequested:
			out[p.RequestID] = agent.CommandUI
		case event.UIResolved:
			delete(out, p.RequestID)
		}
	}
	return out
}

// Shutdown stops taking input, lets active runs finish until ctx is done,
// then cancels them and waits for them to write their end.
func (m *Manager) Shutdown(ctx context.Context) {
	m.mu.Lock()
	m.stopping = true
	m.mu.Unlock()
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		m.cancel()
		<-done
	}
	m.cancel()
}

// journal is a thread's Log as one run sees it.
type journal struct {
	log    Log
	thread string
}

func (j journal) Append(ctx context.Context, events ...event.Event) ([]event.Event, error) {
	return j.log.Append(ctx, j.thread, events...)
}

func (j journal) History(ctx context.Context) ([]event.Event, error) {
	return j.log.History(ctx, j.thread)
}
