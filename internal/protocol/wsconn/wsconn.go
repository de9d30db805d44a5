// Package wsconn is the connection plumbing the four WebSocket protocols
// share: the socket's goroutine reads (Start: a goroutine of its own, so
// that the HTTP request's deep stack and state go once the socket is
// accepted), one writer goroutine at a time owns
// writes and runs only while frames wait, the outbound queue is bounded (a
// client that does not read is disconnected, never allowed to stall the
// server) and grows only while frames wait, so an idle socket holds neither
// a writer nor a buffer; every write has a deadline, and a
// Registry closes every socket with "going away" on shutdown, which
// http.Server.Shutdown does not do.
package wsconn

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/protocol/drain"
	"github.com/agentwire/agentwire/internal/wire"
)

// Options tune a connection.
type Options struct {
	// QueueSize is how many outbound frames may wait while the writer is
	// busy (default 1024). The queue takes memory only for the frames in
	// it.
	QueueSize int
	// ReadLimit is the largest frame read; a larger one closes the socket
	// with 1009 "message too big" (default wire.MaxReadBytes).
	ReadLimit int64
	// WriteTimeout bounds each write (default 10 s): one that blocks is
	// cut after between half of it and all of it.
	WriteTimeout time.Duration
	// OriginPatterns are the browser origins allowed besides the server's
	// own host (see websocket.AcceptOptions).
	OriginPatterns []string
	// SkipOriginCheck leaves the Origin check to the server, which checks
	// every upgrade before a handler runs.
	SkipOriginCheck bool
	// Subprotocols are the subprotocols the server selects when a client
	// offers one of them.
	Subprotocols []string
	Logger       *slog.Logger
	// Metrics counts the connections, their frames and the slow
	// consumers, labelled Protocol; nil counts nothing.
	Metrics  *metrics.Metrics
	Protocol string
}

func (o Options) withDefaults() Options {
	if o.QueueSize <= 0 {
		o.QueueSize = 1024
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = wire.MaxReadBytes
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Close reasons the server uses.
const (
	ReasonSlow     = "slow consumer: the client did not read its frames in time"
	ReasonShutdown = "server shutting down"
)

// Conn is one accepted WebSocket.
type Conn struct {
	ws     *websocket.Conn
	opts   Options
	frames metrics.Frames     // opts.Protocol's
	ctx    context.Context    // the connection's: ends when the socket closes
	end    context.CancelFunc // ends ctx once the socket is closed
	writer sync.WaitGroup     // the writer goroutine, while one runs
	// The writers' deadline (armWriteDeadline): wtimer, made by the
	// first write, cuts a write that is still under way at wuntil (unix
	// ns); wbusy is set while a write is. Only the writer of the moment
	// arms it.
	wtimer *time.Timer
	wuntil atomic.Int64
	wbusy  atomic.Bool

	mu      sync.Mutex
	queue   [][]byte // frames waiting for the writer
	writing bool     // a writer runs (or the socket is closed and none may)
	closing bool
	code    websocket.StatusCode
	reason  string
	flush   bool
	closed  chan struct{} // closed when Close is first called; made by the first Done
}

// Serve accepts the WebSocket of r, registers it, and runs handle, which
// reads frames with Read until it returns. When handle returns the socket is
// closed (normally, unless Close chose another code) and Serve waits for the
// writer. The context given to handle ends when the connection closes.
func Serve(w http.ResponseWriter, r *http.Request, reg *Registry, opts Options, handle func(ctx context.Context, c *Conn) error) {
	if run := accept(w, r, reg, opts); run != nil {
		run(handle)
	}
}

// Start is Serve on a goroutine of the socket's own: it accepts the
// WebSocket of r and returns, and handle runs on a new goroutine, which
// the Registry's Shutdown waits for. The request's goroutine, whose stack
// the HTTP server and its middleware have made deep, ends, with what the
// HTTP server kept for the request besides the buffers the WebSocket took
// over; the socket's goroutine starts with a small stack and keeps only
// the reader's call chain while it waits for a frame. A panic in handle is logged and
// closes the socket with 1011, as the HTTP server would recover it. Start
// reports whether handle runs; when it does not, the request has been
// answered (refused, or the upgrade failed).
func Start(w http.ResponseWriter, r *http.Request, reg *Registry, opts Options, handle func(ctx context.Context, c *Conn) error) bool {
	opts = opts.withDefaults()
	run := accept(w, r, reg, opts)
	if run == nil {
		return false
	}
	go run(func(ctx context.Context, c *Conn) (err error) {
		defer func() {
			if p := recover(); p != nil {
				opts.Logger.Error("websocket handler panicked", "panic", p, "stack", string(debug.Stack()))
				c.Close(websocket.StatusInternalError, "internal error")
				err = nil
			}
		}()
		return handle(ctx, c)
	})
	return true
}

// accept upgrades r and registers the socket; the func it returns runs
// handle on it and then closes it and unregisters it, and must be called.
// nil means the request was refused or the upgrade failed.
func accept(w http.ResponseWriter, r *http.Request, reg *Registry, opts Options) func(handle func(ctx context.Context, c *Conn) error) {
	opts = opts.withDefaults()
	if !reg.enter() {
		http.Error(w, ReasonShutdown, http.StatusServiceUnavailable)
		return nil
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: opts.OriginPatterns,
		InsecureSkipVerify: opts.SkipOriginCheck, Subprotocols: opts.Subprotocols})
	if err != nil {
		opts.Logger.Debug("websocket accept", "err", err)
		reg.leave()
		return nil
	}
	ws.SetReadLimit(opts.ReadLimit)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	c := &Conn{ws: ws, opts: opts, frames: opts.Metrics.Frames(opts.Protocol), ctx: ctx, end: cancel}
	reg.add(c)
	opened := opts.Metrics.ConnOpened(opts.Protocol)
	return func(handle func(ctx context.Context, c *Conn) error) {
		defer reg.leave()
		defer cancel()
		defer reg.remove(c)
		defer opened()
		if err := handle(ctx, c); err != nil && !errors.Is(err, context.Canceled) {
			opts.Logger.Debug("websocket handler", "err", err)
		}
		c.CloseAfterFlush(websocket.StatusNormalClosure, "")
		c.writer.Wait()
	}
}

// ReasonInvalidUTF8 closes a socket (1007) that sent a text frame that is
// not UTF-8, as RFC 6455 requires.
const ReasonInvalidUTF8 = "a text frame must be UTF-8"

// Read returns the next text or binary frame. A text frame that is not
// valid UTF-8 closes the socket with 1007 and ends the reading.
func (c *Conn) Read(ctx context.Context) ([]byte, error) {
	typ, b, err := c.ws.Read(ctx)
	if err == nil {
		c.frames.Received()
	}
	if err == nil && typ == websocket.MessageText && !utf8.Valid(b) {
		c.Close(websocket.StatusInvalidFramePayloadData, ReasonInvalidUTF8)
		return nil, errors.New("wsconn: " + ReasonInvalidUTF8)
	}
	return b, err
}

// Send queues a frame. When the queue is full the client is not keeping
// up: the connection is closed as a slow consumer and Send reports false.
// Frames sent after Close are dropped.
func (c *Conn) Send(frame []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	if len(c.queue) >= c.opts.QueueSize {
		c.opts.Metrics.SlowConsumer(c.opts.Protocol)
		c.closeLocked(websocket.StatusPolicyViolation, ReasonSlow, false)
		return false
	}
	c.queue = append(c.queue, frame)
	c.wakeLocked()
	return true
}

// wakeLocked starts a writer unless one runs. c.mu is held.
func (c *Conn) wakeLocked() {
	if c.writing {
		return
	}
	c.writing = true
	c.writer.Add(1)
	go func() {
		defer c.writer.Done()
		c.writeOut()
	}()
}

// Close closes the socket with code and reason, dropping queued frames.
func (c *Conn) Close(code websocket.StatusCode, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(code, reason, false)
}

// CloseAfterFlush closes the socket once the frames already queued are
// written.
func (c *Conn) CloseAfterFlush(code websocket.StatusCode, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(code, reason, true)
}

// Refuse closes the socket with 1008 (policy violation): it asked for
// what it may not have, such as another principal's thread. With flush
// the frames already queued go first; without, they are dropped. Refuse,
// Fail and Finish are the close codes the adapters end a socket with,
// mapped in one place.
func (c *Conn) Refuse(reason string, flush bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(websocket.StatusPolicyViolation, reason, flush)
}

// Fail closes the socket with 1011 (internal error) once the frames
// already queued are written.
func (c *Conn) Fail(reason string) { c.CloseAfterFlush(websocket.StatusInternalError, reason) }

// Finish closes the socket normally (1000) once the frames already
// queued are written.
func (c *Conn) Finish(reason string) { c.CloseAfterFlush(websocket.StatusNormalClosure, reason) }

// Done is closed once the connection starts closing.
func (c *Conn) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed == nil {
		c.closed = make(chan struct{})
		if c.closing {
			close(c.closed)
		}
	}
	return c.closed
}

func (c *Conn) closeLocked(code websocket.StatusCode, reason string, flush bool) {
	if c.closing {
		return
	}
	c.closing, c.code, c.reason, c.flush = true, code, reason, flush
	if c.closed != nil {
		close(c.closed)
	}
	c.wakeLocked() // the writer sends the close frame
}

func (c *Conn) write(f []byte) error {
	c.frames.Sent()
	c.armWriteDeadline()
	c.wbusy.Store(true)
	// The context has no Done: the deadline is the timer's, and a
	// context that can end costs coder/websocket a context.AfterFunc per
	// write. The connection's end closes the socket, which ends a write.
	err := c.ws.Write(context.Background(), websocket.MessageText, f)
	c.wbusy.Store(false)
	return err
}

// armWriteDeadline sets the deadline that bounds a write: the write
// timeout from now, moved only once half of it has passed (a context or a
// timer reset per frame costs more than writing a small frame), so that a
// write that blocks is cut after between half the timeout and all of it.
// The deadline is stored before the write is marked under way, so the
// timer never judges a new write by an old deadline. Only the writer
// calls it; an idle socket keeps the spent timer, nothing else, and a
// closed one stops it (finish).
func (c *Conn) armWriteDeadline() {
	now := time.Now().UnixNano()
	if c.wuntil.Load()-now >= int64(c.opts.WriteTimeout/2) {
		return
	}
	c.wuntil.Store(now + int64(c.opts.WriteTimeout))
	if c.wtimer == nil {
		c.wtimer = time.AfterFunc(c.opts.WriteTimeout, c.writeTimedOut)
		return
	}
	c.wtimer.Reset(c.opts.WriteTimeout)
}

// writeTimedOut runs when the write deadline passes: a write still under
// way is cut by closing the socket under it, and the writer, its write
// failed, ends the connection. A timer that fires late, after the
// deadline moved on, finds it not yet passed and does nothing.
func (c *Conn) writeTimedOut() {
	if c.wbusy.Load() && time.Now().UnixNano() >= c.wuntil.Load() {
		_ = c.ws.CloseNow()
	}
}

// writeOut is the writer: it owns every write to the socket, including
// the close. It takes the whole queue at a time and writes it out, so Send
// never waits for a write, and returns once the queue is empty; the next
// Send starts another. A Close without flush stops it between two frames.
// The writer that closes the socket ends the connection's context, and no
// writer starts after it.
func (c *Conn) writeOut() {
	var batch [][]byte
	for {
		c.mu.Lock()
		if c.closing && !c.flush {
			c.queue = nil
			c.mu.Unlock()
			c.closeSocket()
			return
		}
		// Swap the buffers: the writer reuses the one it emptied.
		batch, c.queue = c.queue, batch
		closing := c.closing
		if len(batch) == 0 && !closing {
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()

		if len(batch) == 0 {
			c.closeSocket()
			return
		}
		for _, f := range batch {
			if c.stopped() {
				break
			}
			if err := c.write(f); err != nil {
				if closing {
					// Flushing before a close: the close goes as it can.
					c.closeSocket()
					return
				}
				c.Close(websocket.StatusInternalError, "write failed")
				_ = c.ws.CloseNow()
				c.finish()
				return
			}
		}
		// A buffer grown by a burst is let go; the writer's own goes
		// with it when the queue is empty.
		clear(batch)
		if cap(batch) > 64 {
			batch = nil
		}
		batch = batch[:0]
	}
}

// stopped reports whether the connection is closing without flushing what
// is queued.
func (c *Conn) stopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing && !c.flush
}

// closeSocket sends the close frame Close chose and ends the connection's
// context.
func (c *Conn) closeSocket() {
	c.mu.Lock()
	code, reason := c.code, c.reason
	c.mu.Unlock()
	_ = c.ws.Close(code, reason)
	c.finish()
}

// finish is the writer's last act on a closed socket: it stops the write
// deadline's timer, which would otherwise keep the connection until it
// fired, and ends the connection's context.
func (c *Conn) finish() {
	if c.wtimer != nil {
		c.wtimer.Stop()
	}
	c.end()
}

// Registry tracks open connections for shutdown.
type Registry struct {
	mu     sync.Mutex
	conns  map[*Conn]struct{}
	active drain.Group // one per Serve, from before the upgrade until its handler returns
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{conns: map[*Conn]struct{}{}} }

func (r *Registry) enter() bool { return r.active.Enter() }

func (r *Registry) leave() { r.active.Leave() }

func (r *Registry) add(c *Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active.Stopping().Err() != nil {
		c.Close(websocket.StatusGoingAway, ReasonShutdown)
	}
	r.conns[c] = struct{}{}
}

func (r *Registry) remove(c *Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
}

// Len reports how many connections are open.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// Shutdown refuses new connections, closes every open one with 1001
// "going away", and waits for their handlers until ctx is done.
func (r *Registry) Shutdown(ctx context.Context) error {
	return r.active.Shutdown(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for c := range r.conns {
			c.Close(websocket.StatusGoingAway, ReasonShutdown)
		}
	})
}
