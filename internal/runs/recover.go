package runs

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// Recover ends the runs that earlier processes left unfinished: every
// claim a previous process of this node left (all of them, unless the
// store is Shared) names a run nobody runs any more. Its thread's open
// runs are marked failed with event.CodeInterrupted, with what their
// messages had streamed kept as incomplete messages, and the thread's
// queued input then runs. Call it once at start, before taking input.
// Other nodes' claims are recovered when their leases run out.
func (m *Manager) Recover(ctx context.Context) error {
	claims, err := m.cfg.Claims.RunClaims(ctx)
	if err != nil {
		return fmt.Errorf("read run claims: %w", err)
	}
	for _, c := range claims {
		if m.cfg.Shared && c.Node != m.cfg.Node {
			continue
		}
		if err := m.endDeadRun(ctx, c); err != nil {
			return fmt.Errorf("recover thread %q: %w", c.Thread, err)
		}
		if err := m.cfg.Claims.ReleaseRun(ctx, c); err != nil {
			return fmt.Errorf("recover thread %q: %w", c.Thread, err)
		}
		m.kick(ctx, c.Thread)
	}
	return nil
}

// endDeadRun ends in the log every run of c's thread that has no end,
// after closing the messages they were streaming.
func (m *Manager) endDeadRun(ctx context.Context, c store.RunClaim) error {
	n, err := m.interrupt(ctx, c.Thread, c.Run)
	if err != nil {
		return err
	}
	if n > 0 {
		m.logger.Warn("marked runs a dead server left unfinished as interrupted",
			"thread", c.Thread, "run", c.Run, "node", c.Node, "runs", n)
	}
	return nil
}

// interrupt ends every run of thread that has no end in the log, and the
// claimed run (the one the dead owner held the thread for) if it has
// neither start nor end: it died before committing anything of its own,
// though its clients may have been sent some of it ahead of the commit.
// It says how many runs it ended. A message a run was streaming is
// completed with the text it had streamed, marked incomplete, so that the
// history shows it.
func (m *Manager) interrupt(ctx context.Context, thread, claimed string) (int, error) {
	hist, err := m.cfg.Log.History(ctx, thread)
	if err != nil {
		return 0, fmt.Errorf("read history: %w", err)
	}
	open := map[string]int64{} // run -> seq of its run.started
	seen := map[string]bool{}  // runs started or ended
	var order []string
	for _, e := range hist {
		switch e.Payload.(type) {
		case event.RunStarted:
			open[e.Run] = e.Seq
			seen[e.Run] = true
			order = append(order, e.Run)
		case event.RunCompleted, event.RunFailed, event.RunCancelled:
			delete(open, e.Run)
			seen[e.Run] = true
		}
	}
	var ends []event.Event
	if claimed != "" && !seen[claimed] {
		ends = append(ends, event.New(thread, claimed, event.RunFailed{Code: event.CodeInterrupted,
			Message: "The server stopped while this run was going on."}))
	}
	for _, run := range order {
		from, ok := open[run]
		if !ok {
			continue
		}
		partial, err := m.partialMessages(ctx, thread, run, from)
		if err != nil {
			return 0, err
		}
		ends = append(ends, partial...)
		ends = append(ends, event.New(thread, run, event.RunFailed{Code: event.CodeInterrupted,
			Message: "The server stopped while this run was going on."}))
	}
	if len(ends) == 0 {
		return 0, nil
	}
	_, err = m.cfg.Log.Append(ctx, thread, ends...)
	return len(ends), err
}

// partialMessages returns message.completed events, marked incomplete, for
// the messages run was streaming when it stopped: its events are read from
// its run.started (seq from) on.
func (m *Manager) partialMessages(ctx context.Context, thread, run string, from int64) ([]event.Event, error) {
	type msg struct {
		started event.MessageStarted
		text    strings.Builder
	}
	var (
		msgs  = map[string]*msg{}
		order []string
	)
	for after := from - 1; ; {
		page, err := m.cfg.Log.Read(ctx, thread, after, 512)
		if err != nil {
			return nil, fmt.Errorf("read run %s: %w", run, err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			after = e.Seq
			if e.Run != run {
				continue
			}
			switch p := e.Payload.(type) {
			case event.MessageStarted:
				msgs[p.MessageID] = &msg{started: p}
				order = append(order, p.MessageID)
			case event.MessageDelta:
				if mm := msgs[p.MessageID]; mm != nil {
					mm.text.WriteString(p.Text)
				}
			case event.MessageCompleted:
				delete(msgs, p.MessageID)
			}
		}
	}
	var out []event.Event
	for _, id := range order {
		mm := msgs[id]
		if mm == nil {
			continue
		}
		out = append(out, event.New(thread, run, event.MessageCompleted{
			MessageID: id, Role: mm.started.Role, Agent: mm.started.Agent, Purpose: mm.started.Purpose,
			Text: mm.text.String(), Incomplete: true,
		}))
	}
	return out, nil
}
