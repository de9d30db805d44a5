// Package store keeps thread event logs. Log is the one interface the thread
// service uses; sqlite/ (the default, embedded) and postgres/ implement it and
// storetest/ holds the behavioural suite both must pass.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/agentwire/agentwire/internal/event"
)

// ErrClosed is returned by every method but Close after Close.
var ErrClosed = errors.New("store: closed")

// Log is a set of append-only, per-thread event logs.
type Log interface {
	// Append adds events to thread atomically, in order, and returns them as
	// committed: Thread set, Seq assigned gapless after the thread's last seq,
	// ID and Time filled in where they were empty, and Time kept in UTC to the
	// microsecond (what Read will return). Either all events are committed
	// or none. It returns only after the events are durable.
	//
	// The caller's events are not modified. An event whose Thread names
	// another thread, or whose Payload is nil, is an error; appending no
	// events commits nothing and returns nothing. If ctx is already done,
	// nothing is committed; if it ends while the append waits to commit,
	// Append returns ctx.Err() and the events may or may not be committed,
	// but never partly.
	Append(ctx context.Context, thread string, events ...event.Event) ([]event.Event, error)
	// Read returns up to limit events of thread with Seq > after, ascending.
	// An unknown thread reads as empty. A limit below 1 is an error.
	Read(ctx context.Context, thread string, after int64, limit int) ([]event.Event, error)
	// LastSeq returns the thread's highest seq; 0 for an unknown thread.
	LastSeq(ctx context.Context, thread string) (int64, error)
	// Threads lists threads ordered by id (byte-wise), starting after the id
	// after ("" for the start), at most limit of them. A limit below 1 is an
	// error.
	Threads(ctx context.Context, after string, limit int) ([]ThreadInfo, error)
	// History returns the thread's conversation projection: the events that
	// make up what was said and done (see HistoryTypes), ascending, without
	// streaming deltas.
	History(ctx context.Context, thread string) ([]event.Event, error)
	// Close releases the store; appends in flight finish or fail first.
	// Closing again does nothing and returns nil.
	Close() error
}

// ThreadInfo summarises one thread.
type ThreadInfo struct {
	ID      string
	LastSeq int64
	Created time.Time
	Updated time.Time
}

// HistoryTypes are the event types of the conversation-history projection.
var HistoryTypes = []event.Type{
	event.TypeMessageUser,
	event.TypeMessageCompleted,
	event.TypeReasoningCompleted,
	event.TypeToolCallCompleted,
	event.TypeToolExecCompleted,
	event.TypeToolApprovalRequested,
	event.TypeToolApprovalResolved,
	event.TypeInputRequested,
	event.TypeInputProvided,
	event.TypeInputTimedOut,
	event.TypeUIRequested,
	event.TypeUIResolved,
	event.TypeContextCompacted,
	event.TypeRunStarted,
	event.TypeRunCompleted,
	event.TypeRunFailed,
	event.TypeRunCancelled,
}
