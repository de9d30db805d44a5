package protocol

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/agentwire/agentwire/internal/protocol/drain"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
)

// Session is the skeleton of one socket of a WebSocket adapter. Serve
// runs it: the reader, on the socket's own goroutine, gives Handle every
// frame the client sends; beside it runs the socket's follow (what Open
// returns), which sends the thread's frames, on a goroutine whose context
// ends when the reader does (the socket closed), when the adapter shuts
// down (its drain.Group), or with the socket. Every frame goes out through
// the socket's single writer (wsconn.Conn.Send). Serve returns once the
// reader and the follow have ended. The close codes a socket ends with are
// wsconn's (Refuse, Fail, Finish).
//
// Open and Handle run on a short-lived goroutine the reader starts and
// waits for, so that the deep calls they make (a turn posted, a thread
// subscribed) grow that goroutine's stack and not the reader's, which
// lives as long as the socket and, idle, needs only the read's.
type Session struct {
	// Open starts the socket with the follow's context (e.g. subscribes
	// to its thread and sends the first frame), and returns the follow to
	// run beside the reader, or nil when the socket is not to be served
	// (Open has sent or closed what says why). Without Open only the
	// reader runs.
	Open func(ctx context.Context) (follow func(ctx context.Context))
	// Watch, instead of Open, starts a socket whose follow needs no
	// goroutine while it is idle (a thread.Watch, work started on
	// demand): it starts with the follow's context and returns wait,
	// which returns once everything it started under that context has
	// ended, or nil when the socket is not to be served. Serve calls wait
	// once the context is done (on a goroutine that exists only from then
	// on) and waits for it.
	Watch func(ctx context.Context) (wait func())
	// Handle handles one client frame; the reader reads the next once it
	// has returned.
	Handle func(ctx context.Context, frame []byte)
	// ShuttingDown tells the client that the adapter is shutting down;
	// the socket is not served.
	ShuttingDown func()
}

// Serve serves c until it ends; streams is the adapter's, whose Shutdown
// ends the follow and waits for it.
func (s Session) Serve(ctx context.Context, c *wsconn.Conn, streams *drain.Group) error {
	if s.Open == nil && s.Watch == nil {
		return s.read(ctx, c)
	}
	fctx, stop, done, ok := streams.Begin(ctx)
	if !ok {
		if s.ShuttingDown != nil {
			s.ShuttingDown()
		}
		return nil
	}
	ended := make(chan struct{})
	if s.Watch != nil {
		var wait func()
		Aside(func() { wait = s.Watch(fctx) })
		if wait == nil {
			done()
			return nil
		}
		context.AfterFunc(fctx, func() {
			defer close(ended)
			defer done()
			wait()
		})
	} else {
		var follow func(context.Context)
		Aside(func() { follow = s.Open(fctx) })
		if follow == nil {
			done()
			return nil
		}
		go func() {
			defer close(ended)
			defer done()
			follow(fctx)
		}()
	}
	// The reader has ended (or panicked): so does the follow.
	defer func() {
		stop()
		<-ended
	}()
	return s.read(ctx, c)
}

// read gives Handle the client's frames until the socket ends.
func (s Session) read(ctx context.Context, c *wsconn.Conn) error {
	for {
		frame, err := c.Read(ctx)
		if err != nil {
			return err
		}
		Aside(func() { s.Handle(ctx, frame) })
	}
}

// Aside runs f on a goroutine of its own and waits for it: the stack f
// grows goes with that goroutine, instead of staying with a long-lived
// caller's (Go shrinks a stack only by half at a collection, and only
// while a quarter of it is in use). A panic in f is raised again in the
// caller, with f's stack in its value.
func Aside(f func()) {
	var p any
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				p = fmt.Errorf("%v\n\n%s", r, debug.Stack())
			}
		}()
		f()
	}()
	<-done
	if p != nil {
		panic(p)
	}
}
