// Package protocol holds what every protocol adapter needs from agentwire's
// core, and the pieces the adapters share. The adapters (agentchat/,
// threads/, and the ones to come) are siblings: each decodes its inbound
// messages with its generated package, maps them onto the few commands of
// Core, follows the thread's event log with a Follower and projects it onto
// its wire format with a per-connection Projector, and reports failures as
// an *Error that it maps to its own error frame or status. Each registers
// itself with a Registration; the server serves what its registry lists.
package protocol

import (
	"context"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/runs"
)

// FromEnd, as the seq to subscribe after, subscribes from the thread's
// end: only events committed after the subscription began are delivered.
const FromEnd int64 = -1

// Core is the thread and run service as the adapters see it. Every method
// honours its context (cancellation, and the principal it carries; see
// internal/identity). Errors are *Error values whose Code the adapter maps
// to its own frame.
type Core interface {
	// LastSeq is the thread's last committed seq; 0 for an unknown thread.
	LastSeq(ctx context.Context, thread string) (int64, error)
	// Read returns up to limit committed events after seq after.
	Read(ctx context.Context, thread string, after int64, limit int) ([]event.Event, error)
	// History returns the thread's conversation events (no deltas).
	History(ctx context.Context, thread string) ([]event.Event, error)
	// Subscribe replays the thread's events after seq after (or none,
	// with FromEnd), then continues live, with no gap and no duplicate.
	// A seq past the thread's end is CodeInvalid.
	Subscribe(ctx context.Context, thread string, after int64) (Feed, error)
	// Post gives the thread a user message, starting or queueing a run.
	Post(ctx context.Context, thread string, in runs.Input) (runs.Posted, error)
	// Resolve answers a pending approval, input or UI request
	// (cmd.Answers); CodeUnknownRequest when nothing waits for it.
	Resolve(ctx context.Context, thread string, cmd event.Command) error
	// Cancel cancels the thread's active run and drops its queued input;
	// CodeNotFound when it has none.
	Cancel(ctx context.Context, thread string) error
	// Active is the thread's active run id, or "".
	Active(ctx context.Context, thread string) (string, error)
}

// Feed is a subscription to one thread.
type Feed interface {
	// Events delivers committed events in seq order; it is closed when the
	// feed ends.
	Events() <-chan event.Event
	// Err says why the feed ended: nil after Close, else the cause (a slow
	// consumer's feed ends with bus.ErrSlowConsumer; Follower resumes it).
	Err() error
	// Head is the thread's last seq when the subscription began: replayed
	// events run up to it, live ones follow.
	Head() int64
	// Last is the seq of the last event the consumer received from Events,
	// or the seq the feed started after; exact once Events is closed (it may
	// lag by an event before).
	Last() int64
	// Close ends the feed and waits until Events is closed.
	Close()
}

// A Projector turns a thread's canonical events into one connection's
// frames (F: a wire message or an encoded frame). It holds whatever that
// connection's projection must remember between events (Loom's event_id
// and node_id, AG2's replay flag, AgentLoop's item grouping), so there is
// one per connection (or per group of connections that share the same
// frames) and one goroutine uses it. Most events project to nothing.
type Projector[F any] interface {
	Project(e event.Event) []F
}

// Recorder is implemented by a Core that can record an event a person
// caused outside any run (an AG2 artifact patch): Record appends p to the
// thread's log, access-checked like the other methods, and returns the
// event as committed.
type Recorder interface {
	Record(ctx context.Context, thread string, p event.Payload) (event.Event, error)
}
