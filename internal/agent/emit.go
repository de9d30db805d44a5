package agent

import (
	"context"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/event"
)

// emitter writes a run's events to its journal in the background, batching
// whatever accumulates while an append is in flight into the next append.
// Streaming deltas therefore cost one commit per batch, not per chunk, and
// the model stream is never held up by the store; with coalescing on,
// consecutive deltas of one message in a batch become one event (coalesce).
// Order is preserved.
//
// Events reach clients once committed, since the journal publishes after
// commit, with one exception: with previews on (Config.LiveDeltas), a delta
// (or a mark, see mark) emitted while every earlier event of the run is
// committed or went out ahead itself goes to the thread's live subscribers
// at once, as a preview, and its commit may wait up to the window for more
// deltas of its stream, so that a streamed reply costs the log an event
// per window instead of one per chunk. Each delta then carries its offset
// in its stream, by which consumers tell the bytes they were shown ahead
// from those they were not; a mark's commit is known by its id.
type emitter struct {
	j           Journal
	ctx         context.Context // for appends: outlives the run's cancellation
	thread, run string
	onFail      func(error)     // called once, when the first append fails
	coalesce    bool            // merge the deltas of a batch (Config.CoalesceDeltas)
	runCtx      context.Context // the run's own: its cause says whether it was superseded or undone
	preview     func(event.Event)
	window      time.Duration // how long a previewed delta may wait for its commit
	unwatched   time.Duration // the same while no subscriber waits for commits
	waits       func() bool   // whether a subscriber waits for commits (Journal.WaitsForCommits)

	mu   sync.Mutex
	q    []item
	err  error
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
	// With previews on:
	offsets map[string]int64 // the bytes emitted so far, per delta stream
	base    int64            // the seq of the run's last committed event (or of the one before the run)
	holding int              // events queued or being appended that are neither deltas nor previewed
	// Deltas queued or being appended: those previewed (all of stream
	// aheadStream, so that consumers are ahead of the log in one stream
	// at most) and those not.
	ahead       int
	aheadStream string
	unpreviewed int
	urgent      bool          // the queue holds something to append at once
	first       time.Time     // when the oldest queued item was queued
	pending     int           // the bytes of delta text queued
	armed       time.Duration // while the loop waits out a window for the queue: that window
}

// item is an event to append, or (with flushed set) a flush marker.
type item struct {
	ev        event.Event
	flushed   chan error
	delta     bool // ev is a delta
	previewed bool // ev has gone out as a preview (a delta or a mark)
}

func newEmitter(ctx context.Context, j Journal, thread, run string, coalesce bool, onFail func(error)) *emitter {
	e := &emitter{
		j: j, ctx: context.WithoutCancel(ctx), runCtx: ctx, thread: thread, run: run, onFail: onFail, coalesce: coalesce,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	go e.loop()
	return e
}

// previewing turns previews on: deltas (and marks) go to pv ahead of their
// commit, which may then wait up to window, or up to unwatched while none
// of the thread's subscribers waits for commits; after, when not zero, is
// the seq of the thread's event before the run's first. Call it before the
// first emit.
func (e *emitter) previewing(pv Journal, window, unwatched time.Duration, after int64) {
	e.preview, e.waits = pv.Preview, pv.WaitsForCommits
	e.window, e.unwatched = window, max(window, unwatched)
	e.offsets, e.base = map[string]int64{}, after
}

// windowNow is how long previewed deltas may wait for their commit now.
// It is asked at every wake: a subscriber that waits for commits joining
// mid-message shortens the wait at the next delta.
func (e *emitter) windowNow() time.Duration {
	if e.unwatched > e.window && !e.waits() {
		return e.unwatched
	}
	return e.window
}

// mark reports whether p is a mark: an event that starts something and
// shows as nothing by itself on the protocols that take previews, and so
// may be previewed like a delta (consumers know its commit by its id),
// letting the deltas that follow it go out without waiting for its
// commit.
func mark(p event.Payload) bool {
	switch p.(type) {
	case event.RunStarted, event.NodeEntered, event.MessageStarted, event.ToolCallStarted:
		return true
	}
	return false
}

// emit queues p as the run's next event. It fails once an append has failed.
func (e *emitter) emit(p event.Payload) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	it := item{ev: event.New(e.thread, e.run, p)}
	if e.preview != nil {
		if d, ok := event.AsDelta(p); ok {
			it.delta = true
			off := e.offsets[d.Stream]
			e.offsets[d.Stream] = off + int64(len(d.Text))
			it.ev.Payload = event.WithText(p, d.Text, off)
			e.pending += len(d.Text)
			if e.unpreviewed == 0 && e.previewable(d.Stream) {
				e.send(&it, d.Stream)
			} else {
				// Its place comes once what is before it is committed,
				// which should not wait for the window.
				e.unpreviewed++
				e.urgent = true
			}
		} else if mark(p) && e.unpreviewed == 0 && e.holding == 0 && e.base > 0 {
			pv := it.ev
			pv.Preview = e.base
			e.preview(pv)
			it.previewed = true
		} else {
			e.holding++
			e.urgent = true
		}
		if len(e.q) == 0 {
			e.first = time.Now()
		}
	}
	e.q = append(e.q, it)
	if e.mustLook() {
		e.signal()
	}
	return nil
}

// mustLook reports whether the loop has to look at the queue now, after
// an emit: unless it is waiting out a window for what is queued, and
// nothing queued since cuts that wait short (something urgent, enough
// text, or a subscriber that waits for commits arriving while the longer
// window of an unwatched thread runs), a delta streamed inside the window
// wakes no goroutine. e.mu is held.
func (e *emitter) mustLook() bool {
	return e.armed == 0 || e.urgent || e.pending >= maxCoalesced || (e.armed > e.window && e.windowNow() < e.armed)
}

// previewable reports whether a delta of stream may go out as a preview
// once every delta before it has: when all the events before it that are
// not deltas are committed (so that the preview has a place after the
// run's last committed event) and no delta of another stream waits for
// its commit.
func (e *emitter) previewable(stream string) bool {
	return e.holding == 0 && e.base > 0 && (e.ahead == 0 || e.aheadStream == stream)
}

// send previews it, a delta of stream, after the run's last committed
// event.
func (e *emitter) send(it *item, stream string) {
	pv := it.ev
	pv.Preview = e.base
	e.preview(pv)
	it.previewed = true
	e.ahead++
	e.aheadStream = stream
}

// flush waits until every event emitted so far is committed.
func (e *emitter) flush() error {
	ch := make(chan error, 1)
	e.mu.Lock()
	if e.err != nil {
		e.mu.Unlock()
		return e.err
	}
	e.q = append(e.q, item{flushed: ch})
	e.urgent = true
	e.signal()
	e.mu.Unlock()
	return <-ch
}

func (e *emitter) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// close flushes and stops the writer goroutine.
func (e *emitter) close() error {
	err := e.flush()
	close(e.quit)
	<-e.done
	return err
}

func (e *emitter) loop() {
	defer close(e.done)
	var timer *time.Timer
	var expired <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-e.wake:
		case <-expired:
			expired = nil
		case <-e.quit:
			return
		}
		e.mu.Lock()
		if e.preview != nil && len(e.q) > 0 && !e.urgent && e.pending < maxCoalesced {
			// Only previewed deltas wait: give their stream the rest of
			// the window to add to them.
			window := e.windowNow()
			if wait := window - time.Since(e.first); wait > 0 {
				e.armed = window
				e.mu.Unlock()
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				expired = timer.C
				continue
			}
		}
		batch := e.q
		e.q = nil
		e.urgent, e.pending, e.armed = false, 0, 0
		err := e.err
		e.mu.Unlock()

		var events []event.Event
		for _, it := range batch {
			if it.flushed == nil {
				events = append(events, it.ev)
			}
		}
		if e.coalesce {
			events = coalesce(events)
		}
		if superseded(e.runCtx) {
			events = nil // another server ended the run, or its start was undone
		}
		var committed []event.Event
		if len(events) > 0 && err == nil {
			if committed, err = e.j.Append(e.ctx, events...); err != nil {
				e.mu.Lock()
				e.err = err
				e.mu.Unlock()
				if e.onFail != nil {
					e.onFail(err)
				}
			}
		}
		if e.preview != nil {
			e.committed(batch, committed)
		}
		for _, it := range batch {
			if it.flushed != nil {
				it.flushed <- err
			}
		}
	}
}

// committed notes the end of the append of batch, which committed events
// (none when it failed or was dropped). Once nothing else waits, the
// deltas queued behind it go out as previews, in order, as long as they
// may.
func (e *emitter) committed(batch []item, events []event.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, it := range batch {
		switch {
		case it.flushed != nil:
		case !it.delta:
			if !it.previewed {
				e.holding--
			}
		case it.previewed:
			e.ahead--
		default:
			e.unpreviewed--
		}
	}
	if n := len(events); n > 0 {
		e.base = events[n-1].Seq
	}
	if e.err != nil {
		return
	}
	flushing := false
	for i := range e.q {
		it := &e.q[i]
		flushing = flushing || it.flushed != nil
		if it.flushed != nil || it.previewed {
			continue
		}
		if !it.delta {
			return // an event that waits for its commit: what follows waits too
		}
		d, _ := event.AsDelta(it.ev.Payload)
		if !e.previewable(d.Stream) {
			return
		}
		e.unpreviewed--
		e.send(it, d.Stream)
	}
	// Everything queued went out ahead: its commit may wait the window.
	e.urgent = flushing || e.holding > 0
}

// maxCoalesced bounds the text one coalesced delta carries.
const maxCoalesced = 8 << 10

// coalesce merges each run of consecutive deltas to the same message,
// reasoning block or tool call into one delta, in place. Those deltas
// reach clients together anyway, at their batch's commit, so nothing waits
// longer for it, and one event costs the log, the bus and every subscriber
// less than several: under load, when commits take longer and batches
// grow, it saves the most. The merged event keeps the first one's id and
// time.
func coalesce(events []event.Event) []event.Event {
	out := events[:0]
	for _, ev := range events {
		if n := len(out); n > 0 {
			if merged, ok := mergeDelta(out[n-1].Payload, ev.Payload); ok {
				out[n-1].Payload = merged
				continue
			}
		}
		out = append(out, ev)
	}
	clear(events[len(out):])
	return out
}

// mergeDelta returns a followed by b as one delta when both are deltas of
// the same stream and the result stays within maxCoalesced.
func mergeDelta(a, b event.Payload) (event.Payload, bool) {
	switch a := a.(type) {
	case event.MessageDelta:
		if b, ok := b.(event.MessageDelta); ok && a.MessageID == b.MessageID && len(a.Text)+len(b.Text) <= maxCoalesced {
			return event.MessageDelta{MessageID: a.MessageID, Text: a.Text + b.Text, Offset: a.Offset}, true
		}
	case event.ReasoningDelta:
		if b, ok := b.(event.ReasoningDelta); ok && a.ReasoningID == b.ReasoningID && len(a.Text)+len(b.Text) <= maxCoalesced {
			return event.ReasoningDelta{ReasoningID: a.ReasoningID, Text: a.Text + b.Text, Offset: a.Offset}, true
		}
	case event.ToolCallDelta:
		if b, ok := b.(event.ToolCallDelta); ok && a.CallID == b.CallID && len(a.ArgumentsDelta)+len(b.ArgumentsDelta) <= maxCoalesced {
			return event.ToolCallDelta{CallID: a.CallID, ArgumentsDelta: a.ArgumentsDelta + b.ArgumentsDelta, Offset: a.Offset}, true
		}
	}
	return nil, false
}
