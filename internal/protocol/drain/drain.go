// Package drain is the shutdown helper every adapter and the server's
// WebSocket registry share: a Group tracks what is running (a socket, a
// socket's follow of its thread, an event stream), refuses new entries
// once Shutdown has begun, tells the running ones to end, and waits for
// them until the shutdown's context is done.
package drain

import (
	"context"
	"sync"
)

// Group tracks running streams for Shutdown. The zero Group is ready to
// use; it must not be copied after first use.
type Group struct {
	mu      sync.Mutex
	closed  bool
	ctx     context.Context // Stopping's; made on first use
	stop    context.CancelFunc
	running sync.WaitGroup
}

// init makes the stopping context. g.mu is held.
func (g *Group) initLocked() {
	if g.ctx == nil {
		g.ctx, g.stop = context.WithCancel(context.Background())
	}
}

// Stopping is done once Shutdown has begun: what runs should end (or
// catch up and end) when it is.
func (g *Group) Stopping() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.initLocked()
	return g.ctx
}

// Enter registers a stream, so that Shutdown waits for it until it calls
// Leave. It reports false, registering nothing, once Shutdown has begun.
func (g *Group) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.running.Add(1)
	return true
}

// Leave ends a stream Enter registered.
func (g *Group) Leave() { g.running.Done() }

// Begin registers a stream that runs under a context of its own: it ends
// with ctx, with cancel, or when Shutdown begins. done must be called once
// the stream has ended; it also cancels the context. ok is false, and
// nothing is registered, once Shutdown has begun.
func (g *Group) Begin(ctx context.Context) (sctx context.Context, cancel, done func(), ok bool) {
	if !g.Enter() {
		return nil, nil, nil, false
	}
	sctx, cancelCtx := context.WithCancel(ctx)
	unhook := context.AfterFunc(g.Stopping(), cancelCtx)
	return sctx, cancelCtx, func() {
		unhook()
		cancelCtx()
		g.Leave()
	}, true
}

// Shutdown refuses new streams, ends Stopping, calls stop (when not nil;
// e.g. to close every socket with "going away"), and waits for the
// running streams to leave until ctx is done. It may be called more than
// once.
func (g *Group) Shutdown(ctx context.Context, stop func()) error {
	g.mu.Lock()
	g.closed = true
	g.initLocked()
	g.stop()
	g.mu.Unlock()
	if stop != nil {
		stop()
	}
	done := make(chan struct{})
	go func() {
		g.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait waits for every running stream to leave, however long it takes.
func (g *Group) Wait() { g.running.Wait() }
