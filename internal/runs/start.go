package runs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/tracing"
)

// prepared is a run's spec as Config.Prepare made it from the run's
// options, with what Prepare opened for it (release). A post is prepared
// once (Post): the spec its check made is the one its run starts with when
// it starts at once, and the one a run started again after an undone start
// ahead uses as well, while the undone run may still be stopping. So the
// spec is shared: whoever prepared it and each run launched with it hold a
// reference, and what Prepare opened is released with the last one.
type prepared struct {
	spec    agent.Spec
	release func() // Prepare's, or nil
	refs    atomic.Int32
}

// prepare turns run options into a run's spec, holding one reference for
// the caller, who gives it back with done. A nil Config.Prepare takes
// only the strategy from the options.
func (m *Manager) prepare(ctx context.Context, thread string, opts event.RunOptions) (*prepared, error) {
	p := &prepared{spec: agent.Spec{Strategy: opts.Strategy}}
	if m.cfg.Prepare != nil {
		var err error
		if p.spec, p.release, err = m.cfg.Prepare(ctx, thread, opts); err != nil {
			return nil, err
		}
	}
	p.refs.Store(1)
	return p, nil
}

// hold takes another reference, for a run launched with the spec; only
// the holder of a reference may take another.
func (p *prepared) hold() { p.refs.Add(1) }

// done gives a reference back; the last one releases what Prepare opened.
func (p *prepared) done() {
	switch n := p.refs.Add(-1); {
	case n < 0:
		panic("runs: a prepared spec was given back more often than it was held")
	case n == 0 && p.release != nil:
		p.release()
	}
}

// check refuses run options this node could not honour: it prepares them
// and releases what that opened.
func (m *Manager) check(ctx context.Context, thread string, opts event.RunOptions) error {
	p, err := m.prepare(ctx, thread, opts)
	if err != nil {
		return err
	}
	p.done()
	return nil
}

// slot is a run's place among the runs Shutdown waits for (Manager.wg).
// It is taken (admit) before anything of the run is committed; then either
// launch hands it to the run, which gives it back when it ends, or the
// start gives up and free gives it back. A slot is used by one goroutine,
// the one starting the run.
type slot struct {
	wg       *sync.WaitGroup
	launched bool
}

// admit takes a slot for a run about to start, unless Shutdown began: a
// Post that passed its check before Shutdown must not start a run after
// Shutdown stopped waiting (TestPostRacingShutdown). Taking the slot under
// m.mu, where Shutdown sets stopping, is what makes that so.
func (m *Manager) admit() (*slot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping {
		return nil, ErrShuttingDown
	}
	m.wg.Add(1)
	return &slot{wg: &m.wg}, nil
}

// free gives the slot back, unless a run was launched with it.
func (s *slot) free() {
	if !s.launched {
		s.launched = true
		s.wg.Done()
	}
}

// active is a run going on here: what a cancel, a lost claim or an undone
// start stops, and where people's answers go.
type active struct {
	id     string
	ctx    context.Context // the run's: a child of the Manager's, which Shutdown cancels
	cancel context.CancelCauseFunc
	inbox  *agent.Inbox
}

// newActive returns the active run of id, about to be launched.
func (m *Manager) newActive(id string) *active {
	ctx, cancel := context.WithCancelCause(m.ctx)
	return &active{id: id, ctx: ctx, cancel: cancel, inbox: agent.NewInbox()}
}

// runStart is what launch starts a run with.
type runStart struct {
	owner *owner
	claim store.RunClaim // the thread's claim, naming the run
	in    Input
	spec  *prepared
	after int64  // the seq of the run's user message
	gate  *ahead // nil: the run's user message was committed before it started
}

// launch runs a, the run of s.in, on its own goroutine, which holds sl and
// a reference to s.spec until the run ends. The run then hands the thread
// on (advance), unless it went ahead of its commit and that start was
// undone: then the thread is not the run's, and it touches nothing of its
// owner. launch itself touches nothing of the owner either: the caller
// makes a the owner's run.
func (m *Manager) launch(a *active, sl *slot, s runStart) {
	spec := s.spec.spec
	spec.Thread, spec.Run, spec.Input, spec.Interactive = s.owner.thread, a.id, s.in.Text, s.in.Interactive
	spec.Compact, spec.After = s.in.Options.Compact, s.after
	sl.launched = true
	s.spec.hold()
	go func() {
		defer sl.wg.Done()
		defer a.cancel(nil)
		defer s.spec.done()
		// The run's span: a child of the poster's trace, if it sent one.
		ctx, span := tracing.Start(tracing.Remote(a.ctx, s.in.Options.Traceparent), "agentwire.run",
			attribute.String("agentwire.thread", s.owner.thread), attribute.String("agentwire.run", a.id),
			attribute.String("agentwire.strategy", spec.Strategy))
		defer span.End()
		err := m.cfg.Runner.Run(ctx, spec, journal{m.cfg.Log, s.owner.thread, s.gate}, a.inbox)
		if s.gate != nil && !s.gate.wait() {
			// Undone: the thread is not this run's.
			m.logger.Debug("dropped a run started ahead of its commit", "thread", s.owner.thread, "run", a.id,
				"cause", context.Cause(a.ctx))
			return
		}
		if err != nil {
			m.logger.Error("run lost its journal", "thread", s.owner.thread, "run", a.id, "err", err)
		}
		m.advance(s.owner, s.claim)
	}()
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

// userMessage is the event that records in's message in the thread, with
// the client's key of the post.
func userMessage(thread string, in Input) event.Event {
	return event.New(thread, in.runID, event.MessageUser{MessageID: in.messageID, Text: in.Text, Key: in.Key})
}
