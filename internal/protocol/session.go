package protocol

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"

	"github.com/agentwire/agentwire/internal/protocol/drain"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
)

// Session is the skeleton of one socket of a WebSocket adapter. Serve
// runs it: the reader, on the socket's own goroutine, gives Handle every
// frame the client sends; beside it runs the socket's follow (what Open
// returns), which sends the thread's frames, on a goroutine of an
// errgroup whose context ends when the reader does (the socket closed),
// when the adapter shuts down (its drain.Group), or with the socket.
// Every frame goes out through the socket's single writer
// (wsconn.Conn.Send). Serve returns once the reader and the follow have
// ended. The close codes a socket ends with are wsconn's (Refuse, Fail,
// Finish).
type Session struct {
	// Open starts the socket with the follow's context (e.g. subscribes
	// to its thread and sends the first frame), and returns the follow to
	// run beside the reader, or nil when the socket is not to be served
	// (Open has sent or closed what says why). Without Open only the
	// reader runs.
	Open func(ctx context.Context) (follow func(ctx context.Context))
	// Handle handles one client frame, on the reader's goroutine.
	Handle func(ctx context.Context, frame []byte)
	// ShuttingDown tells the client that the adapter is shutting down;
	// the socket is not served.
	ShuttingDown func()
}

// Serve serves c until it ends; streams is the adapter's, whose Shutdown
// ends the follow and waits for it.
func (s Session) Serve(ctx context.Context, c *wsconn.Conn, streams *drain.Group) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	if s.Open != nil {
		fctx, _, done, ok := streams.Begin(gctx)
		if !ok {
			if s.ShuttingDown != nil {
				s.ShuttingDown()
			}
			return nil
		}
		follow := s.Open(fctx)
		if follow == nil {
			done()
			return nil
		}
		g.Go(func() error {
			defer done()
			follow(fctx)
			return nil
		})
	}
	err := s.read(gctx, c)
	stop() // the reader has ended: so does the follow
	return errors.Join(err, g.Wait())
}

// read gives Handle the client's frames until the socket ends.
func (s Session) read(ctx context.Context, c *wsconn.Conn) error {
	for {
		frame, err := c.Read(ctx)
		if err != nil {
			return err
		}
		s.Handle(ctx, frame)
	}
}
