package drain_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/protocol/drain"
)

// A stream's context ends when Shutdown begins; Shutdown waits for it to
// leave, and refuses new streams from then on.
func TestShutdownEndsAndWaits(t *testing.T) {
	var g drain.Group
	sctx, cancel, done, ok := g.Begin(context.Background())
	require.True(t, ok)
	defer cancel()
	stopped := make(chan struct{})
	leaving := make(chan struct{}) // closed just before the stream leaves (done)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		<-sctx.Done()
		<-stopped // the stop hook ran before the stream leaves
		close(leaving)
		done()
	}()
	defer func() { <-exited }()
	err := g.Shutdown(context.Background(), func() { close(stopped) })
	require.NoError(t, err)
	// What the stream did before it left happened before Shutdown
	// returned; what it does after done may not have.
	select {
	case <-leaving:
	default:
		t.Fatal("Shutdown returned before the stream left")
	}
	assert.Error(t, g.Stopping().Err())
	assert.False(t, g.Enter(), "a stream after Shutdown is refused")
	_, _, _, ok = g.Begin(context.Background())
	assert.False(t, ok)
	assert.NoError(t, g.Shutdown(context.Background(), nil), "a second Shutdown finds nothing running")
}

// Shutdown gives up when its context ends, and the stream can still leave.
func TestShutdownHonoursContext(t *testing.T) {
	var g drain.Group
	require.True(t, g.Enter())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, g.Shutdown(ctx, nil), context.Canceled)
	g.Leave()
	g.Wait()
}

// Cancelling a stream's own context leaves the others running.
func TestCancelIsPerStream(t *testing.T) {
	var g drain.Group
	a, cancelA, doneA, _ := g.Begin(context.Background())
	b, cancelB, doneB, _ := g.Begin(context.Background())
	cancelA()
	assert.Error(t, a.Err())
	assert.NoError(t, b.Err())
	doneA()
	cancelB()
	doneB()
	require.NoError(t, g.Shutdown(context.Background(), nil))
}
