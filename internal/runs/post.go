package runs

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// errClaimed is own's answer when another claim holds the thread.
var errClaimed = errors.New("the thread is claimed")

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
		if seq, ok := m.aheadSeq(ctx, thread); ok {
			at := msg
			at.Seq = seq
			ah = newAhead(at, nil, func(e event.Event) { m.cfg.Log.Preview(thread, e) }) // launch gives it the run's cancel
		}
	}
	undo := st.undo
	if ah != nil {
		m.launch(o, claim, *first, st, ah.after(), ah)
		undo = ah.undo
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
