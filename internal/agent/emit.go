package agent

import (
	"context"
	"sync"

	"github.com/agentwire/agentwire/internal/event"
)

// emitter writes a run's events to its journal in the background, batching
// whatever accumulates while an append is in flight into the next append.
// Streaming deltas therefore cost one commit per batch, not per chunk, and
// the model stream is never held up by the store; with coalescing on,
// consecutive deltas of one message in a batch become one event (coalesce).
// Order is preserved.
// Events reach clients only once committed, since the journal publishes
// after commit.
type emitter struct {
	j           Journal
	ctx         context.Context // for appends: outlives the run's cancellation
	thread, run string
	onFail      func(error)     // called once, when the first append fails
	coalesce    bool            // merge the deltas of a batch (Config.CoalesceDeltas)
	runCtx      context.Context // the run's own: its cause says whether it was superseded

	mu   sync.Mutex
	q    []item
	err  error
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

// item is an event to append, or (with flushed set) a flush marker.
type item struct {
	ev      event.Event
	flushed chan error
}

func newEmitter(ctx context.Context, j Journal, thread, run string, coalesce bool, onFail func(error)) *emitter {
	e := &emitter{
		j: j, ctx: context.WithoutCancel(ctx), runCtx: ctx, thread: thread, run: run, onFail: onFail, coalesce: coalesce,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	go e.loop()
	return e
}

// emit queues p as the run's next event. It fails once an append has failed.
func (e *emitter) emit(p event.Payload) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	e.q = append(e.q, item{ev: event.New(e.thread, e.run, p)})
	e.signal()
	return nil
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
	for {
		select {
		case <-e.wake:
		case <-e.quit:
			return
		}
		e.mu.Lock()
		batch := e.q
		e.q = nil
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
			events = nil // another server ended the run
		}
		if len(events) > 0 && err == nil {
			if _, err = e.j.Append(e.ctx, events...); err != nil {
				e.mu.Lock()
				e.err = err
				e.mu.Unlock()
				if e.onFail != nil {
					e.onFail(err)
				}
			}
		}
		for _, it := range batch {
			if it.flushed != nil {
				it.flushed <- err
			}
		}
	}
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
			return event.MessageDelta{MessageID: a.MessageID, Text: a.Text + b.Text}, true
		}
	case event.ReasoningDelta:
		if b, ok := b.(event.ReasoningDelta); ok && a.ReasoningID == b.ReasoningID && len(a.Text)+len(b.Text) <= maxCoalesced {
			return event.ReasoningDelta{ReasoningID: a.ReasoningID, Text: a.Text + b.Text}, true
		}
	case event.ToolCallDelta:
		if b, ok := b.(event.ToolCallDelta); ok && a.CallID == b.CallID && len(a.ArgumentsDelta)+len(b.ArgumentsDelta) <= maxCoalesced {
			return event.ToolCallDelta{CallID: a.CallID, ArgumentsDelta: a.ArgumentsDelta + b.ArgumentsDelta}, true
		}
	}
	return nil, false
}
