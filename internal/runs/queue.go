package runs

import (
	"context"
	"errors"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// handoff is what an owner does with its thread once a run ended (next).
type handoff int

const (
	// runNext: the next queued input's run started.
	runNext handoff = iota + 1
	// letGo: the queue is empty, or cannot be read, or the server stops:
	// the owner lets the thread go and releases its claim.
	letGo
	// claimGone: the claim is no longer this node's (another node took
	// the thread over, or moving the claim to the next run failed): the
	// owner stops handling the thread's commands, and leaves the claim and
	// the queue to the thread's new owner.
	claimGone
)

// advance hands the thread on once its run has ended, or once the thread
// was claimed for its queue (takeQueue, reap): it starts the queue's next
// input, or lets the thread go. The run's end, the next input's start and
// the owner's letting go are one critical section of o.mu (owner): a
// cancel that comes meanwhile reaches the next run, and a post finds the
// owner either still taking input or released.
func (m *Manager) advance(o *owner, claim store.RunClaim) {
	o.mu.Lock()
	o.run = nil
	step := claimGone
	if !o.lost {
		o.run, claim, step = m.next(o, claim)
	}
	if step != runNext {
		o.released = true
	}
	o.mu.Unlock()
	switch step {
	case claimGone:
		m.disown(o)
	case letGo:
		m.letGo(o, claim)
	}
}

// next takes the thread's queued input, oldest first, until one of them
// starts: it moves the thread's claim to that input's run and starts it,
// and returns the run and its claim. An input that cannot start is
// recorded as failed and the next one is taken. It reads only o's thread,
// and hands o to the run it launches: advance makes the run o's.
func (m *Manager) next(o *owner, claim store.RunClaim) (*active, store.RunClaim, handoff) {
	ctx := m.ctx
	for !m.isStopping() {
		q, ok, err := m.cfg.Claims.DequeueInput(ctx, o.thread)
		if err != nil {
			m.logger.Error("take the thread's next input", "thread", o.thread, "err", err)
			return nil, claim, letGo
		}
		if !ok {
			return nil, claim, letGo
		}
		in := fromQueue(q)
		moved := store.RunClaim{Thread: o.thread, Run: in.runID, Node: m.cfg.Node}
		if err := m.cfg.Claims.MoveRun(ctx, moved, claim.Run, m.cfg.Lease); err != nil {
			// The claim is no longer ours: its new owner runs the queue.
			m.logger.Error("move the thread's claim to its next run", "thread", o.thread, "err", err)
			if err := m.cfg.Claims.EnqueueInput(ctx, o.thread, q); err != nil {
				m.logger.Error("put the input back in the queue", "thread", o.thread, "err", err)
			}
			return nil, claim, claimGone
		}
		claim = moved
		a, err := m.startQueued(ctx, o, claim, in)
		if err == nil {
			return a, claim, runNext
		}
		if errors.Is(err, ErrShuttingDown) {
			if err := m.cfg.Claims.EnqueueInput(context.WithoutCancel(ctx), o.thread, q); err != nil {
				m.logger.Error("put the input back in the queue", "thread", o.thread, "err", err)
			}
			return nil, claim, letGo
		}
		// The input cannot run (its options no longer apply, or the store
		// failed): its poster sees the run fail.
		m.logger.Error("start queued run", "thread", o.thread, "run", in.runID, "err", err)
		m.fail(o.thread, in, err)
	}
	return nil, claim, letGo
}

// startQueued commits queued input in's user message and launches its
// run; the thread's claim names in's run already. Its options are
// prepared here, on the node that runs it, when it starts.
func (m *Manager) startQueued(ctx context.Context, o *owner, claim store.RunClaim, in Input) (*active, error) {
	sl, err := m.admit()
	if err != nil {
		return nil, err
	}
	defer sl.free()
	p, err := m.prepare(ctx, o.thread, in.Options)
	if err != nil {
		return nil, err
	}
	defer p.done()
	after, err := m.record(ctx, in, userMessage(o.thread, in))
	if err != nil {
		return nil, err
	}
	a := m.newActive(in.runID)
	m.launch(a, sl, runStart{owner: o, claim: claim, in: in, spec: p, after: after})
	return a, nil
}

// letGo ends an ownership whose queue is empty: the command handler
// stops, then the claim is released, and input that arrived meanwhile is
// run by whoever claims the thread next.
func (m *Manager) letGo(o *owner, claim store.RunClaim) {
	// Nobody here claims the thread while it is let go. (enter fails only
	// when its context ends.)
	e, _ := m.enter(context.Background(), o.thread)
	defer e.leave()
	m.disown(o)
	// A stopping server keeps the claim of a thread whose queue still holds
	// input, so that the next start (or another node, once the lease runs
	// out) runs it; otherwise the claim goes, and input that arrived while
	// the thread was being let go is run by whoever claims it next.
	ctx := context.WithoutCancel(m.ctx)
	if m.isStopping() {
		if n, err := m.cfg.Claims.QueueLen(ctx, o.thread); err != nil || n > 0 {
			return
		}
	}
	m.release(claim)
	e.leave()
	if !m.isStopping() {
		m.kick(ctx, o.thread)
	}
}

// kick makes sure queued input of a thread nobody owns runs: it claims the
// thread and starts the queue's first input (takeQueue). A claimed thread
// is its owner's to run. The input is in the queue already, so kick does
// its part whatever becomes of ctx (a poster's, which may end as soon as
// its post returns: TestQueuedPostOutlivesItsPoster).
func (m *Manager) kick(ctx context.Context, thread string) {
	ctx = context.WithoutCancel(ctx)
	n, err := m.cfg.Claims.QueueLen(ctx, thread)
	if err != nil {
		m.logger.Error("read the thread's queue", "thread", thread, "err", err)
		return
	}
	if n == 0 {
		return
	}
	if _, err := m.takeQueue(ctx, thread); err != nil && !errors.Is(err, ErrShuttingDown) {
		m.logger.Error("start the thread's queued input", "thread", thread, "err", err)
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
