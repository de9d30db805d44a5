// Command server runs agentwire: `go run ./cmd/server` (or `make run`)
// serves every protocol on 127.0.0.1:8080 with SQLite under ./data and the
// working folder ./workspace. Flags and AGENTWIRE_* variables are listed by
// --help and in README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/server"
	"github.com/agentwire/agentwire/internal/server/providers"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

func main() {
	// This binary is also the launcher of the tools' sandbox: the server
	// re-executes it to confine each command (see sandbox.Main).
	sandbox.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, config.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "agentwire:", err)
		os.Exit(1)
	}
}

// run parses the configuration, starts the server, prints where it serves,
// and serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level(cfg.LogLevel)}))
	// Setup runs to its end even when a signal comes during it (the server
	// then starts and shuts down at once, cleanly); only its own bound
	// stops a store that never answers.
	setupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
	srv, err := server.New(setupCtx, cfg, log, server.Options{Models: providers.Models(), Cluster: providers.NATS})
	cancel()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	fmt.Fprint(stdout, srv.Banner())

	var serveErr error
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "agentwire: shutting down")
	case serveErr = <-srv.Errs():
	}
	// The grace period is the server's own (--shutdown-grace); this context
	// only bounds the whole shutdown.
	if err := srv.Shutdown(context.WithoutCancel(ctx)); err != nil {
		return errors.Join(serveErr, err)
	}
	return serveErr
}

// setupTimeout bounds opening the store and the rest of the setup.
const setupTimeout = time.Minute

func level(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
