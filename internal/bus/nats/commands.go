package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
)

// reply is a command's answer on the wire: empty on success.
type reply struct {
	Error string `json:"error,omitempty"`
	// Name is the registered error (bus.RegisterError) Error matched.
	Name string `json:"name,omitempty"`
}

// Send implements bus.Bus: a request to the thread's command subject. With
// no handler anywhere NATS answers at once that nobody listens
// (bus.ErrNoHandler); a handler that takes longer than RequestTimeout gets
// ErrNoAnswer.
func (b *Bus) Send(ctx context.Context, thread string, cmd event.Command) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.isClosed() {
		return bus.ErrClosed
	}
	data, err := json.Marshal(cmd)
	if err != nil {
		return fmt.Errorf("nats: send %s: %w", cmd.Kind, err)
	}
	rctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
	defer cancel()
	m, err := b.nc.RequestWithContext(rctx, b.commandSubject(thread), data)
	switch {
	case errors.Is(err, natsgo.ErrNoResponders):
		return bus.ErrNoHandler
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, natsgo.ErrTimeout):
		return fmt.Errorf("%w (%s for a %s command)", ErrNoAnswer, b.opts.RequestTimeout, cmd.Kind)
	case err != nil:
		return fmt.Errorf("nats: send %s to %q: %w", cmd.Kind, thread, err)
	}
	var r reply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return fmt.Errorf("nats: the answer to %s does not decode: %w", cmd.Kind, err)
	}
	if r.Error == "" {
		return nil
	}
	return &bus.RemoteError{Text: r.Error, Name: r.Name}
}

// handler is a thread's command handler on this node.
type handler struct {
	ns *natsgo.Subscription

	mu      sync.Mutex
	stopped bool
	calls   sync.WaitGroup
}

// HandleCommands implements bus.Bus. On this node one handler per thread
// is allowed; across nodes the run claims in the store make sure only the
// thread's owner handles them.
func (b *Bus) HandleCommands(ctx context.Context, thread string, fn bus.Handler) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("bus: nil handler")
	}
	h := &handler{}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, bus.ErrClosed
	}
	if b.handlers[thread] != nil {
		b.mu.Unlock()
		return nil, bus.ErrHandlerExists
	}
	b.handlers[thread] = h
	b.mu.Unlock()
	ns, err := b.nc.Subscribe(b.commandSubject(thread), func(m *natsgo.Msg) {
		h.mu.Lock()
		if h.stopped {
			h.mu.Unlock()
			// Stopped while the command was on its way: the sender looks
			// for the thread's next owner.
			name, _ := bus.ErrorName(bus.ErrNoHandler)
			data, _ := json.Marshal(reply{Error: bus.ErrNoHandler.Error(), Name: name})
			_ = m.Respond(data)
			return
		}
		h.calls.Add(1)
		h.mu.Unlock()
		defer h.calls.Done()
		var r reply
		var cmd event.Command
		if err := json.Unmarshal(m.Data, &cmd); err != nil {
			r.Error = "the command does not decode: " + err.Error()
		} else if err := fn(context.Background(), cmd); err != nil {
			r.Error = err.Error()
			r.Name, _ = bus.ErrorName(err)
		}
		data, _ := json.Marshal(r)
		if err := m.Respond(data); err != nil {
			b.log.Warn("nats: answer a command", "thread", thread, "err", err)
		}
	})
	if err == nil {
		err = b.flush(ctx)
	}
	if err != nil {
		if ns != nil {
			_ = ns.Unsubscribe()
		}
		b.mu.Lock()
		delete(b.handlers, thread)
		b.mu.Unlock()
		return nil, fmt.Errorf("nats: handle the commands of %q: %w", thread, err)
	}
	h.ns = ns
	var once sync.Once
	stop := func() {
		once.Do(func() {
			h.mu.Lock()
			h.stopped = true
			h.mu.Unlock()
			b.retire(thread, ns)
			h.calls.Wait()
			b.mu.Lock()
			if b.handlers[thread] == h {
				delete(b.handlers, thread)
			}
			b.mu.Unlock()
		})
	}
	return stop, nil
}

// retire ends a stopped handler's subscription; once it returns, Sends
// find no handler here.
//
// Connected, it drains rather than unsubscribes: a command the server
// delivered before it had the unsubscription is still answered (with
// bus.ErrNoHandler, so its sender claims the thread itself) instead of
// dropped, which would leave the sender waiting for an answer that never
// comes. A drain must not straddle a reconnect, though: nats.go resends
// the draining subscription to the new server and later forgets it
// without unsubscribing, which leaves the server routing the thread's
// commands to a subscription nobody answers, so every Send to the thread
// would time out. A drain across a reconnect therefore ends with a forced
// reconnect, whose new connection knows only the live subscriptions.
// Disconnected, it unsubscribes: nothing reaches the subscription meanwhile,
// and the reconnect leaves it out.
func (b *Bus) retire(thread string, ns *natsgo.Subscription) {
	if !b.nc.IsConnected() {
		_ = ns.Unsubscribe()
		return
	}
	before := b.nc.Stats().Reconnects
	b.mu.Lock()
	b.retiring[ns] = before
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.retiring, ns)
		b.mu.Unlock()
	}()
	closed := ns.StatusChanged(natsgo.SubscriptionClosed)
	if err := ns.Drain(); err != nil {
		b.log.Warn("nats: stop handling a thread's commands", "thread", thread, "err", err)
		_ = ns.Unsubscribe()
		return
	}
	// The drain's flush gives up on its own (nats.go's Flush waits 10 s);
	// the timer only bounds a drain whose handler calls hang.
	timer := time.NewTimer(b.opts.RequestTimeout + 10*time.Second)
	select {
	case <-closed:
	case <-timer.C:
		b.log.Warn("nats: stop handling a thread's commands: the drain did not end", "thread", thread)
	}
	timer.Stop()
	_ = ns.Unsubscribe() // a drain that did not end ends here
	if b.nc.Stats().Reconnects != before && !b.isClosed() {
		b.log.Info("nats: a thread's command handler stopped across a reconnect; reconnecting to drop its subscription on the server", "thread", thread)
		if err := b.nc.ForceReconnect(); err != nil && !errors.Is(err, natsgo.ErrConnectionClosed) {
			b.log.Warn("nats: reconnect", "err", err)
		}
	}
}
