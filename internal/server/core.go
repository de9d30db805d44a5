package server

import (
	"context"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/runs"
	"github.com/agentwire/agentwire/internal/thread"
)

// core is protocol.Core over the thread service and the run manager.
type core struct {
	threads *thread.Service
	runs    *runs.Manager
}

var _ protocol.Core = (*core)(nil)

func (c *core) LastSeq(ctx context.Context, t string) (int64, error) {
	return c.threads.LastSeq(ctx, t)
}

func (c *core) Read(ctx context.Context, t string, after int64, limit int) ([]event.Event, error) {
	return c.threads.Read(ctx, t, after, limit)
}

func (c *core) History(ctx context.Context, t string) ([]event.Event, error) {
	return c.threads.History(ctx, t)
}

func (c *core) Subscribe(ctx context.Context, t string, after int64) (protocol.Feed, error) {
	sub, err := c.threads.Subscribe(ctx, t, after)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

func (c *core) Post(ctx context.Context, t string, in runs.Input) (runs.Posted, error) {
	return c.runs.Post(ctx, t, in)
}

func (c *core) Resolve(ctx context.Context, t string, cmd agent.Command) error {
	return c.runs.Resolve(ctx, t, cmd)
}

func (c *core) Cancel(_ context.Context, t string) error { return c.runs.Cancel(t) }

func (c *core) Active(t string) string { return c.runs.Active(t) }
