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
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/agentwire/agentwire/internal/bus"
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
