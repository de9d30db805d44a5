// Package protocol holds what every protocol adapter needs from agentwire's
// core, and the pieces the adapters share. The adapters (agentchat/,
// threads/, agentloop/, ag2/ and loom/) are siblings: each decodes its
// inbound messages with its generated package, maps them onto the few
// commands of Core, follows the thread's event log with one of the views
// of Core.Pull (Follow, WatchThread, or the Pull itself) and projects it
// onto its wire format with a Projector, and reports failures as an *Error
// that it maps to its own error frame or status. Each registers itself
// with a Registration; the server serves what its registry lists, and
// builds each adapter from one Env: the Core, and what the server set up
// once (the model and its context window, the working folder and the
// tools, the protocols' settings), so that no adapter reads the
// configuration or builds these itself.
//
// The adapter kit: a drain.Group is every adapter's Shutdown (refuse new
// streams, end the running ones, wait for them until the context ends);
// a Session is the skeleton of a WebSocket adapter's socket (a reader on
// the socket's goroutine, the socket's follow beside it, or a watch that
// holds no goroutine while idle, the one writer of wsconn.Conn, and
// wsconn's close codes); SharedFrames is what the streams of one thread
// share, so that a frame that is the same on all of them is encoded once;
// wiretest holds the wire checks every WebSocket protocol's tests share.
package protocol

import (
	"context"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/thread"
)

// FromEnd, as the seq to subscribe after, subscribes from the thread's
// end: only events committed after the subscription began are delivered.
const FromEnd int64 = -1

// Core is the thread and run service as the adapters see it. Every
// method honours its context (cancellation, and the principal it carries;
// see internal/identity). Errors are *Error values whose Code the adapter
// maps to its own frame. Every capability an adapter uses is declared
// here: a Core implements all of them, so that no wrapper can switch a
// behaviour off by hiding a method.
type Core interface {
	// LastSeq is the thread's last committed seq; 0 for an unknown thread.
	LastSeq(ctx context.Context, thread string) (int64, error)
	// Read returns up to limit committed events after seq after.
	Read(ctx context.Context, thread string, after int64, limit int) ([]event.Event, error)
	// History returns the thread's conversation events (no deltas).
	History(ctx context.Context, thread string) ([]event.Event, error)
	// Pull follows the thread after seq after (or from its end, with
	// FromEnd): its events from the log, then live, with no gap and no
	// duplicate, driven by the consumer (thread.Pull); notify says when
	// to call Next. A seq past the thread's end is CodeInvalid. Following
	// a thread does not make it the caller's: a thread nobody owns yet
	// is followed until its first event, which only its owner then
	// gets (CodeNotFound for anyone else). Every other way of following
	// (Follow, WatchThread) is a view over it.
	Pull(ctx context.Context, thread string, after int64, notify func()) (*thread.Pull, error)
	// Own makes the thread the caller's if nobody owns it yet, and
	// refuses it (CodeNotFound) when another principal does.
	Own(ctx context.Context, thread string) error
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
	// Record appends p, an event a person caused outside any run (an AG2
	// artifact patch), to the thread's log and returns it as committed.
	Record(ctx context.Context, thread string, p event.Payload) (event.Event, error)
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
