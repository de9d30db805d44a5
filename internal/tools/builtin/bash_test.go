package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/builtin"
)

func TestBash(t *testing.T) {
	e := newEnv(t, builtin.Options{})

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

	res = e.call("bash", map[string]any{"command": "kill -TERM $$"})
	require.True(t, res.IsError)
	require.Equal(t, 128+int(syscall.SIGTERM), *res.ExitCode, "killed by a signal: 128+N")

	res = e.call("bash", map[string]any{"command": "  "})
	require.True(t, res.IsError)
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

func TestBashEnvironment(t *testing.T) {
	t.Setenv("AGENTWIRE_TEST_SECRET", "hunter2")
	e := newEnv(t, builtin.Options{})
	res := e.call("bash", map[string]any{"command": `echo "${AGENTWIRE_TEST_SECRET:-unset} $PATH"`})
	require.Equal(t, "unset "+os.Getenv("PATH"), res.Content)

	e = newEnv(t, builtin.Options{Env: []string{"ONLY=this"}})
	res = e.call("bash", map[string]any{"command": `echo "$ONLY ${AGENTWIRE_TEST_SECRET:-unset}"`})
	require.Equal(t, "this unset", res.Content)
}

func TestBashOutputCap(t *testing.T) {
	e := newEnv(t, builtin.Options{MaxOutput: 1000})
	res, out, err := e.callCtx(t.Context(), "bash", map[string]any{"command": "head -c 5000 /dev/zero | tr '\\0' a; echo done"})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Equal(t, strings.Repeat("a", 1000)+"\n[output truncated: 4005 more bytes were dropped past the 1000-byte limit]", res.Content)
	require.Len(t, out.text("stdout")+out.text("stderr"), 1000, "streamed output is capped too")

	// A cut never splits a UTF-8 sequence.
	e = newEnv(t, builtin.Options{MaxOutput: 5})
	res = e.call("bash", map[string]any{"command": "printf 'ééé'"})
	require.True(t, strings.HasPrefix(res.Content, "éé\n[output truncated: 2 more bytes"), res.Content)
}

func TestBashTimeout(t *testing.T) {
	e := newEnv(t, builtin.Options{CommandTimeout: 100 * time.Millisecond})
	res := e.call("bash", map[string]any{"command": "echo started; exec sleep 60"})
	require.True(t, res.IsError)
	require.True(t, strings.HasSuffix(res.Content, "[timed out after 100ms; the command was killed]"), res.Content)
}

// TestBashKillsProcessGroup starts a background child, cancels the call as
// soon as the child's pid is streamed, and checks that the child is gone.
func TestBashKillsProcessGroup(t *testing.T) {
	e := newEnv(t, builtin.Options{})
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
		{"ls -la | grep go", true, "", []string{"ls", "-la", "|", "grep", "go"}},
		{"rm -rf node_modules", false, "rm", []string{"rm", "-rf", "node_modules"}},
		{"echo hi > f", false, "", []string{"echo", "hi", ">", "f"}},
		{"echo $(id)", false, "", []string{"bash", "-c", "echo $(id)"}},
	}
	for _, tt := range tests {
		c := e.classify("bash", map[string]any{"command": tt.command})
		want := tools.Class{Effect: tools.EffectCommand, Command: tt.argv, Key: tt.key, ReadOnlyCommand: tt.readOnly}
		require.Equal(t, want, c, "Classify(%q)", tt.command)
	}
	require.Equal(t, tools.Run, tools.PolicySuggest.Decide(e.classify("bash", map[string]any{"command": "git log -3"}), nil))
	require.Equal(t, tools.Ask, tools.PolicySuggest.Decide(e.classify("bash", map[string]any{"command": "make"}), nil))
}
