// Package agentchat serves the Agent Chat WebSocket API (agentchat-ws.md)
// at /ws: a client sends `chat`, and the sockets of the session receive the
// session's events projected onto user_message, agent_message, tool_call,
// tool_result, agent_thinking and error.
//
// The agent's text reaches a socket as one agent_message per finished
// message (the document's shape, and the default), or, when the socket or
// the server asks for chunks, as one agent_message per model text chunk as
// it streams, with nothing repeated at the end (see texts).
//
// A session is a thread: `session_id` names it, so a conversation started
// here continues over the other protocols and across restarts. Without a
// session_id the socket gets a thread of its own for as long as it lives.
package agentchat

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/logs"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/wire"
)

// Handler serves agentchat WebSockets.
type Handler struct {
	core   protocol.Core
	conns  *wsconn.Registry
	conn   wsconn.Options
	hub    *hub
	log    *slog.Logger
	verify func(frame []byte) // nil unless the server checks its frames (tests)
	stream string             // --agentchat-stream: a socket's mode unless it asks
}

// New returns a Handler. Shutdown stops its subscriptions.
func New(env protocol.Env) *Handler {
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn := env.ConnOptions(Name, log)
	h := &Handler{core: env.Core, conns: env.Conns, conn: conn, log: log,
		verify: env.Verifier(Name, agentchatapi.ValidateOutbound), stream: orMessage(env.Agentchat.Stream)}
	h.hub = newHub(env.Core, env.Agentchat.Broadcast, log, h.verify)
	return h
}

// ServeHTTP upgrades to a WebSocket and serves it. ?stream=message or
// ?stream=chunks chooses how the socket gets the agent's text, instead of
// the server's --agentchat-stream; any other value is refused with 400.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	chunks, err := streamParam(r.URL.Query(), h.stream)
	if err != nil {
		http.Error(w, "Bad stream: "+err.Error(), http.StatusBadRequest)
		return
	}
	wsconn.Start(w, r, h.conns, h.conn, func(ctx context.Context, c *wsconn.Conn) error {
		s := &session{h: h, log: logs.For(ctx, h.log), cl: h.hub.connect(ctx, c, chunks), ephemeral: uuid.NewString()}
		defer h.hub.disconnect(s.cl)
		// No follow of its own: the hub's watches send the sessions' frames.
		return protocol.Session{Handle: s.handle}.Serve(ctx, c, nil)
	})
}

// session is one socket's state.
type session struct {
	h         *Handler
	log       logs.Lazy // the handler's, with the connection's id
	cl        *client
	ephemeral string // the thread of a socket without session_id
}

var _ agentchatapi.Handler = (*session)(nil)

func (s *session) handle(ctx context.Context, frame []byte) {
	m, err := agentchatapi.Decode(frame)
	if err == nil {
		err = agentchatapi.Dispatch(ctx, s, m)
	}
	if err != nil {
		s.sendError(s.h.errorText(err))
		if perr := protocol.AsError(err); perr.Code == protocol.CodeNotFound || perr.Code == protocol.CodeForbidden {
			// Another principal's session: nothing of it is sent, and the
			// socket goes, as every protocol's sockets do.
			s.cl.c.Refuse("session not found", true)
		}
	}
}

// errEmpty is the document's answer to a chat without text.
var errEmpty = &protocol.Error{Code: protocol.CodeInvalid, Message: "Empty message received"}

// HandleChat posts the message to the session's thread, after making sure
// this socket is subscribed to it so it sees its own echo.
func (s *session) HandleChat(ctx context.Context, m agentchatapi.ChatRequest) error {
	if strings.TrimSpace(m.Message) == "" {
		return errEmpty
	}
	thread := s.ephemeral
	if m.SessionID != nil && *m.SessionID != "" {
		thread = *m.SessionID
	}
	if err := s.h.hub.join(ctx, s.cl, thread); err != nil {
		return errorDoing(err, "open the session")
	}
	if _, err := s.h.core.Post(ctx, thread, runs.Input{Text: m.Message}); err != nil {
		return errorDoing(err, "start the agent")
	}
	return nil
}

func (s *session) sendError(text string) {
	b, err := agentchatapi.Encode(agentchatapi.NewErrorEvent(text))
	if err != nil {
		s.log.L().Error("agentchat: encode an error frame", "err", err)
		return
	}
	if s.h.verify != nil {
		s.h.verify(b)
	}
	s.cl.c.Send(b)
}

// failure is an error with what the session was doing when it happened,
// for the internal-error text.
type failure struct {
	err   error
	doing string
}

func (f *failure) Error() string { return "could not " + f.doing + ": " + f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

func errorDoing(err error, doing string) error { return &failure{err: err, doing: doing} }

// errorText is the text of the error frame that answers err: the exact
// strings the document quotes for an unknown type and an empty message,
// "Invalid message: <path>: <reason>" for a frame that does not match its
// schema, and a short sentence for what the core refused. Internal causes
// go to the log, not to the client.
func (h *Handler) errorText(err error) string {
	perr := protocol.AsError(err)
	switch perr.Code {
	case protocol.CodeUnknownType:
		return "Unknown message type: " + perr.Type
	case protocol.CodeInvalid:
		if _, decoding := wire.AsError(err); decoding {
			return "Invalid message: " + perr.Message
		}
		return perr.Message
	case protocol.CodeInternal:
		doing := "handle the message"
		var f *failure
		if errors.As(err, &f) {
			doing = f.doing
		}
		h.log.Error("agentchat: could not "+doing, "err", err)
		return "Could not " + doing + ": internal error"
	}
	return sentence(perr.Message)
}

// sentence starts msg with a capital letter, as the frame's other texts do.
func sentence(msg string) string {
	if msg == "" || msg[0] < 'a' || msg[0] > 'z' {
		return msg
	}
	return string(msg[0]-'a'+'A') + msg[1:]
}
