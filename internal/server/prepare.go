package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/workflow"
)

// preparer turns the run options a protocol chose into a run's spec on
// this node (runs.Config.Prepare): its strategy, its workflow, its working
// folder and the tools confined to it, and its logger.
type preparer struct {
	root   *sandbox.Root    // the server's working folder
	box    *sandbox.Sandbox // confines the programs the tools start
	policy tools.Policy
	log    *slog.Logger
	// workflows resolves RunOptions.Workflow; nil offers only the
	// built-in ones.
	workflows *workflow.Catalog
	// model returns the model of the server's provider called name, for a
	// workflow agent that names one; nil refuses such workflows.
	model func(name string) (llm.Model, error)
	// roles keeps the role files read for runs' system prompts.
	roles roleCache
}

func (p *preparer) prepare(_ context.Context, thread string, opts event.RunOptions) (agent.Spec, func(), error) {
	spec := agent.Spec{Strategy: opts.Strategy}
	if opts.Strategy != "" && !slices.Contains(agent.Strategies(), opts.Strategy) {
		return agent.Spec{}, nil, protocol.Errorf(protocol.CodeInvalid, "unknown strategy %q: this server knows %s",
			opts.Strategy, strings.Join(agent.Strategies(), ", "))
	}
	if opts.Strategy == "group" && opts.Workflow == "" {
		// A group chat with no workflow named is the default one.
		opts.Workflow = workflow.DefaultName
	}
	if opts.Workflow != "" {
		if err := p.workflow(&spec, opts); err != nil {
			return agent.Spec{}, nil, err
		}
	}
	if opts.Verbose {
		spec.Logger = slog.New(verbose{p.log.Handler()}).With("verbose", true)
	}
	if opts.Folder == "" || opts.Folder == "." {
		system, err := p.roles.prompt(p.root)
		if err != nil {
			return agent.Spec{}, nil, err
		}
		spec.System = system
		return spec, nil, nil
	}
	rel, err := p.root.Resolve(opts.Folder)
	if err != nil {
		if errors.Is(err, sandbox.ErrEscape) {
			return agent.Spec{}, nil, &protocol.Error{Code: protocol.CodeInvalid, Cause: err,
				Message: fmt.Sprintf("working folder %q is outside the server's working folder", opts.Folder)}
		}
		return agent.Spec{}, nil, &protocol.Error{Code: protocol.CodeInvalid, Cause: err,
			Message: fmt.Sprintf("working folder %q: %v", opts.Folder, err)}
	}
	root, err := sandbox.Open(filepath.Join(p.root.Dir(), rel))
	if err != nil {
		return agent.Spec{}, nil, &protocol.Error{Code: protocol.CodeInvalid, Cause: err,
			Message: fmt.Sprintf("working folder %q is not a folder the server can open", opts.Folder)}
	}
	system, err := p.roles.prompt(root)
	if err != nil {
		_ = root.Close()
		return agent.Spec{}, nil, err
	}
	spec.System = system
	spec.Tools = builtin.New(root, builtin.Options{Logger: p.log, Sandbox: p.box}).Filter(p.policy)
	return spec, func() { _ = root.Close() }, nil
}

// Role files, looked up in a run's working folder when it starts.
const (
	soulFile   = "SOUL.md"
	agentsFile = "AGENTS.md"
)

// maxRoleBytes caps each role file.
const maxRoleBytes = 256 << 10

// roleCache keeps the text of the role files read, by path, with the
// file's stat when it was read, so that a run's start costs a stat per
// file rather than a read: a file whose stat changed (another file, or
// another size, modification time, mode or number of links) is read
// again, with every check. A file rewritten in place at its size within
// one tick of the file system's clock keeps its old text until its next
// change; editors that write a new file and rename it over the old one
// change the file. Files that do not exist are not kept.
type roleCache struct {
	mu    sync.Mutex
	files map[string]roleText
}

// roleText is a role file's text and its stat when it was read.
type roleText struct {
	info fs.FileInfo
	text string
}

// prompt is the system prompt of every model call of a run working in
// root: SOUL.md (else the built-in systemPrompt), followed by AGENTS.md
// when present. The files are read through the sandbox, so a symbolic
// link that leads out of the folder is refused, as the tools refuse it.
func (c *roleCache) prompt(root *sandbox.Root) (string, error) {
	soul, err := c.file(root, soulFile)
	if err != nil {
		return "", err
	}
	if soul == "" {
		soul = systemPrompt
	}
	agents, err := c.file(root, agentsFile)
	if err != nil {
		return "", err
	}
	if agents == "" {
		return soul, nil
	}
	return soul + "\n\n" + agents, nil
}

// file returns the trimmed text of name in root, "" when it does not
// exist: the text kept when the file's stat is the one it was read with,
// else what roleFile reads now.
func (c *roleCache) file(root *sandbox.Root, name string) (string, error) {
	path := filepath.Join(root.Dir(), name)
	if now, err := root.Stat(name); err == nil {
		c.mu.Lock()
		kept, ok := c.files[path]
		c.mu.Unlock()
		if ok && unchanged(kept.info, now) {
			return kept.text, nil
		}
	}
	text, info, err := roleFile(root, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if info == nil {
		delete(c.files, path)
		return text, err
	}
	if c.files == nil {
		c.files = map[string]roleText{}
	}
	c.files[path] = roleText{info: info, text: text}
	return text, nil
}

// unchanged reports whether now describes the file then described, as it
// was: the same file, size, modification time, mode and number of links
// (a file that gains a link is refused, see sandbox.Root.Open).
func unchanged(then, now fs.FileInfo) bool {
	return os.SameFile(then, now) && then.Size() == now.Size() && then.ModTime().Equal(now.ModTime()) &&
		then.Mode() == now.Mode() && links(then) == links(now)
}

// links is the number of links of the file fi describes, 0 where the
// system does not say.
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}

// roleFile reads the trimmed text of name in root, "" when it does not
// exist, and the stat of the file it read (nil when it read none, or
// refused it). A file that exists but cannot be used is an error the
// client sees: the run would otherwise go on without the role it was
// given.
func roleFile(root *sandbox.Root, name string) (string, fs.FileInfo, error) {
	var (
		b    []byte
		info fs.FileInfo
	)
	f, err := root.Open(name)
	if err == nil {
		info, err = f.Stat()
		if err == nil {
			b, err = io.ReadAll(f)
		}
		_ = f.Close()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil, nil
	case errors.Is(err, sandbox.ErrEscape):
		return "", nil, &protocol.Error{Code: protocol.CodeInvalid, Cause: err,
			Message: fmt.Sprintf("%s of the working folder leads outside it", name)}
	case err != nil:
		return "", nil, &protocol.Error{Code: protocol.CodeInvalid, Cause: err,
			Message: fmt.Sprintf("%s of the working folder cannot be read: %v", name, err)}
	case len(b) > maxRoleBytes:
		return "", nil, protocol.Errorf(protocol.CodeInvalid, "%s of the working folder is larger than %d KiB", name, maxRoleBytes>>10)
	}
	return strings.TrimSpace(string(b)), info, nil
}

// verbose is a slog.Handler that logs every level, for a run a client
// asked to be logged in detail.
type verbose struct{ slog.Handler }

func (verbose) Enabled(context.Context, slog.Level) bool { return true }

func (v verbose) WithAttrs(as []slog.Attr) slog.Handler { return verbose{v.Handler.WithAttrs(as)} }

func (v verbose) WithGroup(name string) slog.Handler { return verbose{v.Handler.WithGroup(name)} }

// workflow resolves opts.Workflow into spec: the group strategy, the
// workflow and the models its agents name. An unknown workflow is
// CodeNotFound, one that does not load CodeInvalid; both wrap the
// workflow package's error (workflow.ErrNotFound, *workflow.LoadError).
func (p *preparer) workflow(spec *agent.Spec, opts event.RunOptions) error {
	if opts.Strategy != "" && opts.Strategy != "group" {
		return protocol.Errorf(protocol.CodeInvalid, "strategy %q cannot run workflow %q: a workflow runs as strategy group", opts.Strategy, opts.Workflow)
	}
	cat := p.workflows
	if cat == nil {
		var err error
		if cat, err = workflow.New(""); err != nil {
			return &protocol.Error{Code: protocol.CodeInternal, Message: "the built-in workflows do not load", Cause: err}
		}
	}
	wf, err := cat.Lookup(opts.Workflow)
	switch {
	case errors.Is(err, workflow.ErrNotFound):
		return &protocol.Error{Code: protocol.CodeNotFound, Cause: err,
			Message: fmt.Sprintf("unknown workflow %q: this server has %s", opts.Workflow, strings.Join(cat.Names(), ", "))}
	case errors.Is(err, workflow.ErrInvalid):
		return &protocol.Error{Code: protocol.CodeInvalid, Cause: err, Message: err.Error()}
	case err != nil:
		return &protocol.Error{Code: protocol.CodeInternal, Cause: err, Message: fmt.Sprintf("workflow %q cannot be read", opts.Workflow)}
	}
	for _, a := range wf.Agents {
		if a.Model == "" || spec.Models[a.Model] != nil {
			continue
		}
		if p.model == nil {
			return protocol.Errorf(protocol.CodeInvalid, "workflow %q: agent %q names model %q, and this server cannot choose models per agent", wf.Name, a.Name, a.Model)
		}
		m, err := p.model(a.Model)
		if err != nil {
			return &protocol.Error{Code: protocol.CodeInvalid, Cause: err,
				Message: fmt.Sprintf("workflow %q: agent %q: model %q is not available", wf.Name, a.Name, a.Model)}
		}
		if spec.Models == nil {
			spec.Models = map[string]llm.Model{}
		}
		spec.Models[a.Model] = m
	}
	spec.Strategy = "group"
	spec.Workflow = wf
	return nil
}
