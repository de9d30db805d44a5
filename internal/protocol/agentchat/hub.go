package agentchat

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
)

// hub fans a thread's events out to the sockets that watch it: one
// subscription per thread however many sockets share it. In broadcast mode
// every socket receives every watched thread's frames.
type hub struct {
	core protocol.Core
	all  bool
	log  *slog.Logger

	mu       sync.Mutex
	clients  map[*client]struct{}
	watchers map[string]*watcher
	closed   bool
	wg       sync.WaitGroup
}

// client is one socket.
type client struct {
	c      *wsconn.Conn
	thread string // the thread it watches; "" before its first chat
}

// watcher pumps one thread's feed.
type watcher struct {
	thread  string
	clients map[*client]struct{}
	cancel  context.CancelFunc
}

func newHub(core protocol.Core, all bool, log *slog.Logger) *hub {
	return &hub{core: core, all: all, log: log, clients: map[*client]struct{}{}, watchers: map[string]*watcher{}}
}

func (h *hub) connect(c *wsconn.Conn) *client {
	cl := &client{c: c}
	h.mu.Lock()
	h.clients[cl] = struct{}{}
	h.mu.Unlock()
	return cl
}

func (h *hub) disconnect(cl *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, cl)
	h.leaveLocked(cl)
}

// join makes cl watch thread, subscribing to it from its current end.
func (h *hub) join(ctx context.Context, cl *client, thread string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("agentchat: closed")
	}
	if cl.thread == thread {
		return nil
	}
	h.leaveLocked(cl)
	w, ok := h.watchers[thread]
	if !ok {
		last, err := h.core.LastSeq(ctx, thread)
		if err != nil {
			return err
		}
		feed, err := h.core.Subscribe(ctx, thread, last)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithCancel(context.Background())
		w = &watcher{thread: thread, clients: map[*client]struct{}{}, cancel: cancel}
		h.watchers[thread] = w
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.pump(wctx, w, feed, last)
		}()
	}
	w.clients[cl] = struct{}{}
	cl.thread = thread
	return nil
}

func (h *hub) leaveLocked(cl *client) {
	if cl.thread == "" {
		return
	}
	if w := h.watchers[cl.thread]; w != nil {
		delete(w.clients, cl)
		if len(w.clients) == 0 {
			w.cancel()
			delete(h.watchers, cl.thread)
		}
	}
	cl.thread = ""
}

// pump delivers a thread's events until the watcher is cancelled. A feed
// that ends early (the hub fell behind) is resumed after the last event
// delivered, so sockets miss nothing.
func (h *hub) pump(ctx context.Context, w *watcher, feed protocol.Feed, last int64) {
	for {
		last = h.drain(ctx, w, feed, last)
		feed.Close()
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("agentchat feed ended; resubscribing", "thread", w.thread, "err", feed.Err())
		var err error
		if feed, err = h.core.Subscribe(ctx, w.thread, last); err != nil {
			h.log.Error("agentchat resubscribe", "thread", w.thread, "err", err)
			return
		}
	}
}

func (h *hub) drain(ctx context.Context, w *watcher, feed protocol.Feed, last int64) int64 {
	for {
		select {
		case <-ctx.Done():
			return last
		case e, ok := <-feed.Events():
			if !ok {
				return last
			}
			last = e.Seq
			for _, m := range project(e) {
				b, err := agentchatapi.Encode(m)
				if err != nil {
					h.log.Error("agentchat encode", "err", err)
					continue
				}
				h.deliver(w, b)
			}
		}
	}
}

func (h *hub) deliver(w *watcher, frame []byte) {
	h.mu.Lock()
	targets := make([]*client, 0, len(w.clients))
	if h.all {
		for cl := range h.clients {
			targets = append(targets, cl)
		}
	} else {
		for cl := range w.clients {
			targets = append(targets, cl)
		}
	}
	h.mu.Unlock()
	for _, cl := range targets {
		cl.c.Send(frame)
	}
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for t, w := range h.watchers {
		w.cancel()
		delete(h.watchers, t)
	}
	h.mu.Unlock()
	h.wg.Wait()
}
