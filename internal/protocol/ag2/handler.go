// Package ag2 serves the AG2-aligned chat.* WebSocket protocol
// (ag2-chat-ws.md) that ChatUI-style frontends speak, at
// /ws/{workflow}/{enterprise_id}/{chat_id}/{user_id}.
//
// The chat_id is the thread id, so a chat can be watched and continued
// over every other protocol; it belongs to the enterprise and user that
// opened it first. Every frame of the chat's stream carries the seq of the
// canonical event it projects, so seq is the thread's log order and stays
// the same across reconnects; client.resume replays frames, marked
// replay:true, then chat.resume_boundary, then goes on live. A socket's
// first client.resume, before any live frame reached it, replays the
// chat's transcript from its start, since ChatUI sends the seq it stored
// although its screen starts empty after a reload; --ag2-resume=after-seq
// (and every later resume) replays only the frames after the seq.
// Runs are interactive: input requests, tool approvals and UI tools wait
// for an answer from any socket of the chat (or another protocol), until
// --input-timeout.
package ag2

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/time/rate"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/identity"
	"github.com/agentwire/agentwire/internal/logs"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/drain"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
	"github.com/agentwire/agentwire/internal/workflow"
)

// maxPathPart bounds the enterprise and user ids of the path.
const maxPathPart = 128

// readPage is how many events a replay reads at a time.
const readPage = 1000

// maxUserLimiters bounds the per-user rate limiters kept; past it they
// start over.
const maxUserLimiters = 10000

// Handler serves AG2 WebSockets.
type Handler struct {
	core      protocol.Core
	conns     *wsconn.Registry
	conn      wsconn.Options
	log       *slog.Logger
	verify    func(frame []byte) // nil unless the server checks its frames (tests)
	prices    *prices
	model     string
	legacy    bool
	rate      rate.Limit
	burst     int
	workflows func(name string) error
	names     func() []string // the workflows on offer, for WORKFLOW_NOT_FOUND; nil without a catalog
	rest      *restState      // ChatUI's REST calls and the sockets they reach (rest.go)
	afterSeq  bool            // --ag2-resume=after-seq: a first resume replays only what follows its seq

	waitingForHistory func() // nil unless a test watches a client's message wait for the history's projection

	streams drain.Group // one per socket's follow goroutine
	// frames is what the sockets of each chat share: the live frames
	// that are the same on all of them, encoded once.
	frames *protocol.SharedFrames[frameKey, encoded]

	mu    sync.Mutex
	users map[string]*rate.Limiter // by enterprise and user
}

// errNoWorkflow is the lookup's answer for a workflow that does not exist.
var errNoWorkflow = errors.New("workflow not found")

// New returns a Handler. Shutdown ends its sockets' follows.
func New(env protocol.Env) (*Handler, error) {
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, err := loadPrices(env.AG2.Prices)
	if err != nil {
		return nil, err
	}
	conn := env.ConnOptions(Name, log)
	r := rate.Limit(env.AG2.Rate)
	if env.AG2.Rate <= 0 {
		r = rate.Inf
	}
	h := &Handler{core: env.Core, conns: env.Conns, conn: conn, log: log,
		verify: env.Verifier(Name, ag2api.ValidateOutbound), prices: p, model: env.Model,
		legacy: env.AG2.LegacyTypes, afterSeq: env.AG2.ResumeAfterSeq, rate: r, burst: max(env.AG2.Burst, 1),
		workflows: lookupIn(env.Workflows), users: map[string]*rate.Limiter{},
		frames: newSharedFrames()}
	if env.Workflows != nil {
		h.names = env.Workflows.Names
	}
	h.rest = newRESTState(env)
	return h, nil
}

// newSharedFrames is what the sockets of each chat share (frameKey).
func newSharedFrames() *protocol.SharedFrames[frameKey, encoded] {
	return protocol.NewSharedFrames[frameKey](func(w encoded) int { return len(w.b) + len(w.old) })
}

// lookupIn is the workflow check of a catalog: nil for a workflow that
// exists and loads, errNoWorkflow for one that does not exist, the load
// error for one that does not load. Without a catalog only the built-in
// "default" exists.
func lookupIn(c *workflow.Catalog) func(name string) error {
	return func(name string) error {
		if c == nil {
			if name == "default" {
				return nil
			}
			return errNoWorkflow
		}
		_, err := c.Lookup(name)
		if errors.Is(err, workflow.ErrNotFound) {
			return errNoWorkflow
		}
		return err
	}
}

// ServeHTTP checks the path, upgrades to a WebSocket and serves it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	workflow, ent, user := r.PathValue("workflow"), r.PathValue("enterprise_id"), r.PathValue("user_id")
	chat, err := protocol.CanonicalThread(r.PathValue("chat_id"))
	if err != nil {
		http.Error(w, "Bad chat_id: "+protocol.AsError(err).Message, http.StatusBadRequest)
		return
	}
	for name, v := range map[string]string{"workflow": workflow, "enterprise_id": ent, "user_id": user} {
		if len(v) > maxPathPart || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			http.Error(w, fmt.Sprintf("Bad %s: at most %d characters, no control characters", name, maxPathPart), http.StatusBadRequest)
			return
		}
	}
	s := &session{h: h, chat: chat, workflow: workflow, ent: ent, user: user,
		limiter: rate.NewLimiter(h.rate, h.burst), resume: make(chan int64), started: make(chan struct{}), history: make(chan struct{})}
	s.proj = newProjector(chat, h.prices, h.model).inWorkflow(workflow)
	// What the chat has when the upgrade is answered is its history; what
	// comes after is live. The socket follows the chat only once it is
	// open and checked, and a client that opens its socket and then posts
	// a turn over REST (ChatUI) must get all of that turn live however
	// long that takes.
	if seq, err := h.core.LastSeq(r.Context(), chat); err == nil {
		s.opened = seq
	} else {
		s.opened = -1 // unknown: the follow's own start is the history's end
	}
	// The REST calls find the chat's pending requests and its sockets'
	// projectors through the open sockets (rest.go): tracked from before
	// the upgrade is answered, so that a call the client makes the moment
	// its socket opens already finds it, until the socket ends.
	untrack := h.rest.track(s)
	if !wsconn.Start(w, r, h.conns, h.conn, func(ctx context.Context, c *wsconn.Conn) error {
		defer untrack()
		s.c, s.log = c, logs.For(ctx, h.log)
		return s.serve(ctx)
	}) {
		untrack()
	}
}

// userLimiter is the rate limiter of a user of an enterprise, as the
// principal acts for them.
func (h *Handler) userLimiter(principal, ent, user string) *rate.Limiter {
	key := url.PathEscape(principal) + "/" + url.PathEscape(ent) + "/" + url.PathEscape(user)
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.users[key]
	if l == nil {
		if len(h.users) >= maxUserLimiters {
			clear(h.users)
		}
		l = rate.NewLimiter(h.rate, h.burst)
		h.users[key] = l
	}
	return l
}

// A chat belongs to the enterprise and user whose socket first wrote to
// it (a turn, an artifact patch). The scope is kept as the owner of a
// companion thread that only the principal acting for that enterprise and
// user can own, through the core like every other access, so it is
// durable and shared by every node. Opening a socket only checks it, so
// that a socket that sends nothing claims nothing.

// scope returns ctx as the principal acting for ent and user, and the
// chat's companion thread.
func scope(ctx context.Context, chat, ent, user string) (context.Context, string) {
	p := identity.FromContext(ctx)
	scoped := identity.NewContext(ctx, identity.Principal{ID: p.ID + "/ag2/" + url.PathEscape(ent) + "/" + url.PathEscape(user)})
	sum := sha256.Sum256([]byte(chat))
	return scoped, "ag2-scope:" + hex.EncodeToString(sum[:20])
}

// checkScope refuses the chat (CodeNotFound) when another enterprise or
// user has it.
func (h *Handler) checkScope(ctx context.Context, chat, ent, user string) error {
	scoped, t := scope(ctx, chat, ent, user)
	_, err := h.core.LastSeq(scoped, t)
	return err
}

// claimScope makes the chat the enterprise's and user's if it is nobody's
// yet, and refuses it (CodeNotFound) when it is another's.
func (h *Handler) claimScope(ctx context.Context, chat, ent, user string) error {
	scoped, t := scope(ctx, chat, ent, user)
	return h.core.Own(scoped, t)
}
