// Package bus carries what must travel between the parts of agentwire that
// serve one thread: committed events, fanned out live to the thread's
// subscribers, and commands (cancel, approve, input, UI results), routed to
// whoever owns the thread's run.
//
// The bus is not a log. It delivers what is published while a subscription
// exists and nothing else; the thread service pairs it with the store to give
// clients replay, gap filling and resume. That keeps Bus small enough for a
// network transport: local/ is the in-process bus of a single server, and a
// NATS bus carries the same interface between the nodes of a cluster.
// bustest/ holds the behavioural suite every implementation must pass.
package bus

import (
	"context"
	"errors"

	"github.com/agentwire/agentwire/internal/event"
)

// Errors of every Bus.
var (
	// ErrClosed is returned by every method after Close, and ends the
	// subscriptions that were open when the bus closed. A subscription's
	// Next also returns it after the subscription's own Close.
	ErrClosed = errors.New("bus: closed")
	// ErrSlowConsumer ends a subscription whose queue was full when an
	// event arrived for it. The bus drops the subscriber rather than wait
	// for it or skip events; the subscriber resumes from its last seq.
	ErrSlowConsumer = errors.New("bus: slow consumer")
	// ErrNoHandler is returned by Send when no one handles the thread's
	// commands: the thread has no run, or its owner has gone.
	ErrNoHandler = errors.New("bus: no command handler for the thread")
	// ErrHandlerExists is returned by HandleCommands when the thread already
	// has a handler: a thread has one owner.
	ErrHandlerExists = errors.New("bus: the thread already has a command handler")
	// ErrMissed ends a subscription that may have missed events (its
	// transport lost them, as across a network outage); like a slow
	// consumer, the subscriber resumes from its last seq.
	ErrMissed = errors.New("bus: events may have been missed")
)

// Bus delivers a thread's committed events to its live subscribers and its
// commands to its owner.
type Bus interface {
	// Publish delivers events, which must already be committed to the
	// thread's log and be in seq order, to the thread's current
	// subscribers. It never waits for a subscriber: one whose queue is full
	// is ended with ErrSlowConsumer. Events of concurrent Publish calls may
	// reach subscribers in either order; subscribers fill gaps from the log.
	Publish(ctx context.Context, thread string, events []event.Event) error
	// Subscribe returns a subscription to the thread's events. Once it
	// returns, the subscription receives every event published after that.
	// queue bounds the events waiting for the subscriber; it must be
	// positive.
	Subscribe(ctx context.Context, thread string, queue int) (Subscription, error)
	// Send delivers cmd to the thread's command handler and returns the
	// handler's error, or ErrNoHandler when the thread has none.
	Send(ctx context.Context, thread string, cmd event.Command) error
	// HandleCommands makes h the thread's command handler until stop is
	// called. stop is idempotent; once it returns, h is neither running nor
	// called again. stop must not be called from h.
	HandleCommands(ctx context.Context, thread string, h Handler) (stop func(), err error)

	// Previews reports whether the bus carries previews (event.Event.Preview):
	// deltas sent before they are committed to the thread's current
	// subscribers that asked for them (WantPreviews). A bus that cannot
	// carry them cheaply (one that crosses the network) does not; the
	// committed delta brings the same text later.
	Previews() bool
	// Preview offers e to the thread's subscribers that take previews. A
	// preview is offered, never owed: a subscriber whose queue is full
	// misses it (and is not ended for it). On a bus that carries no
	// previews it does nothing.
	Preview(thread string, e event.Event)
	// WaitsForCommits reports whether thread has a subscriber that sees
	// each delta only once it is committed: one that takes no previews,
	// or any, on a bus that carries none.
	WaitsForCommits(thread string) bool

	// Close ends every subscription with ErrClosed and stops every handler.
	// Calls in flight finish first.
	Close() error
}

// Subscription is one subscriber's view of a thread's published events.
type Subscription interface {
	// Next returns the next published event, in publish order, waiting
	// until one comes or ctx is done. Once the subscription has ended it
	// returns why: ErrSlowConsumer, ErrMissed, ErrClosed (the bus closed, or
	// Close was called), or a transport's error. Events are shared between
	// subscribers: treat them as read-only. An event a transport could not
	// carry whole arrives with its Thread and Seq but no Payload: the
	// subscriber reads it from the log. Next is for one goroutine at a
	// time.
	Next(ctx context.Context) (event.Event, error)
	// TryNext is Next without waiting: ok is false when no event waits.
	// With Notify it lets a consumer hold no goroutine while nothing
	// comes.
	TryNext() (e event.Event, ok bool, err error)
	// Notify makes fn be called whenever an event arrives or the
	// subscription ends, on the sender's goroutine and with the
	// subscription locked: fn must return at once and must not call the
	// subscription. Set it before reading, and read with TryNext from
	// then on: Next no longer learns of new events by itself.
	Notify(fn func())
	// Close ends the subscription. It is idempotent.
	Close()
}

// Handler handles a thread's commands. It runs on the sender's behalf, while
// Send waits for it, so it should hand the command on (to the run's inbox)
// rather than do the work itself. Its error is the sender's answer.
// Transports that cross processes carry the error's text, not its identity;
// only the bus's own errors survive errors.Is everywhere.
type Handler func(ctx context.Context, cmd event.Command) error

type previewsKey struct{}

// WantPreviews marks ctx, given to a subscribe call (Bus.Subscribe, or the
// thread service's), as coming from a consumer that handles previews;
// subscriptions made without it never deliver one.
func WantPreviews(ctx context.Context) context.Context {
	return context.WithValue(ctx, previewsKey{}, true)
}

// PreviewsWanted reports whether ctx was marked by WantPreviews.
func PreviewsWanted(ctx context.Context) bool {
	v, _ := ctx.Value(previewsKey{}).(bool)
	return v
}
