// Package loom serves the Loom WebSocket protocol of `loom serve`
// (loom-ws.md, with the stream events of loom-stream-events.md) at /loom,
// at / for WebSocket upgrade requests, and at the root of a listener of its
// own. A client sends run, tools_list, tool_show, user_messages and ping
// (and agentwire's additions tool_approval_response, input_response and
// cancel) and receives, for a run, its run_stream_event frames and then one
// run_end or error.
//
// A run belongs to an agentwire thread: the one thread_id names, whichever
// protocol started it, or a new one. The socket follows the thread from
// before it posts the run's message, and projects the run's events (and
// only those) with a per-run projector that numbers them (event_id) and
// names their node runs (node_id). Runs on one socket run one at a time;
// the other requests are answered at once, also during a run.
package loom

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"github.com/agentwire/agentwire/generated/loomapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/identity"
	"github.com/agentwire/agentwire/internal/logs"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/drain"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/tools"
	"github.com/agentwire/agentwire/internal/tools/sandbox"
	"github.com/agentwire/agentwire/internal/wire"
)

// Limits of the protocol.
const (
	// defaultLimit and maxLimit bound a user_messages page.
	defaultLimit = 100
	maxLimit     = 1000
	// maxQueuedRuns is how many run requests may wait on one socket
	// behind its running run.
	maxQueuedRuns = 16
	// maxTracked bounds the runs the handler remembers for answers from
	// other sockets.
	maxTracked = 4096
)

// Handler serves Loom WebSockets.
type Handler struct {
	core   protocol.Core
	conns  *wsconn.Registry
	conn   wsconn.Options
	log    *slog.Logger
	verify func(frame []byte) // nil unless the server checks its frames (tests)
	root   *sandbox.Root      // the server's working folder, to check working_folder
	start  bool               // send run_start (--loom-run-start)
	specs  []tools.Spec       // the tools a run gets, sorted by name (the server's)

	workers drain.Group // one per connection's run worker

	mu    sync.Mutex
	runs  map[string]runRef // wire run id -> its run, for runs streamed by this handler's sockets
	order []string          // keys of runs, oldest first
}

// runRef is a run as the core knows it.
type runRef struct {
	thread string
	run    string // the core's run id
}

// New returns a Handler. Shutdown ends its connections' streams.
func New(env protocol.Env) (*Handler, error) {
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if env.Workdir == nil {
		return nil, errors.New("loom: no working folder")
	}
	conn := env.ConnOptions(Name, log)
	return &Handler{core: env.Core, conns: env.Conns, conn: conn, log: log,
		verify: env.Verifier(Name, loomapi.ValidateOutbound), root: env.Workdir, specs: env.Tools, start: env.Loom.RunStart,
		runs: map[string]runRef{}}, nil
}

// ServeHTTP upgrades to a WebSocket and serves it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	wsconn.Start(w, r, h.conns, h.conn, func(ctx context.Context, c *wsconn.Conn) error {
		s := &session{h: h, c: c, log: logs.For(ctx, h.log), who: identity.FromContext(ctx).ID}
		return protocol.Session{Watch: s.open, Handle: s.handle, ShuttingDown: func() {
			s.send(errorFrame("", "the server is shutting down; try again shortly"))
		}}.Serve(ctx, c, &h.workers)
	})
}

// session is one connection.
type session struct {
	h   *Handler
	c   *wsconn.Conn
	log logs.Lazy // the handler's, with the connection's id
	who string    // the principal: the runs of other sockets it may name are its own

	mu     sync.Mutex
	active map[string]runRef // this socket's posted runs that have not ended, by wire id; nil while none
	// The run worker runs only while runs wait or run: an idle socket
	// holds no goroutine for it.
	wctx    context.Context // the worker's: ends with the reader, or at shutdown
	jobs    []runJob        // run requests waiting for the worker
	working bool            // a worker runs
	stopped bool            // no worker starts any more: the socket ended, or a run failed
	workers sync.WaitGroup
}

// runJob is a run request, checked and waiting to run.
type runJob struct {
	id     string // the run id on the wire
	thread string
	text   string
	agent  string
	opts   event.RunOptions
}

var _ loomapi.Handler = (*session)(nil)

// open starts the connection with the worker's context; the wait it
// returns stops the worker and waits for it.
func (s *session) open(ctx context.Context) (wait func()) {
	s.wctx = ctx
	return func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.workers.Wait()
	}
}

// queue queues a run request for the worker, and starts the worker unless
// it runs; false means maxQueuedRuns already wait.
func (s *session) queue(j runJob) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.jobs) >= maxQueuedRuns {
		return false
	}
	s.jobs = append(s.jobs, j)
	if !s.working && !s.stopped {
		s.working = true
		s.workers.Add(1)
		go func() {
			defer s.workers.Done()
			s.work(s.wctx)
		}()
	}
	return true
}

// next takes the next run request; false when none waits, and the worker
// ends.
func (s *session) next() (runJob, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.jobs) == 0 || s.stopped {
		s.working = false
		s.jobs = nil
		return runJob{}, false
	}
	j := s.jobs[0]
	s.jobs[0] = runJob{}
	s.jobs = s.jobs[1:]
	return j, true
}

// work runs the socket's runs one at a time, until none waits. A run that
// fails closes the socket after its error frame, as the original server
// did, and no run after it starts.
func (s *session) work(ctx context.Context) {
	for ctx.Err() == nil {
		j, ok := s.next()
		if !ok {
			return
		}
		if !s.execute(ctx, j) {
			s.c.Finish("run failed")
			s.mu.Lock()
			s.stopped = true
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	s.working = false
	s.mu.Unlock()
}

// execute posts a run's message and streams the run until it ends. It
// reports false when the run failed (or could not start).
func (s *session) execute(ctx context.Context, j runJob) bool {
	// Follow first, so that no event of the run can come before the follow.
	f, err := protocol.Follow(ctx, s.h.core, j.thread, protocol.FromEnd)
	if err != nil {
		if ctx.Err() != nil {
			return true
		}
		s.send(errorFrame(j.id, s.h.message(err, "start the run")))
		return false
	}
	defer f.Close()
	posted, err := s.h.core.Post(ctx, j.thread, runs.Input{Text: j.text, Interactive: true, Options: j.opts})
	if err != nil {
		if ctx.Err() != nil {
			return true
		}
		s.send(errorFrame(j.id, s.h.message(err, "start the run")))
		return false
	}
	ref := runRef{thread: j.thread, run: posted.Run}
	s.track(j.id, ref)
	defer s.untrack(j.id)
	s.h.track(s.who, j.id, ref)
	var vlog *slog.Logger // the run's debug log, when it is verbose
	if j.opts.Verbose {
		vlog = slog.New(verbose{s.log.L().Handler()}).With("protocol", Name, "run", j.id, "thread", j.thread, "core_run", posted.Run)
		vlog.Debug("loom: run posted", "agent", j.agent, "strategy", j.opts.Strategy, "folder", j.opts.Folder, "queued", posted.Queued)
	}
	p := newProjector(j.id, j.thread, j.agent, j.text, s.h.start)
	err = f.Run(ctx, func(e event.Event) error {
		if e.Run != posted.Run {
			return nil
		}
		frames := p.Project(e)
		if vlog != nil {
			vlog.Debug("loom: run event", "seq", e.Seq, "type", string(e.Type()), "frames", len(frames))
		}
		for _, m := range frames {
			s.send(m)
		}
		if p.Ended() != running {
			return protocol.ErrStop
		}
		return nil
	})
	if p.Ended() != running {
		s.h.untrack(s.who, j.id, ref)
	}
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.L().Error("loom: following the run failed", "run", j.id, "thread", j.thread, "err", err)
		s.send(errorFrame(j.id, "the run's events stopped: internal error"))
		return false
	case p.Ended() == failed:
		return false
	}
	return true
}

func (s *session) handle(ctx context.Context, frame []byte) {
	m, err := loomapi.Decode(frame)
	if err != nil {
		// "parse error: " as the original server said (its clients match on it).
		s.send(errorFrame(frameID(frame), "parse error: "+s.h.message(err, "read the request")))
		return
	}
	if err := loomapi.Dispatch(ctx, s, m); err != nil {
		s.send(errorFrame(frameID(frame), s.h.message(err, "handle the request")))
	}
}

func (s *session) track(id string, ref runRef) {
	s.mu.Lock()
	if s.active == nil {
		s.active = map[string]runRef{}
	}
	s.active[id] = ref
	s.mu.Unlock()
}

func (s *session) untrack(id string) {
	s.mu.Lock()
	delete(s.active, id)
	s.mu.Unlock()
}

func (s *session) ref(id string) (runRef, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref, ok := s.active[id]
	return ref, ok
}

// runKey is the key of a principal's run among the runs of every socket:
// run ids are the clients', so two principals may both choose "r1", and
// neither may reach the other's.
func runKey(who, id string) string { return who + "\x00" + id }

func (h *Handler) track(who, id string, ref runRef) {
	key := runKey(who, id)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.runs[key]; !ok {
		h.order = append(h.order, key)
	}
	h.runs[key] = ref
	for len(h.order) > maxTracked {
		delete(h.runs, h.order[0])
		h.order = h.order[1:]
	}
}

// untrack forgets a run that ended, unless its id names a newer run.
func (h *Handler) untrack(who, id string, ref runRef) {
	key := runKey(who, id)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runs[key] == ref {
		delete(h.runs, key)
		if i := slices.Index(h.order, key); i >= 0 {
			h.order = slices.Delete(h.order, i, i+1)
		}
	}
}

func (h *Handler) ref(who, id string) (runRef, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ref, ok := h.runs[runKey(who, id)]
	return ref, ok
}

func (s *session) send(m loomapi.Outbound) {
	b, err := loomapi.Encode(m)
	if err != nil {
		s.log.L().Error("loom: encode a frame", "type", m.MessageType(), "err", err)
		return
	}
	if s.h.verify != nil {
		s.h.verify(b)
	}
	s.c.Send(b)
}

// message is the text of the error frame that answers err: the protocol's
// one mapping of the error vocabulary. A frame that fails validation is
// answered with `<JSON Pointer>: <reason>`; internal causes go to the
// log, not to the client.
func (h *Handler) message(err error, what string) string {
	if we, ok := wire.AsError(err); ok {
		return we.Error()
	}
	perr := protocol.AsError(err)
	switch perr.Code {
	case protocol.CodeUnavailable:
		return "the server is shutting down; try again shortly"
	case protocol.CodeInternal:
		h.log.Error("loom: could not "+what, "err", err)
		return "could not " + what + ": internal error"
	}
	return perr.Message
}

// frameID is the id of a frame that could not be handled, when it has a
// string one.
func frameID(frame []byte) string {
	var v struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(frame, &v) != nil {
		return ""
	}
	id, _ := v.ID.(string)
	return id
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// verbose is a slog.Handler that logs every level: a run whose request
// asked for verbose logging is logged at debug level whatever the
// server's level.
type verbose struct{ slog.Handler }

func (verbose) Enabled(context.Context, slog.Level) bool { return true }

func (v verbose) WithAttrs(as []slog.Attr) slog.Handler { return verbose{v.Handler.WithAttrs(as)} }

func (v verbose) WithGroup(name string) slog.Handler { return verbose{v.Handler.WithGroup(name)} }
