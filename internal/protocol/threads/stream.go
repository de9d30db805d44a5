package threads

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/sse"
)

// view is what a stream shows of its thread: the POST stream shows one run,
// the resume stream the whole thread.
type view interface {
	// show returns the SSE event a log event shows as, if any, and whether
	// the stream ends after it.
	show(e event.Event) (out threadsapi.StreamEvent, ok, end bool)
	// quiet returns the event that ends the stream when it has delivered
	// every committed event (the last at seq) and the thread has no active
	// run, so that nothing more will come.
	quiet(seq int64) threadsapi.StreamEvent
}

// runView is a POST stream: the events of the run that the posted message
// starts (at once or when the runs before it end), until that run ends.
type runView struct {
	run  string
	proj *projector
	seen bool // an event of the run was delivered
}

func (v *runView) show(e event.Event) (threadsapi.StreamEvent, bool, bool) {
	if e.Run != v.run {
		return threadsapi.StreamEvent{}, false, false
	}
	v.seen = true
	return v.proj.project(e)
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
type threadView struct{ proj *projector }

func (v *threadView) show(e event.Event) (threadsapi.StreamEvent, bool, bool) {
	return v.proj.project(e)
}

func (v *threadView) quiet(seq int64) threadsapi.StreamEvent { return doneEvent(seq) }

// stream is one open text/event-stream response. Only its handler's
// goroutine uses it.
type stream struct {
	h         *Handler
	rc        *http.ResponseController
	sw        *sse.Writer
	thread    string
	delivered int64 // seq of the last log event taken from the feed
	// deltas keeps the message text sent ahead of its commit (previews)
	// from being sent again when the commit arrives.
	deltas protocol.Deltas
	beat   *time.Timer
}

// stream answers 200 and streams what v shows of the thread's events from
// f, which follows the thread after seq after, until v ends it, the client
// goes away, or Shutdown. When quietAt is not negative, the stream checks
// whether the thread is quiet (see view.quiet) as soon as it has delivered
// seq quietAt; it checks again whenever it has been idle for a heartbeat.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, id uuid.UUID, f *protocol.Follower, from protocol.Position, quietAt int64, v view) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.abort, cancel)()

	s := &stream{
		h: h, rc: http.NewResponseController(w), sw: sse.NewWriter(w),
		thread: id.String(), delivered: from.Seq, deltas: from.Resume(), beat: time.NewTimer(h.opts.Heartbeat),
	}
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
		f.Close()
		return
	}
	s.run(ctx, f, v, quietAt)
}

func (s *stream) run(ctx context.Context, f *protocol.Follower, v view, quietAt int64) {
	defer f.Close()
	stopping := s.h.stopping
	drainTo := int64(-1) // once stopping: the log's last seq to deliver before ending
	for {
		if drainTo >= 0 && s.delivered >= drainTo {
			return
		}
		if quietAt >= 0 && s.delivered >= quietAt {
			quietAt = -1
			if s.endIfQuiet(ctx, v) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-stopping:
			stopping = nil
			last, err := s.h.core.LastSeq(ctx, s.thread)
			if err != nil {
				return
			}
			drainTo = last
		case <-s.beat.C:
			if err := s.ping(); err != nil {
				return
			}
			if s.endIfQuiet(ctx, v) {
				return
			}
		case e, ok := <-f.Events():
			if !ok {
				// Resubscribes after the last event taken when the stream
				// fell behind; anything else ends it.
				if err := f.Resume(ctx); err != nil {
					if ctx.Err() == nil {
						s.fail("follow the thread", err)
					}
					return
				}
				continue
			}
			e, show, cut := s.deltas.Show(e)
			if e.Preview == 0 {
				s.delivered = e.Seq
			}
			if !show {
				continue
			}
			out, show, end := v.show(e)
			if show {
				var err error
				key := e.ID
				if pos := s.deltas.Position(s.delivered); pos.Stream != "" || e.Preview != 0 {
					// Text ahead of the log: its id says how far ahead,
					// and streams that are as far ahead share it. (A
					// preview has the id of the delta that will commit
					// it.)
					setEventID(&out, pos.String())
					key = "preview " + e.ID + " at " + pos.String()
				}
				if cut {
					// The rest of a delta partly sent ahead: this
					// stream's own.
					err = s.send(out)
				} else {
					err = s.sendShared(key, out)
				}
				if err != nil {
					return
				}
			}
			if end {
				return
			}
		}
	}
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
	_ = s.send(v.quiet(s.delivered))
	return true
}

// fail logs why the stream cannot go on and tells the client with an
// error event whose id is the last event delivered, so that resuming from
// it loses nothing.
func (s *stream) fail(what string, err error) {
	s.h.log.Error("threads: stream: "+what, "thread", s.thread, "after", s.delivered, "err", err)
	_ = s.send(errorEvent(s.delivered, "The event stream failed; resume it with the last event id received."))
}

// sendShared sends e, what the log event (or preview) key names shows as,
// encoding it only when no other stream has.
func (s *stream) sendShared(id string, e threadsapi.StreamEvent) error {
	if raw, ok := s.h.shared.get(id); ok {
		return s.write(raw)
	}
	raw, err := EncodeEvent(e)
	if err != nil {
		s.h.log.Error("threads: event skipped", "thread", s.thread, "id", EventID(e), "err", err)
		return nil
	}
	s.h.shared.put(id, raw)
	return s.write(raw)
}

// send writes one event and flushes it. An event that does not match the
// document is logged and skipped rather than sent.
func (s *stream) send(e threadsapi.StreamEvent) error {
	raw, err := EncodeEvent(e)
	if err != nil {
		s.h.log.Error("threads: event skipped", "thread", s.thread, "id", EventID(e), "err", err)
		return nil
	}
	return s.write(raw)
}

// write writes one encoded event and flushes it.
func (s *stream) write(raw sse.Event) error {
	if s.h.verify != nil {
		var b bytes.Buffer
		_ = sse.NewWriter(&b).Event(raw)
		s.h.verify(b.Bytes())
	}
	s.deadline()
	if err := s.sw.Event(raw); err != nil {
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

// flush sends what was written and restarts the idle timer.
func (s *stream) flush() error {
	err := s.rc.Flush()
	s.beat.Reset(s.h.opts.Heartbeat)
	return err
}

func (s *stream) deadline() {
	// ErrNotSupported (a ResponseWriter without deadlines) leaves writes
	// unbounded, which only wrappers in tests do.
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.h.opts.WriteTimeout))
}
