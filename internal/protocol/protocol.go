// Package protocol holds what every protocol adapter needs from agentwire's
// core. The adapters (agentchat/, ag2/, threads/, loom/, agentloop/) are
// siblings: each decodes its inbound messages with its generated package,
// maps them onto the few commands of Core, and projects the thread's event
// log onto its wire format.
package protocol

import (
	"context"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/runs"
)

// Core is the thread and run service as the adapters see it.
type Core interface {
	// LastSeq is the thread's last committed seq; 0 for an unknown thread.
	LastSeq(ctx context.Context, thread string) (int64, error)
	// Read returns up to limit committed events after seq after.
	Read(ctx context.Context, thread string, after int64, limit int) ([]event.Event, error)
	// History returns the thread's conversation events (no deltas).
	History(ctx context.Context, thread string) ([]event.Event, error)
	// Subscribe replays the thread's events after seq after, then
	// continues live, with no gap and no duplicate.
	Subscribe(ctx context.Context, thread string, after int64) (Feed, error)
	// Post gives the thread a user message, starting or queueing a run.
	Post(ctx context.Context, thread string, in runs.Input) (runs.Posted, error)
	// Resolve answers a pending approval, input or UI request.
	Resolve(ctx context.Context, thread string, cmd agent.Command) error
	// Cancel cancels the thread's active run.
	Cancel(ctx context.Context, thread string) error
	// Active is the thread's active run id, or "".
	Active(thread string) string
}

// Feed is a subscription to one thread.
type Feed interface {
	// Events delivers committed events in seq order; it is closed when the
	// feed ends.
	Events() <-chan event.Event
	// Err says why the feed ended: nil after Close, else the cause (a slow
	// consumer resumes with a new Subscribe after its last seq).
	Err() error
	Close()
}
