package agentloop_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/server"
	"github.com/agentwire/agentwire/internal/server/servertest"
)

// encodings counts the frames the server encodes, by their bytes: the
// server's Verify hook is given each frame once, when it is encoded.
type encodings struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *encodings) count(b []byte) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[string(b)]
}

// startCounting is start with the frames' encodings counted.
func startCounting(t *testing.T) (*harness, *encodings) {
	t.Helper()
	enc := &encodings{n: map[string]int{}}
	cfg := testConfig(t)
	srv := servertest.Start(t, cfg, servertest.Options{Server: server.Options{Verify: func(proto string, frame []byte, err error) {
		if err != nil {
			t.Errorf("the %s adapter sent what its document does not allow: %v\n%s", proto, err, frame)
		}
		enc.mu.Lock()
		enc.n[string(frame)]++
		enc.mu.Unlock()
	}}})
	return &harness{t: t, cfg: cfg, srv: srv}, enc
}

// readTurn reads a socket's frames as sent, through agent_finished, and
// the context_info after it.
func (c *client) readTurn() (frames [][]byte, info []byte) {
	c.t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
		_, b, err := c.ws.Read(ctx)
		cancel()
		require.NoError(c.t, err)
		var f struct {
			Type string `json:"type"`
		}
		require.NoError(c.t, json.Unmarshal(b, &f))
		if f.Type == "context_info" {
			require.NotEmpty(c.t, frames)
			return frames, b
		}
		frames = append(frames, b)
	}
}

// TestSocketsShareEncodings: the sockets of one thread are sent the same
// bytes for each frame that depends on its event alone, encoded once for
// all of them; what is a socket's own (the context_info after a turn, its
// own message left out) is its own.
func TestSocketsShareEncodings(t *testing.T) {
	h, enc := startCounting(t)
	const sockets = 4
	a := h.dial("")
	others := make([]*client, sockets-1)
	for i := range others {
		others[i] = h.dial(a.thread) // joined once its first frame is read
	}
	a.say("echo shared bytes")
	mine, infoA := a.readTurn()
	require.Len(t, mine, 4, "loading_state, the answer, loading_state, agent_finished")
	for _, c := range others {
		got, info := c.readTurn()
		require.Len(t, got, 5, "a's message first")
		assert.Contains(t, string(got[0]), "echo shared bytes")
		for i, b := range mine {
			assert.Equal(t, string(b), string(got[i+1]), "frame %d is the same bytes on every socket", i+1)
		}
		for _, b := range got {
			assert.Equal(t, 1, enc.count(b), "encoded once for every socket: %s", b)
		}
		assert.NotEqual(t, string(infoA), string(info), "a context_info is each socket's own frame, with an id of its own")
	}
	for _, b := range mine {
		assert.Equal(t, 1, enc.count(b), "%s", b)
	}

	// A socket that joins later is sent the same frames, ids included,
	// for the thread's history.
	late := dialURL(t, h.url(a.thread))
	var replayed [][]byte
	for len(replayed) < 1+len(mine)+1 { // context_info first
		ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
		typ, b, err := late.ws.Read(ctx)
		cancel()
		require.NoError(t, err)
		require.Equal(t, websocket.MessageText, typ)
		replayed = append(replayed, b)
	}
	for i, b := range mine {
		assert.Equal(t, string(b), string(replayed[i+2]))
	}
}
