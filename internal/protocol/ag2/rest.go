package ag2

// ChatUI's REST calls beside the WebSocket (schemas/openapi/ag2.yaml): the
// routing, checks and answers are written here, on the types, decoders and
// validators generated from the document (generated/ag2restapi), as the
// threads adapter does for its API. Every request has been through the
// server's Host, Origin and authentication checks; ownership is the core's
// and the chat scope's, as for a socket.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/go-faster/jx"
	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/generated/ag2restapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/identity"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/wire"
	"github.com/agentwire/agentwire/internal/workflow"
)

// maxRESTBody bounds a request body.
const maxRESTBody = 1 << 20

// The REST paths, as http.ServeMux patterns. Each names its method, so
// that none conflicts with the socket's path on a listener of AG2's own.
const (
	pathWorkflows = "GET /api/workflows"
	pathTransport = "GET /api/workflows/{workflow}/transport"
	pathStart     = "POST /api/chats/{enterprise_id}/{workflow}/start"
	pathExists    = "GET /api/chats/exists/{enterprise_id}/{workflow}/{chat_id}"
	pathInput     = "POST /chat/{enterprise_id}/{chat_id}/{user_id}/input"
	pathUITool    = "POST /api/ui-tool/submit"
	pathUserInput = "POST /api/user-input/submit"
)

// startNamespace makes the chat id of a start with a client_request_id.
var startNamespace = uuid.MustParse("6f0d8c9e-3a4b-5c6d-8e7f-a0b1c2d3e4f5")

// restState is what the REST calls share with the sockets: the sockets
// open on each chat (whose projectors know the pending requests and must
// not echo a turn posted over REST), and the options.
type restState struct {
	textTurns bool
	catalog   *workflow.Catalog

	mu   sync.Mutex
	next uint64
	live map[string]map[*session]uint64 // chat → its sockets, with the order they opened in
}

func newRESTState(env protocol.Env) *restState {
	return &restState{textTurns: env.AG2.TextTurns, catalog: env.Workflows, live: map[string]map[*session]uint64{}}
}

// track registers a socket whose projector is set; the func it returns
// forgets it.
func (r *restState) track(s *session) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	if r.live[s.chat] == nil {
		r.live[s.chat] = map[*session]uint64{}
	}
	r.live[s.chat][s] = r.next
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.live[s.chat], s)
		if len(r.live[s.chat]) == 0 {
			delete(r.live, s.chat)
		}
	}
}

// sockets are the sockets open on chat, oldest first.
func (r *restState) sockets(chat string) []*session {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*session, 0, len(r.live[chat]))
	for s := range r.live[chat] {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return r.live[chat][out[i]] < r.live[chat][out[j]] })
	return out
}

// pendingIn are the chats, among those with an open socket, where the
// request id is pending, with its kind in each.
func (r *restState) pendingIn(id string) map[string]kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]kind{}
	for chat, ss := range r.live {
		for s := range ss {
			if k := s.proj.pendingKind(id); k != 0 {
				out[chat] = k
				break
			}
		}
	}
	return out
}

// mountREST serves ChatUI's REST calls on mux.
func (h *Handler) mountREST(mux *http.ServeMux) {
	mux.HandleFunc(pathWorkflows, h.listWorkflows)
	mux.HandleFunc(pathTransport, h.workflowTransport)
	mux.HandleFunc(pathStart, h.startChat)
	mux.HandleFunc(pathExists, h.chatExists)
	mux.HandleFunc(pathInput, h.postInput)
	mux.HandleFunc(pathUITool, h.submitUITool)
	mux.HandleFunc(pathUserInput, h.submitUserInput)
}

// listWorkflows answers the workflows on offer.
func (h *Handler) listWorkflows(w http.ResponseWriter, r *http.Request) {
	out := ag2restapi.Workflows{}
	if h.rest.catalog == nil {
		out["default"] = ag2restapi.WorkflowConfig{Description: ag2restapi.NewOptString("The server's agent, alone."),
			HumanInTheLoop: true, StartupMode: "UserDriven", Transport: "websocket", Agents: []ag2restapi.WorkflowAgent{}}
	} else {
		for _, name := range h.rest.catalog.Names() {
			wf, err := h.rest.catalog.Lookup(name)
			if err != nil {
				continue // one that does not load is not on offer; a socket naming it says why
			}
			c := ag2restapi.WorkflowConfig{Description: ag2restapi.NewOptString(wf.Description), HumanInTheLoop: true,
				StartupMode: "UserDriven", Transport: "websocket", SpeakerSelection: ag2restapi.NewOptString(string(wf.Selection)),
				MaxRounds: ag2restapi.NewOptInt(wf.MaxRounds), Agents: []ag2restapi.WorkflowAgent{}}
			for _, a := range wf.Agents {
				c.Agents = append(c.Agents, ag2restapi.WorkflowAgent{Name: a.Name, Description: ag2restapi.NewOptString(a.Description)})
			}
			out[name] = c
		}
	}
	h.answerJSON(w, r, &out, ag2restapi.ValidateWorkflowsJSON)
}

// workflowTransport answers how a workflow's chats are streamed.
func (h *Handler) workflowTransport(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.workflowParam(w, r); !ok {
		return
	}
	h.answerJSON(w, r, &ag2restapi.Transport{Transport: "websocket", AllowResume: true, WsPath: ag2api.Address},
		ag2restapi.ValidateTransportJSON)
}

// startChat chooses a chat id and makes the chat the enterprise's and
// user's.
func (h *Handler) startChat(w http.ResponseWriter, r *http.Request) {
	ent, ok := pathPart(w, r, "enterprise_id")
	if !ok {
		return
	}
	name, ok := h.workflowParam(w, r)
	if !ok {
		return
	}
	req, ok := decodeBody[ag2restapi.StartChatRequest](w, r, ag2restapi.ValidateStartChatRequest)
	if !ok {
		return
	}
	if bad(req.UserID) {
		writeDetail(w, http.StatusBadRequest, "invalid request body: /user_id: no control characters")
		return
	}
	ctx := r.Context()
	chat := uuid.NewString()
	if crid, set := req.ClientRequestID.Get(); set && crid != "" {
		key := strings.Join([]string{identity.FromContext(ctx).ID, ent, name, req.UserID, crid}, "\x00")
		chat = uuid.NewSHA1(startNamespace, []byte(key)).String()
	}
	if err := h.claimScope(ctx, chat, ent, req.UserID); err != nil {
		h.coreError(w, r, "start the chat", err)
		return
	}
	last, err := h.core.LastSeq(ctx, chat)
	if err != nil {
		h.coreError(w, r, "start the chat", err)
		return
	}
	h.answerJSON(w, r, &ag2restapi.StartChatResponse{Success: true, ChatID: chat, WorkflowName: name,
		EnterpriseID: ent, UserID: req.UserID, Reused: last > 0}, ag2restapi.ValidateStartChatResponseJSON)
}

// chatExists answers whether the chat has events and is the caller's.
func (h *Handler) chatExists(w http.ResponseWriter, r *http.Request) {
	ent, ok := pathPart(w, r, "enterprise_id")
	if !ok {
		return
	}
	if _, ok := h.workflowParam(w, r); !ok {
		return
	}
	chat, ok := chatParam(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	exists := false
	last, err := h.core.LastSeq(ctx, chat)
	switch {
	case err == nil:
		exists = last > 0 && h.scopeHasEnterprise(ctx, chat, ent)
	case isNotFound(err):
	default:
		h.coreError(w, r, "look the chat up", err)
		return
	}
	h.answerJSON(w, r, &ag2restapi.ChatExists{Exists: exists, ChatID: chat}, ag2restapi.ValidateChatExistsJSON)
}

// postInput posts the user's text: the answer to a pending request, or a
// new turn.
func (h *Handler) postInput(w http.ResponseWriter, r *http.Request) {
	ent, ok := pathPart(w, r, "enterprise_id")
	if !ok {
		return
	}
	user, ok := pathPart(w, r, "user_id")
	if !ok {
		return
	}
	chat, ok := chatParam(w, r)
	if !ok {
		return
	}
	req, ok := decodeBody[ag2restapi.InputRequest](w, r, ag2restapi.ValidateInputRequest)
	if !ok {
		return
	}
	ctx := r.Context()
	if !h.userLimiter(identity.FromContext(ctx).ID, ent, user).Allow() {
		w.Header().Set("Retry-After", "1")
		writeDetail(w, http.StatusTooManyRequests, "too many messages; this one was dropped. Wait a moment and send it again")
		return
	}
	id, alias := req.RequestID.Or(""), req.InputRequestID.Or("")
	if id != "" && alias != "" && id != alias {
		writeDetail(w, http.StatusBadRequest, fmt.Sprintf("invalid request body: input_request_id %q and request_id %q name different requests; send one", alias, id))
		return
	}
	if id == "" {
		id = alias
	}
	if err := h.checkScope(ctx, chat, ent, user); err != nil {
		h.coreError(w, r, "open the chat", err)
		return
	}
	view, err := h.pendingView(ctx, chat)
	if err != nil {
		h.coreError(w, r, "read the chat", err)
		return
	}
	if id == "" && !h.rest.textTurns {
		id, _, _ = view.latestPending()
	}
	if id != "" {
		cmd, err := answerCommand("input", id, req.Message, view.pendingKind(id))
		if err != nil {
			writeDetail(w, http.StatusBadRequest, protocol.AsError(err).Message)
			return
		}
		if err := h.resolve(ctx, chat, cmd); err != nil {
			h.coreError(w, r, "answer the request", err)
			return
		}
		h.answerJSON(w, r, &ag2restapi.InputResponse{Success: true, ChatID: chat, Kind: ag2restapi.InputResponseKindAnswer,
			RequestID: ag2restapi.NewOptString(id)}, ag2restapi.ValidateInputResponseJSON)
		return
	}
	if protocol.CheckText(req.Message) != nil {
		writeDetail(w, http.StatusBadRequest, "invalid request body: /message: is empty: there is nothing to send")
		return
	}
	name := req.WorkflowName.Or("")
	if name == "" {
		name = "default"
		if ss := h.rest.sockets(chat); len(ss) > 0 {
			name = ss[0].workflow
		}
	}
	if err := h.workflows(name); err != nil {
		h.workflowError(w, name, err)
		return
	}
	if err := h.claimScope(ctx, chat, ent, user); err != nil {
		h.coreError(w, r, "open the chat", err)
		return
	}
	posted, err := h.postUnechoed(ctx, chat, runs.Input{Text: req.Message, Interactive: true, Options: event.RunOptions{Workflow: name}})
	if err != nil {
		h.coreError(w, r, "post the message", err)
		return
	}
	h.answerJSON(w, r, &ag2restapi.InputResponse{Success: true, ChatID: chat, Kind: ag2restapi.InputResponseKindTurn,
		MessageID: ag2restapi.NewOptString(posted.MessageID)}, ag2restapi.ValidateInputResponseJSON)
}

// submitUITool answers a UI component.
func (h *Handler) submitUITool(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeBody[ag2restapi.UIToolSubmit](w, r, ag2restapi.ValidateUIToolSubmit)
	if !ok {
		return
	}
	data := []byte(req.ResponseData)
	if len(data) == 0 {
		data = []byte(`null`)
	}
	h.submit(w, r, req.EventID, func(k kind) (event.Command, error) {
		if k == kindUI {
			return event.Command{Kind: event.CommandUI, ID: req.EventID, Data: data}, nil
		}
		// A question or an approval answered from a component: its data
		// is the text, a JSON string as the string it holds.
		text := string(data)
		if s, err := jx.DecodeBytes(data).Str(); err == nil {
			text = s
		}
		return answerCommand("ui-tool", req.EventID, text, k)
	})
}

// submitUserInput answers an input request (ChatUI's fallback).
func (h *Handler) submitUserInput(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeBody[ag2restapi.UserInputSubmit](w, r, ag2restapi.ValidateUserInputSubmit)
	if !ok {
		return
	}
	h.submit(w, r, req.InputRequestID, func(k kind) (event.Command, error) {
		return answerCommand("user-input", req.InputRequestID, req.UserInput, k)
	})
}

// submit answers the request id in the chat, among those with a socket
// open here, where it is pending and the caller may answer it.
func (h *Handler) submit(w http.ResponseWriter, r *http.Request, id string, command func(kind) (event.Command, error)) {
	ctx := r.Context()
	chats := h.rest.pendingIn(id)
	names := make([]string, 0, len(chats))
	for c := range chats {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, chat := range names {
		cmd, err := command(chats[chat])
		if err != nil {
			writeDetail(w, http.StatusBadRequest, protocol.AsError(err).Message)
			return
		}
		err = h.resolve(ctx, chat, cmd)
		if err == nil {
			h.answerJSON(w, r, &ag2restapi.SubmitResponse{Success: true, ChatID: chat, RequestID: id}, ag2restapi.ValidateSubmitResponseJSON)
			return
		}
		if c := protocol.AsError(err).Code; c != protocol.CodeUnknownRequest && c != protocol.CodeNotFound && c != protocol.CodeForbidden {
			h.coreError(w, r, "answer the request", err)
			return
		}
	}
	writeDetail(w, http.StatusNotFound, fmt.Sprintf("no pending request %q: it was never asked, is answered already, timed out, or its chat has no socket open on this server", id))
}

// resolve delivers an answer; an unknown request is CodeUnknownRequest.
func (h *Handler) resolve(ctx context.Context, chat string, cmd event.Command) error {
	return h.core.Resolve(ctx, chat, cmd)
}

// pendingView is a projector that knows the chat's pending requests: the
// projector of an open socket that has projected the chat's history, or
// one that projects the chat's events when there is none here.
func (h *Handler) pendingView(ctx context.Context, chat string) (*projector, error) {
	for _, s := range h.rest.sockets(chat) {
		select {
		case <-s.history:
			return s.proj, nil
		default:
		}
	}
	p := newProjector(chat, h.prices, h.model)
	for seq := int64(0); ; {
		evs, err := h.core.Read(ctx, chat, seq, readPage)
		if err != nil {
			if isNotFound(err) {
				return p, nil
			}
			return nil, err
		}
		if len(evs) == 0 {
			return p, nil
		}
		for _, e := range evs {
			seq = e.Seq
			p.Project(e)
		}
	}
}

// postUnechoed posts a user turn with the chat's sockets here holding
// their projection of user messages, and marks the message as theirs, so
// that none echoes it: ChatUI shows what it sent itself.
func (h *Handler) postUnechoed(ctx context.Context, chat string, in runs.Input) (runs.Posted, error) {
	ss := h.rest.sockets(chat)
	for _, s := range ss {
		s.proj.mu.Lock()
	}
	defer func() {
		for _, s := range ss {
			s.proj.mu.Unlock()
		}
	}()
	p, err := h.core.Post(ctx, chat, in)
	if err == nil && p.MessageID != "" {
		for _, s := range ss {
			s.proj.own[p.MessageID] = true
		}
	}
	return p, err
}

// scopeHasEnterprise reports whether the chat can be the enterprise's.
// The scope is kept per enterprise and user, and the exists path names no
// user: the chat's open sockets here name the users to check; without
// any, the core's ownership (the principal) decides alone.
func (h *Handler) scopeHasEnterprise(ctx context.Context, chat, ent string) bool {
	ss := h.rest.sockets(chat)
	if len(ss) == 0 {
		return true
	}
	for _, s := range ss {
		if s.ent == ent && h.checkScope(ctx, chat, ent, s.user) == nil {
			return true
		}
	}
	return false
}

// workflowParam reads and checks the path's workflow: 404 when it does
// not exist.
func (h *Handler) workflowParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	name, ok := pathPart(w, r, "workflow")
	if !ok {
		return "", false
	}
	if err := h.workflows(name); err != nil {
		h.workflowError(w, name, err)
		return "", false
	}
	return name, true
}

func (h *Handler) workflowError(w http.ResponseWriter, name string, err error) {
	if errors.Is(err, errNoWorkflow) {
		msg := fmt.Sprintf("workflow %q not found", name)
		if h.names != nil {
			msg += "; available: " + strings.Join(h.names(), ", ")
		}
		writeDetail(w, http.StatusNotFound, msg)
		return
	}
	h.log.Error("ag2: a workflow does not load", "workflow", name, "err", err)
	writeDetail(w, http.StatusInternalServerError, fmt.Sprintf("workflow %q could not be loaded: %v", name, err))
}

// pathPart reads a path parameter: 1 to maxPathPart characters, no
// control characters.
func pathPart(w http.ResponseWriter, r *http.Request, name string) (string, bool) {
	v := r.PathValue(name)
	if v == "" || bad(v) {
		writeDetail(w, http.StatusBadRequest, fmt.Sprintf("%s %q: 1 to %d characters, no control characters", name, v, maxPathPart))
		return "", false
	}
	return v, true
}

func bad(v string) bool {
	return len(v) > maxPathPart || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// chatParam reads the path's chat id in its canonical form.
func chatParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	chat, err := protocol.CanonicalThread(r.PathValue("chat_id"))
	if err != nil {
		writeDetail(w, http.StatusBadRequest, "chat_id: "+protocol.AsError(err).Message)
		return "", false
	}
	return chat, true
}

// decoded is what ogen generates for every schema: a jx decoder.
type decoded[T any] interface {
	*T
	Decode(*jx.Decoder) error
}

// decodeBody reads a JSON body of at most maxRESTBody bytes, checks it
// against its schema (structured errors: a JSON Pointer and a reason) and
// decodes it with ogen's decoder. It answers 400 and reports false for a
// body that is not one.
func decodeBody[T any, P decoded[T]](w http.ResponseWriter, r *http.Request, validate func(any) error) (*T, bool) {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		writeDetail(w, http.StatusBadRequest, fmt.Sprintf("Content-Type must be application/json, got %q", ct))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRESTBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeDetail(w, http.StatusBadRequest, fmt.Sprintf("invalid request body: exceeds %d bytes", maxRESTBody))
			return nil, false
		}
		writeDetail(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return nil, false
	}
	v, err := wire.Parse(body)
	if err == nil {
		err = validate(v)
	}
	if err != nil {
		writeDetail(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return nil, false
	}
	out := new(T)
	if err := P(out).Decode(jx.DecodeBytes(body)); err != nil {
		writeDetail(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return nil, false
	}
	return out, true
}

type encoder interface{ Encode(*jx.Encoder) }

// answerJSON answers 200 with v, checked against its schema first.
func (h *Handler) answerJSON(w http.ResponseWriter, r *http.Request, v encoder, validate func([]byte) error) {
	var enc jx.Encoder
	v.Encode(&enc)
	if err := validate(enc.Bytes()); err != nil {
		h.log.Error("ag2: an answer the document does not allow", "path", r.URL.Path, "err", err)
		writeDetail(w, http.StatusInternalServerError, "internal server error")
		return
	}
	writeJSON(w, http.StatusOK, enc.Bytes())
}

// coreError answers what the core refused with the status its code
// stands for; internal failures are logged and answered 500 without their
// cause. Another's chat is as unknown as one that does not exist.
func (h *Handler) coreError(w http.ResponseWriter, r *http.Request, what string, err error) {
	if r.Context().Err() != nil {
		return
	}
	perr := protocol.AsError(err)
	switch perr.Code {
	case protocol.CodeInvalid, protocol.CodeUnknownType:
		writeDetail(w, http.StatusBadRequest, perr.Message)
	case protocol.CodeNotFound, protocol.CodeForbidden:
		writeDetail(w, http.StatusNotFound, "chat not found")
	case protocol.CodeUnknownRequest:
		writeDetail(w, http.StatusNotFound, "no such pending request: it was never asked, is answered already, or timed out")
	case protocol.CodeUnauthenticated:
		writeDetail(w, http.StatusUnauthorized, perr.Message)
	case protocol.CodeBusy:
		writeDetail(w, http.StatusConflict, perr.Message)
	case protocol.CodeRateLimited:
		w.Header().Set("Retry-After", "1")
		writeDetail(w, http.StatusTooManyRequests, perr.Message)
	case protocol.CodeUnavailable:
		w.Header().Set("Retry-After", "1")
		writeDetail(w, http.StatusServiceUnavailable, "the server is shutting down or cannot reach its store; try again shortly")
	default:
		h.log.Error("ag2: could not "+what, "method", r.Method, "path", r.URL.Path, "err", err)
		writeDetail(w, http.StatusInternalServerError, "internal server error")
	}
}

func isNotFound(err error) bool {
	c := protocol.AsError(err).Code
	return c == protocol.CodeNotFound || c == protocol.CodeForbidden
}

// writeDetail answers status with the document's {"detail": msg} body.
func writeDetail(w http.ResponseWriter, status int, msg string) {
	var enc jx.Encoder
	body := ag2restapi.Error{Detail: msg}
	body.Encode(&enc)
	writeJSON(w, status, enc.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
