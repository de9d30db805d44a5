package threads

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/logs"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/sse"
	"github.com/agentwire/agentwire/internal/thread"
)

// view is what a stream shows of its thread: the POST stream shows one run,
// the resume stream the whole thread.
type view interface {
	// show reports whether e shows as an SSE event, and whether the
	// stream ends after it.
	show(e event.Event) (ok, end bool)
	// render returns the SSE event e shows as; it depends on e alone.
	render(e event.Event) threadsapi.StreamEvent
	// quiet returns the event that ends the stream when it has delivered
	// every committed event (the last at seq) and the thread has no active
	// run, so that nothing more will come.
	quiet(seq int64) threadsapi.StreamEvent
}

// runView is a POST stream: the events of the run that the posted message
// starts (at once or when the runs before it end), until that run ends.
type runView struct {
	*projector
	run  string
	seen bool // an event of the run was delivered
}

func (v *runView) show(e event.Event) (ok, end bool) {
	if e.Run != v.run {
		return false, false
	}
	v.seen = true
	return v.shows(e)
}

func (v *runView) quiet(seq int64) threadsapi.StreamEvent {
	if !v.seen {
		// A queued message whose turn never came: the run before it was
		// cancelled, which drops the queue, or the server is stopping.
		return errorEvent(seq, "The message was dropped before its run started.")
	}
	// A run that ended without run.completed, run.failed or run.cancelled
	// (its journal failed); the log is all there is.
	return errorEvent(seq, "The run stopped without an end; the thread's history shows how far it got.")
}

// threadView is a resume stream: every run's events, until the first run
// end, or done at once when nothing is going on.
type threadView struct{ *projector }

func (v threadView) show(e event.Event) (ok, end bool) { return v.shows(e) }

func (threadView) quiet(seq int64) threadsapi.StreamEvent { return doneEvent(seq) }

// stream is one open text/event-stream response. Only its handler's
// goroutine uses it.
type stream struct {
	h         *Handler
	log       logs.Lazy // the handler's, with the request's conn id
	rc        *http.ResponseController
	sw        *sse.Writer
	thread    string
	delivered int64 // seq of the last log event taken from the feed
	// known is the seq the client named in Last-Event-ID, or -1: an
	// event the stream makes up (quiet, fail) carries an id only when it
	// is past this, so that no id the client had comes to it again.
	known int64
	// deltas keeps the message text sent ahead of its commit (previews)
	// from being sent again when the commit arrives.
	deltas protocol.Deltas
	frames *protocol.ThreadFrames[sharedKey, sse.Frame] // what the thread's streams share
	// wake is all the stream waits for: the pull, the heartbeat timer, the
	// client's going and Shutdown each signal it.
	wake    waker
	beat    *time.Timer // fires once a heartbeat after the last flush, or later
	beatDue atomic.Bool
	flushed time.Time // when the stream last flushed
	until   time.Time // the write deadline set last
	unsent  int       // events written since the last flush
}

// waker is a stream's one wake-up channel: a signal sent when none is
// waiting, so that whoever signals never blocks and the stream, once
// awake, looks at everything.
type waker chan struct{}

func newWaker() waker { return make(waker, 1) }

func (w waker) kick() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// flushEvery bounds the events a stream writes before it flushes, so that a
// replay of many events reaches the client in pieces, each under its own
// write deadline.
const flushEvery = 64

// stream answers 200 and streams what v shows of the thread's events from
// p, which follows the thread after seq after and signals wake, until v
// ends it, the client goes away, or Shutdown. known is the position the
// client named (Last-Event-ID), with a negative Seq when it named none.
// When quietAt is not
// negative, the stream checks whether the thread is quiet (see view.quiet)
// as soon as it has delivered seq quietAt; it checks again whenever it has
// been idle for a heartbeat.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, id uuid.UUID, p *thread.Pull, wake waker, from protocol.Position, known, quietAt int64, v view) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.abort, cancel)()
	defer h.opts.Metrics.ConnOpened(Name)()

	s := &stream{
		h: h, log: logs.For(r.Context(), h.log), rc: http.NewResponseController(w), sw: sse.NewWriter(w),
		thread: id.String(), delivered: from.Seq, known: known, deltas: from.Resume(), wake: wake,
	}
	s.frames = h.frames.Join(s.thread)
	defer h.frames.Leave(s.frames)
	s.beat = time.AfterFunc(h.opts.Heartbeat, func() {
		s.beatDue.Store(true)
		wake.kick()
	})
	defer s.beat.Stop()
	// The connection may carry another request after this one; it must
	// not inherit the stream's last write deadline.
	defer s.rc.SetWriteDeadline(time.Time{})
	// A request body's read deadline (the server's --body-timeout) must
	// not end a stream that outlives it: the body has been read by now.
	_ = s.rc.SetReadDeadline(time.Time{})

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.deadline()
	if err := s.flush(); err != nil {
		p.Close()
		return
	}
	s.run(ctx, p, v, quietAt)
}

func (s *stream) run(ctx context.Context, p *thread.Pull, v view, quietAt int64) {
	defer p.Close()
	defer context.AfterFunc(ctx, s.wake.kick)()
	defer context.AfterFunc(s.h.stopping, s.wake.kick)()
	drainTo := int64(-1) // once stopping: the log's last seq to deliver before ending
	for {
		if s.deliver(ctx, p, v, drainTo) || ctx.Err() != nil {
			return
		}
		if drainTo < 0 && s.h.stopping.Err() != nil {
			last, err := s.h.core.LastSeq(ctx, s.thread)
			if err != nil {
				return
			}
			drainTo = last
		}
		if drainTo >= 0 && s.delivered >= drainTo {
			return
		}
		if quietAt >= 0 && s.delivered >= quietAt {
			quietAt = -1
			if s.endIfQuiet(ctx, v) {
				return
			}
		}
		if s.beatDue.Swap(false) {
			idle := time.Since(s.flushed)
			if idle < s.h.opts.Heartbeat {
				s.beat.Reset(s.h.opts.Heartbeat - idle)
			} else {
				if err := s.ping(); err != nil {
					return
				}
				if s.endIfQuiet(ctx, v) {
					return
				}
				s.beat.Reset(s.h.opts.Heartbeat)
			}
		}
		<-s.wake
	}
}

// deliver writes what the pull has waiting, up to seq drainTo when that is
// not negative, flushing after every flushEvery events and at the end. It
// reports whether the stream is over: its view ended it, the follow
// failed, or the client is gone.
func (s *stream) deliver(ctx context.Context, p *thread.Pull, v view, drainTo int64) bool {
	for drainTo < 0 || s.delivered < drainTo {
		e, ok, err := p.Next()
		if err != nil {
			if ctx.Err() == nil {
				s.fail("follow the thread", err)
			}
			return true
		}
		if !ok {
			break
		}
		end, err := s.show(e, v)
		if err != nil {
			return true
		}
		if end {
			_ = s.flush()
			return true
		}
		if s.unsent >= flushEvery {
			if err := s.flush(); err != nil {
				return true
			}
		}
	}
	if s.unsent > 0 {
		return s.flush() != nil
	}
	return false
}

// show writes what v shows of e, without flushing it, and reports whether
// the stream ends after it.
func (s *stream) show(e event.Event, v view) (end bool, err error) {
	e, show, cut := s.deltas.Show(e)
	if e.Preview == 0 {
		s.delivered = e.Seq
	}
	if !show {
		return false, nil
	}
	show, end = v.show(e)
	if !show {
		return end, nil
	}
	key := sharedKey{id: e.ID}
	if pos := s.deltas.Position(s.delivered); pos.Stream != "" || e.Preview != 0 {
		// Text ahead of the log: its id says how far ahead, and streams
		// that are as far ahead share it. (A preview has the id of the
		// delta that will commit it.)
		key.at, key.ahead = pos, true
	}
	// The rest of a delta partly sent ahead is this stream's own.
	if cut {
		return end, s.put(s.rendered(v, e, key))
	}
	f, ok := s.frames.Frame(key, func() (sse.Frame, bool) { return s.encode(s.rendered(v, e, key)) })
	if !ok {
		return end, nil
	}
	return end, s.putFrame(f)
}

// rendered is the SSE event e shows as on this stream: v's rendering, with
// the id of its position when it is ahead of the log.
func (s *stream) rendered(v view, e event.Event, key sharedKey) threadsapi.StreamEvent {
	out := v.render(e)
	if key.ahead {
		setEventID(&out, key.at.String())
	}
	return out
}

// encode encodes e for the wire. An event that does not match the
// document is logged and skipped (ok false) rather than sent.
func (s *stream) encode(e threadsapi.StreamEvent) (f sse.Frame, ok bool) {
	f, err := encodeFrame(e)
	if err != nil {
		s.log.L().Error("threads: event skipped", "thread", s.thread, "id", EventID(e), "err", err)
		return sse.Frame{}, false
	}
	return f, true
}

// endIfQuiet ends the stream with v.quiet when the thread has no active
// run and the stream has delivered its last event. It reports whether the
// stream ended.
func (s *stream) endIfQuiet(ctx context.Context, v view) bool {
	// Active first: a run that starts after this check claims the thread,
	// and commits its first event, before LastSeq below can miss it.
	active, err := s.h.core.Active(ctx, s.thread)
	if err != nil {
		if ctx.Err() == nil {
			s.fail("read the thread's active run", err)
		}
		return true
	}
	if active != "" {
		return false
	}
	last, err := s.h.core.LastSeq(ctx, s.thread)
	if err != nil {
		if ctx.Err() == nil {
			s.fail("read the thread's last seq", err)
		}
		return true
	}
	if last > s.delivered {
		return false
	}
	_ = s.send(s.madeUp(v.quiet(s.delivered)))
	return true
}

// madeUp is e, an event the stream makes up at its position rather than
// projects from the log, without its id when the client already had that
// position: a client that resumed a quiet thread after its last event is
// told done, but not at an id it had.
func (s *stream) madeUp(e threadsapi.StreamEvent) threadsapi.StreamEvent {
	if s.delivered <= s.known {
		setEventID(&e, "")
	}
	return e
}

// fail logs why the stream cannot go on and tells the client with an
// error event whose id is the last event delivered, so that resuming from
// it loses nothing.
func (s *stream) fail(what string, err error) {
	if protocol.AsError(err).Code == protocol.CodeNotFound {
		// The thread was nobody's when the stream opened, and another
		// principal's first event made it theirs.
		_ = s.send(s.madeUp(errorEvent(s.delivered, "thread not found")))
		return
	}
	s.log.L().Error("threads: stream: "+what, "thread", s.thread, "after", s.delivered, "err", err)
	_ = s.send(s.madeUp(errorEvent(s.delivered, "The event stream failed; resume it with the last event id received.")))
}

// put writes one event without flushing it (see encode).
func (s *stream) put(e threadsapi.StreamEvent) error {
	if f, ok := s.encode(e); ok {
		return s.putFrame(f)
	}
	return nil
}

// putFrame writes one encoded event without flushing it; the first event
// after a flush moves the write deadline.
func (s *stream) putFrame(f sse.Frame) error {
	if s.h.verify != nil {
		s.h.verify(f.Bytes())
	}
	if s.unsent == 0 {
		s.deadline()
	}
	s.unsent++
	s.h.counted.Sent()
	return s.sw.Frame(f)
}

// send writes one event and flushes it.
func (s *stream) send(e threadsapi.StreamEvent) error {
	if err := s.put(e); err != nil {
		return err
	}
	return s.flush()
}

// ping writes the heartbeat comment.
func (s *stream) ping() error {
	s.deadline()
	if err := s.sw.Comment("ping"); err != nil {
		return err
	}
	return s.flush()
}

// flush sends what was written.
func (s *stream) flush() error {
	s.unsent = 0
	s.flushed = time.Now()
	return s.rc.Flush()
}

// deadline bounds the writes that follow: it moves the write deadline to
// the write timeout from now, unless the one set is still more than half
// of that away (moving a deadline costs more than the write of a small
// event), so that a write that blocks is cut after between half the
// timeout and all of it.
func (s *stream) deadline() {
	now := time.Now()
	if s.until.Sub(now) > s.h.opts.WriteTimeout/2 {
		return
	}
	s.until = now.Add(s.h.opts.WriteTimeout)
	// ErrNotSupported (a ResponseWriter without deadlines) leaves writes
	// unbounded, which only wrappers in tests do.
	_ = s.rc.SetWriteDeadline(s.until)
}
