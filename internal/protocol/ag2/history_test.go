package ag2_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/ag2"
	"github.com/agentwire/agentwire/internal/server"
	"github.com/agentwire/agentwire/internal/server/servertest"
	"github.com/agentwire/agentwire/internal/store"
)

// cutStore is the server's store with a cut in one chat's log, once armed:
// the next read of the chat that reaches an approval request returns the
// events up to it, and the read after that waits until the cut is
// released. A socket that opens meanwhile has projected the request but
// not its answer.
type cutStore struct {
	store.Store

	mu      sync.Mutex
	chat    string        // armed for this chat; "" when not armed
	at      int64         // the request's seq, once a read was cut there
	blocked chan struct{} // closed when the read after the cut waits
	release chan struct{} // closed to let it through
}

func (s *cutStore) arm(chat string) (blocked <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chat, s.blocked, s.release = chat, make(chan struct{}), make(chan struct{})
	return s.blocked, sync.OnceFunc(func() { close(s.release) })
}

func (s *cutStore) Read(ctx context.Context, thread string, after int64, limit int) ([]event.Event, error) {
	s.mu.Lock()
	chat, at, blocked, release := s.chat, s.at, s.blocked, s.release
	s.mu.Unlock()
	if chat != thread {
		return s.Store.Read(ctx, thread, after, limit)
	}
	if at != 0 && after >= at {
		s.mu.Lock()
		s.chat, s.at = "", 0
		s.mu.Unlock()
		close(blocked)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return s.Store.Read(ctx, thread, after, limit)
	}
	evs, err := s.Store.Read(ctx, thread, after, limit)
	if i := slices.IndexFunc(evs, func(e event.Event) bool { _, ok := e.Payload.(event.ToolApprovalRequested); return ok }); err == nil && i >= 0 {
		evs = evs[:i+1]
		s.mu.Lock()
		s.at = evs[i].Seq
		s.mu.Unlock()
	}
	return evs, err
}

// historyCut is a server whose ag2 adapter reports every message that
// waits for its socket's history (waiting), and a chat whose turn asked
// an approval that was answered, with a new socket b open on it that has
// projected the request but not its answer, until release.
func historyCut(t *testing.T) (h *harness, b *client, waiting <-chan struct{}, release func()) {
	t.Helper()
	cut := &cutStore{}
	waits := make(chan struct{}, 16)
	registry := slices.Clone(server.Protocols())
	for i, r := range registry {
		if r.Name == ag2.Name {
			registry[i].New = func(env protocol.Env) (protocol.Adapter, error) {
				h, err := ag2.New(env)
				if err == nil {
					ag2.WatchHistoryWaits(h, func() { waits <- struct{}{} })
				}
				return h, err
			}
		}
	}
	cfg := testConfig(t)
	h = &harness{t: t, cfg: cfg, srv: servertest.Start(t, cfg, servertest.Options{Server: server.Options{
		Protocols: registry,
		Store:     func(s store.Store) store.Store { cut.Store = s; return cut },
	}})}

	a := h.dial("")
	a.say("make a file")
	frames := a.until(ag2api.TypeChatInputRequest)
	a.answer(frames[len(frames)-1].msg.(ag2api.InputRequest).Data.RequestID, "approve")
	a.turn()
	a.close()

	blocked, release := cut.arm(a.chat)
	t.Cleanup(release)
	b = h.dial(a.chat)
	select {
	case <-blocked:
	case <-time.After(frameTimeout):
		t.Fatal("the new socket did not read the chat's history")
	}
	return h, b, waits, release
}

// echoed checks that b's next turn is the reply to "echo four", with no
// chat.error.
func echoed(t *testing.T, b *client) {
	t.Helper()
	frames := b.turn()
	assert.Empty(t, ofType(frames, ag2api.TypeChatError), "the text was taken for an answer: %v", types(frames))
	texts := ofType(frames, ag2api.TypeChatText)
	require.NotEmpty(t, texts, "no reply: %v", types(frames))
	assert.Equal(t, "You said: echo four", texts[len(texts)-1].msg.(ag2api.Text).Data.Content)
}

// TestTextWaitsForTheHistory: a socket opened on a chat whose last turn
// asked an approval and had it answered, whose client sends text at once,
// while the socket is still projecting the chat's history (it has the
// request, not yet the answer). The text is a new turn, not an answer to
// the approval: the message waits until the history is projected.
func TestTextWaitsForTheHistory(t *testing.T) {
	_, b, waiting, release := historyCut(t)
	b.say("echo four")
	select {
	case <-waiting:
	case <-time.After(frameTimeout):
		release()
		t.Fatalf("the text did not wait for the history; the socket sent %s", b.next().raw)
	}
	release()
	echoed(t, b)
}

// TestRESTInputBesideASocketCatchingUp: ChatUI's /input, text with no
// request id, while the chat's only socket here is still projecting its
// history: the call does not take that socket's half-built view of what
// is pending (it reads the chat itself), so the text is a new turn.
func TestRESTInputBesideASocketCatchingUp(t *testing.T) {
	h, b, _, release := historyCut(t)
	a := h.input(b.chat, `{"message":"echo four"}`)
	assert.Equal(t, "turn", a.Kind, "the text was taken for an answer")
	release()
	echoed(t, b)
}

// slowOpenStore is the server's store with a gate, once armed, on the
// next check of a chat's scope: the check a socket makes after its
// upgrade is answered and before it follows the chat.
type slowOpenStore struct {
	store.Store

	mu      sync.Mutex
	armed   bool
	blocked chan struct{} // closed when a check waits at the gate
	release chan struct{} // closed to let it through
}

func (s *slowOpenStore) arm() (blocked <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.blocked, s.release = true, make(chan struct{}), make(chan struct{})
	return s.blocked, sync.OnceFunc(func() { close(s.release) })
}

func (s *slowOpenStore) LastSeq(ctx context.Context, thread string) (int64, error) {
	s.mu.Lock()
	gate := s.armed && strings.HasPrefix(thread, "ag2-scope:")
	if gate {
		s.armed = false
	}
	blocked, release := s.blocked, s.release
	s.mu.Unlock()
	if gate {
		close(blocked)
		select {
		case <-release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return s.Store.LastSeq(ctx, thread)
}

// TestRESTTurnWhileTheSocketOpens: ChatUI opens its socket and then posts
// the turn over REST. The socket is slow to start following the chat
// (its scope check waits), and the whole turn is done before it does: it
// still gets the turn live, since the turn came after its upgrade.
func TestRESTTurnWhileTheSocketOpens(t *testing.T) {
	slow := &slowOpenStore{}
	cfg := testConfig(t)
	h := &harness{t: t, cfg: cfg, srv: servertest.Start(t, cfg, servertest.Options{Server: server.Options{
		Store: func(s store.Store) store.Store { slow.Store = s; return slow },
	}})}
	chat := h.startChat("default", "").ChatID
	watcher := h.dialAs(chat, "e1", "u1") // sees the turn end
	// The watcher's own scope check must be behind it before the gate is
	// armed, or the gate holds the watcher instead: a socket reads no
	// message before its check, so an answered resume shows it is past.
	watcher.resume(0)
	watcher.until(ag2api.TypeChatResumeBoundary)

	blocked, release := slow.arm()
	defer release()
	c := h.dialAs(chat, "e1", "u1")
	select {
	case <-blocked:
	case <-time.After(frameTimeout):
		t.Fatal("the socket did not check the chat's scope")
	}
	assert.Equal(t, "turn", h.input(chat, `{"message":"echo hello there"}`).Kind)
	watcher.turn()
	release()

	frames := c.turn()
	checkSeqs(t, frames)
	texts := ofType(frames, ag2api.TypeChatText)
	require.Len(t, texts, 1, "the turn's reply: %v", types(frames))
	assert.Equal(t, "You said: echo hello there", texts[0].str("content"))
	for _, f := range frames {
		assert.False(t, f.replay, "a live frame is marked as replayed: %s", f.raw)
	}
}
