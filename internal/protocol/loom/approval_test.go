package loom_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/generated/loomapi"
)

func approval(id, callID, decision string) loomapi.ToolApprovalResponseRequest {
	return loomapi.ToolApprovalResponseRequest{Type: loomapi.TypeToolApprovalResponse, ID: id, CallID: callID, Decision: decision}
}

// waitApproval reads a run's events up to its tool_approval.
func (c *client) waitApproval() loomapi.ToolApprovalEvent {
	c.t.Helper()
	got := until[loomapi.ToolApprovalEvent](c)
	return got[len(got)-1].(loomapi.ToolApprovalEvent)
}

// A command that needs approval waits for tool_approval_response: ping is
// answered meanwhile, approve runs it, and the run ends normally.
func TestApprovalAnsweredOverLoom(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	c.send(runReq("a1", "react", "make a file"))
	ask := c.waitApproval()
	assert.Equal(t, "bash", ask.Name)
	assert.Equal(t, loomapi.ToolApprovalEventArguments{"command": "touch made.txt"}, ask.Arguments)
	require.NotNil(t, ask.CallID)
	assert.False(t, h.exists("made.txt"), "the tool does not run unanswered")
	c.ping("during the run")

	c.send(approval("a1", *ask.CallID, "approve"))
	res := c.readRun()
	require.NotNil(t, res.end, "%+v", res.err)
	tt := types(res.events)
	assert.Equal(t, []string{"custom", "tool_start", "tool_end", "node_exit"}, tt[:4], "the approval's outcome, then the tool runs")
	resolved := res.events[0].(loomapi.CustomEvent)
	assert.JSONEq(t, `{"kind":"tool_approval_resolved","call_id":"`+*ask.CallID+`","decision":"approve"}`, string(resolved.Value))
	assert.Equal(t, "made.txt exists now.", res.end.Reply)
	assert.True(t, h.exists("made.txt"))

	// Answering it again: the run is over, and on its thread nothing
	// waits for the call any more.
	c.send(approval("a1", *ask.CallID, "approve"))
	id, msg := c.expectError()
	assert.Equal(t, "a1", id)
	assert.Contains(t, msg, "unknown run")
	again := approval("a1", *ask.CallID, "approve")
	again.ThreadID = ask.SessionID
	c.send(again)
	id, msg = c.expectError()
	assert.Equal(t, "a1", id)
	assert.Contains(t, msg, "waits for approval")
}

// deny tells the model and the run goes on; deny_stop ends the run with
// error "denied" and the socket stays open.
func TestDenyAndDenyStop(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	c.send(runReq("d1", "react", "make a file"))
	ask := c.waitApproval()
	deny := approval("d1", *ask.CallID, "deny")
	deny.Message = new("not in this folder")
	c.send(deny)
	res := c.readRun()
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Contains(t, res.end.Reply, "Not run:")
	assert.Contains(t, res.end.Reply, "not in this folder")
	assert.False(t, h.exists("made.txt"))
	for _, e := range res.events {
		if end, ok := e.(loomapi.ToolEndEvent); ok {
			assert.True(t, end.IsError, "a denied call ends as an error")
		}
		_, started := e.(loomapi.ToolStartEvent)
		assert.False(t, started, "a denied call never starts")
	}

	c.send(runReq("d2", "react", "make a file"))
	ask = c.waitApproval()
	c.send(approval("d2", *ask.CallID, "deny_stop"))
	res = c.readRun()
	require.NotNil(t, res.err)
	assert.Equal(t, "d2", *res.err.ID)
	assert.Equal(t, "denied", res.err.Error)
	assert.False(t, h.exists("made.txt"))
	c.ping("still open after deny_stop")
}

// The run waits for its answer after its socket closed; another Loom
// socket answers it by run id, and a run queued behind it on the same
// thread starts once it is over.
func TestApprovalWaitsAfterTheSocketCloses(t *testing.T) {
	h := start(t, testConfig(t))
	c1 := h.dial()
	c1.send(runReq("w1", "react", "make a file"))
	ask := c1.waitApproval()
	thread := *ask.SessionID
	c1.close()
	assert.False(t, h.exists("made.txt"))

	c2 := h.dial()
	// A run posted to the thread now waits behind the first.
	queued := runReq("w2", "react", "echo after the approval")
	queued.ThreadID = &thread
	c2.send(queued)
	c2.send(approval("w1", *ask.CallID, "approve"))
	res := c2.readRun()
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, "w2", res.id)
	assert.True(t, h.exists("made.txt"), "the first run ran its approved command before the queued one started")

	c2.send(loomapi.UserMessagesRequest{Type: loomapi.TypeUserMessages, ID: "u", ThreadID: thread})
	page := c2.next().(loomapi.UserMessagesResponse)
	var contents []string
	for _, m := range page.Messages {
		contents = append(contents, m.Role+": "+m.Content)
	}
	assert.Equal(t, []string{"user: make a file", "assistant: Creating made.txt.", "assistant: made.txt exists now.",
		"user: echo after the approval", "assistant: You said: echo after the approval"}, contents)
}

// An approval asked in a Loom run is answered over another protocol (an
// AgentLoop socket on the same thread); the Loom stream goes on.
func TestApprovalAnsweredOverAnotherProtocol(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	c.send(runReq("x1", "react", "make a file"))
	ask := c.waitApproval()

	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	al, _, err := websocket.Dial(ctx, "ws://"+h.srv.Addr("main")+"/agentloop?thread_id="+url.QueryEscape(*ask.SessionID), nil)
	require.NoError(t, err)
	defer al.CloseNow()
	for {
		_, b, err := al.Read(ctx)
		require.NoError(t, err)
		m, err := agentloopapi.DecodeOutbound(b)
		require.NoError(t, err)
		if _, ok := m.(agentloopapi.ApprovalRequestMessage); ok {
			break
		}
	}
	b, err := json.Marshal(agentloopapi.ApprovalResponseMessage{ID: uuid.NewString(), Type: agentloopapi.TypeApprovalResponse,
		Payload: agentloopapi.ApprovalResponseMessagePayload{Review: "yes"}})
	require.NoError(t, err)
	require.NoError(t, al.Write(ctx, websocket.MessageText, b))

	res := c.readRun()
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, "made.txt exists now.", res.end.Reply)
	assert.True(t, h.exists("made.txt"))
}

// cancel ends a running run with error "cancelled"; its waiting tool
// never runs and the socket stays open. An unknown run cannot be
// cancelled.
func TestCancel(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	c.send(runReq("c1", "react", "make a file"))
	ask := c.waitApproval()
	c.send(loomapi.CancelRequest{Type: loomapi.TypeCancel, ID: "c1"})
	res := c.readRun()
	require.NotNil(t, res.err)
	assert.Equal(t, "c1", *res.err.ID)
	assert.Equal(t, "cancelled", res.err.Error)
	assert.False(t, h.exists("made.txt"))
	c.ping("open after cancel")

	c.send(loomapi.CancelRequest{Type: loomapi.TypeCancel, ID: "c1"})
	id, msg := c.expectError()
	assert.Equal(t, "c1", id)
	assert.Contains(t, msg, "unknown run")
	c.send(loomapi.CancelRequest{Type: loomapi.TypeCancel, ID: "c9", ThreadID: ask.SessionID})
	id, msg = c.expectError()
	assert.Equal(t, "c9", id)
	assert.Contains(t, msg, "not running")
}

// A question the agent asks shows as custom input_requested and waits
// for input_response; a second answer finds nothing waiting.
func TestQuestionAnsweredWithInputResponse(t *testing.T) {
	h := start(t, testConfig(t))
	c := h.dial()
	c.send(runReq("q1", "react", "ask me something"))
	var request string
	for request == "" {
		events := until[loomapi.CustomEvent](c)
		var v map[string]any
		require.NoError(t, json.Unmarshal(events[len(events)-1].(loomapi.CustomEvent).Value, &v))
		if v["kind"] == "input_requested" {
			assert.Equal(t, "What's your name?", v["prompt"])
			request = v["request_id"].(string)
		}
	}
	c.send(loomapi.InputResponseRequest{Type: loomapi.TypeInputResponse, ID: "q1", RequestID: request, Text: "Ada"})
	res := c.readRun()
	require.NotNil(t, res.end, "%+v", res.err)
	assert.Equal(t, "Hello, Ada!", res.end.Reply)

	c.send(loomapi.InputResponseRequest{Type: loomapi.TypeInputResponse, ID: "q1", RequestID: request, Text: "Bob", ThreadID: res.end.SessionID})
	id, msg := c.expectError()
	assert.Equal(t, "q1", id)
	assert.Contains(t, msg, "waits for an answer")
}

// On shutdown the socket closes going away; the run that waited for an
// approval is cancelled and its tool never runs.
func TestShutdownWhileARunWaits(t *testing.T) {
	h := start(t, testConfig(t, "--shutdown-grace", "100ms"))
	c := h.dial()
	c.send(runReq("s1", "react", "make a file"))
	c.waitApproval()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- h.srv.Shutdown(ctx)
	}()
	c.expectClosed(websocket.StatusGoingAway)
	require.NoError(t, <-done)
	assert.False(t, h.exists("made.txt"))
}
