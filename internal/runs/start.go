package runs

import (
	"context"
	"fmt"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

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
