package agentloop

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/agentwire/agentwire/generated/agentloopapi"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/tools"
)

// strategyName is what context_info and context_compacted call the
// context strategy: the original server's name for the same one.
const strategyName = "ThresholdContextManager"

// shellTool is the tool whose calls show as local_shell_call items.
const shellTool = "bash"

// projector turns one connection's view of a thread's events into
// AgentLoop frames. It groups the canonical events into complete response
// items: a call's item waits until the call is cleared to run or its fate
// is known (after its approval, as the document's sequence shows), and its
// output carries the exit code and duration. It also keeps what the
// connection's handler needs to answer the client: the approval request
// or question the thread waits on, and the user messages this connection
// posted itself, which it does not echo.
//
// Project runs on the connection's follow goroutine; the handler calls
// the other methods from the read goroutine.
type projector struct {
	// head is the seq up to which events are replayed history: replayed
	// turns are not followed by context_info, and answers given elsewhere
	// are not announced.
	head int64

	calls   map[string]*call // by call id, until its output is sent
	compact map[string]bool  // runs that only compact

	// wantInfo is set by Project when the frames it returned end a turn
	// live: the session follows them with a context_info.
	wantInfo bool
	// wantUnchanged is set by Project when a compaction the client asked
	// for live ended without compacting: the session answers it with a
	// context_compacted whose counts are equal (reduction 0).
	wantUnchanged bool

	// replayed is the approval request met in replayed history and not
	// resolved in it so far, and replayedID its event's id: it is sent
	// once the history is, so that a client joining a thread is asked
	// only what is still pending.
	replayed   *event.ToolApprovalRequested
	replayedID string

	mu       sync.Mutex
	approval *approval // the approval request the thread waits on
	sent     *approval // the last approval request sent to this connection
	// elsewhere is set when sent was answered from another client: what
	// that client decided, for the error that answers this client's own
	// late answer.
	elsewhere string
	question  string          // the input request the thread waits on
	own       map[string]bool // ids of user messages this connection posted
	answered  map[string]bool // call ids this connection answered
}

// call is a tool call whose item or output is not sent yet.
type call struct {
	name  string
	args  string
	shown bool // its item was sent
}

// approval is a pending approval request.
type approval struct {
	callID  string
	patch   string // the patch under review; "" for a command
	command string // what the request shows, for the notices that name it
}

var _ protocol.Projector[agentloopapi.Outbound] = (*projector)(nil)

func newProjector(head int64) *projector {
	return &projector{head: head, calls: map[string]*call{}, compact: map[string]bool{},
		own: map[string]bool{}, answered: map[string]bool{}}
}

// Project returns the frames e shows as, with their ids.
func (p *projector) Project(e event.Event) []agentloopapi.Outbound {
	var out []agentloopapi.Outbound
	for _, f := range p.frames(e) {
		out = append(out, f.withID())
	}
	return out
}

// keyed is a frame, without its id yet, and, when its bytes depend on
// its event alone (the same on every connection of the thread), the key
// they are shared by (protocol.SharedFrames); the zero key marks a frame
// of this connection's own (a notice meant for it, which project marks
// own).
type keyed struct {
	m   agentloopapi.Outbound
	key frameKey
	own bool
}

// withID is the frame with its id: its key's, or a fresh random one for
// a frame of the connection's own. It is given only when the frame is
// encoded, so that a frame another connection encoded costs nothing.
func (f keyed) withID() agentloopapi.Outbound {
	if f.key == (frameKey{}) {
		return withID(f.m, frameID)
	}
	return withID(f.m, f.key.id)
}

// frameKey names a frame that is the same on every connection: the event
// it projects, and which of that event's such frames it is.
type frameKey struct {
	event string
	part  int
}

// frames returns the frames e shows as, each frame that depends on e
// alone with its key, whose UUID is its id (keyed.withID), so that it is
// the same frame, to the byte, on every connection that is sent it. What
// a connection is sent of an event depends on its own state only in
// whether a frame is sent (its own user messages, replayed history) and
// in the notices meant for it, which have no key and a random id.
func (p *projector) frames(e event.Event) []keyed {
	out := p.project(e)
	part := 0
	for i := range out {
		if out[i].own || e.ID == "" {
			continue
		}
		out[i].key = frameKey{event: e.ID, part: part}
		part++
	}
	if e.Seq == p.head && p.replayed != nil {
		// The end of the history: the request it leaves pending, the
		// same frame live connections were sent.
		out = append(out, keyed{m: p.request(*p.replayed), key: frameKey{event: p.replayedID}})
		p.replayed = nil
	}
	return out
}

// frameSpace is the namespace of the frame ids made from frame keys.
var frameSpace = uuid.MustParse("6f1d3c2e-8a57-4b0e-9c61-2f4d8e7a1b35")

// id is the frame id of k: a name-based UUID (version 5) of the event id
// and part, unique to the frame.
func (k frameKey) id() string {
	return uuid.NewSHA1(frameSpace, []byte(k.event+"/"+strconv.Itoa(k.part))).String()
}

// withID is m with id() as its frame id if it has none yet. The frames'
// constructors leave the id out: it is given when the frame is encoded.
func withID(m agentloopapi.Outbound, id func() string) agentloopapi.Outbound {
	set := func(have *string) {
		if *have == "" {
			*have = id()
		}
	}
	switch v := m.(type) {
	case agentloopapi.ResponseItemMessage:
		set(&v.ID)
		return v
	case agentloopapi.LoadingStateMessage:
		set(&v.ID)
		return v
	case agentloopapi.ApprovalRequestMessage:
		set(&v.ID)
		return v
	case agentloopapi.AgentFinishedMessage:
		set(&v.ID)
		return v
	case agentloopapi.ContextCompactedMessage:
		set(&v.ID)
		return v
	case agentloopapi.ContextInfoMessage:
		set(&v.ID)
		return v
	case agentloopapi.ErrorMessage:
		set(&v.ID)
		return v
	}
	return m
}

func (p *projector) project(e event.Event) []keyed {
	live := e.Seq > p.head
	p.wantInfo = false
	switch v := e.Payload.(type) {
	case event.RunStarted:
		if v.Strategy == event.StrategyCompact {
			p.compact[e.Run] = true
			return nil
		}
		return one(loading(true))
	case event.MessageUser:
		p.mu.Lock()
		mine := p.own[v.MessageID]
		delete(p.own, v.MessageID)
		p.mu.Unlock()
		if mine || strings.TrimSpace(v.Text) == "" {
			return nil
		}
		return one(message(v.MessageID, "user", v.Text))
	case event.MessageCompleted:
		if strings.TrimSpace(v.Text) == "" {
			return nil
		}
		role := "assistant"
		if v.Role == event.RoleSystem {
			role = "system"
		}
		return one(message(v.MessageID, role, v.Text))
	case event.ReasoningCompleted:
		if strings.TrimSpace(v.Text) == "" {
			return nil // a signature alone
		}
		item := agentloopapi.ReasoningItem{ID: v.ReasoningID, Content: text(v.Text)}
		if v.DurationMS > 0 {
			item.DurationMS = new(int(v.DurationMS))
		}
		return one(responseItem(item))
	case event.ToolCallCompleted:
		p.calls[v.CallID] = &call{name: v.Name, args: string(v.Arguments)}
		return nil
	case event.ToolApprovalRequested:
		p.mu.Lock()
		p.approval = &approval{callID: v.CallID, patch: v.Patch, command: shown(v)}
		p.mu.Unlock()
		if !live {
			p.replayed, p.replayedID = &v, e.ID
			return nil
		}
		return one(p.request(v))
	case event.ToolApprovalResolved:
		if p.replayed != nil && p.replayed.CallID == v.CallID {
			p.replayed = nil
		}
		p.mu.Lock()
		if p.approval != nil && p.approval.callID == v.CallID {
			p.approval = nil
		}
		mine := p.answered[v.CallID]
		delete(p.answered, v.CallID)
		command := ""
		if p.sent != nil && p.sent.callID == v.CallID {
			command = p.sent.command
			if !mine && v.Decision != event.DecisionExplain {
				p.elsewhere = decided(v.Decision)
			}
		}
		p.mu.Unlock()
		var out []keyed
		if live && !mine {
			out = append(out, keyed{m: message("notice_"+e.ID, "system", answeredElsewhere(command, v.Decision)), own: true})
		}
		if v.Decision != event.DecisionExplain {
			out = append(out, p.showCall(v.CallID)...)
		}
		return out
	case event.ToolExecStarted:
		return p.showCall(v.CallID)
	case event.ToolExecCompleted:
		out := p.showCall(v.CallID)
		c := p.calls[v.CallID]
		delete(p.calls, v.CallID)
		name := v.Name
		if c != nil {
			name = c.name
		}
		return append(out, keyed{m: callOutput(name, v)})
	case event.InputRequested:
		p.mu.Lock()
		p.question = v.RequestID
		p.mu.Unlock()
		return one(message(v.RequestID, "assistant", v.Prompt+"\n\n(Your next message answers this question.)"))
	case event.InputProvided:
		p.clearQuestion(v.RequestID)
		return nil
	case event.InputTimedOut:
		p.clearQuestion(v.RequestID)
		return one(message("timeout_"+v.RequestID, "system", "Nobody answered the agent's question in time; it carries on without an answer."))
	case event.UIRequested:
		return one(message(v.RequestID, "system", "The agent asks to show a "+v.Component+
			" component, which this client cannot show. A client of a protocol with UI components (AG2 chat.*) can answer it; until then the turn waits."))
	case event.ContextCompacted:
		return one(agentloopapi.NewContextCompactedMessage(noID, agentloopapi.ContextCompactedMessagePayload{
			OldTokenCount: max(v.OldTokens, 0), NewTokenCount: max(v.NewTokens, 0),
			ReductionPercent: reduction(v.OldTokens, v.NewTokens), Strategy: strategyName,
		}))
	case event.RunCompleted:
		return p.endRun(e, live, v.Reason, "", v.Reply)
	case event.BudgetExceeded:
		// The run.failed that follows (code budget_exceeded) carries the
		// same message, as its system message and error.
		return nil
	case event.RunFailed:
		return p.endRun(e, live, "", v.Code, v.Message)
	case event.RunCancelled:
		reason := "cancelled"
		if v.Reason == event.CodeDenied {
			reason = event.CodeDenied
		}
		return p.endRun(e, live, reason, "", "")
	}
	return nil
}

// endRun is what a run's end shows as: loading_state false,
// agent_finished and (live) context_info for a turn; for a failed turn a
// system message and an error frame before loading_state false; for a
// compaction that compacted nothing the reason as a system message (the
// session adds a context_compacted of reduction 0, live); for one that
// failed what went wrong. msg is the failure's message, or the reason
// a compaction compacted nothing.
func (p *projector) endRun(e event.Event, live bool, reason, code, msg string) []keyed {
	p.mu.Lock()
	p.approval, p.question = nil, "" // nothing waits once the run is over
	p.mu.Unlock()
	p.replayed = nil // nor is a request of replayed history asked again
	clear(p.calls)
	if p.compact[e.Run] {
		delete(p.compact, e.Run)
		switch {
		case code != "":
			return one(errorFrame("Compaction failed: "+msg, map[string]any{"code": code}))
		case reason == "nothing_to_compact":
			p.wantUnchanged = live
			if msg == "" {
				msg = "There is nothing to compact yet."
			}
			return one(message("compact_"+e.Run, "system", msg))
		case reason == "cancelled":
			return one(errorFrame("The compaction was cancelled.", map[string]any{"code": "cancelled"}))
		}
		return nil
	}
	if code != "" {
		return []keyed{
			{m: message("failed_"+e.Run, "system", "⚠️ "+msg)},
			{m: errorFrame(msg, map[string]any{"code": code})},
			{m: loading(false)},
		}
	}
	var out []keyed
	if reason == "cancelled" {
		out = append(out, keyed{m: message("cancelled_"+e.Run, "system", "The turn was cancelled.")})
	}
	out = append(out, keyed{m: loading(false)}, keyed{m: agentloopapi.NewAgentFinishedMessage(noID, agentloopapi.AgentFinishedMessagePayload{ResponseID: e.Run})})
	p.wantInfo = live
	return out
}

// showCall returns the item of a call the first time it is asked for.
func (p *projector) showCall(id string) []keyed {
	c := p.calls[id]
	if c == nil || c.shown {
		return nil
	}
	c.shown = true
	if c.name == shellTool {
		return one(responseItem(agentloopapi.LocalShellCallItem{ID: id, CallID: &id, Status: "completed",
			Action: agentloopapi.LocalShellCallItemAction{Command: shellArgv(c.args)}}))
	}
	return one(responseItem(agentloopapi.FunctionCallItem{ID: id, CallID: id, Name: c.name, Arguments: c.args}))
}

func (p *projector) clearQuestion(id string) {
	p.mu.Lock()
	if p.question == id {
		p.question = ""
	}
	p.mu.Unlock()
}

// pendingApproval returns the approval request the thread waits on.
func (p *projector) pendingApproval() (approval, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.approval == nil {
		return approval{}, false
	}
	return *p.approval, true
}

// answerable returns the approval request an approval_response of this
// connection answers: the one the thread waits on, if it is the last one
// sent to this connection. An approval_response names no request, so an
// answer to a request that was answered from another client (which the
// original client keeps asking about) must not answer a later one; it
// gets an error that says what happened.
func (p *projector) answerable() (approval, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.approval != nil && p.sent != nil && p.approval.callID == p.sent.callID {
		return *p.approval, nil
	}
	if p.sent != nil && p.elsewhere != "" {
		return approval{}, &protocol.Error{Code: protocol.CodeUnknownRequest, Type: agentloopapi.TypeApprovalResponse,
			Message: "The approval request for `" + p.sent.command + "` was already answered from another client, which " +
				p.elsewhere + "; this answer was not used."}
	}
	return approval{}, &protocol.Error{Code: protocol.CodeUnknownRequest, Type: agentloopapi.TypeApprovalResponse,
		Message: "No approval request is pending"}
}

// request is the approval_request frame of v, recorded as the last one
// sent to this connection.
func (p *projector) request(v event.ToolApprovalRequested) agentloopapi.Outbound {
	p.mu.Lock()
	p.sent, p.elsewhere = &approval{callID: v.CallID, patch: v.Patch, command: shown(v)}, ""
	p.mu.Unlock()
	return approvalRequest(v)
}

// pendingQuestion returns the id of the input request the thread waits on.
func (p *projector) pendingQuestion() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.question
}

// answer marks a call this connection answered, so that its resolution is
// not announced to it as someone else's.
func (p *projector) answer(callID string) {
	p.mu.Lock()
	p.answered[callID] = true
	p.mu.Unlock()
}

// unanswer forgets an answer the core refused.
func (p *projector) unanswer(callID string) {
	p.mu.Lock()
	delete(p.answered, callID)
	p.mu.Unlock()
}

// posting runs post, which posts a user message, with the projection of
// user messages held, and records the message it posted as this
// connection's own: its echo, which can be committed before post returns,
// is then never shown to it.
func (p *projector) posting(post func() (messageID string, err error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := post()
	if err == nil && id != "" {
		p.own[id] = true
	}
	return err
}

func approvalRequest(v event.ToolApprovalRequested) agentloopapi.ApprovalRequestMessage {
	payload := agentloopapi.ApprovalRequestMessagePayload{Command: v.Command}
	switch {
	case v.Patch != "":
		payload.Command = []string{"apply_patch", v.Patch}
		payload.ApplyPatch = &agentloopapi.ApplyPatchCommand{Patch: v.Patch}
	case len(v.Command) == 0:
		args := string(v.Arguments)
		if args == "" {
			args = "{}"
		}
		payload.Command = []string{v.Name, args}
	}
	return agentloopapi.NewApprovalRequestMessage(noID, payload)
}

// callOutput is a call's output item: the documented JSON string with the
// output text, exit code and duration.
func callOutput(name string, v event.ToolExecCompleted) agentloopapi.Outbound {
	code := 0
	switch {
	case v.ExitCode != nil:
		code = *v.ExitCode
	case v.IsError:
		code = 1
	}
	out, _ := json.Marshal(struct {
		Output   string `json:"output"`
		Metadata struct {
			ExitCode        int     `json:"exit_code"`
			DurationSeconds float64 `json:"duration_seconds"`
		} `json:"metadata"`
	}{Output: v.Result, Metadata: struct {
		ExitCode        int     `json:"exit_code"`
		DurationSeconds float64 `json:"duration_seconds"`
	}{code, math.Round(float64(v.DurationMS)/100) / 10}})
	id := "output_" + v.CallID
	if name == shellTool {
		return responseItem(agentloopapi.LocalShellCallOutputItem{ID: id, CallID: &v.CallID, Output: string(out)})
	}
	return responseItem(agentloopapi.FunctionCallOutputItem{ID: id, CallID: v.CallID, Output: string(out)})
}

// shellArgv is a shell call's command as words: its command line split as
// the shell would, or ["bash", "-c", line] when it cannot be split.
func shellArgv(args string) []string {
	var a struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal([]byte(args), &a)
	if patch, ok := tools.ApplyPatchCommand(a.Command); ok {
		return []string{"apply_patch", patch}
	}
	if words, err := tools.SplitCommand(a.Command); err == nil && len(words) > 0 {
		return words
	}
	return []string{"bash", "-c", a.Command}
}

// shown is what an approval request shows of its call, as the original
// client prints it (the command's words joined by spaces), cut short.
func shown(v event.ToolApprovalRequested) string {
	cmd := approvalRequest(v).Payload.Command
	s := strings.Join(cmd, " ")
	if len(cmd) > 0 && cmd[0] == "apply_patch" {
		s = "apply_patch"
	}
	if r := []rune(s); len(r) > 120 {
		s = string(r[:119]) + "…"
	}
	return s
}

// decided is what another client's decision did to a request.
func decided(d event.Decision) string {
	what := map[event.Decision]string{
		event.DecisionApprove:       "approved it",
		event.DecisionApproveAlways: "approved it, and the same kind of call from now on",
		event.DecisionDenyContinue:  "denied it; the agent carries on",
		event.DecisionDenyStop:      "denied it and stopped the turn",
		event.DecisionExplain:       "asked the agent to explain it",
	}[d]
	if what == "" {
		what = "answered it"
	}
	return what
}

// answeredElsewhere is the notice that tells a client another one
// answered the approval request it was shown. No message of the document
// ends a client's wait for its user's answer (the original client leaves
// it only when its user answers, and meanwhile holds back shell items and
// takes the next line as an answer), so the notice says to answer once
// with any choice: that answer gets an error frame and is not used.
func answeredElsewhere(command string, d event.Decision) string {
	about := "The approval request"
	if command != "" {
		about += " for `" + command + "`"
	}
	msg := about + " was answered from another client, which " + decided(d) + "."
	if d == event.DecisionExplain {
		return msg + " The request is asked again after the explanation."
	}
	if command == "" {
		return msg
	}
	return msg + " If this client still asks you to approve it, answer once with any choice to go on: that answer is not used."
}

func reduction(old, new int) float64 {
	if old <= 0 {
		return 0
	}
	return math.Round(float64(old-new)/float64(old)*1000) / 10
}

func loading(on bool) agentloopapi.Outbound {
	return agentloopapi.NewLoadingStateMessage(noID, agentloopapi.LoadingStateMessagePayload{Loading: on})
}

func message(id, role, s string) agentloopapi.Outbound {
	return responseItem(agentloopapi.MessageItem{ID: id, Role: role, Content: text(s)})
}

func responseItem(v agentloopapi.ResponseItemValue) agentloopapi.Outbound {
	return agentloopapi.NewResponseItemMessage(noID, agentloopapi.ResponseItem{Value: v})
}

// errorFrame is an error frame with details (nil: none).
func errorFrame(msg string, details map[string]any) agentloopapi.Outbound {
	payload := agentloopapi.ErrorMessagePayload{Message: msg}
	if details != nil {
		payload.Details, _ = json.Marshal(details)
	}
	return agentloopapi.NewErrorMessage(noID, payload)
}

// text is the content of a message or reasoning item: one input_text part,
// as every example of the document has.
func text(s string) []agentloopapi.ContentPart {
	return []agentloopapi.ContentPart{{Type: "input_text", Text: s}}
}

// frameID is a fresh frame id: a random UUID. A frame that depends on
// its event alone is given the id of its key instead (keyed.withID).
func frameID() string { return uuid.NewString() }

// noID is the id of a frame as built: none yet (withID).
const noID = ""

func one(m agentloopapi.Outbound) []keyed { return []keyed{{m: m}} }
