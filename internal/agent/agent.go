// Package agent runs agents: the ReAct loop that calls the model with the
// thread's history and the tools on offer, streams its output as canonical
// events, runs the tools it calls (asking a person first where the approval
// policy says so) and feeds the results back until the model answers or the
// step limit is reached.
//
// The agent knows no wire protocol and no store: it writes events to a
// Journal and receives people's answers (approvals, input) as Commands.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/tools"
)

// Journal is a thread's log as a run sees it.
type Journal interface {
	// Append commits events to the thread (and publishes them).
	Append(ctx context.Context, events ...event.Event) ([]event.Event, error)
	// History returns the thread's conversation events (store.Log.History).
	History(ctx context.Context) ([]event.Event, error)
}

// Toolbox is the set of tools a run may offer the model.
type Toolbox interface {
	Get(name string) (tools.Tool, bool)
	Specs() []tools.Spec
}

// Policy is the approval policy (tools.Policy): it judges a classified
// call, given the thread's approve-always memory.
type Policy interface {
	Decide(c tools.Class, remembered func(key string) bool) tools.Verdict
}

// CommandKind says what a Command answers.
type CommandKind int

// Command kinds.
const (
	CommandApproval CommandKind = iota + 1 // answers tool.approval.requested
	CommandInput                           // answers input.requested
	CommandUI                              // answers ui.requested
)

// Command is a person's answer, routed to the run that waits for it.
type Command struct {
	Kind CommandKind
	// ID is the call id (approvals) or request id (input, UI).
	ID       string
	Decision event.Decision
	// Text is the input text, or the message to the model on a denial.
	Text string
	// Data is a UI component's answer.
	Data json.RawMessage
}

// Config configures an Agent.
type Config struct {
	Model llm.Model
	Tools Toolbox
	// Policy is the approval policy; nil runs every call (full-auto).
	Policy Policy
	// MaxSteps caps the model calls of one run (default 10).
	MaxSteps int
	// System is the system prompt.
	System string
	// Name is the agent's name in events (default "assistant").
	Name string
	// MaxResultBytes caps a tool result as the model and the log see it
	// (default 64 KiB).
	MaxResultBytes int
	Logger         *slog.Logger
}

// Agent runs the ReAct loop. It is safe for concurrent runs.
type Agent struct {
	cfg Config
}

// New returns an Agent.
func New(cfg Config) *Agent {
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 10
	}
	if cfg.Name == "" {
		cfg.Name = "assistant"
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Policy == nil {
		cfg.Policy = tools.PolicyFullAuto
	}
	return &Agent{cfg: cfg}
}

// Spec identifies one run.
type Spec struct {
	Thread string
	Run    string
	// Input is the user text that started the run (for run.started).
	Input string
	// Interactive says a person can answer approvals and input requests for
	// this run. Runs started over protocols that cannot carry them
	// (agentchat, threads) are not: a call that would need approval is not
	// run, and the user is told why in a system message.
	Interactive bool
}

// errStop ends a run early: a person denied a call and stopped the run.
var errStop = errors.New("stopped by a denial")

// Run executes one run to its end and writes every event of it, ending with
// exactly one of run.completed, run.failed or run.cancelled. The user's
// message must already be in the journal. Cancelling ctx cancels the run
// (model stream and running tools). Run returns an error only when the
// journal failed, in which case the run's end may be missing from the log.
func (a *Agent) Run(ctx context.Context, spec Spec, j Journal, inbox <-chan Command) error {
	em := newEmitter(ctx, j, spec.Thread, spec.Run)
	w := newWaiters(inbox)
	pumpDone := make(chan struct{})
	pumpCtx, stopPump := context.WithCancel(ctx)
	go func() {
		defer close(pumpDone)
		w.pump(pumpCtx)
	}()
	defer func() {
		stopPump()
		<-pumpDone
	}()

	r := &run{a: a, spec: spec, em: em, w: w, log: a.cfg.Logger.With("thread", spec.Thread, "run", spec.Run)}
	r.execute(ctx)
	return em.close()
}

// run is the state of one run.
type run struct {
	a          *Agent
	spec       Spec
	em         *emitter
	w          *waiters
	log        *slog.Logger
	msgs       []llm.Message
	remembered map[string]bool
	lastReply  string
}

func (r *run) emit(p event.Payload) { _ = r.em.emit(p) }

func (r *run) execute(ctx context.Context) {
	r.emit(event.RunStarted{Strategy: "react", Agent: r.a.cfg.Name, Input: r.spec.Input})
	hist, err := r.em.j.History(ctx)
	if err != nil {
		r.end(ctx, fmt.Errorf("read history: %w", err), event.CodeInternal)
		return
	}
	r.msgs = Transcript(hist)
	r.remembered = rememberedKeys(hist)

	for step := 0; ; step++ {
		if step == r.a.cfg.MaxSteps {
			r.emit(event.RunFailed{Code: event.CodeStepLimit, Message: fmt.Sprintf("The agent reached its limit of %d model calls without a final answer.", r.a.cfg.MaxSteps)})
			return
		}
		turn, err := r.think(ctx)
		if err != nil {
			r.end(ctx, fmt.Errorf("model error: %w", err), event.CodeModelError)
			return
		}
		r.msgs = append(r.msgs, turn)
		if turn.Content != "" {
			r.lastReply = turn.Content
		}
		if len(turn.ToolCalls) == 0 {
			r.emit(event.RunCompleted{Reason: "final_answer", Reply: r.lastReply})
			return
		}
		if err := r.act(ctx, turn.ToolCalls); err != nil {
			r.end(ctx, err, event.CodeToolError)
			return
		}
	}
}

// end writes the run's last event for err: cancelled when ctx is done (or a
// person stopped the run), else failed with code.
func (r *run) end(ctx context.Context, err error, code string) {
	switch {
	case errors.Is(err, errStop):
		r.emit(event.RunCancelled{Reason: event.CodeDenied})
	case ctx.Err() != nil:
		r.emit(event.RunCancelled{Reason: "cancelled"})
	default:
		r.log.Warn("run failed", "err", err)
		r.emit(event.RunFailed{Code: code, Message: err.Error()})
	}
}

// think makes one model call and streams it into events. It returns the
// assistant turn as the model will see it in later calls.
func (r *run) think(ctx context.Context) (llm.Message, error) {
	r.emit(event.NodeEntered{Node: "think"})
	var specs []llm.ToolSpec
	for _, s := range r.a.cfg.Tools.Specs() {
		specs = append(specs, llm.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.InputSchema})
	}
	turn, err := r.stream(ctx, llm.Request{System: r.a.cfg.System, Messages: r.msgs, Tools: specs}, "")
	exit := event.NodeExited{Node: "think"}
	if err != nil {
		exit.Error = err.Error()
	}
	r.emit(exit)
	return turn, err
}

// stream runs one model call, emitting message, reasoning, tool call and
// usage events. purpose marks the message (see event.PurposeExplanation).
func (r *run) stream(ctx context.Context, req llm.Request, purpose string) (llm.Message, error) {
	var (
		text      strings.Builder
		msgID     string
		msgDone   bool
		reasonID  string
		reasoning strings.Builder
		signature string
		started   time.Time
		calls     []llm.ToolCall
		callIDs   = map[int]string{}
		names     = map[int]string{}
		usage     []llm.Usage
		finished  bool
		turn      = llm.Message{Role: llm.RoleAssistant}
	)
	endReasoning := func() {
		if reasonID != "" {
			r.emit(event.ReasoningCompleted{ReasoningID: reasonID, Text: reasoning.String(), Signature: signature,
				DurationMS: time.Since(started).Milliseconds()})
			turn.Reasoning += reasoning.String()
			reasonID, signature = "", ""
			reasoning.Reset()
		}
	}
	endMessage := func() {
		if msgID != "" && !msgDone {
			msgDone = true
			r.emit(event.MessageCompleted{MessageID: msgID, Role: event.RoleAssistant, Agent: r.a.cfg.Name, Text: text.String(), Purpose: purpose})
		}
	}
	var streamErr error
	for ch, err := range r.a.cfg.Model.Stream(ctx, req) {
		if err != nil {
			streamErr = err
			break
		}
		switch ch.Type {
		case llm.ChunkText:
			endReasoning()
			if msgID == "" {
				msgID = event.NewID()
				r.emit(event.MessageStarted{MessageID: msgID, Role: event.RoleAssistant, Agent: r.a.cfg.Name, Purpose: purpose})
			}
			if ch.Text != "" {
				text.WriteString(ch.Text)
				r.emit(event.MessageDelta{MessageID: msgID, Text: ch.Text})
			}
		case llm.ChunkReasoning:
			if reasonID == "" {
				reasonID, started = event.NewID(), time.Now()
			}
			reasoning.WriteString(ch.Text)
			r.emit(event.ReasoningDelta{ReasoningID: reasonID, Text: ch.Text})
		case llm.ChunkReasoningSignature:
			turn.ReasoningSignature = ch.Signature
			if reasonID != "" {
				signature = ch.Signature
			} else {
				r.emit(event.ReasoningCompleted{ReasoningID: event.NewID(), Signature: ch.Signature})
			}
		case llm.ChunkToolStart:
			endReasoning()
			endMessage()
			id := ch.CallID
			if id == "" {
				id = "call_" + event.NewID()
			}
			callIDs[ch.Index], names[ch.Index] = id, ch.Name
			r.emit(event.ToolCallStarted{CallID: id, Name: ch.Name})
		case llm.ChunkToolDelta:
			if id, ok := callIDs[ch.Index]; ok && ch.Arguments != "" {
				r.emit(event.ToolCallDelta{CallID: id, ArgumentsDelta: ch.Arguments})
			}
		case llm.ChunkToolDone:
			id, ok := callIDs[ch.Index]
			if !ok {
				id = ch.CallID
				if id == "" {
					id = "call_" + event.NewID()
				}
				r.emit(event.ToolCallStarted{CallID: id, Name: ch.Name})
			}
			name := ch.Name
			if name == "" {
				name = names[ch.Index]
			}
			args := validJSON(ch.Arguments)
			calls = append(calls, llm.ToolCall{ID: id, Name: name, Arguments: string(args)})
			r.emit(event.ToolCallCompleted{CallID: id, Name: name, Arguments: args})
		case llm.ChunkUsage:
			// Reported after the turn's output, which is closed first.
			usage = append(usage, ch.Usage)
		case llm.ChunkFinish:
			finished = true
		}
	}
	endReasoning()
	endMessage()
	for _, u := range usage {
		r.emit(event.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.Total()})
	}
	turn.Content = text.String()
	turn.ToolCalls = calls
	if streamErr == nil && ctx.Err() != nil {
		streamErr = ctx.Err()
	}
	if streamErr == nil && !finished {
		streamErr = errors.New("the model's stream ended without finishing")
	}
	return turn, streamErr
}
