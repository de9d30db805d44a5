package protocol

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentwire/agentwire/internal/event"
)

// A Pull is a follow its consumer drives on its own goroutine: it waits
// for the notification given to PullThread, then calls Next until Next
// reports nothing. A consumer that waits for other things too (an SSE
// stream's heartbeat and shutdown) has them notify the same channel and
// waits for that one alone.
type Pull interface {
	// Head is the thread's last seq when the pull began: replayed events
	// run up to it, live ones follow.
	Head() int64
	// Next returns the next event in seq order, or ok false when none
	// waits. Once the pull has ended it returns an error: why, or one
	// that only says so after Close.
	Next() (e event.Event, ok bool, err error)
	// Close ends the pull. It is idempotent.
	Close()
}

// A Puller is a Core whose subscriptions can run on their consumer's
// goroutine (thread.Service.Pull), going on after falling behind as a
// Follower does.
type Puller interface {
	Pull(ctx context.Context, thread string, after int64, notify func()) (Pull, error)
}

// PullThread follows thread after seq after (or from its end, with
// FromEnd), as Follow does, for a consumer that takes events with Next
// and waits for notify, which is called, and must not block, whenever Next
// may have something new: an event or the end. When core is a Puller the
// pull runs on the consumer's goroutine alone; otherwise PullThread starts
// a goroutine of its own to follow. Subscribing happens here, on the
// caller's goroutine.
func PullThread(ctx context.Context, core Core, thread string, after int64, log *slog.Logger, notify func()) (Pull, error) {
	if p, ok := core.(Puller); ok {
		return p.Pull(ctx, thread, after, notify)
	}
	f, err := Follow(ctx, core, thread, after, log)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	fp := &followPull{head: f.Head(), events: make(chan event.Event, 64), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(fp.done)
		defer notify()
		defer f.Close()
		fp.err = f.Run(rctx, func(e event.Event) error {
			select {
			case fp.events <- e:
				notify()
				return nil
			case <-rctx.Done():
				return ErrStop
			}
		})
	}()
	return fp, nil
}

// errPullClosed is what a followPull's Next returns after Close.
var errPullClosed = errors.New("protocol: the pull was closed")

// followPull is PullThread's Pull over a Follower and a goroutine.
type followPull struct {
	head   int64
	events chan event.Event
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's; read after done is closed
}

func (p *followPull) Head() int64 { return p.head }

func (p *followPull) Next() (event.Event, bool, error) {
	select {
	case e := <-p.events:
		return e, true, nil
	default:
	}
	select {
	case <-p.done:
	default:
		return event.Event{}, false, nil
	}
	// Ended: what it handed on before goes out first.
	select {
	case e := <-p.events:
		return e, true, nil
	default:
	}
	if p.err != nil {
		return event.Event{}, false, p.err
	}
	return event.Event{}, false, errPullClosed
}

func (p *followPull) Close() {
	p.cancel()
	<-p.done
}
