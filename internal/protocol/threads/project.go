package threads

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/go-faster/jx"
	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/event"
)

// projector maps canonical events onto the SSE events of a thread stream.
// Most events show as nothing (run bookkeeping, reasoning, tool output,
// usage, and message.completed, whose text the deltas already carried).
//
// Its one piece of state is the set of explanation messages in flight:
// their deltas are left out, as the history leaves their text out, so that
// every agent_text message_id appears in the history. A stream that resumes
// in the middle of an explanation has not seen its message.started and
// shows the rest of it.
type projector struct {
	thread       uuid.UUID
	explanations map[string]bool
}

func newProjector(thread uuid.UUID) *projector {
	return &projector{thread: thread, explanations: map[string]bool{}}
}

// project returns the SSE event e shows as, if any, and whether e ends a
// run (the event is then done or error): shows, then render.
func (p *projector) project(e event.Event) (out threadsapi.StreamEvent, ok, end bool) {
	if ok, end = p.shows(e); ok {
		out = p.render(e)
	}
	return out, ok, end
}

// shows reports whether e shows as an SSE event, and whether it ends a
// run. It keeps the projector's state.
func (p *projector) shows(e event.Event) (ok, end bool) {
	switch pl := e.Payload.(type) {
	case event.MessageStarted:
		if pl.Purpose == event.PurposeExplanation {
			p.explanations[pl.MessageID] = true
		}
	case event.MessageCompleted:
		delete(p.explanations, pl.MessageID)
	case event.MessageDelta:
		return pl.Text != "" && !p.explanations[pl.MessageID], false
	case event.ToolCallCompleted, event.ToolExecCompleted:
		return true, false
	case event.BudgetExceeded:
		// The run.failed that follows (code budget_exceeded) carries the
		// same message, as the stream's error.
		return false, false
	case event.RunCompleted, event.RunFailed, event.RunCancelled:
		return true, true
	}
	return false, false
}

// render returns the SSE event e shows as, when shows says it does. It
// depends on e alone (and the stream's thread), so that streams can share
// it.
func (p *projector) render(e event.Event) threadsapi.StreamEvent {
	switch pl := e.Payload.(type) {
	case event.MessageDelta:
		return agentTextEvent(seqID(e.Seq), threadsapi.AgentTextEvent{
			ThreadID: p.thread, MessageID: pl.MessageID, Chunk: pl.Text,
		})
	case event.ToolCallCompleted:
		return toolCallEvent(seqID(e.Seq), threadsapi.ToolCallEvent{
			ToolCallID: pl.CallID, ToolName: pl.Name, Arguments: toolArguments(pl.Arguments),
		})
	case event.ToolExecCompleted:
		resultID, result := toolResult(pl)
		return toolResultEvent(seqID(e.Seq), threadsapi.ToolResultEvent{
			ToolResultID: resultID, ToolCallID: pl.CallID, Result: result,
		})
	case event.RunCompleted:
		return doneEvent(e.Seq)
	case event.RunFailed:
		msg := pl.Message
		if msg == "" {
			msg = "The run failed."
		}
		return errorEvent(e.Seq, msg)
	case event.RunCancelled:
		if pl.Reason == event.CodeDenied {
			return errorEvent(e.Seq, "The run was stopped: a tool call was denied.")
		}
		return errorEvent(e.Seq, "The run was cancelled.")
	}
	return threadsapi.StreamEvent{}
}

// seqID is the SSE id of an event projected from the log event at seq.
func seqID(seq int64) string { return strconv.FormatInt(seq, 10) }

// The events of a stream, with their id and their Event set as DecodeEvent
// sets them.

func agentTextEvent(id string, d threadsapi.AgentTextEvent) threadsapi.StreamEvent {
	return threadsapi.NewAgentTextSSEStreamEvent(threadsapi.AgentTextSSE{ID: id, Event: EventAgentText, Data: d})
}

func toolCallEvent(id string, d threadsapi.ToolCallEvent) threadsapi.StreamEvent {
	return threadsapi.NewToolCallSSEStreamEvent(threadsapi.ToolCallSSE{ID: id, Event: EventToolCall, Data: d})
}

func toolResultEvent(id string, d threadsapi.ToolResultEvent) threadsapi.StreamEvent {
	return threadsapi.NewToolResultSSEStreamEvent(threadsapi.ToolResultSSE{ID: id, Event: EventToolResult, Data: d})
}

func doneEvent(seq int64) threadsapi.StreamEvent {
	return threadsapi.NewDoneSSEStreamEvent(threadsapi.DoneSSE{ID: seqID(seq), Event: EventDone})
}

func errorEvent(seq int64, msg string) threadsapi.StreamEvent {
	return threadsapi.NewErrorSSEStreamEvent(threadsapi.ErrorSSE{ID: seqID(seq), Event: EventError, Data: threadsapi.ErrorEvent{Error: msg}})
}

// toolArguments returns a call's arguments as the JSON object the document
// requires: the stored arguments when they are an object, {} when there are
// none, else {"value": <the arguments>} (as a JSON string when they are not
// JSON at all, which a model can produce).
func toolArguments(raw json.RawMessage) threadsapi.JSONObject {
	if obj, ok := jsonObject(raw); ok {
		return obj
	}
	var compact bytes.Buffer
	switch err := json.Compact(&compact, raw); {
	case len(bytes.TrimSpace(raw)) == 0:
		return threadsapi.JSONObject{}
	case err == nil:
		return threadsapi.JSONObject{"value": jx.Raw(compact.Bytes())}
	}
	return threadsapi.JSONObject{"value": jsonString(string(raw))}
}

// toolResult returns a tool result's id and body as the original server
// shaped them: "result-<call>" and the tool's output (the output itself
// when it is a JSON object, else {"output": <text>}), or "error-<call>" and
// {"error": <message>, "tool": <name>}.
func toolResult(p event.ToolExecCompleted) (string, threadsapi.JSONObject) {
	if p.IsError {
		return "error-" + p.CallID, threadsapi.JSONObject{"error": jsonString(p.Result), "tool": jsonString(p.Name)}
	}
	if obj, ok := jsonObject([]byte(p.Result)); ok {
		return "result-" + p.CallID, obj
	}
	return "result-" + p.CallID, threadsapi.JSONObject{"output": jsonString(p.Result)}
}

// jsonObject parses b when it is one JSON object. The members are
// compacted, so that an event's data stays on one line.
func jsonObject(b []byte) (threadsapi.JSONObject, bool) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(compact.Bytes(), &m); err != nil || m == nil {
		return nil, false
	}
	obj := make(threadsapi.JSONObject, len(m))
	for k, v := range m {
		obj[k] = jx.Raw(v)
	}
	return obj, true
}

func jsonString(s string) jx.Raw {
	var e jx.Encoder
	e.Str(s)
	return jx.Raw(e.Bytes())
}
