// Command server runs agentwire: `go run ./cmd/server` (or `make run`)
// serves every protocol on 127.0.0.1:8080 with SQLite under ./data and the
// working folder ./workspace. Flags and AGENTWIRE_* variables are listed by
// --help and in README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentwire/agentwire/internal/cli"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/logs"
	"github.com/agentwire/agentwire/internal/server"
	"github.com/agentwire/agentwire/internal/server/providers"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/tracing"
)

func main() {
	// This binary is also the launcher of the tools' sandbox: the server
	// re-executes it to confine each command (see sandbox.Main).
	sandbox.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := dispatch(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, config.ErrHelp) || errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "agentwire:", err)
		os.Exit(1)
	}
}

// dispatch runs the subcommand args name: serve (the default: flags with
// no subcommand serve too), threads, validate, chat or contract.
func dispatch(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "", "serve":
		return run(ctx, args, getenv, stdout, stderr)
	case "threads":
		return cli.Threads(ctx, args, getenv, stdin, stdout, stderr)
	case "validate":
		return cli.Validate(args, stdin, stdout, stderr)
	case "chat":
		return cli.Chat(ctx, args, getenv, stdin, stdout, stderr)
	case "contract":
		return contract(ctx, args, getenv, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, commands)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", sub, commands)
}

const commands = `usage: agentwire [serve] [flags]        serve every protocol (the default; --help lists the flags)
       agentwire threads ls|show|export|import [flags] [args]
                                         read and write threads in the store (--data-dir or --database-url)
       agentwire validate --protocol P [--direction inbound|outbound] FILE|-
                                         check frames (JSON, one a line) against a protocol's schemas
       agentwire chat --protocol P [--addr host:port | --url URL] [--thread ID] [--token T]
                                         chat with a running server over a protocol, a line a turn
       agentwire contract [--scenario NAME|FILE] [flags]
                                         a throw-away server for frontend CI: free port, scripted model,
                                         temporary data; prints AGENTWIRE_ADDR=… (--help, docs/SCENARIOS.md)
`

// run parses the configuration, starts the server, prints where it serves,
// and serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, getenv, stdout, stdout, stderr)
}

// serve starts the server cfg describes, prints where it serves (the
// --print-addr lines on stdout, the banner on banner), and serves until
// ctx is done, then shuts down gracefully.
func serve(ctx context.Context, cfg config.Config, getenv func(string) string, stdout, banner, stderr io.Writer) error {
	log, err := logs.New(stderr, cfg.LogFormat, logs.ParseLevel(cfg.LogLevel))
	if err != nil {
		return err
	}
	stopTracing, traces, err := tracing.Setup(ctx, getenv, cfg.NodeID)
	if err != nil {
		return err
	}
	defer func() {
		// Spans still batched go out before the process ends.
		if err := stopTracing(context.WithoutCancel(ctx)); err != nil {
			log.Warn("flush the traces", "err", err)
		}
	}()
	if traces != "" {
		log.Info("tracing runs to an OTLP endpoint", "endpoint", traces)
	}
	// Setup runs to its end even when a signal comes during it (the server
	// then starts and shuts down at once, cleanly); only its own bound
	// stops a store that never answers.
	setupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
	srv, err := server.New(setupCtx, cfg, log, server.Options{Models: providers.Models(), Cluster: providers.NATS})
	cancel()
	if err != nil {
		return err
	}
	if err := srv.CheckModel(context.WithoutCancel(ctx)); err != nil {
		if cfg.CheckModel {
			_ = srv.Shutdown(context.Background())
			return fmt.Errorf("--check-model: %w", err)
		}
		log.Warn("the configured model cannot be used: every run will fail until this is fixed (--check-model makes this fatal)", "err", err)
	}
	if err := srv.Start(); err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	if cfg.AddrFile != "" {
		if err := srv.WriteAddrFile(cfg.AddrFile); err != nil {
			_ = srv.Shutdown(context.Background())
			return err
		}
		defer os.Remove(cfg.AddrFile)
	}
	if cfg.PrintAddr {
		fmt.Fprint(stdout, srv.AddrLines())
	}
	fmt.Fprint(banner, srv.Banner())

	var serveErr error
	select {
	case <-ctx.Done():
		fmt.Fprintln(banner, "agentwire: shutting down")
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
