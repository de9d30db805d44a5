package ag2

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/protocol"
)

// Error codes of chat.error (the document's table, plus UNKNOWN_REQUEST).
const (
	codeSchema      = "SCHEMA_VALIDATION_FAILED"
	codeTool        = "TOOL_EXECUTION_ERROR"
	codeUITimeout   = "UI_TOOL_TIMEOUT"
	codeResume      = "RESUME_FAILED"
	codePersistence = "PERSISTENCE_ERROR"
	codeNoWorkflow  = "WORKFLOW_NOT_FOUND"
	codeAgentInit   = "AGENT_INITIALIZATION_FAILED"
	codeTransport   = "TRANSPORT_ERROR"
	codeRate        = "RATE_LIMIT_EXCEEDED"
	codeUnknownReq  = "UNKNOWN_REQUEST"
)

// uiTool is the built-in tool whose calls show as UI components: its
// chat.tool_call is sent for its ui.requested, not for the model's call.
const uiTool = "ui"

// frame is one outbound message and where it sits in the chat's stream.
type frame struct {
	// seq is the seq of the event the frame projects; 0 for frames outside
	// the chat's stream (answers to one socket's messages).
	seq int64
	at  time.Time
	msg ag2api.Outbound
	// key, when the frame is sent live, names it among the frames that
	// every socket of the chat's workflow is sent alike (see
	// session.follow); zero for a socket's own frame.
	key frameKey
}

// frameKey names a live frame of the chat's stream that is the same, to
// the byte, on every socket of the chat with the same workflow: the event
// it projects, its place among the event's frames, and the workflow (the
// UI tool frames name it). A live projector's frames depend on the event
// and the chat's events before it alone, except that a socket's own user
// message is left out (the frame is then not sent, and it is the only
// frame of its event); a replay's frames (replay:true, coalesced, with
// the transcript's answers) are each socket's own.
type frameKey struct {
	event    string
	part     int
	workflow string
}

// kind is the kind of a pending request, which says how an answer to it
// is delivered.
type kind int

const (
	kindInput kind = iota + 1
	kindApproval
	kindUI
)

// artifact is a UI request's component, with its payload as patched.
type artifact struct {
	tool, component string
	payload         json.RawMessage
}

// projector turns a chat's canonical events into chat.* frames. It sees
// every event of the thread from the first, so its state (agents of
// messages, pending requests, artifacts, usage) is whole whatever the
// socket asks to be replayed; the session decides which frames to send.
// Project runs on one goroutine; the pending and artifact lookups, which
// the read goroutine makes, are guarded by mu.
type projector struct {
	chat     string
	workflow string // the socket's workflow, for ChatUI's UI tool frames
	prices   *prices
	model    string

	agents   map[string]string                  // message id → agent
	calls    map[string]event.ToolCallCompleted // call id → the model's call
	uiCall   map[string]string                  // UI request id → its tool call id
	uiByCall map[string]string                  // tool call id → UI request id
	uiRuns   []string                           // started UI tool calls waiting for their request
	usage    map[string]*runUsage               // run → its token use so far
	progress map[string]float64                 // call id → last known percent

	// answers shows a person's answers to input and approval requests as
	// their text (a replay's projector, see replaying); secret is the
	// requests whose answer is not shown.
	answers bool
	secret  map[string]bool

	mu        sync.Mutex
	pending   map[string]pend
	artifacts map[string]*artifact // by UI request id
	own       map[string]bool      // user messages this socket posted
}

func newProjector(chat string, p *prices, model string) *projector {
	return &projector{chat: chat, prices: p, model: model,
		agents: map[string]string{}, calls: map[string]event.ToolCallCompleted{},
		uiCall: map[string]string{}, uiByCall: map[string]string{}, usage: map[string]*runUsage{},
		progress: map[string]float64{},
		pending:  map[string]pend{}, artifacts: map[string]*artifact{}, own: map[string]bool{}}
}

// pend is a pending request: its kind, and the seq of the event that
// asked it (the most recent is the one bare text answers).
type pend struct {
	k   kind
	seq int64
}

// replaying makes p a replay's projector, which shows what a person
// answered, and returns p. Live, the socket that answered shows the
// answer as the user typed it; a replay's client may show nothing of it
// (ChatUI after a reload), so there it is a chat.text of agent "user", as
// a user turn is. The answer to a secret request is not shown.
func (p *projector) replaying() *projector {
	p.answers, p.secret = true, map[string]bool{}
	return p
}

// answered is the frames of a person's answer: the answer as a chat.text
// of agent "user" when p shows answers and there is text to show, then
// ack.
func (p *projector) answered(seq int64, id, text string, ack ag2api.Outbound) []frame {
	out := []frame{{seq: seq, msg: ack}}
	hidden := p.secret[id]
	delete(p.secret, id)
	if !p.answers || hidden || strings.TrimSpace(text) == "" {
		return out
	}
	return append([]frame{{seq: seq, msg: ag2api.NewText(ag2api.TextData{ChatID: p.chat, Agent: "user", Content: text, Seq: int(seq)})}}, out...)
}

// transcriptFrames is frames without what would ask again a request
// that is no longer pending: its chat.input_request and its component's
// ui_tool_event are left out, and its chat.tool_call no longer awaits a
// response.
func (p *projector) transcriptFrames(frames []frame) []frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := frames[:0:0]
	for _, fr := range frames {
		switch m := fr.msg.(type) {
		case ag2api.InputRequest:
			if _, ok := p.pending[m.Data.RequestID]; !ok {
				continue
			}
		case ag2api.UIToolEvent:
			if _, ok := p.pending[m.Data.EventID]; !ok {
				continue
			}
		case ag2api.ToolCall:
			if _, ok := p.pending[m.Data.Corr]; !ok && m.Data.AwaitingResponse {
				m.Data.AwaitingResponse = false
				fr.msg = m
			}
		}
		out = append(out, fr)
	}
	return out
}

// inWorkflow sets the workflow the UI tool frames name, and returns p.
func (p *projector) inWorkflow(name string) *projector {
	p.workflow = name
	return p
}

// Project returns the frames e shows as. Every frame of one event has the
// event's seq except the chat.error that accompanies another frame, which
// has none, so seq strictly increases along the frames that carry one.
func (p *projector) Project(e event.Event) []frame {
	out := p.project(e)
	for i := range out {
		out[i].at = e.Time
	}
	return out
}

func (p *projector) project(e event.Event) []frame {
	seq := e.Seq
	one := func(m ag2api.Outbound) []frame { return []frame{{seq: seq, msg: m}} }
	switch v := e.Payload.(type) {
	case event.MessageUser:
		p.mu.Lock()
		mine := p.own[v.MessageID]
		delete(p.own, v.MessageID)
		p.mu.Unlock()
		if mine || strings.TrimSpace(v.Text) == "" {
			return nil
		}
		return one(ag2api.NewText(ag2api.TextData{ChatID: p.chat, Agent: "user", Content: v.Text, Seq: int(seq)}))
	case event.MessageStarted:
		p.agents[v.MessageID] = agentName(v.Agent, v.Role)
		return nil
	case event.MessageDelta:
		if v.Text == "" {
			return nil
		}
		return one(ag2api.NewPrint(ag2api.PrintData{ChatID: p.chat, Agent: p.agentOf(v.MessageID), Content: v.Text,
			Corr: new(v.MessageID), Seq: int(seq)}))
	case event.MessageCompleted:
		agent := agentName(v.Agent, v.Role)
		delete(p.agents, v.MessageID)
		if strings.TrimSpace(v.Text) == "" {
			return nil
		}
		return one(ag2api.NewText(ag2api.TextData{ChatID: p.chat, Agent: agent, Content: v.Text, Seq: int(seq)}))
	case event.AgentSelected:
		return one(ag2api.NewSelectSpeaker(ag2api.SelectSpeakerData{ChatID: p.chat, Agent: v.Agent, Seq: int(seq)}))
	case event.ToolCallCompleted:
		p.calls[v.CallID] = v
		if v.Name == uiTool {
			return nil
		}
		args := v.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		return one(ag2api.NewToolCall(ag2api.ToolCallData{ChatID: p.chat, ToolName: v.Name, ComponentType: "",
			AwaitingResponse: false, Payload: args, Corr: v.CallID, Seq: int(seq)}))
	case event.ToolApprovalRequested:
		p.setPending(v.CallID, kindApproval, seq)
		d := ag2api.InputRequestData{ChatID: p.chat, RequestID: v.CallID, Corr: v.CallID,
			Prompt: approvalPrompt(v), Password: new(false), Seq: int(seq)}
		if v.Agent != "" {
			d.Agent = new(v.Agent)
		}
		return p.asked(seq, v.Agent, d)
	case event.ToolApprovalResolved:
		p.clearPending(v.CallID)
		return p.answered(seq, v.CallID, decisionText[v.Decision],
			ag2api.NewInputAck(ag2api.InputAckData{ChatID: p.chat, RequestID: v.CallID, Corr: v.CallID, Seq: int(seq)}))
	case event.ToolExecStarted:
		if v.Name == uiTool {
			p.uiRuns = append(p.uiRuns, v.CallID)
		}
		return nil
	case event.ToolExecOutput:
		return p.shellProgress(seq, v)
	case event.ToolExecProgress:
		pct := clampPercent(v.Percent)
		p.progress[v.CallID] = pct
		return one(ag2api.NewToolProgress(ag2api.ToolProgressData{ChatID: p.chat, ToolName: v.Name, ProgressPercent: pct,
			StatusMessage: v.Message, Corr: v.CallID, Seq: int(seq)}))
	case event.ToolExecCompleted:
		return p.toolDone(seq, v)
	case event.InputRequested:
		p.setPending(v.RequestID, kindInput, seq)
		if v.Secret && p.answers {
			p.secret[v.RequestID] = true
		}
		d := ag2api.InputRequestData{ChatID: p.chat, RequestID: v.RequestID, Corr: v.RequestID, Prompt: v.Prompt,
			Password: new(v.Secret), Seq: int(seq)}
		if v.Agent != "" {
			d.Agent = new(v.Agent)
		}
		if v.TimeoutSeconds > 0 {
			d.TimeoutSeconds = new(v.TimeoutSeconds)
		}
		return p.asked(seq, v.Agent, d)
	case event.InputProvided:
		p.clearPending(v.RequestID)
		return p.answered(seq, v.RequestID, v.Text,
			ag2api.NewInputAck(ag2api.InputAckData{ChatID: p.chat, RequestID: v.RequestID, Corr: v.RequestID, Seq: int(seq)}))
	case event.InputTimedOut:
		p.mu.Lock()
		k := p.pending[v.RequestID].k
		delete(p.pending, v.RequestID)
		p.mu.Unlock()
		if k == kindUI {
			return one(chatError(p.chat, seq, codeUITimeout,
				fmt.Sprintf("Nobody answered the UI component in time (%d s); the tool goes on without an answer", v.TimeoutSeconds),
				map[string]any{"corr": v.RequestID, "timeout_seconds": v.TimeoutSeconds}, true))
		}
		return one(ag2api.NewInputTimeout(ag2api.InputTimeoutData{ChatID: p.chat, RequestID: v.RequestID, Corr: v.RequestID,
			TimeoutSeconds: max(v.TimeoutSeconds, 0), Seq: int(seq)}))
	case event.UIRequested:
		return p.uiRequested(seq, v)
	case event.UIResolved:
		p.clearPending(v.RequestID)
		return nil
	case event.UIPatched:
		return p.patched(seq, v.RequestID, v.Payload)
	case event.Usage:
		return p.usageSummary(seq, e.Run, v)
	case event.RunCompleted:
		delete(p.usage, e.Run)
		return one(runComplete(p.chat, seq, completedReason(v.Reason)))
	case event.RunCancelled:
		delete(p.usage, e.Run)
		p.endRequests()
		reason := "cancelled"
		if v.Reason == event.CodeDenied {
			reason = "terminated"
		}
		return one(runComplete(p.chat, seq, reason))
	case event.BudgetExceeded:
		// The run.failed that follows (code budget_exceeded) carries the
		// same message, as its chat.error.
		return nil
	case event.RunFailed:
		delete(p.usage, e.Run)
		p.endRequests()
		if v.Code == event.CodeStepLimit {
			return one(runComplete(p.chat, seq, "max_rounds"))
		}
		return []frame{
			{msg: chatError(p.chat, 0, failureCode(v.Code), v.Message, map[string]any{"code": v.Code}, true)},
			{seq: seq, msg: runComplete(p.chat, seq, "error")},
		}
	}
	return nil
}

// endRequests forgets the requests of a run that ended: nothing waits for
// them any more.
func (p *projector) endRequests() {
	p.mu.Lock()
	clear(p.pending)
	p.mu.Unlock()
	p.uiRuns = nil
}

func (p *projector) agentOf(messageID string) string {
	if a := p.agents[messageID]; a != "" {
		return a
	}
	return "assistant"
}

func agentName(agent string, role event.Role) string {
	switch {
	case agent != "":
		return agent
	case role == event.RoleSystem:
		return "system"
	}
	return "assistant"
}

func (p *projector) uiRequested(seq int64, v event.UIRequested) []frame {
	callID := ""
	if len(p.uiRuns) > 0 {
		callID, p.uiRuns = p.uiRuns[0], p.uiRuns[1:]
		p.uiCall[v.RequestID] = callID
		p.uiByCall[callID] = v.RequestID
	}
	payload := v.Payload
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	p.mu.Lock()
	p.pending[v.RequestID] = pend{k: kindUI, seq: seq}
	p.artifacts[v.RequestID] = &artifact{tool: v.Tool, component: v.Component, payload: payload}
	p.mu.Unlock()
	display := v.Display
	if display == "" {
		display = "inline"
	}
	tool := v.Tool
	if tool == "" {
		tool = uiTool
	}
	return p.uiFrames(seq, ag2api.ToolCallData{ChatID: p.chat, ToolName: tool, ComponentType: v.Component,
		AwaitingResponse: true, Payload: payload, Display: new(display), Corr: v.RequestID, Seq: int(seq)})
}

// patched records an artifact's patched payload (ui.patched) and shows
// the artifact again with it: a chat.tool_call with the request's corr,
// awaiting a response while the request is pending.
func (p *projector) patched(seq int64, requestID string, payload json.RawMessage) []frame {
	p.mu.Lock()
	a := p.artifacts[requestID]
	if a != nil {
		a.payload = payload
	}
	awaiting := p.pending[requestID].k == kindUI
	p.mu.Unlock()
	if a == nil {
		return nil
	}
	tool := a.tool
	if tool == "" {
		tool = uiTool
	}
	return p.uiFrames(seq, ag2api.ToolCallData{ChatID: p.chat, ToolName: tool, ComponentType: a.component,
		AwaitingResponse: awaiting, Payload: payload, Display: new("artifact"), Corr: requestID, Seq: int(seq)})
}

func (p *projector) toolDone(seq int64, v event.ToolExecCompleted) []frame {
	corr := v.CallID
	if id := p.uiByCall[v.CallID]; id != "" {
		corr = id
		delete(p.uiByCall, v.CallID)
		delete(p.uiCall, id)
	}
	delete(p.calls, v.CallID)
	delete(p.progress, v.CallID)
	out := []frame{{seq: seq, msg: ag2api.NewToolResponse(ag2api.ToolResponseData{ChatID: p.chat, ToolName: v.Name,
		Content: v.Result, Success: !v.IsError, Corr: corr, Seq: int(seq)})}}
	// A tool that ran and failed, or a command that ran out of time, is
	// also reported as an error the user can act on; a call refused or
	// cancelled, or a question left unanswered (chat.input_timeout told
	// of it), has been shown already.
	outcome := event.OutcomeOf(v)
	if outcome == event.OutcomeFailed && v.DurationMS > 0 || outcome == event.OutcomeTimedOut && v.ExitCode != nil {
		out = append(out, frame{msg: chatError(p.chat, 0, codeTool, fmt.Sprintf("The tool %s failed", v.Name),
			map[string]any{"tool_name": v.Name, "corr": corr}, true)})
	}
	return out
}

// percentRE finds a percentage in a line of a tool's output.
var percentRE = regexp.MustCompile(`(-?\d+(?:\.\d+)?)\s*%`)

// shellProgress is the chat.tool_progress of a chunk of a running tool's
// output: the chunk's last non-empty line is the status, a percentage in
// it the progress (else the last one known, from 0).
func (p *projector) shellProgress(seq int64, v event.ToolExecOutput) []frame {
	line := ""
	for _, l := range strings.Split(v.Text, "\n") {
		if t := strings.TrimSpace(l); t != "" {
			line = t
		}
	}
	if line == "" {
		return nil
	}
	if len(line) > 200 {
		line = line[:200]
	}
	pct := p.progress[v.CallID]
	if m := percentRE.FindAllStringSubmatch(line, -1); m != nil {
		if f, err := strconv.ParseFloat(m[len(m)-1][1], 64); err == nil {
			pct = clampPercent(f)
		}
	}
	p.progress[v.CallID] = pct
	return []frame{{seq: seq, msg: ag2api.NewToolProgress(ag2api.ToolProgressData{ChatID: p.chat, ToolName: v.Name,
		ProgressPercent: pct, StatusMessage: line, Corr: v.CallID, Seq: int(seq)})}}
}

func clampPercent(f float64) float64 {
	if math.IsNaN(f) {
		return 0
	}
	return math.Min(math.Max(f, 0), 100)
}

// runUsage is a run's token use so far, and its cost while every call of
// it has a price.
type runUsage struct {
	prompt, completion, total int64
	cost                      float64
	priced                    bool
}

// usageSummary is the run's token use so far, after each model call. Each
// call is priced at its own model (the server's when the event names
// none); a call of a model the table does not price leaves the run's cost
// out.
func (p *projector) usageSummary(seq int64, run string, v event.Usage) []frame {
	u := p.usage[run]
	if u == nil {
		u = &runUsage{priced: true}
		p.usage[run] = u
	}
	u.prompt += v.PromptTokens
	u.completion += v.CompletionTokens
	total := v.TotalTokens
	if total == 0 {
		total = v.PromptTokens + v.CompletionTokens
	}
	u.total += total
	model := v.Model
	if model == "" {
		model = p.model
	}
	c, ok := p.prices.cost(model, v.PromptTokens, v.CompletionTokens)
	u.cost += c
	u.priced = u.priced && ok
	d := ag2api.UsageSummaryData{ChatID: p.chat, PromptTokens: int(u.prompt), CompletionTokens: int(u.completion),
		TotalTokens: int(u.total), Seq: int(seq)}
	if u.priced {
		d.Cost = new(math.Round(u.cost*1e6) / 1e6)
	}
	return []frame{{seq: seq, msg: ag2api.NewUsageSummary(d)}}
}

func (p *projector) setPending(id string, k kind, seq int64) {
	p.mu.Lock()
	p.pending[id] = pend{k: k, seq: seq}
	p.mu.Unlock()
}

func (p *projector) clearPending(id string) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// pendingKind is the kind of the request id names, or 0 when none waits.
func (p *projector) pendingKind(id string) kind {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending[id].k
}

// latestPending is the most recently asked request still pending, if any.
func (p *projector) latestPending() (string, kind, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, best := "", pend{}
	for k, v := range p.pending {
		if v.seq > best.seq || v.seq == best.seq && k > id {
			id, best = k, v
		}
	}
	return id, best.k, id != ""
}

// artifactPayload is the current payload of the UI request id names.
func (p *projector) artifactPayload(id string) (json.RawMessage, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.artifacts[id]
	if a == nil {
		return nil, false
	}
	return a.payload, true
}

// posting runs post with the projection of user messages held, and marks
// the message it posted as this socket's own, which is not echoed to it.
func (p *projector) posting(post func() (string, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := post()
	if err == nil && id != "" {
		p.own[id] = true
	}
	return err
}

// completedReason maps a run.completed reason onto chat.run_complete's.
func completedReason(r string) string {
	switch r {
	case "max_rounds", "max_turns", "max_steps":
		return "max_rounds"
	case "terminated", "termination", "terminate":
		return "terminated"
	}
	return "completed"
}

// failureCode maps a run.failed code onto chat.error's error_code.
func failureCode(c string) string {
	switch c {
	case event.CodeStoreError:
		return codePersistence
	case event.CodeToolError:
		return codeTool
	case event.CodeModelError, event.CodeInterrupted:
		return codeTransport
	}
	return codeAgentInit
}

// approvalPrompt shows what will run and the answers the request takes.
func approvalPrompt(v event.ToolApprovalRequested) string {
	var what string
	switch {
	case v.Patch != "":
		what = "The agent wants to apply this patch:\n" + v.Patch
	case len(v.Command) > 0:
		what = "The agent wants to run: " + strings.Join(v.Command, " ")
		var a struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(v.Arguments, &a) == nil && a.Command != "" {
			what = "The agent wants to run: " + a.Command
		}
	default:
		what = fmt.Sprintf("The agent wants to call %s with %s", v.Name, string(v.Arguments))
	}
	if v.Reason != "" {
		what += "\n(" + v.Reason + ")"
	}
	return what + "\nAnswer approve (or yes, y), approve always, deny (or no, n), or deny and stop."
}

func runComplete(chat string, seq int64, reason string) ag2api.Outbound {
	return ag2api.NewRunComplete(ag2api.RunCompleteData{ChatID: chat, Reason: reason, Seq: int(seq)})
}

// chatError is a chat.error; seq 0 leaves seq out.
func chatError(chat string, seq int64, code, msg string, details map[string]any, recoverable bool) ag2api.Outbound {
	d := ag2api.ChatErrorData{ChatID: new(chat), Message: msg, ErrorCode: new(code), Recoverable: new(recoverable)}
	if seq > 0 {
		d.Seq = new(int(seq))
	}
	if details != nil {
		d.Details, _ = json.Marshal(details)
	}
	return ag2api.NewChatError(d)
}

var _ protocol.Projector[frame] = (*projector)(nil)
