// Package groupcommit batches appends from many callers into one transaction.
//
// A durable commit costs a disk flush (SQLite) or a WAL flush and a round trip
// (PostgreSQL) whatever it holds, so committing one caller's events at a time
// caps throughput at one flush per append. A Committer owns a single writer
// goroutine: it takes every append waiting when it is free, hands the whole
// batch to the backend's Flush to commit in one transaction, and then answers
// each caller. Under load batches grow by themselves; an idle store commits a
// lone append at once, so latency never waits for a timer.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/store"
)

// Append is one caller's events on their way into a batch.
type Append struct {
	// Thread is the thread the events go to.
	Thread string
	// Events are the caller's events, prepared: Thread, ID and Time set.
	// Flush sets each Seq.
	Events []event.Event
	// Data holds each event's encoded payload.
	Data [][]byte
	// Write is a write of the backend's own, which its Flush runs in the
	// batch's transaction: in place of Events (see Committer.Do), or as
	// their guard (see Committer.AppendIf), before them.
	Write any
	// Err is set by Flush when Write failed on its own, without failing the
	// batch (the backend undid just that write, and appended none of the
	// Events): the caller is told Err.
	Err error

	ctx  context.Context
	done chan error
}

// Flush commits batch in one transaction, assigning every event its Seq. It
// commits all of the batch or none of it, with one exception: a backend that
// takes writes of its own (Append.Write) may undo one that fails, set its
// Err, and commit the rest.
type Flush func(ctx context.Context, batch []*Append) error

// Options tune a Committer; the zero value is usable.
type Options struct {
	// MaxEvents bounds the events in one batch (default 2048). A single
	// append larger than that is still committed, alone.
	MaxEvents int
	// Timeout bounds one Flush (default 30s), so a hung database fails the
	// waiting appends instead of holding them forever.
	Timeout time.Duration
	// Observe, when set, is told each commit's events and duration (for
	// the server's metrics).
	Observe func(events int, took time.Duration)
}

// Committer runs the writer goroutine. Its zero value is not usable; call New.
type Committer struct {
	flush   Flush
	opts    Options
	reqs    chan *Append
	closing chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// New starts a Committer that commits batches with flush. Close stops it.
func New(flush Flush, opts Options) *Committer {
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = 2048
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	c := &Committer{
		flush: flush,
		opts:  opts,
		// Unbuffered: an append is either taken by the writer, and then
		// answered, or refused with ErrClosed; none is left in a buffer.
		reqs:    make(chan *Append),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go c.run()
	return c
}

// Append prepares events for thread, waits for the batch that commits them
// and returns them as committed. See store.Log.Append for the contract.
func (c *Committer) Append(ctx context.Context, thread string, events []event.Event) ([]event.Event, error) {
	a, err := Prepare(thread, events)
	if err != nil || a == nil {
		return nil, err
	}
	if err := c.submit(ctx, a); err != nil {
		return nil, err
	}
	return a.Events, nil
}

// Do commits write in the next batch, in the same transaction as the appends
// beside it, and reports its outcome. write is whatever the backend's Flush
// runs as Append.Write. Small writes that would each pay a commit of their
// own (a run's claim, a thread's owner) thus share one with everything else
// being written.
func (c *Committer) Do(ctx context.Context, write any) error {
	if write == nil {
		return errors.New("store: nothing to write")
	}
	return c.submit(ctx, &Append{Write: write})
}

// AppendIf is Append with a guard: write (as for Do) runs first in the
// batch's transaction, and events are appended only if it succeeds, in the
// same commit. When write fails on its own, its error is returned and
// nothing is appended. A backend whose Flush takes no Write must not be
// given one.
func (c *Committer) AppendIf(ctx context.Context, thread string, events []event.Event, write any) ([]event.Event, error) {
	if write == nil {
		return nil, errors.New("store: no guard to append under")
	}
	a, err := Prepare(thread, events)
	if err != nil {
		return nil, err
	}
	if a == nil {
		a = &Append{Thread: thread}
	}
	a.Write = write
	if err := c.submit(ctx, a); err != nil {
		return nil, err
	}
	return a.Events, nil
}

// submit hands a to the writer and waits for its batch.
func (c *Committer) submit(ctx context.Context, a *Append) error {
	// An append whose context is already done must commit nothing, so check
	// before offering it: select picks at random among ready cases.
	if err := ctx.Err(); err != nil {
		return err
	}
	a.ctx = ctx
	a.done = make(chan error, 1)
	select {
	case c.reqs <- a:
	case <-c.closing:
		return store.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-a.done:
		return err
	case <-ctx.Done():
		// The batch goes on without this caller; a.done is buffered.
		return ctx.Err()
	}
}

// size is what a counts against MaxEvents.
func (a *Append) size() int {
	if a.Write != nil {
		return 1 + len(a.Events)
	}
	return len(a.Events)
}

// Close refuses new appends, commits those already taken and waits for the
// writer goroutine to end. It is safe to call more than once.
func (c *Committer) Close() {
	c.once.Do(func() { close(c.closing) })
	<-c.stopped
}

func (c *Committer) run() {
	defer close(c.stopped)
	for {
		select {
		case a := <-c.reqs:
			c.commit(c.collect(a))
		case <-c.closing:
			return
		}
	}
}

// collect gathers first and every append already waiting, up to MaxEvents.
//
// Callers answered by the last commit are runnable but may not have run
// yet; taking only what is queued at this instant would commit them one
// small batch at a time. So while a pass finds more appends, the writer
// yields once and looks again: under load the batch fills with everyone
// about to append, and an idle store pays one yield, never a timer.
func (c *Committer) collect(first *Append) []*Append {
	batch := []*Append{first}
	n := first.size()
	for n < c.opts.MaxEvents {
		runtime.Gosched()
		found := false
	drain:
		for n < c.opts.MaxEvents {
			select {
			case a := <-c.reqs:
				batch = append(batch, a)
				n += a.size()
				found = true
			default:
				break drain
			}
		}
		if !found {
			break
		}
	}
	return batch
}

func (c *Committer) commit(batch []*Append) {
	// Leave out callers that gave up before the batch began: they were told
	// ctx.Err(), so committing their events would only surprise them.
	live := batch[:0]
	for _, a := range batch {
		if err := a.ctx.Err(); err != nil {
			a.done <- err
			continue
		}
		live = append(live, a)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	began := time.Now()
	err := c.flush(ctx, live)
	cancel()
	if c.opts.Observe != nil && err == nil {
		c.opts.Observe(countEvents(live), time.Since(began))
	}
	if err != nil {
		err = fmt.Errorf("store: commit %d events: %w", countEvents(live), err)
	}
	for _, a := range live {
		if err == nil {
			a.done <- a.Err
		} else {
			a.done <- err
		}
	}
}

func countEvents(batch []*Append) int {
	n := 0
	for _, a := range batch {
		n += len(a.Events)
	}
	return n
}

// Prepare checks events for thread and returns them ready to commit: copied,
// with Thread set, a fresh ID and the current time where they were empty,
// Time in UTC truncated to the microsecond (what both backends keep), and
// payloads encoded. It returns nil for no events.
func Prepare(thread string, events []event.Event) (*Append, error) {
	if thread == "" {
		return nil, errors.New("store: append: empty thread id")
	}
	if len(events) == 0 {
		return nil, nil
	}
	a := &Append{
		Thread: thread,
		Events: make([]event.Event, len(events)),
		Data:   make([][]byte, len(events)),
	}
	now := time.Now()
	for i, e := range events {
		if e.Thread != "" && e.Thread != thread {
			return nil, fmt.Errorf("store: append to thread %q: event %d belongs to thread %q", thread, i, e.Thread)
		}
		data, err := event.EncodePayload(e.Payload)
		if err != nil {
			return nil, fmt.Errorf("store: append to thread %q: event %d: %w", thread, i, err)
		}
		e.Thread = thread
		e.Seq = 0
		if e.ID == "" {
			e.ID = event.NewID()
		}
		if e.Time.IsZero() {
			e.Time = now
		}
		e.Time = NormalizeTime(e.Time)
		a.Events[i] = e
		a.Data[i] = data
	}
	return a, nil
}

// NormalizeTime returns t as the stores keep it: UTC, to the microsecond,
// without a monotonic clock reading.
func NormalizeTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}
