package runs

import (
	"context"

	"github.com/agentwire/agentwire/internal/event"
)

// journal is a thread's Log as one run sees it; a run started ahead of
// its commit sees it through that commit's gate.
type journal struct {
	log    Log
	thread string
	gate   *ahead // nil: the run's user message was committed before it started
}

// Append implements agent.Journal. A run started ahead of its commit
// appends once the commit is in; when the run was undone, what it appends
// is dropped (the run's context says why).
func (j journal) Append(ctx context.Context, events ...event.Event) ([]event.Event, error) {
	if j.gate != nil && !j.gate.wait() {
		return nil, nil
	}
	return j.log.Append(ctx, j.thread, events...)
}

// Preview implements agent.Journal: a run started ahead of its commit
// holds its previews until the commit is in.
func (j journal) Preview(e event.Event) {
	if j.gate != nil && j.gate.hold(e) {
		return
	}
	j.log.Preview(j.thread, e)
}

// Previews implements agent.Journal.
func (j journal) Previews() bool { return j.log.Previews() }

// WaitsForCommits implements agent.Journal.
func (j journal) WaitsForCommits() bool { return j.log.WaitsForCommits(j.thread) }

// History implements agent.Journal: a run started ahead of its commit
// reads the history its gate gives it.
func (j journal) History(ctx context.Context) ([]event.Event, error) {
	if j.gate != nil {
		return j.gate.history(ctx, j.log)
	}
	return j.log.History(ctx, j.thread)
}
