// Package runs owns agent runs: it turns user input into runs of the agent,
// one active run per thread with later input queued behind it, routes
// people's answers (approvals, input, UI results) to the run that waits for
// them, cancels runs on request, and stops them on shutdown. Runs belong to
// the server, not to connections: a client that goes away does not stop its
// run.
//
// Every request reaches a thread's runs the same way, as an event.Command
// sent over the bus (bus.Send) to the thread's owner: the Manager that
// handles the thread's commands (bus.HandleCommands) from the input that
// starts a run until the thread's queue is empty. The owner also holds the
// thread's run claim in the store (store.Runs), a lease it renews while it
// runs: any node can read which run is active, and when an owner dies its
// lease runs out and another node takes the thread over, ends the dead run
// in the log (run.failed, code interrupted) and runs the thread's queued
// input, which waits in the store. On one node the local bus makes Send a
// function call; between nodes a network bus carries the same commands.
//
// A post (Post, in post.go) goes to the thread's owner, which queues it;
// to a thread without one, the posting Manager becomes its owner: it
// claims the thread and records the message in one commit, and starts the
// run, ahead of that commit where it can (ahead.go). When a run ends, its
// owner starts the queue's next input or lets the thread go (queue.go).
// The rest is split the same way: taking, holding and giving up a thread
// in owner.go; renewing leases and taking over dead nodes' threads in
// lease.go; launching a run (its spec, its place among the runs Shutdown
// waits for) in start.go; the log as a run sees it in journal.go; ending
// the runs that dead processes left in recover.go.
package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/store"
)

// Errors the protocols turn into their own error frames.
var (
	// ErrUnknownRequest: no pending approval, input or UI request has the id.
	ErrUnknownRequest = agent.ErrUnknownRequest
	// ErrNoRun: the thread has no active run.
	ErrNoRun = errors.New("the thread has no active run")
	// ErrShuttingDown: the server is stopping and takes no new input.
	ErrShuttingDown = errors.New("the server is shutting down")
	// ErrUnavailable: this node cannot take new runs now (it lost its
	// bus); another node, or this one later, can.
	ErrUnavailable = errors.New("this server cannot start runs now")
)

func init() {
	// The bus carries these to other nodes as themselves.
	bus.RegisterError("runs.unknown_request", ErrUnknownRequest)
	bus.RegisterError("runs.no_run", ErrNoRun)
	bus.RegisterError("runs.shutting_down", ErrShuttingDown)
	bus.RegisterError("runs.unavailable", ErrUnavailable)
}

// DefaultLease is how long a run claim lasts unless its owner renews it:
// the longest a thread stays with a dead node before another takes over.
const DefaultLease = 15 * time.Second

// Log is the part of the thread service a Manager uses
// (thread.Service): committed, published appends, the claim of a thread
// committed with its run's user message, the thread's history and last
// seq, and previews of deltas ahead of their commit.
type Log interface {
	Append(ctx context.Context, thread string, events ...event.Event) ([]event.Event, error)
	ClaimAndAppend(ctx context.Context, c store.RunClaim, lease time.Duration, events ...event.Event) ([]event.Event, error)
	Read(ctx context.Context, thread string, after int64, limit int) ([]event.Event, error)
	History(ctx context.Context, thread string) ([]event.Event, error)
	LastSeq(ctx context.Context, thread string) (int64, error)

	// Previews reports whether Preview reaches anyone.
	Previews() bool
	// Preview sends e, a delta not yet committed, to the thread's live
	// subscribers that take previews.
	Preview(thread string, e event.Event)
	// WaitsForCommits reports whether a live subscriber of thread sees
	// deltas only once they are committed.
	WaitsForCommits(thread string) bool
}

// Runner runs one run (agent.Agent.Run).
type Runner interface {
	Run(ctx context.Context, spec agent.Spec, j agent.Journal, inbox *agent.Inbox) error
}

// Config is what a Manager works with.
type Config struct {
	// Log is the thread service the runs write to.
	Log Log
	// Claims keeps the threads' run claims and queues (the store).
	Claims store.Runs
	// Bus carries commands to the thread's owner.
	Bus bus.Bus
	// Runner runs the agent.
	Runner Runner
	// Node names this server in run claims; it must be unique among the
	// servers sharing a store.
	Node string
	// Lease is how long this node's claims last between renewals (default
	// DefaultLease); it renews them three times per lease.
	Lease time.Duration
	// Shared says other nodes share the store: at start only this node's
	// own claims (a previous process with the same Node) are recovered at
	// once, and other nodes' claims when their leases run out. Without it
	// every claim found at start is a previous process's.
	Shared bool
	// Prepare turns a post's run options into what the run's spec holds
	// beyond its ids (strategy, prompt, tools, model, logger). Post calls
	// it once, so that options this node cannot honour fail the post, and
	// a run that starts at once starts with that spec; an owner on another
	// node checks a post it queues the same way, and queued input is
	// prepared again when its run starts, on the node that runs it.
	// release, if not nil, is called once the spec is no longer needed:
	// after the check, or once the runs that used it have ended. A nil
	// Prepare takes only the strategy from the options.
	Prepare func(ctx context.Context, thread string, opts event.RunOptions) (spec agent.Spec, release func(), err error)
	// Ready, if set, says whether this node may start runs now (its bus is
	// connected); Post refuses with ErrUnavailable otherwise.
	Ready func() bool
	// Logger logs what goes wrong with runs and their threads (default:
	// nothing).
	Logger *slog.Logger
	// Metrics counts runs started ahead of their commit and threads taken
	// over; nil counts nothing.
	Metrics *metrics.Metrics
}

// Manager owns the runs of the threads whose commands it handles.
type Manager struct {
	cfg    Config
	logger *slog.Logger

	ctx    context.Context // parent of every run; cancelled by Shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per run started (admit, slot)

	stopKeeper context.CancelFunc
	keeper     sync.WaitGroup // the lease keeper

	mu       sync.Mutex
	owned    map[string]*owner        // the threads this node owns
	busy     map[string]chan struct{} // threads being claimed or let go here (enter)
	starting map[string]string        // thread -> the run a post is starting here, until its claim is committed (announce)
	checked  map[string]bool          // runs of posts Post checked and is sending to their owners (send)
	stopping bool

	keys keys // the keys of recent posts and answers (idempotent.go)
}

// Input is a user message for a thread.
type Input struct {
	// Text is the user's message.
	Text string
	// Interactive runs can ask a person for approvals and input (see
	// agent.Spec.Interactive).
	Interactive bool
	// Options choose how the run is run.
	Options event.RunOptions
	// Key, when set, is the client's key for this post (a frame id, an
	// Idempotency-Key header): a second post with the same key to the
	// same thread starts nothing and gets the first one's Posted, with
	// Duplicate set.
	Key string
	// run and message ids, assigned by Post.
	runID, messageID string
}

func (in Input) queued() store.QueuedInput {
	return store.QueuedInput{Run: in.runID, MessageID: in.messageID, Text: in.Text, Interactive: in.Interactive, Options: in.Options}
}

func fromQueue(q store.QueuedInput) Input {
	return Input{Text: q.Text, Interactive: q.Interactive, Options: q.Options, Key: q.Options.Key, runID: q.Run, messageID: q.MessageID}
}

// Posted says what became of an input.
type Posted struct {
	// Run is the id of the run the input starts (now or when it is dequeued).
	Run string
	// MessageID is the id of the user's message.
	MessageID string
	// Queued is true when another run was active and the input waits.
	Queued bool
	// Duplicate is true when the input's Key was posted before: nothing
	// was started, and Run and MessageID are the first post's.
	Duplicate bool
	// Seq, for a Duplicate, is the seq of the first post's user message
	// when the log holds it (0 while it waits in a queue).
	Seq int64
}

// New returns a Manager and starts its lease keeper. Call Recover before
// taking input and Shutdown to stop it.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{cfg: cfg, logger: cfg.Logger, ctx: ctx, cancel: cancel, owned: map[string]*owner{},
		busy: map[string]chan struct{}{}, starting: map[string]string{}, checked: map[string]bool{}}
	kctx, stop := context.WithCancel(context.Background())
	m.stopKeeper = stop
	m.keeper.Go(func() { m.keepLeases(kctx) })
	return m
}

func (m *Manager) isStopping() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopping
}

// Cancel cancels the thread's active run and drops its queued input.
func (m *Manager) Cancel(ctx context.Context, thread string) error {
	err := m.command(ctx, thread, event.Command{Kind: event.CommandCancel})
	if errors.Is(err, bus.ErrNoHandler) {
		return ErrNoRun
	}
	return err
}

// ownerWait bounds how long command waits for the owner of a thread with
// an active run to take its commands.
const ownerWait = 2 * time.Second

// command sends cmd to the thread's owner (bus.Send). When nobody takes
// the thread's commands while it has an active run, its owner is between
// committing the run's message and taking the thread's commands (a client
// may answer the echo of its message at once), or between a run's end and
// letting the thread go: command asks again until the owner answers, the
// thread has no active run, or ownerWait has passed, and returns
// bus.ErrNoHandler in the last two cases.
func (m *Manager) command(ctx context.Context, thread string, cmd event.Command) error {
	deadline := time.Now().Add(ownerWait)
	for {
		err := m.cfg.Bus.Send(ctx, thread, cmd)
		if !errors.Is(err, bus.ErrNoHandler) || time.Now().After(deadline) {
			return err
		}
		run, aerr := m.Active(ctx, thread)
		if aerr != nil || run == "" {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Resolve delivers a person's answer (cmd.Answers) to the run waiting for
// it. The id must name a request the thread's active run still waits for.
func (m *Manager) Resolve(ctx context.Context, thread string, cmd event.Command) error {
	if !cmd.Answers() {
		return fmt.Errorf("runs: a %q command answers no request", cmd.Kind)
	}
	if cmd.Key != "" {
		if _, ok := m.keys.get(thread, "answer\x00"+cmd.Key); ok {
			return nil // a retry of an answer this node delivered
		}
	}
	err := m.command(ctx, thread, cmd)
	if errors.Is(err, bus.ErrNoHandler) {
		return ErrUnknownRequest
	}
	if err == nil && cmd.Key != "" {
		m.keys.put(thread, "answer\x00"+cmd.Key, Posted{})
	}
	return err
}

// Active returns the id of the thread's active run, or "": the run its
// claim names, whichever node runs it, or a run a post is starting here
// whose claim is not committed yet.
func (m *Manager) Active(ctx context.Context, thread string) (string, error) {
	m.mu.Lock()
	run, ok := m.starting[thread]
	m.mu.Unlock()
	if ok {
		return run, nil
	}
	c, ok, err := m.cfg.Claims.ActiveRun(ctx, thread)
	if err != nil || !ok {
		return "", err
	}
	return c.Run, nil
}

// announce makes run the thread's active run as Active reports it here,
// until the returned function is called.
func (m *Manager) announce(thread, run string) (done func()) {
	m.mu.Lock()
	m.starting[thread] = run
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		if m.starting[thread] == run {
			delete(m.starting, thread)
		}
		m.mu.Unlock()
	}
}

// Shutdown stops taking input, lets active runs finish until ctx is done,
// then cancels them and waits for them to write their end.
func (m *Manager) Shutdown(ctx context.Context) {
	m.mu.Lock()
	m.stopping = true
	m.mu.Unlock()
	// The lease keeper goes on renewing while the runs finish, so that no
	// other node takes over a thread this one is still running.
	defer m.keeper.Wait()
	defer m.stopKeeper()
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
