package threads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-faster/jx"
	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/drain"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/sse"
)

// The paths of the protocol, as http.ServeMux patterns.
const (
	PathThread = "/api/v1/threads/{threadId}"
	PathEvents = "/api/v1/threads/{threadId}/events"
)

// Default option values.
const (
	DefaultHeartbeat    = 15 * time.Second
	DefaultWriteTimeout = 10 * time.Second
)

// Options configure the server side of the protocol.
type Options struct {
	// Heartbeat is how long a stream may stay silent before the server
	// sends a ": ping" comment, which keeps proxies from closing it and
	// lets the server notice a client that went away (default
	// DefaultHeartbeat).
	Heartbeat time.Duration
	// WriteTimeout bounds every write of a stream, so that a client that
	// stops reading cannot hold its handler (default DefaultWriteTimeout):
	// a write that blocks is cut after between half of it and all of it,
	// since the deadline moves only once half of it has passed.
	WriteTimeout time.Duration
	Logger       *slog.Logger
	// Metrics counts the streams and their events; nil counts nothing.
	Metrics *metrics.Metrics
}

// Handler serves the threads protocol (schemas/openapi/threads.yaml) on the
// generated types: GET and POST PathThread, and GET PathEvents. ogen cannot
// generate a server for a document with text/event-stream responses, so
// routing, parameter checks and answers are written here; bodies are
// decoded and validated by the generated code (DecodeSendMessageRequest),
// and every SSE event is validated before it is sent (EncodeEvent).
//
// A thread is the thread of the canonical log whose id is the UUID in its
// canonical lower-case form, so the agentchat session with that session_id
// is the same conversation.
type Handler struct {
	core protocol.Core
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux

	streams  drain.Group
	stopping context.Context // streams.Stopping: streams catch up with the log and end

	abort       context.Context // cancelled when Shutdown stops waiting for streams
	cancelAbort context.CancelFunc

	frames  *protocol.SharedFrames[sharedKey, sse.Frame] // what each thread's streams share
	counted metrics.Frames                               // the frames its streams send

	verify func(frame []byte) // nil unless the server checks its events (tests)
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler over core. Call Shutdown to end its streams.
func New(core protocol.Core, opts Options) *Handler {
	return newHandler(core, opts, nil)
}

func newHandler(core protocol.Core, opts Options, verify func([]byte)) *Handler {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{core: core, opts: opts, log: opts.Logger, frames: newSharedFrames(), counted: opts.Metrics.Frames(Name), verify: verify}
	h.stopping = h.streams.Stopping()
	h.abort, h.cancelAbort = context.WithCancel(context.Background())
	h.mux = http.NewServeMux()
	h.mux.HandleFunc(PathThread, h.serveThread)
	h.mux.HandleFunc(PathEvents, h.serveEvents)
	return h
}

// ServeHTTP serves PathThread and PathEvents. Register it for both.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Shutdown ends the streams: each sends the events its thread's log holds
// at that moment and then closes, without done or error, so that its client
// resumes from the last id it got (against this server after a restart, or
// another node). Call it after the runs have stopped, so that POST streams
// carry their run's end. Streams still open when ctx ends are cut off.
// Streams asked for afterwards are refused with 503.
func (h *Handler) Shutdown(ctx context.Context) error {
	defer h.cancelAbort()
	err := h.streams.Shutdown(ctx, nil)
	if err != nil {
		// Cut the streams off, and wait for their handlers to return.
		h.cancelAbort()
		h.streams.Wait()
	}
	return err
}

// begin registers a stream, so that Shutdown waits for it. It answers 503
// and reports false once Shutdown has begun.
func (h *Handler) begin(w http.ResponseWriter) bool {
	if !h.streams.Enter() {
		shuttingDown(w)
		return false
	}
	return true
}

func (h *Handler) serveThread(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.getThread(w, r)
	case http.MethodPost:
		h.sendMessage(w, r)
	default:
		methodNotAllowed(w, r, "GET, HEAD, POST")
	}
}

func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, r, "GET")
		return
	}
	h.streamEvents(w, r)
}

// getThread answers the thread's history.
func (h *Handler) getThread(w http.ResponseWriter, r *http.Request) {
	id, ok := parseThreadID(w, r)
	if !ok {
		return
	}
	ctx, thread := r.Context(), id.String()
	events, err := h.core.History(ctx, thread)
	if err != nil {
		h.coreError(w, r, "read the thread's history", err)
		return
	}
	if len(events) == 0 {
		// No conversation yet; a thread exists once it has any event.
		last, err := h.core.LastSeq(ctx, thread)
		if err != nil {
			h.coreError(w, r, "read the thread's last seq", err)
			return
		}
		if last == 0 {
			writeError(w, http.StatusNotFound, "thread not found")
			return
		}
	}
	resp := threadsapi.ThreadResponse{ThreadID: id, Messages: projectHistory(events)}
	body, err := encodeChecked(&resp, threadsapi.ValidateThreadResponseJSON)
	if err != nil {
		h.internalError(w, r, "project the thread's history", err)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// sendMessage posts the user's message to the thread and streams its run.
func (h *Handler) sendMessage(w http.ResponseWriter, r *http.Request) {
	id, ok := parseThreadID(w, r)
	if !ok {
		return
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Content-Type must be application/json, got %q", ct))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid request body: exceeds %d bytes", MaxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	req, err := DecodeSendMessageRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if !h.begin(w) {
		return
	}
	defer h.streams.Leave()

	ctx, thread := r.Context(), id.String()
	// Follow first, from the thread's current end: no event of the run can
	// then slip between the post and the stream, and a store that fails
	// does so before the message is posted.
	wake := newWaker()
	p, err := protocol.PullThread(bus.WantPreviews(ctx), h.core, thread, protocol.FromEnd, wake.kick)
	if err != nil {
		h.coreError(w, r, "subscribe to the thread", err)
		return
	}
	posted, err := h.core.Post(ctx, thread, runs.Input{Text: req.Text, Key: r.Header.Get("Idempotency-Key")})
	if err != nil {
		p.Close()
		h.coreError(w, r, "post the message", err)
		return
	}
	from := p.Head()
	if posted.Duplicate && posted.Seq > 0 {
		// A retry of a message the thread has: its run's events, from its
		// start, whatever of them went by already.
		p.Close()
		from = posted.Seq - 1
		if p, err = protocol.PullThread(bus.WantPreviews(ctx), h.core, thread, from, wake.kick); err != nil {
			h.coreError(w, r, "subscribe to the thread", err)
			return
		}
	}
	h.stream(w, r, id, p, wake, protocol.Position{Seq: from}, -1, -1, &runView{projector: newProjector(id), run: posted.Run})
}

// streamEvents resumes the thread's stream after Last-Event-ID.
func (h *Handler) streamEvents(w http.ResponseWriter, r *http.Request) {
	id, ok := parseThreadID(w, r)
	if !ok {
		return
	}
	var from protocol.Position
	known := int64(-1)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		var ok bool
		if from, ok = parsePosition(v); !ok {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Last-Event-ID %q: must be an event id (a decimal sequence number, or seq:message_id:bytes as sent with text ahead of its commit)", v))
			return
		}
		known = from.Seq
	}
	after := from.Seq
	if !h.begin(w) {
		return
	}
	defer h.streams.Leave()

	ctx, thread := r.Context(), id.String()
	wake := newWaker()
	p, err := protocol.PullThread(bus.WantPreviews(ctx), h.core, thread, after, wake.kick)
	if err != nil {
		if perr := protocol.AsError(err); perr.Code == protocol.CodeInvalid {
			// The position is past the thread's end: a client of another
			// thread, or of a log that was reset.
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Last-Event-ID %d: %s", after, perr.Message))
			return
		}
		h.coreError(w, r, "subscribe to the thread", err)
		return
	}
	if p.Head() == 0 {
		p.Close()
		writeError(w, http.StatusNotFound, "thread not found")
		return
	}
	h.stream(w, r, id, p, wake, from, known, p.Head(), threadView{newProjector(id)})
}

// parseThreadID parses the path's thread id: a UUID in the canonical
// 8-4-4-4-12 form, in either case. It answers 400 and reports false for
// anything else (uuid.Parse alone would also take braces, urn:uuid: and
// the form without hyphens).
func parseThreadID(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	v := r.PathValue("threadId")
	id, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("threadId %q: must be a UUID", v))
		return uuid.UUID{}, false
	}
	return id, true
}

// parsePosition parses an event id: a seq, or seq:stream:bytes.
func parsePosition(v string) (protocol.Position, bool) {
	seq, rest, ahead := strings.Cut(v, ":")
	n, ok := parseSeq(seq)
	if !ok {
		return protocol.Position{}, false
	}
	if !ahead {
		return protocol.Position{Seq: n}, true
	}
	p, err := protocol.ParsePosition(v)
	if err != nil || len(rest) > 200 {
		return protocol.Position{}, false
	}
	return p, true
}

// parseSeq parses an event id: 1 to 19 decimal digits that fit an int64.
func parseSeq(v string) (int64, bool) {
	if len(v) == 0 || len(v) > 19 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed here; use %s", r.Method, allow))
}

// coreError answers what the core refused with the status its code
// stands for; internal failures are logged and answered 500 without their
// cause. A request whose client went away has nobody to answer.
func (h *Handler) coreError(w http.ResponseWriter, r *http.Request, what string, err error) {
	if r.Context().Err() != nil {
		return
	}
	perr := protocol.AsError(err)
	switch perr.Code {
	case protocol.CodeInvalid, protocol.CodeUnknownType:
		writeError(w, http.StatusBadRequest, perr.Message)
	case protocol.CodeNotFound, protocol.CodeForbidden:
		// Another principal's thread is as unknown as one that does not
		// exist: its existence is not revealed.
		writeError(w, http.StatusNotFound, "thread not found")
	case protocol.CodeUnauthenticated:
		writeError(w, http.StatusUnauthorized, perr.Message)
	case protocol.CodeBusy:
		writeError(w, http.StatusConflict, perr.Message)
	case protocol.CodeRateLimited:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, perr.Message)
	case protocol.CodeUnavailable:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, perr.Message)
	default:
		h.internalError(w, r, what, err)
	}
}

// internalError logs the cause and answers 500 without it. A request
// whose client went away is not a server failure and has nobody to answer.
func (h *Handler) internalError(w http.ResponseWriter, r *http.Request, what string, err error) {
	if r.Context().Err() != nil {
		return
	}
	h.log.ErrorContext(r.Context(), "threads: "+what, "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "internal server error")
}

// shuttingDown answers the document's 503.
func shuttingDown(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "the server is shutting down; try again shortly")
}

// writeError answers status with the document's {"error": msg} body.
func writeError(w http.ResponseWriter, status int, msg string) {
	var enc jx.Encoder
	body := threadsapi.Error{Error: msg}
	body.Encode(&enc)
	writeJSON(w, status, enc.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
