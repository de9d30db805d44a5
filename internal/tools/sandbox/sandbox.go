// Package sandbox confines what the tools touch, in two ways.
//
// A Root confines the file tools to a working folder: it resolves the
// paths a model writes (relative, absolute, through symbolic links) and
// refuses every one that would leave the folder; its file operations then
// go through an os.Root, which refuses escapes again at the system-call
// level, so a symbolic link swapped in between the check and the use
// cannot lead out either.
//
// A Sandbox confines the programs the tools start, whatever their command
// line says: each runs in new user, PID, mount, IPC and network
// namespaces, on a root file system of its own (the system directories
// read-only, what only root may read hidden, the working folder at its own
// path), with no capability, under Landlock and seccomp, at the Level its
// approval chose. It is built from Linux features that need no root and no
// daemon; where the kernel lacks them, Kind says so and nothing runs
// without approval.
package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrEscape is matched (errors.Is) by every error that refuses a path for
// leaving the working folder.
var ErrEscape = errors.New("path is outside the working folder")

// EscapeError refuses a path that leaves the working folder, and says how.
type EscapeError struct {
	Path   string // the path as the caller gave it
	Reason string
}

func (e *EscapeError) Error() string {
	return fmt.Sprintf("%q is outside the working folder: %s", e.Path, e.Reason)
}

// Is makes errors.Is(err, ErrEscape) true.
func (e *EscapeError) Is(target error) bool { return target == ErrEscape }

// maxLinks bounds how many symbolic links one resolution follows, as the
// kernel does (ELOOP).
const maxLinks = 40

// Root is a working folder. It is safe for concurrent use.
type Root struct {
	dir   string // absolute, symbolic links resolved
	given string // absolute and clean, as given to Open
	root  *os.Root
}

// Open returns the Root for dir, which must be an existing directory. The
// Root holds the directory open until Close.
func Open(dir string) (*Root, error) {
	given, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	real, err := filepath.EvalSymlinks(given)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	fi, err := root.Stat(".")
	if err != nil || !fi.IsDir() {
		root.Close()
		return nil, fmt.Errorf("sandbox: %s is not a directory", dir)
	}
	return &Root{dir: real, given: given, root: root}, nil
}

// Close releases the directory.
func (r *Root) Close() error { return r.root.Close() }

// Dir returns the working folder's absolute path, symbolic links resolved.
func (r *Root) Dir() string { return r.dir }

// Resolve returns p as a clean path relative to the working folder ("." for
// the folder itself), with every symbolic link along it resolved. p may be
// relative to the folder or absolute inside it. It is refused (ErrEscape)
// when it leaves the folder through "..", is an absolute path elsewhere, or
// passes through a symbolic link whose target is outside. A path that does
// not exist yet resolves as long as its existing part stays inside, so new
// files in existing (or new) folders are fine.
func (r *Root) Resolve(p string) (string, error) {
	abs, err := r.lexical(p)
	if err != nil {
		return "", err
	}
	real, err := realPath(abs, 0)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	rel, ok := within(r.dir, real)
	if !ok {
		return "", &EscapeError{Path: p, Reason: "a symbolic link along it leads out"}
	}
	return rel, nil
}

// resolveLink is Resolve except that a symbolic link as the last element is
// not followed: it names the link itself (to remove or rename it).
func (r *Root) resolveLink(p string) (string, error) {
	abs, err := r.lexical(p)
	if err != nil {
		return "", err
	}
	if abs == r.dir {
		return ".", nil
	}
	parent, err := realPath(filepath.Dir(abs), 0)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	rel, ok := within(r.dir, filepath.Join(parent, filepath.Base(abs)))
	if !ok || rel == "." {
		return "", &EscapeError{Path: p, Reason: "a symbolic link along it leads out"}
	}
	return rel, nil
}

// lexical checks p without touching the file system and returns it as a
// clean absolute path under r.dir.
func (r *Root) lexical(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%q: a path cannot contain NUL", p)
	}
	if p == "" {
		p = "."
	}
	c := filepath.Clean(p)
	if filepath.IsAbs(c) {
		rel, ok := within(r.dir, c)
		if !ok {
			rel, ok = within(r.given, c)
		}
		if !ok {
			return "", &EscapeError{Path: p, Reason: "it is an absolute path elsewhere"}
		}
		return filepath.Join(r.dir, rel), nil
	}
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", &EscapeError{Path: p, Reason: `it climbs out through ".."`}
	}
	return filepath.Join(r.dir, c), nil
}

// within reports whether p (absolute, clean) is base or under it, and
// returns it relative to base.
func within(base, p string) (string, bool) {
	rel, err := filepath.Rel(base, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

// realPath resolves every symbolic link in the existing part of p (absolute,
// clean); the part that does not exist yet is kept as it is. Unlike
// filepath.EvalSymlinks it also follows a link whose target does not exist,
// since writing through such a link creates its target.
func realPath(p string, depth int) (string, error) {
	if depth > maxLinks {
		return "", errors.New("too many levels of symbolic links")
	}
	existing, rest := p, ""
	for {
		_, err := os.Lstat(existing)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		// existing is a link whose target (or a link on the way) is missing.
		target, lerr := os.Readlink(existing)
		if lerr != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			dir, err := filepath.EvalSymlinks(filepath.Dir(existing))
			if err != nil {
				return "", err
			}
			target = filepath.Join(dir, target)
		}
		if real, err = realPath(filepath.Clean(target), depth+1); err != nil {
			return "", err
		}
	}
	return filepath.Join(real, rest), nil
}

// Display returns a resolved path the way tools show it to the model:
// slash-separated, relative to the working folder.
func Display(rel string) string { return filepath.ToSlash(rel) }

// FS returns the working folder as an fs.FS; it refuses symbolic links that
// lead out, and files with other hard links (see Open). Names are Resolve's
// results with forward slashes.
func (r *Root) FS() fs.FS { return linkCheckedFS{r.root.FS()} }

// ReadFile reads the file at p (see Open).
func (r *Root) ReadFile(p string) ([]byte, error) {
	f, err := r.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Open opens the file at p for reading. A regular file with more than one
// hard link is refused: its other names may be outside the working folder
// (a link made there to a secret elsewhere on the same file system), and a
// link count cannot say where they are. The check is on the opened file,
// so a link made between a check and the open cannot slip through.
func (r *Root) Open(p string) (*os.File, error) {
	rel, err := r.Resolve(p)
	if err != nil {
		return nil, err
	}
	f, err := r.root.Open(rel)
	if err != nil {
		return nil, err
	}
	if err := checkLinks(f, p); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkLinks refuses a regular file with other hard links.
func checkLinks(f fs.File, p string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return &EscapeError{Path: p, Reason: fmt.Sprintf("it has %d hard links, and the others may be outside the working folder", st.Nlink)}
	}
	return nil
}

// linkCheckedFS is an fs.FS whose Open refuses files with other hard links.
type linkCheckedFS struct{ fs.FS }

func (l linkCheckedFS) Open(name string) (fs.File, error) {
	f, err := l.FS.Open(name)
	if err != nil {
		return nil, err
	}
	if err := checkLinks(f, name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Stat describes the file at p, following symbolic links.
func (r *Root) Stat(p string) (fs.FileInfo, error) {
	rel, err := r.Resolve(p)
	if err != nil {
		return nil, err
	}
	return r.root.Stat(rel)
}

// Lstat describes the file at p; a symbolic link is described, not followed.
func (r *Root) Lstat(p string) (fs.FileInfo, error) {
	rel, err := r.resolveLink(p)
	if err != nil {
		return nil, err
	}
	return r.root.Lstat(rel)
}

// ReadDir lists the directory at p, sorted by name.
func (r *Root) ReadDir(p string) ([]fs.DirEntry, error) {
	rel, err := r.Resolve(p)
	if err != nil {
		return nil, err
	}
	return fs.ReadDir(r.root.FS(), filepath.ToSlash(rel))
}

// MkdirAll creates the directory at p and any missing parents. A git
// hooks folder is refused (ErrProtected).
func (r *Root) MkdirAll(p string) error {
	rel, err := r.Resolve(p)
	if err != nil {
		return err
	}
	if err := checkWritable(p, rel); err != nil {
		return err
	}
	return r.root.MkdirAll(rel, 0o755)
}

// WriteFile replaces the file at p with data, creating missing parent
// directories. The new content is written to a temporary file that is then
// renamed into place, so readers never see half a file; an existing file
// keeps its permissions (new files get 0644). A repository's git settings
// and hooks are refused (ErrProtected).
func (r *Root) WriteFile(p string, data []byte) error {
	rel, err := r.Resolve(p)
	if err != nil {
		return err
	}
	if err := checkWritable(p, rel); err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("%s: is a directory", p)
	}
	perm := fs.FileMode(0o644)
	if fi, err := r.root.Stat(rel); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s: is a directory", p)
		}
		perm = fi.Mode().Perm()
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := r.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+"."+randomSuffix()+".tmp")
	f, err := r.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		// OpenFile's perm is filtered by the umask; an existing file's
		// mode is kept exactly.
		werr = r.root.Chmod(tmp, perm)
	}
	if werr == nil {
		werr = r.root.Rename(tmp, rel)
	}
	if werr != nil {
		r.root.Remove(tmp)
		return werr
	}
	return nil
}

// Remove deletes the file or empty directory at p. A symbolic link is
// removed itself, not its target. A repository's git settings and hooks
// are refused (ErrProtected).
func (r *Root) Remove(p string) error {
	rel, err := r.resolveLink(p)
	if err != nil {
		return err
	}
	if err := checkWritable(p, rel); err != nil {
		return err
	}
	return r.root.Remove(rel)
}

// Rename moves the file at from to to, creating to's missing parent
// directories. A symbolic link is moved itself, and one at to is replaced,
// not followed. Moving a repository's git settings or hooks, or a .git
// folder itself, is refused (ErrProtected).
func (r *Root) Rename(from, to string) error {
	src, err := r.resolveLink(from)
	if err != nil {
		return err
	}
	dst, err := r.resolveLink(to)
	if err != nil {
		return err
	}
	for _, c := range []struct{ p, rel string }{{from, src}, {to, dst}} {
		if err := checkWritable(c.p, c.rel); err != nil {
			return err
		}
		if isGitFolder(c.rel) {
			return &ProtectedError{Path: c.p}
		}
	}
	if dst == "." {
		return fmt.Errorf("%s: is the working folder", to)
	}
	if dir := filepath.Dir(dst); dir != "." {
		if err := r.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return r.root.Rename(src, dst)
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
