package ag2_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
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

// TestSocketsShareEncodings: the sockets of one chat are sent the same
// bytes for each live frame of the chat's stream (the streamed chat.print
// deltas included), encoded once for all of them; a socket's own message
// is not echoed to it, and a resume's replay is each socket's own.
func TestSocketsShareEncodings(t *testing.T) {
	h, enc := startCounting(t)
	const sockets = 4
	cs := []*client{h.dial("")}
	for len(cs) < sockets {
		cs = append(cs, h.dial(cs[0].chat))
	}
	for _, c := range cs {
		// The resume's boundary says the socket follows the chat and
		// sends its live frames as they come.
		c.resume(0)
		c.until(ag2api.TypeChatResumeBoundary)
	}
	cs[0].say("tell me a long story")
	raw := func(frames []got) []string {
		out := make([]string, len(frames))
		for i, g := range frames {
			out[i] = string(g.raw)
		}
		return out
	}
	mine := raw(cs[0].turn())
	require.Greater(t, len(ofTypeRaw(mine, ag2api.TypeChatPrint)), 10, "the story is streamed")
	for _, b := range mine {
		assert.Equal(t, 1, enc.count([]byte(b)), "encoded once for every socket: %s", b)
	}
	for _, c := range cs[1:] {
		got := c.turn()
		require.Equal(t, ag2api.TypeChatText, got[0].typ, "another socket's message first")
		assert.Equal(t, "tell me a long story", got[0].str("content"))
		assert.Equal(t, mine, raw(got[1:]), "the same bytes on every socket")
		assert.Equal(t, 1, enc.count(got[0].raw))
	}

	// A resume replays the chat to one socket: its frames are its own.
	cs[1].resume(0)
	replayed := cs[1].until(ag2api.TypeChatResumeBoundary)
	require.NotEmpty(t, replayed)
	for _, g := range replayed {
		assert.True(t, g.typ == ag2api.TypeChatResumeBoundary || g.replay, "%s", g.raw)
	}
}

func ofTypeRaw(frames []string, typ string) []string {
	var out []string
	for _, b := range frames {
		if g, err := ag2api.DecodeOutbound([]byte(b)); err == nil && g.MessageType() == typ {
			out = append(out, b)
		}
	}
	return out
}
