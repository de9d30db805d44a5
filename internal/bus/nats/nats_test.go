package nats_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/bus/bustest"
	busnats "github.com/agentwire/agentwire/internal/bus/nats"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/leaktest"
	"github.com/agentwire/agentwire/internal/metrics"
	"github.com/agentwire/agentwire/internal/store/memory"
	"github.com/agentwire/agentwire/internal/thread"
)

const wait = 10 * time.Second

// natsURL is the NATS server the suite runs against: CI's, through
// AGENTWIRE_TEST_NATS_URL.
func natsURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("AGENTWIRE_TEST_NATS_URL")
	if u == "" {
		t.Skip("AGENTWIRE_TEST_NATS_URL not set: no NATS server to test against")
	}
	return u
}

// prefix keeps one test's subjects apart from every other's on a shared
// NATS server.
func prefix(t *testing.T) string {
	return "test-" + strings.ToLower(event.NewID())
}

func open(t *testing.T, url, prefix string, opts ...func(*busnats.Options)) *busnats.Bus {
	t.Helper()
	o := busnats.Options{Prefix: prefix, RequestTimeout: 2 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	b, err := busnats.Open(ctx, url, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestBus runs the suite every bus passes against a real NATS server.
func TestBus(t *testing.T) {
	url := natsURL(t)
	bustest.Run(t, func(t *testing.T) bus.Bus { return open(t, url, prefix(t)) })
}

// TestBetweenNodes has two connections, as two nodes would: events
// published by one reach the other's subscribers, and commands sent by one
// reach the handler on the other, with their answers and errors.
func TestBetweenNodes(t *testing.T) {
	url, p := natsURL(t), prefix(t)
	a, b := open(t, url, p), open(t, url, p)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()

	sub, err := b.Subscribe(ctx, "thread.with*odd>chars", 16)
	require.NoError(t, err)
	defer sub.Close()
	sent := []event.Event{event.New("thread.with*odd>chars", "r", event.MessageDelta{MessageID: "m", Text: "hi"})}
	sent[0].Seq = 1
	require.NoError(t, a.Publish(ctx, "thread.with*odd>chars", sent))
	got, err := sub.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, sent[0].ID, got.ID)
	assert.Equal(t, sent[0].Payload, got.Payload)

	assert.ErrorIs(t, a.Send(ctx, "t", event.Command{Kind: event.CommandCancel}), bus.ErrNoHandler, "no owner anywhere")
	var mu sync.Mutex
	var took []event.Command
	stop, err := b.HandleCommands(ctx, "t", func(_ context.Context, cmd event.Command) error {
		mu.Lock()
		took = append(took, cmd)
		mu.Unlock()
		if cmd.Kind == event.CommandInput {
			return fmt.Errorf("answering %s: %w", cmd.ID, bus.ErrHandlerExists)
		}
		if cmd.Kind == event.CommandUI {
			return errors.New("an error nobody registered")
		}
		return nil
	})
	require.NoError(t, err)
	defer stop()
	approve := event.Command{Kind: event.CommandApprove, ID: "call_1", Decision: event.DecisionApproveAlways, Text: "ok",
		Options: &event.RunOptions{Strategy: "tot"}}
	require.NoError(t, a.Send(ctx, "t", approve))
	err = a.Send(ctx, "t", event.Command{Kind: event.CommandInput, ID: "in_1"})
	assert.ErrorIs(t, err, bus.ErrHandlerExists, "a registered error crosses as itself")
	assert.Equal(t, "answering in_1: "+bus.ErrHandlerExists.Error(), err.Error(), "with its text")
	err = a.Send(ctx, "t", event.Command{Kind: event.CommandUI})
	require.Error(t, err)
	assert.Equal(t, "an error nobody registered", err.Error())
	mu.Lock()
	require.Len(t, took, 3)
	assert.Equal(t, approve, took[0], "the command crosses whole")
	mu.Unlock()

	stop()
	assert.ErrorIs(t, a.Send(ctx, "t", event.Command{Kind: event.CommandCancel}), bus.ErrNoHandler, "after the handler stopped")
}

// TestOwnerThatDoesNotAnswer: a handler that takes longer than the request
// timeout gives its sender a clear error rather than a hang.
func TestOwnerThatDoesNotAnswer(t *testing.T) {
	url, p := natsURL(t), prefix(t)
	slow := func(o *busnats.Options) { o.RequestTimeout = 100 * time.Millisecond }
	a, b := open(t, url, p, slow), open(t, url, p)
	release := make(chan struct{})
	stop, err := b.HandleCommands(t.Context(), "t", func(context.Context, event.Command) error {
		<-release
		return nil
	})
	require.NoError(t, err)
	err = a.Send(t.Context(), "t", event.Command{Kind: event.CommandCancel})
	close(release)
	stop()
	assert.ErrorIs(t, err, busnats.ErrNoAnswer)
}

// TestCommandsWhileTheOwnerLetsGo: commands sent while their handler is
// stopping are answered, by the handler or with bus.ErrNoHandler, never
// left to time out: a sender that times out cannot know whether its
// command was taken. Each round stops the handler while a sender keeps
// sending.
func TestCommandsWhileTheOwnerLetsGo(t *testing.T) {
	url, p := natsURL(t), prefix(t)
	a, b := open(t, url, p), open(t, url, p)
	for round := range 30 {
		thread := fmt.Sprintf("t%d", round)
		stop, err := b.HandleCommands(t.Context(), thread, func(context.Context, event.Command) error { return nil })
		require.NoError(t, err)
		var answered, unhandled int
		done := make(chan error, 1)
		go func() {
			for {
				err := a.Send(t.Context(), thread, event.Command{Kind: event.CommandCancel})
				switch {
				case err == nil:
					answered++
				case errors.Is(err, bus.ErrNoHandler):
					if unhandled++; unhandled == 3 {
						done <- nil
						return
					}
				default:
					done <- err
					return
				}
			}
		}()
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		stop()
		require.NoError(t, <-done, "round %d, after %d answers", round, answered)
	}
}

// embedded is a NATS server inside the test process, which the test can
// stop and start again on the same port.
type embedded struct {
	t    testing.TB
	port int
	srv  *natsserver.Server
}

func startEmbedded(t testing.TB) *embedded {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	e := &embedded{t: t, port: port}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *embedded) url() string { return "nats://127.0.0.1:" + strconv.Itoa(e.port) }

func (e *embedded) start() {
	e.t.Helper()
	srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: e.port, NoLog: true, NoSigs: true})
	require.NoError(e.t, err)
	srv.Start()
	require.True(e.t, srv.ReadyForConnections(wait), "the embedded NATS server did not start")
	e.srv = srv
}

func (e *embedded) stop() {
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
		e.srv = nil
	}
}

// TestLargeEventCrossesWithoutItsPayload publishes an event larger than a
// NATS message may be: subscribers get its seq without its payload, and
// the thread service reads it from the log.
func TestLargeEventCrossesWithoutItsPayload(t *testing.T) {
	leaktest.Check(t, "github.com/agentwire/agentwire/")
	srv := startEmbedded(t)
	b := open(t, srv.url(), "big")
	log := memory.New()
	svc := thread.New(log, b, nil, thread.Options{})
	t.Cleanup(func() { _ = svc.Close(); _ = log.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()

	raw, err := b.Subscribe(ctx, "t", 16)
	require.NoError(t, err)
	defer raw.Close()
	sub, err := svc.Subscribe(ctx, "t", 0)
	require.NoError(t, err)
	defer sub.Close()
	huge := strings.Repeat("x", 2<<20) // NATS's default limit is 1 MiB
	_, err = svc.Append(ctx, "t",
		event.Event{Run: "r", Payload: event.MessageDelta{MessageID: "m", Text: "small"}},
		event.Event{Run: "r", Payload: event.MessageDelta{MessageID: "m", Text: huge}},
		event.Event{Run: "r", Payload: event.MessageDelta{MessageID: "m", Text: "after"}})
	require.NoError(t, err)

	var carried []event.Event
	for len(carried) < 3 {
		e, err := raw.Next(ctx)
		require.NoError(t, err)
		carried = append(carried, e)
	}
	assert.NotNil(t, carried[0].Payload)
	assert.Nil(t, carried[1].Payload, "the large event crossed without its payload")
	assert.Equal(t, int64(2), carried[1].Seq)
	assert.NotNil(t, carried[2].Payload)

	for want := int64(1); want <= 3; want++ {
		select {
		case e := <-sub.Events():
			require.Equal(t, want, e.Seq)
			require.NotNil(t, e.Payload, "seq %d", e.Seq)
			if want == 2 {
				assert.Equal(t, huge, e.Payload.(event.MessageDelta).Text, "read from the log")
			}
		case <-ctx.Done():
			t.Fatalf("seq %d did not come", want)
		}
	}
}

// TestNATSRestartMidStream restarts the NATS server while events flow: the
// bus subscriptions open across the outage end as having missed events,
// and a subscription to the thread catches up from the log and goes on,
// with no gap and no duplicate.
func TestNATSRestartMidStream(t *testing.T) {
	leaktest.Check(t, "github.com/agentwire/agentwire/")
	srv := startEmbedded(t)
	pub := open(t, srv.url(), "restart")
	sub := open(t, srv.url(), "restart")
	log := memory.New()
	writer := thread.New(log, pub, nil, thread.Options{})
	m := metrics.New()
	reader := thread.New(log, sub, nil, thread.Options{Metrics: m})
	t.Cleanup(func() { _ = writer.Close(); _ = reader.Close(); _ = log.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 3*wait)
	defer cancel()

	const total = 300
	var got []int64
	feed, err := reader.Subscribe(ctx, "t", 0)
	require.NoError(t, err)
	defer feed.Close()
	appended := make(chan error, 1)
	go func() {
		for i := range total {
			if _, err := writer.Append(ctx, "t", event.Event{Run: "r", Payload: event.MessageDelta{MessageID: "m", Text: strconv.Itoa(i)}}); err != nil {
				appended <- err
				return
			}
			if i == total/3 {
				srv.stop()
			}
			if i == total/2 {
				srv.start()
			}
			time.Sleep(time.Millisecond) // spread the appends across the outage
		}
		appended <- nil
	}()
	for len(got) < total {
		select {
		case e, ok := <-feed.Events():
			require.True(t, ok, "the subscription ended after %d events: %v", len(got), feed.Err())
			got = append(got, e.Seq)
		case <-ctx.Done():
			t.Fatalf("after %d of %d events: %v", len(got), total, ctx.Err())
		}
	}
	require.NoError(t, <-appended)
	for i, s := range got {
		require.Equal(t, int64(i+1), s, "event %d", i)
	}
	missed, _ := m.Sample("agentwire_resubscribes_total", map[string]string{"reason": "missed"})
	assert.Positive(t, missed, "the outage made the subscription catch up from the log")
}

// TestHandlerStoppedAcrossAnOutage stops a thread's command handler around
// a NATS restart (before, during and after the server goes away): once the
// connection is back, a command to the thread is answered at once with
// bus.ErrNoHandler, never routed to a subscription nobody answers.
func TestHandlerStoppedAcrossAnOutage(t *testing.T) {
	leaktest.Check(t, "github.com/agentwire/agentwire/")
	srv := startEmbedded(t)
	owner := open(t, srv.url(), "outage")
	sender := open(t, srv.url(), "outage")
	for round := range 6 {
		thread := fmt.Sprintf("t%d", round)
		stop, err := owner.HandleCommands(t.Context(), thread, func(context.Context, event.Command) error { return nil })
		require.NoError(t, err)
		require.NoError(t, sender.Send(t.Context(), thread, event.Command{Kind: event.CommandCancel}))
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			time.Sleep(time.Duration(round) * time.Millisecond)
			stop()
		}()
		time.Sleep(3 * time.Millisecond)
		srv.stop()
		time.Sleep(time.Duration(round%3) * 100 * time.Millisecond)
		srv.start()
		<-stopped
		require.Eventually(t, func() bool { return owner.Connected() && sender.Connected() }, wait, 10*time.Millisecond)
		// Right after the reconnect the owner may still be reconnecting
		// once more to drop the retired subscription, and a command sent
		// meanwhile can be lost; one sent after that must find no handler.
		// Without that second reconnect every one of them times out.
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if err = sender.Send(t.Context(), thread, event.Command{Kind: event.CommandCancel}); errors.Is(err, bus.ErrNoHandler) {
				break
			}
		}
		require.ErrorIs(t, err, bus.ErrNoHandler, "round %d", round)
	}
}
