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
package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
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
	// beyond its ids (strategy, prompt, tools, model, logger), on the node
	// that runs it, when its run starts; options it cannot honour fail the
	// post (checked when it is taken as well). release, if not nil, is
	// called once the run has ended. A nil Prepare takes only the strategy
	// from the options.
	Prepare func(ctx context.Context, thread string, opts event.RunOptions) (spec agent.Spec, release func(), err error)
	// Ready, if set, says whether this node may start runs now (its bus is
	// connected); Post refuses with ErrUnavailable otherwise.
	Ready  func() bool
	Logger *slog.Logger
}

// Manager owns the runs of the threads whose commands it handles.
type Manager struct {
	cfg    Config
	logger *slog.Logger

	ctx    context.Context // parent of every run; cancelled by Shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per run started

	stopKeeper context.CancelFunc
	keeper     sync.WaitGroup // the lease keeper

	mu       sync.Mutex
	owned    map[string]*owner        // the threads this node owns
	busy     map[string]chan struct{} // threads being claimed or let go here (enter)
	starting map[string]string        // thread -> the run a post is starting here, until its claim is committed
	stopping bool
}

// owner is a Manager's ownership of one thread: from the input that starts
// a run until the thread's queue is empty.
type owner struct {
	thread string
	stop   func() // stops handling the thread's commands

	mu       sync.Mutex
	run      *active // the running run; nil between runs
	released bool    // commands go to the thread's next owner
	lost     bool    // another node took the thread over
}

type active struct {
	id     string
	cancel context.CancelCauseFunc
	inbox  *agent.Inbox
}

// errClaimed is own's answer when another claim holds the thread.
var errClaimed = errors.New("the thread is claimed")

// Input is a user message for a thread.
type Input struct {
	Text string
	// Interactive runs can ask a person for approvals and input (see
	// agent.Spec.Interactive).
	Interactive bool
	// Options choose how the run is run.
	Options event.RunOptions
	// run and message ids, assigned by Post.
	runID, messageID string
}

func (in Input) queued() store.QueuedInput {
	return store.QueuedInput{Run: in.runID, MessageID: in.messageID, Text: in.Text, Interactive: in.Interactive, Options: in.Options}
}

func fromQueue(q store.QueuedInput) Input {
	return Input{Text: q.Text, Interactive: q.Interactive, Options: q.Options, runID: q.Run, messageID: q.MessageID}
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
	m := &Manager{cfg: cfg, logger: cfg.Logger, ctx: ctx, cancel: cancel, owned: map[string]*owner{}, busy: map[string]chan struct{}{}, starting: map[string]string{}}
	kctx, stop := context.WithCancel(context.Background())
	m.stopKeeper = stop
	m.keeper.Go(func() { m.keepLeases(kctx) })
	return m
}

// Recover ends the runs that earlier processes left unfinished: every
// claim a previous process of this node left (all of them, unless the
// store is Shared) names a run nobody runs any more. Its thread's open
// runs are marked failed with event.CodeInterrupted, with what their
// messages had streamed kept as incomplete messages, and the thread's
// queued input then runs. Call it once at start, before taking input.
// Other nodes' claims are recovered when their leases run out.
func (m *Manager) Recover(ctx context.Context) error {
	claims, err := m.cfg.Claims.RunClaims(ctx)
	if err != nil {
		return fmt.Errorf("read run claims: %w", err)
	}
	for _, c := range claims {
		if m.cfg.Shared && c.Node != m.cfg.Node {
			continue
		}
		if err := m.endDeadRun(ctx, c); err != nil {
			return fmt.Errorf("recover thread %q: %w", c.Thread, err)
		}
		if err := m.cfg.Claims.ReleaseRun(ctx, c); err != nil {
			return fmt.Errorf("recover thread %q: %w", c.Thread, err)
		}
		m.kick(ctx, c.Thread)
	}
	return nil
}

// endDeadRun ends in the log every run of c's thread that has no end,
// after closing the messages they were streaming.
func (m *Manager) endDeadRun(ctx context.Context, c store.RunClaim) error {
	n, err := m.interrupt(ctx, c.Thread, c.Run)
	if err != nil {
		return err
	}
	if n > 0 {
		m.logger.Warn("marked runs a dead server left unfinished as interrupted",
			"thread", c.Thread, "run", c.Run, "node", c.Node, "runs", n)
	}
	return nil
}

// interrupt ends every run of thread that has no end in the log, and the
// claimed run (the one the dead owner held the thread for) if it has
// neither start nor end: it died before committing anything of its own,
// though its clients may have been sent some of it ahead of the commit.
// It says how many runs it ended. A message a run was streaming is
// completed with the text it had streamed, marked incomplete, so that the
// history shows it.
func (m *Manager) interrupt(ctx context.Context, thread, claimed string) (int, error) {
	hist, err := m.cfg.Log.History(ctx, thread)
	if err != nil {
		return 0, fmt.Errorf("read history: %w", err)
	}
	open := map[string]int64{} // run -> seq of its run.started
	seen := map[string]bool{}  // runs started or ended
	var order []string
	for _, e := range hist {
		switch e.Payload.(type) {
		case event.RunStarted:
			open[e.Run] = e.Seq
			seen[e.Run] = true
			order = append(order, e.Run)
		case event.RunCompleted, event.RunFailed, event.RunCancelled:
			delete(open, e.Run)
			seen[e.Run] = true
		}
	}
	var ends []event.Event
	if claimed != "" && !seen[claimed] {
		ends = append(ends, event.New(thread, claimed, event.RunFailed{Code: event.CodeInterrupted,
			Message: "The server stopped while this run was going on."}))
	}
	for _, run := range order {
		from, ok := open[run]
		if !ok {
			continue
		}
		partial, err := m.partialMessages(ctx, thread, run, from)
		if err != nil {
			return 0, err
		}
		ends = append(ends, partial...)
		ends = append(ends, event.New(thread, run, event.RunFailed{Code: event.CodeInterrupted,
			Message: "The server stopped while this run was going on."}))
	}
	if len(ends) == 0 {
		return 0, nil
	}
	_, err = m.cfg.Log.Append(ctx, thread, ends...)
	return len(ends), err
}

// partialMessages returns message.completed events, marked incomplete, for
// the messages run was streaming when it stopped: its events are read from
// its run.started (seq from) on.
func (m *Manager) partialMessages(ctx context.Context, thread, run string, from int64) ([]event.Event, error) {
	type msg struct {
		started event.MessageStarted
		text    strings.Builder
	}
	var (
		msgs  = map[string]*msg{}
		order []string
	)
	for after := from - 1; ; {
		page, err := m.cfg.Log.Read(ctx, thread, after, 512)
		if err != nil {
			return nil, fmt.Errorf("read run %s: %w", run, err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			after = e.Seq
			if e.Run != run {
				continue
			}
			switch p := e.Payload.(type) {
			case event.MessageStarted:
				msgs[p.MessageID] = &msg{started: p}
				order = append(order, p.MessageID)
			case event.MessageDelta:
				if mm := msgs[p.MessageID]; mm != nil {
					mm.text.WriteString(p.Text)
				}
			case event.MessageCompleted:
				delete(msgs, p.MessageID)
			}
		}
	}
	var out []event.Event
	for _, id := range order {
		mm := msgs[id]
		if mm == nil {
			continue
		}
		out = append(out, event.New(thread, run, event.MessageCompleted{
			MessageID: id, Role: mm.started.Role, Agent: mm.started.Agent, Purpose: mm.started.Purpose,
			Text: mm.text.String(), Incomplete: true,
		}))
	}
	return out, nil
}

// Post gives the thread a user message. The owner of the thread's runs
// queues it behind the active run; a thread without an owner gets this
// Manager as its owner, and the message is committed and its run started
// before Post returns. Queued input waits in the store and is committed
// when its run starts.
func (m *Manager) Post(ctx context.Context, thread string, in Input) (Posted, error) {
	if m.isStopping() {
		return Posted{}, ErrShuttingDown
	}
	if m.cfg.Ready != nil && !m.cfg.Ready() {
		return Posted{}, ErrUnavailable
	}
	// Options are checked here too, so that a post the owner could not
	// run is refused to its poster rather than failing later.
	if err := m.check(ctx, thread, in.Options); err != nil {
		return Posted{}, err
	}
	in.runID, in.messageID = event.NewID(), event.NewID()
	cmd := event.Command{Kind: event.CommandPost, Run: in.runID, ID: in.messageID, Text: in.Text, Interactive: in.Interactive}
	if in.Options != (event.RunOptions{}) {
		cmd.Options = &in.Options
	}
	queued := Posted{Run: in.runID, MessageID: in.messageID, Queued: true}
	for {
		err := m.cfg.Bus.Send(ctx, thread, cmd)
		if err == nil {
			return queued, nil
		}
		if !errors.Is(err, bus.ErrNoHandler) {
			return Posted{}, err
		}
		posted, err := m.own(ctx, thread, &in)
		if errors.Is(err, errAskAgain) {
			continue
		}
		if !errors.Is(err, errClaimed) {
			return posted, err
		}
		break
	}
	// The thread is claimed but nobody takes its commands: its owner is
	// handing it over, or died. The input waits in the store for whoever
	// owns the thread next.
	if err := m.cfg.Claims.EnqueueInput(ctx, thread, in.queued()); err != nil {
		return Posted{}, fmt.Errorf("queue the input: %w", err)
	}
	m.kick(ctx, thread)
	return queued, nil
}

// check refuses run options this node could not honour.
func (m *Manager) check(ctx context.Context, thread string, opts event.RunOptions) error {
	if m.cfg.Prepare == nil {
		return nil
	}
	_, release, err := m.cfg.Prepare(ctx, thread, opts)
	if release != nil {
		release()
	}
	return err
}

// own makes this Manager the thread's owner and starts first's run, or,
// with first nil, the thread's queued input. It fails with errClaimed when
// another claim holds the thread.
func (m *Manager) own(ctx context.Context, thread string, first *Input) (Posted, error) {
	if m.isStopping() {
		return Posted{}, ErrShuttingDown
	}
	leave, waited, quiet, err := m.enter(ctx, thread)
	if err != nil {
		return Posted{}, err
	}
	defer leave()
	if waited && first != nil {
		// The thread was being claimed or let go here: its owner, if it
		// has one now, takes the post.
		return Posted{}, errAskAgain
	}
	claim := store.RunClaim{Thread: thread, Node: m.cfg.Node}
	if first == nil {
		claim.Run = "pending-" + event.NewID() // moved to the queue's first run
		if err := m.claim(ctx, claim); err != nil {
			return Posted{}, err
		}
		o := &owner{thread: thread}
		if err := m.adopt(ctx, o); err != nil {
			m.release(claim)
			return Posted{}, adoptError(err)
		}
		leave() // the thread's commands reach o now; advance may let it go
		o.mu.Lock()
		m.advance(o, claim)
		return Posted{}, nil
	}
	claim.Run = first.runID
	// From here until the claim is committed (or fails), the thread's
	// active run is first's as far as this node knows (Active): a run
	// started ahead may already be calling the model, and a client that
	// joins the thread meanwhile must not take it for quiet.
	defer m.announce(thread, first.runID)()
	// The run is made ready before the thread is claimed: a post whose run
	// cannot start leaves the thread as it was.
	st, err := m.ready(ctx, thread, first.Options)
	if err != nil {
		return Posted{}, err
	}
	msg := userMessage(thread, *first)
	o := &owner{thread: thread}
	// The run starts now, ahead of the commit that claims the thread and
	// records its message (ahead.go), where the Log allows and no other
	// run is starting here. Nothing else here claims the thread meanwhile
	// (enter), so the claim fails only when another node holds it. While
	// other runs start, their commits share the disk and their model calls
	// the processors: a run that went ahead would only wait for its commit
	// after the model's first words instead of before its call, holding
	// them back. From here on the run is undone, not st.
	var ah *ahead
	if !first.Options.Compact && quiet {
		ah = m.goAhead(ctx, msg)
	}
	undo := st.undo
	if ah != nil {
		m.launch(o, claim, *first, st, ah.after(), ah)
		undo = ah.fail
	}
	// Claim and record the user's message in one commit; a compaction
	// has no message, and only claims.
	var (
		after    int64
		recorded = !first.Options.Compact
	)
	if recorded {
		committed, err := m.cfg.Log.ClaimAndAppend(ctx, claim, m.cfg.Lease, msg)
		if err != nil {
			undo()
			if errors.Is(err, store.ErrRunClaimed) {
				return Posted{}, errClaimed
			}
			return Posted{}, fmt.Errorf("claim the thread and record the user's message: %w", err)
		}
		after = committed[len(committed)-1].Seq
	} else if err := m.claim(ctx, claim); err != nil {
		undo()
		return Posted{}, err
	}
	if err := m.adopt(ctx, o); err != nil {
		if recorded {
			// The message is in the log: its run ends there as failed,
			// so that nobody waits for it.
			m.endUnstarted(thread, first.runID)
		}
		m.release(claim)
		undo()
		if recorded {
			return Posted{}, fmt.Errorf("take the thread's commands: %w", err)
		}
		return Posted{}, adoptError(err)
	}
	leave()
	o.mu.Lock()
	switch {
	case ah == nil:
		m.launch(o, claim, *first, st, after, nil)
	case !ah.commit(after):
		// Something was committed between the history the run read
		// and its message: the run starts again, the ordinary way.
		if st, err = m.ready(ctx, thread, first.Options); err != nil {
			m.endUnstarted(thread, first.runID)
			m.abandon(o, claim)
			return Posted{}, err
		}
		m.launch(o, claim, *first, st, after, nil)
	}
	o.mu.Unlock()
	return Posted{Run: first.runID, MessageID: first.messageID}, nil
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

// errAskAgain is own's answer to a post that waited for the thread
// (enter): Post asks the thread's owner again.
var errAskAgain = errors.New("ask the thread's owner again")

// enter takes the thread for claiming it, or letting it go, here: it waits
// while another goroutine of this Manager does either, and reports
// whether it waited and whether it is quiet here: no other thread is
// being taken, and this Manager does not own this one. One claim at a time
// per thread here means a post's claim fails only when another node holds
// the thread, so its run can start ahead of it (ahead.go). leave gives
// the thread back; it may be called more than once.
func (m *Manager) enter(ctx context.Context, thread string) (leave func(), waited, quiet bool, err error) {
	for {
		m.mu.Lock()
		busy, ok := m.busy[thread]
		if !ok {
			done := make(chan struct{})
			quiet = len(m.busy) == 0 && m.owned[thread] == nil
			m.busy[thread] = done
			m.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					m.mu.Lock()
					delete(m.busy, thread)
					m.mu.Unlock()
					close(done)
				})
			}, waited, quiet, nil
		}
		m.mu.Unlock()
		select {
		case <-busy:
			waited = true
		case <-ctx.Done():
			return nil, waited, false, ctx.Err()
		}
	}
}

// claim claims the thread for c.Run; errClaimed says another claim holds
// it.
func (m *Manager) claim(ctx context.Context, c store.RunClaim) error {
	if err := m.cfg.Claims.ClaimRun(ctx, c, m.cfg.Lease); err != nil {
		if errors.Is(err, store.ErrRunClaimed) {
			return errClaimed
		}
		return fmt.Errorf("claim the thread: %w", err)
	}
	return nil
}

// adoptError is own's error for an adopt that failed after the claim: a
// handler that exists already is another owner's.
func adoptError(err error) error {
	if errors.Is(err, bus.ErrHandlerExists) {
		return errClaimed
	}
	return err
}

// endUnstarted records that run, whose user message is in the log, did
// not start.
func (m *Manager) endUnstarted(thread, run string) {
	_, err := m.cfg.Log.Append(context.Background(), thread,
		event.New(thread, run, event.RunFailed{Code: event.CodeInternal, Message: "The run could not start. Send the message again."}))
	if err != nil {
		m.logger.Error("record a run that could not start", "thread", thread, "run", run, "err", err)
	}
}

func userMessage(thread string, in Input) event.Event {
	return event.New(thread, in.runID, event.MessageUser{MessageID: in.messageID, Text: in.Text})
}

// adopt makes this Manager the handler of o's thread's commands; the
// thread's claim is already this node's.
func (m *Manager) adopt(ctx context.Context, o *owner) error {
	stop, err := m.cfg.Bus.HandleCommands(ctx, o.thread, func(ctx context.Context, cmd event.Command) error {
		return m.handle(ctx, o, cmd)
	})
	if err != nil {
		return err
	}
	o.stop = stop
	m.mu.Lock()
	m.owned[o.thread] = o
	m.mu.Unlock()
	return nil
}

// abandon ends an ownership whose first run could not start. o.mu is held;
// abandon unlocks it.
func (m *Manager) abandon(o *owner, claim store.RunClaim) {
	o.released = true
	o.mu.Unlock()
	m.disown(o)
	m.release(claim)
}

// disown stops handling the thread's commands. It must not be called with
// o.mu held: stopping waits for handlers, which take o.mu.
func (m *Manager) disown(o *owner) {
	o.stop()
	m.mu.Lock()
	if m.owned[o.thread] == o {
		delete(m.owned, o.thread)
	}
	m.mu.Unlock()
}

// kick makes sure queued input of a thread nobody owns runs: it claims the
// thread and starts the queue's first input. A claimed thread is its
// owner's to run.
func (m *Manager) kick(ctx context.Context, thread string) {
	n, err := m.cfg.Claims.QueueLen(ctx, thread)
	if err != nil {
		m.logger.Error("read the thread's queue", "thread", thread, "err", err)
		return
	}
	if n == 0 {
		return
	}
	if _, err := m.own(context.WithoutCancel(ctx), thread, nil); err != nil && !errors.Is(err, errClaimed) && !errors.Is(err, ErrShuttingDown) {
		m.logger.Error("start the thread's queued input", "thread", thread, "err", err)
	}
}

func (m *Manager) isStopping() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopping
}

// handle is the thread's command handler, called on the sender's behalf.
func (m *Manager) handle(ctx context.Context, o *owner, cmd event.Command) error {
	switch cmd.Kind {
	case event.CommandPost:
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.released {
			return bus.ErrNoHandler
		}
		if m.isStopping() {
			return ErrShuttingDown
		}
		in := store.QueuedInput{Run: cmd.Run, MessageID: cmd.ID, Text: cmd.Text, Interactive: cmd.Interactive}
		if cmd.Options != nil {
			in.Options = *cmd.Options
		}
		if err := m.check(ctx, o.thread, in.Options); err != nil {
			return err
		}
		// Under o.mu, so that the owner cannot find the queue empty and
		// let the thread go while this input is on its way in.
		if err := m.cfg.Claims.EnqueueInput(ctx, o.thread, in); err != nil {
			return fmt.Errorf("queue the input: %w", err)
		}
		return nil
	case event.CommandCancel:
		o.mu.Lock()
		a := o.run
		if o.released || a == nil || (cmd.Run != "" && cmd.Run != a.id) {
			o.mu.Unlock()
			return ErrNoRun
		}
		_, err := m.cfg.Claims.DropQueue(ctx, o.thread)
		o.mu.Unlock()
		if err != nil {
			m.logger.Error("drop the thread's queue", "thread", o.thread, "err", err)
		}
		a.cancel(context.Canceled)
		return nil
	}
	if !cmd.Answers() {
		return fmt.Errorf("runs: unknown command kind %q", cmd.Kind)
	}
	o.mu.Lock()
	a := o.run
	o.mu.Unlock()
	if a == nil || (cmd.Run != "" && cmd.Run != a.id) {
		return ErrUnknownRequest
	}
	return a.inbox.Deliver(cmd)
}

// start commits in's user message and launches its run; the thread's claim
// names in's run already. o.mu is held.
func (m *Manager) start(ctx context.Context, o *owner, claim store.RunClaim, in Input) error {
	st, err := m.ready(ctx, o.thread, in.Options)
	if err != nil {
		return err
	}
	after, err := m.record(ctx, in, userMessage(o.thread, in))
	if err != nil {
		st.undo()
		return err
	}
	m.launch(o, claim, in, st, after, nil)
	return nil
}

// starting is a run made ready to start: it counts among the runs Shutdown
// waits for, and its spec is prepared.
type starting struct {
	m       *Manager
	spec    agent.Spec
	release func() // the spec's, or nil
}

// undo gives up a run made ready that will not start.
func (st *starting) undo() {
	if st.release != nil {
		st.release()
	}
	st.m.wg.Done()
}

// ready joins the runs Shutdown waits for, unless it already began (a Post
// that passed its check before Shutdown must not start a run after
// Shutdown stopped waiting), and prepares the run's spec.
func (m *Manager) ready(ctx context.Context, thread string, opts event.RunOptions) (*starting, error) {
	m.mu.Lock()
	if m.stopping {
		m.mu.Unlock()
		return nil, ErrShuttingDown
	}
	m.wg.Add(1)
	m.mu.Unlock()
	spec, release, err := m.prepare(ctx, thread, opts)
	if err != nil {
		m.wg.Done()
		return nil, err
	}
	return &starting{m: m, spec: spec, release: release}, nil
}

// record commits in's user message msg and returns its seq; a compaction
// (RunOptions.Compact) carries none, and records nothing.
func (m *Manager) record(ctx context.Context, in Input, msg event.Event) (int64, error) {
	if in.Options.Compact {
		return 0, nil
	}
	committed, err := m.cfg.Log.Append(ctx, msg.Thread, msg)
	if err != nil {
		return 0, fmt.Errorf("record the user's message: %w", err)
	}
	return committed[len(committed)-1].Seq, nil
}

// launch starts the run st made ready, after seq after (its user message's).
// o.mu is held, or o is not yet adopted. A run launched with ah is ahead
// of its commit (ahead.go): until ah is decided it touches neither o nor
// anything anyone else sees, and once undone it ends without them.
func (m *Manager) launch(o *owner, claim store.RunClaim, in Input, st *starting, after int64, ah *ahead) {
	runCtx, cancel := context.WithCancelCause(m.ctx)
	if ah != nil {
		ah.cancel = cancel
	}
	a := &active{id: in.runID, cancel: cancel, inbox: agent.NewInbox()}
	o.run = a
	spec := st.spec
	spec.Thread, spec.Run, spec.Input, spec.Interactive = o.thread, in.runID, in.Text, in.Interactive
	spec.Compact, spec.After = in.Options.Compact, after
	go func() {
		defer m.wg.Done()
		defer cancel(nil)
		if st.release != nil {
			defer st.release()
		}
		err := m.cfg.Runner.Run(runCtx, spec, journal{m.cfg.Log, o.thread, ah}, a.inbox)
		if ah != nil && !ah.wait() {
			return // undone: the thread is not this run's
		}
		if err != nil {
			m.logger.Error("run lost its journal", "thread", o.thread, "run", in.runID, "err", err)
		}
		o.mu.Lock()
		o.run = nil
		if o.lost {
			o.released = true
			o.mu.Unlock()
			m.disown(o)
			return
		}
		m.advance(o, claim)
	}()
}

// prepare turns run options into the run's spec.
func (m *Manager) prepare(ctx context.Context, thread string, opts event.RunOptions) (agent.Spec, func(), error) {
	if m.cfg.Prepare == nil {
		return agent.Spec{Strategy: opts.Strategy}, nil, nil
	}
	return m.cfg.Prepare(ctx, thread, opts)
}

// advance starts the thread's next queued input, or, when there is none,
// ends the ownership: the command handler stops, then the claim is
// released. o.mu is held; advance unlocks it.
func (m *Manager) advance(o *owner, claim store.RunClaim) {
	ctx := m.ctx
	for !m.isStopping() {
		q, ok, err := m.cfg.Claims.DequeueInput(ctx, o.thread)
		if err != nil {
			m.logger.Error("take the thread's next input", "thread", o.thread, "err", err)
			break
		}
		if !ok {
			break
		}
		in := fromQueue(q)
		next := store.RunClaim{Thread: o.thread, Run: in.runID, Node: m.cfg.Node}
		if err := m.cfg.Claims.MoveRun(ctx, next, claim.Run, m.cfg.Lease); err != nil {
			// The claim is no longer ours: its new owner runs the queue.
			m.logger.Error("move the thread's claim to its next run", "thread", o.thread, "err", err)
			if err := m.cfg.Claims.EnqueueInput(ctx, o.thread, q); err != nil {
				m.logger.Error("put the input back in the queue", "thread", o.thread, "err", err)
			}
			o.released = true
			o.mu.Unlock()
			m.disown(o)
			return
		}
		claim = next
		err = m.start(ctx, o, claim, in)
		if err == nil {
			o.mu.Unlock()
			return
		}
		if errors.Is(err, ErrShuttingDown) {
			if err := m.cfg.Claims.EnqueueInput(context.WithoutCancel(ctx), o.thread, q); err != nil {
				m.logger.Error("put the input back in the queue", "thread", o.thread, "err", err)
			}
			break
		}
		// The input cannot run (its options no longer apply, or the store
		// failed): its poster sees the run fail.
		m.logger.Error("start queued run", "thread", o.thread, "run", in.runID, "err", err)
		m.fail(o.thread, in, err)
	}
	o.released = true
	o.mu.Unlock()
	// Nobody here claims the thread while it is let go.
	leave, _, _, _ := m.enter(context.Background(), o.thread)
	defer leave()
	m.disown(o)
	// A stopping server keeps the claim of a thread whose queue still holds
	// input, so that the next start (or another node, once the lease runs
	// out) runs it; otherwise the claim goes, and input that arrived while
	// the thread was being let go is run by whoever claims it next.
	stopCtx := context.WithoutCancel(ctx)
	if m.isStopping() {
		if n, err := m.cfg.Claims.QueueLen(stopCtx, o.thread); err != nil || n > 0 {
			return
		}
	}
	m.release(claim)
	leave()
	if !m.isStopping() {
		m.kick(stopCtx, o.thread)
	}
}

// fail records that a queued input could not run: its message and a
// failed run, so that whoever waits for that run sees why.
func (m *Manager) fail(thread string, in Input, cause error) {
	msg := "The message could not be run."
	var coded interface{ ClientMessage() string }
	if errors.As(cause, &coded) {
		msg += " " + coded.ClientMessage()
	}
	_, err := m.cfg.Log.Append(context.Background(), thread,
		userMessage(thread, in),
		event.New(thread, in.runID, event.RunFailed{Code: event.CodeInternal, Message: msg}))
	if err != nil {
		m.logger.Error("record a queued input that could not run", "thread", thread, "err", err)
	}
}

// release gives up a run claim. A claim that cannot be released runs out
// with its lease, and another node (or this one's next start) recovers it.
func (m *Manager) release(c store.RunClaim) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.cfg.Claims.ReleaseRun(ctx, c); err != nil {
		m.logger.Error("release run claim", "thread", c.Thread, "run", c.Run, "err", err)
	}
}

// keepLeases renews this node's claims three times per lease, cancels the
// runs of claims it lost, and takes over the threads of nodes whose leases
// ran out.
func (m *Manager) keepLeases(ctx context.Context) {
	tick := time.NewTicker(m.cfg.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		m.renew(ctx)
		m.reap(ctx)
	}
}

func (m *Manager) renew(ctx context.Context) {
	claims, err := m.cfg.Claims.RenewRuns(ctx, m.cfg.Node, m.cfg.Lease)
	if err != nil {
		if ctx.Err() == nil {
			m.logger.Error("renew run claims", "err", err)
		}
		return
	}
	held := make(map[string]bool, len(claims))
	for _, c := range claims {
		held[c.Thread] = true
	}
	m.mu.Lock()
	var lost []*owner
	for thread, o := range m.owned {
		if !held[thread] {
			lost = append(lost, o)
		}
	}
	m.mu.Unlock()
	for _, o := range lost {
		o.mu.Lock()
		a := o.run
		// An owner between taking its claim and starting its run holds
		// the claim without a run; only a running owner can lose it.
		if a != nil {
			o.lost = true
		}
		o.mu.Unlock()
		if a != nil {
			m.logger.Error("lost the claim on a thread's run; cancelling it", "thread", o.thread, "run", a.id)
			a.cancel(agent.ErrSuperseded)
		}
	}
}

// reap takes over the threads whose owners' leases ran out.
func (m *Manager) reap(ctx context.Context) {
	if m.isStopping() || (m.cfg.Ready != nil && !m.cfg.Ready()) {
		return
	}
	claims, err := m.cfg.Claims.RunClaims(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.logger.Error("read run claims", "err", err)
		}
		return
	}
	for _, c := range claims {
		if !c.Expired || c.Node == m.cfg.Node {
			continue
		}
		if err := m.cfg.Claims.TakeOverRun(ctx, c, m.cfg.Node, m.cfg.Lease); err != nil {
			if !errors.Is(err, store.ErrRunClaimed) && ctx.Err() == nil {
				m.logger.Error("take over a dead node's thread", "thread", c.Thread, "err", err)
			}
			continue
		}
		m.logger.Warn("took over the thread of a node whose lease ran out", "thread", c.Thread, "run", c.Run, "node", c.Node)
		mine := store.RunClaim{Thread: c.Thread, Run: c.Run, Node: m.cfg.Node}
		if err := m.endDeadRun(ctx, c); err != nil {
			m.logger.Error("end a dead node's run", "thread", c.Thread, "err", err)
			continue // the claim runs out again, and is tried again
		}
		o := &owner{thread: c.Thread}
		if err := m.adopt(ctx, o); err != nil {
			m.logger.Error("handle a taken-over thread's commands", "thread", c.Thread, "err", err)
			m.release(mine)
			continue
		}
		o.mu.Lock()
		m.advance(o, mine)
	}
}

// Cancel cancels the thread's active run and drops its queued input.
func (m *Manager) Cancel(ctx context.Context, thread string) error {
	err := m.cfg.Bus.Send(ctx, thread, event.Command{Kind: event.CommandCancel})
	if errors.Is(err, bus.ErrNoHandler) {
		return ErrNoRun
	}
	return err
}

// Resolve delivers a person's answer (cmd.Answers) to the run waiting for
// it. The id must name a request the thread's active run still waits for.
func (m *Manager) Resolve(ctx context.Context, thread string, cmd event.Command) error {
	if !cmd.Answers() {
		return fmt.Errorf("runs: a %q command answers no request", cmd.Kind)
	}
	err := m.cfg.Bus.Send(ctx, thread, cmd)
	if errors.Is(err, bus.ErrNoHandler) {
		return ErrUnknownRequest
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

// journal is a thread's Log as one run sees it; a run started ahead of
// its commit sees it through that commit's gate.
type journal struct {
	log    Log
	thread string
	ahead  *ahead // nil: the run's user message was committed before it started
}

// Append implements agent.Journal. A run started ahead of its commit
// appends once the commit is in; when the run was undone, what it appends
// is dropped (the run's context says why).
func (j journal) Append(ctx context.Context, events ...event.Event) ([]event.Event, error) {
	if j.ahead != nil && !j.ahead.wait() {
		return nil, nil
	}
	return j.log.Append(ctx, j.thread, events...)
}

// Preview implements agent.Journal: a run started ahead of its commit
// holds its previews until the commit is in.
func (j journal) Preview(e event.Event) {
	if j.ahead != nil && j.ahead.hold(e) {
		return
	}
	j.log.Preview(j.thread, e)
}

// Previews implements agent.Journal.
func (j journal) Previews() bool { return j.log.Previews() }

// WaitsForCommits implements agent.Journal.
func (j journal) WaitsForCommits() bool { return j.log.WaitsForCommits(j.thread) }

func (j journal) History(ctx context.Context) ([]event.Event, error) {
	if j.ahead != nil {
		return j.ahead.history(ctx, j.log)
	}
	return j.log.History(ctx, j.thread)
}
