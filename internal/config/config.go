// Package config parses agentwire's command line and environment into one
// typed Config. Every flag --name can also be set as AGENTWIRE_NAME (dashes
// become underscores); a flag on the command line wins over the variable.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"time"
)

// Config is the server's whole configuration.
type Config struct {
	// Addr is the main listener; every protocol is served on it at its path.
	Addr string
	// Listen maps a protocol to an extra address that serves only that
	// protocol, at the root as well as at its path. The server refuses a
	// protocol it does not serve.
	Listen map[string]string
	// DataDir holds the SQLite database when DatabaseURL is empty.
	DataDir string
	// DatabaseURL selects PostgreSQL when it is a postgres:// URL.
	DatabaseURL string
	// BusURL selects the NATS bus (nats://…) that joins this server to the
	// other nodes sharing DatabaseURL; empty runs a single node.
	BusURL string
	// NodeID names this server in run claims and logs; empty is the host
	// name and a random suffix.
	NodeID string
	// RunLease is how long a node's claim on a thread's run lasts without
	// renewal: how soon another node takes over a dead node's threads.
	RunLease time.Duration
	// Workdir is the folder tools work in.
	Workdir string
	// LLM is the provider (openai, anthropic, gemini, scripted); empty
	// chooses from the API keys in the environment.
	LLM string
	// Model is the model name; empty takes the provider's default.
	Model string
	// Scenario is a scripted-model scenario file or folder, or the name of
	// a built-in one (ag2-tour, agentchat-tour, ...).
	Scenario string
	// ScenarioPacing is "scenario" (the scripted model streams at the
	// pace its scenario sets) or "none" (every reply at once, whatever the
	// scenario says).
	ScenarioPacing string
	// Workflows is the folder of multi-agent workflow files (YAML, see
	// docs/WORKFLOWS.md); empty offers only the built-in workflows.
	Workflows string
	// ApprovalPolicy is suggest, auto-edit, full-auto or read-only.
	ApprovalPolicy string
	// Sandbox is how the programs tools start are confined: auto (the OS
	// sandbox where the kernel allows it, else every command asks),
	// require (refuse to start without it) or off (none:
	// danger-full-access).
	Sandbox string
	// SandboxNetwork is on when approved sandboxed commands may reach the
	// network; off (the default) gives every command none.
	SandboxNetwork string
	// MaxSteps caps the model calls of one run.
	MaxSteps int
	// TotBranches and TotDepth shape the tot strategy's tree: candidates
	// per step, and levels. GraphParallel caps the got nodes run at once.
	TotBranches, TotDepth, GraphParallel int
	// RunRate is how many runs a principal may start a minute (0: no
	// limit), RunBurst how many at once.
	RunRate, RunBurst int
	// CompactThreshold is the share of the model's context window (0..1)
	// past which a run compacts the conversation before calling the model;
	// 0 turns automatic compaction off.
	CompactThreshold float64
	// ContextWindow overrides the model's context window, in tokens; 0
	// takes it from the table of known models (llm.ContextWindow).
	ContextWindow int
	// AgentchatBroadcast is "session" (events go to the sockets of the same
	// session) or "all" (every socket, as the original server did).
	AgentchatBroadcast string
	// AgentchatStream is how agentchat sockets get the agent's text:
	// "message" (one agent_message per finished message, the document's
	// shape) or "chunks" (one agent_message per model text chunk, as it
	// streams). A socket's ?stream= overrides it.
	AgentchatStream string
	// CoalesceDeltas is "auto" (merge the deltas that gather behind a slow
	// commit for vendor models, not for the scripted one), "on" or "off"
	// (agent.Config.CoalesceDeltas).
	CoalesceDeltas string
	// LiveDeltas is "auto" (previews with the default window for vendor
	// models, none for the scripted one), "off", or a window such as
	// "250ms": streamed deltas reach live subscribers ahead of their commit,
	// which waits up to the window (agent.Config.LiveDeltas).
	LiveDeltas string
	// ShutdownGrace is how long running turns may go on after a stop signal.
	ShutdownGrace time.Duration
	// DebugAddr, when set, is a loopback address that serves the Go
	// profiler (net/http/pprof) and runtime metrics; empty serves none.
	DebugAddr string
	// MetricsAddr, when set, is a loopback address that serves the
	// Prometheus metrics at /metrics; empty serves none (the debug
	// listener serves them too).
	MetricsAddr string
	// PrintAddr prints the bound addresses as KEY=VALUE lines
	// (AGENTWIRE_ADDR=host:port, ...) on stdout once the listeners accept
	// connections, before the banner.
	PrintAddr bool
	// AddrFile, when set, is a file the same lines are written to (at
	// once, whole) once the listeners accept connections; it is removed
	// when the server exits.
	AddrFile string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// LogFormat is text (key=value pairs) or json (an object a line).
	LogFormat string
	// MCP is the file of MCP servers whose tools are offered beside the
	// built-in ones ("": none).
	MCP string
	// CheckModel makes a failed check of the configured model at start
	// fatal (it is a warning otherwise).
	CheckModel bool

	// Auth is how requests are authenticated: none, keys or jwt.
	Auth string
	// APIKeysFile and APIKeys (AGENTWIRE_API_KEYS) hold principal=key
	// pairs for --auth keys.
	APIKeysFile, APIKeys string
	// JWTKeys (a PEM or JWK Set file) or JWTSecret (AGENTWIRE_JWT_SECRET)
	// verify tokens for --auth jwt; JWTAudience, if set, must be theirs.
	JWTKeys, JWTSecret, JWTAudience string
	// InsecureNoAuth allows --auth none on a listener that is not loopback.
	InsecureNoAuth bool
	// AllowedHosts are Host names served besides the loopback names and IP
	// addresses (DNS rebinding protection).
	AllowedHosts []string
	// AllowedOrigins are the browser origins (patterns with one '*') that
	// may open WebSockets, post, and read the threads API cross-origin.
	AllowedOrigins []string
	// MaxConns and MaxConnsPerIP cap the connections open at once, in all
	// and from one client address.
	MaxConns, MaxConnsPerIP int
	// BodyTimeout bounds reading a request's body.
	BodyTimeout time.Duration

	// InputTimeout bounds how long a run waits for a person's answer to an
	// input or UI request (0: no limit).
	InputTimeout time.Duration
	// AG2Rate and AG2Burst are the token bucket of AG2 chat.* client
	// messages, per socket and per user_id: messages a second and burst.
	AG2Rate  float64
	AG2Burst int
	// AG2LegacyTypes makes the AG2 adapter also send the legacy
	// un-namespaced duplicate of every chat.* frame.
	AG2LegacyTypes bool
	// LoomRunStart makes the Loom adapter send the run_start event of
	// loom-stream-events.md before a run's first node_enter (the original
	// server sent none, and its typed client refuses one).
	LoomRunStart bool
	// AG2TextTurns makes AG2 text sent without a request id always a new
	// user turn; by default it answers the chat's pending input request
	// when there is one, as ChatUI expects.
	AG2TextTurns bool
	// AG2Resume is what an AG2 socket's first client.resume replays:
	// "transcript" (the chat from its start, as ChatUI, whose screen is
	// empty after a reload, needs) or "after-seq" (only the frames after
	// lastClientIndex, the document's strict reading).
	AG2Resume string
	// Prices is a YAML price table (USD per million tokens by model) that
	// replaces the built-in one for usage costs.
	Prices string
	// Budgets is the budgets file: per-principal token and cost limits
	// per day and month, checked before every model call (see
	// internal/budget and docs/OPERATIONS.md); "" sets none.
	Budgets string

	// Provider credentials, read from their conventional variables.
	OpenAIAPIKey    string
	OpenAIBaseURL   string
	AnthropicAPIKey string
	GeminiAPIKey    string
}

// listenFlag collects repeated --listen proto=addr values.
type listenFlag map[string]string

func (l listenFlag) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

func (l listenFlag) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		proto, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || addr == "" {
			return fmt.Errorf("want proto=addr, got %q", item)
		}
		if !validProtoName(proto) {
			return fmt.Errorf("protocol name %q: want lower-case letters and digits, e.g. threads=127.0.0.1:3030", proto)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("bad address %q: %v", addr, err)
		}
		l[proto] = addr
	}
	return nil
}

func validProtoName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// listFlag collects comma-separated values; repeating the flag adds more.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}

// ErrHelp is returned when -h or --help was asked for; usage was printed.
var ErrHelp = flag.ErrHelp

// Parse reads args (without the program name) and the environment.
func Parse(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	c := Config{Listen: map[string]string{}}
	fs := flag.NewFlagSet("agentwire", flag.ContinueOnError)
	fs.SetOutput(usage)
	defineFlags(fs, &c)
	fs.Usage = func() { usageText(fs, usage) }

	// Environment first, so flags given on the command line override it.
	var envErr error
	fromEnv := map[string]bool{} // flags whose value came from their variable
	fs.VisitAll(func(f *flag.Flag) {
		name := EnvName(f.Name)
		if v := getenv(name); v != "" {
			if err := fs.Set(f.Name, v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %v", name, v, err)
			}
			fromEnv[f.Name] = true
		}
	})
	if envErr != nil {
		return Config{}, envErr
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	// The command line wins over the environment: find what it set.
	cli := flag.NewFlagSet("agentwire", flag.ContinueOnError)
	cli.SetOutput(io.Discard)
	defineFlags(cli, &Config{Listen: map[string]string{}})
	_ = cli.Parse(args) // fs.Parse accepted args
	cli.Visit(func(f *flag.Flag) { delete(fromEnv, f.Name) })
	c.APIKeys = getenv("AGENTWIRE_API_KEYS")
	c.JWTSecret = getenv("AGENTWIRE_JWT_SECRET")
	c.OpenAIAPIKey = getenv("OPENAI_API_KEY")
	c.OpenAIBaseURL = getenv("OPENAI_BASE_URL")
	c.AnthropicAPIKey = getenv("ANTHROPIC_API_KEY")
	c.GeminiAPIKey = getenv("GEMINI_API_KEY")
	if c.GeminiAPIKey == "" {
		c.GeminiAPIKey = getenv("GOOGLE_API_KEY")
	}
	return c, c.validate(func(flag string) string {
		if fromEnv[flag] {
			return EnvName(flag)
		}
		return "--" + flag
	})
}

// defineFlags declares every flag of c on fs.
func defineFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "main listen address; every protocol is served on it")
	fs.Var(listenFlag(c.Listen), "listen", "proto=addr: also serve one protocol at the root of its own address (repeatable), e.g. threads=127.0.0.1:3030")
	fs.StringVar(&c.DataDir, "data-dir", "./data", "folder for the SQLite database")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "postgres:// URL to keep threads in PostgreSQL instead of SQLite")
	fs.StringVar(&c.BusURL, "bus-url", "", "nats:// URL of the bus that joins several servers sharing --database-url (empty: one node)")
	fs.StringVar(&c.NodeID, "node-id", "", "this server's name in run claims and logs (default: host name and a random suffix)")
	fs.DurationVar(&c.RunLease, "run-lease", 15*time.Second, "how long a run claim lasts without renewal: how soon another node takes over a dead node's threads")
	fs.StringVar(&c.Workdir, "workdir", "./workspace", "working folder the agent's tools are confined to")
	fs.StringVar(&c.LLM, "llm", "", "model provider: openai, anthropic, gemini or scripted (default: from the API keys set, else scripted)")
	fs.StringVar(&c.Model, "model", "", "model name (default: the provider's default)")
	fs.BoolVar(&c.CheckModel, "check-model", false, "refuse to start when the configured model cannot be used (the start-up check of its provider is a warning otherwise)")
	fs.StringVar(&c.Scenario, "scenario", "", "scenario file or folder for the scripted model, or a built-in one: ag2-tour, agentchat-tour, threads-tour, loom-tour, agentloop-tour (docs/SCENARIOS.md)")
	fs.StringVar(&c.ScenarioPacing, "scenario-pacing", "scenario", "how fast the scripted model streams: scenario (the delays its scenario sets) or none (every reply at once)")
	fs.StringVar(&c.Workflows, "workflows", "", "folder of multi-agent workflow files (NAME.yaml; see docs/WORKFLOWS.md); the built-in default and dev-team are always there")
	fs.StringVar(&c.MCP, "mcp", "", "YAML file of MCP servers (stdio programs run in the sandbox, or streamable-HTTP URLs) whose tools the model is offered beside the built-ins (docs/AGENTS.md)")
	fs.StringVar(&c.ApprovalPolicy, "approval-policy", "suggest", "suggest, auto-edit, full-auto or read-only")
	fs.StringVar(&c.Sandbox, "sandbox", "auto", "confine the commands tools run in an OS sandbox: auto (when the kernel allows it; otherwise every command asks first), require (refuse to start without it) or off (no sandbox: danger-full-access)")
	fs.StringVar(&c.SandboxNetwork, "sandbox-network", "off", "let approved sandboxed commands reach the network: off or on (commands that run without approval never do)")
	fs.IntVar(&c.MaxSteps, "max-steps", 10, "most model calls in one run")
	fs.IntVar(&c.TotBranches, "tot-branches", 3, "candidate thoughts the tot strategy proposes per step")
	fs.IntVar(&c.TotDepth, "tot-depth", 5, "most levels of the tot strategy's tree")
	fs.IntVar(&c.GraphParallel, "graph-parallel", 4, "most sub-tasks the got strategies run at once in a run")
	fs.IntVar(&c.RunRate, "run-rate", 600, "runs a principal may start a minute, on all protocols together (0: no limit)")
	fs.IntVar(&c.RunBurst, "run-burst", 100, "runs a principal may start at once before --run-rate applies")
	fs.Float64Var(&c.CompactThreshold, "compact-threshold", 0.8, "share of the model's context window (0..1) past which the conversation is compacted into a summary; 0: never automatically")
	fs.IntVar(&c.ContextWindow, "context-window", 0, "the model's context window in tokens (default: from the table of known models)")
	fs.StringVar(&c.AgentchatBroadcast, "agentchat-broadcast", "session", "agentchat delivery: session (sockets of the same session) or all (every socket)")
	fs.StringVar(&c.AgentchatStream, "agentchat-stream", "message", "agentchat text: message (one agent_message per finished message) or chunks (one per model text chunk as it streams); a socket's ?stream= overrides it")
	fs.StringVar(&c.LiveDeltas, "live-deltas", "auto", "send streamed deltas to threads SSE and agentchat clients at once and commit them in batches of up to this long: auto ("+DefaultLiveDeltas.String()+", except for the scripted model), off, or a duration; "+UnwatchedLiveDeltas.String()+" (or this, if longer) while every live client took them ahead")
	fs.StringVar(&c.CoalesceDeltas, "coalesce-deltas", "auto", "merge the streamed deltas of one message that gather while a commit is in flight into one event: auto (on, except for the scripted model, whose scenarios contract tests replay chunk for chunk), on or off")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", 10*time.Second, "how long running turns may finish after SIGINT/SIGTERM")
	fs.StringVar(&c.DebugAddr, "debug-addr", "", "loopback address (e.g. 127.0.0.1:6060) that serves the Go profiler at /debug/pprof/ and runtime metrics at /debug/vars, /debug/metrics and /metrics (default: off)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "loopback address (e.g. 127.0.0.1:9464) that serves Prometheus metrics at /metrics (default: off)")
	fs.BoolVar(&c.PrintAddr, "print-addr", false, "once the listeners accept connections, print the bound addresses on stdout as KEY=VALUE lines (AGENTWIRE_ADDR=127.0.0.1:PORT, AGENTWIRE_URL, one AGENTWIRE_<PROTOCOL>_URL each), before the banner; useful with --addr 127.0.0.1:0")
	fs.StringVar(&c.AddrFile, "addr-file", "", "once the listeners accept connections, write the --print-addr lines to this file (whole, at once); it is removed when the server exits")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text (key=value pairs) or json (an object a line); lines of a connection carry its conn id, lines of a run its thread and run")
	fs.StringVar(&c.Auth, "auth", "none", "authentication: none, keys (API keys from AGENTWIRE_API_KEYS or --api-keys-file) or jwt (--jwt-keys or AGENTWIRE_JWT_SECRET)")
	fs.StringVar(&c.Budgets, "budgets", "", "YAML file of per-principal token and cost budgets per day and month, checked before every model call (see docs/OPERATIONS.md)")
	fs.StringVar(&c.APIKeysFile, "api-keys-file", "", "file of principal=key lines for --auth keys ('#' comments)")
	fs.StringVar(&c.JWTKeys, "jwt-keys", "", "PEM public keys (RSA, Ed25519) or a JWK Set file for --auth jwt")
	fs.StringVar(&c.JWTAudience, "jwt-audience", "", "the audience a token must name, for --auth jwt")
	fs.BoolVar(&c.InsecureNoAuth, "insecure-no-auth", false, "allow --auth none on an address other machines can reach")
	fs.Var((*listFlag)(&c.AllowedHosts), "allowed-hosts", "Host names to serve besides the loopback names and IP addresses, comma-separated (e.g. agents.example.com)")
	fs.Var((*listFlag)(&c.AllowedOrigins), "allowed-origins", "browser origins allowed cross-origin, comma-separated, one '*' each (e.g. http://localhost:5173,https://*.example.com)")
	fs.IntVar(&c.MaxConns, "max-conns", 1024, "connections open at once, in all")
	fs.IntVar(&c.MaxConnsPerIP, "max-conns-per-ip", 128, "connections open at once from one client address")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", 30*time.Second, "how long a client may take to send a request's body")
	fs.DurationVar(&c.InputTimeout, "input-timeout", 10*time.Minute, "how long a run waits for a person's answer to an input or UI request (0: no limit)")
	fs.Float64Var(&c.AG2Rate, "ag2-rate", 5, "AG2 chat.* client messages a second, per socket and per user_id (0: no limit)")
	fs.IntVar(&c.AG2Burst, "ag2-burst", 10, "AG2 chat.* client messages at once before --ag2-rate applies")
	fs.BoolVar(&c.AG2TextTurns, "ag2-text-turns", false, "AG2: text sent without a request id is always a new turn, even while an input request is pending (by default it answers that request, as ChatUI expects)")
	fs.StringVar(&c.AG2Resume, "ag2-resume", "transcript", "AG2: what a socket's first client.resume replays: transcript (the chat from its start, answered requests not asked again, as ChatUI needs after a page reload) or after-seq (only the frames after lastClientIndex, the document's strict reading)")
	fs.BoolVar(&c.AG2LegacyTypes, "ag2-legacy-types", false, "AG2: also send the legacy un-namespaced duplicate of every chat.* frame, for old frontends")
	fs.BoolVar(&c.LoomRunStart, "loom-run-start", false, "Loom: send the document's run_start event before a run's first node_enter (the original server sent none; its typed client refuses it)")
	fs.StringVar(&c.Prices, "prices", "", "YAML price table (USD per million prompt/completion tokens by model) for usage costs (default: built in)")
}

// EnvName is the environment variable of flag: AGENTWIRE_ and the flag's
// name in capitals, dashes as underscores.
func EnvName(flag string) string {
	return "AGENTWIRE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Environment holds the variables agentwire reads besides the flags'
// AGENTWIRE_ ones, with what each is for (--help lists them).
var Environment = [][2]string{
	{"OPENAI_API_KEY", "an OpenAI key (or any OpenAI-compatible server's); selects the openai provider"},
	{"OPENAI_BASE_URL", "an OpenAI-compatible server's URL (Ollama, vLLM, llama.cpp), e.g. http://127.0.0.1:11434/v1"},
	{"ANTHROPIC_API_KEY", "an Anthropic key; selects the anthropic provider"},
	{"GEMINI_API_KEY, GOOGLE_API_KEY", "a Gemini key; selects the gemini provider"},
	{"AGENTWIRE_API_KEYS", "principal=key pairs, comma-separated, for --auth keys"},
	{"AGENTWIRE_JWT_SECRET", "an HS256 secret for --auth jwt"},
}

// Flags are the names of every flag, sorted.
func Flags() []string {
	fs := flag.NewFlagSet("agentwire", flag.ContinueOnError)
	defineFlags(fs, &Config{Listen: map[string]string{}})
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// usageText prints --help: how to start agentwire, every flag with its
// AGENTWIRE_ variable and default, and the other variables it reads.
func usageText(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: agentwire [flags]\n\n"+
		"Runs the agentwire server. With no model key set it runs the offline scripted model\n"+
		"(a --scenario file also selects it). Every flag can also be set with its environment\n"+
		"variable; a flag on the command line wins.\n\nFlags:\n")
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if kind != "" {
			line += " " + kind
		}
		fmt.Fprintf(w, "%s  (%s)\n    \t%s", line, EnvName(f.Name), strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %q)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprintf(w, "\nEnvironment (besides the flags' own):\n")
	for _, v := range Environment {
		fmt.Fprintf(w, "  %s\n    \t%s\n", v[0], v[1])
	}
}

// validate checks c; n names a flag in its messages as the user set it
// (--name, or the AGENTWIRE_ variable it came from).
func (c *Config) validate(n func(flag string) string) error {
	var errs []error
	switch c.ApprovalPolicy {
	case "suggest", "auto-edit", "full-auto", "read-only":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want suggest, auto-edit, full-auto or read-only", n("approval-policy"), c.ApprovalPolicy))
	}
	switch c.Sandbox {
	case "auto", "require", "off":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want auto, require or off", n("sandbox"), c.Sandbox))
	}
	switch c.SandboxNetwork {
	case "off", "on":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want off or on", n("sandbox-network"), c.SandboxNetwork))
	}
	switch c.LLM {
	case "", "openai", "anthropic", "gemini", "scripted":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want openai, anthropic, gemini or scripted", n("llm"), c.LLM))
	}
	switch c.AG2Resume {
	case "transcript", "after-seq":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want transcript or after-seq", n("ag2-resume"), c.AG2Resume))
	}
	switch c.AgentchatBroadcast {
	case "session", "all":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want session or all", n("agentchat-broadcast"), c.AgentchatBroadcast))
	}
	switch c.AgentchatStream {
	case "message", "chunks":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want message or chunks", n("agentchat-stream"), c.AgentchatStream))
	}
	switch c.ScenarioPacing {
	case "scenario", "none":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want scenario or none", n("scenario-pacing"), c.ScenarioPacing))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want debug, info, warn or error", n("log-level"), c.LogLevel))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want text or json", n("log-format"), c.LogFormat))
	}
	switch c.CoalesceDeltas {
	case "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want auto, on or off", n("coalesce-deltas"), c.CoalesceDeltas))
	}
	if _, err := c.LiveDeltaWindow(); err != nil {
		errs = append(errs, err)
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		errs = append(errs, fmt.Errorf("%s: only postgres:// URLs are supported", n("database-url")))
	}
	if c.CompactThreshold < 0 || c.CompactThreshold > 1 {
		errs = append(errs, fmt.Errorf("%s %v: want a share between 0 and 1, e.g. 0.8", n("compact-threshold"), c.CompactThreshold))
	}
	if c.InputTimeout < 0 {
		errs = append(errs, fmt.Errorf("%s %v: want a duration, or 0 for no limit", n("input-timeout"), c.InputTimeout))
	}
	if c.AG2Rate < 0 || c.AG2Burst < 1 {
		errs = append(errs, fmt.Errorf("%s %v, %s %d: want a rate of 0 (no limit) or more and a burst of 1 or more", n("ag2-rate"), c.AG2Rate, n("ag2-burst"), c.AG2Burst))
	}
	if c.ContextWindow < 0 {
		errs = append(errs, fmt.Errorf("%s must not be negative", n("context-window")))
	}
	if c.BusURL != "" && !strings.HasPrefix(c.BusURL, "nats://") && !strings.HasPrefix(c.BusURL, "tls://") {
		errs = append(errs, fmt.Errorf("%s: only nats:// (or tls://) URLs are supported", n("bus-url")))
	}
	if c.BusURL != "" && c.DatabaseURL == "" {
		errs = append(errs, fmt.Errorf("%s joins servers that share a database: set %s too (SQLite is one server's)", n("bus-url"), n("database-url")))
	}
	if c.RunLease < time.Second {
		errs = append(errs, fmt.Errorf("%s must be at least 1s", n("run-lease")))
	}
	switch c.Auth {
	case "none", "keys", "jwt":
	default:
		errs = append(errs, fmt.Errorf("%s %q: want none, keys or jwt", n("auth"), c.Auth))
	}
	if c.MaxConns < 1 || c.MaxConnsPerIP < 1 {
		errs = append(errs, fmt.Errorf("%s and %s must be at least 1", n("max-conns"), n("max-conns-per-ip")))
	}
	if c.BodyTimeout < time.Second {
		errs = append(errs, fmt.Errorf("%s must be at least 1s", n("body-timeout")))
	}
	for _, o := range c.AllowedOrigins {
		if strings.Count(o, "*") > 1 || !strings.Contains(o, "://") {
			errs = append(errs, fmt.Errorf("%s %q: want scheme://host[:port], with at most one '*'", n("allowed-origins"), o))
		}
	}
	if c.RunRate < 0 || c.RunBurst < 1 {
		errs = append(errs, fmt.Errorf("%s must be 0 or more and %s at least 1", n("run-rate"), n("run-burst")))
	}
	if c.MaxSteps < 1 {
		errs = append(errs, fmt.Errorf("%s must be at least 1", n("max-steps")))
	}
	if c.TotBranches < 1 || c.TotDepth < 1 || c.GraphParallel < 1 {
		errs = append(errs, fmt.Errorf("%s, %s and %s must be at least 1", n("tot-branches"), n("tot-depth"), n("graph-parallel")))
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("%s %q: %v", n("addr"), c.Addr, err))
	}
	if c.DebugAddr != "" {
		if _, _, err := net.SplitHostPort(c.DebugAddr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %v", n("debug-addr"), c.DebugAddr, err))
		}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %v", n("metrics-addr"), c.MetricsAddr, err))
		}
	}
	return errors.Join(errs...)
}

// Provider returns the model provider to use: --llm if set; scripted when a
// --scenario is given; else the first of openai, anthropic, gemini whose key
// is set; else scripted.
func (c *Config) Provider() string {
	switch {
	case c.LLM != "":
		return c.LLM
	case c.Scenario != "":
		return "scripted"
	case c.OpenAIAPIKey != "" || c.OpenAIBaseURL != "":
		return "openai"
	case c.AnthropicAPIKey != "":
		return "anthropic"
	case c.GeminiAPIKey != "":
		return "gemini"
	}
	return "scripted"
}

// DefaultLiveDeltas is the commit window of --live-deltas auto: at 50
// tokens a second, a dozen tokens to a commit.
const DefaultLiveDeltas = 250 * time.Millisecond

// UnwatchedLiveDeltas is the commit window, when the --live-deltas window
// is shorter, while every live subscriber of the thread takes previews
// (agent.Config.LiveDeltasUnwatched): only a subscriber that sees deltas
// once committed (AG2, Loom, AgentLoop) needs them committed often.
const UnwatchedLiveDeltas = time.Second

// LiveDeltaWindow is --live-deltas as a window, 0 for off.
func (c *Config) LiveDeltaWindow() (time.Duration, error) {
	switch c.LiveDeltas {
	case "auto":
		if c.Provider() == "scripted" {
			return 0, nil
		}
		return DefaultLiveDeltas, nil
	case "off", "":
		return 0, nil
	}
	d, err := time.ParseDuration(c.LiveDeltas)
	if err != nil || d <= 0 || d > 10*time.Second {
		return 0, fmt.Errorf("--live-deltas %q: want auto, off or a duration from 1ms to 10s", c.LiveDeltas)
	}
	return d, nil
}
