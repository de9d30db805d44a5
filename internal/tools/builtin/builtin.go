// Package builtin holds agentwire's built-in tools, the ones Loom and
// AgentLoop offered their models: reading, writing and patching files, listing
// and searching them, running shell commands, fetching web pages, asking the
// person, and a to-do list. File tools are confined to a working folder (a
// sandbox.Root); the shell runs in it, in the OS sandbox (a
// sandbox.Sandbox) at the level its approval chose; the fetcher refuses
// private addresses.
package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// Options tunes the built-in tools. The zero value is ready to use.
type Options struct {
	// Shell runs bash commands as Shell -c command; default bash from PATH,
	// else sh.
	Shell string
	// CommandTimeout bounds one bash call (default 120 s).
	CommandTimeout time.Duration
	// MaxOutput caps the output a bash call keeps and streams (default
	// 256 KiB); beyond it output is counted and dropped.
	MaxOutput int
	// Env is the environment of a bash command that runs unconfined (the
	// sandbox off, or none available). Nil means a small one (PATH, HOME,
	// LANG, ...) taken from the server's own: the server's secrets (API
	// keys, database URLs) are not the model's to read. A sandboxed
	// command gets the sandbox's environment (sandbox.Environ) instead.
	Env []string
	// Sandbox starts bash's commands, confined at the level of their call
	// (tools.LevelFrom). Nil is no sandbox (sandbox.KindNone): only a
	// command approved for workspace-write runs, unconfined.
	Sandbox *sandbox.Sandbox
	// Fetch tunes web_fetcher.
	Fetch  FetchOptions
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 120 * time.Second
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 256 << 10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Fetch = o.Fetch.withDefaults()
	return o
}

// New returns a registry of every built-in tool, working in root (which the
// caller keeps open while the tools are in use). The to-do list lives in the
// registry: give each thread its own registry if they should not share one.
func New(root *sandbox.Root, opts Options) *tools.Registry {
	opts = opts.withDefaults()
	reg := &tools.Registry{}
	for _, t := range []tools.Tool{
		readTool(root),
		writeFileTool(root),
		editTool(root),
		multiEditTool(root),
		applyPatchTool(root),
		lsTool(root),
		globTool(root),
		grepTool(root),
		moveFileTool(root),
		deleteFileTool(root),
		createDirTool(root),
		bashTool(root, opts),
		webFetcherTool(opts.Fetch, opts.Logger),
		askUserTool(),
		uiTool(),
	} {
		mustRegister(reg, t)
	}
	todos := &todoList{}
	mustRegister(reg, todoWriteTool(todos))
	mustRegister(reg, todoReadTool(todos))
	mustRegister(reg, batchTool(reg))
	return reg
}

func mustRegister(reg *tools.Registry, t tools.Tool) {
	if err := reg.Register(t); err != nil {
		panic(err) // the built-in names are fixed and distinct
	}
}

// tool adapts a function of decoded arguments to tools.Tool.
type tool[A any] struct {
	name, desc string
	schema     string
	max        tools.Effect
	// classify judges decoded arguments; nil means every call has effect
	// max (keyed by the tool's name if it edits or reaches the network).
	classify func(A) tools.Class
	run      func(ctx context.Context, args A, out tools.Output) (tools.Result, error)
	// withPatch, for tools whose calls carry a patch, puts a person's
	// edited patch in the arguments (tools.PatchEditor); nil for others.
	withPatch func(args A, patch string) A
}

// WithPatch implements tools.PatchEditor for the tools that carry a patch.
func (t *tool[A]) WithPatch(raw json.RawMessage, patch string) (json.RawMessage, error) {
	if t.withPatch == nil {
		return nil, fmt.Errorf("%s calls carry no patch", t.name)
	}
	a, err := decode[A](raw)
	if err != nil {
		return nil, fmt.Errorf("invalid arguments for %s: %w", t.name, err)
	}
	return json.Marshal(t.withPatch(a, patch))
}

func (t *tool[A]) Spec() tools.Spec {
	return tools.Spec{Name: t.name, Description: t.desc, InputSchema: json.RawMessage(t.schema)}
}

// MaxEffect implements tools.Bounded.
func (t *tool[A]) MaxEffect() tools.Effect { return t.max }

func (t *tool[A]) Classify(raw json.RawMessage) tools.Class {
	a, err := decode[A](raw)
	if err != nil || t.classify == nil {
		// Arguments that do not decode fail when run; judge them as the
		// tool's most powerful call anyway.
		c := tools.Class{Effect: t.max}
		if t.max == tools.EffectEdit || t.max == tools.EffectNetwork {
			c.Key = t.name
		}
		return c
	}
	return t.classify(a)
}

func (t *tool[A]) Run(ctx context.Context, raw json.RawMessage, out tools.Output) (tools.Result, error) {
	a, err := decode[A](raw)
	if err != nil {
		return failf("invalid arguments for %s: %v", t.name, err), nil
	}
	if out == nil {
		out = func(string, string) {}
	}
	return t.run(ctx, a, out)
}

func decode[A any](raw json.RawMessage) (A, error) {
	var a A
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = json.RawMessage("{}")
	}
	err := json.Unmarshal(raw, &a)
	return a, err
}

func ok(format string, args ...any) tools.Result {
	return tools.Result{Content: fmt.Sprintf(format, args...)}
}

func failf(format string, args ...any) tools.Result {
	return tools.Result{Content: fmt.Sprintf(format, args...), IsError: true}
}

// fail turns an error into a result the model reads.
func fail(err error) tools.Result {
	return tools.Result{Content: err.Error(), IsError: true}
}
