// Package nats is the bus of a cluster of agentwire nodes: committed events
// travel on NATS subjects per thread, so a subscriber on any node receives
// them, and commands travel by request and reply to the node that handles
// the thread's commands.
//
// NATS delivers at most once. The thread service already fills any seq gap
// from the log, so an event NATS drops costs a read, not a loss. What no
// later event would reveal is handled here: an event too large for a NATS
// message is sent without its payload (its subscribers read it from the
// log), and when the connection comes back after an outage every
// subscription open across it ends with bus.ErrMissed, so that its
// consumer resumes from the log after the last seq it took.
package nats

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
)

// Options configure a Bus.
type Options struct {
	// Prefix starts every subject (default "agentwire"): nodes that share
	// threads use the same prefix; others keep apart on one NATS.
	Prefix string
	// RequestTimeout bounds a command's round trip to the thread's owner
	// (default 10 s).
	RequestTimeout time.Duration
	// Name names the connection in NATS's monitoring (the node id).
	Name   string
	Logger *slog.Logger
}

// ErrNoAnswer is Send's error when the thread's owner took the command but
// did not answer in time.
var ErrNoAnswer = errors.New("bus: the thread's owner did not answer in time")

func init() { bus.RegisterError("bus.no_answer", ErrNoAnswer) }

// Bus is a bus.Bus over a NATS connection.
type Bus struct {
	nc   *natsgo.Conn
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	closed   bool
	threads  map[string]*threadSub // one NATS subscription per thread followed here
	byNATS   map[*natsgo.Subscription]*threadSub
	handlers map[string]*handler
	// retiring holds the handler subscriptions being drained, each with
	// the connection's reconnect count when its drain began.
	retiring map[*natsgo.Subscription]uint64
}

// threadSub is this node's NATS subscription to one thread's events,
// shared by the thread's local subscribers: NATS sends each event to a node
// once, whatever the number of its subscribers.
type threadSub struct {
	thread string
	ns     *natsgo.Subscription
	ready  chan struct{} // closed once the server has the subscription
	err    error         // why it could not be made; set before ready closes

	mu   sync.Mutex
	subs map[*subscription]struct{}
}

var _ bus.Bus = (*Bus)(nil)

// Open connects to the NATS server(s) at url (nats://host:port, or a
// comma-separated list). The connection reconnects on its own for as long
// as the Bus is open; Connected says whether it is up.
func Open(ctx context.Context, url string, opts Options) (*Bus, error) {
	if opts.Prefix == "" {
		opts.Prefix = "agentwire"
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Bus{opts: opts, log: opts.Logger, threads: map[string]*threadSub{},
		byNATS: map[*natsgo.Subscription]*threadSub{}, handlers: map[string]*handler{},
		retiring: map[*natsgo.Subscription]uint64{}}
	nc, err := natsgo.Connect(url,
		natsgo.Name(opts.Name),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250*time.Millisecond),
		natsgo.RetryOnFailedConnect(false),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			b.log.Warn("lost the NATS connection; reconnecting", "err", err)
		}),
		natsgo.ReconnectHandler(func(*natsgo.Conn) { b.reconnected() }),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, s *natsgo.Subscription, err error) { b.asyncError(s, err) }),
	)
	if err != nil {
		return nil, fmt.Errorf("nats: connect to %s: %w", redact(url), err)
	}
	b.nc = nc
	if err := b.flush(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: connect to %s: %w", redact(url), err)
	}
	return b, nil
}

// redact drops passwords from a URL (or comma-separated URLs) for
// messages.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// flush waits until the server has processed what this connection sent:
// a subscription made before it is registered once it returns. NATS needs
// a deadline; without one of ctx's own it is RequestTimeout.
func (b *Bus) flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.RequestTimeout)
		defer cancel()
	}
	return b.nc.FlushWithContext(ctx)
}

// Connected reports whether the connection to NATS is up and serves
// commands as it should: not while a drain begun on an earlier connection
// has yet to end in the reconnect that drops it (see retire).
func (b *Bus) Connected() bool {
	if !b.nc.IsConnected() {
		return false
	}
	now := b.nc.Stats().Reconnects
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, since := range b.retiring {
		if since != now {
			return false
		}
	}
	return true
}

// token encodes a thread id as one subject token: thread ids may hold
// characters NATS gives meaning to ('.', '*', '>').
func token(thread string) string { return base64.RawURLEncoding.EncodeToString([]byte(thread)) }

func (b *Bus) eventSubject(thread string) string { return b.opts.Prefix + ".ev." + token(thread) }

func (b *Bus) commandSubject(thread string) string { return b.opts.Prefix + ".cmd." + token(thread) }

// wireEvent is an event as the bus carries it: whole, or, for an event too
// large for a NATS message, its thread and seq only.
type wireEvent struct {
	Event *event.Event `json:"event,omitempty"`
	// Gap is the seq of an event sent without its payload.
	Gap    int64  `json:"gap,omitempty"`
	Thread string `json:"thread,omitempty"`
}

// Publish implements bus.Bus. The events go out in as few messages as fit
// NATS's payload limit.
func (b *Bus) Publish(ctx context.Context, thread string, events []event.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.isClosed() {
		return bus.ErrClosed
	}
	limit := int(b.nc.MaxPayload())
	subject := b.eventSubject(thread)
	var batch []json.RawMessage
	size := 2
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		data, err := json.Marshal(batch)
		if err != nil {
			return err
		}
		batch, size = nil, 2
		return b.nc.Publish(subject, data)
	}
	for i := range events {
		e := &events[i]
		one, err := json.Marshal(wireEvent{Event: e})
		if err != nil {
			return fmt.Errorf("nats: publish seq %d of %q: %w", e.Seq, thread, err)
		}
		if len(one)+2 > limit {
			// Too large to send: its subscribers read it from the log.
			if one, err = json.Marshal(wireEvent{Gap: e.Seq, Thread: thread}); err != nil {
				return err
			}
		}
		if size+len(one)+1 > limit {
			if err := flush(); err != nil {
				return fmt.Errorf("nats: publish to %q: %w", thread, err)
			}
		}
		batch = append(batch, one)
		size += len(one) + 1
	}
	if err := flush(); err != nil {
		return fmt.Errorf("nats: publish to %q: %w", thread, err)
	}
	return nil
}

func decodeEvents(data []byte) ([]event.Event, error) {
	var batch []wireEvent
	if err := json.Unmarshal(data, &batch); err != nil {
		return nil, err
	}
	out := make([]event.Event, 0, len(batch))
	for _, w := range batch {
		if w.Event != nil {
			out = append(out, *w.Event)
		} else {
			out = append(out, event.Event{Thread: w.Thread, Seq: w.Gap})
		}
	}
	return out, nil
}

// subscription is a bus.Queue that its thread's NATS subscription fills.
type subscription struct {
	*bus.Queue
	b  *Bus
	ts *threadSub
}

// Close implements bus.Subscription.
func (s *subscription) Close() {
	s.End(bus.ErrClosed)
	s.b.leave(s)
}

// Subscribe implements bus.Bus. It returns once the NATS server has the
// thread's subscription, so every event published afterwards reaches it.
func (b *Bus) Subscribe(ctx context.Context, thread string, queue int) (bus.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if queue <= 0 {
		return nil, fmt.Errorf("bus: queue must be positive, not %d", queue)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, bus.ErrClosed
	}
	ts := b.threads[thread]
	made := ts == nil
	if made {
		ts = &threadSub{thread: thread, ready: make(chan struct{}), subs: map[*subscription]struct{}{}}
		b.threads[thread] = ts
	}
	s := &subscription{Queue: bus.NewQueue(queue), b: b, ts: ts}
	ts.mu.Lock()
	ts.subs[s] = struct{}{}
	ts.mu.Unlock()
	b.mu.Unlock()

	if made {
		ts.err = b.listen(ctx, ts)
		close(ts.ready)
	} else {
		select {
		case <-ts.ready:
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		}
	}
	if ts.err != nil {
		s.Close()
		return nil, fmt.Errorf("nats: subscribe to %q: %w", thread, ts.err)
	}
	return s, nil
}

// listen makes ts's NATS subscription and waits until the server has it.
func (b *Bus) listen(ctx context.Context, ts *threadSub) error {
	ns, err := b.nc.Subscribe(b.eventSubject(ts.thread), func(m *natsgo.Msg) {
		events, err := decodeEvents(m.Data)
		if err != nil {
			b.log.Error("nats: an event message that does not decode", "subject", m.Subject, "err", err)
			return
		}
		ts.mu.Lock()
		var ended []*subscription
		for s := range ts.subs {
			if !s.Push(events) {
				ended = append(ended, s) // a slow consumer, or closed
			}
		}
		ts.mu.Unlock()
		for _, s := range ended {
			b.leave(s)
		}
	})
	if err != nil {
		b.drop(ts)
		return err
	}
	b.mu.Lock()
	ts.ns = ns
	b.byNATS[ns] = ts
	b.mu.Unlock()
	// The server has the subscription once it answers a ping sent after it.
	if err := b.flush(ctx); err != nil {
		b.drop(ts)
		return err
	}
	return nil
}

// leave drops s from its thread's subscribers; the thread's NATS
// subscription goes with its last one.
func (b *Bus) leave(s *subscription) {
	ts := s.ts
	ts.mu.Lock()
	delete(ts.subs, s)
	empty := len(ts.subs) == 0
	ts.mu.Unlock()
	if empty {
		b.mu.Lock()
		// Still empty under the bus's lock: a Subscribe joins ts only
		// while holding it.
		ts.mu.Lock()
		empty = len(ts.subs) == 0
		ts.mu.Unlock()
		if empty {
			b.dropLocked(ts)
		}
		b.mu.Unlock()
	}
}

func (b *Bus) drop(ts *threadSub) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropLocked(ts)
}

func (b *Bus) dropLocked(ts *threadSub) {
	if b.threads[ts.thread] == ts {
		delete(b.threads, ts.thread)
	}
	if ts.ns != nil {
		delete(b.byNATS, ts.ns)
		_ = ts.ns.Unsubscribe()
	}
}

// endAll ends every local subscriber of ts with err and drops ts.
func (b *Bus) endAll(ts *threadSub, err error) {
	b.mu.Lock()
	b.dropLocked(ts)
	b.mu.Unlock()
	ts.mu.Lock()
	subs := ts.subs
	ts.subs = map[*subscription]struct{}{}
	ts.mu.Unlock()
	for s := range subs {
		s.End(err)
	}
}

// asyncError handles what NATS reports outside any call: a subscription it
// dropped messages of (NATS's own slow consumer) has missed events.
func (b *Bus) asyncError(ns *natsgo.Subscription, err error) {
	if ns == nil {
		b.log.Warn("nats: connection error", "err", err)
		return
	}
	b.mu.Lock()
	ts := b.byNATS[ns]
	b.mu.Unlock()
	if ts == nil {
		return
	}
	b.log.Warn("nats: a thread's subscription lost events; its subscribers resume from the log", "thread", ts.thread, "err", err)
	b.endAll(ts, fmt.Errorf("%w: %v", bus.ErrMissed, err))
}

// reconnected ends every subscription open across an outage: events
// published meanwhile never reached them.
func (b *Bus) reconnected() {
	b.mu.Lock()
	threads := make([]*threadSub, 0, len(b.threads))
	for _, ts := range b.threads {
		threads = append(threads, ts)
	}
	b.mu.Unlock()
	b.log.Info("NATS connection back; subscriptions resume from the log", "threads", len(threads))
	for _, ts := range threads {
		b.endAll(ts, bus.ErrMissed)
	}
}

// reply is a command's answer on the wire: empty on success.
type reply struct {
	Error string `json:"error,omitempty"`
	// Name is the registered error (bus.RegisterError) Error matched.
	Name string `json:"name,omitempty"`
}

// Previews implements bus.Bus: previews do not cross the network; a
// subscriber sees each delta once it is committed.
func (b *Bus) Previews() bool { return false }

// Preview implements bus.Bus: it does nothing (Previews).
func (*Bus) Preview(string, event.Event) {}

// WaitsForCommits implements bus.Bus: every subscriber waits for commits.
func (*Bus) WaitsForCommits(string) bool { return true }

// Send implements bus.Bus: a request to the thread's command subject. With
// no handler anywhere NATS answers at once that nobody listens
// (bus.ErrNoHandler); a handler that takes longer than RequestTimeout gets
// ErrNoAnswer.
func (b *Bus) Send(ctx context.Context, thread string, cmd event.Command) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.isClosed() {
		return bus.ErrClosed
	}
	data, err := json.Marshal(cmd)
	if err != nil {
		return fmt.Errorf("nats: send %s: %w", cmd.Kind, err)
	}
	rctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
	defer cancel()
	m, err := b.nc.RequestWithContext(rctx, b.commandSubject(thread), data)
	switch {
	case errors.Is(err, natsgo.ErrNoResponders):
		return bus.ErrNoHandler
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, natsgo.ErrTimeout):
		return fmt.Errorf("%w (%s for a %s command)", ErrNoAnswer, b.opts.RequestTimeout, cmd.Kind)
	case err != nil:
		return fmt.Errorf("nats: send %s to %q: %w", cmd.Kind, thread, err)
	}
	var r reply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return fmt.Errorf("nats: the answer to %s does not decode: %w", cmd.Kind, err)
	}
	if r.Error == "" {
		return nil
	}
	return &bus.RemoteError{Text: r.Error, Name: r.Name}
}

// handler is a thread's command handler on this node.
type handler struct {
	ns *natsgo.Subscription

	mu      sync.Mutex
	stopped bool
	calls   sync.WaitGroup
}

// HandleCommands implements bus.Bus. On this node one handler per thread
// is allowed; across nodes the run claims in the store make sure only the
// thread's owner handles them.
func (b *Bus) HandleCommands(ctx context.Context, thread string, fn bus.Handler) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("bus: nil handler")
	}
	h := &handler{}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, bus.ErrClosed
	}
	if b.handlers[thread] != nil {
		b.mu.Unlock()
		return nil, bus.ErrHandlerExists
	}
	b.handlers[thread] = h
	b.mu.Unlock()
	ns, err := b.nc.Subscribe(b.commandSubject(thread), func(m *natsgo.Msg) {
		h.mu.Lock()
		if h.stopped {
			h.mu.Unlock()
			// Stopped while the command was on its way: the sender looks
			// for the thread's next owner.
			name, _ := bus.ErrorName(bus.ErrNoHandler)
			data, _ := json.Marshal(reply{Error: bus.ErrNoHandler.Error(), Name: name})
			_ = m.Respond(data)
			return
		}
		h.calls.Add(1)
		h.mu.Unlock()
		defer h.calls.Done()
		var r reply
		var cmd event.Command
		if err := json.Unmarshal(m.Data, &cmd); err != nil {
			r.Error = "the command does not decode: " + err.Error()
		} else if err := fn(context.Background(), cmd); err != nil {
			r.Error = err.Error()
			r.Name, _ = bus.ErrorName(err)
		}
		data, _ := json.Marshal(r)
		if err := m.Respond(data); err != nil {
			b.log.Warn("nats: answer a command", "thread", thread, "err", err)
		}
	})
	if err == nil {
		err = b.flush(ctx)
	}
	if err != nil {
		if ns != nil {
			_ = ns.Unsubscribe()
		}
		b.mu.Lock()
		delete(b.handlers, thread)
		b.mu.Unlock()
		return nil, fmt.Errorf("nats: handle the commands of %q: %w", thread, err)
	}
	h.ns = ns
	var once sync.Once
	stop := func() {
		once.Do(func() {
			h.mu.Lock()
			h.stopped = true
			h.mu.Unlock()
			b.retire(thread, ns)
			h.calls.Wait()
			b.mu.Lock()
			if b.handlers[thread] == h {
				delete(b.handlers, thread)
			}
			b.mu.Unlock()
		})
	}
	return stop, nil
}

// retire ends a stopped handler's subscription; once it returns, Sends
// find no handler here.
//
// Connected, it drains rather than unsubscribes: a command the server
// delivered before it had the unsubscription is still answered (with
// bus.ErrNoHandler, so its sender claims the thread itself) instead of
// dropped, which would leave the sender waiting for an answer that never
// comes. A drain must not straddle a reconnect, though: nats.go resends
// the draining subscription to the new server and later forgets it
// without unsubscribing, which leaves the server routing the thread's
// commands to a subscription nobody answers, so every Send to the thread
// would time out. A drain across a reconnect therefore ends with a forced
// reconnect, whose new connection knows only the live subscriptions.
// Disconnected, it unsubscribes: nothing reaches the subscription meanwhile,
// and the reconnect leaves it out.
func (b *Bus) retire(thread string, ns *natsgo.Subscription) {
	if !b.nc.IsConnected() {
		_ = ns.Unsubscribe()
		return
	}
	before := b.nc.Stats().Reconnects
	b.mu.Lock()
	b.retiring[ns] = before
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.retiring, ns)
		b.mu.Unlock()
	}()
	closed := ns.StatusChanged(natsgo.SubscriptionClosed)
	if err := ns.Drain(); err != nil {
		b.log.Warn("nats: stop handling a thread's commands", "thread", thread, "err", err)
		_ = ns.Unsubscribe()
		return
	}
	// The drain's flush gives up on its own (nats.go's Flush waits 10 s);
	// the timer only bounds a drain whose handler calls hang.
	timer := time.NewTimer(b.opts.RequestTimeout + 10*time.Second)
	select {
	case <-closed:
	case <-timer.C:
		b.log.Warn("nats: stop handling a thread's commands: the drain did not end", "thread", thread)
	}
	timer.Stop()
	_ = ns.Unsubscribe() // a drain that did not end ends here
	if b.nc.Stats().Reconnects != before && !b.isClosed() {
		b.log.Info("nats: a thread's command handler stopped across a reconnect; reconnecting to drop its subscription on the server", "thread", thread)
		if err := b.nc.ForceReconnect(); err != nil && !errors.Is(err, natsgo.ErrConnectionClosed) {
			b.log.Warn("nats: reconnect", "err", err)
		}
	}
}

func (b *Bus) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Close implements bus.Bus: subscriptions end with bus.ErrClosed, handlers
// stop (after the calls in flight), and the connection closes.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	threads := b.threads
	handlers := b.handlers
	b.threads, b.byNATS, b.handlers = map[string]*threadSub{}, map[*natsgo.Subscription]*threadSub{}, map[string]*handler{}
	b.mu.Unlock()
	for _, ts := range threads {
		if ts.ns != nil {
			_ = ts.ns.Unsubscribe()
		}
		ts.mu.Lock()
		for s := range ts.subs {
			s.End(bus.ErrClosed)
		}
		ts.mu.Unlock()
	}
	for _, h := range handlers {
		h.mu.Lock()
		h.stopped = true
		h.mu.Unlock()
		if h.ns != nil {
			_ = h.ns.Unsubscribe()
		}
		h.calls.Wait()
	}
	b.nc.Close()
	return nil
}
