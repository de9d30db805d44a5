package threads

import (
	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/event"
)

// projectHistory maps a thread's conversation events (protocol.Core's
// History, oldest first) onto the document's messages:
//
//   - message.user is a user message, with the user message's id;
//   - message.completed of the assistant or the system, with text, is an
//     agent message with the id its agent_text chunks carried (marked
//     incomplete when its run was interrupted while it streamed); explanations
//     of pending tool calls are left out, as the model's history leaves them
//     out;
//   - tool.call.completed is a tool_call message and tool.exec.completed a
//     tool_result message, each with its log event's id (the canonical log
//     has no message id for them).
//
// Every other event (runs, reasoning, approvals, input) is not part of this
// protocol's history.
func projectHistory(events []event.Event) []threadsapi.Message {
	msgs := make([]threadsapi.Message, 0, len(events))
	add := func(e event.Event, id string, typ threadsapi.MessageMessageType, c threadsapi.MessageContent) {
		msgs = append(msgs, threadsapi.Message{MessageID: id, MessageType: typ, Timestamp: e.Time.UTC(), Content: c})
	}
	for _, e := range events {
		switch p := e.Payload.(type) {
		case event.MessageUser:
			add(e, p.MessageID, threadsapi.MessageMessageTypeUser,
				threadsapi.NewUserContentMessageContent(threadsapi.UserContent{Type: "user", Text: p.Text}))
		case event.MessageCompleted:
			if p.Text == "" || p.Purpose == event.PurposeExplanation ||
				(p.Role != event.RoleAssistant && p.Role != event.RoleSystem) {
				continue
			}
			c := threadsapi.AgentContent{Type: "agent", Text: p.Text}
			if p.Incomplete {
				c.Incomplete = threadsapi.NewOptBool(true)
			}
			add(e, p.MessageID, threadsapi.MessageMessageTypeAgent, threadsapi.NewAgentContentMessageContent(c))
		case event.ToolCallCompleted:
			add(e, e.ID, threadsapi.MessageMessageTypeToolCall,
				threadsapi.NewToolCallContentMessageContent(threadsapi.ToolCallContent{
					Type: "tool_call", ToolCallID: p.CallID, ToolName: p.Name, Arguments: toolArguments(p.Arguments),
				}))
		case event.ToolExecCompleted:
			resultID, result := toolResult(p)
			add(e, e.ID, threadsapi.MessageMessageTypeToolResult,
				threadsapi.NewToolResultContentMessageContent(threadsapi.ToolResultContent{
					Type: "tool_result", ToolResultID: resultID, ToolCallID: p.CallID, Result: result,
				}))
		}
	}
	return msgs
}
