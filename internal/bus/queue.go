package bus

import (
	"context"
	"sync"

	"github.com/agentwire/agentwire/internal/event"
)

// Queue is a bounded FIFO of events for one subscriber: backends fill it
// from their delivery path without ever waiting, and it implements
// Subscription's Next. It holds memory for the events actually waiting, not
// for its limit, so a server can keep many idle subscriptions with a
// generous limit.
type Queue struct {
	limit  int
	ready  chan struct{} // capacity 1: "something changed"
	notify func()        // see Notify

	mu    sync.Mutex
	items []event.Event // waiting events are items[head:]
	head  int
	ended bool
	err   error
}

// NewQueue returns an empty queue that holds at most limit events.
func NewQueue(limit int) *Queue {
	return &Queue{limit: limit, ready: make(chan struct{}, 1)}
}

// Push appends events, or ends the queue with ErrSlowConsumer when they do
// not all fit. It reports whether the queue is still open.
func (q *Queue) Push(events []event.Event) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return false
	}
	if len(q.items)-q.head+len(events) > q.limit {
		q.endLocked(ErrSlowConsumer)
		return false
	}
	if q.head > 0 && len(q.items)+len(events) > cap(q.items) {
		// Reuse the space already consumed before growing.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, events...)
	q.signal()
	return true
}

// Offer appends e when it fits and drops it otherwise, leaving the queue
// open: for previews, which a subscriber may miss.
func (q *Queue) Offer(e event.Event) (taken bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended || len(q.items)-q.head >= q.limit {
		return false
	}
	if q.head > 0 && len(q.items) == cap(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, e)
	q.signal()
	return true
}

// End ends the queue with err; Next returns err from then on, dropping what
// is still queued. Only the first End counts.
func (q *Queue) End(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.endLocked(err)
}

func (q *Queue) endLocked(err error) {
	if q.ended {
		return
	}
	q.ended, q.err = true, err
	q.items, q.head = nil, 0
	q.signal()
}

func (q *Queue) signal() {
	if q.notify != nil {
		q.notify() // a consumer told this way reads with TryNext
		return
	}
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Notify implements Subscription's Notify.
func (q *Queue) Notify(fn func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.notify = fn
}

// TryNext implements Subscription's TryNext.
func (q *Queue) TryNext() (event.Event, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return event.Event{}, false, q.err
	}
	if q.head == len(q.items) {
		return event.Event{}, false, nil
	}
	return q.popLocked(), true, nil
}

// popLocked takes the oldest waiting event. q.mu is held.
func (q *Queue) popLocked() event.Event {
	e := q.items[q.head]
	q.items[q.head] = event.Event{} // let the payload go
	q.head++
	if q.head == len(q.items) {
		if cap(q.items) > keptCap {
			// A burst grew the queue: an idle subscriber does not keep
			// its space (a session's queue would otherwise hold its
			// longest burst for as long as it lives).
			q.items, q.head = nil, 0
		} else {
			q.items, q.head = q.items[:0], 0
		}
	}
	return e
}

// keptCap is the most space (in events) an empty queue keeps for the next
// ones: enough for the events a subscriber that keeps up has waiting.
const keptCap = 8

// Next returns the oldest queued event, waiting for one until ctx is done.
// Once the queue has ended it returns the error it ended with. Next is for
// one consumer at a time.
func (q *Queue) Next(ctx context.Context) (event.Event, error) {
	for {
		q.mu.Lock()
		if q.ended {
			err := q.err
			q.mu.Unlock()
			return event.Event{}, err
		}
		if q.head < len(q.items) {
			e := q.popLocked()
			q.mu.Unlock()
			return e, nil
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
			return event.Event{}, ctx.Err()
		}
	}
}
