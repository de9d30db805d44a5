package agentchat

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/identity"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/drain"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
)

// errClosed refuses joins once the adapter is shutting down.
var errClosed = &protocol.Error{Code: protocol.CodeUnavailable, Message: "the server is shutting down"}

// hub fans a thread's events out to the sockets that watch it: one
// follower per thread and principal however many sockets share it, and
// each frame encoded once for all of them. A follower subscribes as its
// principal, so the Core's access check decides for every socket, and no
// socket shares another principal's follower. In broadcast mode every
// socket receives every thread its principal watches.
type hub struct {
	core   protocol.Core
	all    bool
	log    *slog.Logger
	verify func([]byte)

	mu       sync.Mutex
	clients  map[*client]struct{}
	nchunks  atomic.Int64 // sockets in chunks mode; while none, a delta costs no lookup
	watchers map[watchKey]*watcher
	watches  drain.Group // one per watcher, until its watch has ended
}

// client is one socket.
type client struct {
	c         *wsconn.Conn
	principal string // who the socket authenticated as
	chunks    bool   // it streams text chunks (StreamChunks), set at connect
	thread    string // the thread it watches; "" before its first chat
}

// watchKey names a watcher: a thread as one principal follows it.
type watchKey struct{ principal, thread string }

// watcher follows one thread for the sockets of one principal that watch
// it.
type watcher struct {
	key     watchKey
	thread  string
	clients map[*client]struct{}
	cancel  context.CancelFunc
	ready   chan struct{} // closed once the follow has begun, or failed to
	err     error         // why it failed; set before ready is closed
	texts   *texts        // the messages in progress; only the watch's goroutine uses it
	// deltas keeps text that chunks sockets were sent ahead of its commit
	// (previews) from being counted again when the commit arrives; only
	// the watch's goroutine uses it.
	deltas protocol.Deltas
}

func newHub(core protocol.Core, all bool, log *slog.Logger, verify func([]byte)) *hub {
	return &hub{core: core, all: all, log: log, verify: verify, clients: map[*client]struct{}{}, watchers: map[watchKey]*watcher{}}
}

func (h *hub) connect(ctx context.Context, c *wsconn.Conn, chunks bool) *client {
	cl := &client{c: c, principal: identity.FromContext(ctx).ID, chunks: chunks}
	h.mu.Lock()
	h.clients[cl] = struct{}{}
	if chunks {
		h.nchunks.Add(1)
	}
	h.mu.Unlock()
	return cl
}

func (h *hub) disconnect(cl *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, cl)
	if cl.chunks {
		h.nchunks.Add(-1)
	}
	h.leaveLocked(cl)
}

// join makes cl watch thread from its current end, and returns once the
// thread's follower is subscribed, so that everything posted afterwards
// reaches cl. The subscription is made by the watcher's goroutine, not
// under the hub's lock: joins of other threads do not wait for it.
func (h *hub) join(ctx context.Context, cl *client, thread string) error {
	h.mu.Lock()
	if h.watches.Stopping().Err() != nil {
		h.mu.Unlock()
		return errClosed
	}
	if cl.thread != thread {
		h.leaveLocked(cl)
		key := watchKey{cl.principal, thread}
		w := h.watchers[key]
		if w == nil {
			// The follow lives as long as the watcher, as the principal
			// of the socket that started it.
			if !h.watches.Enter() {
				h.mu.Unlock()
				return errClosed
			}
			wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			w = &watcher{key: key, thread: thread, clients: map[*client]struct{}{}, cancel: cancel, ready: make(chan struct{}), texts: newTexts()}
			h.watchers[key] = w
			go h.follow(wctx, w)
		}
		w.clients[cl] = struct{}{}
		cl.thread = thread
	}
	w := h.watchers[watchKey{cl.principal, thread}]
	h.mu.Unlock()
	select {
	case <-w.ready:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *hub) leaveLocked(cl *client) {
	if cl.thread == "" {
		return
	}
	key := watchKey{cl.principal, cl.thread}
	if w := h.watchers[key]; w != nil {
		delete(w.clients, cl)
		if len(w.clients) == 0 {
			w.cancel()
			delete(h.watchers, key)
		}
	}
	cl.thread = ""
}

// follow subscribes w to its thread and returns: the watch then delivers
// the thread's events to w's sockets on the subscription's own goroutine
// (protocol.WatchThread), until the watcher is cancelled, so an idle
// session costs no goroutine here. A watch that fails drops the watcher,
// so that its sockets' next chat subscribes again, and tells them.
func (h *hub) follow(ctx context.Context, w *watcher) {
	watch, err := protocol.WatchThread(bus.WantPreviews(ctx), h.core, w.thread, protocol.FromEnd,
		func(e event.Event) error {
			h.event(ctx, w, e)
			return nil
		},
		func(err error) {
			defer h.watches.Leave()
			h.ended(w, err)
		})
	if err != nil {
		w.err = err
		close(w.ready)
		h.drop(w)
		h.watches.Leave()
		return
	}
	context.AfterFunc(ctx, watch.Stop) // cancelling the watcher stops it
	close(w.ready)
}

// ended is called once w's watch has ended: by the watcher's cancelling,
// or on its own (err not nil), which drops the watcher and tells its
// sockets.
func (h *hub) ended(w *watcher, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	if protocol.AsError(err).Code == protocol.CodeNotFound {
		// The session was nobody's when it was joined, and another
		// principal's first event made it theirs: nothing of it is sent.
		if b := h.encode(w, agentchatapi.NewErrorEvent("Session not found")); b != nil {
			h.send(h.targets(w), b)
		}
		h.drop(w)
		return
	}
	h.log.Error("agentchat: following the session failed", "thread", w.thread, "err", err)
	if b := h.encode(w, agentchatapi.NewErrorEvent("The session's events stopped: internal error. Send a message to continue.")); b != nil {
		h.send(h.targets(w), b)
	}
	h.drop(w)
}

// event delivers one event of w's thread to the sockets that should see
// it, each in its own shape: the agent's text as whole messages, or as
// chunks (see texts).
func (h *hub) event(ctx context.Context, w *watcher, e event.Event) {
	if e.Preview != 0 {
		// Text ahead of its commit is for chunks sockets, and only of a
		// message followed from its start; the commit brings the rest.
		// The start of a message may come ahead too.
		switch p := e.Payload.(type) {
		case event.MessageStarted:
		case event.MessageDelta:
			if h.nchunks.Load() == 0 || !w.texts.known(p.MessageID) {
				return
			}
		default:
			return
		}
	}
	e, show, _ := w.deltas.Show(e)
	if !show {
		return
	}
	switch p := e.Payload.(type) {
	case event.MessageStarted:
		w.texts.start(e.Run, p.MessageID)
		return
	case event.MessageDelta:
		m := w.texts.delta(e.Run, e.Seq, p)
		if h.nchunks.Load() > 0 {
			h.chunk(ctx, w, m, p.MessageID, h.targets(w))
		}
		return
	case event.MessageCompleted:
		h.complete(w, w.texts.take(p.MessageID), e, p, h.targets(w))
		return
	case event.RunCompleted, event.RunFailed, event.RunCancelled:
		w.texts.endRun(e.Run)
	}
	frames := (projector{}).Project(e)
	if len(frames) == 0 {
		return
	}
	targets := h.targets(w)
	for _, m := range frames {
		if b := h.encode(w, m); b != nil {
			h.send(targets, b)
		}
	}
}

// chunk sends the chunks sockets among targets what they lack of message
// m, which has just grown.
func (h *hub) chunk(ctx context.Context, w *watcher, m *openText, id string, targets []*client) {
	targets = slices.DeleteFunc(targets, func(cl *client) bool { return !cl.chunks })
	if len(targets) == 0 {
		return
	}
	if err := m.resolve(ctx, h.core, w.thread, id); err != nil && ctx.Err() == nil {
		h.log.Warn("agentchat: could not read the start of a message in progress; chunks sockets get it from here on",
			"thread", w.thread, "message", id, "err", err)
	}
	// Sockets that were sent as much share one frame.
	frames := map[int][]byte{}
	for _, cl := range targets {
		from := m.sent[cl]
		text := m.unsent(cl)
		if text == "" {
			continue
		}
		b, ok := frames[from]
		if !ok {
			b = h.encode(w, agentchatapi.NewAgentMessageEvent(text))
			frames[from] = b
		}
		if b != nil {
			cl.c.Send(b)
		}
	}
}

// complete delivers a finished message: whole to the message sockets, and
// to each chunks socket the part it has not had (nothing, when it had
// every chunk). A blank message shows as nothing, in either shape.
func (h *hub) complete(w *watcher, m *openText, e event.Event, p event.MessageCompleted, targets []*client) {
	var whole []byte // the message sockets' frame, encoded once
	frames := map[string][]byte{}
	for _, cl := range targets {
		if !cl.chunks {
			if whole == nil {
				for _, f := range (projector{}).Project(e) {
					whole = h.encode(w, f)
				}
			}
			if whole != nil {
				cl.c.Send(whole)
			}
			continue
		}
		text, ok := m.rest(cl, p.Text)
		if !ok {
			h.log.Warn("agentchat: a message's text differs from its chunks; a chunks socket gets no more of it",
				"thread", w.thread, "message", p.MessageID)
			continue
		}
		if text == "" {
			continue
		}
		b, seen := frames[text]
		if !seen {
			b = h.encode(w, agentchatapi.NewAgentMessageEvent(text))
			frames[text] = b
		}
		if b != nil {
			cl.c.Send(b)
		}
	}
}

// encode encodes a frame for w's sockets and has it verified; nil when it
// cannot be encoded.
func (h *hub) encode(w *watcher, m agentchatapi.Outbound) []byte {
	b, err := agentchatapi.Encode(m)
	if err != nil {
		h.log.Error("agentchat: encode", "thread", w.thread, "type", m.MessageType(), "err", err)
		return nil
	}
	if h.verify != nil {
		h.verify(b)
	}
	return b
}

// drop forgets a watcher whose follow ended on its own.
func (h *hub) drop(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watchers[w.key] == w {
		delete(h.watchers, w.key)
	}
	for cl := range w.clients {
		if cl.thread == w.thread {
			cl.thread = ""
		}
	}
	w.cancel()
}

// targets returns the sockets that should see w's events now.
func (h *hub) targets(w *watcher) []*client {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := w.clients
	if h.all {
		set = h.clients
	}
	targets := make([]*client, 0, len(set))
	for cl := range set {
		if cl.principal == w.key.principal {
			targets = append(targets, cl)
		}
	}
	return targets
}

// send queues one encoded (and verified) frame on every target.
func (h *hub) send(targets []*client, frame []byte) {
	for _, cl := range targets {
		cl.c.Send(frame)
	}
}

// close ends every watch, and waits for them until ctx is done.
func (h *hub) close(ctx context.Context) error {
	return h.watches.Shutdown(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for t, w := range h.watchers {
			w.cancel()
			delete(h.watchers, t)
		}
	})
}
