// Package agentloop serves the Codex-style AgentLoop WebSocket protocol
// (agentloop-ws.md) at /agentloop: a client sends user_input,
// approval_response, get_context_info and manual_compact, and receives the
// thread's events projected onto complete response items, loading states,
// approval requests, agent_finished and context reports.
//
// A connection follows one thread: a new one, or the one ?thread_id= names
// (an extension), whichever protocol started it; several connections may
// share a thread, and each can answer its approval requests. Runs are
// interactive: commands and patches the approval policy asks about wait
// for a person's review.
package agentloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"unicode"

	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/logs"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/drain"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/thread"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/wire"
)

// Handler serves AgentLoop WebSockets.
type Handler struct {
	core   protocol.Core
	conns  *wsconn.Registry
	conn   wsconn.Options
	log    *slog.Logger
	verify func(frame []byte) // nil unless the server checks its frames (tests)
	// model and window are the model in use and its context window, for
	// context_info.
	model  string
	window int

	streams drain.Group // one per connection's follow goroutine
	// frames is what the connections of each thread share: the frames
	// that depend on their event alone, encoded once.
	frames *protocol.SharedFrames[frameKey, []byte]
}

// New returns a Handler. Shutdown ends its connections' follows.
func New(env protocol.Env) *Handler {
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn := env.ConnOptions(Name, log)
	return &Handler{core: env.Core, conns: env.Conns, conn: conn, log: log,
		verify: env.Verifier(Name, agentloopapi.ValidateOutbound),
		model:  env.Model, window: env.ContextWindow,
		frames: newSharedFrames()}
}

// newSharedFrames is what the connections of each thread share (keyed).
func newSharedFrames() *protocol.SharedFrames[frameKey, []byte] {
	return protocol.NewSharedFrames[frameKey](func(b []byte) int { return len(b) })
}

// maxThreadID bounds a thread id given with ?thread_id=.
const maxThreadID = 256

// threadParam reads the thread a connection asks to join: its id and true,
// or "" and false when it asks for none.
func threadParam(q url.Values) (string, bool, error) {
	if !q.Has("thread_id") {
		return "", false, nil
	}
	id := q.Get("thread_id")
	switch {
	case id == "":
		return "", false, errors.New("thread_id is empty: leave it out to start a new thread")
	case len(id) > maxThreadID:
		return "", false, fmt.Errorf("thread_id is longer than %d bytes", maxThreadID)
	case strings.IndexFunc(id, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0:
		return "", false, errors.New("thread_id may not contain spaces or control characters")
	}
	// The threads protocol names threads by lower-case UUIDs.
	if u, err := uuid.Parse(id); err == nil {
		id = u.String()
	}
	return id, true, nil
}

// ServeHTTP upgrades to a WebSocket and serves it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	thread, joined, err := threadParam(r.URL.Query())
	if err != nil {
		http.Error(w, "Bad thread_id: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !joined {
		thread = uuid.NewString()
	}
	wsconn.Start(w, r, h.conns, h.conn, func(ctx context.Context, c *wsconn.Conn) error {
		s := &session{h: h, c: c, thread: thread, log: logs.For(ctx, h.log)}
		return protocol.Session{Watch: s.open(joined), Handle: s.handle, ShuttingDown: func() {
			s.send(errorFrame("The server is shutting down; try again shortly", map[string]any{"code": string(protocol.CodeUnavailable)}))
		}}.Serve(ctx, c, &h.streams)
	})
}

// session is one connection.
type session struct {
	h      *Handler
	c      *wsconn.Conn
	log    logs.Lazy // the handler's, with the connection's id
	thread string
	proj   *projector
	frames *protocol.ThreadFrames[frameKey, []byte] // what the thread's connections share
}

var _ agentloopapi.Handler = (*session)(nil)

// open returns the session's Watch: it follows the thread (a joined one
// from its start) and sends the first frame, which names the thread, and
// then the thread's frames, on the watch's goroutine, which runs only
// while there are events to hand on: an idle connection holds no
// goroutine for its follow.
func (s *session) open(joined bool) func(ctx context.Context) (wait func()) {
	return func(ctx context.Context) func() {
		after := protocol.FromEnd
		if joined {
			after = 0 // the conversation so far, then live
		}
		// The pull comes first, so that the projector starts at its head
		// and the first frame goes before any of the thread's; the watch
		// takes it over once that is sent.
		var kick atomic.Pointer[func()]
		p, err := protocol.PullThread(ctx, s.h.core, s.thread, after, func() {
			if k := kick.Load(); k != nil {
				(*k)()
			}
		})
		if err != nil {
			s.send(s.h.errorFor(err, "follow the thread"))
			if perr := protocol.AsError(err); perr.Code == protocol.CodeNotFound || perr.Code == protocol.CodeForbidden {
				// Another principal's thread: nothing of it is sent, and
				// the socket goes with a policy violation, as on every
				// protocol.
				s.c.Refuse("thread not found", true)
			}
			return nil
		}
		s.proj = newProjector(p.Head())
		s.frames = s.h.frames.Join(s.thread)
		s.sendContextInfo(ctx, true)
		w, err := thread.NewWatch(func(notify func()) (*thread.Pull, error) {
			kick.Store(&notify)
			return p, nil
		}, func(e event.Event) error {
			s.event(ctx, e)
			return nil
		}, func(err error) { s.ended(ctx, err) })
		if err != nil { // not from the open above, which cannot fail
			s.h.frames.Leave(s.frames)
			p.Close()
			return nil
		}
		return func() {
			w.Close()
			s.h.frames.Leave(s.frames)
		}
	}
}

// event sends the frames of one of the thread's events.
func (s *session) event(ctx context.Context, e event.Event) {
	for _, f := range s.proj.frames(e) {
		s.sendKeyed(f)
	}
	if s.proj.wantInfo {
		s.sendContextInfo(ctx, false)
	}
	if s.proj.wantUnchanged {
		s.proj.wantUnchanged = false
		s.sendUnchanged(ctx)
	}
}

// ended says why the follow of the thread ended, unless the connection
// did.
func (s *session) ended(ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil && protocol.AsError(err).Code == protocol.CodeNotFound {
		// The thread was nobody's when the socket joined it, and another
		// principal's first event made it theirs: nothing of it is sent.
		s.send(s.h.errorFor(err, "follow the thread"))
		s.c.Refuse("thread not found", true)
		return
	}
	if err != nil && ctx.Err() == nil {
		s.log.L().Error("agentloop: following the thread failed", "thread", s.thread, "err", err)
		s.send(errorFrame("The thread's events stopped: internal error. Reconnect to continue.", map[string]any{"code": string(protocol.CodeInternal)}))
		s.c.Fail("the thread's events stopped")
	}
}

func (s *session) handle(ctx context.Context, frame []byte) {
	m, err := agentloopapi.Decode(frame)
	if err == nil {
		err = agentloopapi.Dispatch(ctx, s, m)
	}
	if err != nil {
		doing := "handle the message"
		var f *failure
		if errors.As(err, &f) {
			doing = f.doing
		}
		s.send(s.h.errorFor(err, doing))
	}
}

// HandleUserInput starts a turn on the input's user text (or queues it
// behind the running turn); while the agent waits for an answer to its
// question, the text answers it.
func (s *session) HandleUserInput(ctx context.Context, m agentloopapi.UserInputMessage) error {
	text, err := inputText(m.Payload.Input)
	if err != nil {
		return err
	}
	if q := s.proj.pendingQuestion(); q != "" {
		err := s.h.core.Resolve(ctx, s.thread, event.Command{Kind: event.CommandInput, ID: q, Text: text})
		if err == nil {
			return nil
		}
		if protocol.AsError(err).Code != protocol.CodeUnknownRequest {
			return doing(err, "answer the agent's question")
		}
		// Answered or timed out meanwhile: the text is a new turn.
	}
	err = s.proj.posting(func() (string, error) {
		p, err := s.h.core.Post(ctx, s.thread, runs.Input{Text: text, Interactive: true, Key: postKey(m.ID)})
		return p.MessageID, err
	})
	return doing(err, "process user input")
}

// reviews maps the protocol's reviews onto decisions.
var reviews = map[string]event.Decision{
	"yes":         event.DecisionApprove,
	"always":      event.DecisionApproveAlways,
	"no-continue": event.DecisionDenyContinue,
	"no-exit":     event.DecisionDenyStop,
	"explain":     event.DecisionExplain,
}

// HandleApprovalResponse answers the approval request the thread waits on.
// An approval_response whose id is a UUID is answered once: the same
// frame sent again (a client that reconnected and cannot tell whether it
// arrived) is acknowledged by silence, as the first was, instead of an
// error that the request is no longer pending.
func (s *session) HandleApprovalResponse(ctx context.Context, m agentloopapi.ApprovalResponseMessage) error {
	key := postKey(m.ID)
	req, err := s.proj.answerable()
	if err != nil {
		// The key alone: known, it is acknowledged; unknown, it names no
		// request, and err says why this answer was not used.
		if key != "" && s.h.core.Resolve(ctx, s.thread, event.Command{Kind: event.CommandApprove, Key: key}) == nil {
			return nil
		}
		return err
	}
	d := reviews[m.Payload.Review]
	cmd := event.Command{Kind: event.CommandApprove, ID: req.callID, Decision: d, Key: key}
	if msg := m.Payload.CustomDenyMessage; msg != nil && (d == event.DecisionDenyContinue || d == event.DecisionDenyStop) {
		cmd.Text = *msg
	}
	if edit := m.Payload.ApplyPatch; edit != nil && (d == event.DecisionApprove || d == event.DecisionApproveAlways) && edit.Patch != req.patch {
		if req.patch == "" {
			return &protocol.Error{Code: protocol.CodeInvalid, Type: agentloopapi.TypeApprovalResponse, Path: "/payload/applyPatch",
				Message: "applyPatch edits a patch, but the pending approval request is for a command; the request is still pending"}
		}
		if _, err := tools.ParsePatch(edit.Patch); err != nil {
			return &protocol.Error{Code: protocol.CodeInvalid, Type: agentloopapi.TypeApprovalResponse, Path: "/payload/applyPatch/patch", Cause: err,
				Message: "The edited patch is invalid: " + err.Error() + "; the approval request is still pending"}
		}
		cmd.Patch = edit.Patch
	}
	s.proj.answer(req.callID)
	if err := s.h.core.Resolve(ctx, s.thread, cmd); err != nil {
		s.proj.unanswer(req.callID)
		if protocol.AsError(err).Code == protocol.CodeUnknownRequest {
			return errAnswered
		}
		return doing(err, "answer the approval request")
	}
	return nil
}

var (
	errAnswered = &protocol.Error{Code: protocol.CodeUnknownRequest, Type: agentloopapi.TypeApprovalResponse,
		Message: "The approval request was already answered (from another client, or it is no longer pending)"}
)

// HandleGetContextInfo answers with the thread's context usage.
func (s *session) HandleGetContextInfo(ctx context.Context, _ agentloopapi.GetContextInfoMessage) error {
	info, err := s.contextInfo(ctx, false)
	if err != nil {
		return doing(err, "measure the context")
	}
	s.send(info)
	return nil
}

// HandleManualCompact compacts the thread's context now, or after the
// running turn: a run that only compacts, which sends context_compacted.
func (s *session) HandleManualCompact(ctx context.Context, _ agentloopapi.ManualCompactMessage) error {
	_, err := s.h.core.Post(ctx, s.thread, runs.Input{Options: event.RunOptions{Compact: true}})
	return doing(err, "compact the context")
}

// contextInfo is the thread's context_info frame; first adds threadId.
func (s *session) contextInfo(ctx context.Context, first bool) (agentloopapi.Outbound, error) {
	payload, err := s.contextUsage(ctx)
	if err != nil {
		return nil, err
	}
	if first {
		payload.ThreadID = &s.thread
	}
	return agentloopapi.NewContextInfoMessage(noID, payload), nil
}

// contextUsage measures the thread's context as the next model call
// would see it.
func (s *session) contextUsage(ctx context.Context) (agentloopapi.ContextInfoMessagePayload, error) {
	hist, err := s.h.core.History(ctx, s.thread)
	if err != nil {
		return agentloopapi.ContextInfoMessagePayload{}, err
	}
	u := agent.MeasureContext(hist, llm.TokenizerFor(s.h.model))
	payload := agentloopapi.ContextInfoMessagePayload{TokenCount: u.Tokens, TranscriptLength: u.Messages,
		MaxTokens: s.h.window, Strategy: strategyName}
	if s.h.window > 0 {
		payload.UsagePercent = float64(int(float64(u.Tokens)/float64(s.h.window)*1000+0.5)) / 10
	}
	return payload, nil
}

// sendUnchanged answers a manual_compact that compacted nothing: a
// context_compacted whose new count is the old one, reduction 0.
func (s *session) sendUnchanged(ctx context.Context) {
	u, err := s.contextUsage(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.send(s.h.errorFor(doing(err, "measure the context"), "measure the context"))
		}
		return
	}
	s.send(agentloopapi.NewContextCompactedMessage(noID, agentloopapi.ContextCompactedMessagePayload{
		OldTokenCount: u.TokenCount, NewTokenCount: u.TokenCount, Strategy: strategyName,
	}))
}

func (s *session) sendContextInfo(ctx context.Context, first bool) {
	info, err := s.contextInfo(ctx, first)
	if err != nil {
		if ctx.Err() == nil {
			s.send(s.h.errorFor(doing(err, "measure the context"), "measure the context"))
		}
		return
	}
	s.send(info)
}

func (s *session) send(m agentloopapi.Outbound) {
	if b, ok := s.encode(m); ok {
		s.c.Send(b)
	}
}

// sendKeyed sends a frame of the thread: one that depends on its event
// alone is encoded once for all the thread's connections.
func (s *session) sendKeyed(f keyed) {
	if b, ok := s.frames.Frame(f.key, func() ([]byte, bool) { return s.encode(f.withID()) }); ok {
		s.c.Send(b)
	}
}

// encode encodes m, with a fresh id if it has none (and has it
// verified); ok false when it cannot be encoded, which is logged.
func (s *session) encode(m agentloopapi.Outbound) ([]byte, bool) {
	m = withID(m, frameID)
	b, err := agentloopapi.Encode(m)
	if err != nil {
		s.log.L().Error("agentloop: encode a frame", "type", m.MessageType(), "err", err)
		return nil, false
	}
	if s.h.verify != nil {
		s.h.verify(b)
	}
	return b, true
}

// failure is an error with what the session was doing when it happened.
type failure struct {
	err   error
	doing string
}

func (f *failure) Error() string { return "could not " + f.doing + ": " + f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// doing returns err (nil stays nil) with what the session was doing.
func doing(err error, what string) error {
	if err == nil {
		return nil
	}
	return &failure{err: err, doing: what}
}

// errorFor is the error frame that answers err: the protocol's one
// mapping of the error vocabulary. details always carry the code; an
// invalid frame's also carry its path and type. Internal causes go to the
// log, not to the client.
func (h *Handler) errorFor(err error, what string) agentloopapi.Outbound {
	perr := protocol.AsError(err)
	details := map[string]any{"code": string(perr.Code)}
	msg := perr.Message
	switch perr.Code {
	case protocol.CodeUnknownType:
		msg = "Unknown message type: " + perr.Type
		details["type"] = perr.Type
	case protocol.CodeInvalid:
		if we, decoding := wire.AsError(err); decoding {
			msg = "Invalid message: " + we.Error()
			if we.Kind == wire.KindSyntax {
				msg = "Invalid JSON: " + we.Error()
			}
		}
		if perr.Path != "" {
			details["path"] = perr.Path
		}
		if perr.Type != "" {
			details["type"] = perr.Type
		}
	case protocol.CodeUnavailable:
		msg = "The server is shutting down; try again shortly"
	case protocol.CodeInternal:
		h.log.Error("agentloop: could not "+what, "err", err)
		msg = "Failed to " + what + ": internal error"
	}
	return errorFrame(msg, details)
}

// postKey makes a user_input idempotent by its frame id when the id is a
// UUID, as the document recommends: a client that resends the frame after
// a reconnect starts no second turn. Other ids (a hand-typed "1") may
// repeat on purpose and are not remembered.
func postKey(id string) string {
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return ""
	}
	return "agentloop:" + id
}
