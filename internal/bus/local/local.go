// Package local is the in-process bus of a single agentwire server: publishing
// hands each event to every subscriber's bounded queue (bus.Queue) without
// waiting, and commands call the thread's handler directly.
package local

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/metrics"
)

// Bus is an in-process bus.Bus. The zero value is not usable; call New.
type Bus struct {
	metrics *metrics.Metrics

	mu       sync.RWMutex
	closed   bool
	subs     map[string]map[*subscription]struct{}
	plain    map[string]int // per thread, the subscribers that take no previews
	handlers map[string]*handler
}

var _ bus.Bus = (*Bus)(nil)

// An Option configures a Bus.
type Option func(*Bus)

// WithMetrics counts the bus's previews in m.
func WithMetrics(m *metrics.Metrics) Option { return func(b *Bus) { b.metrics = m } }

// New returns an empty bus.
func New(opts ...Option) *Bus {
	b := &Bus{
		subs:     map[string]map[*subscription]struct{}{},
		plain:    map[string]int{},
		handlers: map[string]*handler{},
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Publish implements bus.Bus. It holds the bus only for reading, so
// publishers to different threads (and to the same one) do not queue behind
// each other.
func (b *Bus) Publish(ctx context.Context, thread string, events []event.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var dropped []*subscription
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return bus.ErrClosed
	}
	for s := range b.subs[thread] {
		if !s.Push(events) {
			dropped = append(dropped, s)
		}
	}
	b.mu.RUnlock()
	// Dropped subscribers ignore later offers; forgetting them needs the
	// write lock, so it waits until the fan-out is done.
	for _, s := range dropped {
		b.remove(s)
	}
	return nil
}

// Previews implements bus.Bus: the local bus carries previews.
func (b *Bus) Previews() bool { return true }

// Preview implements bus.Bus: it offers e to each of the thread's
// subscribers that asked for previews (bus.WantPreviews), skipping those
// whose queue is full.
func (b *Bus) Preview(thread string, e event.Event) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for s := range b.subs[thread] {
		if s.previews {
			b.metrics.Preview(s.Offer(e))
		}
	}
}

// Subscribe implements bus.Bus.
func (b *Bus) Subscribe(ctx context.Context, thread string, queue int) (bus.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if queue <= 0 {
		return nil, fmt.Errorf("bus: queue must be positive, not %d", queue)
	}
	s := &subscription{Queue: bus.NewQueue(queue), bus: b, thread: thread, previews: bus.PreviewsWanted(ctx)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, bus.ErrClosed
	}
	set := b.subs[thread]
	if set == nil {
		set = map[*subscription]struct{}{}
		b.subs[thread] = set
	}
	set[s] = struct{}{}
	if !s.previews {
		b.plain[thread]++
	}
	return s, nil
}

// WaitsForCommits implements bus.Bus.
func (b *Bus) WaitsForCommits(thread string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.plain[thread] > 0
}

// Send implements bus.Bus: it calls the thread's handler on the caller's
// goroutine.
func (b *Bus) Send(ctx context.Context, thread string, cmd event.Command) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return bus.ErrClosed
	}
	h := b.handlers[thread]
	if h == nil {
		b.mu.RUnlock()
		return bus.ErrNoHandler
	}
	// Counted under the bus lock, so stop, which removes h under the write
	// lock before it waits, never waits on a call it has not seen.
	h.calls.Add(1)
	b.mu.RUnlock()
	defer h.calls.Done()
	return h.fn(ctx, cmd)
}

// HandleCommands implements bus.Bus.
func (b *Bus) HandleCommands(ctx context.Context, thread string, fn bus.Handler) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("bus: nil handler")
	}
	h := &handler{fn: fn}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, bus.ErrClosed
	}
	if b.handlers[thread] != nil {
		return nil, bus.ErrHandlerExists
	}
	b.handlers[thread] = h
	var once sync.Once
	stop := func() {
		once.Do(func() {
			b.mu.Lock()
			if b.handlers[thread] == h {
				delete(b.handlers, thread)
			}
			b.mu.Unlock()
			h.calls.Wait()
		})
	}
	return stop, nil
}

// Close implements bus.Bus. It waits for command handlers in flight.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	subs := b.subs
	handlers := b.handlers
	b.subs, b.plain, b.handlers = nil, nil, nil
	b.mu.Unlock()

	for _, set := range subs {
		for s := range set {
			s.End(bus.ErrClosed)
		}
	}
	for _, h := range handlers {
		h.calls.Wait()
	}
	return nil
}

// remove forgets s; it is called by s.Close.
func (b *Bus) remove(s *subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	set := b.subs[s.thread]
	if _, ok := set[s]; !ok {
		return // removed before (dropped, then closed)
	}
	delete(set, s)
	if len(set) == 0 {
		delete(b.subs, s.thread)
	}
	if !s.previews {
		if b.plain[s.thread]--; b.plain[s.thread] <= 0 {
			delete(b.plain, s.thread)
		}
	}
}

type handler struct {
	fn    bus.Handler
	calls sync.WaitGroup
}

// subscription is a bus.Queue that the bus fills and Close removes.
type subscription struct {
	*bus.Queue
	bus      *Bus
	thread   string
	previews bool // offered previews (bus.WantPreviews)
}

func (s *subscription) Close() {
	s.End(bus.ErrClosed)
	s.bus.remove(s)
}
