package thread

import (
	"context"
	"errors"
	"sync"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
)

// A watch (Service.Watch) runs its pump only while there is something to
// do: replaying the log, delivering what the feed holds,
// or ending. In between no goroutine waits for it; the feed's notification
// starts the next turn. An idle follower of a thread (a chat socket
// between replies) then costs no goroutine at all.
//
// At most one turn runs at a time (running); a notification during a turn
// makes it look again before it stops (again). The subscription counts in
// the service's WaitGroup from its start to its end, not per turn, and its
// last turn ends it.
type lazyWatch struct {
	sub  *Subscription
	ctx  context.Context
	p    pump
	live bus.Subscription
	last int64 // the log's last seq to replay before going live; caught up once delivered
	// wake is called when there may be something to do: kick for a watch,
	// the consumer's notification for a Pull.
	wake func()

	mu       sync.Mutex
	running  bool
	again    bool
	finished bool
}

// startLazy starts s's pump as a lazyWatch over live.
func (s *Subscription) startLazy(live bus.Subscription, last int64) {
	w := newLazy(s, live, last)
	w.wake = w.kick
	w.start()
	w.kick()
}

// newLazy is s's pump over live, to replay the log up to last first; the
// caller sets its wake and starts it.
func newLazy(s *Subscription, live bus.Subscription, last int64) *lazyWatch {
	return &lazyWatch{sub: s, ctx: s.ctx, p: pump{sub: s, ctx: s.ctx, delivered: s.Last()}, live: live, last: last}
}

// start has the feed, and the end of the subscription's context (Stop,
// Close, the service's Close), call wake.
func (w *lazyWatch) start() {
	w.live.Notify(w.wake)
	context.AfterFunc(w.ctx, w.wake)
}

// kick starts a turn, or makes the running one look again.
func (w *lazyWatch) kick() {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.finished:
	case w.running:
		w.again = true
	default:
		w.running = true
		go w.turn()
	}
}

// idle reports whether the turn may stop: nothing came since it looked.
func (w *lazyWatch) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.again {
		w.again = false
		return false
	}
	w.running = false
	return true
}

// turn delivers what there is to deliver, then stops; or ends the watch.
func (w *lazyWatch) turn() {
	for {
		err := w.ctx.Err()
		if err == nil {
			var more bool
			more, err = w.step()
			if err == nil {
				if !more && w.idle() {
					return
				}
				continue
			}
			if w.resubscribe(err) {
				continue
			}
		}
		w.end(err)
		return
	}
}

// step delivers one page of the log while the watch is behind w.last (the
// replay, or a gap a live event showed), else takes one event from the
// feed; more is false when the feed had none.
func (w *lazyWatch) step() (more bool, err error) {
	if w.p.delivered < w.last {
		return true, w.p.page(w.last)
	}
	e, ok, err := w.live.TryNext()
	if err != nil || !ok {
		return false, err
	}
	gap, err := w.p.take(e)
	w.last = max(w.last, gap)
	return true, err
}

// resubscribe follows the thread anew after a feed that ended behind
// (ErrSlowConsumer, bus.ErrMissed), from where the watch stopped, as run
// does for a Watch; it reports whether it did.
func (w *lazyWatch) resubscribe(why error) bool {
	s := w.sub
	if w.ctx.Err() != nil || !(errors.Is(why, bus.ErrSlowConsumer) || errors.Is(why, bus.ErrMissed)) {
		return false
	}
	w.live.Close()
	sctx := w.ctx
	if s.previews {
		sctx = bus.WantPreviews(w.ctx)
	}
	live, err := s.svc.bus.Subscribe(sctx, s.thread, s.svc.opts.QueueSize)
	if err != nil {
		w.live = closedFeed{err}
		return true // the next step ends the watch with err
	}
	last, err := s.svc.log.LastSeq(w.ctx, s.thread)
	if err != nil {
		live.Close()
		w.live = closedFeed{err}
		return true
	}
	w.live, w.last = live, last
	live.Notify(w.wake)
	s.svc.logger.Info("thread: a watch resubscribed after its feed ended", "thread", s.thread, "after", w.p.delivered, "why", why)
	return true
}

// end ends the watch for err (nil: stopped), as run's deferred calls do.
func (w *lazyWatch) end(err error) {
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
	s := w.sub
	s.finish(w.ctx, err)
	w.live.Close()
	close(s.events)
	s.svc.forget(s)
	s.cancel(errUnsubscribed)
	if s.end != nil {
		s.end(s.Err())
	}
	close(s.done)
	s.svc.wg.Done()
}

// closedFeed stands in for a feed that could not be made: it ends the
// watch with err.
type closedFeed struct{ err error }

func (c closedFeed) Next(context.Context) (event.Event, error) { return event.Event{}, c.err }
func (c closedFeed) TryNext() (event.Event, bool, error)       { return event.Event{}, false, c.err }
func (closedFeed) Notify(func())                               {}
func (closedFeed) Close()                                      {}
