package ag2

// What ChatUI, the original frontend of the protocol, needs beyond
// ag2-chat-ws.md, and the frames and answers that give it: fields at the
// top level of frames, the legacy ui_tool_event frame, the prompt of an
// input request as a message, input_request_id, bare text as an answer,
// and ui_tool_response. asyncapi/ag2.yaml says which and why.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
)

// flatten copies the members of an encoded frame's data object to its top
// level, after data: {"type":T,"data":{"a":1}} becomes
// {"type":T,"data":{"a":1},"a":1}. A frame of another shape is returned
// as it is.
func flatten(b []byte) []byte {
	var f struct {
		Type json.RawMessage `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(b, &f) != nil || len(f.Type) == 0 {
		return b
	}
	d := bytes.TrimSpace(f.Data)
	if len(d) < 2 || d[0] != '{' {
		return b
	}
	inner := bytes.TrimSpace(d[1 : len(d)-1])
	if len(inner) == 0 {
		return b
	}
	out := make([]byte, 0, len(f.Type)+2*len(d)+20)
	out = append(out, `{"type":`...)
	out = append(out, f.Type...)
	out = append(out, `,"data":`...)
	out = append(out, d...)
	out = append(out, ',')
	out = append(out, inner...)
	return append(out, '}')
}

// asked is the frames of an input request: for one without a component
// (a question, an approval), first its prompt as a chat.text of the agent
// that asks, since ChatUI renders nothing for such a request; then the
// chat.input_request.
func (p *projector) asked(seq int64, agent string, d ag2api.InputRequestData) []frame {
	req := frame{seq: seq, msg: ag2api.NewInputRequest(d)}
	if d.ComponentType != nil && *d.ComponentType != "" {
		return []frame{req}
	}
	if agent == "" {
		agent = "assistant"
	}
	text := frame{seq: seq, msg: ag2api.NewText(ag2api.TextData{ChatID: p.chat, Agent: agent, Content: d.Prompt, Seq: int(seq)})}
	return []frame{text, req}
}

// uiFrames is the frames of a UI component: its chat.tool_call, with the
// fields ChatUI looks for, then the legacy ui_tool_event ChatUI renders
// components from, with the same seq.
func (p *projector) uiFrames(seq int64, d ag2api.ToolCallData) []frame {
	d.IsUITool = new(true)
	d.UIToolID = new(d.ComponentType)
	d.WorkflowName = new(p.workflow)
	display := "inline"
	if d.Display != nil {
		display = *d.Display
	}
	ev := ag2api.NewUIToolEvent(ag2api.UIToolEventData{ChatID: p.chat, UIToolID: d.ComponentType, EventID: d.Corr,
		WorkflowName: p.workflow, Payload: d.Payload, Display: display, AwaitingResponse: d.AwaitingResponse, Seq: int(seq)})
	return []frame{{seq: seq, msg: ag2api.NewToolCall(d)}, {seq: seq, msg: ev}}
}

// requestIDOf is the request a user.input.submit answers: request_id, or
// its alias input_request_id ("" for neither). Both, differing, are
// refused.
func requestIDOf(m ag2api.UserInputSubmit) (string, error) {
	id, alias := "", ""
	if m.RequestID != nil {
		id = *m.RequestID
	}
	if m.InputRequestID != nil {
		alias = *m.InputRequestID
	}
	switch {
	case id == "":
		return alias, nil
	case alias != "" && alias != id:
		return "", &protocol.Error{Code: protocol.CodeInvalid, Type: m.Type, Path: "/input_request_id",
			Message: fmt.Sprintf("input_request_id %q and request_id %q name different requests; send one", alias, id)}
	}
	return id, nil
}

// answerCommand is the command that answers the request id, of kind k,
// with the user's text. typ is the message type named in an error.
func answerCommand(typ, id, text string, k kind) (event.Command, error) {
	switch k {
	case kindApproval:
		d, ok := parseDecision(text)
		if !ok {
			return event.Command{}, &protocol.Error{Code: protocol.CodeInvalid, Type: typ, Path: "/text",
				Message: fmt.Sprintf("%q is not an answer to an approval: send approve (or yes, y), approve always, deny (or no, n) or deny and stop; the request is still pending", text)}
		}
		return event.Command{Kind: event.CommandApprove, ID: id, Decision: d}, nil
	case kindUI:
		data, _ := json.Marshal(text)
		return event.Command{Kind: event.CommandUI, ID: id, Data: data}, nil
	}
	return event.Command{Kind: event.CommandInput, ID: id, Text: text}, nil
}

// HandleUIToolResponse answers the UI request eventId names with the
// component's response, as inline_component.result does.
func (s *session) HandleUIToolResponse(ctx context.Context, m ag2api.UIToolResponse) error {
	data := m.Response
	if len(data) == 0 {
		data = json.RawMessage(`null`)
	}
	return s.answer(ctx, event.Command{Kind: event.CommandUI, ID: m.EventID, Data: data})
}
