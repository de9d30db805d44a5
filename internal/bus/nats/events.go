package nats

import (
	"context"
	"encoding/json"
	"fmt"

	natsgo "github.com/nats-io/nats.go"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
)

// wireEvent is an event as the bus carries it: whole, or, for an event too
// large for a NATS message, its thread and seq only.
type wireEvent struct {
	Event *event.Event `json:"event,omitempty"`
	// Gap is the seq of an event sent without its payload.
	Gap    int64  `json:"gap,omitempty"`
	Thread string `json:"thread,omitempty"`
}

// Publish implements bus.Bus. The events go out in as few messages as fit
// NATS's payload limit.
func (b *Bus) Publish(ctx context.Context, thread string, events []event.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.isClosed() {
		return bus.ErrClosed
	}
	limit := int(b.nc.MaxPayload())
	subject := b.eventSubject(thread)
	var batch []json.RawMessage
	size := 2
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		data, err := json.Marshal(batch)
		if err != nil {
			return err
		}
		batch, size = nil, 2
		return b.nc.Publish(subject, data)
	}
	for i := range events {
		e := &events[i]
		one, err := json.Marshal(wireEvent{Event: e})
		if err != nil {
			return fmt.Errorf("nats: publish seq %d of %q: %w", e.Seq, thread, err)
		}
		if len(one)+2 > limit {
			// Too large to send: its subscribers read it from the log.
			if one, err = json.Marshal(wireEvent{Gap: e.Seq, Thread: thread}); err != nil {
				return err
			}
		}
		if size+len(one)+1 > limit {
			if err := flush(); err != nil {
				return fmt.Errorf("nats: publish to %q: %w", thread, err)
			}
		}
		batch = append(batch, one)
		size += len(one) + 1
	}
	if err := flush(); err != nil {
		return fmt.Errorf("nats: publish to %q: %w", thread, err)
	}
	return nil
}

func decodeEvents(data []byte) ([]event.Event, error) {
	var batch []wireEvent
	if err := json.Unmarshal(data, &batch); err != nil {
		return nil, err
	}
	out := make([]event.Event, 0, len(batch))
	for _, w := range batch {
		if w.Event != nil {
			out = append(out, *w.Event)
		} else {
			out = append(out, event.Event{Thread: w.Thread, Seq: w.Gap})
		}
	}
	return out, nil
}

// subscription is a bus.Queue that its thread's NATS subscription fills.
type subscription struct {
	*bus.Queue
	b  *Bus
	ts *threadSub
}

// Close implements bus.Subscription.
func (s *subscription) Close() {
	s.End(bus.ErrClosed)
	s.b.leave(s)
}

// Subscribe implements bus.Bus. It returns once the NATS server has the
// thread's subscription, so every event published afterwards reaches it.
func (b *Bus) Subscribe(ctx context.Context, thread string, queue int) (bus.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if queue <= 0 {
		return nil, fmt.Errorf("bus: queue must be positive, not %d", queue)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, bus.ErrClosed
	}
	ts := b.threads[thread]
	made := ts == nil
	if made {
		ts = &threadSub{thread: thread, ready: make(chan struct{}), subs: map[*subscription]struct{}{}}
		b.threads[thread] = ts
	}
	s := &subscription{Queue: bus.NewQueue(queue), b: b, ts: ts}
	ts.mu.Lock()
	ts.subs[s] = struct{}{}
	ts.mu.Unlock()
	b.mu.Unlock()

	if made {
		ts.err = b.listen(ctx, ts)
		close(ts.ready)
	} else {
		select {
		case <-ts.ready:
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		}
	}
	if ts.err != nil {
		s.Close()
		return nil, fmt.Errorf("nats: subscribe to %q: %w", thread, ts.err)
	}
	return s, nil
}

// listen makes ts's NATS subscription and waits until the server has it.
func (b *Bus) listen(ctx context.Context, ts *threadSub) error {
	ns, err := b.nc.Subscribe(b.eventSubject(ts.thread), func(m *natsgo.Msg) {
		events, err := decodeEvents(m.Data)
		if err != nil {
			b.log.Error("nats: an event message that does not decode", "subject", m.Subject, "err", err)
			return
		}
		ts.mu.Lock()
		var ended []*subscription
		for s := range ts.subs {
			if !s.Push(events) {
				ended = append(ended, s) // a slow consumer, or closed
			}
		}
		ts.mu.Unlock()
		for _, s := range ended {
			b.leave(s)
		}
	})
	if err != nil {
		b.drop(ts)
		return err
	}
	b.mu.Lock()
	ts.ns = ns
	b.byNATS[ns] = ts
	b.mu.Unlock()
	// The server has the subscription once it answers a ping sent after it.
	if err := b.flush(ctx); err != nil {
		b.drop(ts)
		return err
	}
	return nil
}

// leave drops s from its thread's subscribers; the thread's NATS
// subscription goes with its last one.
func (b *Bus) leave(s *subscription) {
	ts := s.ts
	ts.mu.Lock()
	delete(ts.subs, s)
	empty := len(ts.subs) == 0
	ts.mu.Unlock()
	if empty {
		b.mu.Lock()
		// Still empty under the bus's lock: a Subscribe joins ts only
		// while holding it.
		ts.mu.Lock()
		empty = len(ts.subs) == 0
		ts.mu.Unlock()
		if empty {
			b.dropLocked(ts)
		}
		b.mu.Unlock()
	}
}

func (b *Bus) drop(ts *threadSub) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropLocked(ts)
}

func (b *Bus) dropLocked(ts *threadSub) {
	if b.threads[ts.thread] == ts {
		delete(b.threads, ts.thread)
	}
	if ts.ns != nil {
		delete(b.byNATS, ts.ns)
		_ = ts.ns.Unsubscribe()
	}
}

// endAll ends every local subscriber of ts with err and drops ts.
func (b *Bus) endAll(ts *threadSub, err error) {
	b.mu.Lock()
	b.dropLocked(ts)
	b.mu.Unlock()
	ts.mu.Lock()
	subs := ts.subs
	ts.subs = map[*subscription]struct{}{}
	ts.mu.Unlock()
	for s := range subs {
		s.End(err)
	}
}

// asyncError handles what NATS reports outside any call: a subscription it
// dropped messages of (NATS's own slow consumer) has missed events.
func (b *Bus) asyncError(ns *natsgo.Subscription, err error) {
	if ns == nil {
		b.log.Warn("nats: connection error", "err", err)
		return
	}
	b.mu.Lock()
	ts := b.byNATS[ns]
	b.mu.Unlock()
	if ts == nil {
		return
	}
	b.log.Warn("nats: a thread's subscription lost events; its subscribers resume from the log", "thread", ts.thread, "err", err)
	b.endAll(ts, fmt.Errorf("%w: %v", bus.ErrMissed, err))
}

// reconnected ends every subscription open across an outage: events
// published meanwhile never reached them.
func (b *Bus) reconnected() {
	b.mu.Lock()
	threads := make([]*threadSub, 0, len(b.threads))
	for _, ts := range b.threads {
		threads = append(threads, ts)
	}
	b.mu.Unlock()
	b.log.Info("NATS connection back; subscriptions resume from the log", "threads", len(threads))
	for _, ts := range threads {
		b.endAll(ts, bus.ErrMissed)
	}
}

// Previews implements bus.Bus: previews do not cross the network; a
// subscriber sees each delta once it is committed.
func (b *Bus) Previews() bool { return false }

// Preview implements bus.Bus: it does nothing (Previews).
func (*Bus) Preview(string, event.Event) {}

// WaitsForCommits implements bus.Bus: every subscriber waits for commits.
func (*Bus) WaitsForCommits(string) bool { return true }
