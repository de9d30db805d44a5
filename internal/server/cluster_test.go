package server

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/server/providers"
)

// TestNodeWithoutItsBus loses its NATS connection: it says it is not ready,
// refuses to start runs (another node can), still serves what the log
// holds, and takes input again once NATS is back.
func TestNodeWithoutItsBus(t *testing.T) {
	pg := postgresURL(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	startNATS := func() *natsserver.Server {
		srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
		require.NoError(t, err)
		srv.Start()
		require.True(t, srv.ReadyForConnections(10*time.Second))
		return srv
	}
	nats := startNATS()
	t.Cleanup(func() { nats.Shutdown() })

	ts := startServer(t, testConfig(t, "--database-url", pg, "--bus-url", "nats://127.0.0.1:"+strconv.Itoa(port)), Options{Cluster: providers.NATS})
	assert.Contains(t, ts.Banner(), "of a cluster")
	thread := uuid.NewString()
	_, err = ts.core.Post(t.Context(), thread, runs.Input{Text: "echo before"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(runEnds(ts.history(thread))) == 1 }, frameTimeout, 10*time.Millisecond)

	nats.Shutdown()
	nats.WaitForShutdown()
	require.Eventually(t, func() bool {
		code, _ := get(t, "http://"+ts.Addr("main")+"/readyz")
		return code == http.StatusServiceUnavailable
	}, frameTimeout, 10*time.Millisecond, "/readyz reports the lost bus")
	_, err = ts.core.Post(t.Context(), thread, runs.Input{Text: "echo during"})
	assert.Equal(t, protocol.CodeUnavailable, protocol.AsError(err).Code, "no new runs without the bus: %v", err)
	code, body := get(t, "http://"+ts.Addr("main")+"/api/v1/threads/"+thread)
	assert.Equal(t, http.StatusOK, code, "the log is still served")
	assert.True(t, strings.Contains(body, "You said: echo before"), body)

	nats = startNATS()
	require.Eventually(t, func() bool {
		code, _ := get(t, "http://"+ts.Addr("main")+"/readyz")
		return code == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "ready again once NATS is back")
	ctx, cancel := context.WithTimeout(t.Context(), frameTimeout)
	defer cancel()
	_, err = ts.core.Post(ctx, thread, runs.Input{Text: "echo after"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		h := ts.history(thread)
		return len(runEnds(h)) == 2 && h[len(h)-1].Type() == event.TypeRunCompleted
	}, frameTimeout, 10*time.Millisecond)
}

// A server built without a bus refuses a --bus-url, saying so.
func TestBusNotBuiltIn(t *testing.T) {
	_, err := New(t.Context(), testConfig(t, "--database-url", postgresURL(t), "--bus-url", "nats://127.0.0.1:9"), nil, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no bus is built into this server")
}
