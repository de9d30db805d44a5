package main

import (
	"bytes"
	"context"
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
