package agent

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/tools"
)

// ErrUnknownRequest is Inbox.Deliver's answer to a command that answers no
// pending request of the run: the id was never asked, or was answered
// already, or timed out, or names a request of another kind.
var ErrUnknownRequest = errors.New("no pending request has that id")

// Inbox takes people's answers to a run's pending requests (approvals,
// input, UI calls). The run registers each request before it publishes it,
// so an answer can never arrive unheard; Deliver hands an answer to the
// request it names at once, on the caller's goroutine, and tells the caller
// whether it was taken. The first answer wins: the request is then no
// longer pending.
type Inbox struct {
	mu   sync.Mutex
	byID map[string]waiter
}

type waiter struct {
	kind event.CommandKind
	ch   chan event.Command // capacity 1: Deliver never blocks
}

// NewInbox returns an empty inbox.
func NewInbox() *Inbox { return &Inbox{byID: map[string]waiter{}} }

// Deliver hands cmd to the pending request it answers (cmd.ID, of the kind
// cmd.Kind). It returns ErrUnknownRequest when the run has no such request.
func (in *Inbox) Deliver(cmd event.Command) error {
	in.mu.Lock()
	w, ok := in.byID[cmd.ID]
	if ok && w.kind == cmd.Kind {
		delete(in.byID, cmd.ID)
	}
	in.mu.Unlock()
	if !ok || w.kind != cmd.Kind {
		return ErrUnknownRequest
	}
	w.ch <- cmd
	return nil
}

// register starts waiting for an answer to request id before the request is
// published; it returns the function that waits for it.
func (in *Inbox) register(id string, kind event.CommandKind) func(context.Context) (event.Command, error) {
	ch := make(chan event.Command, 1)
	in.mu.Lock()
	in.byID[id] = waiter{kind: kind, ch: ch}
	in.mu.Unlock()
	return func(ctx context.Context) (event.Command, error) {
		select {
		case c := <-ch:
			return c, nil
		case <-ctx.Done():
			in.unregister(id)
			// An answer may have been taken just before the wait ended;
			// it wins over the timeout.
			select {
			case c := <-ch:
				return c, nil
			default:
			}
			return event.Command{}, ctx.Err()
		}
	}
}

func (in *Inbox) unregister(id string) {
	in.mu.Lock()
	delete(in.byID, id)
	in.mu.Unlock()
}

// asker lets a tool ask a person, through the run's events and commands.
type asker struct {
	r    *run
	tool string
}

var _ tools.Asker = (*asker)(nil)

// Ask writes input.requested and waits for input.provided, or for the
// timeout, which writes input.timed_out.
func (a *asker) Ask(ctx context.Context, req tools.InputRequest) (string, error) {
	id := "input_" + event.NewID()
	wait := a.r.inbox.register(id, event.CommandInput)
	a.r.emit(event.InputRequested{RequestID: id, Prompt: req.Prompt, Secret: req.Secret, TimeoutSeconds: timeoutSeconds(a.timeout(req.TimeoutSeconds)), Agent: a.r.name})
	if err := a.r.flush(); err != nil {
		a.r.inbox.unregister(id)
		return "", err
	}
	timeout := a.timeout(req.TimeoutSeconds)
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	answered := a.r.a.cfg.Metrics.InputWaiting()
	cmd, err := wait(wctx)
	answered()
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			a.r.emit(event.InputTimedOut{RequestID: id, TimeoutSeconds: timeoutSeconds(timeout)})
			return "", tools.ErrInputTimedOut
		}
		return "", err
	}
	a.r.emit(event.InputProvided{RequestID: id, Text: cmd.Text})
	return cmd.Text, nil
}

// RequestUI writes ui.requested and waits for ui.resolved.
func (a *asker) RequestUI(ctx context.Context, req tools.UIRequest) (json.RawMessage, error) {
	id := "ui_" + event.NewID()
	wait := a.r.inbox.register(id, event.CommandUI)
	a.r.emit(event.UIRequested{RequestID: id, Tool: a.tool, Component: req.Component, Payload: req.Payload, Agent: a.r.name, Display: req.Display})
	if err := a.r.flush(); err != nil {
		a.r.inbox.unregister(id)
		return nil, err
	}
	wctx := ctx
	timeout := a.timeout(0)
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	answered := a.r.a.cfg.Metrics.InputWaiting()
	cmd, err := wait(wctx)
	answered()
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// A UI request's timeout is recorded as an input timeout of
			// its request id.
			a.r.emit(event.InputTimedOut{RequestID: id, TimeoutSeconds: timeoutSeconds(timeout)})
			return nil, tools.ErrInputTimedOut
		}
		return nil, err
	}
	a.r.emit(event.UIResolved{RequestID: id, Data: cmd.Data})
	return cmd.Data, nil
}

// timeout is how long a request waits: its own timeout in seconds when it
// sets one, else the agent's InputTimeout (0: no limit).
func (a *asker) timeout(seconds int) time.Duration {
	if seconds > 0 {
		return time.Duration(seconds) * time.Second
	}
	return a.r.a.cfg.InputTimeout
}

// timeoutSeconds is d in whole seconds, at least 1 when d is positive.
func timeoutSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return max(int(d/time.Second), 1)
}
