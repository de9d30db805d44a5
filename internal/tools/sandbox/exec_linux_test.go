package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/tools/sandbox/sandboxtest"
)

// These tests judge the sandbox by what commands manage to do, not by what
// they print: files written outside the working folder (or in it, at
// read-only), secrets read, connections made, processes left running.
// They run as whatever user runs the tests; as root (CI) they also check
// that uid 0 gains nothing from being root.
//
// Every attempt is harmless to the machine should it succeed (a broken
// sandbox, a test run as root): it writes only the test's own folders or
// names files that cleanup removes, and mounts only over a test folder.

// world is a working folder and, next to it, a folder with a secret file
// that no command may see or change.
type world struct {
	base, work, outside string
	box                 *sandbox.Sandbox
}

func newWorld(t *testing.T, cfg sandbox.Config) *world {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	w := &world{base: base, work: filepath.Join(base, "work"), outside: filepath.Join(base, "outside")}
	require.NoError(t, os.Mkdir(w.work, 0o755))
	require.NoError(t, os.Mkdir(w.outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(w.outside, "secret.txt"), []byte("outside-secret\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.work, "notes.txt"), []byte("notes\n"), 0o644))
	cfg.Dir = w.work
	w.box = sandboxtest.New(t, cfg)
	return w
}

type result struct {
	out  string
	code int
	err  error
}

// run runs script with bash in the working folder at level.
func (w *world) run(t *testing.T, level sandbox.Level, script string) result {
	t.Helper()
	res := runIn(t.Context(), w.box, level, w.work, script)
	var exit *exec.ExitError
	if res.err != nil && !errors.As(res.err, &exit) {
		t.Fatalf("run %q: %v", script, res.err)
	}
	return res
}

// runIn runs script with bash in dir at level; it may run on a goroutine
// of its own (it fails no test).
func runIn(ctx context.Context, box *sandbox.Sandbox, level sandbox.Level, dir, script string) result {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd, err := box.Command(ctx, level, sandbox.Request{Dir: dir, Argv: []string{"/bin/bash", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		return result{err: err}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second // a process that outlived the command may hold the output open
	if err := cmd.Start(); err != nil {
		return result{err: err}
	}
	err = cmd.Wait()
	res := result{out: out.String(), err: err}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.code = exit.ExitCode()
	}
	return res
}

// attempts try to write everywhere a command might: the folder next to
// the working folder (by relative and absolute path), the system
// directories, the root, the device and kernel files.
func attempts(w *world) string {
	return strings.Join([]string{
		"touch ../outside/made",
		"echo changed > ../outside/secret.txt",
		"echo changed > " + filepath.Join(w.outside, "secret.txt"),
		"mkdir -p " + w.outside + "/dir",
		"touch " + strings.Join(litter[:4], " "),
		"touch /proc/made " + litter[4],
		"ln -s /etc/passwd ../outside/link",
		"echo tmp > " + litter[5] + " && cat " + litter[5],
		"true",
	}, "; ")
}

// litter are files outside every test folder that attempts try to make;
// cleanup removes any that a broken sandbox let through.
var litter = []string{"/aw-sandbox-test-made", "/usr/aw-sandbox-test-made", "/etc/aw-sandbox-test-made", "/bin/aw-sandbox-test-made",
	"/dev/aw-sandbox-test-made", "/tmp/aw-sandbox-test-private"}

func cleanLitter(t *testing.T) {
	t.Cleanup(func() {
		for _, p := range litter {
			_ = os.Remove(p)
		}
	})
}

func TestReadOnlyWritesNothing(t *testing.T) {
	cleanLitter(t)
	w := newWorld(t, sandbox.Config{})
	work, outside := sandboxtest.Snapshot(t, w.work), sandboxtest.Snapshot(t, w.outside)
	res := w.run(t, sandbox.ReadOnly, "touch made; echo changed > notes.txt; rm notes.txt; mkdir d; "+attempts(w)+"; cat notes.txt")
	assert.Empty(t, sandboxtest.Changes(work, sandboxtest.Snapshot(t, w.work)), "the working folder changed:\n%s", res.out)
	assert.Empty(t, sandboxtest.Changes(outside, sandboxtest.Snapshot(t, w.outside)), "the folder next to it changed:\n%s", res.out)
	assert.Contains(t, res.out, "notes\n", "the working folder is readable")
	assert.Contains(t, res.out, "tmp\n", "the private /tmp is writable")
	_, err := os.Stat(litter[5])
	assert.True(t, errors.Is(err, os.ErrNotExist), "the sandbox's /tmp is its own")
}

func TestWorkspaceWriteWritesOnlyTheWorkingFolder(t *testing.T) {
	cleanLitter(t)
	w := newWorld(t, sandbox.Config{})
	outside := sandboxtest.Snapshot(t, w.outside)
	res := w.run(t, sandbox.WorkspaceWrite, "touch made && echo changed > notes.txt && mkdir -p d/e && ln -s notes.txt link; "+attempts(w))
	assert.Empty(t, sandboxtest.Changes(outside, sandboxtest.Snapshot(t, w.outside)), "the folder next to it changed:\n%s", res.out)
	for _, p := range []string{"made", "d/e", "link"} {
		_, err := os.Lstat(filepath.Join(w.work, p))
		assert.NoError(t, err, "the command could not make %s in the working folder:\n%s", p, res.out)
	}
	b, err := os.ReadFile(filepath.Join(w.work, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "changed\n", string(b))
	for _, p := range litter {
		_, err := os.Lstat(p)
		assert.True(t, errors.Is(err, os.ErrNotExist), "%s was made", p)
	}
}

// TestRootGainsNothing runs as root what a root without capabilities could
// still try: read the files only root may read, unmount or remount the
// masks over them, go through /proc/1/root, mount, make namespaces.
// Whatever the user, the command ends with no capability at all.
func TestRootGainsNothing(t *testing.T) {
	cleanLitter(t)
	w := newWorld(t, sandbox.Config{})
	t.Cleanup(func() {
		for syscall.Unmount(w.outside, syscall.MNT_DETACH) == nil {
		}
	})
	for _, level := range []sandbox.Level{sandbox.ReadOnly, sandbox.WorkspaceWrite} {
		res := w.run(t, level, strings.Join([]string{
			"cat /etc/shadow /etc/gshadow",
			"umount /etc/shadow; umount -l /etc/shadow; cat /etc/shadow",
			"mount -o remount,rw /etc; touch " + litter[2],
			"cat /proc/1/root/etc/shadow",
			"mkdir -p ../outside && mount -t tmpfs x ../outside && echo MOUNTED",
			"unshare -r -m sh -c 'umount /etc/shadow; cat /etc/shadow' && echo UNSHARED",
			"grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status",
		}, "; "))
		if os.Getuid() == 0 {
			shadow, err := os.ReadFile("/etc/shadow")
			require.NoError(t, err)
			first, _, _ := strings.Cut(string(shadow), "\n")
			require.NotEmpty(t, first)
			assert.NotContains(t, res.out, first, "%s: /etc/shadow was read", level)
		}
		assert.NotContains(t, res.out, "MOUNTED", level)
		assert.NotContains(t, res.out, "UNSHARED", level)
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			assert.Regexp(t, set+`:\s+0000000000000000\n`, res.out, "%s: %s", level, set)
		}
		assert.Regexp(t, `NoNewPrivs:\s+1\n`, res.out, level)
		assert.Regexp(t, `Seccomp:\s+2\n`, res.out, level)
	}
	_, err := os.Lstat(litter[2])
	assert.True(t, errors.Is(err, os.ErrNotExist))
}

// TestEnvironment: the command sees only the sandbox's small environment,
// in its own environment and in every /proc/N/environ it can read;
// neither the secret in the test process's initial environment nor one
// set later reaches it, and the server's process is not there to read.
func TestEnvironment(t *testing.T) {
	t.Setenv("AGENTWIRE_JWT_SECRET", "late-secret-7d1c")
	t.Setenv("BASH_ENV", "/nonexistent-bash-env") // would be sourced by bash -c
	w := newWorld(t, sandbox.Config{})
	res := w.run(t, sandbox.WorkspaceWrite, "env; cat /proc/*/environ | tr '\\0' '\\n'; echo PPID=$PPID; ls /proc/$PPID; tr '\\0' '\\n' < /proc/1/environ > env1")
	require.NotEmpty(t, sandboxtest.Secret(), "TestMain gives the process a marker secret")
	assert.NotContains(t, res.out, sandboxtest.Secret())
	assert.NotContains(t, res.out, "late-secret-7d1c")
	assert.Contains(t, res.out, "PPID=0\n")
	env1, err := os.ReadFile(filepath.Join(w.work, "env1"))
	require.NoError(t, err)
	want := sandbox.Environ(w.work, os.Getenv("LANG"))
	got := strings.Split(strings.TrimSpace(string(env1)), "\n")
	assert.ElementsMatch(t, want, got, "/proc/1/environ")
	assert.Contains(t, got, "HOME="+w.work)
}

// TestNoNetwork: a command without network cannot reach a listener on the
// machine's loopback, at either level; with the network granted, an
// approved command can (which shows the listener counts).
func TestNoNetwork(t *testing.T) {
	ln := sandboxtest.Listen(t)
	reach := "exec 3<>/dev/tcp/127.0.0.1/" + strconv.Itoa(ln.Port()) + " && cat <&3; curl -sS -m 5 http://" + ln.Addr() + "/; true"
	w := newWorld(t, sandbox.Config{})
	for _, level := range []sandbox.Level{sandbox.ReadOnly, sandbox.WorkspaceWrite} {
		res := w.run(t, level, reach)
		assert.Zero(t, ln.Accepted(), "%s reached the listener:\n%s", level, res.out)
	}
	open := newWorld(t, sandbox.Config{Network: true})
	res := open.run(t, sandbox.ReadOnly, reach)
	assert.Zero(t, ln.Accepted(), "a read-only command reached the listener with the network granted:\n%s", res.out)
	res = open.run(t, sandbox.WorkspaceWrite, reach)
	assert.NotZero(t, ln.Accepted(), "an approved command with the network granted did not reach the listener:\n%s", res.out)
}

// holder is a command line that keeps a process reading the FIFO fifo
// in the background, and returns once it does.
const holder = `sleep 300 3<>fifo >/dev/null 2>&1 & while [ ! -e /proc/$!/fd/3 ]; do :; done; echo holding`

// readerLeft reports whether any process still has fifo open to read.
func readerLeft(t *testing.T, fifo string) bool {
	t.Helper()
	f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENXIO) {
		return false
	}
	require.NoError(t, err)
	f.Close()
	return true
}

// TestLeftoversDie: what a command leaves running ends with it, and a
// cancelled command takes everything it started along.
func TestLeftoversDie(t *testing.T) {
	w := newWorld(t, sandbox.Config{})
	fifo := filepath.Join(w.work, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	res := w.run(t, sandbox.ReadOnly, holder)
	require.Contains(t, res.out, "holding")
	assert.False(t, readerLeft(t, fifo), "a background process outlived its command")

	res = w.run(t, sandbox.ReadOnly, "setsid -f sleep 300 3<>fifo >/dev/null 2>&1; nohup sleep 300 3<>fifo >/dev/null 2>&1 & "+holder)
	require.Contains(t, res.out, "holding")
	assert.False(t, readerLeft(t, fifo), "a process that left the session outlived its command")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan result, 1)
	go func() { done <- runIn(ctx, w.box, sandbox.ReadOnly, w.work, holder+"; sleep 300") }()
	require.Eventually(t, func() bool { return readerLeft(t, fifo) }, 30*time.Second, 10*time.Millisecond)
	cancel()
	res = <-done
	var exit *exec.ExitError
	require.ErrorAs(t, res.err, &exit, res.out)
	assert.False(t, readerLeft(t, fifo), "a cancelled command left a process running")
}

// TestGitStaysInert: at workspace-write a command writes the working
// folder but not the git settings and hooks that would run programs the
// next time someone uses git there, and cannot swap .git for another; and
// the git it runs ignores a repository's fsmonitor and hooks.
func TestGitStaysInert(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	w := newWorld(t, sandbox.Config{})
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "first"}} {
		cmd := exec.Command(git, args...)
		cmd.Dir = w.work
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	marker := filepath.Join(w.work, "ran")
	config := "[core]\n\tfsmonitor = \"touch " + marker + " #\"\n\thooksPath = .git/hooks\n[user]\n\tname = a\n\temail = a@b\n"
	require.NoError(t, os.WriteFile(filepath.Join(w.work, ".git", "config"), []byte(config), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.work, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))
	gitDir := filepath.Join(w.work, ".git")
	before := sandboxtest.Snapshot(t, gitDir)
	protected := func(tree sandboxtest.Tree) sandboxtest.Tree {
		out := sandboxtest.Tree{}
		for p, d := range tree {
			if p == "config" || p == "hooks" || strings.HasPrefix(p, "hooks/") {
				out[p] = d
			}
		}
		return out
	}

	res := w.run(t, sandbox.WorkspaceWrite, strings.Join([]string{
		"git status --short",
		"git commit -q --allow-empty -m second && echo COMMITTED",
		"echo '[alias] x = !touch " + marker + "' >> .git/config",
		"git config core.fsmonitor 'touch " + marker + "'",
		"printf '#!/bin/sh\\ntouch " + marker + "\\n' > .git/hooks/post-commit; chmod +x .git/hooks/post-commit",
		"rm -rf .git/hooks",
		"mv .git/config .git/config.old",
		"mv .git moved || cp -r .git copy",
		"printf '[core]\\n\\tfsmonitor = x\\n' | sort --outp=.git/config",
		"touch .git/objects/writable && echo OBJECTS",
	}, "; "))
	assert.Empty(t, sandboxtest.Changes(protected(before), protected(sandboxtest.Snapshot(t, gitDir))), "the git settings or hooks changed:\n%s", res.out)
	assert.NoFileExists(t, marker, "git ran a program of the repository's config:\n%s", res.out)
	assert.Contains(t, res.out, "COMMITTED", "git works in the sandbox")
	assert.Contains(t, res.out, "OBJECTS", "the rest of .git is writable")
	_, err = os.Stat(filepath.Join(w.work, "moved"))
	assert.True(t, errors.Is(err, os.ErrNotExist), ".git was moved away")
}

// TestSetupFailure: a command the sandbox cannot start is a typed error,
// not an exit status of the command's.
func TestSetupFailure(t *testing.T) {
	w := newWorld(t, sandbox.Config{})
	cmd, err := w.box.Command(t.Context(), sandbox.ReadOnly, sandbox.Request{Dir: w.work, Argv: []string{"no-such-program-here"}})
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	err = cmd.Wait()
	var setup *sandbox.SetupError
	require.ErrorAs(t, err, &setup)
	assert.Contains(t, setup.Reason, "no-such-program-here")

	_, err = w.box.Command(t.Context(), sandbox.ReadOnly, sandbox.Request{Dir: "/", Argv: []string{"true"}})
	assert.ErrorContains(t, err, "cannot confine a command to a working folder of /")
	_, err = w.box.Command(t.Context(), sandbox.ReadOnly, sandbox.Request{Dir: "relative", Argv: []string{"true"}})
	assert.Error(t, err)
}

// TestLauncherRefusesTheMachinesNamespaces runs the launcher by hand, in
// the machine's namespaces: it must refuse before it mounts anything.
func TestLauncherRefusesTheMachinesNamespaces(t *testing.T) {
	cmd := exec.Command("/proc/self/exe", sandbox.LauncherArg)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 125, exit.ExitCode())
	assert.Contains(t, string(out), "PID 1")
}

// TestWithoutSandbox: with none available only an approved command runs,
// unconfined; with the sandbox off every command runs.
func TestWithoutSandbox(t *testing.T) {
	dir := t.TempDir()
	none := sandbox.Unavailable("Landlock")
	assert.Equal(t, sandbox.KindNone, none.Kind())
	_, err := none.Command(t.Context(), sandbox.ReadOnly, sandbox.Request{Dir: dir, Argv: []string{"true"}})
	assert.ErrorIs(t, err, sandbox.ErrUnconfined)
	var nilBox *sandbox.Sandbox
	_, err = nilBox.Command(t.Context(), sandbox.ReadOnly, sandbox.Request{Dir: dir, Argv: []string{"true"}})
	assert.ErrorIs(t, err, sandbox.ErrUnconfined)

	res := runIn(t.Context(), none, sandbox.WorkspaceWrite, dir, "touch ../made-by-unconfined-"+filepath.Base(dir)+" && echo ran")
	assert.Contains(t, res.out, "ran")
	assert.FileExists(t, filepath.Join(filepath.Dir(dir), "made-by-unconfined-"+filepath.Base(dir)), "an approved command runs unconfined")
	os.Remove(filepath.Join(filepath.Dir(dir), "made-by-unconfined-"+filepath.Base(dir)))

	res = runIn(t.Context(), sandbox.Off(), sandbox.ReadOnly, dir, "echo $PPID")
	assert.NotEqual(t, "0\n", res.out, "with the sandbox off, a command runs in the machine's namespaces")

	box, err := sandbox.New(sandbox.Config{Missing: "Landlock (injected)"})
	require.NoError(t, err)
	assert.Equal(t, sandbox.KindNone, box.Kind())
	assert.Contains(t, box.Describe(), "Landlock (injected)")
	_, err = sandbox.New(sandbox.Config{Mode: sandbox.ModeRequire, Missing: "Landlock (injected)"})
	var unavailable *sandbox.UnavailableError
	require.ErrorAs(t, err, &unavailable)
	assert.Equal(t, "Landlock (injected)", unavailable.Missing)
	box, err = sandbox.New(sandbox.Config{Mode: sandbox.ModeOff})
	require.NoError(t, err)
	assert.Equal(t, sandbox.KindOff, box.Kind())
}

// TestRootOnly lists what other users may not read, and no more.
func TestRootOnly(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string, mode os.FileMode, isDir bool) {
		p = filepath.Join(dir, p)
		if isDir {
			require.NoError(t, os.Mkdir(p, 0o755))
		} else {
			require.NoError(t, os.WriteFile(p, nil, 0o644))
		}
		require.NoError(t, os.Chmod(p, mode))
	}
	mk("public", 0o644, false)
	mk("shadow", 0o640, false)
	mk("key", 0o600, false)
	mk("run", 0o755, false)
	mk("open", 0o755, true)
	mk("open/inner", 0o600, false)
	mk("private", 0o700, true)
	mk("listless", 0o711, true)
	require.NoError(t, os.Symlink("shadow", filepath.Join(dir, "link")))
	mk("private/x", 0o644, false)
	require.NoError(t, os.Chmod(filepath.Join(dir, "private"), 0o700))
	got := sandbox.RootOnly(dir)
	want := []string{"key", "listless", "open/inner", "private", "shadow"}
	for i := range want {
		want[i] = filepath.Join(dir, want[i])
	}
	assert.ElementsMatch(t, want, got)
}
