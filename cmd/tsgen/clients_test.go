package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/server/servertest"
)

// TestClients generates the package, compiles it with tsc and runs
// src/clients/smoke.ts with Node against a real server (real sockets,
// API keys): a turn and a resume per protocol through the typed clients.
// It needs tsc from .ci/lint (make lint or `npm ci` there installs it) and
// Node 20 or later; without them it is skipped, saying why, unless
// AGENTWIRE_TEST_CLIENTS=1 (as CI sets it), which makes that a failure.
func TestClients(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	tsc := filepath.Join(root, ".ci", "lint", "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		skip(t, "no TypeScript compiler at %s (run `npm ci` in .ci/lint, as make lint does): %v", tsc, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip(t, "no node on PATH: the typed clients need Node 20 or later to run")
	}
	nodeArgs := webSocketFlag(t, node)

	// The package as tsgen writes it, compiled to JavaScript.
	pkg := filepath.Join(t.TempDir(), "ts")
	require.NoError(t, run(root, pkg))
	out := filepath.Join(pkg, "dist")
	cfg, err := json.Marshal(map[string]any{
		"extends":         "./tsconfig.json",
		"compilerOptions": map[string]any{"noEmit": false, "outDir": out, "rootDir": "./src"},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "tsconfig.build.json"), cfg, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, tsc, "-p", filepath.Join(pkg, "tsconfig.build.json")).CombinedOutput()
	require.NoError(t, err, "tsc:\n%s", b)

	// A server with API keys, answering from the test's scenario.
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keys, []byte("smoke=k-smoke-0123456789\n"), 0o600))
	srv := servertest.Start(t, servertest.Config(t,
		"--scenario", "testdata/clients.yaml",
		"--auth", "keys", "--api-keys-file", keys,
		"--ag2-rate", "1000", "--ag2-burst", "1000",
	), servertest.Options{})

	cmd := exec.CommandContext(ctx, node, append(nodeArgs, filepath.Join(out, "clients", "smoke.js"), "ws://"+srv.Addr("main"))...)
	cmd.Env = append(os.Environ(), "AGENTWIRE_TOKEN=k-smoke-0123456789")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("smoke.js:\n%s%s", stdout.String(), stderr.String())
	require.NoError(t, err, "smoke.js failed:\n%s", stderr.String())
	for _, want := range []string{
		"ok credentials",
		"ok agentchat: a turn",
		"ok agentchat: the session continued",
		"ok agentloop: a turn with an approval",
		"ok agentloop: rejoined",
		"ok ag2: a turn with an approval",
		"ok ag2: client.resume",
		"ok loom: a run with an approval",
		"ok loom: continued",
		"ok threads: a post",
		"ok threads: resumed",
	} {
		require.Contains(t, stdout.String(), want)
	}
	require.NotContains(t, stdout.String()+stderr.String(), "FAIL")
}

// webSocketFlag is the flag Node needs for a global WebSocket: none from
// Node 22 on, --experimental-websocket on Node 20 and 21; older Nodes skip.
func webSocketFlag(t *testing.T, node string) []string {
	t.Helper()
	probe := func(args ...string) bool {
		b, err := exec.Command(node, append(args, "-e", "process.stdout.write(typeof WebSocket)")...).Output()
		return err == nil && strings.TrimSpace(string(b)) == "function"
	}
	if probe() {
		return nil
	}
	if probe("--experimental-websocket") {
		return []string{"--experimental-websocket"}
	}
	skip(t, "this node has no WebSocket, even with --experimental-websocket: the typed clients need Node 20 or later")
	return nil
}

// skip skips the test, or fails it when AGENTWIRE_TEST_CLIENTS=1 says the
// tools must be there.
func skip(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("AGENTWIRE_TEST_CLIENTS") == "1" {
		t.Fatalf("AGENTWIRE_TEST_CLIENTS=1, but: "+format, args...)
	}
	t.Skipf(format, args...)
}
