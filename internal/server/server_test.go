package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/event"
)

// testConfig is the configuration the tests start from: every listener on
// a free port, fresh data and working folders, and the agentchat scenario.
func testConfig(t *testing.T, args ...string) config.Config {
	t.Helper()
	base := []string{
		"--addr", "127.0.0.1:0",
		"--data-dir", t.TempDir(),
		"--workdir", t.TempDir(),
		"--scenario", "testdata/agentchat.yaml",
		"--max-steps", "10",
		"--shutdown-grace", "10s",
	}
	cfg, err := config.Parse(append(base, args...), func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	return cfg
}

// testServer is a started Server that the test shuts down at cleanup
// unless it does so itself.
type testServer struct {
	*Server
	t       *testing.T
	cfg     config.Config
	stopped bool
}

// startServer starts a server whose every frame is checked against its
// schema (see Options.Verify).
func startServer(t *testing.T, cfg config.Config, opts Options) *testServer {
	t.Helper()
	return startServerChecked(t, cfg, opts, true)
}

func startServerChecked(t *testing.T, cfg config.Config, opts Options, verify bool) *testServer {
	t.Helper()
	if opts.Verify == nil && verify {
		opts.Verify = func(proto string, frame []byte, err error) {
			if err != nil {
				t.Errorf("the %s adapter sent what its document does not allow: %v\n%s", proto, err, frame)
			}
		}
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := New(context.Background(), cfg, log, opts)
	require.NoError(t, err)
	ts := &testServer{Server: s, t: t, cfg: cfg}
	if err := s.Start(); err != nil {
		_ = s.Shutdown(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !ts.stopped {
			ts.shutdown()
		}
	})
	return ts
}

// shutdown stops the server as a signal would, bounded by the test.
func (ts *testServer) shutdown() {
	ts.t.Helper()
	ts.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(ts.t, ts.Shutdown(ctx))
}

// url is the agentchat endpoint of the main listener.
func (ts *testServer) url() string { return "ws://" + ts.Addr("main") + "/ws" }

// history returns the thread's conversation events, read from the store.
func (ts *testServer) history(thread string) []event.Event {
	ts.t.Helper()
	h, err := ts.core.History(context.Background(), thread)
	require.NoError(ts.t, err)
	return h
}

// testWriter sends the server's log to the test's log, so a failing test
// shows what the server said.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// writeFile creates name in dir with content.
func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestHealthAndReadiness(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	code, body := get(t, "http://"+ts.Addr("main")+"/healthz")
	assert.Equal(t, http.StatusOK, code, body)
	code, body = get(t, "http://"+ts.Addr("main")+"/readyz")
	assert.Equal(t, http.StatusOK, code, body)
}

// --listen agentchat=addr serves agentchat at the root of its own address,
// and at its path there too.
func TestListenServesOneProtocolAtRoot(t *testing.T) {
	ts := startServer(t, testConfig(t, "--listen", "agentchat=127.0.0.1:0"), Options{})
	own := ts.Addr("agentchat")
	require.NotEmpty(t, own)
	require.NotEqual(t, ts.Addr("main"), own)
	for _, url := range []string{"ws://" + own + "/", "ws://" + own + "/ws"} {
		c := dial(t, url)
		c.chat("echo root", "listen-"+url)
		c.expect(userMessage("echo root"), agentMessage("You said: echo root"))
	}
	assert.Contains(t, ts.Banner(), own)
}

// The banner names each protocol's URL and the model, and on the scripted
// model says how to configure a real one.
func TestBanner(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	b := ts.Banner()
	assert.Contains(t, b, "ws://"+ts.Addr("main")+"/ws")
	assert.Contains(t, b, "scripted")
	assert.Contains(t, b, "testdata/agentchat.yaml")
	assert.Contains(t, b, "OPENAI_API_KEY")
	assert.Contains(t, b, "\nsandbox: ", "the banner says which sandbox holds the tools' commands")
}

// Shutdown closes sockets with 1001 going away, and a turn that finishes
// within the grace period completes.
func TestShutdownLetsRunningTurnFinish(t *testing.T) {
	cfg := testConfig(t, "--shutdown-grace", "30s")
	ts := startServer(t, cfg, Options{})
	c := dial(t, ts.url())
	c.chat("slow please", "grace")
	c.expect(userMessage("slow please"))

	closed := c.closeCode()
	ts.shutdown()
	assert.Equal(t, websocket.StatusGoingAway, <-closed)

	ts2 := startServer(t, cfg, Options{})
	ends := runEnds(ts2.history("grace"))
	assert.Equal(t, []event.Type{event.TypeRunCompleted}, ends)
}

// Shutdown stops accepting at once, before the grace period; a turn still
// running when the grace period ends is cancelled, and its cancellation is
// in the log.
func TestShutdownCancelsTurnAfterGrace(t *testing.T) {
	cfg := testConfig(t, "--shutdown-grace", "2s")
	ts := startServer(t, cfg, Options{})
	c := dial(t, ts.url())
	c.chat("stall please", "stalled")
	c.expect(userMessage("stall please"))
	closed := c.closeCode()

	ts.stopped = true
	done := make(chan error, 1)
	go func() { done <- ts.Shutdown(context.Background()) }()
	require.Eventually(t, func() bool {
		conn, err := net.Dial("tcp", ts.Addr("main"))
		if err == nil {
			conn.Close()
		}
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "the listener still accepts")
	active, err := ts.core.Active(context.Background(), "stalled")
	require.NoError(t, err)
	assert.NotEmpty(t, active, "the listener closed only after the grace period")
	assert.Equal(t, websocket.StatusGoingAway, <-closed)
	require.NoError(t, <-done)

	ts2 := startServer(t, cfg, Options{})
	assert.Equal(t, []event.Type{event.TypeRunCancelled}, runEnds(ts2.history("stalled")))
}

// A client that does not answer the close handshake is cut off; the
// shutdown still succeeds (the process exits 0).
func TestShutdownWithUnresponsiveClient(t *testing.T) {
	ts := startServer(t, testConfig(t), Options{})
	c := dial(t, ts.url())
	c.chat("echo hi", "deaf")
	c.expect(userMessage("echo hi"), agentMessage("You said: echo hi"))
	// c reads nothing more.
	ts.shutdown()
}

// New fails cleanly when the store cannot be opened.
func TestNewFailsOnUnusableDataDir(t *testing.T) {
	cfg := testConfig(t)
	cfg.DataDir = filepath.Join(cfg.DataDir, "file")
	writeFile(t, filepath.Dir(cfg.DataDir), "file", "not a folder")
	_, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "open the store")
}

// runEnds lists the run-ending events of a history, in order.
func runEnds(h []event.Event) []event.Type {
	var out []event.Type
	for _, e := range h {
		switch e.Type() {
		case event.TypeRunCompleted, event.TypeRunFailed, event.TypeRunCancelled:
			out = append(out, e.Type())
		}
	}
	return out
}

// postgresURL returns the test PostgreSQL's URL with a schema of the
// test's own as its search path (dropped when the test ends), or skips the
// test when there is no PostgreSQL to test against.
func postgresURL(t *testing.T) string {
	t.Helper()
	base := os.Getenv("AGENTWIRE_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("AGENTWIRE_TEST_POSTGRES_URL not set: no PostgreSQL to test against")
	}
	schema := "server_" + strings.ToLower(event.NewID())
	conn, err := pgx.Connect(t.Context(), base)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	t.Cleanup(func() {
		if conn, err := pgx.Connect(context.Background(), base); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

// A second server on the same SQLite data directory refuses to start,
// naming the one that holds it; once that one stops, the directory is free.
func TestDataDirIsOneServers(t *testing.T) {
	cfg := testConfig(t)
	first := startServer(t, cfg, Options{})
	_, err := New(context.Background(), cfg, nil, Options{})
	require.Error(t, err)
	assert.ErrorIs(t, err, errDataDirLocked)
	assert.Contains(t, err.Error(), "held by pid "+strconv.Itoa(os.Getpid()))
	assert.Contains(t, err.Error(), "node "+first.node)
	first.shutdown()
	second := startServer(t, cfg, Options{})
	assert.NotEmpty(t, second.Addr("main"))
}
