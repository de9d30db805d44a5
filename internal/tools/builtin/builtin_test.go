package builtin_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

// env is a working folder with a neighbour folder the tools must not reach:
//
//	base/outside/secret.txt
//	base/root/a.txt ("alpha\nbeta\ngamma\n"), sub/b.go
//	base/root/out      -> ../outside
//	base/root/secret   -> base/outside/secret.txt
//	base/root/sub/up   -> ../../outside
//	base/root/nested   -> sub/up
//	base/root/dangling -> ../outside/created.txt
type env struct {
	t         *testing.T
	base, dir string
	root      *sandbox.Root
	reg       *tools.Registry
}

func newEnv(t *testing.T, opts builtin.Options) *env {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	write := func(p, s string) { require.NoError(t, os.WriteFile(p, []byte(s), 0o644)) }
	write(filepath.Join(outside, "secret.txt"), "secret\n")
	write(filepath.Join(dir, "a.txt"), "alpha\nbeta\ngamma\n")
	write(filepath.Join(dir, "sub", "b.go"), "package sub\n\nfunc B() int { return 2 }\n")
	for name, target := range map[string]string{
		"out": "../outside", "secret": filepath.Join(outside, "secret.txt"), "sub/up": "../../outside",
		"nested": "sub/up", "dangling": "../outside/created.txt",
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, name)))
	}
	root, err := sandbox.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	return &env{t: t, base: base, dir: root.Dir(), root: root, reg: builtin.New(root, opts)}
}

// output is what a call streamed.
type output struct {
	mu     sync.Mutex
	chunks []chunk
}

type chunk struct{ stream, text string }

func (o *output) add(stream, text string) {
	o.mu.Lock()
	o.chunks = append(o.chunks, chunk{stream, text})
	o.mu.Unlock()
}

func (o *output) text(stream string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b strings.Builder
	for _, c := range o.chunks {
		if c.stream == stream {
			b.WriteString(c.text)
		}
	}
	return b.String()
}

func (e *env) call(name string, args any) tools.Result {
	e.t.Helper()
	res, _, err := e.callCtx(e.t.Context(), name, args)
	require.NoError(e.t, err, "%s(%v)", name, args)
	return res
}

func (e *env) callCtx(ctx context.Context, name string, args any) (tools.Result, *output, error) {
	e.t.Helper()
	t, ok := e.reg.Get(name)
	require.True(e.t, ok, "no tool %q", name)
	raw, err := json.Marshal(args)
	require.NoError(e.t, err)
	out := &output{}
	res, err := t.Run(ctx, raw, out.add)
	return res, out, err
}

func (e *env) classify(name string, args any) tools.Class {
	e.t.Helper()
	t, ok := e.reg.Get(name)
	require.True(e.t, ok)
	raw, err := json.Marshal(args)
	require.NoError(e.t, err)
	return t.Classify(raw)
}

func (e *env) file(rel string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, rel))
	require.NoError(e.t, err)
	return string(b)
}

func (e *env) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(e.dir, rel))
	return err == nil
}

// snapshot records every file under dir with its content (links by target).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "-> " + target
		case d.IsDir():
			m[rel] = "/"
		default:
			b, _ := os.ReadFile(p)
			m[rel] = string(b)
		}
		return nil
	}))
	return m
}

func TestRegistry(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	require.Equal(t, []string{
		"apply_patch", "ask_user", "bash", "batch", "create_dir", "delete_file", "edit", "glob", "grep", "ls",
		"move_file", "multiedit", "read", "todo_read", "todo_write", "ui", "web_fetcher", "write_file",
	}, e.reg.Names())
	for _, s := range e.reg.Specs() {
		var schema map[string]any
		require.NoError(t, json.Unmarshal(s.InputSchema, &schema), "%s schema", s.Name)
		require.Equal(t, "object", schema["type"], s.Name)
		require.NotEmpty(t, s.Description, s.Name)
	}
	require.Equal(t, []string{
		"ask_user", "glob", "grep", "ls", "read", "todo_read", "todo_write", "ui",
	}, e.reg.Filter(tools.PolicyReadOnly).Names(), "web_fetcher reaches the network: not a read")
}

// TestConfinement tries to leave the working folder through every file tool
// and checks that each attempt is refused and that nothing outside changed.
func TestConfinement(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	outside := filepath.Join(e.base, "outside")
	before := snapshot(t, e.base)
	patch := func(body string) map[string]any {
		return map[string]any{"patch": "*** Begin Patch\n" + body + "*** End Patch\n"}
	}
	attempts := []struct {
		name, tool string
		args       any
	}{
		{"dotdot", "read", map[string]any{"path": ".."}},
		{"dotdot file", "read", map[string]any{"path": "../outside/secret.txt"}},
		{"dotdot deep", "read", map[string]any{"path": "../../../../../../etc/passwd"}},
		{"dotdot inside out", "read", map[string]any{"path": "sub/../../outside/secret.txt"}},
		{"absolute", "read", map[string]any{"path": "/etc/passwd"}},
		{"absolute neighbour", "read", map[string]any{"path": filepath.Join(outside, "secret.txt")}},
		{"symlink to file", "read", map[string]any{"path": "secret"}},
		{"symlink dir", "read", map[string]any{"path": "out/secret.txt"}},
		{"nested symlink", "read", map[string]any{"path": "nested/secret.txt"}},
		{"symlink below", "read", map[string]any{"path": "sub/up/secret.txt"}},
		{"write dotdot", "write_file", map[string]any{"path": "../pwned.txt", "content": "x"}},
		{"write through symlink", "write_file", map[string]any{"path": "secret", "content": "pwned"}},
		{"write through dangling symlink", "write_file", map[string]any{"path": "dangling", "content": "pwned"}},
		{"write into symlinked dir", "write_file", map[string]any{"path": "out/new.txt", "content": "pwned"}},
		{"edit through symlink", "edit", map[string]any{"path": "secret", "old_string": "secret", "new_string": "pwned"}},
		{"multiedit absolute", "multiedit", map[string]any{"path": filepath.Join(outside, "secret.txt"), "edits": []map[string]any{{"old_string": "secret", "new_string": "x"}}}},
		{"patch add dotdot", "apply_patch", patch("*** Add File: ../x.txt\n+pwned\n")},
		{"patch add through link", "apply_patch", patch("*** Add File: out/x.txt\n+pwned\n")},
		{"patch update through link", "apply_patch", patch("*** Update File: secret\n-secret\n+pwned\n")},
		{"patch delete outside", "apply_patch", patch("*** Delete File: ../outside/secret.txt\n")},
		{"patch move outside", "apply_patch", patch("*** Update File: a.txt\n*** Move to: ../moved.txt\n-alpha\n+moved\n")},
		{"patch move into link", "apply_patch", patch("*** Update File: a.txt\n*** Move to: nested/moved.txt\n-alpha\n+moved\n")},
		{"ls dotdot", "ls", map[string]any{"path": ".."}},
		{"ls symlinked dir", "ls", map[string]any{"path": "out"}},
		{"glob dotdot", "glob", map[string]any{"pattern": "../outside/*"}},
		{"glob absolute", "glob", map[string]any{"pattern": "/etc/*"}},
		{"glob from outside", "glob", map[string]any{"pattern": "*", "path": "../outside"}},
		{"grep outside", "grep", map[string]any{"pattern": "secret", "path": "../outside"}},
		{"grep through link", "grep", map[string]any{"pattern": "secret", "path": "out"}},
		{"move out", "move_file", map[string]any{"source": "a.txt", "destination": "../a.txt"}},
		{"move in", "move_file", map[string]any{"source": "out/secret.txt", "destination": "stolen.txt"}},
		{"delete outside", "delete_file", map[string]any{"path": "../outside/secret.txt"}},
		{"delete through link", "delete_file", map[string]any{"path": "out/secret.txt"}},
		{"delete the folder", "delete_file", map[string]any{"path": "."}},
		{"mkdir outside", "create_dir", map[string]any{"path": "../newdir"}},
		{"mkdir through link", "create_dir", map[string]any{"path": "out/newdir"}},
	}
	for _, a := range attempts {
		res := e.call(a.tool, a.args)
		if !res.IsError || strings.Contains(res.Content, "secret\n") {
			t.Errorf("%s: %s(%v) = %+v, want a refusal", a.name, a.tool, a.args, res)
		}
	}
	require.Equal(t, before, snapshot(t, e.base), "files changed")

	// Searches do not follow links out of the folder either.
	res := e.call("grep", map[string]any{"pattern": "secret"})
	require.False(t, strings.Contains(res.Content, "secret.txt"), "grep . = %q", res.Content)
	res = e.call("glob", map[string]any{"pattern": "**/*.txt"})
	require.Equal(t, "a.txt", res.Content)
}
