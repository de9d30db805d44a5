// Package thread is the thread service: the one way events enter a thread's
// log and the one way clients follow it.
//
// Append commits events to the store and only then publishes them on the
// bus. (A run may also send previews: deltas not yet committed, to the
// subscribers that ask for them, which the commit then confirms; see
// Preview.) Pull follows a thread after a seq a client names: the log's
// events first, then live ones from the bus, with no gap and no duplicate
// at the seam. It is the one subscription engine; Watch, Follower and
// Subscription are views over it for consumers that want a callback, a
// blocking loop or a channel. Every protocol's resume is that one call.
//
// Appends to one thread are not serialised here. The store serialises
// commits and assigns gapless seqs; concurrent appends may then publish in
// either order, and a pull that sees a seq ahead of the next one it
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
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/store"
)

// Errors of the thread service.
var (
	// ErrClosed is returned after Close, and ends the pulls that were
	// open when the service closed.
	ErrClosed = errors.New("thread: service closed")
	// ErrAfterEnd is returned by Pull (as an *AfterEndError) when the
	// seq to resume after is past the thread's last seq: the client holds a
	// position this log never had.
	ErrAfterEnd = errors.New("thread: seq is past the thread's end")
)

// FromEnd, as Pull's after, follows the thread from its end.
const FromEnd int64 = -1

// AfterEndError is Pull's error for a seq past the thread's end.
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
	// QueueSize bounds the live events waiting for one pull (default
	// DefaultQueueSize). A pull further behind loses its bus subscription
	// (bus.ErrSlowConsumer), so it can never hold up an append, and
	// catches up from the log.
	QueueSize int
	// PageSize is how many events a pull reads from the log at a time
	// while it replays or fills a gap (default DefaultPageSize).
	PageSize int
	// Metrics counts the pulls open, their catching up and the lag of
	// live events; nil counts nothing.
	Metrics *metrics.Metrics
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
	pulls  map[*Pull]struct{}
	wg     sync.WaitGroup // one per open pull, from its start to its end
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
	return &Service{log: log, bus: b, logger: logger, opts: opts, pulls: map[*Pull]struct{}{}}
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

// Close ends every open pull (and so every view of one) with ErrClosed,
// waits for them to end, and refuses further appends and subscriptions.
// A pull ends at its consumer's next Next, which its notification
// prompts. Close is idempotent.
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	pulls := make([]*Pull, 0, len(s.pulls))
	for p := range s.pulls {
		pulls = append(pulls, p)
	}
	s.mu.Unlock()
	for _, p := range pulls {
		p.cancel(ErrClosed)
	}
	s.wg.Wait()
	return nil
}

func (s *Service) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// add counts p among the open pulls, unless the service has closed.
func (s *Service) add(p *Pull) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.pulls[p] = struct{}{}
	s.wg.Add(1)
	p.counted = s.opts.Metrics.SubscriptionOpened()
	return true
}

// remove drops p, which has ended, from the open pulls.
func (s *Service) remove(p *Pull) {
	s.mu.Lock()
	delete(s.pulls, p)
	s.mu.Unlock()
	p.counted()
	s.wg.Done()
}
