// Package servertest starts real agentwire servers for the protocol
// adapters' tests: a loopback listener on a free port, fresh folders, and a
// check of every frame against its protocol's document.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/leaktest"
	"github.com/agentwire/agentwire/internal/server"
)

// Config is a test server's configuration: a free loopback port and fresh
// data and work folders. args are flags on top of those, as on the command
// line (a later flag overrides an earlier one).
func Config(t testing.TB, args ...string) config.Config {
	t.Helper()
	base := []string{
		"--addr", "127.0.0.1:0",
		"--data-dir", t.TempDir(),
		"--workdir", t.TempDir(),
	}
	cfg, err := config.Parse(append(base, args...), func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	return cfg
}

// Options tune Start.
type Options struct {
	// Log receives the server's log at level warn; nil writes it to the
	// test's log.
	Log io.Writer
	// NoLeakCheck skips the check, at cleanup, that the server left no
	// goroutine of this module running: for tests that end a server the
	// way a crash would.
	NoLeakCheck bool
	// Server is passed to server.New; a nil Verify fails the test on any
	// frame its protocol's document does not allow.
	Server server.Options
}

// Server is a started server that stops at the test's cleanup.
type Server struct {
	*server.Server
	Config  config.Config
	t       testing.TB
	stopped atomic.Bool
}

// Start builds and starts cfg's server. A frame the server sends that its
// protocol's document does not allow fails the test.
func Start(t testing.TB, cfg config.Config, opts Options) *Server {
	t.Helper()
	if !opts.NoLeakCheck {
		leaktest.Check(t, "github.com/agentwire/agentwire/")
	}
	if opts.Log == nil {
		opts.Log = LogWriter(t)
	}
	sopts := opts.Server
	if sopts.Verify == nil {
		sopts.Verify = func(proto string, frame []byte, err error) {
			if err != nil {
				t.Errorf("the %s adapter sent what its document does not allow: %v\n%s", proto, err, frame)
			}
		}
	}
	log := slog.New(slog.NewTextHandler(opts.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(context.Background(), cfg, log, sopts)
	require.NoError(t, err)
	s := &Server{Server: srv, Config: cfg, t: t}
	if err := srv.Start(); err != nil {
		_ = srv.Shutdown(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !s.stopped.Load() {
			s.Stop()
		}
	})
	return s
}

// Stop shuts the server down, giving it 30 s, and fails the test if it
// does not stop cleanly.
func (s *Server) Stop() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(s.t, s.Shutdown(ctx))
}

// Shutdown is server.Server's; a server shut down here is not shut down
// again at cleanup.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopped.Store(true)
	return s.Server.Shutdown(ctx)
}

// LogWriter writes each line to t's log.
func LogWriter(t testing.TB) io.Writer { return logWriter{t} }

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
