package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A model that cannot be reached fails every protocol's turn with an error
// the person can act on: it names the provider, the URL tried and the
// variable to change, in each protocol's own error frame or event.
func TestModelErrorsSayWhatToChange(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String() + "/v1"
	require.NoError(t, ln.Close())
	addr := startRun(t, map[string]string{
		"OPENAI_BASE_URL":    dead,
		"AGENTWIRE_MODEL":    "llama3.1",
		"AGENTWIRE_DATA_DIR": t.TempDir(),
		"AGENTWIRE_WORKDIR":  t.TempDir(),
	})
	actionable := func(t *testing.T, what string) {
		t.Helper()
		assert.Contains(t, what, "openai", "the provider")
		assert.Contains(t, what, dead, "the URL tried")
		assert.Contains(t, what, "OPENAI_BASE_URL", "what to change")
	}
	says := func(f map[string]any) bool {
		b, _ := json.Marshal(f)
		return strings.Contains(string(b), "OPENAI_BASE_URL")
	}
	// over reads a WebSocket protocol's frames until one explains the
	// failure, and returns that frame's type and text.
	over := func(t *testing.T, url string, turn any, stop func(map[string]any) bool) (string, string) {
		s := dialJSON(t, url)
		s.send(turn)
		frames := s.until(stop)
		last := frames[len(frames)-1]
		b, _ := json.Marshal(last)
		return types(frames[len(frames)-1:])[0], string(b)
	}

	t.Run("agentchat", func(t *testing.T) {
		typ, text := over(t, "ws://"+addr+"/ws", map[string]any{"type": "chat", "message": "hello", "session_id": "model-error"}, says)
		assert.Equal(t, "error", typ)
		actionable(t, text)
	})
	t.Run("agentloop", func(t *testing.T) {
		typ, text := over(t, "ws://"+addr+"/agentloop", map[string]any{"id": "1", "type": "user_input", "payload": map[string]any{
			"input": []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "hello"}}}},
		}}, says)
		// AgentLoop shows a failed run as a system message of the thread.
		assert.Equal(t, "response_item", typ)
		assert.Contains(t, text, `"role":"system"`)
		actionable(t, text)
	})
	t.Run("ag2", func(t *testing.T) {
		typ, text := over(t, "ws://"+addr+"/ws/default/acme/model-error/alice", map[string]any{"type": "user.input.submit", "text": "hello"}, says)
		assert.Equal(t, "chat.error", typ)
		actionable(t, text)
	})
	t.Run("loom", func(t *testing.T) {
		typ, text := over(t, "ws://"+addr+"/loom", map[string]any{"type": "run", "message": "hello", "agent": "react", "id": "r1"}, typed("error"))
		assert.Equal(t, "error", typ)
		actionable(t, text)
	})
	t.Run("threads", func(t *testing.T) {
		id := uuid.NewString()
		resp, err := http.Post("http://"+addr+"/api/v1/threads/"+id, "application/json", strings.NewReader(`{"text":"hello"}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var event string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				event = name
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, "OPENAI_BASE_URL") {
				assert.Equal(t, "error", event)
				actionable(t, data)
				return
			}
		}
		t.Fatalf("the stream ended without the explanation: %v", sc.Err())
	})
}
