package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run with a context that is already cancelled starts the server, prints
// the banner, shuts down gracefully and returns nil: what SIGINT right
// after start does.
func TestRunPrintsBannerAndStopsCleanly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env := map[string]string{
		"AGENTWIRE_DATA_DIR": t.TempDir(),
		"AGENTWIRE_WORKDIR":  t.TempDir(),
	}
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, &stdout, &stderr)
	require.NoError(t, err, "stderr: %s", stderr.String())

	out := stdout.String()
	assert.Regexp(t, `agentchat\s+ws://127\.0\.0\.1:\d+/ws`, out)
	assert.Contains(t, out, "model: scripted")
	for _, how := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "--llm", "--model"} {
		assert.Contains(t, out, how, "the scripted model's how-to")
	}
	assert.True(t, strings.HasSuffix(out, "agentwire: shutting down\n"), "stdout ends %q", out)
}

// A bad flag is an error, not a start.
func TestRunRejectsBadConfig(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"--approval-policy", "yolo"}, func(string) string { return "" }, &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "approval-policy")
	assert.Empty(t, stdout.String())
}

// The configured model is checked at start: a model that cannot be used is
// a warning that says what to change, and with --check-model a refusal to
// start.
func TestRunChecksTheModel(t *testing.T) {
	// An address nothing listens on: the check's call is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String() + "/v1"
	require.NoError(t, ln.Close())

	env := map[string]string{
		"AGENTWIRE_DATA_DIR": t.TempDir(),
		"AGENTWIRE_WORKDIR":  t.TempDir(),
		"OPENAI_API_KEY":     "sk-test",
		"OPENAI_BASE_URL":    dead,
	}
	getenv := func(k string) string { return env[k] }

	t.Run("warning", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var stdout, stderr bytes.Buffer
		require.NoError(t, run(ctx, []string{"--addr", "127.0.0.1:0"}, getenv, &stdout, &stderr), "stderr: %s", stderr.String())
		log := stderr.String()
		assert.Contains(t, log, "level=WARN")
		assert.Contains(t, log, "the configured model cannot be used")
		assert.Contains(t, log, dead, "the warning names the URL tried")
		assert.Contains(t, log, "OPENAI_BASE_URL", "the warning names what to change")
		assert.Contains(t, stdout.String(), "agentwire: shutting down", "the server started anyway")
	})
	t.Run("fatal", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"--addr", "127.0.0.1:0", "--check-model"}, getenv, &stdout, &stderr)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--check-model")
		assert.Contains(t, err.Error(), dead)
		assert.Contains(t, err.Error(), "OPENAI_BASE_URL")
		assert.NotContains(t, stdout.String(), "ws://", "no banner: the server did not start")
	})
	t.Run("a model that answers", func(t *testing.T) {
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/models" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"gpt-test","object":"model","created":0,"owned_by":"test"}]}`))
		}))
		defer api.Close()
		good := map[string]string{"AGENTWIRE_DATA_DIR": t.TempDir(), "AGENTWIRE_WORKDIR": t.TempDir(), "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": api.URL + "/v1"}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var stdout, stderr bytes.Buffer
		require.NoError(t, run(ctx, []string{"--addr", "127.0.0.1:0", "--model", "gpt-test", "--check-model"}, func(k string) string { return good[k] }, &stdout, &stderr), "stderr: %s", stderr.String())
		assert.NotContains(t, stderr.String(), "cannot be used")
		assert.Contains(t, stdout.String(), "openai gpt-test")
	})
}

// The binary's subcommands: validate, threads and chat go to internal/cli, an
// unknown one is refused with the list.
func TestDispatch(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := dispatch(context.Background(), []string{"validate", "--protocol", "loom", "-"}, func(string) string { return "" },
		strings.NewReader(`{"type":"ping","id":"p1"}`), &stdout, &stderr)
	require.NoError(t, err, "stderr: %s", stderr.String())
	assert.Contains(t, stdout.String(), "valid loom inbound frame")

	stdout.Reset()
	err = dispatch(context.Background(), []string{"threads", "ls", "--data-dir", t.TempDir()}, func(string) string { return "" },
		strings.NewReader(""), &stdout, &stderr)
	require.NoError(t, err)
	assert.Empty(t, stdout.String(), "a new store has no threads")

	err = dispatch(context.Background(), []string{"chat", "--protocol", "irc"}, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want agentchat, ag2, threads, loom or agentloop")

	err = dispatch(context.Background(), []string{"frobnicate"}, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "agentwire threads")
	assert.Contains(t, err.Error(), "agentwire chat")
}
