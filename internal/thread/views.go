package thread

import (
	"context"
	"errors"
	"sync"

	"github.com/agentwire/agentwire/internal/event"
)

// ErrStop, returned by a Watch's or a Follower's function, ends it without
// an error.
var ErrStop = errors.New("thread: stop following")

// Open opens a Pull that calls notify: Service.Pull bound to a thread and
// a position, or a wrapper of it that checks who may follow the thread
// (the server's core). Every view is made from one.
type Open func(notify func()) (*Pull, error)

// Opener returns the Open of thread after seq after on s.
func (s *Service) Opener(ctx context.Context, thread string, after int64) Open {
	return func(notify func()) (*Pull, error) {
		return s.Pull(ctx, thread, after, PullOptions{Notify: notify})
	}
}

// waker is a notification channel: a signal sent when none is waiting,
// so that the notifier never blocks and the consumer, once awake, looks at
// everything.
type waker chan struct{}

func newWaker() waker { return make(waker, 1) }

func (w waker) kick() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// A Follower is a Pull for a consumer that waits for its events on a
// goroutine of its own (a WebSocket's follow loop): Run calls a function
// with each event, and a consumer that also waits for other things
// selects on Ready and takes events with Next. It adds no goroutine.
type Follower struct {
	p    *Pull
	wake waker
}

// NewFollower opens a Follower.
func NewFollower(open Open) (*Follower, error) {
	f := &Follower{wake: newWaker()}
	p, err := open(f.wake.kick)
	if err != nil {
		return nil, err
	}
	f.p = p
	f.wake.kick() // the replay, if any, waits
	return f, nil
}

// Follow is NewFollower of thread after seq after on s.
func (s *Service) Follow(ctx context.Context, thread string, after int64) (*Follower, error) {
	return NewFollower(s.Opener(ctx, thread, after))
}

// Head is the thread's last seq when the follow began.
func (f *Follower) Head() int64 { return f.p.Head() }

// Last is the seq of the last committed event taken.
func (f *Follower) Last() int64 { return f.p.Last() }

// Ready receives when Next may have something new; it is ready at once,
// for the replay.
func (f *Follower) Ready() <-chan struct{} { return f.wake }

// Next is the Pull's Next.
func (f *Follower) Next() (event.Event, bool, error) { return f.p.Next() }

// Run calls fn with each event in seq order until ctx is done or fn
// returns ErrStop (Run returns nil), fn returns another error (Run returns
// it), or the follow ends (Run returns why; nil after Close).
func (f *Follower) Run(ctx context.Context, fn func(event.Event) error) error {
	for {
		for {
			e, ok, err := f.p.Next()
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, errPullEnded) {
					return nil
				}
				return err
			}
			if !ok {
				break
			}
			if err := fn(e); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.wake:
		}
	}
}

// Close ends the follow; not while Run runs on another goroutine (end its
// context first). It is idempotent.
func (f *Follower) Close() { f.p.Close() }

// A Watch is a Pull for a consumer that takes each event in a function
// call: the watch calls it on a goroutine that runs only while there is
// something to hand on, so an idle watch (a chat socket between replies)
// costs no goroutine at all, and neither does its consumer. The function
// must not block for long: while it runs, live events gather in the
// pull's bounded queue (and past it, are read from the log).
type Watch struct {
	fn  func(event.Event) error
	end func(error)

	mu       sync.Mutex
	p        *Pull // nil until open returns
	running  bool  // a turn goroutine runs
	again    bool  // a notification came during the turn
	finished bool
	err      error
	done     chan struct{}
}

// NewWatch opens a Watch that calls fn with each event in seq order until
// Stop, an error of fn's (ErrStop: none), or the pull's end; then it calls
// end (when not nil) with the watch's Err, on the goroutine that called
// fn, and closes Done.
func NewWatch(open Open, fn func(event.Event) error, end func(error)) (*Watch, error) {
	if fn == nil {
		return nil, errors.New("thread: watch with a nil function")
	}
	w := &Watch{fn: fn, end: end, done: make(chan struct{})}
	p, err := open(w.kick)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.p = p
	w.mu.Unlock()
	w.kick()
	return w, nil
}

// Watch is NewWatch of thread after seq after on s.
func (s *Service) Watch(ctx context.Context, thread string, after int64, fn func(event.Event) error, end func(error)) (*Watch, error) {
	return NewWatch(s.Opener(ctx, thread, after), fn, end)
}

// kick starts a turn, or makes the running one look again.
func (w *Watch) kick() {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.finished:
	case w.running || w.p == nil:
		w.again = true
	default:
		w.running = true
		go w.turn()
	}
}

// idle reports whether the turn may stop: nothing came since it looked.
func (w *Watch) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.again {
		w.again = false
		return false
	}
	w.running = false
	return true
}

// turn hands on what there is, then stops; or ends the watch.
func (w *Watch) turn() {
	for {
		e, ok, err := w.p.Next()
		if err != nil {
			if errors.Is(err, errPullEnded) {
				err = nil
			}
			w.finish(err)
			return
		}
		if !ok {
			if w.idle() {
				return
			}
			continue
		}
		if err := w.fn(e); err != nil {
			w.p.Close()
			if errors.Is(err, ErrStop) {
				err = nil
			}
			w.finish(err)
			return
		}
	}
}

// finish ends the watch for err.
func (w *Watch) finish(err error) {
	w.mu.Lock()
	w.finished, w.err = true, err
	w.mu.Unlock()
	if w.end != nil {
		w.end(err)
	}
	close(w.done)
}

// Stop ends the watch without waiting for it (Done says when it has); fn
// may call it. It is idempotent.
func (w *Watch) Stop() { w.p.Stop() }

// Close ends the watch and waits until fn will not be called again; not
// from fn (use Stop there).
func (w *Watch) Close() {
	w.Stop()
	<-w.done
}

// Done is closed once fn will not be called again.
func (w *Watch) Done() <-chan struct{} { return w.done }

// Err says why the watch ended: nil while it runs, after Stop, and after
// ErrStop; else fn's error or why the pull ended.
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Last is the seq of the last committed event handed to fn; exact once
// Done is closed.
func (w *Watch) Last() int64 {
	<-w.done
	return w.p.Last()
}

// A Subscription is a Pull for a consumer that ranges over a channel
// (tests, and anything that selects on events beside other channels and
// wants them one at a time): a goroutine of its own moves events from the
// pull to Events.
type Subscription struct {
	p      *Pull
	wake   waker
	events chan event.Event
	stop   chan struct{}
	ended  chan struct{} // closed once err and last are set, before events is closed
	done   chan struct{} // closed after events
	once   sync.Once
	err    error // read after ended
	last   int64 // read after ended
}

// NewSubscription opens a Subscription.
func NewSubscription(open Open) (*Subscription, error) {
	s := &Subscription{wake: newWaker(), events: make(chan event.Event), stop: make(chan struct{}),
		ended: make(chan struct{}), done: make(chan struct{})}
	p, err := open(s.wake.kick)
	if err != nil {
		return nil, err
	}
	s.p = p
	go s.run()
	return s, nil
}

// Subscribe is NewSubscription of thread after seq after on s.
func (s *Service) Subscribe(ctx context.Context, thread string, after int64) (*Subscription, error) {
	return NewSubscription(s.Opener(ctx, thread, after))
}

func (s *Subscription) run() {
	// In this order: a consumer that sees Events closed and asks Err or
	// Last finds them set.
	defer close(s.done)
	defer close(s.events)
	defer close(s.ended)
	defer func() { s.last = s.p.Last() }()
	defer s.p.Close()
	for {
		e, ok, err := s.p.Next()
		if err != nil {
			if !errors.Is(err, errPullEnded) {
				s.err = err
			}
			return
		}
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			}
		}
		select {
		case s.events <- e:
		case <-s.stop:
			return
		case <-s.p.ctx.Done():
			// Ended (the service's Close) while the consumer did not take
			// e: the next Next says why.
		}
	}
}

// Events delivers the thread's events in seq order, each exactly once,
// with previews in their place for a subscription that takes them. It is
// closed when the subscription ends; Err then says why.
func (s *Subscription) Events() <-chan event.Event { return s.events }

// Head is the thread's last seq when the subscription began.
func (s *Subscription) Head() int64 { return s.p.Head() }

// Err says why the subscription ended: nil while it runs and after
// Close, else ErrClosed or a store or bus error. Read it once Events is
// closed.
func (s *Subscription) Err() error {
	select {
	case <-s.ended:
		return s.err
	default:
		return nil
	}
}

// Last is the seq of the last event sent on Events (or the one the
// subscription started after); read it once Events is closed.
func (s *Subscription) Last() int64 {
	<-s.ended
	return s.last
}

// Close ends the subscription and waits until Events is closed. It is
// idempotent and may be called from any goroutine.
func (s *Subscription) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}
