package runs

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/store"
)

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

// renew renews this node's claims and stops the runs of the threads whose
// claims it no longer holds: another node took them over and ended their
// runs in the log, so they record nothing more (agent.ErrSuperseded).
func (m *Manager) renew(ctx context.Context) {
	// Only the owners this node had before the claims are read can have
	// lost theirs: an owner that claims its thread while RenewRuns runs
	// (a post on a busy machine) holds a claim the answer may not show
	// yet, and must not be taken for one another node took over.
	m.mu.Lock()
	before := maps.Clone(m.owned)
	m.mu.Unlock()
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
	for thread, o := range before {
		if !held[thread] && m.owned[thread] == o {
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

// reap takes over the threads whose owners' leases ran out: it ends their
// dead runs in the log and runs their queued input.
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
		m.cfg.Metrics.LeaseTakenOver()
		mine := store.RunClaim{Thread: c.Thread, Run: c.Run, Node: m.cfg.Node}
		if err := m.endDeadRun(ctx, c); err != nil {
			m.logger.Error("end a dead node's run", "thread", c.Thread, "err", err)
			// The claim is this node's now and renewed with its others,
			// so nothing here tries again: the thread waits for this
			// node's next start (Recover), or for another node once this
			// one's leases run out.
			continue
		}
		o := &owner{thread: c.Thread}
		if err := m.adopt(ctx, o); err != nil {
			m.logger.Error("handle a taken-over thread's commands", "thread", c.Thread, "err", err)
			m.release(mine)
			continue
		}
		m.advance(o, mine)
	}
}
