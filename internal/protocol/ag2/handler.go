// Package ag2 serves the AG2-aligned chat.* WebSocket protocol
// (ag2-chat-ws.md) that ChatUI-style frontends speak, at
// /ws/{workflow}/{enterprise_id}/{chat_id}/{user_id}.
//
// The chat_id is the thread id, so a chat can be watched and continued
// over every other protocol; it belongs to the enterprise and user that
// opened it first. Every frame of the chat's stream carries the seq of the
// canonical event it projects, so seq is the thread's log order and stays
// the same across reconnects; client.resume replays the frames after a
// seq, marked replay:true, then chat.resume_boundary, then goes on live.
// Runs are interactive: input requests, tool approvals and UI tools wait
// for an answer from any socket of the chat (or another protocol), until
// --input-timeout.
package ag2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"golang.org/x/time/rate"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/identity"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/drain"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/wire"
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

	streams drain.Group // one per socket's follow goroutine

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
		legacy: env.AG2.LegacyTypes, rate: r, burst: max(env.AG2.Burst, 1),
		workflows: lookupIn(env.Workflows), users: map[string]*rate.Limiter{}}
	if env.Workflows != nil {
		h.names = env.Workflows.Names
	}
	return h, nil
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
	wsconn.Serve(w, r, h.conns, h.conn, func(ctx context.Context, c *wsconn.Conn) error {
		s := &session{h: h, c: c, chat: chat, workflow: workflow, ent: ent, user: user,
			limiter: rate.NewLimiter(h.rate, h.burst), resume: make(chan int64), started: make(chan struct{})}
		return s.serve(ctx)
	})
}

// session is one socket.
type session struct {
	h                   *Handler
	c                   *wsconn.Conn
	chat                string
	workflow, ent, user string
	limiter             *rate.Limiter
	proj                *projector
	resume              chan int64    // client.resume's lastClientIndex, to the follow goroutine
	started             chan struct{} // closed at the client's first message other than client.resume
	start               sync.Once
	ag2api.UnimplementedHandler
}

var _ ag2api.Handler = (*session)(nil)

// serve checks the workflow and the chat's scope, follows the chat, and
// reads the client's frames until the socket ends.
func (s *session) serve(ctx context.Context) error {
	if err := s.h.workflows(s.workflow); err != nil {
		code, msg, reason := codeNoWorkflow, fmt.Sprintf("Workflow %q not found", s.workflow), "workflow not found"
		details := map[string]any{"workflow": s.workflow}
		if s.h.names != nil {
			details["available"] = s.h.names()
		}
		if !errors.Is(err, errNoWorkflow) {
			code, msg, reason = codeAgentInit, fmt.Sprintf("Workflow %q could not be loaded: %v", s.workflow, err), "workflow does not load"
		}
		s.send(frame{msg: chatError(s.chat, 0, code, msg, details, false)}, false)
		s.c.Refuse(reason, true)
		return nil
	}
	if err := s.h.checkScope(ctx, s.chat, s.ent, s.user); err != nil {
		if perr := protocol.AsError(err); perr.Code == protocol.CodeNotFound || perr.Code == protocol.CodeForbidden {
			s.c.Refuse("the chat belongs to another enterprise or user", false)
			return nil
		}
		s.sendErr(err, "open the chat")
		s.c.Fail("the chat could not be opened")
		return nil
	}
	return protocol.Session{Open: s.open, Handle: s.handle, ShuttingDown: func() {
		s.send(frame{msg: chatError(s.chat, 0, codeTransport, "The server is shutting down; reconnect shortly", nil, false)}, false)
	}}.Serve(ctx, s.c, &s.h.streams)
}

// open follows the chat, and returns the follow (nil when the chat
// cannot be followed).
func (s *session) open(ctx context.Context) func(context.Context) {
	f, err := protocol.Follow(ctx, s.h.core, s.chat, 0)
	if err != nil {
		if perr := protocol.AsError(err); perr.Code == protocol.CodeNotFound {
			s.c.Refuse("the chat belongs to someone else", false)
			return nil
		}
		s.sendErr(err, "follow the chat")
		s.c.Fail("the chat could not be followed")
		return nil
	}
	s.proj = newProjector(s.chat, s.h.prices, s.h.model)
	return func(ctx context.Context) {
		defer f.Close()
		s.follow(ctx, f)
	}
}

// holdLive is how long a new socket holds the chat's live frames while it
// waits for the client's first message: a client that reconnects sends
// client.resume first, and the frames held meanwhile are then part of
// its replay instead of arriving before it (out of seq order, or twice).
const holdLive = 500 * time.Millisecond

// follow projects the chat's events and sends the live ones, and serves
// client.resume between events, so a replay and the live frames after it
// meet with no gap and no duplicate. The events up to the chat's end when
// the socket opened are projected (the projector needs them) but sent
// only when a client.resume asks for them. Live frames are held until the
// client's first message or holdLive (see holdLive).
func (s *session) follow(ctx context.Context, f *protocol.Follower) {
	head := f.Head()
	var last int64
	scoped := false // the chat's scope was checked since it had events
	holding, held := true, []frame(nil)
	// The hold runs from when the chat's history is projected (a resume
	// can be served from then on), not from when the socket opened: a
	// long history projected on a busy machine must not use it up.
	var hold *time.Timer
	var holdC <-chan time.Time
	defer func() {
		if hold != nil {
			hold.Stop()
		}
	}()
	release := func() {
		if holding {
			holding = false
			for _, fr := range held {
				s.send(fr, false)
			}
			held = nil
		}
	}
	for {
		// A resume waits until the history up to head is projected, so it
		// replays all of it.
		var resume chan int64
		if last >= head {
			resume = s.resume
			if hold == nil {
				hold = time.NewTimer(holdLive)
				holdC = hold.C
			}
		}
		started := s.started
		if !holding {
			started = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-holdC:
			// A resume that came meanwhile goes first: the frames held
			// are in its replay.
			select {
			case n := <-resume:
				holding, held = false, nil
				s.replay(ctx, n, last)
			default:
				release()
			}
		case <-started:
			release()
		case n := <-resume:
			// The frames held are in the replay.
			holding, held = false, nil
			s.replay(ctx, n, last)
		case <-f.Ready():
			// Between events, so that a resume above meets the live
			// frames with no gap and no duplicate.
			for {
				e, ok, err := f.Next()
				if err != nil && ctx.Err() == nil && protocol.AsError(err).Code == protocol.CodeNotFound {
					// Nobody's chat when the socket opened, and another
					// principal's now: the refusal is the close alone.
					s.c.Refuse("the chat belongs to someone else", false)
					return
				}
				if err != nil {
					if ctx.Err() == nil {
						s.h.log.Error("ag2: following the chat failed", "chat", s.chat, "err", err)
						s.send(frame{msg: chatError(s.chat, 0, codeTransport, "The chat's events stopped; reconnect and resume", nil, false)}, false)
						s.c.Fail("the chat's events stopped")
					}
					return
				}
				if !ok {
					break
				}
				if e.Preview != 0 {
					continue
				}
				if !scoped {
					// The chat may have been nobody's when the socket
					// opened: its first event says whose it is now.
					if err := s.h.checkScope(ctx, s.chat, s.ent, s.user); err != nil {
						s.c.Refuse("the chat belongs to another enterprise or user", false)
						return
					}
					scoped = true
				}
				last = e.Seq
				frames := s.proj.Project(e)
				if e.Seq <= head {
					continue
				}
				if holding {
					held = append(held, frames...)
					continue
				}
				for _, fr := range frames {
					s.send(fr, false)
				}
			}
		}
	}
}

// replay sends the frames of the events after seq after, up to seq upto
// (the last event this socket has projected), marked replay:true, then
// chat.resume_boundary. It projects the chat from its first event with a
// projector of its own, and coalesces the contiguous chat.print deltas of
// one message into one frame.
func (s *session) replay(ctx context.Context, after, upto int64) {
	p := newProjector(s.chat, s.h.prices, s.h.model)
	var all, out []frame
	for seq := int64(0); seq < upto; {
		evs, err := s.h.core.Read(ctx, s.chat, seq, readPage)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.h.log.Warn("ag2: replay", "chat", s.chat, "err", err)
			s.send(frame{msg: chatError(s.chat, 0, codeResume, "The chat could not be replayed; reconnect and resume again",
				map[string]any{"lastClientIndex": after}, true)}, false)
			return
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Seq > upto {
				break
			}
			seq = e.Seq
			frames := p.Project(e)
			all = append(all, frames...)
			if e.Seq > after {
				out = append(out, frames...)
			}
		}
	}
	total, replayed, lastIndex := 0, 0, 0
	for _, fr := range coalesce(all) {
		if fr.seq > 0 {
			total++
		}
	}
	for _, fr := range coalesce(out) {
		if fr.seq > 0 {
			replayed++
			lastIndex = int(fr.seq)
		}
		s.send(fr, true)
	}
	s.send(frame{at: time.Now().UTC(), msg: ag2api.NewResumeBoundary(ag2api.ResumeBoundaryData{ChatID: s.chat,
		ReplayedMessages: new(replayed), LastMessageIndex: new(lastIndex), TotalMessages: new(total)})}, false)
}

// coalesce merges each run of contiguous chat.print frames of one message
// into one, with the seq of the last.
func coalesce(frames []frame) []frame {
	var out []frame
	for _, fr := range frames {
		if p, ok := fr.msg.(ag2api.Print); ok && len(out) > 0 {
			if prev, ok := out[len(out)-1].msg.(ag2api.Print); ok && prev.Data.Corr != nil && p.Data.Corr != nil && *prev.Data.Corr == *p.Data.Corr {
				prev.Data.Content += p.Data.Content
				prev.Data.Seq = p.Data.Seq
				out[len(out)-1] = frame{seq: fr.seq, at: fr.at, msg: prev}
				continue
			}
		}
		out = append(out, fr)
	}
	return out
}

// handle decodes and dispatches one client frame, after the rate limits.
func (s *session) handle(ctx context.Context, b []byte) {
	if !s.limiter.Allow() || !s.h.userLimiter(identity.FromContext(ctx).ID, s.ent, s.user).Allow() {
		s.send(frame{msg: chatError(s.chat, 0, codeRate, "Too many messages; this one was dropped. Wait a moment and send it again",
			map[string]any{"rate_per_second": float64(s.h.rate), "burst": s.h.burst}, true)}, false)
		return
	}
	m, err := ag2api.Decode(b)
	if _, resume := m.(ag2api.ClientResume); !resume {
		s.start.Do(func() { close(s.started) })
	}
	if err == nil {
		err = ag2api.Dispatch(ctx, s, m)
	}
	if err != nil {
		s.sendErr(err, "handle the message")
	}
}

// checkChat refuses a message that names another chat than the socket's.
func (s *session) checkChat(typ string, id *string) error {
	if id == nil {
		return nil
	}
	c, err := protocol.CanonicalThread(*id)
	if err != nil || c != s.chat {
		return &protocol.Error{Code: protocol.CodeInvalid, Type: typ, Path: "/chat_id",
			Message: fmt.Sprintf("chat_id %q is not this socket's chat (%s)", *id, s.chat)}
	}
	return nil
}

// HandleUserInputSubmit answers the input or approval request request_id
// names, or, without one, posts a new user turn.
func (s *session) HandleUserInputSubmit(ctx context.Context, m ag2api.UserInputSubmit) error {
	if err := s.checkChat(m.Type, m.ChatID); err != nil {
		return err
	}
	if m.RequestID == nil || *m.RequestID == "" {
		if err := protocol.CheckText(m.Text); err != nil {
			return &protocol.Error{Code: protocol.CodeInvalid, Type: m.Type, Path: "/text", Message: "text is empty: there is nothing to send"}
		}
		if err := s.h.claimScope(ctx, s.chat, s.ent, s.user); err != nil {
			return err
		}
		return s.proj.posting(func() (string, error) {
			p, err := s.h.core.Post(ctx, s.chat, runs.Input{Text: m.Text, Interactive: true,
				Options: event.RunOptions{Workflow: s.workflow}})
			return p.MessageID, err
		})
	}
	id := *m.RequestID
	cmd := event.Command{Kind: event.CommandInput, ID: id, Text: m.Text}
	switch s.proj.pendingKind(id) {
	case kindApproval:
		d, ok := parseDecision(m.Text)
		if !ok {
			return &protocol.Error{Code: protocol.CodeInvalid, Type: m.Type, Path: "/text",
				Message: fmt.Sprintf("%q is not an answer to an approval: send approve (or yes, y), approve always, deny (or no, n) or deny and stop; the request is still pending", m.Text)}
		}
		cmd = event.Command{Kind: event.CommandApprove, ID: id, Decision: d}
	case kindUI:
		data, _ := json.Marshal(m.Text)
		cmd = event.Command{Kind: event.CommandUI, ID: id, Data: data}
	}
	return s.answer(ctx, cmd)
}

// answer resolves a pending request; an unknown one is UNKNOWN_REQUEST.
func (s *session) answer(ctx context.Context, cmd event.Command) error {
	err := s.h.core.Resolve(ctx, s.chat, cmd)
	if err != nil && protocol.AsError(err).Code == protocol.CodeUnknownRequest {
		return &protocol.Error{Code: protocol.CodeUnknownRequest, Cause: err,
			Message: fmt.Sprintf("No pending request %q: it was never asked, is answered already, or timed out", cmd.ID)}
	}
	return err
}

// decisions are the answers an approval request takes, lower-cased.
var decisions = map[string]event.Decision{
	"approve": event.DecisionApprove, "yes": event.DecisionApprove, "y": event.DecisionApprove,
	"approve always": event.DecisionApproveAlways,
	"deny":           event.DecisionDenyContinue, "no": event.DecisionDenyContinue, "n": event.DecisionDenyContinue,
	"deny and stop": event.DecisionDenyStop,
}

func parseDecision(text string) (event.Decision, bool) {
	d, ok := decisions[strings.Join(strings.Fields(strings.ToLower(text)), " ")]
	return d, ok
}

// HandleInlineComponentResult answers the UI request corr names.
func (s *session) HandleInlineComponentResult(ctx context.Context, m ag2api.InlineComponentResult) error {
	if err := s.checkChat(m.Type, m.ChatID); err != nil {
		return err
	}
	data := m.Data
	if len(data) == 0 {
		data = json.RawMessage(`null`)
	}
	return s.answer(ctx, event.Command{Kind: event.CommandUI, ID: m.Corr, Data: data})
}

// HandleArtifactPatch applies a JSON Patch to the artifact corr names and
// records the patched payload in the chat.
func (s *session) HandleArtifactPatch(ctx context.Context, m ag2api.ArtifactPatch) error {
	if err := s.checkChat(m.Type, m.ChatID); err != nil {
		return err
	}
	payload, ok := s.proj.artifactPayload(m.Corr)
	if !ok {
		return &protocol.Error{Code: protocol.CodeUnknownRequest,
			Message: fmt.Sprintf("No UI component %q to patch", m.Corr)}
	}
	doc := []byte(payload)
	for i, op := range m.Patch {
		p, err := jsonpatch.DecodePatch(append(append([]byte{'['}, op...), ']'))
		if err == nil {
			doc, err = p.Apply(doc)
		}
		if err != nil {
			return &patchError{index: i, op: op, err: err}
		}
	}
	patch, _ := json.Marshal(m.Patch)
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		return protocol.Internal(err)
	}
	if err := s.h.claimScope(ctx, s.chat, s.ent, s.user); err != nil {
		return err
	}
	_, err := s.h.core.Record(ctx, s.chat, event.UIPatched{RequestID: m.Corr, Patch: patch, Payload: compact.Bytes()})
	return err
}

// patchError is a JSON Patch operation that does not apply.
type patchError struct {
	index int
	op    json.RawMessage
	err   error
}

func (e *patchError) Error() string {
	return fmt.Sprintf("patch operation %d does not apply: %v; the artifact is unchanged", e.index, e.err)
}

// resumeError is a client.resume the server cannot honour.
type resumeError struct{ err error }

func (e *resumeError) Error() string { return "the resume names another chat: " + e.err.Error() }
func (e *resumeError) Unwrap() error { return e.err }

// HandleClientResume asks the follow goroutine for a replay.
func (s *session) HandleClientResume(ctx context.Context, m ag2api.ClientResume) error {
	if err := s.checkChat(m.Type, m.ChatID); err != nil {
		return &resumeError{err: err}
	}
	n := int64(0)
	if m.LastClientIndex != nil {
		n = int64(*m.LastClientIndex)
	}
	select {
	case s.resume <- n:
	case <-ctx.Done():
	case <-s.c.Done():
	}
	return nil
}

// send encodes fr and queues it; replayed frames carry replay:true.
func (s *session) send(fr frame, replayed bool) {
	b, err := ag2api.Encode(fr.msg)
	if err != nil {
		s.h.log.Error("ag2: encode a frame", "type", fr.msg.MessageType(), "err", err)
		return
	}
	at := fr.at
	if at.IsZero() {
		at = time.Now()
	}
	b = envelope(b, at, replayed)
	if s.h.verify != nil {
		s.h.verify(b)
	}
	s.c.Send(b)
	if s.h.legacy {
		if t := fr.msg.MessageType(); strings.HasPrefix(t, "chat.") {
			old, _ := json.Marshal(strings.TrimPrefix(t, "chat."))
			s.c.Send(bytes.Replace(b, []byte(`"type":"`+t+`"`), append([]byte(`"type":`), old...), 1))
		}
	}
}

// envelope adds timestamp (and replay) to an encoded frame.
func envelope(b []byte, at time.Time, replayed bool) []byte {
	b = bytes.TrimRight(b, " \n")
	extra := `,"timestamp":"` + at.UTC().Format(time.RFC3339Nano) + `"`
	if replayed {
		extra += `,"replay":true`
	}
	out := make([]byte, 0, len(b)+len(extra))
	out = append(out, b[:len(b)-1]...)
	out = append(out, extra...)
	return append(out, '}')
}

// sendErr sends the chat.error of err: the protocol's one mapping of the
// error vocabulary.
func (s *session) sendErr(err error, what string) {
	var pe *patchError
	if errors.As(err, &pe) {
		s.send(frame{msg: chatError(s.chat, 0, codeSchema, pe.Error(),
			map[string]any{"field": fmt.Sprintf("/patch/%d", pe.index), "op": pe.op, "reason": pe.err.Error()}, true)}, false)
		return
	}
	var re *resumeError
	if errors.As(err, &re) {
		s.send(frame{msg: chatError(s.chat, 0, codeResume, protocol.AsError(err).Message+"; nothing was replayed",
			map[string]any{"field": "chat_id"}, true)}, false)
		return
	}
	perr := protocol.AsError(err)
	code, msg, details := "", perr.Message, map[string]any{}
	switch perr.Code {
	case protocol.CodeInvalid, protocol.CodeUnknownType:
		code = codeSchema
		field := strings.TrimPrefix(perr.Path, "/")
		if perr.Code == protocol.CodeUnknownType {
			field = "type"
			msg = fmt.Sprintf("Unknown message type %q", perr.Type)
		}
		if we, ok := wire.AsError(err); ok {
			msg = "Invalid message: " + we.Error()
			if we.Kind == wire.KindSyntax {
				msg = "Invalid JSON: " + we.Error()
			}
			details["reason"] = we.Reason
		}
		if field == "" && perr.Code == protocol.CodeInvalid {
			field = "(frame)"
		}
		details["field"] = field
		if perr.Type != "" {
			details["type"] = perr.Type
		}
		if perr.Type == ag2api.TypeClientResume {
			// A corrupt resume: nothing was replayed.
			code = codeResume
		}
	case protocol.CodeUnknownRequest:
		code = codeUnknownReq
	case protocol.CodeRateLimited:
		code = codeRate
	case protocol.CodeNotFound, protocol.CodeForbidden:
		code = codeSchema
	case protocol.CodeBusy:
		code = codeTransport
	case protocol.CodeUnavailable:
		code, msg = codeTransport, "The server is shutting down or cannot reach its store; try again shortly"
	case protocol.CodeInternal:
		s.h.log.Error("ag2: could not "+what, "chat", s.chat, "err", err)
		code, msg = codePersistence, "Could not "+what+": internal error"
	}
	if len(details) == 0 {
		details = nil
	}
	s.send(frame{msg: chatError(s.chat, 0, code, msg, details, true)}, false)
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
