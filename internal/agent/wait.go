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

// waiters routes incoming commands to whoever waits for their id. A run may
// wait for several at once (concurrent tools asking for input).
type waiters struct {
	inbox <-chan Command
	mu    sync.Mutex
	byID  map[string]chan Command
}

func newWaiters(inbox <-chan Command) *waiters {
	return &waiters{inbox: inbox, byID: map[string]chan Command{}}
}

// pump delivers commands until ctx is done. A command nobody waits for is
// dropped: the thread service checks ids against the log before routing.
func (w *waiters) pump(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-w.inbox:
			if !ok {
				return
			}
			w.mu.Lock()
			ch := w.byID[c.ID]
			delete(w.byID, c.ID)
			w.mu.Unlock()
			if ch != nil {
				ch <- c
			}
		}
	}
}

// register starts waiting for id before the request is published, so an
// answer cannot arrive unheard; it returns the function that waits.
func (w *waiters) register(id string) func(context.Context) (Command, error) {
	ch := make(chan Command, 1)
	w.mu.Lock()
	w.byID[id] = ch
	w.mu.Unlock()
	return func(ctx context.Context) (Command, error) {
		select {
		case c := <-ch:
			return c, nil
		case <-ctx.Done():
			w.unregister(id)
			return Command{}, ctx.Err()
		}
	}
}

func (w *waiters) unregister(id string) {
	w.mu.Lock()
	delete(w.byID, id)
	w.mu.Unlock()
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
	wait := a.r.w.register(id)
	a.r.emit(event.InputRequested{RequestID: id, Prompt: req.Prompt, Secret: req.Secret, TimeoutSeconds: req.TimeoutSeconds, Agent: a.r.a.cfg.Name})
	if err := a.r.em.flush(); err != nil {
		a.r.w.unregister(id)
		return "", err
	}
	wctx := ctx
	if req.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutSeconds)*time.Second)
		defer cancel()
	}
	cmd, err := wait(wctx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			a.r.emit(event.InputTimedOut{RequestID: id, TimeoutSeconds: req.TimeoutSeconds})
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
	wait := a.r.w.register(id)
	a.r.emit(event.UIRequested{RequestID: id, Tool: a.tool, Component: req.Component, Payload: req.Payload, Agent: a.r.a.cfg.Name})
	if err := a.r.em.flush(); err != nil {
		a.r.w.unregister(id)
		return nil, err
	}
	cmd, err := wait(ctx)
	if err != nil {
		return nil, err
	}
	a.r.emit(event.UIResolved{RequestID: id, Data: cmd.Data})
	return cmd.Data, nil
}
