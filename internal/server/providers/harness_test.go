package providers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/server/providers"
	"github.com/agentwire/agentwire/internal/server/servertest"
)

// These tests start the binary's server (every vendor's model and the NATS
// bus) in process and talk to it over the adapters' sockets: what the
// adapters' own tests, which link only the scripted model and the
// in-process bus, cannot reach.

// frameTimeout bounds every wait for a frame: long enough for a loaded
// machine, short enough that a missing frame fails the test promptly.
const frameTimeout = 15 * time.Second

// start starts cfg's server with what the binary builds in; it fails the
// test on any frame its protocol's document does not allow.
func start(t *testing.T, cfg config.Config, opts servertest.Options) *servertest.Server {
	t.Helper()
	opts.Server.Models, opts.Server.Cluster = providers.Models(), providers.NATS
	return servertest.Start(t, cfg, opts)
}

// socket is a WebSocket read and written one text frame at a time, each
// within frameTimeout.
type socket struct {
	t  testing.TB
	ws *websocket.Conn
}

func dial(t testing.TB, url string) socket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, nil)
	require.NoError(t, err, "dial %s", url)
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return socket{t: t, ws: ws}
}

// write sends frame, which validate (the document's check of a client
// frame) must accept.
func (s socket) write(frame []byte, validate func([]byte) error) {
	s.t.Helper()
	require.NoError(s.t, validate(frame), "the test sends a frame the document does not allow: %s", frame)
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	require.NoError(s.t, s.ws.Write(ctx, websocket.MessageText, frame))
}

// read returns the next frame, which must be text.
func (s socket) read() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	typ, b, err := s.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, fmt.Errorf("a %v frame, want text", typ)
	}
	return b, nil
}
