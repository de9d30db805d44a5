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

// Errors of every store.
var (
	// ErrClosed is returned by every method but Close after Close.
	ErrClosed = errors.New("store: closed")
	// ErrRunClaimed is returned by ClaimRun when another node holds the
	// thread's claim.
	ErrRunClaimed = errors.New("store: another node runs this thread")
)

// Store is what a server keeps in its database: the threads' event logs,
// the claims on their runs, whom each thread belongs to, and what each
// principal's model calls have used.
type Store interface {
	Log
	Runs
	Owners
	Spending
}

// Spending reads what principals have spent on models, from the usage
// events in their threads' logs: the log is the one record of it, so every
// node sharing the store reads the same sums (internal/budget checks
// budgets against them).
type Spending interface {
	// Spent sums the usage events (event.Usage: TotalTokens, Cost) of the
	// threads principal owns whose Time is at or after each of since: one
	// Spend per since, in order. A principal without threads or usage
	// spent nothing.
	Spent(ctx context.Context, principal string, since ...time.Time) ([]Spend, error)
}

// Spend is a sum of usage events.
type Spend struct {
	// Tokens sums their TotalTokens; Cost their Cost, in USD.
	Tokens int64
	Cost   float64
}

// Owners records the principal each thread belongs to: the one whose input
// made it. Nobody else reads or writes it.
type Owners interface {
	// OwnThread makes principal the thread's owner unless it has one, and
	// returns its owner: principal, or the one it already had.
	OwnThread(ctx context.Context, thread, principal string) (owner string, err error)
	// ThreadOwner returns the thread's owner; ok is false for a thread that
	// has none (nobody has written to it).
	ThreadOwner(ctx context.Context, thread string) (owner string, ok bool, err error)
}

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

// Runs records which run of each thread is active, which node owns it and
// until when, and the input waiting for the thread's next runs. These are
// the run ownership records every node can read:
//
//   - A thread has at most one claim, taken before its run's first event is
//     appended and released after its last, so "is a run of this thread
//     going on" is a read of the claim, whichever node asks.
//   - A claim is a lease: its owner renews it while it runs (RenewRuns);
//     a claim whose lease has expired belongs to a node that died, and
//     another node takes it over (TakeOverRun), ends the dead run in the
//     log, and runs the thread's queued input.
//   - Leases are timed by the store's clock (PostgreSQL's now()), never by
//     the nodes', so nodes whose clocks differ agree on what has expired.
//   - Input posted while a run is active waits in the thread's queue in the
//     store, so it survives the node that took it.
type Runs interface {
	// ClaimRun claims c.Thread for run c.Run, owned by node c.Node, for
	// lease. It fails with ErrRunClaimed when the thread has a claim,
	// live or expired.
	ClaimRun(ctx context.Context, c RunClaim, lease time.Duration) error
	// MoveRun moves c.Node's claim on c.Thread from run from to run c.Run
	// (the thread's next queued input starting) and renews it for lease.
	// It fails with ErrRunClaimed when the claim is no longer c.Node's
	// claim on run from.
	MoveRun(ctx context.Context, c RunClaim, from string, lease time.Duration) error
	// RenewRuns renews every claim node holds for lease and returns them.
	RenewRuns(ctx context.Context, node string, lease time.Duration) ([]RunClaim, error)
	// TakeOverRun gives node the claim c, for lease, if c is still the
	// thread's claim (same run and node) and its lease has expired;
	// otherwise it fails with ErrRunClaimed. Of several nodes that try at
	// once, one succeeds.
	TakeOverRun(ctx context.Context, c RunClaim, node string, lease time.Duration) error
	// ReleaseRun removes the claim if it still names c.Run and c.Node;
	// otherwise it does nothing.
	ReleaseRun(ctx context.Context, c RunClaim) error
	// ActiveRun returns the thread's claim; ok is false when it has none.
	ActiveRun(ctx context.Context, thread string) (c RunClaim, ok bool, err error)
	// RunClaims returns every claim, ordered by thread. Expired reports,
	// for each, whether its lease had expired when it was read.
	RunClaims(ctx context.Context) ([]RunClaim, error)

	// EnqueueInput appends in to the thread's queue.
	EnqueueInput(ctx context.Context, thread string, in QueuedInput) error
	// DequeueInput removes and returns the oldest input of the thread's
	// queue; ok is false when the queue is empty.
	DequeueInput(ctx context.Context, thread string) (in QueuedInput, ok bool, err error)
	// DropQueue empties the thread's queue and says how many inputs it
	// held.
	DropQueue(ctx context.Context, thread string) (int, error)
	// QueueLen says how many inputs wait in the thread's queue.
	QueueLen(ctx context.Context, thread string) (int, error)

	// ClaimAndAppend is ClaimRun followed by Log.Append of events to
	// c.Thread, committed together: when the claim fails (ErrRunClaimed
	// among others) nothing is appended. A run then starts after one
	// commit rather than two (SQLite makes both in its group commit;
	// PostgreSQL in one transaction of their own).
	ClaimAndAppend(ctx context.Context, c RunClaim, lease time.Duration, events ...event.Event) ([]event.Event, error)
}

// RunClaim is a node's claim on a thread's active run.
type RunClaim struct {
	Thread string
	Run    string
	Node   string
	// Since is when the claim was taken or last moved; Expires is when its
	// lease ends unless renewed. Both in UTC, by the store's clock.
	Since, Expires time.Time
	// Expired says whether the lease had expired when the claim was read.
	Expired bool
}

// QueuedInput is a user message waiting for its thread's next run. The
// run and message ids are assigned when it is posted.
type QueuedInput struct {
	Run         string
	MessageID   string
	Text        string
	Interactive bool
	Options     event.RunOptions
}

// ThreadInfo summarises one thread.
type ThreadInfo struct {
	ID      string
	LastSeq int64
	// Created is when the thread's first events were appended; Updated when
	// its last ones were (the PostgreSQL store, which writes nothing per
	// thread on later appends, takes the Time of its last event), never
	// before Created.
	Created time.Time
	Updated time.Time
}

// ReadCapacity is the capacity a store gives the slice a Read of up to
// limit events returns: limit, so a full page is never copied as it grows,
// up to 1024 events (100 KB; a larger page grows from there).
func ReadCapacity(limit int) int { return min(limit, 1024) }

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
	// usage is accounting, not conversation, but the context manager
	// counts the conversation's tokens from it (agent.MeasureContext).
	event.TypeUsage,
	event.TypeRunStarted,
	event.TypeRunCompleted,
	event.TypeRunFailed,
	event.TypeRunCancelled,
	// agent.selected says which agent of a group chat (a workflow) spoke
	// the events after it (agent.Transcript of a group run).
	event.TypeAgentSelected,
}
