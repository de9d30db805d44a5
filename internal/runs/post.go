package runs

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/tracing"
)

// Post gives the thread a user message. The owner of the thread's runs
// queues it behind the active run; a thread without an owner gets this
// Manager as its owner, and the message is committed and its run started
// before Post returns. Queued input waits in the store and is committed
// when its run starts.
//
// The post's options are prepared once, here (Config.Prepare), so that a
// post this node could not run is refused to its poster rather than
// failing later; a run that starts at once starts with that spec.
func (m *Manager) Post(ctx context.Context, thread string, in Input) (Posted, error) {
	if m.isStopping() {
		return Posted{}, ErrShuttingDown
	}
	if m.cfg.Ready != nil && !m.cfg.Ready() {
		return Posted{}, ErrUnavailable
	}
	if in.Key != "" {
		if before, ok, err := m.postedBefore(ctx, thread, in.Key); err != nil || ok {
			return before, err
		}
	}
	p, err := m.prepare(ctx, thread, in.Options)
	if err != nil {
		return Posted{}, err
	}
	defer p.done()
	in.runID, in.messageID = event.NewID(), event.NewID()
	in.Options.Traceparent = tracing.Traceparent(ctx)
	in.Options.Key = in.Key
	posted, err := m.post(ctx, thread, in, p)
	if err == nil && in.Key != "" {
		m.keys.put(thread, in.Key, posted)
	}
	return posted, err
}

// post offers the prepared input in to the thread's owner, or starts it
// here, until one of them takes it.
func (m *Manager) post(ctx context.Context, thread string, in Input, p *prepared) (Posted, error) {
	queued := Posted{Run: in.runID, MessageID: in.messageID, Queued: true}
	for {
		took, err := m.offer(ctx, thread, in, p)
		if err != nil {
			return Posted{}, err
		}
		switch took {
		case queuedByOwner:
			return queued, nil
		case startedHere:
			return Posted{Run: in.runID, MessageID: in.messageID}, nil
		case claimedElsewhere:
			// Nobody takes the thread's commands: its owner is handing it
			// over, or died. The input waits in the store for whoever
			// owns the thread next.
			if err := m.cfg.Claims.EnqueueInput(ctx, thread, in.queued()); err != nil {
				return Posted{}, fmt.Errorf("queue the input: %w", err)
			}
			m.kick(ctx, thread)
			return queued, nil
		case changedHands:
			// The thread was claimed or let go here while the post looked
			// for its owner: it asks the owner the thread has now.
		}
	}
}

// taken says what offer did with a post.
type taken int

const (
	// queuedByOwner: the thread's owner, here or on another node, put the
	// post in the thread's queue.
	queuedByOwner taken = iota + 1
	// startedHere: the thread had no owner; this Manager became its owner
	// and started the post's run.
	startedHere
	// claimedElsewhere: the thread had no owner taking its commands, and
	// another claim holds it (another node's, or one being handed over).
	claimedElsewhere
	// changedHands: the thread had no owner taking its commands, and this
	// Manager was claiming it or letting it go meanwhile: it may have an
	// owner now.
	changedHands
)

// offer gives a post, whose options p holds prepared, to the thread's
// owner or, when the thread has none, makes this Manager its owner and
// starts the post's run.
func (m *Manager) offer(ctx context.Context, thread string, in Input, p *prepared) (taken, error) {
	err := m.send(ctx, thread, in)
	switch {
	case err == nil:
		return queuedByOwner, nil
	case errors.Is(err, bus.ErrNoHandler):
		return m.startHere(ctx, thread, in, p)
	}
	return 0, err
}

// send sends a post to the thread's owner (bus.Send), which queues it.
// While it is on its way, the post is among m.checked: if the owner is
// this Manager, it does not prepare the post's options again.
func (m *Manager) send(ctx context.Context, thread string, in Input) error {
	m.mu.Lock()
	m.checked[in.runID] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.checked, in.runID)
		m.mu.Unlock()
	}()
	cmd := event.Command{Kind: event.CommandPost, Run: in.runID, ID: in.messageID, Text: in.Text, Interactive: in.Interactive}
	if in.Options != (event.RunOptions{}) {
		cmd.Options = &in.Options
	}
	return m.cfg.Bus.Send(ctx, thread, cmd)
}

// startHere makes this Manager the owner of a thread that has none, and
// starts the run of a post to it, with the spec p. It claims the thread
// and records the post's message in one commit, and tells startedHere
// from claimedElsewhere by that commit.
//
// From the moment it has the thread here (enter) until the claim is
// committed, the thread's active run is the post's as far as this node
// knows (Active): a run started ahead may already be calling the model,
// and a client that joins the thread meanwhile must not take it for
// quiet.
func (m *Manager) startHere(ctx context.Context, thread string, in Input, p *prepared) (taken, error) {
	if m.isStopping() {
		return 0, ErrShuttingDown
	}
	e, err := m.enter(ctx, thread)
	if err != nil {
		return 0, err
	}
	defer e.leave()
	if e.waited {
		return changedHands, nil
	}
	defer m.announce(thread, in.runID)()
	// The run takes its place among the runs Shutdown waits for before
	// the thread is claimed: a post whose run cannot start leaves the
	// thread as it was.
	sl, err := m.admit()
	if err != nil {
		return 0, err
	}
	defer sl.free()
	claim := store.RunClaim{Thread: thread, Run: in.runID, Node: m.cfg.Node}
	msg := userMessage(thread, in)
	o := &owner{thread: thread}
	run := runStart{owner: o, claim: claim, in: in, spec: p}

	// The run starts now, ahead of the commit, where the node is quiet
	// (ahead.go). Nothing else here claims the thread meanwhile (enter),
	// so the claim fails only when another node holds it.
	var gate *ahead
	if e.quiet && !in.Options.Compact {
		if seq, ok := m.aheadSeq(ctx, thread); ok {
			at := msg
			at.Seq = seq
			a := m.newActive(in.runID)
			gate = newAhead(at, a.cancel, func(ev event.Event) { m.cfg.Log.Preview(thread, ev) })
			gate.counted = m.cfg.Metrics.RunAhead
			run.after, run.gate = seq, gate
			o.setRun(a) // before adopt: nobody else sees o yet
			m.launch(a, sl, run)
		}
	}

	after, claimed, err := m.claimAndRecord(ctx, claim, in, msg)
	if err != nil || !claimed {
		gate.undo()
		if err != nil {
			return 0, err
		}
		return claimedElsewhere, nil
	}
	// The message is in the log, and the thread is the run's: what is left
	// of the post is done whatever becomes of its poster, whose context may
	// end as soon as it has seen its message (a client's socket closed by
	// a shutdown: TestPostOutlivesItsPoster).
	ctx = context.WithoutCancel(ctx)
	if err := m.adopt(ctx, o); err != nil {
		gate.undo()
		if in.Options.Compact {
			m.release(claim)
			if errors.Is(err, bus.ErrHandlerExists) {
				return claimedElsewhere, nil // another owner's
			}
			return 0, err
		}
		// The message is in the log: its run ends there as failed, so
		// that nobody waits for it, while the claim still keeps other
		// runs out.
		m.endUnstarted(thread, in.runID)
		m.release(claim)
		return 0, fmt.Errorf("take the thread's commands: %w", err)
	}
	e.leave()

	if gate != nil {
		if gate.commit(after) {
			return startedHere, nil
		}
		// Something was committed between the history the run read and
		// its message: the run starts again, the ordinary way, with the
		// same spec.
		m.cfg.Metrics.RunAhead(metrics.AheadRestarted)
		if sl, err = m.admit(); err != nil {
			m.endUnstarted(thread, in.runID)
			m.abandon(o, claim)
			return 0, err
		}
		defer sl.free()
	}
	run.after, run.gate = after, nil
	a := m.newActive(in.runID)
	o.setRun(a)
	m.launch(a, sl, run)
	return startedHere, nil
}

// claimAndRecord claims the thread for in's run (c) and records its user
// message msg in one commit, and returns the message's seq; a compaction
// has no message, and only claims. It reports false, committing nothing,
// when another claim holds the thread.
func (m *Manager) claimAndRecord(ctx context.Context, c store.RunClaim, in Input, msg event.Event) (after int64, claimed bool, err error) {
	if in.Options.Compact {
		claimed, err = m.claim(ctx, c)
		return 0, claimed, err
	}
	committed, err := m.cfg.Log.ClaimAndAppend(ctx, c, m.cfg.Lease, msg)
	switch {
	case errors.Is(err, store.ErrRunClaimed):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("claim the thread and record the user's message: %w", err)
	}
	return committed[len(committed)-1].Seq, true, nil
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

// handle is the thread's command handler, called on the sender's behalf.
func (m *Manager) handle(ctx context.Context, o *owner, cmd event.Command) error {
	switch cmd.Kind {
	case event.CommandPost:
		in := store.QueuedInput{Run: cmd.Run, MessageID: cmd.ID, Text: cmd.Text, Interactive: cmd.Interactive}
		if cmd.Options != nil {
			in.Options = *cmd.Options
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.released {
			return bus.ErrNoHandler
		}
		if m.isStopping() {
			return ErrShuttingDown
		}
		// A post from another node is checked here as well: this node
		// runs it.
		if !m.checkedHere(cmd.Run) {
			if err := m.check(ctx, o.thread, in.Options); err != nil {
				return err
			}
		}
		// Under o.mu, so that the owner cannot find the queue empty and
		// let the thread go while this input is on its way in (owner).
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

// checkedHere reports whether run is a post this Manager checked (Post)
// and is sending to the thread's owner (send).
func (m *Manager) checkedHere(run string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checked[run]
}
