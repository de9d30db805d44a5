package runs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

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
