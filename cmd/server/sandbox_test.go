package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerBinaryConfinesCommands runs the server binary itself, which
// re-executes itself as the sandbox's launcher (main calls sandbox.Main),
// with a secret in its environment and full-auto: a command reads neither
// the server's environment nor its own beyond the sandbox's, and writes
// nothing outside the working folder.
func TestServerBinaryConfinesCommands(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	work, outside := filepath.Join(dir, "work"), filepath.Join(dir, "outside")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	scenario := filepath.Join(dir, "escape.yaml")
	require.NoError(t, os.WriteFile(scenario, []byte(`rules:
  - match: {exact: escape}
    steps:
      - tool_calls:
          - {name: bash, arguments: {command: "cat /proc/$PPID/environ; tr '\\0' '\\n' < /proc/1/environ; touch ../outside/made; echo ran"}}
      - text: "{{last_tool_result}}"
`), 0o644))
	secret := "aw-binary-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("AGENTWIRE_TEST_BINARY_SECRET", secret) // the server process's initial environment
	p := startProc(t, dir, "--data-dir", filepath.Join(dir, "data"), "--workdir", work, "--scenario", scenario,
		"--approval-policy", "full-auto")
	var sandboxLine string
	for sandboxLine == "" {
		select {
		case l := <-p.lines:
			if strings.HasPrefix(l, "sandbox: ") {
				sandboxLine = l
			}
		case <-time.After(time.Minute):
			t.Fatal("no sandbox line in the banner")
		}
	}
	if !strings.HasPrefix(sandboxLine, "sandbox: OS sandbox") {
		t.Skipf("the OS sandbox is not available here: %s", sandboxLine)
	}

	s, err := threadsClient(t, p).SendMessage(t.Context(), uuid.New(), "escape")
	require.NoError(t, err)
	defer s.Close()
	var st stream
	st.read(t, s, -1)
	require.True(t, st.ended)
	assert.Contains(t, st.text, "ran", "the command ran")
	assert.Contains(t, st.text, "HOME="+work, "the command's own environment is the sandbox's")
	assert.False(t, strings.Contains(st.text, secret), "the command read the server's environment")
	assert.NoFileExists(t, filepath.Join(outside, "made"))
}
