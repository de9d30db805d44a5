package thread

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
)

// errUnsubscribed is the cancel cause of Subscription.Close; Err reports it
// as nil.
var errUnsubscribed = errors.New("thread: unsubscribed")

// Subscription delivers one thread's committed events to one consumer. One
// goroutine (the pump) reads the log and the bus subscription and hands
// events on; it is the only sender on Events. The bounded queue is the bus
// subscription's: while the consumer does not take an event, the pump waits
// and live events gather there until the bus ends the subscription with
// ErrSlowConsumer.
type Subscription struct {
	svc    *Service
	thread string
	events chan event.Event
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the pump has returned

	mu  sync.Mutex
	err error
}

// Events delivers the thread's events in seq order, each exactly once. It
// is closed when the subscription ends; Err then says why. Events are shared
// with other subscribers: treat them as read-only.
func (s *Subscription) Events() <-chan event.Event { return s.events }

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
// goroutine, including while another one ranges over Events.
func (s *Subscription) Close() {
	s.cancel(errUnsubscribed)
	<-s.done
}

// run is the pump: it replays the log up to last, the thread's last seq when
// live started buffering, then forwards live events, filling any gap from
// the log and dropping what was already delivered.
func (s *Subscription) run(ctx context.Context, live bus.Subscription, after, last int64) {
	defer close(s.done)
	defer s.cancel(errUnsubscribed) // release the context; Err is already set
	defer s.svc.forget(s)
	defer close(s.events)
	defer live.Close()

	p := pump{sub: s, ctx: ctx, delivered: after}
	err := p.catchUp(last)
	for err == nil {
		var e event.Event
		if e, err = live.Next(ctx); err != nil {
			break
		}
		switch {
		case e.Seq <= p.delivered:
			// Committed before the replay read it, or delivered by an
			// earlier gap fill.
		case e.Seq == p.delivered+1:
			err = p.deliver(e)
		default:
			// Ahead: a concurrent append published first, or the bus lost
			// something. The log has everything up to e.
			err = p.catchUp(e.Seq)
		}
	}
	s.finish(ctx, err)
}

// finish records why the pump stopped.
func (s *Subscription) finish(ctx context.Context, err error) {
	if ctx.Err() != nil {
		// Cancelled: by Close (no error) or by the service closing.
		err = context.Cause(ctx)
		if errors.Is(err, errUnsubscribed) {
			err = nil
		}
	} else if !errors.Is(err, bus.ErrSlowConsumer) {
		err = fmt.Errorf("thread: subscription to %q: %w", s.thread, err)
	}
	if err != nil && !errors.Is(err, ErrSlowConsumer) && !errors.Is(err, ErrClosed) {
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

// deliver hands e to the consumer, waiting for it as long as the
// subscription lasts: while the pump waits, live events gather in the
// bounded bus queue, which is what ends a subscriber that stays behind.
func (p *pump) deliver(e event.Event) error {
	select {
	case p.sub.events <- e:
		p.delivered = e.Seq
		return nil
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

// catchUp delivers events from the log until seq target has been delivered.
// The log has every seq up to target: target is committed, and so is every
// seq before it.
func (p *pump) catchUp(target int64) error {
	svc := p.sub.svc
	for p.delivered < target {
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
	}
	return nil
}
