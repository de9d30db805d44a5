// Package server builds agentwire from its configuration — store, bus,
// thread service, agent, run manager and the protocol adapters — and serves
// it: the main listener carries every protocol at its path, each --listen
// address carries one protocol at its root, and shutdown closes sockets
// with "going away", lets running turns finish for a grace period, cancels
// the rest and flushes the store.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/protocol/agentchat"
	"github.com/agentwire/agentwire/internal/protocol/threads"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/postgres"
	"github.com/agentwire/agentwire/internal/store/sqlite"
	"github.com/agentwire/agentwire/internal/thread"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// Server is a configured agentwire, ready to Start.
type Server struct {
	cfg       config.Config
	log       *slog.Logger
	ModelDesc string // what the banner says about the model

	store   store.Log
	bus     *local.Bus
	threads *thread.Service
	runs    *runs.Manager
	root    *sandbox.Root
	reg     *wsconn.Registry
	chat    *agentchat.Handler
	rest    *threads.Handler // the threads REST + SSE protocol
	core    *core

	mu        sync.Mutex
	servers   []*http.Server
	addrs     map[string]string // listener name ("main" or a protocol) -> bound address
	serveErrs chan error
	wg        sync.WaitGroup
}

// Options are what tests and embedders may set beyond the Config.
type Options struct {
	// ConnOptions tune every WebSocket connection (queue size, limits).
	Conn wsconn.Options
	// Heartbeat is the SSE keep-alive interval (default 15 s).
	Heartbeat time.Duration
}

// New builds a Server. Close it with Shutdown, even if Start is never called.
func New(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) (*Server, error) {
	s := &Server{cfg: cfg, log: log, addrs: map[string]string{}, serveErrs: make(chan error, 8)}
	ok := false
	defer func() {
		if !ok {
			s.closeCore()
		}
	}()

	var err error
	if s.store, err = openStore(ctx, cfg, log); err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	s.bus = local.New()
	s.threads = thread.New(s.store, s.bus, log, thread.Options{})

	if err := os.MkdirAll(cfg.Workdir, 0o755); err != nil {
		return nil, fmt.Errorf("create the working folder: %w", err)
	}
	if s.root, err = sandbox.Open(cfg.Workdir); err != nil {
		return nil, fmt.Errorf("open the working folder: %w", err)
	}
	policy, err := tools.ParsePolicy(cfg.ApprovalPolicy)
	if err != nil {
		return nil, err
	}
	toolset := builtin.New(s.root, builtin.Options{Logger: log}).Filter(policy)

	model, desc, err := newModel(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("set up the model: %w", err)
	}
	s.ModelDesc = desc
	ag := agent.New(agent.Config{
		Model: model, Tools: toolset, Policy: policy, MaxSteps: cfg.MaxSteps,
		System: systemPrompt, Logger: log,
	})
	s.runs = runs.New(s.threads, ag, log)
	s.core = &core{threads: s.threads, runs: s.runs}

	s.reg = wsconn.NewRegistry()
	connOpts := opts.Conn
	connOpts.OriginPatterns = append(connOpts.OriginPatterns, "localhost:*", "127.0.0.1:*", "[::1]:*")
	s.chat = agentchat.New(s.core, s.reg, agentchat.Options{Broadcast: cfg.AgentchatBroadcast, Conn: connOpts, Logger: log})
	s.rest = threads.New(s.core, threads.Options{Heartbeat: opts.Heartbeat, Logger: log})
	ok = true
	return s, nil
}

// openStore opens the thread store the configuration names. On failure
// the store is a nil interface, never a nil pointer in one, so that the
// cleanup in New skips it.
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger) (store.Log, error) {
	if cfg.DatabaseURL != "" {
		st, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Options{Logger: log})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := sqlite.Open(ctx, sqlite.Options{Dir: cfg.DataDir, Logger: log})
	if err != nil {
		return nil, err
	}
	return st, nil
}

const systemPrompt = `You are the assistant of agentwire, working in a folder of files the user shares with you.
Use the tools to look at files, change them and run commands when that helps; paths are relative to the working folder.
Prefer reading before writing. Keep answers short and concrete, and say what you changed.`

// routes registers one protocol's paths on mux; root also serves it at "/".
func (s *Server) routes(mux *http.ServeMux, proto string, root bool) {
	switch proto {
	case "agentchat":
		mux.Handle("GET /ws", s.chat)
		if root {
			mux.Handle("GET /{$}", s.chat)
		}
	case "threads":
		mux.Handle(threads.PathThread, s.rest)
		mux.Handle(threads.PathEvents, s.rest)
	}
}

// served lists the protocols this build serves, with their paths.
var served = []struct{ proto, scheme, path string }{
	{"agentchat", "ws", "/ws"},
	{"threads", "http", "/api/v1/threads/{threadId}"},
}

func (s *Server) handler(only string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := s.store.LastSeq(ctx, "readyz"); err != nil {
			http.Error(w, "store unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	for _, p := range served {
		if only == "" || only == p.proto {
			s.routes(mux, p.proto, only != "")
		}
	}
	return mux
}

// Start binds every listener and serves in the background.
func (s *Server) Start() error {
	type l struct{ name, addr string }
	list := []l{{"main", s.cfg.Addr}}
	for _, proto := range slices.Sorted(maps.Keys(s.cfg.Listen)) {
		list = append(list, l{proto, s.cfg.Listen[proto]})
	}
	for _, it := range list {
		ln, err := net.Listen("tcp", it.addr)
		if err != nil {
			return fmt.Errorf("listen on %s (%s): %w", it.addr, it.name, err)
		}
		only := ""
		if it.name != "main" {
			only = it.name
		}
		hs := &http.Server{Handler: s.handler(only), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
		s.mu.Lock()
		s.servers = append(s.servers, hs)
		s.addrs[it.name] = ln.Addr().String()
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.serveErrs <- fmt.Errorf("serve %s: %w", it.name, err)
			}
		}()
	}
	return nil
}

// Addr is the bound address of the main listener, or of a protocol's own
// listener when name is a protocol.
func (s *Server) Addr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[name]
}

// Errs reports a listener that failed while serving.
func (s *Server) Errs() <-chan error { return s.serveErrs }

// Banner is the start-up text: each protocol's URL and the model.
func (s *Server) Banner() string {
	var b strings.Builder
	main := s.Addr("main")
	fmt.Fprintf(&b, "agentwire is serving on %s\n", main)
	for _, p := range served {
		fmt.Fprintf(&b, "  %-10s %s://%s%s\n", p.proto, p.scheme, main, p.path)
	}
	for _, proto := range slices.Sorted(maps.Keys(s.cfg.Listen)) {
		fmt.Fprintf(&b, "  %-10s also at the root of %s\n", proto, s.Addr(proto))
	}
	fmt.Fprintf(&b, "  health     http://%s/healthz\n", main)
	fmt.Fprintf(&b, "model: %s\n", s.ModelDesc)
	if s.cfg.Provider() == "scripted" {
		b.WriteString("  No model is configured, so agentwire answers from a script. To use a real one, set\n" +
			"  OPENAI_API_KEY (and OPENAI_BASE_URL for Ollama, vLLM or llama.cpp), ANTHROPIC_API_KEY or\n" +
			"  GEMINI_API_KEY, or pass --llm and --model. See docs/AGENTS.md.\n")
	}
	fmt.Fprintf(&b, "threads are stored in %s; tools work in %s (approval policy %s)\n", s.storeDesc(), s.cfg.Workdir, s.cfg.ApprovalPolicy)
	return b.String()
}

func (s *Server) storeDesc() string {
	if s.cfg.DatabaseURL != "" {
		return "PostgreSQL"
	}
	return "SQLite under " + s.cfg.DataDir
}

// socketCloseTimeout bounds the wait for WebSockets to close on shutdown:
// coder/websocket gives a peer 5 s to answer a close frame.
const socketCloseTimeout = 6 * time.Second

// Shutdown stops the server: listeners stop accepting, WebSockets are
// closed with "going away", running turns get until the grace period ends
// (or ctx is done) to finish and are then cancelled, and the store is
// flushed and closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	servers := s.servers
	s.mu.Unlock()
	var errs []error
	// Stop accepting at once: http.Server.Shutdown closes the listeners
	// first, then waits for the requests in flight (event streams), which
	// end below.
	httpCtx, stopHTTP := context.WithCancel(ctx)
	defer stopHTTP()
	var httpWG sync.WaitGroup
	for _, hs := range servers {
		httpWG.Go(func() {
			if err := hs.Shutdown(httpCtx); err != nil {
				hs.Close()
			}
		})
	}
	// Close every WebSocket with "going away" now; the close handshakes go
	// on while the runs finish. A client that never answers is cut off when
	// its handshake times out: not a failure of the shutdown.
	sockets := make(chan error, 1)
	go func() {
		wsCtx, cancel := context.WithTimeout(ctx, socketCloseTimeout)
		defer cancel()
		sockets <- s.reg.Shutdown(wsCtx)
	}()
	graceCtx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownGrace)
	s.runs.Shutdown(graceCtx)
	cancel()
	// The runs have written their ends: SSE streams deliver what the log
	// holds and close, so that clients resume elsewhere or after restart.
	sseCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := s.rest.Shutdown(sseCtx); err != nil {
		errs = append(errs, fmt.Errorf("close event streams: %w", err))
	}
	cancel()
	if err := <-sockets; err != nil {
		s.log.Warn("WebSockets still closing at shutdown", "open", s.reg.Len(), "err", err)
	}
	// Requests still in flight get a last moment, then are cut.
	cut := time.AfterFunc(5*time.Second, stopHTTP)
	httpWG.Wait()
	cut.Stop()
	s.wg.Wait()
	errs = append(errs, s.closeCore())
	return errors.Join(errs...)
}

// closeCore closes what New opened, in reverse order.
func (s *Server) closeCore() error {
	var errs []error
	if s.chat != nil {
		s.chat.Close()
	}
	if s.threads != nil {
		errs = append(errs, s.threads.Close())
	}
	if s.bus != nil {
		errs = append(errs, s.bus.Close())
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	if s.root != nil {
		errs = append(errs, s.root.Close())
	}
	return errors.Join(errs...)
}
