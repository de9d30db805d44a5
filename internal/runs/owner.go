package runs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// owner is a Manager's ownership of one thread: from the input that starts
// a run until the thread's queue is empty, the Manager holds the thread's
// claim and handles its commands (adopt), and runs its input one run at a
// time.
//
// The thread's queue and the owner's letting go agree under o.mu: the
// owner lets the thread go (released) only in the critical section in
// which it found the queue empty (advance), and its command handler puts a
// post in the queue only in a critical section that finds it not released
// (handle). So a post never joins the queue of an owner that has let the
// thread go behind its back: it is answered bus.ErrNoHandler, and its
// poster looks for the thread's next owner. (Input another node queued in
// the store meanwhile is run by the kick that follows the release, see
// letGo.)
type owner struct {
	thread string
	stop   func() // stops handling the thread's commands; set by adopt

	mu       sync.Mutex
	run      *active // the running run; nil between runs
	released bool    // commands go to the thread's next owner
	lost     bool    // another node took the thread over (renew)
}

// setRun makes a the owner's running run.
func (o *owner) setRun(a *active) {
	o.mu.Lock()
	o.run = a
	o.mu.Unlock()
}

// entry is a thread taken here for claiming it, or letting it go (enter).
type entry struct {
	// waited says another goroutine of this Manager claimed the thread or
	// let it go first: whatever it found out about the thread's owner may
	// be out of date.
	waited bool
	// quiet says no other thread was being taken here, and this Manager
	// did not own this one: a run may start ahead of its commit.
	quiet bool
	// leave gives the thread back; it may be called more than once.
	leave func()
}

// enter takes the thread for claiming it, or letting it go, here: it waits
// while another goroutine of this Manager does either. One claim at a
// time per thread here means a post's claim fails only when another node
// holds the thread, so its run can start ahead of it (ahead.go).
func (m *Manager) enter(ctx context.Context, thread string) (entry, error) {
	waited := false
	for {
		m.mu.Lock()
		busy, ok := m.busy[thread]
		if !ok {
			done := make(chan struct{})
			quiet := len(m.busy) == 0 && m.owned[thread] == nil
			m.busy[thread] = done
			m.mu.Unlock()
			leave := sync.OnceFunc(func() {
				m.mu.Lock()
				delete(m.busy, thread)
				m.mu.Unlock()
				close(done)
			})
			return entry{waited: waited, quiet: quiet, leave: leave}, nil
		}
		m.mu.Unlock()
		select {
		case <-busy:
			waited = true
		case <-ctx.Done():
			return entry{}, ctx.Err()
		}
	}
}

// claim claims the thread for c.Run. It reports false when another claim
// holds the thread.
func (m *Manager) claim(ctx context.Context, c store.RunClaim) (bool, error) {
	if err := m.cfg.Claims.ClaimRun(ctx, c, m.cfg.Lease); err != nil {
		if errors.Is(err, store.ErrRunClaimed) {
			return false, nil
		}
		return false, fmt.Errorf("claim the thread: %w", err)
	}
	return true, nil
}

// adopt makes this Manager the handler of o's thread's commands; the
// thread's claim is already this node's. It fails with bus.ErrHandlerExists
// when another owner handles them.
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

// abandon ends an ownership whose first run could not start: the thread's
// commands go to its next owner, and its claim is released.
func (m *Manager) abandon(o *owner, claim store.RunClaim) {
	o.mu.Lock()
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

// takeQueue makes this Manager the owner of a thread nobody here owns,
// for its queued input, and starts that input's run. It reports false,
// doing nothing, when another claim holds the thread: its owner runs the
// queue.
func (m *Manager) takeQueue(ctx context.Context, thread string) (bool, error) {
	if m.isStopping() {
		return false, ErrShuttingDown
	}
	e, err := m.enter(ctx, thread)
	if err != nil {
		return false, err
	}
	defer e.leave()
	claim := store.RunClaim{Thread: thread, Run: "pending-" + event.NewID(), Node: m.cfg.Node} // moved to the queue's first run
	if ok, err := m.claim(ctx, claim); !ok || err != nil {
		return false, err
	}
	o := &owner{thread: thread}
	if err := m.adopt(ctx, o); err != nil {
		m.release(claim)
		if errors.Is(err, bus.ErrHandlerExists) {
			return false, nil // another owner's
		}
		return false, err
	}
	e.leave() // the thread's commands reach o now; advance may let it go
	m.advance(o, claim)
	return true, nil
}
