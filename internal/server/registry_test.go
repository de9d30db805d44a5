package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
	"github.com/agentwire/agentwire/internal/runs"
)

// echoProto is a throwaway sixth protocol, written here as a protocol's own
// package would be: a WebSocket at /echo whose text frames are user
// messages to the thread named by ?thread=, and whose frames out are the
// text of that thread's agent messages. It is everything a protocol needs:
// a Registration, an Adapter, the Core, a Follower and a Projector.
var echoProto = protocol.Registration{
	Name: "echo",
	New:  func(env protocol.Env) (protocol.Adapter, error) { return &echoAdapter{env: env}, nil },
}

type echoAdapter struct{ env protocol.Env }

func (a *echoAdapter) Mount(mux *http.ServeMux, own bool) {
	mux.Handle("GET /echo", a)
	if own {
		mux.Handle("GET /{$}", a)
	}
}

func (a *echoAdapter) Endpoints() []protocol.Endpoint {
	return []protocol.Endpoint{{Scheme: "ws", Path: "/echo"}}
}

func (a *echoAdapter) Shutdown(context.Context) error { return nil }

func (a *echoAdapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	thread := r.URL.Query().Get("thread")
	wsconn.Serve(w, r, a.env.Conns, a.env.Conn, func(ctx context.Context, c *wsconn.Conn) error {
		f, err := protocol.Follow(ctx, a.env.Core, thread, protocol.FromEnd)
		if err != nil {
			return err
		}
		defer f.Close()
		var wg sync.WaitGroup
		defer wg.Wait()
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		wg.Go(func() {
			_ = f.Run(fctx, func(e event.Event) error {
				for _, text := range (echoProjector{}).Project(e) {
					c.Send([]byte(text))
				}
				return nil
			})
		})
		for {
			frame, err := c.Read(ctx)
			if err != nil {
				return err
			}
			if _, err := a.env.Core.Post(ctx, thread, runs.Input{Text: string(frame)}); err != nil {
				c.Send([]byte("error: " + protocol.AsError(err).Message))
			}
		}
	})
}

type echoProjector struct{}

func (echoProjector) Project(e event.Event) []string {
	if m, ok := e.Payload.(event.MessageCompleted); ok && m.Role == event.RoleAssistant {
		return []string{m.Text}
	}
	return nil
}

// TestSixthProtocolIsOneRegistryLine serves a protocol the build does not
// have by adding one line to the registry: it is served at its path on the
// main listener, at the root of its own --listen address, and named in the
// banner and by /readyz.
func TestSixthProtocolIsOneRegistryLine(t *testing.T) {
	registry := append(Protocols(), echoProto) // the one line
	ts := startServer(t, testConfig(t, "--listen", "echo=127.0.0.1:0"), Options{Protocols: registry})

	for _, url := range []string{"ws://" + ts.Addr("main") + "/echo", "ws://" + ts.Addr("echo") + "/"} {
		ws, err := dialWS(url+"?thread=echo-thread", nil)
		require.NoError(t, err, url)
		require.NoError(t, writeFrame(ws, []byte("echo sixth")))
		ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
		_, b, err := ws.Read(ctx)
		cancel()
		require.NoError(t, err, url)
		assert.Equal(t, "You said: echo sixth", string(b), url)
		ws.Close(websocket.StatusNormalClosure, "")
	}
	assert.Contains(t, ts.Banner(), "ws://"+ts.Addr("main")+"/echo")
	assert.Contains(t, ts.Banner(), "echo       also at the root of "+ts.Addr("echo"))
	code, body := get(t, "http://"+ts.Addr("main")+"/readyz")
	assert.Equal(t, http.StatusOK, code)
	var names []string
	for _, r := range registry {
		names = append(names, r.Name)
	}
	assert.Equal(t, "ready: "+strings.Join(names, ", ")+"\n", body)

	// The same thread is served by every other protocol: the agentchat
	// session of that id continues it.
	hist := ts.history("echo-thread")
	require.NotEmpty(t, hist)
	assert.Equal(t, event.MessageUser{MessageID: hist[0].Payload.(event.MessageUser).MessageID, Text: "echo sixth"}, hist[0].Payload)
}

// A --listen for a protocol the build does not serve is refused at start,
// naming the protocols it does serve.
func TestListenOfUnservedProtocolIsRefused(t *testing.T) {
	for _, proto := range []string{"nosuch", "echo"} {
		cfg := testConfig(t, "--listen", proto+"=127.0.0.1:0")
		_, err := New(context.Background(), cfg, nil, Options{})
		require.Error(t, err, proto)
		assert.Contains(t, err.Error(), `does not serve a protocol named "`+proto+`"`)
		assert.Contains(t, err.Error(), "agentchat, threads")
	}
	// Registered, it starts.
	ts := startServer(t, testConfig(t, "--listen", "echo=127.0.0.1:0"), Options{Protocols: slices.Concat(Protocols(), []protocol.Registration{echoProto})})
	assert.NotEmpty(t, ts.Addr("echo"))
}

// /readyz answers 503 once shutdown has begun, so that a load balancer
// stops sending new work while runs finish.
func TestReadyzDuringShutdown(t *testing.T) {
	ts := startServer(t, testConfig(t, "--shutdown-grace", "30s"), Options{})
	c := dial(t, ts.url())
	c.chat("slow please", "ready-slow")
	c.expect(userMessage("slow please"))
	done := make(chan error, 1)
	ts.stopped = true
	go func() { done <- ts.Shutdown(context.Background()) }()
	// The listeners close at once, so ask the handler itself.
	require.Eventually(t, func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.stopping
	}, frameTimeout, time.Millisecond)
	rec := httptest.NewRecorder()
	ts.readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.NoError(t, <-done)
}
