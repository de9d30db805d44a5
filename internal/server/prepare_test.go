package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
)

func TestPrepareRunOptions(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "proj"), 0o755))
	writeFile(t, dir, "secret.txt", "outside the project")
	writeFile(t, filepath.Join(dir, "proj"), "notes.txt", "inside")
	root, err := sandbox.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = root.Close() })
	var logs bytes.Buffer
	p := &preparer{root: root, policy: tools.PolicySuggest, log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	ctx := context.Background()

	spec, release, err := p.prepare(ctx, "t", event.RunOptions{Strategy: "react", Folder: "proj", Verbose: true})
	require.NoError(t, err)
	require.NotNil(t, release)
	defer release()
	assert.Equal(t, "react", spec.Strategy)
	read, ok := spec.Tools.Get("read")
	require.True(t, ok)
	res, err := read.Run(ctx, json.RawMessage(`{"path":"notes.txt"}`), nil)
	require.NoError(t, err)
	assert.Contains(t, res.Content, "inside", "the run's tools work in its folder")
	res, err = read.Run(ctx, json.RawMessage(`{"path":"../secret.txt"}`), nil)
	if err == nil {
		assert.True(t, res.IsError, "the run's tools are confined to its folder: %+v", res)
	}
	spec.Logger.Debug("a detail")
	assert.Contains(t, logs.String(), "a detail", "a verbose run logs at debug level")

	spec, release, err = p.prepare(ctx, "t", event.RunOptions{Folder: filepath.Join(dir, "proj")})
	require.NoError(t, err, "an absolute path inside the working folder")
	release()
	assert.NotNil(t, spec.Tools)

	for _, opts := range []event.RunOptions{
		{Folder: "../elsewhere"},
		{Folder: "/etc"},
		{Folder: "missing"},
		{Folder: "secret.txt"},
		{Strategy: "guess"},
	} {
		_, _, err := p.prepare(ctx, "t", opts)
		require.Error(t, err, "%+v", opts)
		assert.Equal(t, protocol.CodeInvalid, protocol.AsError(err).Code, "%+v: %v", opts, err)
	}
}

func TestPrepareRolePrompt(t *testing.T) {
	dir := t.TempDir()
	proj := filepath.Join(dir, "proj")
	require.NoError(t, os.MkdirAll(proj, 0o755))
	writeFile(t, dir, "secret.txt", "outside the project")
	root, err := sandbox.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = root.Close() })
	p := &preparer{root: root, policy: tools.PolicySuggest, log: slog.New(slog.DiscardHandler)}
	system := func(folder string) string {
		t.Helper()
		spec, release, err := p.prepare(t.Context(), "t", event.RunOptions{Folder: folder})
		require.NoError(t, err)
		if release != nil {
			release()
		}
		return spec.System
	}

	assert.Equal(t, systemPrompt, system("proj"), "no SOUL.md: the built-in role")
	assert.Equal(t, systemPrompt, system(""), "a run without a folder works in the server's")

	writeFile(t, proj, "AGENTS.md", "Run the tests with make test.\n")
	assert.Equal(t, systemPrompt+"\n\nRun the tests with make test.", system("proj"), "AGENTS.md follows the built-in role")

	writeFile(t, proj, "SOUL.md", "  You are Loom, a careful reviewer.\n")
	assert.Equal(t, "You are Loom, a careful reviewer.\n\nRun the tests with make test.", system("proj"))

	require.NoError(t, os.Remove(filepath.Join(proj, "AGENTS.md")))
	assert.Equal(t, "You are Loom, a careful reviewer.", system("proj"), "read at each run's start")

	writeFile(t, dir, "SOUL.md", "The server's own soul.")
	assert.Equal(t, "The server's own soul.", system("."))

	require.NoError(t, os.Remove(filepath.Join(proj, "SOUL.md")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(proj, "SOUL.md")))
	_, _, err = p.prepare(t.Context(), "t", event.RunOptions{Folder: "proj"})
	require.Error(t, err, "a SOUL.md that leads out of the run's folder")
	assert.Equal(t, protocol.CodeInvalid, protocol.AsError(err).Code)
	assert.Contains(t, err.Error(), "SOUL.md of the working folder leads outside it")

	require.NoError(t, os.Remove(filepath.Join(proj, "SOUL.md")))
	require.NoError(t, os.Symlink("nowhere.md", filepath.Join(proj, "SOUL.md")))
	assert.Equal(t, systemPrompt, system("proj"), "a dangling link is no SOUL.md")
}

// TestPrepareKeepsRoleFiles prepares runs in a folder whose role files
// change between them: a file is read again when its stat changes (its
// size, its time, its links, or another file in its place), and only then.
func TestPrepareKeepsRoleFiles(t *testing.T) {
	dir := t.TempDir()
	root, err := sandbox.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = root.Close() })
	p := &preparer{root: root, policy: tools.PolicySuggest, log: slog.New(slog.DiscardHandler)}
	system := func() string {
		t.Helper()
		spec, _, err := p.prepare(t.Context(), "t", event.RunOptions{})
		require.NoError(t, err)
		return spec.System
	}
	soul := filepath.Join(dir, "SOUL.md")
	writeFile(t, dir, "SOUL.md", "You are Ada.")
	assert.Equal(t, "You are Ada.", system())

	// The same size and time: the stat cannot tell, so the text is the
	// one read before. (No editor does this; it shows the file is not
	// read again.)
	fi, err := os.Stat(soul)
	require.NoError(t, err)
	writeFile(t, dir, "SOUL.md", "You are Bob.")
	require.NoError(t, os.Chtimes(soul, fi.ModTime(), fi.ModTime()))
	assert.Equal(t, "You are Ada.", system(), "a file whose stat did not change is read again")

	require.NoError(t, os.Chtimes(soul, fi.ModTime().Add(time.Second), fi.ModTime().Add(time.Second)))
	assert.Equal(t, "You are Bob.", system(), "a file whose time changed")

	writeFile(t, dir, "SOUL.md", "You are Carol.")
	assert.Equal(t, "You are Carol.", system(), "a file whose size changed")

	next := filepath.Join(dir, "next.md")
	require.NoError(t, os.WriteFile(next, []byte("You are Dave.."), 0o644))
	require.NoError(t, os.Chtimes(next, fi.ModTime().Add(time.Second), fi.ModTime().Add(time.Second)))
	require.NoError(t, os.Rename(next, soul))
	assert.Equal(t, "You are Dave..", system(), "another file of the same size and time in its place")

	require.NoError(t, os.Link(soul, filepath.Join(t.TempDir(), "elsewhere.md")))
	_, _, err = p.prepare(t.Context(), "t", event.RunOptions{})
	require.Error(t, err, "a role file that gained a link elsewhere")
	assert.Contains(t, err.Error(), "hard links")

	require.NoError(t, os.Remove(soul))
	assert.Equal(t, systemPrompt, system(), "a removed file")
}
