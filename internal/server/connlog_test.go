package server

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/logs"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The lines a connection's session logs carry the connection's id, the
// one its upgrade's X-Request-Id header gave the client; a run's lines
// carry its thread and run.
func TestConnectionLinesCarryItsID(t *testing.T) {
	var out syncBuffer
	log, err := logs.New(&out, "json", logs.ParseLevel("debug"))
	require.NoError(t, err)
	s, err := New(context.Background(), testConfig(t), log, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	defer func() { require.NoError(t, s.Shutdown(context.Background())) }()

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws://"+s.Addr("main")+"/loom", nil)
	require.NoError(t, err)
	defer ws.CloseNow()
	conn := resp.Header.Get("X-Request-Id")
	require.NotEmpty(t, conn)
	run, _ := json.Marshal(map[string]any{"type": "run", "message": "echo logged", "agent": "react", "verbose": true})
	require.NoError(t, ws.Write(ctx, websocket.MessageText, run))
	for {
		_, b, err := ws.Read(ctx)
		require.NoError(t, err)
		if strings.Contains(string(b), `"run_end"`) {
			break
		}
	}
	var posted, ran int
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		msg, _ := m["msg"].(string)
		if strings.HasPrefix(msg, "loom: ") {
			posted++
			assert.Equal(t, conn, m["conn"], "a line of the connection: %s", l)
		}
		if m["run"] != nil && m["thread"] != nil {
			ran++
		}
	}
	assert.Positive(t, posted, "the session logged (verbose run): %s", out.String())
	assert.Positive(t, ran, "the run's lines carry thread and run")
}
