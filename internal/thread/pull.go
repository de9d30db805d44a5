package thread

import (
	"context"
	"errors"

	"github.com/agentwire/agentwire/internal/event"
)

// errPullEnded is what Next returns once a Pull has ended without an error
// of its own (Close).
var errPullEnded = errors.New("thread: the pull has ended")

// Pull is a subscription its consumer drives on its own goroutine: the
// pump's work (replay, gap fills, resubscribing after falling behind) runs
// inside Next, and notify tells the consumer when to call it. No goroutine
// of the subscription's stands between the bus and the consumer, so an
// event reaches the consumer with one wake-up, and a consumer that already
// waits for other things (an SSE stream's heartbeat) waits for one channel
// in all.
//
// A Pull is for one goroutine: Next and Close are not safe for concurrent
// use.
type Pull struct {
	w       *lazyWatch
	pending []event.Event // what the last step handed on, in order; taken from next
	next    int
	ended   bool
}

// Pull is Subscribe for a consumer that takes events by calling Next. It
// calls notify, which must not block (a send to a channel with a buffer of
// one, or none when it is full), whenever Next may have something new: an
// event, or the subscription's end (Close, the service's Close). The
// consumer then calls Next until it reports nothing. A pull goes on after
// falling behind and after a bus that may have missed events, as a watch
// does. Close it when done; the service's Close waits for that.
func (s *Service) Pull(ctx context.Context, thread string, after int64, notify func()) (*Pull, error) {
	if notify == nil {
		return nil, errors.New("thread: pull with a nil notify")
	}
	pl := &Pull{}
	sub, live, last, err := s.open(ctx, thread, after, func(e event.Event) error {
		pl.pending = append(pl.pending, e)
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	pl.w = newLazy(sub, live, last)
	pl.w.wake = notify
	pl.w.start()
	return pl, nil
}

// Head is the thread's last seq when the pull began: the events up to it
// come from the log, later ones live.
func (p *Pull) Head() int64 { return p.w.sub.head }

// Next returns the next event, in seq order, with previews in their place
// when the pull was made with bus.WantPreviews, as Subscription.Events
// does; ok is false when nothing waits (notify says when to look again).
// It may read the store, on the caller's goroutine. Once the pull has
// ended it returns why (ErrClosed after the service's Close, a store or
// bus error), and after Close an error as well. Events are shared with
// other subscribers: treat them as read-only.
func (p *Pull) Next() (e event.Event, ok bool, err error) {
	for {
		if p.next < len(p.pending) {
			e = p.pending[p.next]
			p.pending[p.next] = event.Event{}
			p.next++
			return e, true, nil
		}
		p.pending, p.next = p.pending[:0], 0
		if p.ended {
			if err := p.w.sub.Err(); err != nil {
				return event.Event{}, false, err
			}
			return event.Event{}, false, errPullEnded
		}
		err := p.w.ctx.Err()
		if err == nil {
			var more bool
			if more, err = p.w.step(); err == nil {
				if !more {
					return event.Event{}, false, nil
				}
				continue
			}
			if p.w.resubscribe(err) {
				continue
			}
		}
		// What was handed on before the end still goes out; the end
		// comes after it.
		p.end(err)
	}
}

// Close ends the pull. It is idempotent.
func (p *Pull) Close() {
	p.w.sub.cancel(errUnsubscribed)
	p.pending, p.next = nil, 0
	p.end(p.w.ctx.Err())
}

func (p *Pull) end(err error) {
	if !p.ended {
		p.ended = true
		p.w.end(err)
	}
}
