package agentloop

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
)

// project runs events through a projector whose replay ends at head and
// returns the frames' descriptions, each checked against the document.
func project(t *testing.T, p *projector, evs ...event.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		for _, m := range p.Project(e) {
			b, err := agentloopapi.Encode(m)
			require.NoError(t, err)
			require.NoError(t, agentloopapi.ValidateOutbound(b), "%s", b)
			s := m.MessageType()
			if r, ok := m.(agentloopapi.ResponseItemMessage); ok {
				if msg, ok := r.Payload.Value.(agentloopapi.MessageItem); ok {
					s += "/" + msg.Role + ": " + msg.Content[0].Text
				}
			}
			if e, ok := m.(agentloopapi.ErrorMessage); ok {
				s += ": " + e.Payload.Message
			}
			out = append(out, s)
		}
	}
	return out
}

func ev(seq int64, run string, p event.Payload) event.Event {
	e := event.New("t", run, p)
	e.Seq = seq
	return e
}

func TestProjectEndsOfTurns(t *testing.T) {
	p := newProjector(2)
	assert.Equal(t, []string{"loading_state", "loading_state", "agent_finished"},
		project(t, p, ev(1, "r1", event.RunStarted{}), ev(2, "r1", event.RunCompleted{Reason: "final_answer"})))
	assert.False(t, p.wantInfo, "a replayed turn is not followed by context_info")

	assert.Equal(t, []string{"loading_state", "response_item/system: The turn was cancelled.", "loading_state", "agent_finished"},
		project(t, p, ev(3, "r2", event.RunStarted{}), ev(4, "r2", event.RunCancelled{Reason: "cancelled"})))
	assert.True(t, p.wantInfo, "a live turn is")

	assert.Equal(t, []string{"loading_state", "loading_state", "agent_finished"},
		project(t, p, ev(5, "r3", event.RunStarted{}), ev(6, "r3", event.RunCancelled{Reason: event.CodeDenied})))
}

func TestProjectCompactionRuns(t *testing.T) {
	p := newProjector(0)
	assert.Equal(t, []string{"context_compacted"}, project(t, p,
		ev(1, "c1", event.RunStarted{Strategy: event.StrategyCompact}),
		ev(2, "c1", event.ContextCompacted{OldTokens: 1000, NewTokens: 123}),
		ev(3, "c1", event.RunCompleted{Reason: "compacted"})))
	assert.Equal(t, []string{"error: Compaction failed: model error: down"}, project(t, p,
		ev(4, "c2", event.RunStarted{Strategy: event.StrategyCompact}),
		ev(5, "c2", event.RunFailed{Code: event.CodeModelError, Message: "model error: down"})))
	assert.Equal(t, []string{"error: The compaction was cancelled."}, project(t, p,
		ev(6, "c3", event.RunStarted{Strategy: event.StrategyCompact}),
		ev(7, "c3", event.RunCancelled{Reason: "cancelled"})))
	assert.False(t, p.wantInfo)
}

func TestProjectRequestsThisProtocolCannotShow(t *testing.T) {
	p := newProjector(0)
	got := project(t, p,
		ev(1, "r", event.InputRequested{RequestID: "q1", Prompt: "Name?"}),
		ev(2, "r", event.InputTimedOut{RequestID: "q1"}),
		ev(3, "r", event.UIRequested{RequestID: "u1", Component: "choice", Payload: json.RawMessage(`{}`)}))
	require.Len(t, got, 3)
	assert.Equal(t, "response_item/assistant: Name?\n\n(Your next message answers this question.)", got[0])
	assert.Contains(t, got[1], "response_item/system: Nobody answered")
	assert.Contains(t, got[2], "choice component, which this client cannot show")
	assert.Empty(t, p.pendingQuestion(), "the question timed out")
}

func TestProjectCallsWithoutApproval(t *testing.T) {
	p := newProjector(0)
	// A call refused without running still shows its item, then its output.
	got := project(t, p,
		ev(1, "r", event.ToolCallCompleted{CallID: "c", Name: "write_file", Arguments: json.RawMessage(`{"path":"x"}`)}),
		ev(2, "r", event.ToolApprovalRequested{CallID: "c", Name: "write_file", Arguments: json.RawMessage(`{"path":"x"}`)}))
	assert.Equal(t, []string{"approval_request"}, got)
	a, ok := p.pendingApproval()
	require.True(t, ok)
	assert.Equal(t, approval{callID: "c", command: `write_file {"path":"x"}`}, a)
	got = project(t, p,
		ev(3, "r", event.ToolApprovalResolved{CallID: "c", Decision: event.DecisionDenyContinue}),
		ev(4, "r", event.ToolExecCompleted{CallID: "c", Name: "write_file", Result: "aborted", IsError: true}))
	assert.Equal(t, []string{
		"response_item/system: The approval request for `write_file {\"path\":\"x\"}` was answered from another client, which denied it; the agent carries on." +
			" If this client still asks you to approve it, answer once with any choice to go on: that answer is not used.",
		"response_item", "response_item",
	}, got)
	_, ok = p.pendingApproval()
	assert.False(t, ok)
}

func TestApprovalRequestOfAnEdit(t *testing.T) {
	m := approvalRequest(event.ToolApprovalRequested{CallID: "c", Name: "write_file", Arguments: json.RawMessage(`{"path":"x"}`)})
	assert.Equal(t, []string{"write_file", `{"path":"x"}`}, m.Payload.Command)
	assert.Nil(t, m.Payload.ApplyPatch)
}

// A replay asks only what is still pending: an approval request answered
// later in the history is not sent, one the history leaves open is sent
// once, at the history's end, and a live one at once.
func TestReplayAsksOnlyWhatIsPending(t *testing.T) {
	asked := func(call string) event.ToolApprovalRequested {
		return event.ToolApprovalRequested{CallID: call, Name: "bash", Command: []string{"touch", call}}
	}
	p := newProjector(5)
	got := project(t, p,
		ev(1, "r1", event.ToolCallCompleted{CallID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"touch c1"}`)}),
		ev(2, "r1", asked("c1")),
		ev(3, "r1", event.ToolApprovalResolved{CallID: "c1", Decision: event.DecisionDenyStop}),
		ev(4, "r2", event.ToolCallCompleted{CallID: "c2", Name: "bash", Arguments: json.RawMessage(`{"command":"touch c2"}`)}),
	)
	assert.NotContains(t, got, "approval_request", "c1 was answered in the history")

	assert.Equal(t, []string{"approval_request"}, project(t, p, ev(5, "r2", asked("c2"))), "c2 is pending at the history's end")
	pending, ok := p.pendingApproval()
	require.True(t, ok)
	assert.Equal(t, "c2", pending.callID)

	q := newProjector(2)
	assert.Equal(t, []string{"loading_state"}, project(t, q, ev(1, "r1", event.RunStarted{}), ev(2, "r1", event.ToolCallCompleted{CallID: "c1", Name: "bash"})))
	assert.Equal(t, []string{"approval_request"}, project(t, q, ev(3, "r1", asked("c1"))), "live")
}

// An approval_response answers the last approval request sent to the
// connection, and only while the thread waits on it: once another client
// answered it, this connection's late answer is refused with an error
// that says so, also when the thread waits on a newer request this
// connection was not sent yet.
func TestAnswerableIsTheLastRequestSent(t *testing.T) {
	asked := func(call string) event.ToolApprovalRequested {
		return event.ToolApprovalRequested{CallID: call, Name: "bash", Command: []string{"touch", call}}
	}
	p := newProjector(0)
	assert.Equal(t, []string{"approval_request"}, project(t, p, ev(1, "r", asked("c1"))))
	a, err := p.answerable()
	require.NoError(t, err)
	assert.Equal(t, "c1", a.callID)

	got := project(t, p, ev(2, "r", event.ToolApprovalResolved{CallID: "c1", Decision: event.DecisionApprove}))
	assert.Equal(t, []string{"response_item/system: The approval request for `touch c1` was answered from another client, which approved it." +
		" If this client still asks you to approve it, answer once with any choice to go on: that answer is not used."}, got)
	stale := "The approval request for `touch c1` was already answered from another client, which approved it; this answer was not used."
	_, err = p.answerable()
	assert.Equal(t, stale, protocol.AsError(err).Message)

	// The thread waits on c2, which this connection was not sent yet: the
	// late answer to c1 does not answer it.
	p.mu.Lock()
	p.approval = &approval{callID: "c2", command: "touch c2"}
	p.mu.Unlock()
	_, err = p.answerable()
	assert.Equal(t, stale, protocol.AsError(err).Message)

	assert.Equal(t, []string{"approval_request"}, project(t, p, ev(3, "r", asked("c2"))))
	a, err = p.answerable()
	require.NoError(t, err)
	assert.Equal(t, "c2", a.callID)

	// An explanation asked for elsewhere: the request is asked again.
	got = project(t, p, ev(4, "r", event.ToolApprovalResolved{CallID: "c2", Decision: event.DecisionExplain}))
	assert.Equal(t, []string{"response_item/system: The approval request for `touch c2` was answered from another client, which asked the agent to explain it." +
		" The request is asked again after the explanation."}, got)
	_, err = p.answerable()
	assert.Equal(t, "No approval request is pending", protocol.AsError(err).Message)

	// This connection's own answer is not refused afterwards as another's.
	assert.Equal(t, []string{"approval_request"}, project(t, p, ev(5, "r", asked("c2"))))
	p.answer("c2")
	assert.Empty(t, project(t, p, ev(6, "r", event.ToolApprovalResolved{CallID: "c2", Decision: event.DecisionApprove})))
	_, err = p.answerable()
	assert.Equal(t, "No approval request is pending", protocol.AsError(err).Message)
}
