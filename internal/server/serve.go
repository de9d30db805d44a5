package server

// A Server's life once built: what each listener serves, Start, where it
// listens, the banner, and Shutdown.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/identity"
	"github.com/agentwire/agentwire/internal/playground"
	"github.com/agentwire/agentwire/internal/tracing"
)

// handler is what a listener serves: every protocol of the registry at its
// paths (only is ""), or one protocol at its paths and its root, plus the
// health endpoints. Every request passes the guard (Host, Origin, CORS,
// body deadline); every request but the health checks is authenticated
// and carries its principal.
func (s *Server) handler(only string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	for _, a := range s.adapters {
		if only == "" || only == a.name {
			a.Mount(mux, only != "")
		}
	}
	outer := http.NewServeMux()
	outer.Handle("GET /healthz", mux)
	outer.Handle("GET /readyz", mux)
	docs := specsHandler()
	for _, p := range []string{"GET /openapi.yaml", "GET /openapi.json", "GET /asyncapi/", "GET /schemas/", "GET /reference/"} {
		outer.Handle(p, docs)
	}
	inner := identity.Middleware(s.authn, s.caps.admitting(mux))
	outer.Handle("/", inner)
	if only == "" {
		// The playground (internal/playground) at / of the main listener:
		// a GET that is no WebSocket upgrade gets the page; an upgrade
		// at / is still Loom's (its adapter's route).
		page := playground.Handler(playground.Config{Auth: s.cfg.Auth, Protocols: s.protocolNames()})
		outer.Handle("GET /{$}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isUpgrade(r) {
				inner.ServeHTTP(w, r)
				return
			}
			page.ServeHTTP(w, r)
		}))
		outer.Handle("GET /playground/", page)
	}
	return withConnID(tracing.Extract(s.guard.handler(outer)))
}

// readyz answers 200 while the server takes new work: the store answers
// and shutdown has not begun. It names the protocols served.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.store.LastSeq(ctx, "readyz"); err != nil {
		http.Error(w, "store unavailable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if s.busUp != nil && !s.busUp() {
		http.Error(w, "bus unavailable: reconnecting to NATS", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "ready: %s\n", strings.Join(s.protocolNames(), ", "))
}

// protocolNames are the names of the protocols served, in the registry's
// order.
func (s *Server) protocolNames() []string {
	names := make([]string, len(s.adapters))
	for i, a := range s.adapters {
		names[i] = a.name
	}
	return names
}

// Start binds every listener and serves in the background: the main one,
// each --listen, and the --debug-addr one when set. An address that must
// not be served is refused before anything is bound.
func (s *Server) Start() error {
	type l struct{ name, addr string }
	list := []l{{"main", s.cfg.Addr}}
	for _, proto := range slices.Sorted(maps.Keys(s.cfg.Listen)) {
		list = append(list, l{proto, s.cfg.Listen[proto]})
	}
	for _, it := range list {
		if err := s.checkExposure(it.addr); err != nil {
			return err
		}
	}
	if s.cfg.DebugAddr != "" {
		if err := checkDebugAddr(s.cfg.DebugAddr); err != nil {
			return err
		}
	}
	if s.cfg.MetricsAddr != "" {
		if err := checkLoopback("--metrics-addr", s.cfg.MetricsAddr, "9464"); err != nil {
			return err
		}
	}
	for _, it := range list {
		raw, err := net.Listen("tcp", it.addr)
		if err != nil {
			return fmt.Errorf("listen on %s (%s): %w", it.addr, it.name, err)
		}
		ln := s.caps.wrap(raw)
		only := ""
		if it.name != "main" {
			only = it.name
		}
		s.serve(it.name, s.handler(only), ln, nil)
		s.mu.Lock()
		s.addrs[it.name] = ln.Addr().String()
		s.mu.Unlock()
	}
	if s.cfg.DebugAddr != "" {
		// Not under the connection caps: it serves this machine only, and
		// must not take the protocols' places.
		ln, err := listenLoopback("--debug-addr", s.cfg.DebugAddr, "6060")
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.mu.Lock()
		s.debugAddr, s.endDebug = ln.Addr().String(), cancel
		s.mu.Unlock()
		s.serve("the debug listener", s.debugHandler(), ln, ctx)
	}
	if s.cfg.MetricsAddr != "" {
		// Not under the connection caps either, for the same reason.
		ln, err := listenLoopback("--metrics-addr", s.cfg.MetricsAddr, "9464")
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.metricsAddr = ln.Addr().String()
		s.mu.Unlock()
		s.serve("the metrics listener", s.metricsHandler(), ln, nil)
	}
	return nil
}

// MetricsAddr is the bound --metrics-addr, or "" without one.
func (s *Server) MetricsAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.metricsAddr
}

// serve serves h on ln in the background until Shutdown, which waits for
// it. The requests' contexts derive from base when it is not nil.
func (s *Server) serve(name string, h http.Handler, ln net.Listener, base context.Context) {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ConnContext: connContext, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	if base != nil {
		hs.BaseContext = func(net.Listener) context.Context { return base }
	}
	s.mu.Lock()
	s.servers = append(s.servers, hs)
	s.mu.Unlock()
	s.wg.Go(func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			// Errs reports the first failure; later ones, if nobody
			// reads them, must not keep this goroutine from ending.
			select {
			case s.serveErrs <- fmt.Errorf("serve %s: %w", name, err):
			default:
				s.log.Error("serve", "listener", name, "err", err)
			}
		}
	})
}

// checkExposure refuses to serve an address other machines can reach
// without authentication, unless --insecure-no-auth says so.
func (s *Server) checkExposure(addr string) error {
	if s.cfg.Auth != "none" || s.cfg.InsecureNoAuth {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to serve %s without authentication: anyone who reaches it could run commands on this machine. "+
		"Use --auth keys or --auth jwt (docs/SECURITY.md), or pass --insecure-no-auth if another layer authenticates", addr)
}

// Addr is the bound address of the main listener, or of a protocol's own
// listener when name is a protocol.
func (s *Server) Addr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[name]
}

// DebugAddr is the bound address of the --debug-addr listener, or "" when
// there is none.
func (s *Server) DebugAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.debugAddr
}

// Errs reports a listener that failed while serving.
func (s *Server) Errs() <-chan error { return s.serveErrs }

// Banner is the start-up text: each protocol's URL and the model.
func (s *Server) Banner() string {
	var b strings.Builder
	main := s.Addr("main")
	fmt.Fprintf(&b, "agentwire is serving on %s\n", main)
	for _, a := range s.adapters {
		for _, ep := range a.Endpoints() {
			fmt.Fprintf(&b, "  %-10s %s://%s%s\n", a.name, ep.Scheme, main, ep.Path)
		}
	}
	for _, proto := range slices.Sorted(maps.Keys(s.cfg.Listen)) {
		fmt.Fprintf(&b, "  %-10s also at the root of %s\n", proto, s.Addr(proto))
	}
	fmt.Fprintf(&b, "  playground http://%s/ (a page in the browser: every protocol, its frames checked against the schemas)\n", main)
	fmt.Fprintf(&b, "  health     http://%s/healthz\n", main)
	if d := s.DebugAddr(); d != "" {
		fmt.Fprintf(&b, "  debug      http://%s/debug/pprof/, /debug/vars and /debug/metrics (profiler and runtime metrics; loopback only)\n", d)
	}
	fmt.Fprintf(&b, "model: %s\n", s.ModelDesc)
	if s.cfg.Provider() == "scripted" {
		b.WriteString("  No model is configured, so agentwire answers from a script. To use a real one, set\n" +
			"  OPENAI_API_KEY (and OPENAI_BASE_URL for Ollama, vLLM or llama.cpp), ANTHROPIC_API_KEY or\n" +
			"  GEMINI_API_KEY, or pass --llm and --model. See docs/AGENTS.md.\n")
	}
	fmt.Fprintf(&b, "threads are stored in %s; tools work in %s (approval policy %s)\n", s.storeDesc(), s.cfg.Workdir, s.cfg.ApprovalPolicy)
	fmt.Fprintf(&b, "sandbox: %s\n", s.box.Describe())
	fmt.Fprintf(&b, "auth: %s; browser origins allowed: %s\n", authDesc(s.cfg), originsDesc(s.cfg.AllowedOrigins))
	if s.cfg.BusURL != "" {
		fmt.Fprintf(&b, "node %s of a cluster: other nodes share the database and the bus at %s\n", s.node, redactURL(s.cfg.BusURL))
	} else {
		fmt.Fprintf(&b, "node %s, a single node (no --bus-url)\n", s.node)
	}
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
	s.stopping = true
	servers := s.servers
	endDebug := s.endDebug
	s.mu.Unlock()
	if endDebug != nil {
		endDebug()
	}
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
	// The runs have written their ends: the adapters' streams deliver
	// what the log holds and close, so that clients resume elsewhere or
	// after restart.
	streamCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	for _, a := range s.adapters {
		if err := a.Shutdown(streamCtx); err != nil {
			errs = append(errs, fmt.Errorf("shut the %s protocol down: %w", a.name, err))
		}
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
	if s.threads != nil {
		errs = append(errs, s.threads.Close())
	}
	s.mcp.Close()
	if s.bus != nil {
		errs = append(errs, s.bus.Close())
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	if s.root != nil {
		errs = append(errs, s.root.Close())
	}
	errs = append(errs, s.dirLock.release())
	return errors.Join(errs...)
}
