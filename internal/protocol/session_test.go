package protocol_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/drain"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
)

// sessionServer serves sockets with the session skeleton: the follow
// sends "follow" and then "ended" once its context ends; the reader
// echoes every frame; a socket refused at shutdown gets "shutting down".
func sessionServer(t *testing.T, streams *drain.Group) (*httptest.Server, <-chan struct{}) {
	ended := make(chan struct{}, 16)
	reg := wsconn.NewRegistry()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wsconn.Serve(w, r, reg, wsconn.Options{}, func(ctx context.Context, c *wsconn.Conn) error {
			return protocol.Session{
				Open: func(context.Context) func(context.Context) {
					if r.URL.Query().Has("refuse") {
						c.Refuse("refused", true)
						return nil
					}
					return func(ctx context.Context) {
						c.Send([]byte("follow"))
						<-ctx.Done()
						c.Send([]byte("ended"))
						ended <- struct{}{}
					}
				},
				Handle:       func(_ context.Context, frame []byte) { c.Send(frame) },
				ShuttingDown: func() { c.Send([]byte("shutting down")) },
			}.Serve(ctx, c, streams)
		})
	}))
	t.Cleanup(func() {
		_ = reg.Shutdown(context.Background())
		srv.Close()
	})
	return srv, ended
}

func dialSession(t *testing.T, srv *httptest.Server, query string) *websocket.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+query, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

func readText(t *testing.T, ws *websocket.Conn) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := ws.Read(ctx)
	require.NoError(t, err)
	return string(b)
}

// The follow and the reader run side by side; the adapter's Shutdown ends
// the follow while the socket stays open, and waits for it.
func TestSessionFollowAndReader(t *testing.T) {
	var streams drain.Group
	srv, ended := sessionServer(t, &streams)
	ws := dialSession(t, srv, "")
	assert.Equal(t, "follow", readText(t, ws))
	require.NoError(t, ws.Write(context.Background(), websocket.MessageText, []byte("ping")))
	assert.Equal(t, "ping", readText(t, ws), "the reader handles frames while the follow runs")

	require.NoError(t, streams.Shutdown(context.Background(), nil))
	select {
	case <-ended:
	default:
		t.Fatal("Shutdown returned before the follow ended")
	}
	assert.Equal(t, "ended", readText(t, ws))
	require.NoError(t, ws.Write(context.Background(), websocket.MessageText, []byte("still")))
	assert.Equal(t, "still", readText(t, ws), "the reader outlives the follow")

	refused := dialSession(t, srv, "")
	assert.Equal(t, "shutting down", readText(t, refused))
	_, _, err := refused.Read(context.Background())
	assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err))
}

// The socket closing ends the follow.
func TestSessionEndsFollowWithSocket(t *testing.T) {
	var streams drain.Group
	srv, ended := sessionServer(t, &streams)
	ws := dialSession(t, srv, "")
	assert.Equal(t, "follow", readText(t, ws))
	require.NoError(t, ws.Close(websocket.StatusNormalClosure, ""))
	<-ended
	require.NoError(t, streams.Shutdown(context.Background(), nil), "nothing is left running")
}

// An Open that refuses the socket closes it with its code, and nothing
// is left registered.
func TestSessionOpenRefuses(t *testing.T) {
	var streams drain.Group
	srv, _ := sessionServer(t, &streams)
	ws := dialSession(t, srv, "?refuse")
	_, _, err := ws.Read(context.Background())
	assert.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err))
	// The follow that was never started was let go: nothing is left to
	// wait for.
	streams.Wait()
}

// watchServer serves sockets with a Session.Watch: Watch sends "watch",
// and its wait sends "waited" once the follow's context has ended; the
// reader echoes every frame.
func watchServer(t *testing.T, streams *drain.Group) (*httptest.Server, <-chan struct{}) {
	waited := make(chan struct{}, 16)
	reg := wsconn.NewRegistry()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wsconn.Start(w, r, reg, wsconn.Options{}, func(ctx context.Context, c *wsconn.Conn) error {
			return protocol.Session{
				Watch: func(ctx context.Context) func() {
					c.Send([]byte("watch"))
					return func() {
						if ctx.Err() == nil {
							t.Error("wait was called before the follow's context ended")
						}
						c.Send([]byte("waited"))
						waited <- struct{}{}
					}
				},
				Handle: func(_ context.Context, frame []byte) { c.Send(frame) },
			}.Serve(ctx, c, streams)
		})
	}))
	t.Cleanup(func() {
		_ = reg.Shutdown(context.Background())
		srv.Close()
	})
	return srv, waited
}

// A Watch's wait runs once the follow's context ends: when the adapter
// shuts down (which waits for it) or the socket ends.
func TestSessionWatch(t *testing.T) {
	var streams drain.Group
	srv, waited := watchServer(t, &streams)
	ws := dialSession(t, srv, "")
	assert.Equal(t, "watch", readText(t, ws))
	require.NoError(t, ws.Write(context.Background(), websocket.MessageText, []byte("ping")))
	assert.Equal(t, "ping", readText(t, ws))

	require.NoError(t, streams.Shutdown(context.Background(), nil))
	select {
	case <-waited:
	default:
		t.Fatal("Shutdown returned before the watch's wait")
	}
	assert.Equal(t, "waited", readText(t, ws))
	require.NoError(t, ws.Write(context.Background(), websocket.MessageText, []byte("still")))
	assert.Equal(t, "still", readText(t, ws), "the reader outlives the watch")

	var other drain.Group
	srv2, waited2 := watchServer(t, &other)
	ws2 := dialSession(t, srv2, "")
	assert.Equal(t, "watch", readText(t, ws2))
	require.NoError(t, ws2.Close(websocket.StatusNormalClosure, ""))
	<-waited2
	other.Wait()
}

// Aside runs its function on another goroutine and waits for it; a panic
// there is raised again in the caller.
func TestAside(t *testing.T) {
	ran := false
	protocol.Aside(func() { ran = true })
	assert.True(t, ran)
	var p any
	func() {
		defer func() { p = recover() }()
		protocol.Aside(func() { panic("a bug") })
	}()
	err, ok := p.(error)
	require.True(t, ok, "the panic is raised again: %v", p)
	assert.Contains(t, err.Error(), "a bug")
}
