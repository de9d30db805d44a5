package thread

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
)

// errUnsubscribed is the cancel cause of Subscription.Close; Err reports it
// as nil.
var errUnsubscribed = errors.New("thread: unsubscribed")

// Subscription delivers one thread's committed events to one consumer. Its
// pump reads the log and the bus subscription and hands events on: for
// Subscribe, one goroutine, the only sender on Events; for Watch, a
// goroutine only while there is something to hand on (lazyWatch); for
// Pull, the consumer's own goroutine, inside Pull.Next. The
// bounded queue is the bus subscription's: while the consumer does not take
// an event, the pump waits and live events gather there until the bus ends
// the subscription with ErrSlowConsumer.
type Subscription struct {
	svc    *Service
	thread string
	head   int64        // the thread's last seq when the subscription began
	last   atomic.Int64 // the seq of the last event the consumer took
	events chan event.Event
	fn     func(event.Event) error // a Watch's: called instead of sending on events
	// previews: the consumer takes previews (bus.WantPreviews); without it
	// the pump drops them.
	previews bool
	end      func(error)     // a Watch's: called as the pump returns
	ctx      context.Context // the pump's: cancelled by Stop, Close and the service's Close
	cancel   context.CancelCauseFunc
	done     chan struct{} // closed when the pump has returned

	mu  sync.Mutex
	err error
}

// Events delivers the thread's events in seq order, each exactly once,
// and, to a subscription made with bus.WantPreviews, previews
// (event.Event.Preview) in their place among them. It is closed when the
// subscription ends; Err then says why. Events are shared
// with other subscribers: treat them as read-only.
func (s *Subscription) Events() <-chan event.Event { return s.events }

// Head is the thread's last seq when the subscription began: the events up
// to it come from the log, later ones live.
func (s *Subscription) Head() int64 { return s.head }

// Last is the seq of the last event the consumer received from Events, or
// the seq the subscription started after. While the subscription runs it
// may lag the consumer by an event; once Events is closed it is exact: the
// seq to resume after.
func (s *Subscription) Last() int64 { return s.last.Load() }

// Err says why the subscription ended: ErrSlowConsumer when the consumer
// fell a full queue behind, ErrClosed when the service closed, or a store or
// bus error. It is nil while the subscription runs and after Close.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription and waits until its goroutine has returned
// and Events is closed. It is idempotent and may be called from any
// goroutine, including while another one ranges over Events, but not from
// a Watch's function (use Stop there).
func (s *Subscription) Close() {
	s.cancel(errUnsubscribed)
	<-s.done
}

// Stop ends the subscription without waiting for its goroutine (Done says
// when it has returned). It is idempotent, and a Watch's function may
// call it.
func (s *Subscription) Stop() { s.cancel(errUnsubscribed) }

// Done is closed once the subscription's goroutine has returned: no event
// is delivered after it.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// run is the pump of a subscription read from Events: it replays the log
// up to last, the thread's last seq when live started buffering, then
// forwards live events, filling any gap from the log and dropping what was
// already delivered. (A Watch's pump is a lazyWatch.)
func (s *Subscription) run(live bus.Subscription, last int64) {
	defer close(s.done)
	defer s.cancel(errUnsubscribed) // release the context; Err is already set
	defer s.svc.forget(s)
	defer close(s.events)
	defer live.Close()

	p := pump{sub: s, ctx: s.ctx, delivered: s.Last()}
	s.finish(s.ctx, p.follow(live, last))
}

// follow delivers the log up to last, then live events, until either
// fails.
func (p *pump) follow(live bus.Subscription, last int64) error {
	err := p.catchUp(last)
	for err == nil {
		var e event.Event
		if e, err = live.Next(p.ctx); err != nil {
			break
		}
		var gap int64
		if gap, err = p.take(e); err == nil && gap > 0 {
			err = p.catchUp(gap)
		}
	}
	return err
}

// take hands on e, a live event, in its place: once, after everything
// before it. When e is ahead of what was delivered, take hands on nothing
// and returns gap, e's seq: the log has every event up to it, and the
// caller catches up from there.
func (p *pump) take(e event.Event) (gap int64, err error) {
	switch {
	case e.Preview != 0:
		// A preview goes out only in its place: after the event it
		// follows, which a consumer still catching up has not had.
		if p.sub.previews && e.Preview <= p.delivered {
			return 0, p.hand(e)
		}
	case e.Seq <= p.delivered:
		// Committed before the replay read it, or delivered by an
		// earlier gap fill.
	case e.Seq == p.delivered+1 && e.Payload != nil:
		return 0, p.deliver(e)
	default:
		// Ahead (a concurrent append published first, or the bus lost
		// something), or an event the bus carried without its payload.
		return e.Seq, nil
	}
	return 0, nil
}

// consumerError is a Watch function's error: the consumer's own, which
// ends the watch as it is.
type consumerError struct{ err error }

func (e consumerError) Error() string { return e.err.Error() }

// finish records why the pump stopped.
func (s *Subscription) finish(ctx context.Context, err error) {
	if ce, ok := err.(consumerError); ok {
		s.mu.Lock()
		s.err = ce.err
		s.mu.Unlock()
		return
	}
	if ctx.Err() != nil {
		// Cancelled: by Close (no error) or by the service closing.
		err = context.Cause(ctx)
		if errors.Is(err, errUnsubscribed) {
			err = nil
		}
	} else if !errors.Is(err, bus.ErrSlowConsumer) && !errors.Is(err, bus.ErrMissed) {
		err = fmt.Errorf("thread: subscription to %q: %w", s.thread, err)
	}
	if err != nil && !errors.Is(err, ErrSlowConsumer) && !errors.Is(err, bus.ErrMissed) && !errors.Is(err, ErrClosed) {
		s.svc.logger.Warn("thread: subscription failed", "thread", s.thread, "err", err)
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// pump is the state of one subscription's goroutine.
type pump struct {
	sub       *Subscription
	ctx       context.Context
	delivered int64 // the last seq handed to the consumer
}

// deliver hands the committed event e to the consumer and records it as
// delivered.
func (p *pump) deliver(e event.Event) error {
	if err := p.hand(e); err != nil {
		return err
	}
	p.delivered = e.Seq
	p.sub.last.Store(e.Seq)
	return nil
}

// hand gives e to the consumer, waiting for it as long as the subscription
// lasts: while the pump waits, live events gather in the bounded bus queue,
// which is what ends a subscriber that stays behind.
func (p *pump) hand(e event.Event) error {
	if fn := p.sub.fn; fn != nil {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return consumerError{err}
		}
		return nil
	}
	select {
	case p.sub.events <- e:
		return nil
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

// catchUp delivers events from the log until seq target has been delivered.
// The log has every seq up to target: target is committed, and so is every
// seq before it.
func (p *pump) catchUp(target int64) error {
	for p.delivered < target {
		if err := p.page(target); err != nil {
			return err
		}
	}
	return nil
}

// page delivers one page of events from the log on the way to seq target
// (catchUp).
func (p *pump) page(target int64) error {
	svc := p.sub.svc
	page, err := svc.log.Read(p.ctx, p.sub.thread, p.delivered, svc.opts.PageSize)
	if err != nil {
		return fmt.Errorf("read log after seq %d: %w", p.delivered, err)
	}
	if len(page) == 0 {
		return fmt.Errorf("log ends at seq %d, before committed seq %d", p.delivered, target)
	}
	for _, e := range page {
		if e.Seq != p.delivered+1 {
			return fmt.Errorf("log read after seq %d returned seq %d", p.delivered, e.Seq)
		}
		if err := p.deliver(e); err != nil {
			return err
		}
	}
	return nil
}
