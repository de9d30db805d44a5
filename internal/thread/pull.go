package thread

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/metrics"
)

// errUnsubscribed is the cancel cause of Pull.Stop and Pull.Close; a pull
// ended by them reports no error of its own.
var errUnsubscribed = errors.New("thread: unsubscribed")

// errPullEnded is what Next returns once a Pull has ended without an error
// of its own (Stop, Close).
var errPullEnded = errors.New("thread: the pull has ended")

// Pull is the one subscription engine: one consumer's place in a thread,
// which the consumer drives on its own goroutine. It replays the log after
// the seq it starts after, then hands on live events from the bus, with no
// gap and no duplicate at the seam; a live event ahead of the next one it
// expects (a concurrent append published first, a bus that lost
// something) makes it read the missing ones from the log. When its bus
// subscription ends because the consumer fell behind (bus.ErrSlowConsumer)
// or events may have been missed (bus.ErrMissed), it subscribes again and
// reads what it missed from the log: a slow consumer costs only itself,
// and never misses an event.
//
// All of that work runs inside Next, on the consumer's goroutine; notify
// tells the consumer when to call it. No goroutine of the pull's stands
// between the bus and the consumer, so an idle pull costs none, and an
// event reaches its consumer with one wake-up. Every other way of
// consuming a thread (Watch, Follower, Subscription) is a view over a
// Pull.
//
// Next and Close are for one goroutine; Stop may be called from any.
type Pull struct {
	svc      *Service
	thread   string
	head     int64 // the thread's last seq when the pull began
	previews bool  // the consumer takes previews (bus.WantPreviews)
	notify   func()
	admit    func(context.Context) error // nil once admitted

	ctx    context.Context // cancelled by Stop, Close and the service's Close
	cancel context.CancelCauseFunc

	live      bus.Subscription
	delivered int64         // the seq of the last committed event handed on
	target    int64         // the log's seq to catch up to before going live
	page      []event.Event // read from the log, not yet handed on
	ended     bool
	err       error // why it ended; nil when Stop or Close ended it

	endOnce sync.Once
	counted func() // counts the pull's end in the service's metrics
}

// PullOptions are what a Pull needs besides its thread and position.
type PullOptions struct {
	// Notify is called, and must not block (a send to a channel with a
	// buffer of one, or none when it is full), whenever Next may have
	// something new: an event, or the pull's end. Required.
	Notify func()
	// Admit, when set, is called once before the first event is handed
	// on, on the consumer's goroutine; its error ends the pull instead.
	// Access checks that can only be made once the thread has events
	// (whose is a thread nobody owned when it was subscribed to) go here.
	Admit func(context.Context) error
}

// Pull starts a pull of thread after seq after (FromEnd: from the
// thread's end). ctx bounds only the call; the pull takes previews when
// ctx carries bus.WantPreviews. Close it when done; the service's Close
// waits for every pull to have ended, which a pull does on its consumer's
// next call of Next after it is notified.
func (s *Service) Pull(ctx context.Context, thread string, after int64, opts PullOptions) (*Pull, error) {
	if opts.Notify == nil {
		return nil, errors.New("thread: pull with a nil notify")
	}
	if after < 0 && after != FromEnd {
		return nil, fmt.Errorf("thread: subscribe to %q after seq %d: seqs start at 1", thread, after)
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	p := &Pull{svc: s, thread: thread, previews: bus.PreviewsWanted(ctx), notify: opts.Notify, admit: opts.Admit}
	// Live first: every event committed from here on is published to
	// live, so reading the log afterwards leaves no gap between the two.
	live, last, err := p.subscribe(ctx)
	if err != nil {
		return nil, fmt.Errorf("thread: subscribe to %q: %w", thread, err)
	}
	if after == FromEnd {
		after = last
	}
	if after > last {
		live.Close()
		return nil, &AfterEndError{Thread: thread, After: after, Last: last}
	}
	p.head, p.delivered, p.target = last, after, last
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	if !s.add(p) {
		live.Close()
		p.cancel(ErrClosed)
		return nil, ErrClosed
	}
	p.live = live
	live.Notify(p.notify)
	context.AfterFunc(p.ctx, p.notify)
	return p, nil
}

// subscribe subscribes to the thread's live events, then reads its last
// seq: the log holds every event up to it, the subscription every one
// after.
func (p *Pull) subscribe(ctx context.Context) (bus.Subscription, int64, error) {
	if p.previews {
		ctx = bus.WantPreviews(ctx)
	}
	live, err := p.svc.bus.Subscribe(ctx, p.thread, p.svc.opts.QueueSize)
	if err != nil {
		return nil, 0, err
	}
	last, err := p.svc.log.LastSeq(ctx, p.thread)
	if err != nil {
		live.Close()
		return nil, 0, err
	}
	return live, last, nil
}

// Thread is the thread pulled.
func (p *Pull) Thread() string { return p.thread }

// Head is the thread's last seq when the pull began: the events up to it
// come from the log, later ones live.
func (p *Pull) Head() int64 { return p.head }

// Last is the seq of the last committed event handed on, or the seq the
// pull started after: the seq to resume after.
func (p *Pull) Last() int64 { return p.delivered }

// Next returns the next event in seq order, with previews
// (event.Event.Preview) in their place among them when the pull takes
// them; ok is false when nothing waits (notify says when to look again).
// It may read the store, on the caller's goroutine. Once the pull has
// ended it returns why: ErrClosed after the service's Close, the Admit
// function's error, a store or bus error, or one that only says so after
// Stop or Close. Events are shared with other subscribers: treat them as
// read-only.
func (p *Pull) Next() (e event.Event, ok bool, err error) {
	for {
		if p.ended {
			if p.err != nil {
				return event.Event{}, false, p.err
			}
			return event.Event{}, false, errPullEnded
		}
		if p.ctx.Err() != nil {
			p.end(context.Cause(p.ctx))
			continue
		}
		e, ok, err := p.step()
		if err != nil {
			if p.ctx.Err() == nil && p.resubscribe(err) {
				continue
			}
			p.fail(err)
			continue
		}
		if !ok {
			return event.Event{}, false, nil
		}
		if p.admit != nil {
			admit := p.admit
			p.admit = nil
			if err := admit(p.ctx); err != nil {
				p.end(err)
				continue
			}
		}
		return e, true, nil
	}
}

// step takes one event: from the log while the pull is behind its
// target (the replay, or a gap a live event showed), else from the bus.
// ok is false when there is nothing to hand on now.
func (p *Pull) step() (e event.Event, ok bool, err error) {
	for {
		if len(p.page) > 0 {
			e, p.page = p.page[0], p.page[1:]
			if e.Seq != p.delivered+1 {
				return event.Event{}, false, fmt.Errorf("log read after seq %d returned seq %d", p.delivered, e.Seq)
			}
			p.delivered = e.Seq
			return e, true, nil
		}
		if p.delivered < p.target {
			page, err := p.svc.log.Read(p.ctx, p.thread, p.delivered, p.svc.opts.PageSize)
			if err != nil {
				return event.Event{}, false, fmt.Errorf("read log after seq %d: %w", p.delivered, err)
			}
			if len(page) == 0 {
				return event.Event{}, false, fmt.Errorf("log ends at seq %d, before committed seq %d", p.delivered, p.target)
			}
			p.page = page
			continue
		}
		e, ok, err := p.live.TryNext()
		if err != nil || !ok {
			return event.Event{}, false, err
		}
		switch {
		case e.Preview != 0:
			// A preview goes out only in its place: after the event it
			// follows, which a pull still catching up has not handed on.
			if p.previews && e.Preview <= p.delivered {
				return e, true, nil
			}
		case e.Seq <= p.delivered:
			// Committed before the replay read it, or handed on by an
			// earlier gap fill.
		case e.Seq == p.delivered+1 && e.Payload != nil:
			p.delivered = e.Seq
			p.svc.opts.Metrics.Delivered(time.Since(e.Time))
			return e, true, nil
		default:
			// Ahead (a concurrent append published first, or the bus lost
			// something), or an event the bus carried without its
			// payload: the log has every seq up to it.
			p.target = max(p.target, e.Seq)
		}
	}
}

// resubscribe follows the thread anew after a bus subscription that ended
// behind (ErrSlowConsumer, bus.ErrMissed), from where the pull stopped; it
// reports whether it did.
func (p *Pull) resubscribe(why error) bool {
	switch {
	case errors.Is(why, bus.ErrSlowConsumer):
		p.svc.opts.Metrics.Resubscribed(metrics.ResubscribeSlow)
	case errors.Is(why, bus.ErrMissed):
		p.svc.opts.Metrics.Resubscribed(metrics.ResubscribeMissed)
	default:
		return false
	}
	p.live.Close()
	live, last, err := p.subscribe(p.ctx)
	if err != nil {
		p.live = closedFeed{fmt.Errorf("resubscribe after seq %d: %w", p.delivered, err)}
		return true // the next step ends the pull with it
	}
	p.live, p.target = live, max(p.target, last)
	live.Notify(p.notify)
	p.svc.logger.Info("thread: a pull resubscribed after its feed ended", "thread", p.thread, "after", p.delivered, "why", why)
	return true
}

// Stop ends the pull from any goroutine: its consumer is notified, and its
// next Next ends it. It is idempotent.
func (p *Pull) Stop() { p.cancel(errUnsubscribed) }

// Close ends the pull at once, on its consumer's goroutine. It is
// idempotent.
func (p *Pull) Close() {
	p.cancel(errUnsubscribed)
	p.page = nil
	p.end(errUnsubscribed)
}

// fail ends the pull for err, a store or bus error, and logs it.
func (p *Pull) fail(err error) {
	err = fmt.Errorf("thread: pull of %q: %w", p.thread, err)
	p.svc.logger.Warn("thread: a pull failed", "thread", p.thread, "after", p.delivered, "err", err)
	p.end(err)
}

// end records why the pull ended (errUnsubscribed: it was stopped, and
// reports no error) and lets it go: its bus subscription is closed and
// the service no longer waits for it.
func (p *Pull) end(err error) {
	p.endOnce.Do(func() {
		p.ended = true
		if errors.Is(err, errUnsubscribed) {
			err = nil
		}
		p.err = err
		p.cancel(errUnsubscribed)
		p.live.Close()
		p.svc.remove(p)
	})
}

// closedFeed stands in for a feed that could not be made: it ends the
// pull with err.
type closedFeed struct{ err error }

func (c closedFeed) Next(context.Context) (event.Event, error) { return event.Event{}, c.err }
func (c closedFeed) TryNext() (event.Event, bool, error)       { return event.Event{}, false, c.err }
func (closedFeed) Notify(func())                               {}
func (closedFeed) Close()                                      {}
