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
	"log/slog"
	"maps"
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
