package agentchat

import (
	"strings"

	"github.com/agentwire/agentwire/generated/agentchatapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
)

// projector maps canonical events onto agentchat frames. The projection
// needs no memory, so one projector serves every socket of a session, which
// then share each encoded frame; most events show as nothing (deltas, run
// bookkeeping, usage). It gives the message sockets' shape of the agent's
// text; the hub streams message deltas to chunks sockets itself (texts).
type projector struct{}

var _ protocol.Projector[agentchatapi.Outbound] = projector{}

// Project returns the frames e shows as.
func (projector) Project(e event.Event) []agentchatapi.Outbound {
	switch p := e.Payload.(type) {
	case event.MessageUser:
		return one(agentchatapi.NewUserMessageEvent(p.Text))
	case event.MessageCompleted:
		if strings.TrimSpace(p.Text) == "" {
			return nil
		}
		return one(agentchatapi.NewAgentMessageEvent(p.Text))
	case event.ReasoningCompleted:
		if strings.TrimSpace(p.Text) == "" {
			return nil
		}
		return one(agentchatapi.NewAgentThinkingEvent(p.Text))
	case event.ToolCallCompleted:
		return one(agentchatapi.NewToolCallEvent(p.Name, string(p.Arguments)))
	case event.ToolExecCompleted:
		return one(agentchatapi.NewToolResultEvent(p.Name, p.Result, !p.IsError))
	case event.ToolApprovalRequested:
		// Another protocol's client can answer; say what the run waits for.
		return one(agentchatapi.NewAgentMessageEvent("Waiting for approval of the " + p.Name + " call. " +
			"This connection cannot approve it; a client of a protocol with approvals (AgentLoop) can."))
	case event.InputRequested:
		return one(agentchatapi.NewAgentMessageEvent("The agent asks: " + p.Prompt +
			"\n(This connection cannot answer input requests; a client of a protocol that can, such as AG2 chat.*, can.)"))
	case event.InputTimedOut:
		return one(agentchatapi.NewErrorEvent("Nobody answered the agent's question in time."))
	case event.BudgetExceeded:
		// The run.failed that follows (code budget_exceeded) carries the
		// same message, as its error.
		return nil
	case event.RunFailed:
		return one(agentchatapi.NewErrorEvent(p.Message))
	case event.RunCancelled:
		if p.Reason == "denied" {
			return one(agentchatapi.NewErrorEvent("The run was stopped: a tool call was denied."))
		}
		return one(agentchatapi.NewErrorEvent("The run was cancelled."))
	}
	return nil
}

func one(m agentchatapi.Outbound) []agentchatapi.Outbound { return []agentchatapi.Outbound{m} }
