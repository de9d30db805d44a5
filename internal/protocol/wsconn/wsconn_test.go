package wsconn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoServer serves sockets that echo every frame and records each Conn.
func echoServer(t *testing.T, reg *Registry, opts Options) (*httptest.Server, chan *Conn) {
	conns := make(chan *Conn, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Serve(w, r, reg, opts, func(ctx context.Context, c *Conn) error {
			conns <- c
			for {
				b, err := c.Read(ctx)
				if err != nil {
					return err
				}
				c.Send(b)
			}
		})
	}))
	t.Cleanup(srv.Close)
	return srv, conns
}

func dial(t *testing.T, srv *httptest.Server) *websocket.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err)
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

func TestEcho(t *testing.T) {
	reg := NewRegistry()
	srv, _ := echoServer(t, reg, Options{})
	ws := dial(t, srv)
	ctx := context.Background()
	require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte("hello")))
	_, b, err := ws.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
}

// A client that stops reading is disconnected as a slow consumer; the
// server never blocks on it, and another client is unaffected.
func TestSlowConsumerIsDisconnected(t *testing.T) {
	reg := NewRegistry()
	m := metrics.New()
	srv, conns := echoServer(t, reg, Options{QueueSize: 4, WriteTimeout: time.Minute, Metrics: m, Protocol: "p"})
	slow := dial(t, srv)
	slowConn := <-conns
	fast := dial(t, srv)
	<-conns

	big := []byte(strings.Repeat("x", 1<<20))
	sent := 0
	for slowConn.Send(big) {
		sent++
		require.Less(t, sent, 10_000, "the queue never filled")
	}
	select {
	case <-slowConn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("slow connection not closing")
	}
	n, _ := m.Sample("agentwire_slow_consumer_disconnects_total", map[string]string{"protocol": "p"})
	assert.Equal(t, 1.0, n, "slow consumers counted")

	// The slow client, once it reads, drains what was written and then sees
	// the close with the slow-consumer reason.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for err == nil {
		_, _, err = slow.Read(ctx)
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		assert.Equal(t, websocket.StatusPolicyViolation, ce.Code)
		assert.Equal(t, ReasonSlow, ce.Reason)
	}

	require.NoError(t, fast.Write(ctx, websocket.MessageText, []byte("still here")))
	_, b, err := fast.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, "still here", string(b))
}

func TestShutdownClosesWithGoingAway(t *testing.T) {
	reg := NewRegistry()
	srv, conns := echoServer(t, reg, Options{})
	ws := dial(t, srv)
	<-conns
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, reg.Shutdown(ctx))
	_, _, err := ws.Read(ctx)
	assert.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err))
	assert.Equal(t, 0, reg.Len())

	// New sockets are refused once shutting down.
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.Error(t, err)
	if resp != nil {
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	}
}

func TestCloseAfterFlushWritesQueuedFrames(t *testing.T) {
	reg := NewRegistry()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Serve(w, r, reg, Options{}, func(ctx context.Context, c *Conn) error {
			for i := 0; i < 3; i++ {
				c.Send([]byte{'a' + byte(i)})
			}
			c.CloseAfterFlush(websocket.StatusNormalClosure, "done")
			return nil
		})
	}))
	defer srv.Close()
	ws := dial(t, srv)
	ctx := context.Background()
	var got []string
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err))
			break
		}
		got = append(got, string(b))
	}
	assert.Equal(t, []string{"a", "b", "c"}, got)
}

// Frames from several senders reach the client in the order each sender
// queued them, none lost; once the burst is written the socket holds no
// queue.
func TestBurstArrivesInOrderAndTheQueueIsReleased(t *testing.T) {
	reg := NewRegistry()
	const senders, each = 4, 500
	conns := make(chan *Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Serve(w, r, reg, Options{QueueSize: senders * each}, func(ctx context.Context, c *Conn) error {
			conns <- c
			var wg sync.WaitGroup
			for s := range senders {
				wg.Go(func() {
					for i := range each {
						c.Send(fmt.Appendf(nil, "%d %d", s, i))
					}
				})
			}
			wg.Wait()
			_, err := c.Read(ctx)
			return err
		})
	}))
	defer srv.Close()
	ws := dial(t, srv)
	c := <-conns
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	next := make([]int, senders)
	for range senders * each {
		_, b, err := ws.Read(ctx)
		require.NoError(t, err)
		var s, i int
		_, err = fmt.Sscanf(string(b), "%d %d", &s, &i)
		require.NoError(t, err)
		require.Equal(t, next[s], i, "sender %d", s)
		next[s]++
	}
	// Everything arrived, so the writer has taken the last batch; it
	// holds no frame and no grown buffer once it has written it.
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.queue == nil || cap(c.queue) <= 64
	}, 10*time.Second, time.Millisecond)
}

// Close without flush drops what is queued: the client sees the close
// after at most the frame being written.
func TestCloseDropsQueuedFrames(t *testing.T) {
	reg := NewRegistry()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Serve(w, r, reg, Options{}, func(ctx context.Context, c *Conn) error {
			c.mu.Lock() // hold the writer back until every frame is queued
			c.queue = append(c.queue, []byte("a"), []byte("b"), []byte("c"))
			c.closeLocked(websocket.StatusPolicyViolation, "stop", false)
			c.mu.Unlock()
			return nil
		})
	}))
	defer srv.Close()
	ws := dial(t, srv)
	_, _, err := ws.Read(context.Background())
	assert.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err), "got %v", err)
}

// TestIdleSocketHasNoWriter: a writer runs only while frames wait. Once
// the echo is written the socket has none; the next frame starts one, and
// closing the socket still sends its close frame.
func TestIdleSocketHasNoWriter(t *testing.T) {
	reg := NewRegistry()
	srv, conns := echoServer(t, reg, Options{})
	ws := dial(t, srv)
	c := <-conns
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	writing := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writing
	}
	for i := range 3 {
		msg := fmt.Sprintf("frame %d", i)
		require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte(msg)))
		_, b, err := ws.Read(ctx)
		require.NoError(t, err)
		assert.Equal(t, msg, string(b))
		require.Eventually(t, func() bool { return !writing() }, 5*time.Second, time.Millisecond, "the writer ends once the queue is empty")
	}
	c.Close(websocket.StatusGoingAway, ReasonShutdown)
	_, _, err := ws.Read(ctx)
	assert.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err), "the close frame is sent by a writer started for it: %v", err)
}

// TestWriteTimeout: a write to a client that has stopped reading is cut
// once the write timeout has passed, closing the connection; a client that
// reads is written to however long the connection has been quiet (the
// deadline writes share moves on).
func TestWriteTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	reg := NewRegistry()
	srv, conns := echoServer(t, reg, Options{QueueSize: 1 << 20, WriteTimeout: timeout})

	reading := dial(t, srv)
	<-conns
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		require.NoError(t, reading.Write(ctx, websocket.MessageText, []byte("ping")))
		_, b, err := reading.Read(ctx)
		require.NoError(t, err, "a write after a quiet spell longer than the timeout")
		assert.Equal(t, "ping", string(b))
		time.Sleep(2 * timeout) // past the deadline the last write set
	}

	dial(t, srv) // a client that never reads
	stuckConn := <-conns
	big := []byte(strings.Repeat("x", 1<<20))
	for range 64 { // far more than the socket buffers hold
		require.True(t, stuckConn.Send(big), "the queue is not what ends it here")
	}
	select {
	case <-stuckConn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a write to a client that does not read was never cut")
	}
}

// TestStartServesOnItsOwnGoroutine: Start returns once the socket is
// accepted and the request's handler with it, while the socket goes on
// being served; the Registry's Shutdown waits for the socket's goroutine,
// and a panic in it closes the socket with 1011.
func TestStartServesOnItsOwnGoroutine(t *testing.T) {
	reg := NewRegistry()
	returned := make(chan bool, 4)
	handled := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		returned <- Start(w, r, reg, Options{}, func(ctx context.Context, c *Conn) error {
			defer close(handled)
			for {
				b, err := c.Read(ctx)
				if err != nil {
					return err
				}
				if string(b) == "panic" {
					panic("a bug")
				}
				c.Send(b)
			}
		})
	}))
	t.Cleanup(srv.Close)
	ws := dial(t, srv)
	select {
	case ok := <-returned:
		assert.True(t, ok, "Start reports that the socket is served")
	case <-time.After(5 * time.Second):
		t.Fatal("the request's handler did not return while its socket is open")
	}
	ctx := context.Background()
	require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte("hello")))
	_, b, err := ws.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b), "the socket is served after its request's handler returned")

	require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte("panic")))
	_, _, err = ws.Read(ctx)
	assert.Equal(t, websocket.StatusInternalError, websocket.CloseStatus(err), "a panic closes the socket with 1011: %v", err)
	<-handled
	require.NoError(t, reg.Shutdown(ctx), "the socket's goroutine has ended")

	// Refused at shutdown: Start reports it does not serve.
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.False(t, <-returned)
}

// TestShutdownWaitsForStartedSockets: the Registry's Shutdown closes a
// socket Start serves with "going away" and returns once its goroutine
// has ended.
func TestShutdownWaitsForStartedSockets(t *testing.T) {
	reg := NewRegistry()
	var ended sync.WaitGroup
	ended.Add(1)
	finished := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Start(w, r, reg, Options{}, func(ctx context.Context, c *Conn) error {
			defer ended.Done()
			for {
				if _, err := c.Read(ctx); err != nil {
					time.Sleep(100 * time.Millisecond) // a handler that takes a moment to end
					close(finished)
					return err
				}
			}
		})
	}))
	t.Cleanup(srv.Close)
	ws := dial(t, srv)
	go func() {
		for {
			if _, _, err := ws.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	require.Eventually(t, func() bool { return reg.Len() == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, reg.Shutdown(ctx))
	select {
	case <-finished:
	default:
		t.Fatal("Shutdown returned before the socket's goroutine ended")
	}
	ended.Wait()
}
