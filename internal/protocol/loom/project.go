package loom

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentwire/agentwire/generated/loomapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
)

// outcome is how a run ended, as its projector saw it.
type outcome int

const (
	running   outcome = iota
	completed         // run_end was sent
	failed            // error was sent; the socket is closed after it
	stopped           // cancelled or denied: error was sent; the socket stays open
)

// chunkKind is how the text deltas of a message show.
type chunkKind int

const (
	hidden    chunkKind = iota // not shown (system notices, explanations)
	asMessage                  // message_chunk: the run's reply
	asThought                  // thought_chunk: a strategy's own deliberation
)

// projector turns one run's canonical events into Loom frames. It holds the
// run's envelope numbering (event_id from 1, +1 per frame; node_id
// run-<node>-<n>, set at each node_enter, and run-0 before the first, as
// the original server sent), the usage of its last model call
// and of the whole run, and the state that values, updates and checkpoint
// snapshot. There is one per run and one goroutine uses it.
type projector struct {
	runID   string // the run id on the wire
	session string // the thread
	agent   string // the agent the run request named
	start   bool   // send run_start (--loom-run-start); the original server sent none

	eventID int            // the last event_id sent
	nodeID  string         // the current envelope node_id
	node    string         // the current node's name
	visits  map[string]int // node name -> node_enter count
	step    int            // node runs ended

	last, total event.Usage
	usageSeen   bool

	state    runState
	mark     int  // len(state.Messages) at the current node_enter
	turnsAt  int  // state.Turns at the current node_enter
	totDirty bool // state.Tot changed in the current node run
	gotDirty bool // state.Got changed in the current node run

	shown map[string]chunkKind // message id -> how its deltas show
	names map[string]string    // call id -> tool name, for its chunks
	ended outcome
}

var _ protocol.Projector[loomapi.Outbound] = (*projector)(nil)

// runState is the state values, updates and checkpoint carry: the run's
// conversation, its model calls, and the ToT or GoT search where the
// strategy has one.
type runState struct {
	Messages []stateMessage `json:"messages"`
	Turns    int            `json:"turns"`
	Tot      *totState      `json:"tot,omitempty"`
	Got      *gotState      `json:"got,omitempty"`
}

type stateMessage struct {
	Role      string      `json:"role"`
	Content   string      `json:"content"`
	ToolCalls []stateCall `json:"tool_calls,omitempty"`
	CallID    string      `json:"call_id,omitempty"`
	Name      string      `json:"name,omitempty"`
	IsError   bool        `json:"is_error,omitempty"`
}

type stateCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type totState struct {
	Depth      int       `json:"depth"`
	Candidates []string  `json:"candidates"`
	Scores     []float64 `json:"scores,omitempty"`
	Chosen     *int      `json:"chosen,omitempty"`
}

type gotState struct {
	Nodes []gotNode `json:"nodes"`
}

type gotNode struct {
	ID      string `json:"id"`
	Task    string `json:"task,omitempty"`
	Status  string `json:"status"` // planned, running, expanded, completed, failed, skipped
	Summary string `json:"summary,omitempty"`
	Error   string `json:"error,omitempty"`
}

// firstNodeID is the envelope node_id before the first node_enter: the
// original server's, whose client requires a node_id on every event.
const firstNodeID = "run-0"

func newProjector(runID, session, agent, message string, start bool) *projector {
	p := &projector{runID: runID, session: session, agent: agent, start: start, nodeID: firstNodeID,
		visits: map[string]int{}, shown: map[string]chunkKind{}, names: map[string]string{}}
	p.state.Messages = []stateMessage{{Role: "user", Content: message}}
	return p
}

// Project returns the frames e shows as; e must be an event of the run.
func (p *projector) Project(e event.Event) []loomapi.Outbound {
	if p.ended != running {
		return nil
	}
	switch v := e.Payload.(type) {
	case event.RunStarted:
		if !p.start {
			return nil
		}
		return p.emit(loomapi.RunStartEvent{RunID: new(p.runID), Message: new(v.Input), Agent: new(p.agent)})
	case event.NodeEntered:
		p.visits[v.Node]++
		p.node = v.Node
		p.nodeID = fmt.Sprintf("run-%s-%d", v.Node, p.visits[v.Node])
		p.mark, p.turnsAt, p.totDirty, p.gotDirty = len(p.state.Messages), p.state.Turns, false, false
		if v.Node == "think" {
			p.state.Turns++
		}
		return p.emit(loomapi.NodeEnterEvent{ID: v.Node})
	case event.NodeExited:
		return p.nodeExit(e, v)
	case event.MessageStarted:
		switch {
		case v.Role != event.RoleAssistant:
		case v.Purpose == "":
			p.shown[v.MessageID] = asMessage
		case v.Purpose == event.PurposeStrategy:
			p.shown[v.MessageID] = asThought // the strategy thinking aloud
		}
		return nil
	case event.MessageDelta:
		if v.Text == "" {
			return nil
		}
		switch p.shown[v.MessageID] {
		case asMessage:
			return p.emit(loomapi.MessageChunkEvent{Content: v.Text, ID: p.nodeName()})
		case asThought:
			return p.emit(loomapi.ThoughtChunkEvent{Content: v.Text, ID: p.nodeName()})
		}
		return nil
	case event.MessageCompleted:
		delete(p.shown, v.MessageID)
		switch {
		case v.Purpose != "":
			return nil
		case v.Role == event.RoleAssistant:
			if v.Text != "" {
				p.state.Messages = append(p.state.Messages, stateMessage{Role: "assistant", Content: v.Text})
			}
			return nil
		case v.Role == event.RoleSystem:
			return p.custom(map[string]any{"kind": "system_message", "text": v.Text})
		}
		return nil
	case event.ReasoningDelta:
		if v.Text == "" {
			return nil
		}
		return p.emit(loomapi.ThoughtChunkEvent{Content: v.Text, ID: p.nodeName()})
	case event.Usage:
		p.last = v
		p.total.PromptTokens += v.PromptTokens
		p.total.CompletionTokens += v.CompletionTokens
		p.total.TotalTokens += v.TotalTokens
		p.usageSeen = true
		return p.emit(loomapi.UsageEvent{PromptTokens: int(v.PromptTokens), CompletionTokens: int(v.CompletionTokens), TotalTokens: int(v.TotalTokens)})
	case event.ToolCallStarted:
		p.names[v.CallID] = v.Name
		return nil
	case event.ToolCallDelta:
		if v.ArgumentsDelta == "" {
			return nil
		}
		ev := loomapi.ToolCallChunkEvent{CallID: optional(v.CallID), ArgumentsDelta: v.ArgumentsDelta}
		if name := p.names[v.CallID]; name != "" {
			ev.Name = &name
		}
		return p.emit(ev)
	case event.ToolCallCompleted:
		p.names[v.CallID] = v.Name
		p.addCall(v)
		return p.emit(loomapi.ToolCallEvent{CallID: optional(v.CallID), Name: v.Name, Arguments: arguments(v.Arguments)})
	case event.ToolApprovalRequested:
		return p.emit(loomapi.ToolApprovalEvent{CallID: optional(v.CallID), Name: v.Name, Arguments: loomapi.ToolApprovalEventArguments(arguments(v.Arguments))})
	case event.ToolApprovalResolved:
		value := map[string]any{"kind": "tool_approval_resolved", "call_id": v.CallID, "decision": decisionName(v.Decision)}
		if v.Message != "" {
			value["message"] = v.Message
		}
		return p.custom(value)
	case event.ToolExecStarted:
		return p.emit(loomapi.ToolStartEvent{CallID: optional(v.CallID), Name: v.Name})
	case event.ToolExecOutput:
		if v.Text == "" {
			return nil
		}
		return p.emit(loomapi.ToolOutputEvent{CallID: optional(v.CallID), Name: v.Name, Content: v.Text})
	case event.ToolExecProgress:
		value := map[string]any{"kind": "tool_progress", "call_id": v.CallID, "name": v.Name, "percent": v.Percent}
		if v.Message != "" {
			value["message"] = v.Message
		}
		return p.custom(value)
	case event.ToolExecCompleted:
		p.state.Messages = append(p.state.Messages, stateMessage{Role: "tool", CallID: v.CallID, Name: v.Name, Content: v.Result, IsError: v.IsError})
		return p.emit(loomapi.ToolEndEvent{CallID: optional(v.CallID), Name: v.Name, Result: v.Result, IsError: v.IsError})
	case event.InputRequested:
		return p.custom(map[string]any{"kind": "input_requested", "request_id": v.RequestID, "prompt": v.Prompt, "secret": v.Secret})
	case event.InputProvided:
		return p.custom(map[string]any{"kind": "input_provided", "request_id": v.RequestID})
	case event.InputTimedOut:
		return p.custom(map[string]any{"kind": "input_timed_out", "request_id": v.RequestID})
	case event.UIRequested:
		return p.custom(map[string]any{"kind": "ui_requested", "request_id": v.RequestID, "component": v.Component})
	case event.UIResolved:
		return p.custom(map[string]any{"kind": "ui_resolved", "request_id": v.RequestID})
	case event.ContextCompacted:
		return p.custom(map[string]any{"kind": "context_compacted", "old_tokens": v.OldTokens, "new_tokens": v.NewTokens})
	case event.TotExpanded:
		p.tot().Candidates, p.tot().Scores, p.tot().Chosen = v.Candidates, nil, nil
		p.tot().Depth++
		if v.Depth > 0 {
			p.tot().Depth = v.Depth
		}
		p.totDirty = true
		return p.emit(loomapi.TotExpandEvent{Candidates: nonNil(v.Candidates)})
	case event.TotEvaluated:
		p.tot().Scores, p.tot().Chosen = v.Scores, new(v.Chosen)
		p.totDirty = true
		return p.emit(loomapi.TotEvaluateEvent{Chosen: max(v.Chosen, 0), Scores: nonNil(v.Scores)})
	case event.TotBacktracked:
		p.tot().Depth = v.ToDepth
		p.totDirty = true
		return p.emit(loomapi.TotBacktrackEvent{Reason: v.Reason, ToDepth: max(v.ToDepth, 0)})
	case event.GotPlanned:
		g := p.got()
		for i, id := range v.NodeIDs {
			n := gotNode{ID: id, Status: "planned"}
			if i < len(v.Tasks) {
				n.Task = v.Tasks[i]
			}
			g.Nodes = append(g.Nodes, n)
		}
		p.gotDirty = true
		return p.emit(loomapi.GotPlanEvent{NodeCount: len(v.NodeIDs), EdgeCount: max(v.EdgeCount, 0), NodeIds: nonNil(v.NodeIDs)})
	case event.GotNodeStarted:
		p.gotNode(v.NodeID).Status = "running"
		return p.emit(loomapi.GotNodeStartEvent{ID: v.NodeID})
	case event.GotNodeCompleted:
		n := p.gotNode(v.NodeID)
		n.Status, n.Summary = "completed", v.Summary
		return p.emit(loomapi.GotNodeCompleteEvent{ID: v.NodeID, ResultSummary: v.Summary})
	case event.GotNodeFailed:
		n := p.gotNode(v.NodeID)
		n.Status, n.Error = "failed", v.Error
		if v.Skipped {
			n.Status = "skipped"
		}
		return p.emit(loomapi.GotNodeFailedEvent{ID: v.NodeID, Error: v.Error})
	case event.GotExpanded:
		p.gotNode(v.NodeID).Status = "expanded"
		for i, id := range v.NodeIDs {
			if n := p.gotNode(id); i < len(v.Tasks) {
				n.Task = v.Tasks[i]
			}
		}
		return p.emit(loomapi.GotExpandEvent{NodeID: v.NodeID, NodesAdded: max(v.NodesAdded, 0), EdgesAdded: max(v.EdgesAdded, 0)})
	case event.RunCompleted:
		p.ended = completed
		end := loomapi.NewRunEndResponse(p.runID, v.Reply)
		p.eventID++
		end.SessionID, end.EventID, end.NodeID = new(p.session), new(p.eventID), new(p.nodeID)
		if p.usageSeen {
			end.Usage, end.TotalUsage = tokenUsage(p.last), tokenUsage(p.total)
		}
		return []loomapi.Outbound{end}
	case event.BudgetExceeded:
		// The run.failed that follows (code budget_exceeded) carries the
		// same message, as its error.
		return nil
	case event.RunFailed:
		p.ended = failed
		msg := v.Message
		if msg == "" {
			msg = "the run failed (" + v.Code + ")"
		}
		return []loomapi.Outbound{errorFrame(p.runID, msg)}
	case event.RunCancelled:
		p.ended = stopped
		msg := "cancelled"
		if v.Reason == event.CodeDenied {
			msg = "denied"
		}
		return []loomapi.Outbound{errorFrame(p.runID, msg)}
	}
	return nil
}

// Ended reports how the run ended (running until its last event).
func (p *projector) Ended() outcome { return p.ended }

// nodeExit closes a node run: node_exit, then the state snapshots that
// follow every node: updates (what the node changed), values (the whole
// state) and checkpoint.
func (p *projector) nodeExit(e event.Event, v event.NodeExited) []loomapi.Outbound {
	result := json.RawMessage(`"Ok"`)
	if v.Error != "" {
		result, _ = json.Marshal(map[string]string{"Err": v.Error})
	}
	p.step++
	out := p.emit(loomapi.NodeExitEvent{ID: v.Node, Result: result})

	update := map[string]any{"messages": p.state.Messages[p.mark:]}
	if p.state.Turns != p.turnsAt {
		update["turns"] = p.state.Turns
	}
	if p.totDirty {
		update["tot"] = p.state.Tot
	}
	if p.gotDirty {
		update["got"] = p.state.Got
	}
	upd, _ := json.Marshal(update)
	full, _ := json.Marshal(p.state)
	out = append(out, p.emit(loomapi.UpdatesEvent{ID: v.Node, State: upd})...)
	out = append(out, p.emit(loomapi.ValuesEvent{State: full})...)
	out = append(out, p.emit(loomapi.CheckpointEvent{CheckpointID: e.ID, Timestamp: e.Time.UTC().Format(time.RFC3339Nano),
		Step: p.step, State: full, ThreadID: p.session})...)
	p.mark, p.turnsAt, p.totDirty, p.gotDirty = len(p.state.Messages), p.state.Turns, false, false
	return out
}

// addCall records a completed tool call in the state: on the assistant
// message of the same node run, or on a new one.
func (p *projector) addCall(v event.ToolCallCompleted) {
	call := stateCall{ID: v.CallID, Name: v.Name, Arguments: v.Arguments}
	if !json.Valid(call.Arguments) {
		call.Arguments, _ = json.Marshal(string(v.Arguments))
	}
	if n := len(p.state.Messages); n > p.mark && p.state.Messages[n-1].Role == "assistant" {
		p.state.Messages[n-1].ToolCalls = append(p.state.Messages[n-1].ToolCalls, call)
		return
	}
	p.state.Messages = append(p.state.Messages, stateMessage{Role: "assistant", ToolCalls: []stateCall{call}})
}

func (p *projector) tot() *totState {
	if p.state.Tot == nil {
		p.state.Tot = &totState{Candidates: []string{}}
	}
	return p.state.Tot
}

func (p *projector) got() *gotState {
	if p.state.Got == nil {
		p.state.Got = &gotState{Nodes: []gotNode{}}
	}
	return p.state.Got
}

// gotNode returns the plan node id, adding it (an expansion's sub-node)
// when the plan does not have it yet.
func (p *projector) gotNode(id string) *gotNode {
	g := p.got()
	p.gotDirty = true
	for i := range g.Nodes {
		if g.Nodes[i].ID == id {
			return &g.Nodes[i]
		}
	}
	g.Nodes = append(g.Nodes, gotNode{ID: id, Status: "planned"})
	return &g.Nodes[len(g.Nodes)-1]
}

// nodeName is the name events outside any node run give as their
// producing node.
func (p *projector) nodeName() string {
	if p.node == "" {
		return "think"
	}
	return p.node
}

func (p *projector) custom(value map[string]any) []loomapi.Outbound {
	b, _ := json.Marshal(value)
	return p.emit(loomapi.CustomEvent{Value: b})
}

// emit wraps one event in its run_stream_event frame with the envelope:
// session_id, node_id (not on got_expand, whose payload has a node_id of
// its own) and the next event_id.
func (p *projector) emit(v loomapi.ProtocolEventValue) []loomapi.Outbound {
	p.eventID++
	sid, eid, nid := new(p.session), new(p.eventID), new(p.nodeID)
	switch ev := v.(type) {
	case loomapi.RunStartEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "run_start", sid, nid, eid
		v = ev
	case loomapi.NodeEnterEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "node_enter", sid, nid, eid
		v = ev
	case loomapi.NodeExitEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "node_exit", sid, nid, eid
		v = ev
	case loomapi.MessageChunkEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "message_chunk", sid, nid, eid
		v = ev
	case loomapi.ThoughtChunkEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "thought_chunk", sid, nid, eid
		v = ev
	case loomapi.UsageEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "usage", sid, nid, eid
		v = ev
	case loomapi.ValuesEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "values", sid, nid, eid
		v = ev
	case loomapi.UpdatesEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "updates", sid, nid, eid
		v = ev
	case loomapi.CustomEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "custom", sid, nid, eid
		v = ev
	case loomapi.CheckpointEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "checkpoint", sid, nid, eid
		v = ev
	case loomapi.TotExpandEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "tot_expand", sid, nid, eid
		v = ev
	case loomapi.TotEvaluateEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "tot_evaluate", sid, nid, eid
		v = ev
	case loomapi.TotBacktrackEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "tot_backtrack", sid, nid, eid
		v = ev
	case loomapi.GotPlanEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "got_plan", sid, nid, eid
		v = ev
	case loomapi.GotNodeStartEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "got_node_start", sid, nid, eid
		v = ev
	case loomapi.GotNodeCompleteEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "got_node_complete", sid, nid, eid
		v = ev
	case loomapi.GotNodeFailedEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "got_node_failed", sid, nid, eid
		v = ev
	case loomapi.GotExpandEvent:
		ev.Type, ev.SessionID, ev.EventID = "got_expand", sid, eid
		v = ev
	case loomapi.ToolCallChunkEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "tool_call_chunk", sid, nid, eid
		v = ev
	case loomapi.ToolCallEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "tool_call", sid, nid, eid
		v = ev
	case loomapi.ToolStartEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "tool_start", sid, nid, eid
		v = ev
	case loomapi.ToolOutputEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "tool_output", sid, nid, eid
		v = ev
	case loomapi.ToolEndEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "tool_end", sid, nid, eid
		v = ev
	case loomapi.ToolApprovalEvent:
		ev.Type, ev.SessionID, ev.NodeID, ev.EventID = "tool_approval", sid, nid, eid
		v = ev
	default:
		panic(fmt.Sprintf("loom: no envelope for %T", v))
	}
	return []loomapi.Outbound{loomapi.NewRunStreamEventResponse(p.runID, loomapi.ProtocolEvent{Value: v})}
}

// arguments is a tool call's arguments as the JSON object the events
// carry; arguments that are not an object (a model's malformed output)
// are kept as {"raw": <text>}.
func arguments(raw json.RawMessage) loomapi.ToolCallEventArguments {
	var m map[string]any
	if len(raw) == 0 {
		return loomapi.ToolCallEventArguments{}
	}
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return loomapi.ToolCallEventArguments{"raw": string(raw)}
	}
	return m
}

// decisions maps the decisions of tool_approval_response onto the core's.
var decisions = map[string]event.Decision{
	"approve":        event.DecisionApprove,
	"approve_always": event.DecisionApproveAlways,
	"deny":           event.DecisionDenyContinue,
	"deny_stop":      event.DecisionDenyStop,
}

// decisionName is a decision as tool_approval_response names it; an
// explain decision (another protocol's) keeps the core's name.
func decisionName(d event.Decision) string {
	for name, v := range decisions {
		if v == d {
			return name
		}
	}
	return string(d)
}

func tokenUsage(u event.Usage) *loomapi.TokenUsage {
	return &loomapi.TokenUsage{PromptTokens: int(max(u.PromptTokens, 0)), CompletionTokens: int(max(u.CompletionTokens, 0)), TotalTokens: int(max(u.TotalTokens, 0))}
}

func errorFrame(id, msg string) loomapi.ErrorResponse {
	e := loomapi.NewErrorResponse(msg)
	if id != "" {
		e.ID = &id
	}
	return e
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
