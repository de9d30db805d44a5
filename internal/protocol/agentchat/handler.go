// Package agentchat serves the Agent Chat WebSocket API (agentchat-ws.md)
// at /ws: a client sends `chat`, and the sockets of the session receive the
// session's events projected onto user_message, agent_message, tool_call,
// tool_result, agent_thinking and error.
//
// A session is a thread: `session_id` names it, so a conversation started
// here continues over the other protocols and across restarts. Without a
// session_id the socket gets a thread of its own for as long as it lives.
package agentchat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/wire"
)

// Options configure the adapter.
type Options struct {
	// Broadcast "all" sends every session's events to every socket, as the
	// original server did; the default "session" scopes them to the sockets
	// of the same session.
	Broadcast string
	Conn      wsconn.Options
	Logger    *slog.Logger
}

// Handler serves agentchat WebSockets.
type Handler struct {
	core protocol.Core
	reg  *wsconn.Registry
	opts Options
	hub  *hub
	log  *slog.Logger
}

// New returns a Handler; reg tracks its sockets for shutdown. Close stops
// its subscriptions.
func New(core protocol.Core, reg *wsconn.Registry, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Conn.Logger = opts.Logger
	h := &Handler{core: core, reg: reg, opts: opts, log: opts.Logger}
	h.hub = newHub(core, opts.Broadcast == "all", opts.Logger)
	return h
}

// Close ends the adapter's thread subscriptions and waits for them.
func (h *Handler) Close() { h.hub.close() }

// ServeHTTP upgrades to a WebSocket and serves it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	wsconn.Serve(w, r, h.reg, h.opts.Conn, func(ctx context.Context, c *wsconn.Conn) error {
		s := &session{h: h, cl: h.hub.connect(c), ephemeral: uuid.NewString()}
		defer h.hub.disconnect(s.cl)
		for {
			frame, err := c.Read(ctx)
			if err != nil {
				return err
			}
			s.handle(ctx, frame)
		}
	})
}

// session is one socket's state.
type session struct {
	h         *Handler
	cl        *client
	ephemeral string // the thread of a socket without session_id
}

var _ agentchatapi.Handler = (*session)(nil)

func (s *session) handle(ctx context.Context, frame []byte) {
	m, err := agentchatapi.Decode(frame)
	if err != nil {
		s.sendError(decodeError(err))
		return
	}
	if err := agentchatapi.Dispatch(ctx, s, m); err != nil {
		s.sendError(err.Error())
	}
}

// HandleChat posts the message to the session's thread, after making sure
// this socket is subscribed to it so it sees its own echo.
func (s *session) HandleChat(ctx context.Context, m agentchatapi.ChatRequest) error {
	if strings.TrimSpace(m.Message) == "" {
		return errors.New("Empty message received")
	}
	thread := s.ephemeral
	if m.SessionID != nil && *m.SessionID != "" {
		thread = *m.SessionID
	}
	if err := s.h.hub.join(ctx, s.cl, thread); err != nil {
		s.h.log.Error("agentchat subscribe", "thread", thread, "err", err)
		return errors.New("Could not open the session: internal error")
	}
	if _, err := s.h.core.Post(ctx, thread, runs.Input{Text: m.Message}); err != nil {
		if errors.Is(err, runs.ErrShuttingDown) {
			return errors.New("The server is shutting down; try again shortly")
		}
		s.h.log.Error("agentchat post", "thread", thread, "err", err)
		return errors.New("Could not start the agent: internal error")
	}
	return nil
}

func (s *session) sendError(text string) {
	if b, err := agentchatapi.Encode(agentchatapi.NewErrorEvent(text)); err == nil {
		s.cl.c.Send(b)
	}
}

// decodeError words a decode failure the way the document names them.
func decodeError(err error) string {
	we, ok := wire.AsError(err)
	if !ok {
		return "Invalid message: " + err.Error()
	}
	if we.Path == "/type" && strings.HasPrefix(we.Reason, "unknown message type") {
		var t string
		_ = json.Unmarshal([]byte(strings.TrimPrefix(we.Reason, "unknown message type ")), &t)
		return "Unknown message type: " + t
	}
	return fmt.Sprintf("Invalid message: %s", we.Error())
}
