package threads_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/server"
)

// A POST retried with its Idempotency-Key sends nothing again: it streams
// the first POST's run from its start, and the thread has one message.
func TestIdempotencyKey(t *testing.T) {
	h := start(t, testConfig(t), server.Options{})
	thread := uuid.New()
	post := func(key, text string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.base+"/api/v1/threads/"+thread.String(), strings.NewReader(`{"text":"`+text+`"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	first := post("k-1", "echo once")
	require.Contains(t, first, "event: done")
	again := post("k-1", "echo once")
	assert.Equal(t, first, again, "the retry streams the same run, the same events")

	users := 0
	for _, m := range h.history(thread) {
		if m.MessageType == threadsapi.MessageMessageTypeUser {
			users++
		}
	}
	assert.Equal(t, 1, users, "one message, however many retries")

	assert.Contains(t, post("k-2", "echo twice"), "event: done")
	assert.Contains(t, post("", "echo twice"), "event: done")
	users = 0
	for _, m := range h.history(thread) {
		if m.MessageType == threadsapi.MessageMessageTypeUser {
			users++
		}
	}
	assert.Equal(t, 3, users, "a new key, or none, is a new message")
}
