package runs

import (
	"context"
	"sync"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
)

// A run that starts a thread's ownership may start ahead of its commit:
// the commit that claims the thread and records the user's message (a
// synced write, the longest step of a post) is made while the run reads
// its history and calls the model, instead of before. The run's journal
// holds back everything the run writes or previews until the commit is in,
// so no client sees any of it sooner than before, and a tool runs only
// once its call is committed, as always.
//
// The run's history is the log as read after the thread's last seq was
// taken, with the user's message after it: exact when the message is then
// committed right after that seq. When anything else was committed in
// between, or the claim goes to another node, the run is undone (its
// context cancelled with agent.ErrUndone, everything it wrote dropped); in
// the first case a run is started again the ordinary way. The price of a
// failed start is a model call made for nothing.
//
// A run goes ahead only while the node is quiet (see startHere): while
// other runs start, their commits share the disk and their model calls the
// processors, and a run that went ahead would only wait for its commit
// after the model's first words instead of before its call.

// aheadState is where the start of a run that went ahead of its commit
// stands. A gate is pending until its commit is decided, then committed
// or undone for good:
//
//	pending ──commit(at the seq the run's history gave its message)──► committed
//	pending ──commit(at another seq)──► undone
//	pending ──undo (the claim went elsewhere, or the commit failed)──► undone
//
// Every transition is made by ahead.decide; a decided gate ignores later
// ones.
type aheadState int

const (
	// aheadPending: the commit is being made. The run reads its history
	// and calls the model; what it appends waits, what it previews is
	// held.
	aheadPending aheadState = iota
	// aheadCommitted: the commit made the thread the run's, with its user
	// message where the run's history put it. What the run appends goes to
	// the log, the previews it made are sent (in order, before any later
	// one), and it goes on as any run.
	aheadCommitted
	// aheadUndone: the thread is not the run's, or its history was not
	// exact. The run is cancelled with agent.ErrUndone, and what it
	// appends or previews is dropped.
	aheadUndone
)

func (s aheadState) String() string {
	switch s {
	case aheadPending:
		return "pending"
	case aheadCommitted:
		return "committed"
	case aheadUndone:
		return "undone"
	}
	return "unknown"
}

// ahead is the gate of a run started ahead of its commit: the state
// machine above.
type ahead struct {
	msg     event.Event             // the user's message, with the seq the run's history gives it
	cancel  context.CancelCauseFunc // the run's
	preview func(event.Event)       // the Log's, for the thread
	decided chan struct{}           // closed when the gate leaves aheadPending
	// counted, when set, is told how the gate was decided (the server's
	// metrics).
	counted func(result string)

	mu    sync.Mutex
	state aheadState
	held  []event.Event // previews made while pending, in order
}

// newAhead returns the pending gate of the run that cancel cancels, whose
// user message msg carries the seq its history gives it; preview sends a
// preview of the run to the thread's subscribers.
func newAhead(msg event.Event, cancel context.CancelCauseFunc, preview func(event.Event)) *ahead {
	return &ahead{msg: msg, cancel: cancel, preview: preview, decided: make(chan struct{})}
}

// aheadSeq returns the seq a run's user message would take if it were
// committed now, or false when the thread's last seq could not be read (the
// commit that follows then reports what is wrong with the store): the run
// then waits for its commit, since its history could not be known to be
// exact.
func (m *Manager) aheadSeq(ctx context.Context, thread string) (int64, bool) {
	last, err := m.cfg.Log.LastSeq(ctx, thread)
	if err != nil {
		return 0, false
	}
	return last + 1, true
}

// commit decides the gate on the commit of the run's user message at seq:
// committed when seq is the one the run's history gave the message, undone
// when something else was committed in between. It reports whether the
// gate is committed by this call; a gate decided before stays as it was.
func (a *ahead) commit(seq int64) bool {
	if seq != a.msg.Seq {
		a.decide(aheadUndone)
		return false
	}
	return a.decide(aheadCommitted)
}

// undo decides the gate undone: the commit did not make the thread the
// run's. It may be called on any gate: a committed one stays committed.
// A nil gate (a run that did not go ahead) has nothing to undo.
func (a *ahead) undo() {
	if a != nil {
		a.decide(aheadUndone)
	}
}

// decide makes the gate's one transition, from aheadPending to to, and
// reports whether it made it.
//
// Undone, the run's context is cancelled before anyone can see the gate
// decided, so that what the run wrote is dropped (the agent drops a
// cancelled run's events when the cause is agent.ErrUndone) rather than
// reported as a failed append. Committed, the held previews are sent while
// a.mu is held, so that a preview made since (hold reports false once the
// gate is committed) cannot overtake them.
func (a *ahead) decide(to aheadState) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state != aheadPending {
		return false
	}
	switch to {
	case aheadCommitted:
		for _, e := range a.held {
			a.preview(e)
		}
	case aheadUndone:
		a.cancel(agent.ErrUndone)
	default:
		panic("runs: a start ahead can only be committed or undone, not " + to.String())
	}
	a.state, a.held = to, nil
	close(a.decided)
	if a.counted != nil {
		a.counted(to.String())
	}
	return true
}

// hold takes a preview e of the run: pending, it keeps it for the commit
// to send; undone, it drops it. It reports false when e is to be sent now
// (the gate is committed). Previews are made on the run's goroutine, which
// must not wait for the commit: it reads its history and calls the model
// meanwhile.
func (a *ahead) hold(e event.Event) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch a.state {
	case aheadCommitted:
		return false
	case aheadPending:
		a.held = append(a.held, e)
	}
	return true
}

// wait waits for the gate to be decided and reports whether the run is
// on (committed).
func (a *ahead) wait() bool {
	<-a.decided
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state == aheadCommitted
}

// history is the run's history: while the gate is pending, the thread's
// conversation read now, and the user's message after it unless the read
// found it committed already; once committed, the log's; once undone,
// nothing (agent.ErrUndone).
func (a *ahead) history(ctx context.Context, log Log) ([]event.Event, error) {
	select {
	case <-a.decided:
		if !a.wait() {
			return nil, agent.ErrUndone
		}
		return log.History(ctx, a.msg.Thread)
	default:
	}
	hist, err := log.History(ctx, a.msg.Thread)
	if err != nil {
		return nil, err
	}
	for i := len(hist) - 1; i >= 0 && hist[i].Seq >= a.msg.Seq; i-- {
		if hist[i].ID == a.msg.ID {
			return hist, nil
		}
	}
	return append(hist, a.msg), nil
}
