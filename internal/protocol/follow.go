package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
)

// ErrStop, returned by a Follower.Run callback, ends the follow without an
// error.
var ErrStop = errors.New("protocol: stop following")

// A Follower is one consumer's place in a thread: the one follow loop every
// adapter uses. It replays the thread's log after a seq, then follows live
// events; when its subscription ends because the consumer fell behind
// (bus.ErrSlowConsumer) it subscribes again after the last event the
// consumer took, so the consumer sees every event once, in order, however
// slow it is. It ends when the caller says so: Close, a done context, or
// ErrStop from Run's callback.
//
// A Follower is for one goroutine. Consumers with nothing else to wait for
// use Run; those that also wait for timers or shutdown (an SSE stream's
// heartbeat) receive from Events in their own select and call Resume when
// it is closed.
type Follower struct {
	core   Core
	thread string
	head   int64
	feed   Feed
	log    *slog.Logger
	// previews: the follow was started with bus.WantPreviews, and so is
	// every subscription Resume makes.
	previews bool
}

// Follow starts following thread after seq after (or from its end, with
// FromEnd). Subscribing is the only store I/O, and it happens here, on the
// caller's goroutine.
func Follow(ctx context.Context, core Core, thread string, after int64, log *slog.Logger) (*Follower, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	feed, err := core.Subscribe(ctx, thread, after)
	if err != nil {
		return nil, err
	}
	return &Follower{core: core, thread: thread, head: feed.Head(), feed: feed, log: log, previews: bus.PreviewsWanted(ctx)}, nil
}

// Thread is the thread followed.
func (f *Follower) Thread() string { return f.thread }

// Head is the thread's last seq when the Follower started: the events up to
// it were replayed from the log, later ones are live.
func (f *Follower) Head() int64 { return f.head }

// Last is the seq of the last event taken from Events.
func (f *Follower) Last() int64 { return f.feed.Last() }

// Events delivers the thread's events. Read it anew for every receive: it
// changes when Resume subscribes again.
func (f *Follower) Events() <-chan event.Event { return f.feed.Events() }

// Resume is what a consumer calls when it finds Events closed. A feed that
// ended because the consumer fell behind, or because the bus may have
// missed events (a network outage), is replaced by a new subscription after
// the last event taken, and Resume returns nil; otherwise it returns why
// the follow cannot go on (ctx's error when ctx is done).
func (f *Follower) Resume(ctx context.Context) error {
	err, last := f.feed.Err(), f.feed.Last()
	f.feed.Close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !errors.Is(err, bus.ErrSlowConsumer) && !errors.Is(err, bus.ErrMissed) {
		if err == nil {
			err = errors.New("the subscription was closed")
		}
		return fmt.Errorf("follow thread %q after seq %d: %w", f.thread, last, err)
	}
	why := err
	if f.previews {
		ctx = bus.WantPreviews(ctx)
	}
	feed, err := f.core.Subscribe(ctx, f.thread, last)
	if err != nil {
		return fmt.Errorf("follow thread %q after seq %d: resubscribe: %w", f.thread, last, err)
	}
	f.feed = feed
	f.log.Info("resubscribed to a thread after its feed ended", "thread", f.thread, "after", last, "why", why)
	return nil
}

// Run calls fn with each event in seq order until ctx is done or fn
// returns ErrStop (Run returns nil), fn returns another error (Run returns
// it), or the follow fails (Run returns why).
func (f *Follower) Run(ctx context.Context, fn func(event.Event) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-f.feed.Events():
			if !ok {
				if err := f.Resume(ctx); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				continue
			}
			if err := fn(e); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
		}
	}
}

// Close ends the follow. It is idempotent.
func (f *Follower) Close() { f.feed.Close() }

// A Watch is a follow whose consumer takes each event in a function call
// (WatchThread).
type Watch interface {
	// Stop ends the watch without waiting for it; the function may call
	// it.
	Stop()
	// Done is closed once the function will not be called again.
	Done() <-chan struct{}
	// Err says why the watch ended: nil after Stop or ErrStop, else the
	// function's error or why following failed.
	Err() error
}

// A Watcher is a Core whose subscriptions can call a function themselves
// (thread.Service.Watch), going on after falling behind as a Follower
// does.
type Watcher interface {
	Watch(ctx context.Context, thread string, after int64, fn func(event.Event) error, end func(error)) (Watch, error)
}

// WatchThread follows thread after seq after (or from its end, with
// FromEnd) and calls fn with each event in seq order, as Follow and Run do,
// until the watch is stopped or fn returns an error (ErrStop: none); then it
// calls end with the watch's Err, on the goroutine that called fn, and
// closes Done. When core is a Watcher, the subscription calls fn, and an
// idle watch costs no goroutine; otherwise WatchThread starts a goroutine
// of its own for Run. Subscribing happens here, on the
// caller's goroutine. fn must not block for long.
func WatchThread(ctx context.Context, core Core, thread string, after int64, log *slog.Logger, fn func(event.Event) error, end func(error)) (Watch, error) {
	if w, ok := core.(Watcher); ok {
		sub, err := w.Watch(ctx, thread, after, fn, func(err error) { end(quiet(err)) })
		if err != nil {
			return nil, err
		}
		return stopQuietly{sub}, nil
	}
	f, err := Follow(ctx, core, thread, after, log)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	fw := &followWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(fw.done)
		fw.err = f.Run(rctx, fn)
		f.Close()
		end(fw.err)
	}()
	return fw, nil
}

// quiet is err, or nil for ErrStop.
func quiet(err error) error {
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// stopQuietly reports a watch ended by ErrStop as ended without an error.
type stopQuietly struct{ Watch }

func (w stopQuietly) Err() error { return quiet(w.Watch.Err()) }

// followWatch is WatchThread's Watch over a Follower and a goroutine.
type followWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's; read after done is closed
}

func (w *followWatch) Stop()                 { w.cancel() }
func (w *followWatch) Done() <-chan struct{} { return w.done }

func (w *followWatch) Err() error {
	select {
	case <-w.done:
		return w.err
	default:
		return nil
	}
}
