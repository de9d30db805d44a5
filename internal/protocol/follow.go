package protocol

import (
	"context"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/thread"
)

// ErrStop, returned by a Follower's or a Watch's function, ends it without
// an error.
var ErrStop = thread.ErrStop

// A Follower follows a thread for a consumer with a goroutine of its own
// (thread.Follower): Run calls a function with each event, or the consumer
// selects on Ready beside its other channels and takes events with Next.
type Follower = thread.Follower

// A Watch follows a thread by calling a function, on a goroutine that
// runs only while there is something to hand on (thread.Watch).
type Watch = thread.Watch

// opener is the thread.Open of th after seq after through core.
func opener(ctx context.Context, core Core, th string, after int64) thread.Open {
	return func(notify func()) (*thread.Pull, error) { return core.Pull(ctx, th, after, notify) }
}

// Follow starts following th after seq after (or from its end, with
// FromEnd). Subscribing is the only store I/O, and it happens here, on the
// caller's goroutine.
func Follow(ctx context.Context, core Core, th string, after int64) (*Follower, error) {
	return thread.NewFollower(opener(ctx, core, th, after))
}

// WatchThread follows th after seq after (or from its end, with FromEnd)
// and calls fn with each event in seq order, until the watch is stopped or
// fn returns an error (ErrStop: none); then it calls end with the watch's
// Err, on the goroutine that called fn, and closes Done. An idle watch
// costs no goroutine. Subscribing happens here, on the caller's goroutine.
// fn must not block for long.
func WatchThread(ctx context.Context, core Core, th string, after int64, fn func(event.Event) error, end func(error)) (*Watch, error) {
	return thread.NewWatch(opener(ctx, core, th, after), fn, end)
}

// Subscribe follows th after seq after with a channel of its events
// (thread.Subscription): for tests, and consumers that want the events one
// at a time beside other channels.
func Subscribe(ctx context.Context, core Core, th string, after int64) (*thread.Subscription, error) {
	return thread.NewSubscription(opener(ctx, core, th, after))
}
