package sandbox_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/tools/sandbox/sandboxtest"
)

// layout builds a working folder next to a folder it must not reach:
//
//	base/outside/secret.txt
//	base/root/a.txt, sub/f.txt
//	base/root/out      -> ../outside            (dir escape)
//	base/root/secret   -> base/outside/secret.txt (absolute escape)
//	base/root/inner    -> sub                   (stays inside)
//	base/root/absinner -> base/root/sub         (absolute, inside)
//	base/root/sub/up   -> ../../outside         (escape one level down)
//	base/root/nested   -> inner/up              (link to a link that escapes)
//	base/root/dangling -> ../outside/new.txt    (target missing, outside)
//	base/root/loop     -> loop
func layout(t *testing.T) (base, rootDir string) {
	t.Helper()
	base = t.TempDir()
	rootDir = filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{outside, filepath.Join(rootDir, "sub")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	write := func(p, s string) { require.NoError(t, os.WriteFile(p, []byte(s), 0o644)) }
	write(filepath.Join(outside, "secret.txt"), "secret")
	write(filepath.Join(rootDir, "a.txt"), "a")
	write(filepath.Join(rootDir, "sub", "f.txt"), "f")
	link := func(target, name string) { require.NoError(t, os.Symlink(target, filepath.Join(rootDir, name))) }
	link("../outside", "out")
	link(filepath.Join(outside, "secret.txt"), "secret")
	link("sub", "inner")
	link(filepath.Join(rootDir, "sub"), "absinner")
	link("../../outside", "sub/up")
	link("inner/up", "nested")
	link("../outside/new.txt", "dangling")
	link("loop", "loop")
	return base, rootDir
}

func TestResolve(t *testing.T) {
	base, rootDir := layout(t)
	r, err := sandbox.Open(rootDir)
	require.NoError(t, err)
	defer r.Close()

	ok := []struct{ in, want string }{
		{"", "."},
		{".", "."},
		{"a.txt", "a.txt"},
		{"./a.txt", "a.txt"},
		{"sub/../a.txt", "a.txt"},
		{filepath.Join(rootDir, "a.txt"), "a.txt"},
		{rootDir, "."},
		{"inner/f.txt", filepath.Join("sub", "f.txt")},
		{"absinner/f.txt", filepath.Join("sub", "f.txt")},
		{"new/dir/file.txt", filepath.Join("new", "dir", "file.txt")},
		{"sub/new.txt", filepath.Join("sub", "new.txt")},
	}
	for _, c := range ok {
		got, err := r.Resolve(c.in)
		if err != nil || got != c.want {
			t.Errorf("Resolve(%q) = %q, %v, want %q", c.in, got, err, c.want)
		}
	}

	escapes := []string{
		"..",
		"../outside/secret.txt",
		"sub/../../outside/secret.txt",
		"/etc/passwd",
		filepath.Join(base, "outside", "secret.txt"),
		"out",
		"out/secret.txt",
		"secret",
		"sub/up/secret.txt",
		"inner/up/secret.txt",
		"nested",
		"nested/secret.txt",
		"dangling",
		"out/new-file.txt",
	}
	for _, p := range escapes {
		got, err := r.Resolve(p)
		if !errors.Is(err, sandbox.ErrEscape) {
			t.Errorf("Resolve(%q) = %q, %v, want ErrEscape", p, got, err)
		}
	}

	if _, err := r.Resolve("loop/x"); err == nil || errors.Is(err, sandbox.ErrEscape) {
		t.Errorf("Resolve(loop/x) = %v, want a link-loop error", err)
	}
}

func TestOpenThroughAlias(t *testing.T) {
	base, rootDir := layout(t)
	alias := filepath.Join(base, "alias")
	require.NoError(t, os.Symlink(rootDir, alias))
	r, err := sandbox.Open(alias)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, rootDir, r.Dir())
	got, err := r.Resolve(filepath.Join(alias, "sub", "f.txt"))
	require.NoError(t, err)
	require.Equal(t, filepath.Join("sub", "f.txt"), got)
}

func TestWritesStayInside(t *testing.T) {
	base, rootDir := layout(t)
	r, err := sandbox.Open(rootDir)
	require.NoError(t, err)
	defer r.Close()
	secret := filepath.Join(base, "outside", "secret.txt")

	for _, p := range []string{"secret", "dangling", "out/x.txt", "../x.txt", "nested/secret.txt"} {
		err := r.WriteFile(p, []byte("pwned"))
		require.ErrorIs(t, err, sandbox.ErrEscape, "WriteFile(%q)", p)
	}
	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	require.Equal(t, "secret", string(b))
	_, err = os.Lstat(filepath.Join(base, "outside", "new.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Lstat(filepath.Join(base, "x.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)

	require.ErrorIs(t, r.Rename("a.txt", "../moved.txt"), sandbox.ErrEscape)
	require.ErrorIs(t, r.Rename("out/secret.txt", "stolen.txt"), sandbox.ErrEscape)
	require.ErrorIs(t, r.MkdirAll("out/newdir"), sandbox.ErrEscape)
	_, err = r.ReadFile("secret")
	require.ErrorIs(t, err, sandbox.ErrEscape)

	// Removing a link removes the link, never its target.
	require.NoError(t, r.Remove("secret"))
	_, err = os.Stat(secret)
	require.NoError(t, err)
}

func TestWriteFile(t *testing.T) {
	_, rootDir := layout(t)
	r, err := sandbox.Open(rootDir)
	require.NoError(t, err)
	defer r.Close()

	require.NoError(t, r.WriteFile("deep/er/new.txt", []byte("hello")))
	b, err := os.ReadFile(filepath.Join(rootDir, "deep", "er", "new.txt"))
	require.NoError(t, err)
	require.Equal(t, "hello", string(b))

	// Through a link inside the folder, the target is written.
	require.NoError(t, r.WriteFile("inner/f.txt", []byte("via link")))
	b, err = os.ReadFile(filepath.Join(rootDir, "sub", "f.txt"))
	require.NoError(t, err)
	require.Equal(t, "via link", string(b))

	// An existing file keeps its mode.
	exe := filepath.Join(rootDir, "run.sh")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.Chmod(exe, 0o750))
	require.NoError(t, r.WriteFile("run.sh", []byte("#!/bin/sh\necho hi\n")))
	fi, err := os.Stat(exe)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o750), fi.Mode().Perm())

	require.Error(t, r.WriteFile("sub", []byte("x")))

	// No temporary files are left behind.
	entries, err := os.ReadDir(rootDir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name(), ".tmp")
	}
}

// TestHardLinkOutIsRefused links a file outside the working folder into it
// by a hard link, which no path check can see: reading it through the Root
// (ReadFile, Open, FS) is refused; writing the name replaces the link with
// a new file and leaves the outside file as it was.
func TestHardLinkOutIsRefused(t *testing.T) {
	base, rootDir := layout(t)
	secret := filepath.Join(base, "outside", "secret.txt")
	require.NoError(t, os.Link(secret, filepath.Join(rootDir, "hard.txt")))
	r, err := sandbox.Open(rootDir)
	require.NoError(t, err)
	defer r.Close()

	_, err = r.ReadFile("hard.txt")
	require.ErrorIs(t, err, sandbox.ErrEscape)
	require.Contains(t, err.Error(), "hard links")
	_, err = r.Open("hard.txt")
	require.ErrorIs(t, err, sandbox.ErrEscape)
	_, err = fs.ReadFile(r.FS(), "hard.txt")
	require.ErrorIs(t, err, sandbox.ErrEscape)
	b, err := fs.ReadFile(r.FS(), "a.txt")
	require.NoError(t, err, "a file with one link")
	require.Equal(t, "a", string(b))

	require.NoError(t, r.WriteFile("hard.txt", []byte("mine")))
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	require.Equal(t, "secret", string(got), "the outside file is untouched")
	b, err = r.ReadFile("hard.txt")
	require.NoError(t, err, "the name is now a file of its own")
	require.Equal(t, "mine", string(b))
}

// A hard link in the working folder to a file outside it is refused by
// every read path (Open, ReadFile, FS), while the file's own name outside
// is untouched and an ordinary file inside still reads.
func TestHardLinkOutOfTheFolderIsRefused(t *testing.T) {
	base, rootDir := layout(t)
	secret := filepath.Join(base, "outside", "secret.txt")
	if err := os.Link(secret, filepath.Join(rootDir, "hard.txt")); err != nil {
		t.Skipf("this file system makes no hard links: %v", err)
	}
	r, err := sandbox.Open(rootDir)
	require.NoError(t, err)
	defer r.Close()

	_, err = r.ReadFile("hard.txt")
	require.ErrorIs(t, err, sandbox.ErrEscape)
	assert.Contains(t, err.Error(), "hard links")
	_, err = r.Open("hard.txt")
	require.ErrorIs(t, err, sandbox.ErrEscape)
	_, err = fs.ReadFile(r.FS(), "hard.txt")
	require.ErrorIs(t, err, sandbox.ErrEscape)

	b, err := r.ReadFile("a.txt")
	require.NoError(t, err)
	assert.Equal(t, "a", string(b))
}

// TestGitSettingsAreNotWritten: the file tools' Root refuses to write,
// remove or move a repository's git settings and hooks (its own, a
// submodule's, a worktree's, a nested repository's), or a .git folder
// itself, by any path; other files of .git and files that only share the
// names are written.
func TestGitSettingsAreNotWritten(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		p = filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
	}
	write(".git/config", "[core]\n")
	write(".git/hooks/pre-commit.sample", "#!/bin/sh\n")
	write(".git/modules/lib/x/config", "[core]\n")
	write(".git/modules/lib/x/HEAD", "ref: refs/heads/main\n")
	write(".git/worktrees/w/config.worktree", "[core]\n")
	write("vendor/dep/.git/config", "[core]\n")
	write("a.txt", "a")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "x"), 0o755))
	require.NoError(t, os.Symlink(".git/config", filepath.Join(dir, "cfg")))
	root, err := sandbox.Open(dir)
	require.NoError(t, err)
	defer root.Close()
	before := sandboxtest.Snapshot(t, filepath.Join(dir, ".git"))

	evil := []byte("[core]\n\tfsmonitor = \"touch ../outside/X #\"\n")
	for _, p := range []string{".git/config", "./.git/../.git/config", "cfg", ".git/config.worktree", ".git/hooks/post-checkout",
		".git/modules/lib/x/config", ".git/modules/lib/x/hooks/pre-commit", ".git/worktrees/w/config.worktree",
		"vendor/dep/.git/config", "vendor/dep/.git/hooks/pre-commit"} {
		assert.ErrorIs(t, root.WriteFile(p, evil), sandbox.ErrProtected, "WriteFile(%q)", p)
	}
	assert.ErrorIs(t, root.MkdirAll(".git/hooks/x"), sandbox.ErrProtected)
	assert.ErrorIs(t, root.Remove(".git/hooks/pre-commit.sample"), sandbox.ErrProtected)
	assert.ErrorIs(t, root.Remove(".git/config"), sandbox.ErrProtected)
	for _, mv := range [][2]string{{".git", "g"}, {"x", ".git"}, {"x", "sub/.git"}, {".git/config", ".git/c"}, {"a.txt", ".git/config"}, {"a.txt", ".git/hooks/pre-commit"}} {
		assert.ErrorIs(t, root.Rename(mv[0], mv[1]), sandbox.ErrProtected, "Rename(%q, %q)", mv[0], mv[1])
	}
	assert.Empty(t, sandboxtest.Changes(before, sandboxtest.Snapshot(t, filepath.Join(dir, ".git"))))

	for _, p := range []string{".git/info/exclude", ".git/description", "config", "hooks/x", ".gitignore", "src/.gitconfig"} {
		assert.NoError(t, root.WriteFile(p, []byte("ok\n")), "WriteFile(%q)", p)
	}
	assert.NoError(t, root.Rename("a.txt", "b.txt"))
}
