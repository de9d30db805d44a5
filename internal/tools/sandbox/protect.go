package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ErrProtected is matched (errors.Is) by every error that refuses to write
// a git setting or hook.
var ErrProtected = errors.New("git settings and hooks are not the tools' to write")

// ProtectedError refuses a write to a repository's git settings or hooks:
// core.fsmonitor, diff.external, core.hooksPath, aliases and hooks run
// programs the next time anyone uses git in the folder, the person at
// their own shell included, where no sandbox holds.
type ProtectedError struct {
	Path string // the path as the caller gave it
}

func (e *ProtectedError) Error() string {
	return fmt.Sprintf("%q is a git setting or hook, which the tools do not write (they would run programs the next time git runs here)", e.Path)
}

// Is makes errors.Is(err, ErrProtected) true.
func (e *ProtectedError) Is(target error) bool { return target == ErrProtected }

// protectedGit reports whether rel, a clean path relative to the working
// folder, is a git setting or hook of any repository in it: under a .git
// folder, config, config.worktree and hooks/, and those of its submodules
// (modules/…) and worktrees (worktrees/NAME/config.worktree).
func protectedGit(rel string) bool {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i, p := range parts {
		if p != ".git" || i+1 >= len(parts) {
			continue
		}
		rest := parts[i+1:]
		switch {
		case rest[0] == "config" || rest[0] == "config.worktree" || rest[0] == "hooks":
			return true
		case rest[0] == "worktrees" && len(rest) >= 3 && rest[2] == "config.worktree":
			return true
		case rest[0] == "modules":
			// modules/NAME…/config, …/config.worktree, …/hooks/…: a
			// submodule's git folder (NAME may have slashes).
			if slices.Contains(rest[1:], "hooks") {
				return true
			}
			if last := rest[len(rest)-1]; len(rest) > 2 && (last == "config" || last == "config.worktree") {
				return true
			}
		}
	}
	return false
}

// isGitFolder reports whether rel names a .git folder itself: moving one
// in or out would swap a repository's settings for others.
func isGitFolder(rel string) bool { return filepath.Base(rel) == ".git" }

// checkWritable refuses writing rel (resolved, relative), given as p.
func checkWritable(p, rel string) error {
	if protectedGit(rel) {
		return &ProtectedError{Path: p}
	}
	return nil
}
