package server

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/threads"
	"github.com/agentwire/agentwire/internal/runs"
)

// sendLog is a bus that records every command sent over it, with the
// handler's answer.
type sendLog struct {
	bus.Bus
	mu   sync.Mutex
	sent []sent
}

type sent struct {
	thread string
	cmd    event.Command
	err    error
}

func (l *sendLog) Send(ctx context.Context, thread string, cmd event.Command) error {
	err := l.Bus.Send(ctx, thread, cmd)
	l.mu.Lock()
	l.sent = append(l.sent, sent{thread, cmd, err})
	l.mu.Unlock()
	return err
}

// of returns the commands of kind sent to thread.
func (l *sendLog) of(thread string, kind event.CommandKind) []sent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sent
	for _, s := range l.sent {
		if s.thread == thread && s.cmd.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

// startRecorded starts a server whose bus records the commands it carries.
func startRecorded(t *testing.T) (*testServer, *sendLog) {
	t.Helper()
	var rec *sendLog
	ts := startServer(t, testConfig(t), Options{Bus: func(b bus.Bus) bus.Bus {
		rec = &sendLog{Bus: b}
		return rec
	}})
	return ts, rec
}

// TestAgentchatApprovalAndCancelTravelOverTheBus watches a session over
// agentchat while an approval answer and a cancel are given through the
// Core, as another protocol's adapter gives them: both reach the run as
// commands sent over the bus, and the agentchat socket shows their effect.
func TestAgentchatApprovalAndCancelTravelOverTheBus(t *testing.T) {
	ts, rec := startRecorded(t)
	ctx := t.Context()
	c := dial(t, ts.url())
	const thread = "bus-agentchat"
	c.chat("echo join", thread)
	c.expect(userMessage("echo join"), agentMessage("You said: echo join"))

	// A run that asks for approval, started by a protocol that can carry
	// approvals; the agentchat socket watches it.
	_, err := ts.core.Post(ctx, thread, runs.Input{Text: "make a file", Interactive: true})
	require.NoError(t, err)
	c.expect(userMessage("make a file"), agentMessage("This runs a command that changes the working folder."))
	call, ok := c.next().(agentchatapi.ToolCallEvent)
	require.True(t, ok)
	assert.Equal(t, "bash", call.ToolName)
	c.expect(agentMessage("Waiting for approval of the bash call. This connection cannot approve it; a client of a protocol with approvals (AgentLoop) can."))

	pending := pendingApproval(t, ts, thread)
	err = ts.core.Resolve(ctx, thread, event.Command{Kind: event.CommandApprove, ID: "call_unknown", Decision: event.DecisionApprove})
	assert.Equal(t, protocol.CodeUnknownRequest, protocol.AsError(err).Code, "an answer nothing waits for")
	require.NoError(t, ts.core.Resolve(ctx, thread, event.Command{Kind: event.CommandApprove, ID: pending, Decision: event.DecisionApprove}))
	result, ok := c.next().(agentchatapi.ToolResultEvent)
	require.True(t, ok)
	assert.True(t, result.Success, "the approved command ran: %+v", result)
	c.expect(agentMessage("approved.txt exists now."))
	_, err = os.Stat(filepath.Join(ts.cfg.Workdir, "approved.txt"))
	assert.NoError(t, err)

	approvals := rec.of(thread, event.CommandApprove)
	require.Len(t, approvals, 2, "both answers went over the bus")
	assert.ErrorIs(t, approvals[0].err, runs.ErrUnknownRequest, "the run's owner refused the unknown id")
	assert.NoError(t, approvals[1].err)
	assert.Equal(t, pending, approvals[1].cmd.ID)

	// A cancel given through the Core ends the run the socket started.
	c.chat("stall please", thread)
	c.expect(userMessage("stall please"))
	require.NoError(t, ts.core.Cancel(ctx, thread))
	c.expect(errorFrame("The run was cancelled."))
	cancels := rec.of(thread, event.CommandCancel)
	require.Len(t, cancels, 1)
	assert.NoError(t, cancels[0].err)
	// The run lets the thread go just after its end reaches the socket.
	require.Eventually(t, func() bool {
		active, err := ts.core.Active(ctx, thread)
		return err == nil && active == ""
	}, frameTimeout, 10*time.Millisecond)
	err = ts.core.Cancel(ctx, thread)
	require.Error(t, err, "nothing left to cancel")
	assert.Equal(t, protocol.CodeNotFound, protocol.AsError(err).Code)
}

// pendingApproval returns the call id of the thread's pending approval,
// read from its log. A client may see the tool call before the approval
// request that follows it is committed, so it waits for one to appear.
func pendingApproval(t *testing.T, ts *testServer, thread string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		id = ""
		history, err := ts.core.History(context.Background(), thread)
		if err != nil {
			return false
		}
		for _, e := range history {
			switch p := e.Payload.(type) {
			case event.ToolApprovalRequested:
				id = p.CallID
			case event.ToolApprovalResolved:
				id = ""
			}
		}
		return id != ""
	}, frameTimeout, 5*time.Millisecond, "no approval is pending")
	return id
}

// TestThreadsApprovalAndCancelTravelOverTheBus does the same over the
// threads protocol: a resume stream watches an interactive run that waits
// for approval, the approval given through the Core reaches the run over
// the bus and the stream shows the tool's result and the run's end; a
// POST stream's run is cancelled through the Core and the stream ends with
// the cancellation.
func TestThreadsApprovalAndCancelTravelOverTheBus(t *testing.T) {
	ts, rec := startRecorded(t)
	ctx := t.Context()
	client, err := threads.NewClient("http://"+ts.Addr("main"), nil)
	require.NoError(t, err)
	id := uuid.New()
	thread := id.String()

	posted, err := ts.core.Post(ctx, thread, runs.Input{Text: "make a file", Interactive: true})
	require.NoError(t, err)
	stream, err := client.Resume(ctx, id, "")
	require.NoError(t, err)
	defer stream.Close()
	next := func() threadsapi.StreamEvent {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, frameTimeout)
		defer cancel()
		e, err := stream.Next(sctx)
		require.NoError(t, err)
		return e
	}
	for e := next(); e.Type != threadsapi.ToolCallSSEStreamEvent; e = next() {
		require.Equal(t, threadsapi.AgentTextSSEStreamEvent, e.Type, "before the tool call: %+v", e)
	}
	pending := pendingApproval(t, ts, thread)
	require.NoError(t, ts.core.Resolve(ctx, thread, event.Command{Kind: event.CommandApprove, ID: pending, Decision: event.DecisionApprove}))
	result := next()
	require.Equal(t, threadsapi.ToolResultSSEStreamEvent, result.Type)
	assert.Equal(t, "result-"+pending, result.ToolResultSSE.Data.ToolResultID, "the approved command ran")
	var last threadsapi.StreamEvent
	for last = next(); last.Type == threadsapi.AgentTextSSEStreamEvent; last = next() {
	}
	assert.Equal(t, threadsapi.DoneSSEStreamEvent, last.Type, "%+v", last)
	approvals := rec.of(thread, event.CommandApprove)
	require.Len(t, approvals, 1)
	assert.NoError(t, approvals[0].err)
	assert.Equal(t, pending, approvals[0].cmd.ID)
	assert.Equal(t, posted.Run, approvalRun(t, ts, thread, pending))

	post, err := client.SendMessage(ctx, id, "stall please")
	require.NoError(t, err)
	defer post.Close()
	require.Eventually(t, func() bool {
		run, err := ts.core.Active(ctx, thread)
		return err == nil && run != ""
	}, frameTimeout, time.Millisecond)
	require.NoError(t, ts.core.Cancel(ctx, thread))
	sctx, cancel := context.WithTimeout(ctx, frameTimeout)
	defer cancel()
	end, err := post.Next(sctx)
	require.NoError(t, err)
	require.Equal(t, threadsapi.ErrorSSEStreamEvent, end.Type)
	assert.Equal(t, "The run was cancelled.", end.ErrorSSE.Data.Error)
	cancels := rec.of(thread, event.CommandCancel)
	require.Len(t, cancels, 1)
	assert.NoError(t, cancels[0].err)
}

// approvalRun returns the run whose approval request had call id id.
func approvalRun(t *testing.T, ts *testServer, thread, id string) string {
	t.Helper()
	for _, e := range ts.history(thread) {
		if p, ok := e.Payload.(event.ToolApprovalRequested); ok && p.CallID == id {
			return e.Run
		}
	}
	t.Fatalf("no approval request %s", id)
	return ""
}
