package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/tools/sandbox/sandboxtest"
)

// runners runs f once with bash in the OS sandbox (skipped, saying why,
// where the machine cannot build one) and once unconfined (the sandbox
// off): what bash does for its caller must not depend on it.
func runners(t *testing.T, f func(t *testing.T, box *sandbox.Sandbox)) {
	t.Run("sandboxed", func(t *testing.T) { f(t, sandboxtest.New(t, sandbox.Config{})) })
	t.Run("unconfined", func(t *testing.T) { f(t, sandbox.Off()) })
}

func TestBash(t *testing.T) {
	runners(t, func(t *testing.T, box *sandbox.Sandbox) {
		e := newEnv(t, builtin.Options{Sandbox: box})

		res, out, err := e.callCtx(t.Context(), "bash", map[string]any{"command": "echo out; echo err >&2; pwd"})
		require.NoError(t, err)
		require.False(t, res.IsError, res.Content)
		require.Equal(t, "out\n"+e.dir+"\n", out.text("stdout"))
		require.Equal(t, "err\n", out.text("stderr"))
		// The two streams interleave in arrival order.
		require.ElementsMatch(t, []string{"out", e.dir, "err"}, strings.Split(res.Content, "\n"))

		res = e.call("bash", map[string]any{"command": "echo failing; exit 3"})
		require.Equal(t, tools.Result{Content: "failing\n[exit code 3]", IsError: true, ExitCode: new(3)}, res)

		res = e.call("bash", map[string]any{"command": "true"})
		require.Equal(t, tools.Result{Content: "(no output)", ExitCode: new(0)}, res)

		res = e.call("bash", map[string]any{"command": "cat"})
		require.Equal(t, tools.Result{Content: "(no output)", ExitCode: new(0)}, res, "stdin is empty")

		res = e.call("bash", map[string]any{"command": "  "})
		require.True(t, res.IsError)
	})
}

// TestBashSignal: a command killed by a signal reports 128+N. (In the
// sandbox the command is PID 1 of its namespace, which ignores signals it
// sends itself, so this holds for commands run unconfined.)
func TestBashSignal(t *testing.T) {
	e := newEnv(t, builtin.Options{Sandbox: sandbox.Off()})
	res := e.call("bash", map[string]any{"command": "kill -TERM $$"})
	require.True(t, res.IsError)
	require.Equal(t, 128+int(syscall.SIGTERM), *res.ExitCode, "killed by a signal: 128+N")
}

// TestBashLevels: the level of the call decides what its command may
// change. In the sandbox a read-only call writes nothing and an approved
// one writes the working folder; with no sandbox available, a read-only
// call does not run at all and an approved one runs unconfined.
func TestBashLevels(t *testing.T) {
	touch := map[string]any{"command": "touch made && echo made"}
	t.Run("sandboxed", func(t *testing.T) {
		e := newEnv(t, builtin.Options{Sandbox: sandboxtest.New(t, sandbox.Config{})})
		res := e.call("bash", touch)
		require.True(t, res.IsError, res.Content)
		require.False(t, e.exists("made"), "a read-only call wrote the working folder")
		res, _, err := e.callCtx(tools.WithLevel(t.Context(), tools.LevelWorkspaceWrite), "bash", touch)
		require.NoError(t, err)
		require.False(t, res.IsError, res.Content)
		require.True(t, e.exists("made"))
	})
	t.Run("none available", func(t *testing.T) {
		e := newEnv(t, builtin.Options{Sandbox: sandbox.Unavailable("Landlock (injected)")})
		res := e.call("bash", touch)
		require.True(t, res.IsError)
		require.Contains(t, res.Content, "Not run")
		require.False(t, e.exists("made"))
		res, _, err := e.callCtx(tools.WithLevel(t.Context(), tools.LevelWorkspaceWrite), "bash", touch)
		require.NoError(t, err)
		require.False(t, res.IsError, res.Content)
		require.True(t, e.exists("made"))
	})
}

// apply_patch run through the shell, as Codex-trained models call it, is
// the apply_patch tool: classified as an edit, applied without a shell,
// and its patch can be replaced by an edited one.
func TestBashApplyPatch(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	const patch = "*** Begin Patch\n*** Add File: new.txt\n+made by a heredoc\n*** End Patch"
	line := "apply_patch <<'EOF'\n" + patch + "\nEOF"
	bash, ok := e.reg.Get("bash")
	require.True(t, ok)
	args := mustJSON(t, map[string]any{"command": line})
	c := bash.Classify(args)
	require.Equal(t, tools.Class{Effect: tools.EffectEdit, Key: "apply_patch", Patch: patch}, c)

	res := e.call("bash", map[string]any{"command": line})
	require.False(t, res.IsError, res.Content)
	require.Equal(t, 0, *res.ExitCode)
	require.Equal(t, "made by a heredoc\n", e.file("new.txt"))

	res = e.call("bash", map[string]any{"command": "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: missing.txt\n@@\n-a\n+b\n*** End Patch\nEOF"})
	require.True(t, res.IsError)
	require.Equal(t, 1, *res.ExitCode)
	require.Contains(t, res.Content, "missing.txt")

	const edited = "*** Begin Patch\n*** Add File: edited.txt\n+edited\n*** End Patch"
	newArgs, err := bash.(tools.PatchEditor).WithPatch(args, edited)
	require.NoError(t, err)
	require.Equal(t, edited, bash.Classify(newArgs).Patch)
	res, _, err = e.callCtx(t.Context(), "bash", json.RawMessage(newArgs))
	require.NoError(t, err)
	require.False(t, res.IsError, res.Content)
	require.Equal(t, "edited\n", e.file("edited.txt"))

	ap, _ := e.reg.Get("apply_patch")
	newArgs, err = ap.(tools.PatchEditor).WithPatch(mustJSON(t, map[string]any{"patch": patch}), edited)
	require.NoError(t, err)
	require.JSONEq(t, `{"patch":`+string(mustJSON(t, edited))+`}`, string(newArgs))
	ls, _ := e.reg.Get("ls")
	_, err = ls.(tools.PatchEditor).WithPatch(mustJSON(t, map[string]any{"path": "."}), edited)
	require.Error(t, err, "ls takes no patch")
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestBashEnvironment: none of the server's variables reach a command; in
// the sandbox it gets the sandbox's environment, unconfined a small one
// (or Options.Env).
func TestBashEnvironment(t *testing.T) {
	t.Setenv("AGENTWIRE_TEST_SECRET", "hunter2")
	t.Run("sandboxed", func(t *testing.T) {
		e := newEnv(t, builtin.Options{Sandbox: sandboxtest.New(t, sandbox.Config{}), Env: []string{"ONLY=this"}})
		res := e.call("bash", map[string]any{"command": `env`})
		require.False(t, res.IsError, res.Content)
		want := sandbox.Environ(e.dir, os.Getenv("LANG"))
		got := strings.Split(res.Content, "\n")
		for _, kv := range got {
			name, _, _ := strings.Cut(kv, "=")
			if name != "PWD" && name != "SHLVL" && name != "_" { // bash's own
				require.Contains(t, want, kv, "a variable that is not the sandbox's")
			}
		}
		require.Subset(t, got, want)
	})
	t.Run("unconfined", func(t *testing.T) {
		e := newEnv(t, builtin.Options{Sandbox: sandbox.Off()})
		res := e.call("bash", map[string]any{"command": `echo "${AGENTWIRE_TEST_SECRET:-unset} $PATH"`})
		require.Equal(t, "unset "+os.Getenv("PATH"), res.Content)

		e = newEnv(t, builtin.Options{Sandbox: sandbox.Off(), Env: []string{"ONLY=this"}})
		res = e.call("bash", map[string]any{"command": `echo "$ONLY ${AGENTWIRE_TEST_SECRET:-unset}"`})
		require.Equal(t, "this unset", res.Content)
	})
}

func TestBashOutputCap(t *testing.T) {
	runners(t, func(t *testing.T, box *sandbox.Sandbox) {
		e := newEnv(t, builtin.Options{MaxOutput: 1000, Sandbox: box})
		res, out, err := e.callCtx(t.Context(), "bash", map[string]any{"command": "head -c 5000 /dev/zero | tr '\\0' a; echo done"})
		require.NoError(t, err)
		require.False(t, res.IsError)
		require.Equal(t, strings.Repeat("a", 1000)+"\n[output truncated: 4005 more bytes were dropped past the 1000-byte limit]", res.Content)
		require.Len(t, out.text("stdout")+out.text("stderr"), 1000, "streamed output is capped too")

		// A cut never splits a UTF-8 sequence.
		e = newEnv(t, builtin.Options{MaxOutput: 5, Sandbox: box})
		res = e.call("bash", map[string]any{"command": "printf 'ééé'"})
		require.True(t, strings.HasPrefix(res.Content, "éé\n[output truncated: 2 more bytes"), res.Content)
	})
}

func TestBashTimeout(t *testing.T) {
	runners(t, func(t *testing.T, box *sandbox.Sandbox) {
		e := newEnv(t, builtin.Options{CommandTimeout: 100 * time.Millisecond, Sandbox: box})
		res := e.call("bash", map[string]any{"command": "echo started; exec sleep 60"})
		require.True(t, res.IsError)
		require.Equal(t, 124, *res.ExitCode)
		require.True(t, strings.HasSuffix(res.Content, "[timed out after 100ms; the command was killed]"), res.Content)
	})
}

// TestBashKillsProcessGroup starts a background child, cancels the call as
// soon as the child's pid is streamed, and checks that the child is gone.
func TestBashKillsProcessGroup(t *testing.T) {
	e := newEnv(t, builtin.Options{Sandbox: sandbox.Off()})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pid := make(chan int, 1)
	bash, _ := e.reg.Get("bash")
	res, err := bash.Run(ctx, []byte(`{"command":"sleep 300 & echo $!; wait"}`), func(stream, text string) {
		if n, err := strconv.Atoi(strings.TrimSpace(text)); err == nil && stream == "stdout" {
			pid <- n
			cancel()
		}
	})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content, "[cancelled; the command was killed]")
	waitGone(t, <-pid)

	// A child left running when the shell exits goes with it too.
	res, out, err := e.callCtx(t.Context(), "bash", map[string]any{"command": "sleep 300 & echo $!"})
	require.NoError(t, err)
	require.False(t, res.IsError, res.Content)
	n, err := strconv.Atoi(strings.TrimSpace(out.text("stdout")))
	require.NoError(t, err)
	waitGone(t, n)
}

// TestBashKillsTheNamespace: in the sandbox, whatever a command started
// ends when it ends or is cancelled, even a process that left its session.
// A FIFO tells: once no process holds it open to read, opening it to
// write without waiting fails.
func TestBashKillsTheNamespace(t *testing.T) {
	e := newEnv(t, builtin.Options{Sandbox: sandboxtest.New(t, sandbox.Config{})})
	fifo := filepath.Join(e.dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	held := func() bool {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return false
		}
		f.Close()
		return true
	}
	const hold = `setsid -f sleep 300 3<>fifo >/dev/null 2>&1; sleep 300 3<>fifo >/dev/null 2>&1 & while [ ! -e /proc/$!/fd/3 ]; do :; done; echo holding`
	res := e.call("bash", map[string]any{"command": hold})
	require.False(t, res.IsError, res.Content)
	require.False(t, held(), "a process outlived its command")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	bash, _ := e.reg.Get("bash")
	res, err := bash.Run(ctx, mustJSON(t, map[string]any{"command": hold + "; sleep 300"}), func(stream, text string) {
		if strings.Contains(text, "holding") {
			cancel()
		}
	})
	require.NoError(t, err)
	require.Contains(t, res.Content, "[cancelled; the command was killed]")
	require.False(t, held(), "a process outlived its cancelled command")
}

// waitGone waits until pid has exited (a zombie that nobody reaped counts as
// gone), bounded by a context rather than by asserting on time.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			// The state follows the parenthesised command name.
			if s := string(stat); strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z") {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("process %d is still running", pid)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestBashClassify(t *testing.T) {
	e := newEnv(t, builtin.Options{})
	tests := []struct {
		command  string
		readOnly bool
		key      string
		argv     []string
	}{
		{"git status", true, "git", []string{"git", "status"}},
		{"ls -la | grep go", true, "$ ls -la | grep go", []string{"ls", "-la", "|", "grep", "go"}},
		{"rm -rf node_modules", false, "rm", []string{"rm", "-rf", "node_modules"}},
		{"echo hi > f", false, "$ echo hi > f", []string{"echo", "hi", ">", "f"}},
		{"echo $(id)", false, "$ echo $(id)", []string{"bash", "-c", "echo $(id)"}},
	}
	for _, tt := range tests {
		c := e.classify("bash", map[string]any{"command": tt.command})
		want := tools.Class{Effect: tools.EffectCommand, Command: tt.argv, Key: tt.key, ReadOnlyCommand: tt.readOnly}
		require.Equal(t, want, c, "Classify(%q)", tt.command)
	}
	require.Equal(t, tools.Run, tools.PolicySuggest.Decide(e.classify("bash", map[string]any{"command": "git log -3"}), nil))
	require.Equal(t, tools.Ask, tools.PolicySuggest.Decide(e.classify("bash", map[string]any{"command": "make"}), nil))
}
