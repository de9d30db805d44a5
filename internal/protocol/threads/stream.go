package threads

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/sse"
	"github.com/agentwire/agentwire/internal/thread"
)

// view is what a stream shows of its thread: the POST stream shows one run,
// the resume stream the whole thread.
type view interface {
	// show returns the SSE event a log event shows as, if any, and whether
	// the stream ends after it.
	show(e event.Event) (out Event, ok, end bool)
	// quiet returns the event that ends the stream when it has delivered
	// every committed event (the last at seq) and the thread has no active
	// run, so that nothing more will come.
	quiet(seq int64) Event
}

// runView is a POST stream: the events of the run that the posted message
// starts (at once or when the runs before it end), until that run ends.
type runView struct {
	run  string
	proj *projector
	seen bool // an event of the run was delivered
}

func (v *runView) show(e event.Event) (Event, bool, bool) {
	if e.Run != v.run {
		return Event{}, false, false
	}
	v.seen = true
	return v.proj.project(e)
}

func (v *runView) quiet(seq int64) Event {
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

func (v *threadView) show(e event.Event) (Event, bool, bool) { return v.proj.project(e) }

func (v *threadView) quiet(seq int64) Event { return doneEvent(seq) }

// stream is one open text/event-stream response. Only its handler's
// goroutine uses it.
type stream struct {
	h         *Handler
	rc        *http.ResponseController
	sw        *sse.Writer
	thread    string
	delivered int64 // seq of the last log event taken from the feed
	beat      *time.Timer
}

// stream answers 200 and streams what v shows of the thread's events from
// feed, a subscription after seq after, until v ends it, the client goes
// away, or Shutdown. When quietAt is not negative, the stream checks
// whether the thread is quiet (see view.quiet) as soon as it has delivered
// seq quietAt; it checks again whenever it has been idle for a heartbeat.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, id uuid.UUID, feed protocol.Feed, after, quietAt int64, v view) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.abort, cancel)()

	s := &stream{
		h: h, rc: http.NewResponseController(w), sw: sse.NewWriter(w),
		thread: id.String(), delivered: after, beat: time.NewTimer(h.opts.Heartbeat),
	}
	defer s.beat.Stop()
	// The connection may carry another request after this one; it must
	// not inherit the stream's last write deadline.
	defer s.rc.SetWriteDeadline(time.Time{})

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.deadline()
	if err := s.flush(); err != nil {
		feed.Close()
		return
	}
	s.run(ctx, feed, v, quietAt)
}

func (s *stream) run(ctx context.Context, feed protocol.Feed, v view, quietAt int64) {
	defer func() { feed.Close() }()
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
		case e, ok := <-feed.Events():
			if !ok {
				next := s.resubscribe(ctx, feed)
				if next == nil {
					return
				}
				feed = next
				continue
			}
			s.delivered = e.Seq
			out, show, end := v.show(e)
			if show {
				if err := s.send(out); err != nil {
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
	// Active first: a run that starts after this check commits its first
	// event before LastSeq below can miss it.
	if s.h.core.Active(s.thread) != "" {
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

// resubscribe replaces a feed that ended. A feed ended for falling behind
// (thread.ErrSlowConsumer) resumes after the last event delivered; any
// other end is a failure, reported with an error event. It returns nil
// when the stream ends.
func (s *stream) resubscribe(ctx context.Context, feed protocol.Feed) protocol.Feed {
	err := feed.Err()
	feed.Close()
	if ctx.Err() != nil {
		return nil
	}
	if errors.Is(err, thread.ErrSlowConsumer) {
		next, serr := s.h.core.Subscribe(ctx, s.thread, s.delivered)
		if serr == nil {
			s.h.log.Info("threads: stream fell behind; resubscribed", "thread", s.thread, "after", s.delivered)
			return next
		}
		err = serr
	}
	if err == nil {
		err = errors.New("the feed ended")
	}
	s.fail("follow the thread", err)
	return nil
}

// fail logs why the stream cannot go on and tells the client with an
// error event whose id is the last event delivered, so that resuming from
// it loses nothing.
func (s *stream) fail(what string, err error) {
	s.h.log.Error("threads: stream: "+what, "thread", s.thread, "after", s.delivered, "err", err)
	_ = s.send(errorEvent(s.delivered, "The event stream failed; resume it with the last event id received."))
}

// send writes one event and flushes it. An event that does not match the
// document is logged and skipped rather than sent.
func (s *stream) send(e Event) error {
	raw, err := e.Encode()
	if err != nil {
		s.h.log.Error("threads: event skipped", "thread", s.thread, "id", e.ID, "err", err)
		return nil
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
