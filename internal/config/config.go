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

// Protocols served, by the names --listen takes.
var Protocols = []string{"agentchat", "ag2", "threads", "loom", "agentloop"}

// Config is the server's whole configuration.
type Config struct {
	// Addr is the main listener; every protocol is served on it at its path.
	Addr string
	// Listen maps a protocol to an extra address that serves only that
	// protocol, at the root as well as at its path.
	Listen map[string]string
	// DataDir holds the SQLite database when DatabaseURL is empty.
	DataDir string
	// DatabaseURL selects PostgreSQL when it is a postgres:// URL.
	DatabaseURL string
	// Workdir is the folder tools work in.
	Workdir string
	// LLM is the provider (openai, anthropic, gemini, scripted); empty
	// chooses from the API keys in the environment.
	LLM string
	// Model is the model name; empty takes the provider's default.
	Model string
	// Scenario is a scripted-model scenario file or folder.
	Scenario string
	// ApprovalPolicy is suggest, auto-edit, full-auto or read-only.
	ApprovalPolicy string
	// MaxSteps caps the model calls of one run.
	MaxSteps int
	// AgentchatBroadcast is "session" (events go to the sockets of the same
	// session) or "all" (every socket, as the original server did).
	AgentchatBroadcast string
	// ShutdownGrace is how long running turns may go on after a stop signal.
	ShutdownGrace time.Duration
	// LogLevel is debug, info, warn or error.
	LogLevel string

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
		if !slices.Contains(Protocols, proto) {
			return fmt.Errorf("unknown protocol %q (want one of %s)", proto, strings.Join(Protocols, ", "))
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("bad address %q: %v", addr, err)
		}
		l[proto] = addr
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
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "main listen address; every protocol is served on it")
	fs.Var(listenFlag(c.Listen), "listen", "proto=addr: also serve one protocol at the root of its own address (repeatable), e.g. threads=127.0.0.1:3030")
	fs.StringVar(&c.DataDir, "data-dir", "./data", "folder for the SQLite database")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "postgres:// URL to keep threads in PostgreSQL instead of SQLite")
	fs.StringVar(&c.Workdir, "workdir", "./workspace", "working folder the agent's tools are confined to")
	fs.StringVar(&c.LLM, "llm", "", "model provider: openai, anthropic, gemini or scripted (default: from the API keys set, else scripted)")
	fs.StringVar(&c.Model, "model", "", "model name (default: the provider's default)")
	fs.StringVar(&c.Scenario, "scenario", "", "scenario file or folder for the scripted model")
	fs.StringVar(&c.ApprovalPolicy, "approval-policy", "suggest", "suggest, auto-edit, full-auto or read-only")
	fs.IntVar(&c.MaxSteps, "max-steps", 10, "most model calls in one run")
	fs.StringVar(&c.AgentchatBroadcast, "agentchat-broadcast", "session", "agentchat delivery: session (sockets of the same session) or all (every socket)")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", 10*time.Second, "how long running turns may finish after SIGINT/SIGTERM")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")

	// Environment first, so flags given on the command line override it.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "AGENTWIRE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" {
			if err := fs.Set(f.Name, v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %v", name, v, err)
			}
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
	c.OpenAIAPIKey = getenv("OPENAI_API_KEY")
	c.OpenAIBaseURL = getenv("OPENAI_BASE_URL")
	c.AnthropicAPIKey = getenv("ANTHROPIC_API_KEY")
	c.GeminiAPIKey = getenv("GEMINI_API_KEY")
	if c.GeminiAPIKey == "" {
		c.GeminiAPIKey = getenv("GOOGLE_API_KEY")
	}
	return c, c.validate()
}

func (c *Config) validate() error {
	var errs []error
	switch c.ApprovalPolicy {
	case "suggest", "auto-edit", "full-auto", "read-only":
	default:
		errs = append(errs, fmt.Errorf("--approval-policy %q: want suggest, auto-edit, full-auto or read-only", c.ApprovalPolicy))
	}
	switch c.LLM {
	case "", "openai", "anthropic", "gemini", "scripted":
	default:
		errs = append(errs, fmt.Errorf("--llm %q: want openai, anthropic, gemini or scripted", c.LLM))
	}
	switch c.AgentchatBroadcast {
	case "session", "all":
	default:
		errs = append(errs, fmt.Errorf("--agentchat-broadcast %q: want session or all", c.AgentchatBroadcast))
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		errs = append(errs, fmt.Errorf("--database-url: only postgres:// URLs are supported"))
	}
	if c.MaxSteps < 1 {
		errs = append(errs, fmt.Errorf("--max-steps must be at least 1"))
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("--addr %q: %v", c.Addr, err))
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
