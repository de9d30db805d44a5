package runs

import (
	"context"
	"sync"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
)

// A run that starts a thread's ownership is started ahead of its commit:
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
// context cancelled with agent.ErrUndone, everything it wrote dropped); in the
// first case a run is started again the ordinary way. The price of a
// failed start is a model call made for nothing.

// ahead is the gate of a run started ahead of its commit.
type ahead struct {
	msg     event.Event // the user's message, with the seq the run's history gives it
	cancel  context.CancelCauseFunc
	preview func(event.Event) // the Log's
	decided chan struct{}     // closed by commit or fail

	mu     sync.Mutex
	open   bool          // the commit is in, at msg.Seq
	undone bool          // the run is undone (fail)
	held   []event.Event // previews made before the commit, sent by commit
}

// goAhead prepares the gate of a run, whose user message is msg, to be
// started ahead of its commit, or returns nil when the run's history could
// not be known to be exact: the thread's last seq could not be read now
// (the commit that follows then reports what is wrong with the store).
func (m *Manager) goAhead(ctx context.Context, msg event.Event) *ahead {
	last, err := m.cfg.Log.LastSeq(ctx, msg.Thread)
	if err != nil {
		return nil
	}
	msg.Seq = last + 1
	return &ahead{msg: msg, decided: make(chan struct{}), preview: func(e event.Event) { m.cfg.Log.Preview(msg.Thread, e) }}
}

// after is the seq the run's events follow: its user message's.
func (a *ahead) after() int64 { return a.msg.Seq }

// commit lets the run's events out, its user message committed at seq. It
// reports false, having undone the run, when seq is not the one the
// run's history gave the message: something was committed in between.
func (a *ahead) commit(seq int64) bool {
	if seq != a.msg.Seq {
		a.fail()
		return false
	}
	a.mu.Lock()
	a.open = true
	for _, e := range a.held {
		a.preview(e)
	}
	a.held = nil
	a.mu.Unlock()
	close(a.decided)
	return true
}

// hold takes a preview e of the run: it keeps it for commit to send while
// the commit is not in, and drops it once the run is undone. It reports
// false when e is to be sent now. Previews are made on the run's
// goroutine, which must not wait for the commit: it reads its history and
// calls the model meanwhile.
func (a *ahead) hold(e event.Event) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.open:
		return false
	case !a.undone:
		a.held = append(a.held, e)
	}
	return true
}

// fail undoes the run: its context is cancelled first, so that what it
// wrote is dropped, not reported as a failed append.
func (a *ahead) fail() {
	a.cancel(agent.ErrUndone)
	a.mu.Lock()
	a.undone, a.held = true, nil
	a.mu.Unlock()
	close(a.decided)
}

// wait waits for the commit and reports whether the run is on.
func (a *ahead) wait() bool {
	<-a.decided
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.open
}

// history is the run's history before its commit is known: the thread's
// conversation read now, and the user's message after it unless the read
// found it committed already.
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
