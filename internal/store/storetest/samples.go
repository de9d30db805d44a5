package storetest

import (
	"encoding/json"

	"github.com/agentwire/agentwire/internal/event"
)

// Sample returns a payload of type t with every field set to something other
// than its zero value, so a store that drops or mangles a field fails the
// round trip. It returns nil for a type it does not know: the suite then
// fails, asking for a sample of the new type here.
func Sample(t event.Type) event.Payload {
	// Raw JSON kept byte for byte: key order (not sorted) and nulls must
	// survive. (EncodePayload compacts raw JSON, so spacing is not kept.)
	args := json.RawMessage(`{"z":null,"path":"a/b.go","lines":[1,2.50,"\u00e9"]}`)
	switch t {
	case event.TypeRunStarted:
		return event.RunStarted{Strategy: "react", Agent: "coder", Input: "fix the build"}
	case event.TypeRunCompleted:
		return event.RunCompleted{Reason: "final_answer", Reply: "done — all green ✓"}
	case event.TypeRunFailed:
		return event.RunFailed{Code: event.CodeModelError, Message: "upstream 529"}
	case event.TypeRunCancelled:
		return event.RunCancelled{Reason: "user"}
	case event.TypeMessageUser:
		return event.MessageUser{MessageID: "m1", Text: "héllo\n\"quoted\" <tag> &amp; \u2028"}
	case event.TypeMessageStarted:
		return event.MessageStarted{MessageID: "m2", Role: event.RoleAssistant, Agent: "coder", Purpose: event.PurposeExplanation}
	case event.TypeMessageDelta:
		return event.MessageDelta{MessageID: "m2", Text: "Hel"}
	case event.TypeMessageCompleted:
		return event.MessageCompleted{MessageID: "m2", Role: event.RoleAssistant, Agent: "coder", Text: "Hello", Purpose: event.PurposeExplanation}
	case event.TypeReasoningDelta:
		return event.ReasoningDelta{ReasoningID: "r1", Text: "think"}
	case event.TypeReasoningCompleted:
		return event.ReasoningCompleted{ReasoningID: "r1", Text: "thinking", DurationMS: 1234}
	case event.TypeToolCallStarted:
		return event.ToolCallStarted{CallID: "c1", Name: "read_file"}
	case event.TypeToolCallDelta:
		return event.ToolCallDelta{CallID: "c1", ArgumentsDelta: `{"pa`}
	case event.TypeToolCallCompleted:
		return event.ToolCallCompleted{CallID: "c1", Name: "read_file", Arguments: args}
	case event.TypeToolApprovalRequested:
		return event.ToolApprovalRequested{CallID: "c2", Name: "shell", Arguments: args,
			Command: []string{"rm", "-rf", "build"}, Patch: "--- a\n+++ b\n", Reason: "writes files", Key: "rm"}
	case event.TypeToolApprovalResolved:
		return event.ToolApprovalResolved{CallID: "c2", Decision: event.DecisionApproveAlways, Message: "ok"}
	case event.TypeToolExecStarted:
		return event.ToolExecStarted{CallID: "c2", Name: "shell"}
	case event.TypeToolExecOutput:
		return event.ToolExecOutput{CallID: "c2", Name: "shell", Stream: "stderr", Text: "warning\x00nul\n"}
	case event.TypeToolExecProgress:
		return event.ToolExecProgress{CallID: "c2", Name: "shell", Percent: 42.5, Message: "halfway"}
	case event.TypeToolExecCompleted:
		return event.ToolExecCompleted{CallID: "c2", Name: "shell", Result: "exit 1", IsError: true}
	case event.TypeInputRequested:
		return event.InputRequested{RequestID: "i1", Prompt: "token?", Secret: true, TimeoutSeconds: 30, Agent: "coder"}
	case event.TypeInputProvided:
		return event.InputProvided{RequestID: "i1", Text: "s3cret"}
	case event.TypeInputTimedOut:
		return event.InputTimedOut{RequestID: "i2", TimeoutSeconds: 30}
	case event.TypeUIPatched:
		return event.UIPatched{RequestID: "u1", Patch: json.RawMessage(`[{"op":"replace","path":"/path","value":"b.go"}]`), Payload: args}
	case event.TypeUIRequested:
		return event.UIRequested{RequestID: "u1", Tool: "pick", Component: "select", Payload: args, Agent: "coder"}
	case event.TypeUIResolved:
		return event.UIResolved{RequestID: "u1", Data: json.RawMessage(`[1,"two",{"3":true}]`)}
	case event.TypeAgentSelected:
		return event.AgentSelected{Agent: "critic"}
	case event.TypeNodeEntered:
		return event.NodeEntered{Node: "think"}
	case event.TypeNodeExited:
		return event.NodeExited{Node: "act", Error: "tool failed"}
	case event.TypeTotExpanded:
		return event.TotExpanded{Candidates: []string{"a", "b", "c"}}
	case event.TypeTotEvaluated:
		return event.TotEvaluated{Chosen: 2, Scores: []float64{0.1, 0.25, 0.9}}
	case event.TypeTotBacktracked:
		return event.TotBacktracked{Reason: "dead end", ToDepth: 1}
	case event.TypeGotPlanned:
		return event.GotPlanned{NodeIDs: []string{"n1", "n2"}, EdgeCount: 1}
	case event.TypeGotNodeStarted:
		return event.GotNodeStarted{NodeID: "n1"}
	case event.TypeGotNodeCompleted:
		return event.GotNodeCompleted{NodeID: "n1", Summary: "ok"}
	case event.TypeGotNodeFailed:
		return event.GotNodeFailed{NodeID: "n2", Error: "timeout"}
	case event.TypeGotExpanded:
		return event.GotExpanded{NodeID: "n2", NodesAdded: 3, EdgesAdded: 4}
	case event.TypeUsage:
		return event.Usage{PromptTokens: 1200, CompletionTokens: 345, TotalTokens: 1545, Cost: 0.0123, Model: "gpt-4o-mini"}
	case event.TypeContextCompacted:
		return event.ContextCompacted{OldTokens: 90000, NewTokens: 4000, Strategy: "summary", Summary: "so far: ..."}
	case event.TypeBudgetExceeded:
		return event.BudgetExceeded{Principal: "alice", Limit: "cost_per_month", Window: "month", Kind: "cost",
			Allowed: 25, Spent: 25.0042, Resets: "2026-12-01T00:00:00Z",
			Message: "Budget exceeded: \"alice\" spent $25.0042 of $25 per month."}
	}
	return nil
}
