package agent

import (
	"encoding/json"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
)

// cancelledResult is what the model is told for a call that never finished
// (its run was cancelled or the server stopped).
const cancelledResult = "The call did not finish: the run was cancelled."

// Transcript rebuilds the conversation the model sees from a thread's
// history events (store.Log.History). It is a pure function of the log, so
// a restarted server continues a thread where it stood.
//
// An assistant turn is the message and the tool calls of one model call;
// tool results follow it. Calls that never got a result are answered with a
// "cancelled" result so every provider accepts the history. A compaction
// summary replaces everything before it but the messages it kept
// (ContextCompacted.KeptMessages), which follow the summary.
func Transcript(events []event.Event) []llm.Message {
	var (
		msgs    []llm.Message
		cur     *llm.Message // the assistant turn being assembled
		pending []llm.ToolCall
		answers = map[string]bool{}
		// reasoning of the turn about to start, with its signature
		rText, rSig string
	)
	// turn starts an assistant turn carrying the reasoning that preceded it.
	turn := func(text string) *llm.Message {
		m := &llm.Message{Role: llm.RoleAssistant, Content: text, Reasoning: rText, ReasoningSignature: rSig}
		rText, rSig = "", ""
		return m
	}
	flush := func() {
		if cur != nil {
			msgs = append(msgs, *cur)
			cur = nil
		}
	}
	closeCalls := func() {
		flush()
		for _, c := range pending {
			if !answers[c.ID] {
				msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: cancelledResult, IsError: true})
			}
		}
		pending = nil
	}
	for _, e := range events {
		switch p := e.Payload.(type) {
		case event.ContextCompacted:
			closeCalls()
			msgs = dropEmpty(msgs)
			kept := msgs[len(msgs)-min(max(p.KeptMessages, 0), len(msgs)):]
			for len(kept) > 0 && kept[0].Role == llm.RoleTool {
				kept = kept[1:] // never a result without its call
			}
			msgs = append([]llm.Message{summaryMessage(p.Summary)}, kept...)
			rText, rSig = "", ""
		case event.ReasoningCompleted:
			if cur != nil { // a signature that came after the turn's output began
				cur.Reasoning += p.Text
				if p.Signature != "" {
					cur.ReasoningSignature = p.Signature
				}
				continue
			}
			rText += p.Text
			if p.Signature != "" {
				rSig = p.Signature
			}
		case event.MessageUser:
			closeCalls()
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: p.Text})
		case event.MessageCompleted:
			// Explanations and strategies' side calls are not the
			// conversation.
			if p.Role != event.RoleAssistant || p.Purpose != "" {
				continue
			}
			if len(pending) > 0 {
				closeCalls()
			}
			flush()
			cur = turn(p.Text)
		case event.ToolCallCompleted:
			if cur == nil {
				closeCalls()
				cur = turn("")
			}
			c := llm.ToolCall{ID: p.CallID, Name: p.Name, Arguments: string(p.Arguments)}
			cur.ToolCalls = append(cur.ToolCalls, c)
			pending = append(pending, c)
		case event.ToolExecCompleted:
			flush()
			if answers[p.CallID] {
				continue
			}
			answers[p.CallID] = true
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: p.CallID, Name: p.Name, Content: p.Result, IsError: p.IsError})
		}
	}
	closeCalls()
	return dropEmpty(msgs)
}

// dropEmpty removes assistant messages with neither text nor calls.
func dropEmpty(msgs []llm.Message) []llm.Message {
	out := msgs[:0]
	for _, m := range msgs {
		if m.Role == llm.RoleAssistant && m.Content == "" && len(m.ToolCalls) == 0 {
			continue
		}
		out = append(out, m)
	}
	return out
}

// rememberedKeys returns the approve-always keys of a thread: the keys of
// approval requests that were resolved with approve_always.
func rememberedKeys(events []event.Event) map[string]bool {
	keys := map[string]string{} // call id -> key
	out := map[string]bool{}
	for _, e := range events {
		switch p := e.Payload.(type) {
		case event.ToolApprovalRequested:
			keys[p.CallID] = p.Key
		case event.ToolApprovalResolved:
			if p.Decision == event.DecisionApproveAlways && keys[p.CallID] != "" {
				out[keys[p.CallID]] = true
			}
		}
	}
	return out
}

// validJSON returns args if it is a JSON value, else args as a JSON string,
// so that an event always encodes.
func validJSON(args string) json.RawMessage {
	if args == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}
