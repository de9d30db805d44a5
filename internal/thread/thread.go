// Package thread is the thread service: the one way events enter a thread's
// log and the one way clients watch it.
//
// Append commits events to the store and only then publishes them on the
// bus, so nothing reaches a client that the log could still lose. Subscribe
// gives a client the thread's events after a seq it names: the log's events
// first, then live ones from the bus, with no gap and no duplicate at the
// seam. Every protocol's resume is that one call.
//
// Appends to one thread are not serialised here. The store serialises
// commits and assigns gapless seqs; concurrent appends may then publish in
// either order, and a subscription that sees a seq ahead of the next one it
// expects reads the missing events from the log (which has them: seq N is
// only committed after every seq before it). The same gap filling covers a
// bus that reorders or loses events between nodes.
package thread

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// Errors of the thread service.
var (
	// ErrClosed is returned after Close, and ends the subscriptions that
	// were open when the service closed.
	ErrClosed = errors.New("thread: service closed")
	// ErrSlowConsumer ends a subscription whose queue overflowed because
	// its consumer did not keep up. The consumer resumes by subscribing
	// again after the last seq it received. It is bus.ErrSlowConsumer, so
	// either name matches.
	ErrSlowConsumer = bus.ErrSlowConsumer
	// ErrAfterEnd is returned by Subscribe (as an *AfterEndError) when the
	// seq to resume after is past the thread's last seq: the client holds a
	// position this log never had.
	ErrAfterEnd = errors.New("thread: seq is past the thread's end")
)

// FromEnd, as Subscribe's after, subscribes from the thread's end.
const FromEnd int64 = -1

// AfterEndError is Subscribe's error for a seq past the thread's end.
type AfterEndError struct {
	Thread      string
	After, Last int64
}

func (e *AfterEndError) Error() string {
	return fmt.Sprintf("%v: %q after seq %d, last seq %d", ErrAfterEnd, e.Thread, e.After, e.Last)
}

// Is makes errors.Is(err, ErrAfterEnd) hold.
func (e *AfterEndError) Is(target error) bool { return target == ErrAfterEnd }

// Default option values.
const (
	DefaultQueueSize = 1024
	DefaultPageSize  = 256
)

// Options tune a Service. Zero values take the defaults.
type Options struct {
	// QueueSize bounds the live events waiting for one subscriber (default
	// DefaultQueueSize). A subscriber further behind is ended with
	// ErrSlowConsumer, so it can never hold up an append.
	QueueSize int
	// PageSize is how many events a subscription reads from the log at a
	// time while it replays or fills a gap (default DefaultPageSize).
	PageSize int
}

// Store is what a Service keeps events in: the threads' logs, and the
// commit that claims a thread for a run with the run's first events
// (store.Runs.ClaimAndAppend). Every store.Store is one.
type Store interface {
	store.Log
	ClaimAndAppend(ctx context.Context, c store.RunClaim, lease time.Duration, events ...event.Event) ([]event.Event, error)
}

// Service is the thread service. It does not own its store or bus: close
// them after the service.
type Service struct {
	log    Store
	bus    bus.Bus
	logger *slog.Logger
	opts   Options

	mu     sync.Mutex
	closed bool
	subs   map[*Subscription]struct{}
	wg     sync.WaitGroup // one per open subscription, from its start to its end
}

// New returns a Service that keeps events in log and fans them out over b.
// A nil logger discards.
func New(log Store, b bus.Bus, logger *slog.Logger, opts Options) *Service {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	return &Service{log: log, bus: b, logger: logger, opts: opts, subs: map[*Subscription]struct{}{}}
}

// Append commits events to the thread's log and then publishes them to its
// subscribers. It returns the events as committed (seq, id and time
// assigned). Once the store has committed them, Append reports success even
// if publishing fails: the events are in the log, and subscribers pick them
// up from there at the next event or resume. Publishing is not cut short by
// ctx, so a caller that gives up just after the commit does not leave
// subscribers waiting.
func (s *Service) Append(ctx context.Context, thread string, events ...event.Event) ([]event.Event, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	committed, err := s.log.Append(ctx, thread, events...)
	if err != nil || len(committed) == 0 {
		return committed, err
	}
	s.publish(ctx, thread, committed)
	return committed, nil
}

// publish hands committed events to the bus. An event the bus loses is
// still in the log, where subscribers find it by the gap it leaves.
func (s *Service) publish(ctx context.Context, thread string, committed []event.Event) {
	if err := s.bus.Publish(context.WithoutCancel(ctx), thread, committed); err != nil {
		s.logger.Error("thread: publish committed events", "thread", thread,
			"first_seq", committed[0].Seq, "last_seq", committed[len(committed)-1].Seq, "err", err)
	}
}

// ClaimAndAppend claims c's thread and appends events in one commit
// (store.Runs.ClaimAndAppend), and publishes them.
func (s *Service) ClaimAndAppend(ctx context.Context, c store.RunClaim, lease time.Duration, events ...event.Event) ([]event.Event, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	committed, err := s.log.ClaimAndAppend(ctx, c, lease, events...)
	if err != nil || len(committed) == 0 {
		return committed, err
	}
	s.publish(ctx, c.Thread, committed)
	return committed, nil
}

// Preview sends e, a delta not yet committed (event.Event.Preview says
// after which seq it belongs), to the thread's live subscribers that take
// previews, when the bus carries them (bus.Bus.Previews).
func (s *Service) Preview(thread string, e event.Event) { s.bus.Preview(thread, e) }

// WaitsForCommits reports whether a live subscriber of thread sees deltas
// only once they are committed (bus.Bus.WaitsForCommits).
func (s *Service) WaitsForCommits(thread string) bool { return s.bus.WaitsForCommits(thread) }

// Previews reports whether Preview reaches anyone: whether the bus carries
// previews.
func (s *Service) Previews() bool { return s.bus.Previews() }

// Read returns up to limit of the thread's events after seq after
// (store.Log.Read).
func (s *Service) Read(ctx context.Context, thread string, after int64, limit int) ([]event.Event, error) {
	return s.log.Read(ctx, thread, after, limit)
}

// LastSeq returns the thread's last committed seq, 0 for a thread with no
// events.
func (s *Service) LastSeq(ctx context.Context, thread string) (int64, error) {
	return s.log.LastSeq(ctx, thread)
}

// History returns the thread's conversation events (store.Log.History).
func (s *Service) History(ctx context.Context, thread string) ([]event.Event, error) {
	return s.log.History(ctx, thread)
}

// Threads lists threads by id after the id after (store.Log.Threads).
func (s *Service) Threads(ctx context.Context, after string, limit int) ([]store.ThreadInfo, error) {
	return s.log.Threads(ctx, after, limit)
}

// Close ends every open subscription with ErrClosed, waits for them, and
// refuses further appends and subscriptions. It is idempotent.
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	subs := make([]*Subscription, 0, len(s.subs))
	for sub := range s.subs {
		subs = append(subs, sub)
	}
	s.mu.Unlock()
	for _, sub := range subs {
		sub.cancel(ErrClosed)
	}
	s.wg.Wait()
	return nil
}

func (s *Service) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Subscribe returns a subscription to the thread's committed events with
// seq > after, in seq order: first those already in the log, then each new
// one as it is committed. With after FromEnd it delivers only events
// committed once it has begun. ctx bounds only the call; the subscription
// lasts until Close, the service's Close, or an error (see
// Subscription.Err).
func (s *Service) Subscribe(ctx context.Context, thread string, after int64) (*Subscription, error) {
	return s.subscribe(ctx, thread, after, nil, nil)
}

// Watch is Subscribe for a consumer that takes each event in a function
// call instead of from a channel: the subscription's pump calls fn with
// each event in seq order, on a goroutine it starts when events come and
// ends when they have been handed on, so an idle watch costs no goroutine
// at all, and neither does its consumer. fn must
// not block for long: while it runs, live events gather in the bounded
// queue. A watch outlives falling behind (ErrSlowConsumer) and a bus that
// may have missed events (bus.ErrMissed): it reads the log from where fn
// left off and goes on. It ends at Stop or Close, the service's Close, an
// error of fn's, or a store or bus error; then end (when not nil) is
// called on the same goroutine with Err's value, and Done is closed. Events
// is not used.
func (s *Service) Watch(ctx context.Context, thread string, after int64, fn func(event.Event) error, end func(error)) (*Subscription, error) {
	if fn == nil {
		return nil, errors.New("thread: watch with a nil function")
	}
	return s.subscribe(ctx, thread, after, fn, end)
}

func (s *Service) subscribe(ctx context.Context, thread string, after int64, fn func(event.Event) error, end func(error)) (*Subscription, error) {
	sub, live, last, err := s.open(ctx, thread, after, fn, end)
	if err != nil {
		return nil, err
	}
	if fn != nil {
		sub.startLazy(live, last)
		return sub, nil
	}
	go func() {
		defer s.wg.Done()
		sub.run(live, last)
	}()
	return sub, nil
}

// open makes a subscription, counted in the service's WaitGroup, and its
// feed of live events, subscribed before the log's last seq (last) was
// read. The caller starts its pump.
func (s *Service) open(ctx context.Context, thread string, after int64, fn func(event.Event) error, end func(error)) (sub *Subscription, live bus.Subscription, last int64, err error) {
	if after < 0 && after != FromEnd {
		return nil, nil, 0, fmt.Errorf("thread: subscribe to %q after seq %d: seqs start at 1", thread, after)
	}
	if s.isClosed() {
		return nil, nil, 0, ErrClosed
	}
	// Live first: every event committed from here on is published to
	// live, so reading the log afterwards leaves no gap between the two.
	live, err = s.bus.Subscribe(ctx, thread, s.opts.QueueSize)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("thread: subscribe to %q: %w", thread, err)
	}
	last, err = s.log.LastSeq(ctx, thread)
	if err != nil {
		live.Close()
		return nil, nil, 0, fmt.Errorf("thread: subscribe to %q: %w", thread, err)
	}
	if after == FromEnd {
		after = last
	}
	if after > last {
		live.Close()
		return nil, nil, 0, &AfterEndError{Thread: thread, After: after, Last: last}
	}

	pctx, cancel := context.WithCancelCause(context.Background())
	sub = &Subscription{
		svc:      s,
		thread:   thread,
		previews: bus.PreviewsWanted(ctx),
		head:     last,
		events:   make(chan event.Event),
		fn:       fn,
		end:      end,
		ctx:      pctx,
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	sub.last.Store(after)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel(ErrClosed)
		live.Close()
		return nil, nil, 0, ErrClosed
	}
	s.subs[sub] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	return sub, live, last, nil
}

// forget drops a finished subscription.
func (s *Service) forget(sub *Subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, sub)
}
