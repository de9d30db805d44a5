// Package wsconn is the connection plumbing the four WebSocket protocols
// share: the handler goroutine reads, one writer goroutine owns writes, the
// outbound queue is bounded (a client that does not read is disconnected,
// never allowed to stall the server), every write has a deadline, and a
// Registry closes every socket with "going away" on shutdown, which
// http.Server.Shutdown does not do.
package wsconn

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Options tune a connection.
type Options struct {
	// QueueSize is how many outbound frames may wait (default 1024).
	QueueSize int
	// ReadLimit is the largest frame read; a larger one closes the socket
	// with 1009 "message too big" (default 4 MiB).
	ReadLimit int64
	// WriteTimeout bounds each write (default 10 s).
	WriteTimeout time.Duration
	// OriginPatterns are the browser origins allowed besides the server's
	// own host (see websocket.AcceptOptions).
	OriginPatterns []string
	Logger         *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.QueueSize <= 0 {
		o.QueueSize = 1024
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = 4 << 20
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
	ws   *websocket.Conn
	opts Options
	out  chan []byte

	mu      sync.Mutex
	closing bool
	code    websocket.StatusCode
	reason  string
	flush   bool
	closed  chan struct{} // closed when Close is first called
}

// Serve accepts the WebSocket of r, registers it, and runs handle, which
// reads frames with Read until it returns. When handle returns the socket is
// closed (normally, unless Close chose another code) and Serve waits for the
// writer. The context given to handle ends when the connection closes.
func Serve(w http.ResponseWriter, r *http.Request, reg *Registry, opts Options, handle func(ctx context.Context, c *Conn) error) {
	opts = opts.withDefaults()
	if !reg.enter() {
		http.Error(w, ReasonShutdown, http.StatusServiceUnavailable)
		return
	}
	defer reg.leave()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: opts.OriginPatterns})
	if err != nil {
		opts.Logger.Debug("websocket accept", "err", err)
		return
	}
	ws.SetReadLimit(opts.ReadLimit)
	c := &Conn{ws: ws, opts: opts, out: make(chan []byte, opts.QueueSize), closed: make(chan struct{})}
	reg.add(c)
	defer reg.remove(c)

	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		c.writeLoop(ctx)
	}()
	if err := handle(ctx, c); err != nil && !errors.Is(err, context.Canceled) {
		opts.Logger.Debug("websocket handler", "err", err)
	}
	c.CloseAfterFlush(websocket.StatusNormalClosure, "")
	wg.Wait()
}

// Read returns the next text or binary frame.
func (c *Conn) Read(ctx context.Context) ([]byte, error) {
	_, b, err := c.ws.Read(ctx)
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
	select {
	case c.out <- frame:
		return true
	default:
		c.closeLocked(websocket.StatusPolicyViolation, ReasonSlow, false)
		return false
	}
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

// Done is closed once the connection starts closing.
func (c *Conn) Done() <-chan struct{} { return c.closed }

func (c *Conn) closeLocked(code websocket.StatusCode, reason string, flush bool) {
	if c.closing {
		return
	}
	c.closing, c.code, c.reason, c.flush = true, code, reason, flush
	close(c.closed)
}

func (c *Conn) write(ctx context.Context, f []byte) error {
	wctx, cancel := context.WithTimeout(ctx, c.opts.WriteTimeout)
	defer cancel()
	return c.ws.Write(wctx, websocket.MessageText, f)
}

// writeLoop owns every write to the socket, including the close.
func (c *Conn) writeLoop(ctx context.Context) {
	for {
		select {
		case f := <-c.out:
			if err := c.write(ctx, f); err != nil {
				c.Close(websocket.StatusInternalError, "write failed")
				_ = c.ws.CloseNow()
				return
			}
		case <-c.closed:
			c.mu.Lock()
			code, reason, flush := c.code, c.reason, c.flush
			c.mu.Unlock()
			if flush {
				for drained := false; !drained; {
					select {
					case f := <-c.out:
						if c.write(ctx, f) != nil {
							drained = true
						}
					default:
						drained = true
					}
				}
			}
			_ = c.ws.Close(code, reason)
			return
		}
	}
}

// Registry tracks open connections for shutdown.
type Registry struct {
	mu       sync.Mutex
	conns    map[*Conn]struct{}
	stopping bool
	active   sync.WaitGroup
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{conns: map[*Conn]struct{}{}} }

func (r *Registry) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return false
	}
	r.active.Add(1)
	return true
}

func (r *Registry) leave() { r.active.Done() }

func (r *Registry) add(c *Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
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
	r.mu.Lock()
	r.stopping = true
	for c := range r.conns {
		c.Close(websocket.StatusGoingAway, ReasonShutdown)
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.active.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
