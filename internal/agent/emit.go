package agent

import (
	"context"
	"sync"

	"github.com/agentwire/agentwire/internal/event"
)

// emitter writes a run's events to its journal in the background, batching
// whatever accumulates while an append is in flight into the next append.
// Streaming deltas therefore cost one commit per batch, not per chunk, and
// the model stream is never held up by the store. Order is preserved.
// Events reach clients only once committed, since the journal publishes
// after commit.
type emitter struct {
	j           Journal
	ctx         context.Context // for appends: outlives the run's cancellation
	thread, run string

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

func newEmitter(ctx context.Context, j Journal, thread, run string) *emitter {
	e := &emitter{
		j: j, ctx: context.WithoutCancel(ctx), thread: thread, run: run,
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
		if len(events) > 0 && err == nil {
			if _, err = e.j.Append(e.ctx, events...); err != nil {
				e.mu.Lock()
				e.err = err
				e.mu.Unlock()
			}
		}
		for _, it := range batch {
			if it.flushed != nil {
				it.flushed <- err
			}
		}
	}
}
