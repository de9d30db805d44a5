// Package server builds agentwire from its configuration — store, bus,
// thread service, agent, run manager and the protocol adapters — and serves
// it: the main listener carries every protocol at its path, each --listen
// address carries one protocol at its root, --debug-addr (loopback only)
// carries the profiler and runtime metrics, and shutdown closes sockets
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
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/auth"
	"github.com/agentwire/agentwire/internal/budget"
	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/bus/local"
	"github.com/agentwire/agentwire/internal/config"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/identity"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/playground"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/store"
	"github.com/agentwire/agentwire/internal/store/postgres"
	"github.com/agentwire/agentwire/internal/store/sqlite"
	"github.com/agentwire/agentwire/internal/thread"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
	"github.com/agentwire/agentwire/internal/tools/mcp"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/tracing"
	"github.com/agentwire/agentwire/internal/workflow"
)

// Server is a configured agentwire, ready to Start.
type Server struct {
	cfg       config.Config
	log       *slog.Logger
	ModelDesc string // what the banner says about the model
	model     llm.Model

	metrics  *metrics.Metrics
	store    store.Store
	bus      bus.Bus
	threads  *thread.Service
	runs     *runs.Manager
	root     *sandbox.Root
	box      *sandbox.Sandbox // confines the programs the tools start
	mcp      *mcp.Set         // the --mcp servers, nil without any
	reg      *wsconn.Registry
	core     *core
	node     string
	authn    identity.Authenticator
	guard    *guard
	caps     *connCaps
	busUp    func() bool  // nil: an in-process bus, always up
	dirLock  *dataDirLock // the SQLite data directory, held while the server runs
	adapters []adapter    // the registry's protocols, built

	mu        sync.Mutex
	stopping  bool
	servers   []*http.Server
	addrs     map[string]string // listener name ("main" or a protocol) -> bound address
	debugAddr string            // the bound --debug-addr, "" without one
	// metricsAddr is the bound --metrics-addr, "" without one.
	metricsAddr string
	// endDebug cancels the debug listener's requests at shutdown: a CPU
	// profile or trace in progress ends and is sent at once.
	endDebug  context.CancelFunc
	serveErrs chan error
	wg        sync.WaitGroup
}

// adapter is a protocol's adapter with its name.
type adapter struct {
	name string
	protocol.Adapter
}

// Options are what tests and embedders may set beyond the Config.
type Options struct {
	// ConnOptions tune every WebSocket connection (queue size, limits).
	Conn wsconn.Options
	// Heartbeat is the SSE keep-alive interval (default 15 s).
	Heartbeat time.Duration
	// Protocols replaces the registry (Protocols()).
	Protocols []protocol.Registration
	// Bus wraps the bus the server would use (tests observe commands).
	Bus func(bus.Bus) bus.Bus
	// Store wraps the store the server would use (tests hold its commits).
	Store func(store.Store) store.Store
	// Verify, when set, is given every frame and event the adapters send
	// with its schema's verdict (see protocol.Env.Verify).
	Verify func(proto string, frame []byte, err error)
	// SandboxMissing, when set, makes the server take the OS sandbox to be
	// unavailable for this reason (sandbox.Config.Missing): tests of what
	// it does on a kernel without one.
	SandboxMissing string
	// Models build the vendors' models --llm names, by provider name
	// (providers.Models() in the binary). The scripted model is built in;
	// a provider missing here is an error of New.
	Models map[string]ModelProvider
	// Cluster connects a node to the bus --bus-url names (providers.NATS
	// in the binary); without it a --bus-url is an error of New.
	Cluster BusDialer
}

// BusDialer connects the node named node to the bus at url. connected says,
// at any time, whether the connection is up (a node without it starts no
// runs). An alias, as ModelProvider is.
type BusDialer = func(ctx context.Context, url, node string, log *slog.Logger) (b bus.Bus, connected func() bool, err error)

// New builds a Server. Close it with Shutdown, even if Start is never called.
func New(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, addrs: map[string]string{}, serveErrs: make(chan error, 8)}
	ok := false
	defer func() {
		if !ok {
			s.closeCore()
		}
	}()

	registry := opts.Protocols
	if registry == nil {
		registry = Protocols()
	}
	if err := checkListen(cfg, registry); err != nil {
		return nil, err
	}
	var bs *budget.Budgets // --budgets, read before anything starts
	if cfg.Budgets != "" {
		var err error
		if bs, err = budget.Load(cfg.Budgets); err != nil {
			return nil, err
		}
	}

	s.node = cfg.NodeID
	if s.node == "" {
		s.node = nodeID()
	}
	var err error
	if cfg.DatabaseURL == "" {
		if s.dirLock, err = lockDataDir(cfg.DataDir, s.node); err != nil {
			if errors.Is(err, errDataDirLocked) {
				return nil, err
			}
			return nil, fmt.Errorf("open the store: %w", err)
		}
	}
	s.metrics = metrics.New()
	if s.store, err = openStore(ctx, cfg, log, s.metrics); err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	if opts.Store != nil {
		s.store = opts.Store(s.store)
	}
	if cfg.BusURL != "" {
		// In a cluster every line says which node wrote it.
		log = log.With("node", s.node)
		s.log = log
	}
	var ready func() bool // whether this node may start runs
	if cfg.BusURL != "" {
		if opts.Cluster == nil {
			return nil, errors.New("connect to the bus: no bus is built into this server (server.Options.Cluster)")
		}
		b, connected, err := opts.Cluster(ctx, cfg.BusURL, s.node, log)
		if err != nil {
			return nil, fmt.Errorf("connect to the bus: %w", err)
		}
		s.bus, ready, s.busUp = b, connected, connected
	} else {
		s.bus = local.New(local.WithMetrics(s.metrics))
	}
	if opts.Bus != nil {
		s.bus = opts.Bus(s.bus)
	}
	s.threads = thread.New(s.store, s.bus, log, thread.Options{Metrics: s.metrics})

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
	if s.box, err = newSandbox(cfg, s.root, opts, log); err != nil {
		return nil, err
	}
	all := builtin.New(s.root, builtin.Options{Logger: log, Sandbox: s.box})
	if err := s.startMCP(ctx, cfg.MCP, all, log); err != nil {
		return nil, err
	}
	toolset := all.Filter(policy)

	model, desc, err := newModel(cfg, log, opts.Models)
	if err != nil {
		return nil, fmt.Errorf("set up the model: %w", err)
	}
	s.ModelDesc, s.model = desc, model
	model = observe(model, s.metrics, cfg.Provider())
	// The adapters see the model in use and its context window.
	cfg.Model = model.Name()
	if cfg.ContextWindow == 0 {
		cfg.ContextWindow = llm.ContextWindow(cfg.Model)
	}
	liveDeltas, _ := cfg.LiveDeltaWindow() // checked by Validate
	var budgets agent.Budget               // nil: no budgets
	if bs != nil {
		budgets = budget.NewChecker(budget.Config{Budgets: bs, Spending: s.store, Owners: s.store, Metrics: s.metrics})
	}
	ag := agent.New(agent.Config{
		Model: model, Tools: toolset, Policy: tools.Judge{Policy: policy, Sandbox: s.box.Kind()}, MaxSteps: cfg.MaxSteps,
		TotBranches: cfg.TotBranches, TotDepth: cfg.TotDepth, GraphParallel: cfg.GraphParallel,
		System: systemPrompt, Logger: log, Metrics: s.metrics,
		ContextWindow: cfg.ContextWindow, CompactThreshold: cfg.CompactThreshold,
		InputTimeout: cfg.InputTimeout,
		// By default scripted scenarios are played chunk for chunk, so
		// that contract tests see the same frames every run.
		CoalesceDeltas:      cfg.CoalesceDeltas == "on" || (cfg.CoalesceDeltas == "auto" && cfg.Provider() != "scripted"),
		LiveDeltas:          liveDeltas,
		LiveDeltasUnwatched: max(liveDeltas, config.UnwatchedLiveDeltas),
		Budget:              budgets,
	})
	workflows, err := workflow.New(cfg.Workflows)
	if err != nil {
		return nil, fmt.Errorf("--workflows: %w", err)
	}
	for _, werr := range workflows.Check() {
		log.Warn("a workflow does not load; runs of it will be refused", "err", werr)
	}
	prep := &preparer{root: s.root, box: s.box, policy: policy, log: log, workflows: workflows, model: modelNamed(cfg, log, model, s.metrics, opts.Models)}
	s.runs = runs.New(runs.Config{Log: s.threads, Claims: s.store, Bus: s.bus, Runner: ag, Node: s.node,
		Lease: cfg.RunLease, Shared: cfg.BusURL != "", Prepare: prep.prepare, Ready: ready, Logger: log, Metrics: s.metrics})
	if err := s.runs.Recover(ctx); err != nil {
		return nil, fmt.Errorf("recover unfinished runs: %w", err)
	}
	s.core = &core{threads: s.threads, runs: s.runs, owners: s.store, known: map[string]string{},
		limits: newRunLimits(cfg.RunRate, cfg.RunBurst)}

	s.reg = wsconn.NewRegistry()
	s.authn, err = auth.New(auth.Config{Mode: cfg.Auth, APIKeys: cfg.APIKeys, APIKeysFile: cfg.APIKeysFile,
		JWTKeys: cfg.JWTKeys, JWTSecret: cfg.JWTSecret, JWTAudience: cfg.JWTAudience})
	if err != nil {
		return nil, err
	}
	s.guard = newGuard(cfg, log)
	s.caps = newConnCaps(cfg.MaxConns, cfg.MaxConnsPerIP, log)
	connOpts := opts.Conn
	// The guard has checked the Origin of every upgrade before it gets here.
	connOpts.SkipOriginCheck = true
	connOpts.Subprotocols = []string{auth.Subprotocol}
	env := protocol.Env{Core: s.core, Model: cfg.Model, ContextWindow: cfg.ContextWindow,
		Workdir: s.root, Tools: toolset.Specs(),
		Agentchat: protocol.AgentchatSettings{Stream: cfg.AgentchatStream, Broadcast: cfg.AgentchatBroadcast == "all"},
		AG2: protocol.AG2Settings{Rate: cfg.AG2Rate, Burst: cfg.AG2Burst, LegacyTypes: cfg.AG2LegacyTypes, Prices: cfg.Prices, TextTurns: cfg.AG2TextTurns,
			ResumeAfterSeq: cfg.AG2Resume == "after-seq"},
		Loom:  protocol.LoomSettings{RunStart: cfg.LoomRunStart},
		Conns: s.reg, Conn: connOpts, Heartbeat: opts.Heartbeat, Logger: log, Verify: opts.Verify, Workflows: workflows, Metrics: s.metrics}
	for _, r := range registry {
		a, err := r.New(env)
		if err != nil {
			return nil, fmt.Errorf("set up the %s protocol: %w", r.Name, err)
		}
		s.adapters = append(s.adapters, adapter{name: r.Name, Adapter: a})
	}
	ok = true
	return s, nil
}

// newSandbox builds the sandbox --sandbox asks for, probing the kernel in
// the working folder. Without one (auto mode on a kernel that lacks
// Landlock or user namespaces) it warns that every command will ask;
// under --sandbox require it refuses to start.
func newSandbox(cfg config.Config, root *sandbox.Root, opts Options, log *slog.Logger) (*sandbox.Sandbox, error) {
	mode, err := sandbox.ParseMode(cfg.Sandbox)
	if err != nil {
		return nil, err
	}
	box, err := sandbox.New(sandbox.Config{Mode: mode, Network: cfg.SandboxNetwork == "on", Dir: root.Dir(),
		Missing: opts.SandboxMissing, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("--sandbox require: %w", err)
	}
	switch box.Kind() {
	case sandbox.KindNone:
		log.Warn("no OS sandbox for the tools' commands: every command will ask for approval first", "missing", box.Missing())
	case sandbox.KindOff:
		log.Warn("--sandbox off: the tools' commands run unconfined (danger-full-access)")
	}
	return box, nil
}

// checkListen refuses a --listen for a protocol the registry does not
// have: the listener would serve nothing.
func checkListen(cfg config.Config, registry []protocol.Registration) error {
	names := make([]string, len(registry))
	for i, r := range registry {
		names[i] = r.Name
	}
	for _, proto := range slices.Sorted(maps.Keys(cfg.Listen)) {
		if !slices.Contains(names, proto) {
			return fmt.Errorf("--listen %s=%s: this build of agentwire does not serve a protocol named %q; it serves %s",
				proto, cfg.Listen[proto], proto, strings.Join(names, ", "))
		}
	}
	return nil
}

// authDesc says how requests are authenticated, for the banner.
func authDesc(cfg config.Config) string {
	switch cfg.Auth {
	case "keys":
		return "API keys (Authorization: Bearer <key>)"
	case "jwt":
		return "JSON Web Tokens (Authorization: Bearer <token>)"
	}
	if cfg.InsecureNoAuth {
		return "none, on purpose (--insecure-no-auth): every request is anonymous's"
	}
	return "none: every request is anonymous's (loopback only)"
}

// redactURL drops a password from a URL for the banner.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// nodeID names this server process in run claims: the host name and a
// random suffix, so that two processes on one machine differ.
func nodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "agentwire"
	}
	id := event.NewID()
	return host + "-" + strings.ToLower(id[len(id)-6:])
}

// openStore opens the thread store the configuration names. On failure
// the store is a nil interface, never a nil pointer in one, so that the
// cleanup in New skips it.
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger, m *metrics.Metrics) (store.Store, error) {
	if cfg.DatabaseURL != "" {
		st, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Options{Logger: log, Metrics: m})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := sqlite.Open(ctx, sqlite.Options{Dir: cfg.DataDir, Logger: log, Metrics: m})
	if err != nil {
		return nil, err
	}
	return st, nil
}

const systemPrompt = `You are the assistant of agentwire, working in a folder of files the user shares with you.
Use the tools to look at files, change them and run commands when that helps; paths are relative to the working folder.
Prefer reading before writing. Keep answers short and concrete, and say what you changed.`

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
