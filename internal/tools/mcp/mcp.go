// Package mcp offers the tools of MCP (Model Context Protocol) servers to
// the model beside the built-in ones, through the official Go SDK. The
// servers are listed in a file (--mcp FILE): stdio servers, which
// agentwire starts as programs inside the tools' OS sandbox, and
// streamable-HTTP servers it connects to. Each server tool becomes a
// tools.Tool named SERVER__TOOL, judged by the same approval policy as the
// built-ins: a tool the server marks read-only (readOnlyHint) is a read,
// any other reaches outside the working folder (a network effect: it asks
// under suggest, runs under auto-edit and full-auto, and is not offered
// under read-only).
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"gopkg.in/yaml.v3"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// Config is the --mcp file: the servers by name.
type Config struct {
	Servers map[string]Server `yaml:"servers" json:"servers"`
}

// Server is one MCP server: a program (Command) or a URL.
type Server struct {
	// Command is a stdio server's program and arguments, started in the
	// working folder inside the OS sandbox.
	Command []string `yaml:"command" json:"command"`
	// Env adds variables to a stdio server's environment when it runs
	// unconfined (--sandbox off, or no sandbox on this kernel); in the OS
	// sandbox a program gets only the sandbox's small allow-list.
	Env map[string]string `yaml:"env" json:"env"`
	// Sandbox is the level a stdio server runs at: read-only (the
	// default) or workspace-write.
	Sandbox string `yaml:"sandbox" json:"sandbox"`
	// URL is a streamable-HTTP server's endpoint.
	URL string `yaml:"url" json:"url"`
	// Headers are sent with every request to URL (e.g. Authorization).
	Headers map[string]string `yaml:"headers" json:"headers"`
}

// Load reads a --mcp file (YAML or JSON).
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("--mcp: %w", err)
	}
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("--mcp %s: %w", path, err)
	}
	for name, s := range c.Servers {
		if !serverName.MatchString(name) {
			return Config{}, fmt.Errorf("--mcp %s: server name %q: use letters, digits and '-' (at most 20)", path, name)
		}
		if (len(s.Command) == 0) == (s.URL == "") {
			return Config{}, fmt.Errorf("--mcp %s: server %q: give either command or url", path, name)
		}
		switch s.Sandbox {
		case "", "read-only", "workspace-write":
		default:
			return Config{}, fmt.Errorf("--mcp %s: server %q: sandbox %q: want read-only or workspace-write", path, name, s.Sandbox)
		}
	}
	return c, nil
}

var serverName = regexp.MustCompile(`^[A-Za-z0-9-]{1,20}$`)

// Set is the connected servers and their tools.
type Set struct {
	tools    []tools.Tool
	sessions []*sdk.ClientSession
	wg       sync.WaitGroup // the stdio servers' Wait
	log      *slog.Logger
}

// connectTimeout bounds connecting to one server and listing its tools.
const connectTimeout = 30 * time.Second

// Start connects to every server of c and lists its tools. A stdio server
// runs in dir inside box. A server that cannot be reached fails Start: an
// operator who configured it expects its tools.
func Start(ctx context.Context, c Config, box *sandbox.Sandbox, dir string, log *slog.Logger) (*Set, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Set{log: log}
	names := make([]string, 0, len(c.Servers))
	for n := range c.Servers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := s.connect(ctx, name, c.Servers[name], box, dir); err != nil {
			s.Close()
			return nil, fmt.Errorf("MCP server %q: %w", name, err)
		}
	}
	return s, nil
}

func (s *Set) connect(ctx context.Context, name string, srv Server, box *sandbox.Sandbox, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var t sdk.Transport
	if srv.URL != "" {
		client := &http.Client{Transport: headerTransport{headers: srv.Headers, next: http.DefaultTransport}}
		t = &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: client}
	} else {
		var err error
		if t, err = s.start(name, srv, box, dir); err != nil {
			return err
		}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "agentwire", Version: "1"}, nil)
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	s.sessions = append(s.sessions, cs)
	before := len(s.tools)
	var cursor string
	for {
		res, err := cs.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			return fmt.Errorf("list its tools: %w", err)
		}
		for _, tl := range res.Tools {
			t, err := newTool(name, cs, tl)
			if err != nil {
				return err
			}
			s.tools = append(s.tools, t)
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	s.log.Info("MCP server connected", "server", name, "tools", len(s.tools)-before)
	return nil
}

// start starts a stdio server's program in the sandbox, at the level its
// configuration names, for as long as the Set lives.
func (s *Set) start(name string, srv Server, box *sandbox.Sandbox, dir string) (sdk.Transport, error) {
	level := sandbox.ReadOnly
	if srv.Sandbox == "workspace-write" {
		level = sandbox.WorkspaceWrite
	}
	env := sandbox.Environ(dir, os.Getenv("LANG"))
	for k, v := range srv.Env {
		env = append(env, k+"="+v)
	}
	// The program lives until the Set closes its input, not as long as a
	// request's context.
	cmd, err := box.Command(context.WithoutCancel(context.Background()), level, sandbox.Request{Dir: dir, Argv: srv.Command, Env: env})
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logWriter{s.log, name}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", srv.Command[0], err)
	}
	s.wg.Go(func() {
		if err := cmd.Wait(); err != nil {
			s.log.Info("MCP server ended", "server", name, "err", err)
		}
	})
	return &sdk.IOTransport{Reader: stdout, Writer: stdin}, nil
}

// Tools are the servers' tools, as agentwire tools.
func (s *Set) Tools() []tools.Tool { return s.tools }

// Close ends the sessions (a stdio server's input closes, and it exits)
// and waits for the servers' programs.
func (s *Set) Close() {
	if s == nil {
		return
	}
	for _, cs := range s.sessions {
		_ = cs.Close()
	}
	s.wg.Wait()
}

// tool is one server tool.
type tool struct {
	spec     tools.Spec
	name     string // the server's own name for it
	readOnly bool
	session  *sdk.ClientSession
}

func newTool(server string, cs *sdk.ClientSession, t *sdk.Tool) (*tool, error) {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || string(schema) == "null" {
		schema = []byte(`{"type":"object"}`)
	}
	name := server + "__" + toolName.ReplaceAllString(t.Name, "_")
	if len(name) > 64 {
		name = name[:64]
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return &tool{
		spec:     tools.Spec{Name: name, Description: desc + " (tool " + t.Name + " of the MCP server " + server + ")", InputSchema: schema},
		name:     t.Name,
		readOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint,
		session:  cs,
	}, nil
}

var toolName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

func (t *tool) Spec() tools.Spec { return t.spec }

// MaxEffect implements tools.Bounded.
func (t *tool) MaxEffect() tools.Effect {
	if t.readOnly {
		return tools.EffectRead
	}
	return tools.EffectNetwork
}

func (t *tool) Classify(json.RawMessage) tools.Class {
	return tools.Class{Effect: t.MaxEffect(), Key: t.spec.Name}
}

func (t *tool) Run(ctx context.Context, args json.RawMessage, out tools.Output) (tools.Result, error) {
	var a map[string]any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return tools.Result{Content: "The arguments are not a JSON object: " + err.Error(), IsError: true}, nil
		}
	}
	res, err := t.session.CallTool(ctx, &sdk.CallToolParams{Name: t.name, Arguments: a})
	if err != nil {
		return tools.Result{Content: "The MCP server could not run the call: " + err.Error(), IsError: true}, nil
	}
	var b strings.Builder
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			b.WriteString(c.Text)
		default:
			j, _ := json.Marshal(c)
			b.Write(j)
		}
		b.WriteByte('\n')
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		j, _ := json.Marshal(res.StructuredContent)
		b.Write(j)
	}
	text := strings.TrimRight(b.String(), "\n")
	if out != nil && text != "" {
		out("", text)
	}
	return tools.Result{Content: text, IsError: res.IsError}, nil
}

// headerTransport adds a server's configured headers to its requests.
type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.next.RoundTrip(r)
}

// logWriter logs a stdio server's standard error, a line per record.
type logWriter struct {
	log    *slog.Logger
	server string
}

func (w logWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l != "" {
			w.log.Debug("MCP server says", "server", w.server, "line", l)
		}
	}
	return len(p), nil
}
