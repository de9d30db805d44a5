// The canonical vocabulary; keep ARCHITECTURE.md in step with it. It is
// one file, longer than most, on purpose: every event kind, its payload
// and its registration read together, as the list a new kind joins.

package event

import (
	"encoding/json"
	"reflect"
)

// Type names an event kind, as stored.
type Type string

// Payload is the typed body of an event.
type Payload interface {
	// EventType reports the Type the payload is stored under.
	EventType() Type
}

// Event types.
const (
	TypeRunStarted            Type = "run.started"
	TypeRunCompleted          Type = "run.completed"
	TypeRunFailed             Type = "run.failed"
	TypeRunCancelled          Type = "run.cancelled"
	TypeMessageUser           Type = "message.user"
	TypeMessageStarted        Type = "message.started"
	TypeMessageDelta          Type = "message.delta"
	TypeMessageCompleted      Type = "message.completed"
	TypeReasoningDelta        Type = "reasoning.delta"
	TypeReasoningCompleted    Type = "reasoning.completed"
	TypeToolCallStarted       Type = "tool.call.started"
	TypeToolCallDelta         Type = "tool.call.delta"
	TypeToolCallCompleted     Type = "tool.call.completed"
	TypeToolApprovalRequested Type = "tool.approval.requested"
	TypeToolApprovalResolved  Type = "tool.approval.resolved"
	TypeToolExecStarted       Type = "tool.exec.started"
	TypeToolExecOutput        Type = "tool.exec.output"
	TypeToolExecProgress      Type = "tool.exec.progress"
	TypeToolExecCompleted     Type = "tool.exec.completed"
	TypeInputRequested        Type = "input.requested"
	TypeInputProvided         Type = "input.provided"
	TypeInputTimedOut         Type = "input.timed_out"
	TypeUIRequested           Type = "ui.requested"
	TypeUIResolved            Type = "ui.resolved"
	TypeUIPatched             Type = "ui.patched"
	TypeAgentSelected         Type = "agent.selected"
	TypeNodeEntered           Type = "node.entered"
	TypeNodeExited            Type = "node.exited"
	TypeTotExpanded           Type = "tot.expanded"
	TypeTotEvaluated          Type = "tot.evaluated"
	TypeTotBacktracked        Type = "tot.backtracked"
	TypeGotPlanned            Type = "got.planned"
	TypeGotNodeStarted        Type = "got.node.started"
	TypeGotNodeCompleted      Type = "got.node.completed"
	TypeGotNodeFailed         Type = "got.node.failed"
	TypeGotExpanded           Type = "got.expanded"
	TypeUsage                 Type = "usage"
	TypeContextCompacted      Type = "context.compacted"
	TypeBudgetExceeded        Type = "budget.exceeded"
)

// RunStarted records that a run began. Strategy is the reasoning strategy (react, dup, tot, got, group); Input is the user text that started it.
type RunStarted struct {
	Strategy string `json:"strategy,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Input    string `json:"input,omitempty"`
}

// EventType implements Payload.
func (RunStarted) EventType() Type { return TypeRunStarted }

// RunCompleted records that a run ended normally. Reason is why (for example "final_answer"); Reply is the full final reply.
type RunCompleted struct {
	Reason string `json:"reason"`
	Reply  string `json:"reply"`
}

// EventType implements Payload.
func (RunCompleted) EventType() Type { return TypeRunCompleted }

// RunFailed records that a run ended with an error. Code is one of the Code constants.
type RunFailed struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// EventType implements Payload.
func (RunFailed) EventType() Type { return TypeRunFailed }

// RunCancelled records that a run was cancelled by a command or by shutdown.
type RunCancelled struct {
	Reason string `json:"reason,omitempty"`
}

// EventType implements Payload.
func (RunCancelled) EventType() Type { return TypeRunCancelled }

// MessageUser records that the user said something to the thread.
type MessageUser struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
	// Key is the client's idempotency key of the post, when it sent one.
	Key string `json:"key,omitempty"`
}

// EventType implements Payload.
func (MessageUser) EventType() Type { return TypeMessageUser }

// MessageStarted records that an agent (or system) message began streaming.
type MessageStarted struct {
	MessageID string `json:"message_id"`
	Role      Role   `json:"role"`
	Agent     string `json:"agent,omitempty"`
	// Purpose is empty for conversation messages; "explanation" marks an
	// answer to an explain decision, which is shown but not part of the
	// model's history.
	Purpose string `json:"purpose,omitempty"`
}

// EventType implements Payload.
func (MessageStarted) EventType() Type { return TypeMessageStarted }

// MessageDelta records a chunk of a streaming message's text. Offset is
// where Text begins in the message's text (see Delta).
type MessageDelta struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
	Offset    int64  `json:"offset,omitempty"`
}

// EventType implements Payload.
func (MessageDelta) EventType() Type { return TypeMessageDelta }

// MessageCompleted records that a message is complete; Text is its whole text.
type MessageCompleted struct {
	MessageID string `json:"message_id"`
	Role      Role   `json:"role"`
	Agent     string `json:"agent,omitempty"`
	Text      string `json:"text"`
	// Purpose is empty for conversation messages; "explanation" marks an
	// answer to an explain decision, which is shown but not part of the
	// model's history.
	Purpose string `json:"purpose,omitempty"`
	// Incomplete marks a message whose run was interrupted while it
	// streamed (its server died): Text is what had been streamed.
	Incomplete bool `json:"incomplete,omitempty"`
}

// EventType implements Payload.
func (MessageCompleted) EventType() Type { return TypeMessageCompleted }

// ReasoningDelta records that a chunk of the model's reasoning.
type ReasoningDelta struct {
	ReasoningID string `json:"reasoning_id"`
	Text        string `json:"text"`
	Offset      int64  `json:"offset,omitempty"`
}

// EventType implements Payload.
func (ReasoningDelta) EventType() Type { return TypeReasoningDelta }

// ReasoningCompleted records that a reasoning block is complete.
type ReasoningCompleted struct {
	ReasoningID string `json:"reasoning_id"`
	Text        string `json:"text"`
	DurationMS  int64  `json:"duration_ms,omitempty"`
	// Signature is the provider's opaque signature of the reasoning
	// (Anthropic thinking, Gemini thought signatures), which it wants back
	// with the turn in later calls. A signature that arrives after its
	// reasoning was closed comes as a reasoning.completed with no text.
	Signature string `json:"signature,omitempty"`
}

// EventType implements Payload.
func (ReasoningCompleted) EventType() Type { return TypeReasoningCompleted }

// ToolCallStarted records that the model began a tool call.
type ToolCallStarted struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Agent is the agent that made the call (a workflow's agent, or the
	// single agent's name).
	Agent string `json:"agent,omitempty"`
}

// EventType implements Payload.
func (ToolCallStarted) EventType() Type { return TypeToolCallStarted }

// ToolCallDelta records that a fragment of a tool call's JSON arguments.
type ToolCallDelta struct {
	CallID         string `json:"call_id"`
	ArgumentsDelta string `json:"arguments_delta"`
	Offset         int64  `json:"offset,omitempty"`
}

// EventType implements Payload.
func (ToolCallDelta) EventType() Type { return TypeToolCallDelta }

// ToolCallCompleted records that the model finished a tool call; Arguments is a JSON object.
type ToolCallCompleted struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Agent is the agent that made the call.
	Agent string `json:"agent,omitempty"`
}

// EventType implements Payload.
func (ToolCallCompleted) EventType() Type { return TypeToolCallCompleted }

// ToolApprovalRequested records that a tool call waits for a person's decision. Command is the command line for shell tools; Patch the patch text for apply_patch.
type ToolApprovalRequested struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Command   []string        `json:"command,omitempty"`
	Patch     string          `json:"patch,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	// Key is what an approve-always decision remembers for the thread: the
	// program name of a command, or the tool name of an edit.
	Key string `json:"key,omitempty"`
	// Agent is the agent whose call waits.
	Agent string `json:"agent,omitempty"`
}

// EventType implements Payload.
func (ToolApprovalRequested) EventType() Type { return TypeToolApprovalRequested }

// ToolApprovalResolved records that a person decided on a pending tool call.
type ToolApprovalResolved struct {
	CallID   string   `json:"call_id"`
	Decision Decision `json:"decision"`
	Message  string   `json:"message,omitempty"`
	// Patch is the patch a person edited before approving a patch call;
	// it is what was applied instead of the model's.
	Patch string `json:"patch,omitempty"`
}

// EventType implements Payload.
func (ToolApprovalResolved) EventType() Type { return TypeToolApprovalResolved }

// ToolExecStarted records that a tool began running.
type ToolExecStarted struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
}

// EventType implements Payload.
func (ToolExecStarted) EventType() Type { return TypeToolExecStarted }

// ToolExecOutput records that output a running tool produced (stdout or stderr).
type ToolExecOutput struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	Stream string `json:"stream,omitempty"`
	Text   string `json:"text"`
}

// EventType implements Payload.
func (ToolExecOutput) EventType() Type { return TypeToolExecOutput }

// ToolExecProgress records that progress of a long-running tool; Percent is 0..100.
type ToolExecProgress struct {
	CallID  string  `json:"call_id"`
	Name    string  `json:"name"`
	Percent float64 `json:"percent"`
	Message string  `json:"message,omitempty"`
}

// EventType implements Payload.
func (ToolExecProgress) EventType() Type { return TypeToolExecProgress }

// ToolExecCompleted records that a tool finished; Result is what the model sees.
type ToolExecCompleted struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	Result  string `json:"result"`
	IsError bool   `json:"is_error"`
	// Outcome is what became of the call, for anyone who must tell a
	// tool that ran and failed from one that never ran: never read it
	// from Result's text. Empty in events logged before it existed; use
	// OutcomeOf.
	Outcome Outcome `json:"outcome,omitempty"`
	// ExitCode is the exit status of a tool that ran a program (bash);
	// nil for other tools and for calls that never ran.
	ExitCode *int `json:"exit_code,omitempty"`
	// DurationMS is how long the tool ran; 0 for calls that never ran.
	DurationMS int64 `json:"duration_ms,omitempty"`
}

// EventType implements Payload.
func (ToolExecCompleted) EventType() Type { return TypeToolExecCompleted }

// Outcome is what became of a tool call.
type Outcome string

// Outcomes of a tool call.
const (
	// OutcomeOK: the tool ran and succeeded.
	OutcomeOK Outcome = "ok"
	// OutcomeFailed: the tool ran and failed, or could not be run as
	// called (no such tool, arguments that are not an object).
	OutcomeFailed Outcome = "failed"
	// OutcomeRefused: not run, because the approval policy or a person
	// refused it.
	OutcomeRefused Outcome = "refused"
	// OutcomeCancelled: not run, or stopped, because the run was
	// cancelled or the user stopped it.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeTimedOut: the tool, or the person it asked, ran out of time.
	OutcomeTimedOut Outcome = "timed_out"
)

// OutcomeOf is c's outcome; for an event logged before outcomes were, the
// one its IsError implies (ok or failed).
func OutcomeOf(c ToolExecCompleted) Outcome {
	switch {
	case c.Outcome != "":
		return c.Outcome
	case c.IsError:
		return OutcomeFailed
	}
	return OutcomeOK
}

// InputRequested records that the agent asks a person for text. Timeout, when non-zero, ends the wait with input.timed_out.
type InputRequested struct {
	RequestID      string `json:"request_id"`
	Prompt         string `json:"prompt"`
	Secret         bool   `json:"secret,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
	Agent          string `json:"agent,omitempty"`
}

// EventType implements Payload.
func (InputRequested) EventType() Type { return TypeInputRequested }

// InputProvided records that a person answered an input request.
type InputProvided struct {
	RequestID string `json:"request_id"`
	Text      string `json:"text"`
}

// EventType implements Payload.
func (InputProvided) EventType() Type { return TypeInputProvided }

// InputTimedOut records that nobody answered an input request in time.
type InputTimedOut struct {
	RequestID      string `json:"request_id"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

// EventType implements Payload.
func (InputTimedOut) EventType() Type { return TypeInputTimedOut }

// UIRequested records that a tool asks the frontend to render a component and answer.
type UIRequested struct {
	RequestID string          `json:"request_id"`
	Tool      string          `json:"tool"`
	Component string          `json:"component"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Agent     string          `json:"agent,omitempty"`
	// Display is where the component is shown: "inline" (the default) or
	// "artifact" (a side panel the user may patch).
	Display string `json:"display,omitempty"`
}

// EventType implements Payload.
func (UIRequested) EventType() Type { return TypeUIRequested }

// UIResolved records that the frontend answered a UI request.
type UIResolved struct {
	RequestID string          `json:"request_id"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// EventType implements Payload.
func (UIResolved) EventType() Type { return TypeUIResolved }

// UIPatched records that the user patched a UI component's payload (an
// artifact): Patch is the RFC 6902 JSON Patch applied, Payload the
// payload after it.
type UIPatched struct {
	RequestID string          `json:"request_id"`
	Patch     json.RawMessage `json:"patch"`
	Payload   json.RawMessage `json:"payload"`
}

// EventType implements Payload.
func (UIPatched) EventType() Type { return TypeUIPatched }

// AgentSelected records that a group chat selected the next speaker.
type AgentSelected struct {
	Agent string `json:"agent"`
	// Round is the turn the agent is selected for, from 1 in each run.
	Round int `json:"round,omitempty"`
	// Selection is how it was selected: one of the Selection constants.
	Selection string `json:"selection,omitempty"`
}

// EventType implements Payload.
func (AgentSelected) EventType() Type { return TypeAgentSelected }

// NodeEntered records that a strategy entered a node (think, act, observe, ...).
type NodeEntered struct {
	Node string `json:"node"`
}

// EventType implements Payload.
func (NodeEntered) EventType() Type { return TypeNodeEntered }

// NodeExited records that a strategy left a node; Error is empty on success.
type NodeExited struct {
	Node  string `json:"node"`
	Error string `json:"error,omitempty"`
}

// EventType implements Payload.
func (NodeExited) EventType() Type { return TypeNodeExited }

// TotExpanded records that tree-of-thoughts proposed candidate thoughts.
type TotExpanded struct {
	Candidates []string `json:"candidates"`
	// Depth is the level of the tree the candidates are for, from 1.
	Depth int `json:"depth,omitempty"`
}

// EventType implements Payload.
func (TotExpanded) EventType() Type { return TypeTotExpanded }

// TotEvaluated records that tree-of-thoughts scored the candidates and chose one.
type TotEvaluated struct {
	Chosen int       `json:"chosen"`
	Scores []float64 `json:"scores"`
}

// EventType implements Payload.
func (TotEvaluated) EventType() Type { return TypeTotEvaluated }

// TotBacktracked records that tree-of-thoughts went back to an untried candidate.
type TotBacktracked struct {
	Reason  string `json:"reason"`
	ToDepth int    `json:"to_depth"`
	// Candidate is the index, among the candidates of depth ToDepth, of
	// the untried candidate the search goes on with.
	Candidate int `json:"candidate"`
}

// EventType implements Payload.
func (TotBacktracked) EventType() Type { return TypeTotBacktracked }

// GotPlanned records that graph-of-thoughts planned a task graph.
type GotPlanned struct {
	NodeIDs   []string `json:"node_ids"`
	EdgeCount int      `json:"edge_count"`
	// Tasks are the nodes' sub-tasks, in the order of NodeIDs.
	Tasks []string `json:"tasks,omitempty"`
	// Edges are the graph's dependencies as [from, to] pairs: node "to"
	// runs after node "from", with its result.
	Edges [][2]string `json:"edges,omitempty"`
}

// EventType implements Payload.
func (GotPlanned) EventType() Type { return TypeGotPlanned }

// GotNodeStarted records that a graph-of-thoughts node began.
type GotNodeStarted struct {
	NodeID string `json:"node_id"`
}

// EventType implements Payload.
func (GotNodeStarted) EventType() Type { return TypeGotNodeStarted }

// GotNodeCompleted records that a graph-of-thoughts node finished.
type GotNodeCompleted struct {
	NodeID  string `json:"node_id"`
	Summary string `json:"summary"`
}

// EventType implements Payload.
func (GotNodeCompleted) EventType() Type { return TypeGotNodeCompleted }

// GotNodeFailed records that a graph-of-thoughts node failed.
type GotNodeFailed struct {
	NodeID string `json:"node_id"`
	Error  string `json:"error"`
	// Skipped marks a node that never ran because a node it depends on
	// failed (or was skipped).
	Skipped bool `json:"skipped,omitempty"`
}

// EventType implements Payload.
func (GotNodeFailed) EventType() Type { return TypeGotNodeFailed }

// GotExpanded records that adaptive graph-of-thoughts expanded a node into sub-nodes.
type GotExpanded struct {
	NodeID     string `json:"node_id"`
	NodesAdded int    `json:"nodes_added"`
	EdgesAdded int    `json:"edges_added"`
	// NodeIDs are the ids of the added sub-nodes ("<node>.<sub>"); the
	// expanded node completes once they all have.
	NodeIDs []string `json:"node_ids,omitempty"`
	// Tasks are the sub-nodes' sub-tasks, in the order of NodeIDs.
	Tasks []string `json:"tasks,omitempty"`
}

// EventType implements Payload.
func (GotExpanded) EventType() Type { return TypeGotExpanded }

// Usage records that token use of one model call.
type Usage struct {
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	TotalTokens      int64   `json:"total_tokens"`
	Cost             float64 `json:"cost,omitempty"`
	// Model is the model the call went to, when known (a workflow's agents
	// may each have their own).
	Model string `json:"model,omitempty"`
	// Purpose is empty for the calls that carry the conversation; it names
	// the side calls whose prompt is not the conversation's context:
	// "explanation" (PurposeExplanation) and "summary" (PurposeSummary).
	Purpose string `json:"purpose,omitempty"`
}

// EventType implements Payload.
func (Usage) EventType() Type { return TypeUsage }

// ContextCompacted records that the model context was replaced by a summary. Summary is the text that stands in for the events before this one.
type ContextCompacted struct {
	OldTokens int    `json:"old_tokens"`
	NewTokens int    `json:"new_tokens"`
	Strategy  string `json:"strategy"`
	Summary   string `json:"summary"`
	// KeptMessages is how many of the most recent messages of the model's
	// transcript stay as they were after the summary; 0 means the summary
	// replaces the whole transcript before this event.
	KeptMessages int `json:"kept_messages,omitempty"`
}

// EventType implements Payload.
func (ContextCompacted) EventType() Type { return TypeContextCompacted }

// BudgetExceeded records that a run was refused a model call because its
// principal (the thread's owner) has used up one of its budgets (see
// internal/budget). The run.failed that follows, code budget_exceeded,
// carries the same sentence as Message.
type BudgetExceeded struct {
	Principal string `json:"principal"`
	// Limit names the budget: tokens_per_day, tokens_per_month,
	// cost_per_day or cost_per_month.
	Limit string `json:"limit"`
	// Window is "day" or "month"; Kind is "tokens" or "cost" (USD).
	Window string `json:"window"`
	Kind   string `json:"kind"`
	// Allowed is the budget; Spent what the principal's threads used in
	// the window when the call was refused.
	Allowed float64 `json:"allowed"`
	Spent   float64 `json:"spent"`
	// Resets is when the window ends and the budget is whole again, in
	// RFC 3339, UTC.
	Resets  string `json:"resets"`
	Message string `json:"message"`
}

// EventType implements Payload.
func (BudgetExceeded) EventType() Type { return TypeBudgetExceeded }

func decodeAs[T Payload](data []byte) (Payload, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

// decoder decodes one payload type: fast (decode.go) when it can, with
// encoding/json when it cannot.
type decoder struct {
	codec *payloadCodec                // nil: always encoding/json
	fast  func(string) (Payload, bool) // decodeFast with codec
	json  func([]byte) (Payload, error)
}

func payload[T Payload]() decoder {
	d := decoder{codec: newPayloadCodec(reflect.TypeFor[T]()), json: decodeAs[T]}
	if c := d.codec; c != nil {
		d.fast = func(data string) (Payload, bool) { return decodeFast[T](c, data) }
	}
	return d
}

var registry = map[Type]decoder{
	TypeRunStarted:            payload[RunStarted](),
	TypeRunCompleted:          payload[RunCompleted](),
	TypeRunFailed:             payload[RunFailed](),
	TypeRunCancelled:          payload[RunCancelled](),
	TypeMessageUser:           payload[MessageUser](),
	TypeMessageStarted:        payload[MessageStarted](),
	TypeMessageDelta:          payload[MessageDelta](),
	TypeMessageCompleted:      payload[MessageCompleted](),
	TypeReasoningDelta:        payload[ReasoningDelta](),
	TypeReasoningCompleted:    payload[ReasoningCompleted](),
	TypeToolCallStarted:       payload[ToolCallStarted](),
	TypeToolCallDelta:         payload[ToolCallDelta](),
	TypeToolCallCompleted:     payload[ToolCallCompleted](),
	TypeToolApprovalRequested: payload[ToolApprovalRequested](),
	TypeToolApprovalResolved:  payload[ToolApprovalResolved](),
	TypeToolExecStarted:       payload[ToolExecStarted](),
	TypeToolExecOutput:        payload[ToolExecOutput](),
	TypeToolExecProgress:      payload[ToolExecProgress](),
	TypeToolExecCompleted:     payload[ToolExecCompleted](),
	TypeInputRequested:        payload[InputRequested](),
	TypeInputProvided:         payload[InputProvided](),
	TypeInputTimedOut:         payload[InputTimedOut](),
	TypeUIRequested:           payload[UIRequested](),
	TypeUIResolved:            payload[UIResolved](),
	TypeUIPatched:             payload[UIPatched](),
	TypeAgentSelected:         payload[AgentSelected](),
	TypeNodeEntered:           payload[NodeEntered](),
	TypeNodeExited:            payload[NodeExited](),
	TypeTotExpanded:           payload[TotExpanded](),
	TypeTotEvaluated:          payload[TotEvaluated](),
	TypeTotBacktracked:        payload[TotBacktracked](),
	TypeGotPlanned:            payload[GotPlanned](),
	TypeGotNodeStarted:        payload[GotNodeStarted](),
	TypeGotNodeCompleted:      payload[GotNodeCompleted](),
	TypeGotNodeFailed:         payload[GotNodeFailed](),
	TypeGotExpanded:           payload[GotExpanded](),
	TypeUsage:                 payload[Usage](),
	TypeContextCompacted:      payload[ContextCompacted](),
	TypeBudgetExceeded:        payload[BudgetExceeded](),
}

// ParseType returns the type named name: one of Types, without allocating,
// or else a new Type (which DecodePayload refuses).
func ParseType(name []byte) Type {
	if t, ok := types[string(name)]; ok {
		return t
	}
	return Type(name)
}

// types indexes Types by name.
var types = func() map[string]Type {
	m := make(map[string]Type, len(Types))
	for _, t := range Types {
		m[string(t)] = t
	}
	return m
}()

// Types lists every event type, in vocabulary order.
var Types = []Type{
	TypeRunStarted,
	TypeRunCompleted,
	TypeRunFailed,
	TypeRunCancelled,
	TypeMessageUser,
	TypeMessageStarted,
	TypeMessageDelta,
	TypeMessageCompleted,
	TypeReasoningDelta,
	TypeReasoningCompleted,
	TypeToolCallStarted,
	TypeToolCallDelta,
	TypeToolCallCompleted,
	TypeToolApprovalRequested,
	TypeToolApprovalResolved,
	TypeToolExecStarted,
	TypeToolExecOutput,
	TypeToolExecProgress,
	TypeToolExecCompleted,
	TypeInputRequested,
	TypeInputProvided,
	TypeInputTimedOut,
	TypeUIRequested,
	TypeUIResolved,
	TypeUIPatched,
	TypeAgentSelected,
	TypeNodeEntered,
	TypeNodeExited,
	TypeTotExpanded,
	TypeTotEvaluated,
	TypeTotBacktracked,
	TypeGotPlanned,
	TypeGotNodeStarted,
	TypeGotNodeCompleted,
	TypeGotNodeFailed,
	TypeGotExpanded,
	TypeUsage,
	TypeContextCompacted,
	TypeBudgetExceeded,
}
